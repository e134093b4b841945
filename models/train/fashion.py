#!/usr/bin/env python3
"""Rebuilds the Fashion-MNIST classifier zoo used by the Cocktail ensemble server.

Usage (from anywhere):
    .deps/train-venv/bin/python models/train/fashion.py            # rebuild every model
    .deps/train-venv/bin/python models/train/fashion.py --only cnn_med
    .deps/train-venv/bin/python models/train/fashion.py --list

Outputs:
    models/fashion/<name>.onnx            one self-contained ONNX file per model (opset 17)
    models/fashion/models.tsv             what `cocktail zoo add` takes for each model, and
    models/fashion/config.json            the class names and preprocessing (timm's format),
                                          for models/build-zoo.sh (zoo_export.py)
    models/data/fashion/                  the test set, Debian's t10k IDX files
    models/train/out/fashion_models.json  metadata, smallest model first

ONNX contract (the Rust server depends on it exactly):
    input  `image`  float32 [batch, 1, 28, 28], x = (pixel/255 - 0.2860) / 0.3530
    output `logits` float32 [batch, 10], raw logits (no softmax)

The zoo is deliberately diverse: architectures from a 7.9k-parameter linear model to a
multi-million-parameter VGG-style CNN, trained on different fixed-seed subsets (some of them
class-skewed) for different numbers of epochs, so that accuracy, latency and per-class
strengths all differ.  The last four models (cnn_bag_a, cnn_wide, cnn_k5, cnn_shift) are
about as accurate and as fast as cnn_med but make different errors (bagging, different
architectures, augmentation, label smoothing), so that a majority vote of them beats it.
Every random choice is seeded; each model has its own seed and is
rebuilt identically by a full run or by `--only NAME` (on the same machine / thread count).

Note on speed: Debian's torch 1.13 links the reference BLAS, so nn.Linear is very slow on
CPU.  Linear layers here run as 1x1 convolutions (oneDNN) while training and evaluating in
torch, and as plain Gemm when exported; the weights are the same nn.Linear parameters.
"""
import argparse
import gzip
import json
import os
import random
import shutil
import sys
import time

# The machine is shared: with busy-waiting OpenMP threads, torch slows down by 10x or more
# when the cores are oversubscribed.  Must be set before torch (libgomp) is loaded.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_export  # noqa: E402
from idx import read_idx  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA_DIR = "/usr/share/datasets/fashion-mnist"
ONNX_DIR = os.path.join(ROOT, "models", "fashion")
META_PATH = os.path.join(ROOT, "models", "train", "out", "fashion_models.json")
MEAN, STD = 0.2860, 0.3530
BG = (0.0 - MEAN) / STD  # normalised value of a black (background) pixel
CLASSES = ["t-shirt/top", "trouser", "pullover", "dress", "coat",
           "sandal", "shirt", "sneaker", "bag", "ankle boot"]
# The class names in the zoo's manifest.
LABELS = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
          "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
TEST_DIR = os.path.join(ROOT, "models", "data", "fashion")
OPSET = 17
THREADS = 2


# ----------------------------------------------------------------------------- data

