"""Writes the text fixtures of `worker/tests/text_parity.rs`: a byte-level BPE and a
Unigram `tokenizer.json` trained with Hugging Face `tokenizers` on the committed sentiment
test sentences (small vocabularies, so the files stay small), a tiny ONNX classifier
that takes `input_ids`, `attention_mask` and `token_type_ids`, and the reference ids and
logits Python computes for sample sentences (with token_type_ids zeros, as BERT-family
servers feed one-segment inputs).

    python3 -m venv .deps/venv
    .deps/venv/bin/pip install tokenizers==0.23.3 onnx==1.23.2 onnxruntime==1.31.1 numpy
    .deps/venv/bin/python worker/tests/data/text/make_reference.py
"""

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import tokenizers
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
CORPUS = ROOT / "models" / "data" / "sentiment" / "test.tsv"

SAMPLES = [
    "those who don't like it are ipod lovers and are in denial.",
    "A warm, funny and quietly devastating film; see it twice!",
    "Naïve café owners serve crème brûlée — 10/10 would return :)",
    "@anonymous ur weather's finally cooling off~San Diego? xoxo",
    "the plot is thin , the acting is wooden , and the ending drags on and on .",
    "Ünïcödé and emoji 🙂 survive tokenisation",
]


def sentences():
    lines = CORPUS.read_text(encoding="utf-8").splitlines()[1:]
    return [line.split("\t", 2)[2] for line in lines]


def bpe():
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<s>", "<pad>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(sentences(), trainer)
    return tok


def unigram():
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    trainer = trainers.UnigramTrainer(vocab_size=400, special_tokens=["<pad>", "<unk>", "[CLS]", "[SEP]"],
                                      unk_token="<unk>")
    tok.train_from_iterator(sentences(), trainer)
    return tok


def tiny_model(vocab):
    """logits[b] = sum_s mask[b,s] * (E[ids[b,s]] + T[type[b,s]]): a bag of embeddings in
    which token types count, so feeding anything but zeros changes the answer."""
    rng = np.random.default_rng(3)
    emb = numpy_helper.from_array(rng.normal(0, 1, (vocab, 2)).astype(np.float32), "E")
    types = numpy_helper.from_array(np.array([[0.0, 0.0], [5.0, -5.0]], np.float32), "T")
    nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["e"]),
        helper.make_node("Gather", ["T", "token_type_ids"], ["t"]),
        helper.make_node("Add", ["e", "t"], ["et"]),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["m", "axis"], ["m3"]),
        helper.make_node("Mul", ["et", "m3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["logits"], keepdims=0),
    ]
    ids = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
    graph = helper.make_graph(
        nodes, "tiny_text", [ids("input_ids"), ids("attention_mask"), ids("token_type_ids")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])],
        initializer=[emb, types, numpy_helper.from_array(np.array([-1], np.int64), "axis"),
                     numpy_helper.from_array(np.array([1], np.int64), "axis1")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    fixtures = {"bpe": bpe(), "unigram": unigram()}
    for name, tok in fixtures.items():
        tok.save(str(HERE / f"{name}.json"))
    wordpiece = Tokenizer.from_file(str(ROOT / "models" / "sentiment" / "tokenizer.json"))
    wordpiece.no_padding()
    fixtures["wordpiece"] = wordpiece
    model = tiny_model(fixtures["bpe"].get_vocab_size(with_added_tokens=True))
    onnx.save(model, str(HERE / "tiny_text.onnx"))
    session = ort.InferenceSession(str(HERE / "tiny_text.onnx"), providers=["CPUExecutionProvider"])
    reference = {"tokenizers": tokenizers.__version__, "onnxruntime": ort.__version__,
                 "samples": SAMPLES, "ids": {}, "logits": []}
    for name, tok in fixtures.items():
        reference["ids"][name] = [tok.encode(s).ids for s in SAMPLES]
    for ids in reference["ids"]["bpe"]:
        row = np.array([ids], np.int64)
        logits = session.run(["logits"], {"input_ids": row, "attention_mask": np.ones_like(row),
                                           "token_type_ids": np.zeros_like(row)})[0]
        reference["logits"].append([float(x) for x in logits[0]])
    (HERE / "reference.json").write_text(json.dumps(reference, indent=1, ensure_ascii=False) + "\n",
                                         encoding="utf-8")
    for name, ids in reference["ids"].items():
        print(name, [len(i) for i in ids])


if __name__ == "__main__":
    main()
