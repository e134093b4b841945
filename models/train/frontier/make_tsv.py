"""Writes predictions/fashion_new.tsv.gz for the given new models, in the recorded format:
label, then per model `<name>` (argmax class) and `<name>.p` (top softmax probability),
one row per test item in test-set order.   usage: make_tsv.py NAME ..."""
import gzip, sys
from common import *
names = sys.argv[1:]
y = load_split("t10k")[1]
cols = []
for n in names:
    lg = np.load(os.path.join(OUT_DIR, n + ".npz"))["test"].astype(np.float64)
    p = np.exp(lg - lg.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
    cols.append((lg.argmax(1), p.max(1)))
os.makedirs(os.path.join(HERE, "predictions"), exist_ok=True)
path = os.path.join(HERE, "predictions", "fashion_new.tsv.gz")
with gzip.open(path, "wt") as f:
    f.write("\t".join(["label"] + [h for n in names for h in (n, n + ".p")]) + "\n")
    for i in range(len(y)):
        f.write("\t".join([str(y[i])] + [v for c, p in cols for v in (str(c[i]), f"{p[i]:.4f}")]) + "\n")
print("wrote", path)