def load_split(split):
    x = read_idx(os.path.join(DATA_DIR, f"{split}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(DATA_DIR, f"{split}-labels-idx1-ubyte.gz"))
    assert x.shape[1:] == (28, 28) and len(x) == len(y)
    x = ((x.astype(np.float32) / 255.0 - MEAN) / STD)[:, None, :, :]
    return np.ascontiguousarray(x, dtype=np.float32), y.astype(np.int64)


def select_subset(y, n, seed, class_weights=None, bootstrap=False):
    """Indices of a fixed-seed training subset of n examples.

    Without class_weights: a uniformly random subset (n == len(y) means all of it).
    With class_weights: examples are drawn without replacement with probability
    proportional to the weight of their class, which skews the class mix.
    With bootstrap: n examples drawn uniformly *with* replacement (bagging); about 37% of
    the images are left out and others appear several times.
    """
    rng = np.random.RandomState(seed)
    if bootstrap:
        assert class_weights is None
        return np.sort(rng.randint(0, len(y), size=n))
    if class_weights is None:
        return np.sort(rng.permutation(len(y))[:n])
    w = np.asarray(class_weights, dtype=np.float64)[y]
    return np.sort(rng.choice(len(y), size=n, replace=False, p=w / w.sum()))


def augment(x, gen, crop, flip):
    """Random shift (pad `crop` with background, crop 28x28) and horizontal flip."""
    b = x.shape[0]
    if crop:
        xp = F.pad(x, (crop, crop, crop, crop), value=BG)
        dy = torch.randint(0, 2 * crop + 1, (b,), generator=gen)
        dx = torch.randint(0, 2 * crop + 1, (b,), generator=gen)
        ar = torch.arange(28)
        rows = (dy[:, None] + ar)[:, :, None]
        cols = (dx[:, None] + ar)[:, None, :]
        x = xp[torch.arange(b)[:, None, None], 0, rows, cols].unsqueeze(1)
    if flip:
        m = torch.rand(b, generator=gen) < 0.5
        x = torch.where(m[:, None, None, None], x.flip(3), x)
    return x


# ----------------------------------------------------------------------------- layers

class Linear(nn.Linear):
    """nn.Linear that trains through oneDNN (as a 1x1 conv) and exports as Gemm."""

    def forward(self, x):
        if torch.onnx.is_in_onnx_export():
            return F.linear(x, self.weight, self.bias)
        return F.conv2d(x[:, :, None, None], self.weight[:, :, None, None], self.bias).flatten(1)


def conv_bn(cin, cout, stride=1, groups=1, k=3):
    return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


class ResBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(*conv_bn(cin, cout, stride),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.body(x) + self.short(x))


def mlp(sizes, dropout=0.0):
    layers = [nn.Flatten()]
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU(inplace=True))
            if dropout:
                layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


def simple_cnn(c1, c2, fc, dropout=0.0, bn=False):
    """conv(c1)-pool-conv(c2)-pool-fc(fc)-fc(10), 'LeNet-like' with 3x3 convs."""
    def block(a, b):
        if bn:
            return conv_bn(a, b) + [nn.MaxPool2d(2)]
        return [nn.Conv2d(a, b, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2)]
    return nn.Sequential(*block(1, c1), *block(c1, c2), nn.Flatten(),
                         Linear(c2 * 49, fc), nn.ReLU(inplace=True), nn.Dropout(dropout),
                         Linear(fc, 10))


def dwsep_net():
    """MobileNet-style: stem conv, then depthwise 3x3 + pointwise 1x1 blocks, global pool."""
    def dw(cin, cout, stride):
        return conv_bn(cin, cin, stride, groups=cin) + conv_bn(cin, cout, k=1)
    return nn.Sequential(*conv_bn(1, 16), *dw(16, 32, 2), *dw(32, 64, 2), *dw(64, 128, 1),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), Linear(128, 10))


def resnet():
    return nn.Sequential(*conv_bn(1, 16), ResBlock(16, 32, 2), ResBlock(32, 64, 2),
                         ResBlock(64, 64, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         Linear(64, 10))


def lenet5():
    """LeCun's LeNet-5 layout (5x5 convs, average pooling, tanh) adapted to 28x28 inputs."""
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.Tanh(), nn.AvgPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2), nn.Flatten(),
                         Linear(16 * 25, 120), nn.Tanh(), Linear(120, 84), nn.Tanh(),
                         Linear(84, 10))


def vgg():
    return nn.Sequential(*conv_bn(1, 64), *conv_bn(64, 64), nn.MaxPool2d(2),
                         *conv_bn(64, 128), *conv_bn(128, 128), nn.MaxPool2d(2),
                         *conv_bn(128, 256), *conv_bn(256, 256), nn.Flatten(),
                         Linear(256 * 49, 128), nn.ReLU(inplace=True), nn.Dropout(0.5),
                         Linear(128, 10))


