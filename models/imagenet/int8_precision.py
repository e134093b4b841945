"""What ONNX Runtime's `session.x64quantprecision` changes on this CPU, for the worker's
choice to set it (worker/src/backend/onnx.rs): the committed reference tensor's logits
against the committed ones, and each int8 model's time, with the entry off and on.

Run from the repository root, with the wheel `scripts/setup.sh` unpacks:
    PYTHONPATH=.deps/onnxruntime .deps/tritonclient/bin/python models/imagenet/int8_precision.py
"""

import glob
import time

import numpy as np
import onnxruntime as ort

REFERENCE = "models/imagenet/reference/efficientnet_lite0__chelsea"


def session(path, precise):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.add_session_config_entry("session.x64quantprecision", "1" if precise else "0")
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def feeds_for(s):
    feeds = {}
    for i in s.get_inputs():
        shape = [d if isinstance(d, int) else (1 if k == 0 else 64) for k, d in enumerate(i.shape)]
        if "int" in i.type:
            feeds[i.name] = np.ones(shape, dtype=np.int64)
        else:
            feeds[i.name] = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return feeds


def median_ms(s, feeds, rounds=5, runs=20):
    s.run(None, feeds)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(runs):
            s.run(None, feeds)
        times.append((time.perf_counter() - start) / runs * 1e3)
    return float(np.median(times))


x = np.fromfile(f"{REFERENCE}.input.f32", dtype="<f4").reshape(1, 3, 224, 224)
reference = np.fromfile(f"{REFERENCE}.logits.f32", dtype="<f4")
for precise in (False, True):
    logits = session("models/imagenet/efficientnet_lite0.onnx", precise).run(None, {"input": x})[0][0]
    print(
        f"x64quantprecision={int(precise)}: Lite0 on chelsea's reference tensor, top-1 "
        f"{int(np.argmax(logits))} (reference {int(np.argmax(reference))}), "
        f"max |logit - reference| {float(np.abs(logits - reference).max()):.3g}"
    )
for path in ["models/sentiment/minilm.onnx"] + sorted(glob.glob("models/imagenet/efficientnet_lite*.onnx")):
    off, on = session(path, False), session(path, True)
    feeds = feeds_for(off)
    a, b = median_ms(off, feeds), median_ms(on, feeds)
    print(f"{path}: {a:.2f} ms off, {b:.2f} ms on ({b / a:.2f}x), one thread, median of 5 x 20 runs")
