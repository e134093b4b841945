"""Batch-1, 1-thread onnxruntime latency of the new models and the five reference zoo
models in the same run (warm-up 50, median of 300 runs, several interleaved rounds).
Converted latency = measured * median over refs of (zoo.toml latency / measured).
Writes out/latency.json.   usage: latency.py [NAME ...]  (default: every onnx/*.onnx)"""
import json, glob, sys
from common import *

names = sys.argv[1:] or sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(ONNX_DIR, "*.onnx")))
x1 = load_split("t10k")[0][:1]
sess = {n: ort_session(os.path.join(ONNX_DIR, n + ".onnx"), 1) for n in names}
for r in REFS:
    sess[r] = ort_session(os.path.join(ZOO_DIR, r + ".onnx"), 1)
zl = zoo_latency()
ROUNDS = 3
res = {n: [] for n in sess}
for rnd in range(ROUNDS):
    for n, s in sess.items():
        res[n].append(lat_us(s, x1, 50, 300))
med = {n: float(np.median(v)) for n, v in res.items()}
ratios = {r: zl[r][0] / med[r] for r in REFS}
scale = float(np.median(list(ratios.values())))
path = os.path.join(OUT_DIR, "latency.json")
old = json.load(open(path)) if os.path.exists(path) else {}
for n in names:
    old[n] = dict(measured=round(med[n], 2), converted=round(med[n] * scale, 2), scale=round(scale, 4),
                  refs={r: round(med[r], 2) for r in REFS})
json.dump(old, open(path, "w"), indent=1)
print("refs measured:", {r: round(med[r], 1) for r in REFS}, "zoo:", {r: zl[r][0] for r in REFS})
print("ratios zoo/measured:", {r: round(v, 3) for r, v in ratios.items()}, "median", round(scale, 3))
for n in names:
    print(f"{n:18s} measured {med[n]:7.1f}  converted {med[n] * scale:7.1f}")