def wide_shallow(c, k, fc, dropout=0.0):
    """One wide k x k conv layer (with batch norm), 4x4 max pooling, then fc(fc)-fc(10)."""
    return nn.Sequential(*conv_bn(1, c, k=k), nn.MaxPool2d(4), nn.Flatten(),
                         Linear(c * 49, fc), nn.ReLU(inplace=True), nn.Dropout(dropout),
                         Linear(fc, 10))


def cnn_k5(c1, c2, fc, dropout=0.0):
    """Two 5x5 conv layers with batch norm and max pooling, then fc(fc)-fc(10)."""
    return nn.Sequential(*conv_bn(1, c1, k=5), nn.MaxPool2d(2), *conv_bn(c1, c2, k=5),
                         nn.MaxPool2d(2), nn.Flatten(),
                         Linear(c2 * 49, fc), nn.ReLU(inplace=True), nn.Dropout(dropout),
                         Linear(fc, 10))


# ----------------------------------------------------------------------------- the zoo
# Each entry: build (constructor), arch, description, n (training examples), epochs, seed,
# lr (peak, one-cycle), optional class_weights (skewed subset), bootstrap (draw the n
# examples with replacement: bagging), loss_weights (per-class weights in the cross-entropy),
# crop/flip augmentation, bs (batch size), smooth (label smoothing), cl (train in
# channels-last memory format; speed only).
SKEW_SHIRT = [3, 0.5, 1, 0.5, 1, 0.5, 10, 0.5, 0.5, 0.5]   # subset rich in shirts and t-shirts
SKEW_TOP = [6, 0.5, 1, 0.5, 1, 0.5, 1, 0.5, 0.5, 0.5]       # subset rich in t-shirts/tops
SKEW_FOOT = [0.5, 3, 0.5, 3, 0.5, 3, 0.5, 3, 3, 3]         # trouser, dress, shoes, bag
LOSS_PULLOVER_COAT = [1, 1, 2.5, 1, 2.5, 1, 1, 1, 1, 1]    # class weights in the loss

