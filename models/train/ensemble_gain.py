#!/usr/bin/env python3
"""What a majority vote gains over the best single model within each Fashion-MNIST
constraint type's latency (issue 14), computed from the ONNX files in Python.

Usage:
    .deps/train-venv/bin/python models/train/ensemble_gain.py                # every model in
                                                     # models/train/out/fashion_models.json
    .deps/train-venv/bin/python models/train/ensemble_gain.py --zoo          # only zoo.toml's
    .deps/train-venv/bin/python models/train/ensemble_gain.py --latency meta # no re-measuring
    .deps/train-venv/bin/python models/train/ensemble_gain.py --exclude forest --searched 12

It mirrors `benches/src/ensemble_gain.rs` and `benches/src/workload.rs`:
  - every model's predicted class on the 10k test images (ONNX Runtime) and its accuracy;
  - latency: the median single-image latency with 1 thread, measured here like
    fashion.py's latency_us (`--latency measure`, the default), or taken from the
    metadata written at training time (`--latency meta`), or from zoo.toml's profile
    (Rust-measured, batch 1, 1 thread) where a model has one (`--latency zoo`, others
    measured), or measured here and calibrated to those profiles (`--latency
    calibrated`: models are timed in interleaved rounds and every round is rescaled by
    the median profile/measured ratio of the profiled models; for a busy machine);
  - the frontier: models by latency (ties: more accurate first), keeping each that is
    more accurate than every faster one; the five types sit at frontier indices
    (k*(n-1)+2)//4, k = 0..4 (the whole frontier when n <= 5);
  - per type: the best single model whose latency fits, and the best plain-majority vote
    (ties go to the class of the most accurate voter among the tied) over every subset of
    2..5 of the `--searched` most accurate fitting models (9, as in the Rust code).
Prints a markdown table like the README's.
"""
import argparse
import itertools
import json
import os
import sys
import tomllib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion  # noqa: E402

MODELS_DIR = os.path.join(fashion.ROOT, "models")


def predictions(names, x):
    out = {}
    for n in names:
        sess = fashion.ort_session(os.path.join(fashion.ONNX_DIR, n + ".onnx"), threads=2)
        out[n] = np.concatenate([sess.run(["logits"], {"image": x[i:i + 500]})[0].argmax(1)
                                 for i in range(0, len(x), 500)])
    return out


def calibrated_latencies(names, zoo, x1, rounds=25, runs=60):
    """Single-image latency (1 thread) of every model, timed in interleaved rounds; each
    round is scaled by the median ratio profile / measured over the profiled models, so
    that a busy or slower machine still yields numbers comparable to zoo.toml's."""
    import time
    sess = {n: fashion.ort_session(os.path.join(fashion.ONNX_DIR, n + ".onnx"), threads=1) for n in names}
    refs = [n for n in names if zoo.get(n, {}).get("profile")]
    assert refs, "no profiled model to calibrate against"
    med = {n: [] for n in names}
    for _ in range(rounds):
        for n in names:
            for _ in range(10):
                sess[n].run(["logits"], {"image": x1})
            ts = []
            for _ in range(runs):
                t = time.perf_counter()
                sess[n].run(["logits"], {"image": x1})
                ts.append(time.perf_counter() - t)
            med[n].append(np.median(ts) * 1e6)
    scale = [np.median([zoo[m]["profile"]["latency_us"][0][0] / med[m][r] for m in refs])
             for r in range(rounds)]
    out = {n: float(np.median([med[n][r] * scale[r] for r in range(rounds)])) for n in names}
    for n in refs:  # profiled models keep their profile
        out[n] = float(zoo[n]["profile"]["latency_us"][0][0])
    return out


def majority(members, preds, acc, y):
    """Accuracy of the plain majority vote, ties to the most accurate voter's class."""
    rows = np.arange(len(y))
    votes = np.zeros((len(y), 10))
    best_voter = np.zeros((len(y), 10))
    for m in members:
        votes[rows, preds[m]] += 1
        best_voter[rows, preds[m]] = np.maximum(best_voter[rows, preds[m]], acc[m])
    return float(((votes + 1e-3 * best_voter).argmax(1) == y).mean())


