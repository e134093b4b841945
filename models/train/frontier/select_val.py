"""Chooses which new models to add, on the VALIDATION split only: backward elimination
over candidates, maximising the project's rule simulated on validation among new models
(+ linear as the fastest frontier point): first the number of types with gain >= 1.0,
then the sum of gains.   usage: select_val.py NAME ...   (writes out/selected.json)"""
import itertools, json, sys
from common import *
from rule import majority, frontier_types

y = load_split("train")[1][50000:]
cands = sys.argv[1:]
lj = json.load(open(os.path.join(OUT_DIR, "latency.json")))
P = {n: np.load(os.path.join(OUT_DIR, n + ".npz"))["val"].argmax(1) for n in cands}
A = {n: float((P[n] == y).mean()) for n in cands}
L = {n: lj[n]["converted"] for n in cands}
P["linear"], A["linear"], L["linear"] = (y + 1) % 10, 0.8389, 4.6
cache = {}

def vote(sub):
    k = tuple(sorted(sub))
    if k not in cache:
        cache[k] = majority(k, P, A, y)
    return cache[k]

def score(names):
    names = ["linear"] + list(names)
    front, types = frontier_types(names, L, A)
    gs = []
    for t in types:
        fit = sorted((n for n in names if L[n] <= L[t] + 1e-9), key=lambda n: -A[n])[:9]
        best = A[fit[0]]
        for k in range(2, min(5, len(fit)) + 1):
            for sub in itertools.combinations(fit, k):
                best = max(best, vote(sub))
        gs.append(100 * (best - A[fit[0]]))
    return (sum(g >= 1.0 for g in gs), sum(gs)), gs, types

chosen = list(cands)
cur = score(chosen)
print(f"all {len(chosen)}: types>=1: {cur[0][0]}  sum {cur[0][1]:.2f}  gains {[round(g, 2) for g in cur[1]]}  types {cur[2]}", flush=True)
while len(chosen) > 1:   # backward elimination: drop the model whose removal helps most
    best = None
    for c in chosen:
        s_ = score([n for n in chosen if n != c])
        if best is None or s_[0] > best[1][0]:
            best = (c, s_)
    if best[1][0] < cur[0]:   # drop while the score does not get worse: a small set
        break
    chosen.remove(best[0]); cur = best[1]
    print(f"- {best[0]:16s} types>=1: {cur[0][0]}  sum {cur[0][1]:.2f}  gains {[round(g, 2) for g in cur[1]]}  types {cur[2]}", flush=True)
json.dump(chosen, open(os.path.join(OUT_DIR, "selected.json"), "w"))
print("selected:", chosen)
