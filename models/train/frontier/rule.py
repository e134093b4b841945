"""The project's ensemble-gain rule (benches/src/ensemble_gain.rs) on the enlarged zoo:
zoo models (zoo.toml latency, recorded test predictions) + new models (converted latency,
test predictions from out/NAME.npz).   usage: rule.py [--val] NAME ...
--val: the same rule on the validation split among the NEW models only (for selection)."""
import gzip, itertools, json, sys
from common import *

# The vote and the frontier's types are ../ensemble_gain.py's, which mirrors the Rust code.
from ensemble_gain import majority, constraint_types as frontier_types  # noqa: E402


def gains(names, lat, acc, preds, y, order):
    front, types = frontier_types(names, lat, acc)
    rows = []
    for t in types:
        fit = [n for n in names if lat[n] <= lat[t] + 1e-9]
        fit.sort(key=lambda n: (-acc[n], order[n]))
        fit = fit[:9]
        best = ((fit[0],), acc[fit[0]])
        for size in range(2, min(5, len(fit)) + 1):
            for sub in itertools.combinations(fit, size):
                a = majority(sub, preds, acc, y)
                if a > best[1] + 1e-12:
                    best = (sub, a)
        rows.append((t, lat[t], fit[0], acc[fit[0]], best[0], best[1], 100 * (best[1] - acc[fit[0]])))
    return front, rows

def zoo_preds():
    with gzip.open(os.path.join(fashion.ROOT, "models", "predictions", "fashion.tsv.gz"), "rt") as f:
        head = f.readline().rstrip("\n").split("\t")
        data = [l.rstrip("\n").split("\t") for l in f]
    cols = {h: i for i, h in enumerate(head)}
    y = np.array([int(r[0]) for r in data])
    names = [h for h in head[1:] if not h.endswith(".p")]
    return y, {n: np.array([int(r[cols[n]]) for r in data]) for n in names}

def main(argv):
    val = "--val" in argv
    new = [a for a in argv if not a.startswith("--")]
    lj = json.load(open(os.path.join(OUT_DIR, "latency.json")))
    lat, acc, preds = {}, {}, {}
    if val:
        ytr = load_split("train")[1][50000:]
        y = ytr
        # linear stands in as the fastest frontier point (type 1) with its zoo figures; its
        # validation answers are unknown (trained on them), so it gets votes that are never right.
        names = ["linear"] + list(new)
        lat["linear"], acc["linear"], preds["linear"] = 4.6, 0.8389, (y + 1) % 10
    else:
        y, zp = zoo_preds()
        zl = zoo_latency()
        for n, p in zp.items():
            lat[n], preds[n] = zl[n][0], p
            acc[n] = float((p == y).mean())
            assert abs(acc[n] - zl[n][1]) < 1e-4, n
        names = list(zp) + new
    for n in new:
        z = np.load(os.path.join(OUT_DIR, n + ".npz"))["val" if val else "test"]
        preds[n] = z.argmax(1)
        acc[n] = float((preds[n] == y).mean())
        lat[n] = lj[n]["converted"]
    order = {n: i for i, n in enumerate(names)}
    front, rows = gains(names, lat, acc, preds, y, order)
    print("frontier:", ", ".join(f"{n}({lat[n]:.1f}us,{100*acc[n]:.2f})" for n in front))
    ok = 0
    for t, l, s, sa, ens, ea, g in rows:
        ok += g >= 1.0 - 1e-9
        print(f"  {t:16s} {l:7.1f}us single {s:14s} {100*sa:6.2f}  ens {100*ea:6.2f} {'+'.join(ens):60s} gain {g:+.2f}")
    print(f"types with gain >= 1.0: {ok}/5")
    return rows

if __name__ == "__main__":
    main(sys.argv[1:])