def constraint_types(names, lat, acc):
    order = sorted(names, key=lambda n: (lat[n], -acc[n]))
    front = []
    for n in order:
        if not front or acc[n] > acc[front[-1]]:
            front.append(n)
    k = len(front)
    types = front if k <= 5 else [front[(i * (k - 1) + 2) // 4] for i in range(5)]
    return front, types


def gains(names, lat, acc, preds, y, searched=9, max_size=5):
    front, types = constraint_types(names, lat, acc)
    rows = []
    for i, t in enumerate(types):
        fit = sorted((n for n in names if lat[n] <= lat[t] + 1e-9), key=lambda n: (-acc[n], n))
        fit = fit[:searched]
        best = ((fit[0],), acc[fit[0]])
        for size in range(2, min(max_size, len(fit)) + 1):
            for sub in itertools.combinations(fit, size):
                a = majority(sub, preds, acc, y)
                if a > best[1] + 1e-12:
                    best = (sub, a)
        rows.append(dict(type=f"const{i + 1}", latency=lat[t], single=fit[0],
                         single_acc=acc[fit[0]], ensemble=best[0], ensemble_acc=best[1],
                         gain=100 * (best[1] - acc[fit[0]])))
    return front, rows


def table(rows):
    out = ["| type | inference latency (µs) | best single model | accuracy | "
           "best ensemble (2–5 models) | accuracy | gain (points) |",
           "|---|---:|---|---:|---|---:|---:|"]
    for r in rows:
        out.append(f"| {r['type']} | {r['latency']:.0f} | `{r['single']}` | {100 * r['single_acc']:.2f} % | "
                   + ", ".join(f"`{m}`" for m in r["ensemble"])
                   + f" | {100 * r['ensemble_acc']:.2f} % | {r['gain']:+.2f} |")
    met = sum(r["gain"] >= 1.0 - 1e-9 for r in rows)
    out.append(f"\n{met} of {len(rows)} types gain at least 1.0 point.")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zoo", action="store_true", help="only the fashion models in zoo.toml")
    ap.add_argument("--latency", choices=["measure", "meta", "zoo", "calibrated"], default="measure")
    ap.add_argument("--exclude", action="append", default=[], metavar="NAME")
    ap.add_argument("--searched", type=int, default=9)
    args = ap.parse_args()

    with open(fashion.META_PATH) as f:
        meta = {m["name"]: m for m in json.load(f)}
    with open(os.path.join(MODELS_DIR, "zoo.toml"), "rb") as f:
        zoo = {m["name"]: m for m in tomllib.load(f)["models"] if m["task"] == "fashion"}
    names = [n for n in (zoo if args.zoo else meta) if n not in args.exclude]
    xte, yte = fashion.load_split("t10k")
    preds = predictions(names, xte)
    acc = {n: float((preds[n] == yte).mean()) for n in names}
    lat = calibrated_latencies(names, zoo, xte[:1]) if args.latency == "calibrated" else {}
    for n in (n for n in names if n not in lat):
        prof = zoo.get(n, {}).get("profile")
        if args.latency == "zoo" and prof and prof["threads"][0] == 1 and prof["batch_sizes"][0] == 1:
            lat[n] = float(prof["latency_us"][0][0])
        elif args.latency == "meta" and n in meta:
            lat[n] = float(meta[n]["latency_us_b1_t1"])
        else:
            lat[n] = fashion.latency_us(os.path.join(fashion.ONNX_DIR, n + ".onnx"), xte[:1])
    front, rows = gains(names, lat, acc, preds, yte, searched=args.searched)
    print("models (latency µs, accuracy):")
    for n in sorted(names, key=lambda n: lat[n]):
        print(f"  {n:<14} {lat[n]:8.1f} {acc[n]:.4f}{'  frontier' if n in front else ''}")
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