ZOO = [
    dict(name="linear", build=lambda: mlp([784, 10]),
         arch="linear 784->10 (softmax regression)",
         description="Multinomial logistic regression on raw pixels, trained on all 60k images.",
         n=60000, epochs=3, seed=101, lr=3e-3, bs=256),
    dict(name="mlp_tiny", build=lambda: mlp([784, 16, 10]),
         arch="mlp 784-16-10",
         description="Deliberately weak tiny MLP with 16 hidden units trained on only 1k images.",
         n=1000, epochs=3, seed=102, lr=3e-3, bs=64),
    dict(name="dwsep", build=dwsep_net,
         arch="dwsep conv16 + 3x (dw3x3 + pw1x1) 32-64-128 + gap + fc10",
         description="MobileNet-style depthwise-separable CNN with global average pooling, trained on 30k images.",
         n=30000, epochs=4, seed=103, lr=5e-3, cl=True),
    dict(name="cnn_tiny", build=lambda: simple_cnn(8, 16, 32),
         arch="cnn 2x conv8-16 + fc32",
         description="Tiny CNN trained on a 10k subset heavily skewed towards shirts and t-shirts.",
         n=10000, epochs=3, seed=104, lr=4e-3, class_weights=SKEW_SHIRT, cl=True),
    dict(name="lenet", build=lenet5,
         arch="lenet-5 conv5x5 6-16 avgpool tanh + fc120-84",
         description="Classic LeNet-5 with tanh and average pooling, trained on a 20k subset skewed towards t-shirts/tops.",
         n=20000, epochs=4, seed=105, lr=3e-3, class_weights=SKEW_TOP, cl=True),
    dict(name="mlp_small", build=lambda: mlp([784, 64, 10]),
         arch="mlp 784-64-10",
         description="Small one-hidden-layer MLP trained on a 5k subset.",
         n=5000, epochs=4, seed=106, lr=3e-3, bs=64),
    dict(name="cnn_small", build=lambda: simple_cnn(16, 32, 64),
         arch="cnn 2x conv16-32 + fc64",
         description="Small CNN trained on a 20k subset skewed towards footwear, bags, trousers and dresses.",
         n=20000, epochs=3, seed=107, lr=3e-3, class_weights=SKEW_FOOT, cl=True),
    dict(name="resnet", build=resnet,
         arch="resnet conv16 + 3 basic blocks 32-64-64 + gap + fc10",
         description="Small residual network with batch norm, trained on all 60k images with flip augmentation.",
         n=60000, epochs=7, seed=108, lr=4e-3, flip=True, cl=True),
    dict(name="mlp_med", build=lambda: mlp([784, 256, 128, 10], dropout=0.2),
         arch="mlp 784-256-128-10",
         description="Two-hidden-layer MLP with dropout trained on all 60k images.",
         n=60000, epochs=5, seed=109, lr=2e-3),
    dict(name="cnn_med", build=lambda: simple_cnn(32, 64, 128, dropout=0.3),
         arch="cnn 2x conv32-64 + fc128",
         description="Classic two-conv CNN with dropout trained on all 60k images with a loss that weights pullovers and coats 2.5x.",
         n=60000, epochs=3, seed=110, lr=2e-3, loss_weights=LOSS_PULLOVER_COAT, cl=True),
    dict(name="mlp_large", build=lambda: mlp([784, 1024, 512, 10], dropout=0.3),
         arch="mlp 784-1024-512-10",
         description="Wide two-hidden-layer MLP with dropout trained on all 60k images.",
         n=60000, epochs=3, seed=111, lr=1e-3),
    dict(name="vgg", build=vgg,
         arch="vgg conv64-64-pool-128-128-pool-256-256 + fc128",
         description="VGG-style CNN with batch norm and a large fully connected layer, trained on only a 5k subset.",
         n=5000, epochs=2, seed=112, lr=2e-3, cl=True),
    # Four members as accurate as cnn_med (~0.90) and as fast (<= ~140 us), decorrelated by
    # bagging (bootstrap resamples with their own seeds), architecture (3x3 / 5x5 kernels,
    # two layers / one wide layer), augmentation (shifts, flips) and label smoothing, so that
    # a majority vote of several of them beats cnn_med alone.  The settings of cnn_bag_a,
    # cnn_wide and cnn_k5 were checked on a fixed 5k hold-out of the training set (trained
    # on the other 55k), never on the test set; cnn_shift was added without tuning.
    dict(name="cnn_bag_a", build=lambda: simple_cnn(32, 64, 128, dropout=0.3, bn=True),
         arch="cnn 2x conv32-64 (bn) + fc128",
         description="cnn_med's layout with batch norm, trained on a bootstrap resample of the 60k images (bagging) with random shifts of up to 2 pixels.",
         n=60000, epochs=4, seed=113, lr=3e-3, bootstrap=True, crop=2, cl=True),
    dict(name="cnn_wide", build=lambda: wide_shallow(64, 5, 128, dropout=0.3),
         arch="cnn 1x conv5x5 64 (bn) + maxpool4 + fc128",
         description="Wide shallow CNN (one 5x5 conv layer with 64 channels) trained on all 60k images with horizontal flips and label smoothing 0.1.",
         n=60000, epochs=4, seed=114, lr=3e-3, flip=True, smooth=0.1, cl=True),
    dict(name="cnn_k5", build=lambda: cnn_k5(16, 32, 128, dropout=0.3),
         arch="cnn 2x conv5x5 16-32 (bn) + fc128",
         description="Narrow CNN with 5x5 kernels, trained on a bootstrap resample of the 60k images (bagging) with 1-pixel shifts and horizontal flips.",
         n=60000, epochs=5, seed=115, lr=3e-3, bootstrap=True, crop=1, flip=True, cl=True),
    dict(name="cnn_shift", build=lambda: cnn_k5(16, 32, 128, dropout=0.3),
         arch="cnn 2x conv5x5 16-32 (bn) + fc128",
         description="Same layout as cnn_k5 but another bootstrap resample, random shifts of up to 3 pixels, no flips and label smoothing 0.1.",
         n=60000, epochs=5, seed=116, lr=3e-3, bootstrap=True, crop=3, smooth=0.1, cl=True),
]

