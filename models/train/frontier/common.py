"""Shared helpers for the ensemble-gain experiments (reuses ../fashion.py conventions)."""
import os, sys, time
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import fashion  # noqa: E402
from fashion import Linear, conv_bn, augment, BG, load_split, export, check_contract, ort_session  # noqa

ONNX_DIR = os.path.join(HERE, "onnx")
OUT_DIR = os.path.join(HERE, "out")
ZOO_DIR = fashion.ONNX_DIR
REFS = ["linear", "mlp_med", "cnn_wide", "cnn_k5", "resnet"]


class Pool2(nn.Module):
    """14x14 view: 2x2 average pooling inside the graph."""
    def forward(self, x):
        return F.avg_pool2d(x, 2)


class Flip(nn.Module):
    def forward(self, x):
        return x.flip(3)


def act(name):
    return {"relu": nn.ReLU(inplace=True), "gelu": nn.GELU(), "tanh": nn.Tanh(),
            "silu": nn.SiLU(), "elu": nn.ELU()}[name]


def mlp(sizes, a="relu", dropout=0.0, pre=None):
    layers = [] if pre is None else [pre]
    layers.append(nn.Flatten())
    for i, (p, q) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(Linear(p, q))
        if i < len(sizes) - 2:
            layers.append(act(a))
            if dropout:
                layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


def cbr(cin, cout, k=3, s=1, g=1, d=1, a="relu"):
    pad = d * (k // 2)
    return [nn.Conv2d(cin, cout, k, s, pad, dilation=d, groups=g, bias=False), nn.BatchNorm2d(cout), act(a)]


def load_data():
    xtr, ytr = load_split("train")
    xte, yte = load_split("t10k")
    return xtr, ytr, xte, yte


lat_us = fashion.session_latency_us


def zoo_latency():
    import tomllib
    z = tomllib.load(open(os.path.join(fashion.ROOT, "models", "zoo.toml"), "rb"))
    return {m["name"]: (m["profile"]["latency_us"][0][0], m["accuracy"]) for m in z["models"] if m["task"] == "fashion"}
