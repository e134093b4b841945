"""Builds models/zoo.toml, the recorded predictions, the committed test data and the
README samples from the trained ONNX files. Run it after fashion.py and sentiment.py:

    bash models/train/setup.sh
    .deps/train-venv/bin/python models/train/manifest.py
    cargo run -p cocktail -- profile        # measures latency, rewrites the profiles

Every model is evaluated with Python's ONNX Runtime on its task's full committed test
set; the Rust test `zoo_reproduces_manifest` must reproduce these numbers. A model's
existing [models.profile] is kept while its sha256 is unchanged.
"""

import gzip
import hashlib
import importlib.util
import json
import shutil
import tomllib
from pathlib import Path

import numpy as np
import onnxruntime as ort
from PIL import Image

MODELS = Path(__file__).resolve().parents[1]
OUT = MODELS / "train" / "out"
FASHION_SRC = Path("/usr/share/datasets/fashion-mnist")

FASHION_LABELS = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                  "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
SENTIMENT_LABELS = ["negative", "positive"]

TASKS = {
    "fashion": {
        "labels": FASHION_LABELS,
        "test_set": {"format": "idx",
                     "images": "data/fashion/t10k-images-idx3-ubyte.gz",
                     "labels": "data/fashion/t10k-labels-idx1-ubyte.gz"},
        "predictions": "predictions/fashion.tsv.gz",
    },
    "sentiment": {
        "labels": SENTIMENT_LABELS,
        "test_set": {"format": "tsv", "path": "data/sentiment/test.tsv"},
        "predictions": "predictions/sentiment.tsv.gz",
    },
}


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def fashion_test():
    dst = MODELS / "data" / "fashion"
    dst.mkdir(parents=True, exist_ok=True)
    for name in ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]:
        if not (dst / name).exists():
            shutil.copyfile(FASHION_SRC / name, dst / name)
    images = read_idx(dst / "t10k-images-idx3-ubyte.gz")
    labels = read_idx(dst / "t10k-labels-idx1-ubyte.gz").astype(np.int64)
    return images, labels