BY_NAME = {m["name"]: m for m in ZOO}


# ----------------------------------------------------------------------------- training

def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def count_params(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@torch.no_grad()
def torch_logits(model, x, bs=1000):
    model.eval()
    return torch.cat([model(torch.from_numpy(x[i:i + bs])) for i in range(0, len(x), bs)]).numpy()


def train(spec, xtr, ytr, xte, yte):
    seed = spec["seed"]
    set_seed(seed)
    model = spec["build"]()
    idx = select_subset(ytr, spec["n"], seed, spec.get("class_weights"), spec.get("bootstrap", False))
    x, y = torch.from_numpy(xtr[idx]), torch.from_numpy(ytr[idx])
    cl = spec.get("cl", False)  # channels-last is faster for the oneDNN convolutions
    if cl:
        model = model.to(memory_format=torch.channels_last)
    bs, epochs = spec.get("bs", 128), spec["epochs"]
    steps = (len(idx) + bs - 1) // bs
    opt = torch.optim.AdamW(model.parameters(), lr=spec["lr"], weight_decay=spec.get("wd", 1e-4))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=spec["lr"], total_steps=epochs * steps,
                                                pct_start=spec.get("warmup", 0.25))
    gen = torch.Generator().manual_seed(seed)
    loss_w = spec.get("loss_weights")
    loss_w = None if loss_w is None else torch.tensor(loss_w, dtype=torch.float32)
    counts = np.bincount(ytr[idx], minlength=10)
    print(f"  subset {len(idx)} examples ({len(np.unique(idx))} distinct), "
          f"class counts {counts.tolist()}", flush=True)
    t0 = time.time()
    for ep in range(epochs):
        model.train()
        perm = torch.randperm(len(idx), generator=gen)
        tot, correct = 0.0, 0
        for s in range(steps):
            b = perm[s * bs:(s + 1) * bs]
            xb, yb = x[b], y[b]
            if spec.get("crop") or spec.get("flip"):
                xb = augment(xb, gen, spec.get("crop", 0), spec.get("flip", False))
            if cl:
                xb = xb.contiguous(memory_format=torch.channels_last)
            out = model(xb)
            loss = F.cross_entropy(out, yb, weight=loss_w, label_smoothing=spec.get("smooth", 0.0))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            tot += loss.item() * len(b)
            correct += (out.argmax(1) == yb).sum().item()
        print(f"  epoch {ep + 1}/{epochs}: loss {tot / len(idx):.4f} train-acc {correct / len(idx):.4f} "
              f"({time.time() - t0:.0f}s)", flush=True)
    model = model.to(memory_format=torch.contiguous_format).eval()
    return model, len(idx), time.time() - t0


# ----------------------------------------------------------------------------- export + checks

