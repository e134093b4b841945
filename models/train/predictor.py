"""Trains the learned load predictor (issues 5 and 20): a small MLP that forecasts the
request rate 1 to `HORIZON` intervals ahead (one output per lead) from the last `WINDOW`
rates, exported to ONNX for the master (`--predictor learned`): the autoscaler plans for
the peak over the launch lead and keeps capacity for the recycling timeout, so it needs
every lead, not only the last.

Scale-free: the inputs are the window divided by its mean and the output is the future
rate over that same mean, so one model serves any load level. The training traces come
from the Rust generator (`predictor-bench --dump DIR`, seeds 11-15, one week each); the
bench scores every predictor on seed 1, which training never sees.

    python3 -m venv .deps/predictor-venv
    .deps/predictor-venv/bin/pip install scikit-learn skl2onnx
    cargo run --release -p cocktail-benches --bin predictor-bench -- --dump /tmp/traces
    .deps/predictor-venv/bin/python models/train/predictor.py /tmp/traces models/predictors/load_mlp.onnx
"""

import csv
import sys
from pathlib import Path

import numpy as np
from skl2onnx import to_onnx
from sklearn.neural_network import MLPRegressor

WINDOW = 30
HORIZON = 10


def windows(rates):
    xs, ys = [], []
    for t in range(WINDOW, len(rates) - HORIZON + 1):
        window = rates[t - WINDOW:t]
        scale = max(window.mean(), 1e-6)
        xs.append(window / scale)
        ys.append(rates[t:t + HORIZON] / scale)
    return xs, ys


def main(dump: Path, out: Path):
    xs, ys = [], []
    for path in sorted(dump.glob("*.csv")):
        with path.open() as f:
            rates = np.array([float(row[0]) for row in csv.reader(f)], dtype=np.float64)
        x, y = windows(rates)
        xs += x
        ys += y
    x = np.asarray(xs, dtype=np.float32)
    y = np.asarray(ys, dtype=np.float32)
    model = MLPRegressor(hidden_layer_sizes=(32, 16), max_iter=200, random_state=0,
                         early_stopping=True)
    model.fit(x, y)
    print(f"trained on {len(x)} windows from {dump}; validation R^2 {model.best_validation_score_:.3f}")
    onnx = to_onnx(model, x[:1], target_opset=17)
    onnx.graph.input[0].name = "rates"
    for node in onnx.graph.node:
        node.input[:] = ["rates" if i == "X" else i for i in node.input]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(onnx.SerializeToString())
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