def sentiment_test():
    lines = (MODELS / "data" / "sentiment" / "test.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "label\tsource\ttext", lines[0]
    rows = [line.split("\t", 2) for line in lines[1:]]
    return [r[2] for r in rows], np.array([int(r[0]) for r in rows], dtype=np.int64)


def training_module(name):
    """Imports a training script (fashion.py, sentiment.py) without running it."""
    spec = importlib.util.spec_from_file_location(name, MODELS / "train" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_samples(images, labels, texts, text_labels):
    png_dir = MODELS / "samples" / "fashion"
    png_dir.mkdir(parents=True, exist_ok=True)
    pngs = []
    for cls, name in enumerate(FASHION_LABELS):
        i = int(np.flatnonzero(labels == cls)[0])
        slug = name.lower().replace("/", "-").replace(" ", "-")
        path = png_dir / f"{i:04d}_{slug}.png"
        Image.fromarray(images[i], mode="L").save(path)
        pngs.append((i, path))
    picks = [i for i, t in enumerate(texts) if 30 <= len(t) <= 120]
    chosen = [i for i in picks if text_labels[i] == 1][:3] + [i for i in picks if text_labels[i] == 0][:3]
    with open(MODELS / "samples" / "sentiment.tsv", "w", encoding="utf-8") as f:
        f.write("label\ttext\n")
        for i in chosen:
            f.write(f"{SENTIMENT_LABELS[text_labels[i]]}\t{texts[i]}\n")
    write_preprocessing_fixture(pngs, [texts[i] for i in chosen])


def write_preprocessing_fixture(pngs, sentences):
    """The tensors the training pipelines themselves make of the samples, so a Rust test
    can prove that the worker's preprocessing is the same (`worker/tests/preprocess.rs`)."""
    fashion = training_module("fashion")
    test_images, _ = fashion.load_split("t10k")
    sentiment = training_module("sentiment")
    ids = sentiment.tokenize(sentiment.make_tokenizer(), sentences)
    fixture = {
        "fashion": [{"png": str(path.relative_to(MODELS)), "tensor": test_images[i].ravel().tolist()}
                    for i, path in pngs],
        "sentiment": [{"text": t, "input_ids": e.tolist()} for t, e in zip(sentences, ids)],
    }
    (MODELS / "samples" / "preprocessed.json").write_text(json.dumps(fixture), encoding="utf-8")


def fashion_batches(batch=500):
    """The test images exactly as training normalised them (fashion.load_split)."""
    x, _ = training_module("fashion").load_split("t10k")
    for start in range(0, len(x), batch):
        yield {"image": x[start:start + batch]}


def sentiment_batches(texts, batch=64):
    """The test sentences tokenised and padded by the training code itself."""
    sentiment = training_module("sentiment")
    tok = sentiment.make_tokenizer()
    for start in range(0, len(texts), batch):
        input_ids, mask = sentiment.pad(sentiment.tokenize(tok, texts[start:start + batch]))
        yield {"input_ids": input_ids, "attention_mask": mask}


def evaluate(path, batches):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    probs = []
    for feed in batches:
        logits = sess.run(["logits"], feed)[0].astype(np.float64)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs.append(e / e.sum(axis=1, keepdims=True))
    inputs = [{"name": i.name,
               "dtype": {"tensor(float)": "float32", "tensor(int64)": "int64"}[i.type],
               "shape": [d if isinstance(d, int) else -1 for d in i.shape]}
              for i in sess.get_inputs()]
    return np.concatenate(probs), inputs


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def toml_value(v):
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    return str(v)


def write_manifest(entries, old_profiles):
    lines = ["# The Cocktail-rs model zoo. Written by models/train/manifest.py; the",
             "# [models.profile] tables are measured and rewritten by `cocktail profile`.",
             "schema = 1", ""]
    for task, spec in TASKS.items():
        lines.append(f"[tasks.{task}]")
        for key, value in spec.items():
            lines.append(f"{key} = {toml_value(value)}")
        lines.append("")
    for e in entries:
        lines.append("[[models]]")
        for key in ["name", "task", "file", "sha256", "arch", "description", "params",
                    "train_examples", "epochs", "accuracy", "class_accuracy", "output"]:
            lines.append(f"{key} = {toml_value(e[key])}")
        lines.append(f"inputs = {toml_value(e['inputs'])}")
        lines.append(f"preprocess = {toml_value(e['preprocess'])}")
        profile = old_profiles.get((e["name"], e["sha256"]))
        if profile:
            lines.append("")
            lines.append("[models.profile]")
            for key, value in profile.items():
                lines.append(f"{key} = {toml_value(value)}")
        lines.append("")
    (MODELS / "zoo.toml").write_text("\n".join(lines), encoding="utf-8")


def write_predictions(task, names, probs, labels):
    path = MODELS / TASKS[task]["predictions"]
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ["label"] + [c for n in names for c in (n, f"{n}.p")]
    # mtime=0 keeps the gzip bytes reproducible.
    with gzip.GzipFile(path, "wb", mtime=0) as raw:
        raw.write(("\t".join(header) + "\n").encode())
        for i, label in enumerate(labels):
            row = [str(label)]
            for p in probs:
                cls = int(np.argmax(p[i]))
                row += [str(cls), f"{p[i, cls]:.4f}"]
            raw.write(("\t".join(row) + "\n").encode())


def main():
    old_profiles = {}
    if (MODELS / "zoo.toml").exists():
        old = tomllib.loads((MODELS / "zoo.toml").read_text(encoding="utf-8"))
        old_profiles = {(m["name"], m["sha256"]): m["profile"]
                        for m in old.get("models", []) if "profile" in m}

    images, fashion_labels = fashion_test()
    texts, sentiment_labels = sentiment_test()
    write_samples(images, fashion_labels, texts, sentiment_labels)
    fashion, sentiment = training_module("fashion"), training_module("sentiment")
    data = {
        "fashion": (fashion_batches, fashion_labels,
                    {"kind": "image", "colour": "grey", "input_size": [1, 28, 28],
                     "interpolation": "bilinear", "crop_pct": 1.0, "crop_mode": "squash",
                     "mean": [fashion.MEAN], "std": [fashion.STD],
                     "layout": "nchw", "dtype": "float32"}),
        "sentiment": (lambda: sentiment_batches(texts), sentiment_labels,
                      {"kind": "text", "tokenizer": "sentiment/tokenizer.json",
                       "max_tokens": sentiment.MAX_LEN}),
    }

    entries = []
    for task, (batches, labels, preprocess) in data.items():
        meta = json.loads((OUT / f"{task}_models.json").read_text())
        names, all_probs = [], []
        for m in meta:
            path = MODELS / task / f"{m['name']}.onnx"
            probs, inputs = evaluate(path, batches())
            pred = probs.argmax(axis=1)
            classes = len(TASKS[task]["labels"])
            class_acc = [round(float((pred[labels == c] == c).mean()), 6) for c in range(classes)]
            accuracy = round(float((pred == labels).mean()), 6)
            print(f"{task:9s} {m['name']:14s} params={m['params']:>9,d} acc={accuracy:.4f}")
            entries.append({
                "name": m["name"], "task": task, "file": f"{task}/{m['name']}.onnx",
                "sha256": sha256(path), "arch": m["arch"], "description": m["description"],
                "params": int(m["params"]), "train_examples": int(m["train_examples"]),
                "epochs": int(m["epochs"]), "accuracy": accuracy, "class_accuracy": class_acc,
                "output": "logits", "inputs": inputs, "preprocess": preprocess,
            })
            names.append(m["name"])
            all_probs.append(probs)
        write_predictions(task, names, all_probs, labels)
    write_manifest(entries, old_profiles)
    print(f"wrote {MODELS / 'zoo.toml'} with {len(entries)} models")


if __name__ == "__main__":
    main()