def export(model, path):
    import onnx
    model.eval()
    dummy = torch.zeros(1, 1, 28, 28)
    tmp = path + ".tmp"
    torch.onnx.export(model, dummy, tmp, export_params=True, opset_version=OPSET,
                      do_constant_folding=True, input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    m = onnx.load(tmp)
    onnx.checker.check_model(m, full_check=True)
    os.replace(tmp, path)
    return m


def check_contract(m):
    """Asserts the ONNX contract the Rust server relies on."""
    assert [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] == [OPSET]
    inits = {i.name for i in m.graph.initializer}
    ins = [i for i in m.graph.input if i.name not in inits]
    assert len(ins) == 1 and ins[0].name == "image", [i.name for i in ins]
    assert len(m.graph.output) == 1 and m.graph.output[0].name == "logits"
    for t in m.graph.initializer:
        assert t.data_location != 1, "external data"  # 1 == TensorProto.EXTERNAL

    def shape(v):
        return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
    assert ins[0].type.tensor_type.elem_type == 1 and shape(ins[0]) == ["batch", 1, 28, 28], shape(ins[0])
    out = m.graph.output[0]
    assert out.type.tensor_type.elem_type == 1, out.type
    s = shape(out)
    assert len(s) == 2 and s[1] == 10 and isinstance(s[0], str), s


def ort_session(path, threads=1):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_logits(path, x, bs=500):
    sess = ort_session(path, threads=THREADS)
    out = [sess.run(["logits"], {"image": x[i:i + bs]})[0] for i in range(0, len(x), bs)]
    return np.concatenate(out)


def latency_us(path, x1, warmup=50, runs=300):
    return session_latency_us(ort_session(path, threads=1), x1, warmup, runs)


def session_latency_us(sess, x1, warmup=50, runs=300):
    """Median single-batch latency of an open session, in µs."""
    feed = {"image": x1}
    for _ in range(warmup):
        sess.run(["logits"], feed)
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(["logits"], feed)
        ts.append(time.perf_counter() - t)
    return float(np.median(ts) * 1e6)


def class_accuracy(pred, y):
    return [float((pred[y == c] == c).mean()) for c in range(10)]


def evaluate(spec, path, xte, yte, torch_out=None):
    logits = ort_logits(path, xte)
    assert logits.shape == (len(xte), 10) and logits.dtype == np.float32
    if torch_out is not None:
        err = float(np.abs(logits[:len(torch_out)] - torch_out).max())
        assert err < 1e-2, f"onnxruntime and torch disagree: max |diff| {err}"
    pred = logits.argmax(1)
    return dict(accuracy=float((pred == yte).mean()),
                latency_us_b1_t1=round(latency_us(path, xte[:1]), 1),
                class_accuracy=[round(a, 4) for a in class_accuracy(pred, yte)])


# ----------------------------------------------------------------------------- report

def report(meta):
    print("\n%-12s %10s %8s %8s %11s %7s %6s" % ("name", "params", "train_n", "epochs", "latency_us", "acc", "train_s"))
    for m in meta:
        ts = m.get("_train_s")
        print("%-12s %10d %8d %8d %11.1f %7.4f %6s" % (
            m["name"], m["params"], m["train_examples"], m["epochs"], m["latency_us_b1_t1"],
            m["accuracy"], "-" if ts is None else "%.0f" % ts))
    best = max(meta, key=lambda m: m["accuracy"])
    print(f"\nbest overall: {best['name']} ({best['accuracy']:.4f})")
    print("per-class winners:")
    others = 0
    for c in range(10):
        w = max(meta, key=lambda m: m["class_accuracy"][c])
        flag = "" if w is best else "   <- not the best-overall model"
        others += w is not best
        print(f"  {c} {CLASSES[c]:<12} {w['name']:<12} {w['class_accuracy'][c]:.4f} "
              f"(best overall: {best['class_accuracy'][c]:.4f}){flag}")
    print(f"classes won by a model other than {best['name']}: {others}/10")
    return others


def check_set(meta):
    """Checks the requirements on the whole set; prints and returns a list of failures."""
    fails = []
    accs = [m["accuracy"] for m in meta]
    lats = [m["latency_us_b1_t1"] for m in meta]
    params = [m["params"] for m in meta]
    if len(meta) < 10:
        fails.append(f"only {len(meta)} models (need >= 10)")
    if min(accs) > 0.80:
        fails.append(f"weakest accuracy {min(accs):.4f} > 0.80")
    if max(accs) < 0.92:
        fails.append(f"best accuracy {max(accs):.4f} < 0.92")
    if max(params) < 2_000_000:
        fails.append(f"largest model has {max(params)} params (< 2M)")
    if min(lats) >= 100:
        fails.append(f"fastest latency {min(lats):.0f} us (not tens of us)")
    if max(lats) < 2000:
        fails.append(f"slowest latency {max(lats):.0f} us (< 2 ms)")
    best = max(meta, key=lambda m: m["accuracy"])
    others = sum(max(meta, key=lambda m: m["class_accuracy"][c]) is not best for c in range(10))
    if others < 3:
        fails.append(f"only {others} classes won by a model other than the best overall")
    print("\nrequirements: " + ("all met" if not fails else "NOT MET: " + "; ".join(fails)))
    return fails


# ----------------------------------------------------------------------------- main

def export_for_zoo(rows):
    """What models/build-zoo.sh builds the zoo from: the model table, the class names and
    preprocessing, and the test set (Debian's files, copied as they are)."""
    zoo_export.write_models(ONNX_DIR, rows)
    zoo_export.write_image_config(ONNX_DIR, LABELS, [1, 28, 28], [MEAN], [STD],
                                  interpolation="bilinear", crop_pct=1.0, crop_mode="squash")
    os.makedirs(TEST_DIR, exist_ok=True)
    for name in ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]:
        if not os.path.exists(os.path.join(TEST_DIR, name)):
            shutil.copyfile(os.path.join(DATA_DIR, name), os.path.join(TEST_DIR, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", metavar="NAME", action="append",
                    help="rebuild only this model (repeatable); others keep their metadata")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    args = ap.parse_args()

    torch.set_num_threads(THREADS)
    if args.list:
        for s in ZOO:
            print(f"{s['name']:<12} {count_params(s['build']()):>9}  {s['arch']}")
        return 0
    names = args.only or [s["name"] for s in ZOO]
    for n in names:
        if n not in BY_NAME:
            sys.exit(f"unknown model {n!r}; known: {', '.join(BY_NAME)}")

    os.makedirs(ONNX_DIR, exist_ok=True)
    os.makedirs(os.path.dirname(META_PATH), exist_ok=True)
    print("loading Fashion-MNIST from", DATA_DIR, flush=True)
    xtr, ytr = load_split("train")
    xte, yte = load_split("t10k")
    print(f"  train {xtr.shape}, test {xte.shape}", flush=True)

    old = {}
    if args.only and os.path.exists(META_PATH):
        with open(META_PATH) as f:
            old = {m["name"]: m for m in json.load(f)}
    meta = {}
    t_all = time.time()
    for i, spec in enumerate(s for s in ZOO if s["name"] in names):
        print(f"\n[{i + 1}/{len(names)}] {spec['name']}: {spec['arch']} "
              f"(n={spec['n']}, epochs={spec['epochs']}, seed={spec['seed']})", flush=True)
        model, n_used, train_s = train(spec, xtr, ytr, xte, yte)
        path = os.path.join(ONNX_DIR, spec["name"] + ".onnx")
        check_contract(export(model, path))
        ev = evaluate(spec, path, xte, yte, torch_out=torch_logits(model, xte[:500]))
        meta[spec["name"]] = dict(
            name=spec["name"], arch=spec["arch"], description=spec["description"],
            params=count_params(model), train_examples=int(n_used), epochs=spec["epochs"],
            seed=spec["seed"], **ev, _train_s=train_s)
        print(f"  -> {os.path.relpath(path, ROOT)}: params {meta[spec['name']]['params']}, "
              f"acc {ev['accuracy']:.4f}, latency {ev['latency_us_b1_t1']:.0f} us, "
              f"trained in {train_s:.0f}s (total {time.time() - t_all:.0f}s)", flush=True)

    # Merge with the metadata of models not rebuilt this run (only those still in the zoo).
    for s in ZOO:
        if s["name"] not in meta and s["name"] in old:
            meta[s["name"]] = old[s["name"]]
    rows = sorted(meta.values(), key=lambda m: (m["params"], m["name"]))
    report(rows)
    keys = ["name", "arch", "description", "params", "train_examples", "epochs", "seed",
            "accuracy", "latency_us_b1_t1", "class_accuracy"]
    with open(META_PATH, "w") as f:
        json.dump([{k: m[k] for k in keys} for m in rows], f, indent=2)
        f.write("\n")
    print(f"\nwrote {os.path.relpath(META_PATH, ROOT)} ({len(rows)} models); "
          f"total wall time {time.time() - t_all:.0f}s")
    export_for_zoo(rows)
    if len(rows) == len(ZOO):
        check_set(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
