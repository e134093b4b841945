"""Out-of-fold predictions on the 50k training part: K models of one spec, each trained on
(K-1)/K of it (fixed folds), predicting the held-out fold.  Saves out/oof_SPEC.npy.
usage: oof.py SPEC [K]"""
import sys
from common import *
import train as T
import archs

def run(name, K=4):
    s = dict(T.SPECS[name])
    xtr, ytr, _, _ = load_data()
    x50, y50 = xtr[:T.NTRAIN], ytr[:T.NTRAIN]
    folds = np.random.RandomState(999).permutation(T.NTRAIN) % K
    oof = np.zeros((T.NTRAIN, 10), np.float32)
    for k in range(K):
        tr = np.where(folds != k)[0]; te = np.where(folds == k)[0]
        fashion.set_seed(s["seed"] + 1000 * (k + 1))
        m = archs.ARCHS[s["arch"]]().to(memory_format=torch.channels_last)
        x, y = torch.from_numpy(x50[tr]), torch.from_numpy(y50[tr])
        n = len(tr); bs = 128; steps = (n + bs - 1) // bs; E = s["epochs"]
        opt = torch.optim.AdamW(m.parameters(), lr=s["lr"], weight_decay=5e-4)
        sch = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=s["lr"], total_steps=E * steps, pct_start=0.25)
        gen = torch.Generator().manual_seed(s["seed"] + k)
        for ep in range(E):
            m.train(); perm = torch.randperm(n, generator=gen)
            for st in range(steps):
                b = perm[st * bs:(st + 1) * bs]
                xb = augment(x[b], gen, s.get("crop", 0), s.get("flip", False)).contiguous(memory_format=torch.channels_last)
                loss = F.cross_entropy(m(xb), y[b], label_smoothing=s.get("smooth", 0.0))
                opt.zero_grad(); loss.backward(); opt.step(); sch.step()
        m.eval()
        with torch.no_grad():
            oof[te] = torch.softmax(m(torch.from_numpy(x50[te])), 1).numpy()
        print(f"  fold {k}: acc {(oof[te].argmax(1) == y50[te]).mean():.4f}", flush=True)
    np.save(os.path.join(OUT_DIR, "oof_" + name + ".npy"), oof)
    print("oof acc", (oof.argmax(1) == y50).mean())

if __name__ == "__main__":
    torch.set_num_threads(2)
    run(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4)
