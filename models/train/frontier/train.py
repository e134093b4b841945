"""Trains candidate models on the first 50k training images (last 10k = validation),
exports ONNX (fashion.py contract) and saves validation/test logits.

    .deps/train-venv/bin/python models/train/frontier/train.py NAME [NAME ...]
"""
import json, sys
from common import *
import archs

# name: arch, epochs, lr, seed, options (crop, flip, smooth, wd, bs)
SPECS = {
    "cs_8_16":      dict(arch="cs_8_16", epochs=8, lr=5e-3, seed=201, crop=1),
    "cs_16_32":     dict(arch="cs_16_32", epochs=8, lr=5e-3, seed=202, crop=1),
    "cs5_16_32":    dict(arch="cs5_16_32", epochs=8, lr=5e-3, seed=203, flip=True, smooth=0.1),
    "cs_24_48":     dict(arch="cs_24_48", epochs=8, lr=4e-3, seed=204, crop=1, flip=True),
    "p14_32":       dict(arch="p14_32", epochs=8, lr=4e-3, seed=205, crop=1),
    "dil_16_32":    dict(arch="dil_16_32", epochs=8, lr=5e-3, seed=206, crop=1),
    "w1_16":        dict(arch="w1_16", epochs=8, lr=3e-3, seed=207, flip=True),
    "mlp_tanh":     dict(arch="mlp_tanh", epochs=10, lr=2e-3, seed=208, crop=1),
    "cs_16_32_fc":  dict(arch="cs_16_32_fc", epochs=8, lr=4e-3, seed=209, crop=1, smooth=0.1),
    "cs_32_64":     dict(arch="cs_32_64", epochs=8, lr=4e-3, seed=210, crop=1, flip=True),
    "cs3_16_32_64": dict(arch="cs3_16_32_64", epochs=8, lr=4e-3, seed=211, crop=2),
    "pool_16_32":   dict(arch="pool_16_32", epochs=8, lr=4e-3, seed=212, crop=1),
    "p14_32_64":    dict(arch="p14_32_64", epochs=8, lr=4e-3, seed=213, flip=True),
    "w1_32k3":      dict(arch="w1_32k3", epochs=8, lr=3e-3, seed=214, crop=1),
    "dw_s":         dict(arch="dw_s", epochs=8, lr=4e-3, seed=215, crop=1, flip=True),
    "cs_32_64_64":  dict(arch="cs_32_64_64", epochs=8, lr=4e-3, seed=216, crop=2, flip=True),
    "pool_16_32_fc": dict(arch="pool_16_32_fc", epochs=8, lr=3e-3, seed=217, flip=True, smooth=0.1),
    "cs_48_96":     dict(arch="cs_48_96", epochs=8, lr=4e-3, seed=218, crop=1),
    "cs_32_64_128": dict(arch="cs_32_64_128", epochs=8, lr=4e-3, seed=219, crop=2),
    "cs_16_32_64s": dict(arch="cs_16_32_64s", epochs=8, lr=5e-3, seed=220, crop=1, flip=True),
    "res_s":        dict(arch="res_s", epochs=8, lr=4e-3, seed=221, crop=1, flip=True),
    "res_t":        dict(arch="res_t", epochs=8, lr=5e-3, seed=222, crop=1),
    "res_m":        dict(arch="res_m", epochs=8, lr=4e-3, seed=223, crop=2),
    "cs5_32_64":    dict(arch="cs5_32_64", epochs=8, lr=4e-3, seed=224, crop=1, smooth=0.1),
    "cs_64_64":     dict(arch="cs_64_64", epochs=8, lr=4e-3, seed=225, flip=True),
    "dw_m":         dict(arch="dw_m", epochs=8, lr=4e-3, seed=226, crop=1),
    "p14_48_96":    dict(arch="p14_48_96", epochs=8, lr=4e-3, seed=227, crop=1, flip=True),
    "gap_32_64_128": dict(arch="gap_32_64_128", epochs=8, lr=4e-3, seed=228, crop=2),
    "cs_32_64_seed": dict(arch="cs_32_64", epochs=8, lr=4e-3, seed=230, crop=1, flip=True),
    "cs_32_64_er":  dict(arch="cs_32_64", epochs=8, lr=4e-3, seed=231, crop=1, erase=10),
    "cs_32_64_bst": dict(arch="cs_32_64", epochs=8, lr=4e-3, seed=232, crop=1, flip=True, boost=("cs_16_32", 2.0)),
    "cs_32_64_long": dict(arch="cs_32_64", epochs=20, lr=4e-3, seed=233, crop=2, flip=True, erase=8),
}
NTRAIN = 50000


def erase(x, gen, size):
    """Cutout: a random size x size square (clipped at the border) set to background, per image."""
    b = x.shape[0]
    cy = torch.randint(0, 28, (b,), generator=gen)
    cx = torch.randint(0, 28, (b,), generator=gen)
    ar = torch.arange(28)
    my = ((ar[None] - cy[:, None]).abs() <= size // 2)
    mx = ((ar[None] - cx[:, None]).abs() <= size // 2)
    m = (my[:, :, None] & mx[:, None, :])[:, None]
    return torch.where(m, torch.full_like(x, BG), x)


def train_one(name, xtr, ytr, xte, yte):
    s = SPECS[name]
    fashion.set_seed(s["seed"])
    model = archs.ARCHS[s["arch"]]().to(memory_format=torch.channels_last)
    x, y = torch.from_numpy(xtr[:NTRAIN]), torch.from_numpy(ytr[:NTRAIN])
    w = None
    if s.get("boost"):
        src, alpha = s["boost"]
        oof = np.load(os.path.join(OUT_DIR, "oof_" + src + ".npy"))  # [50000,10] out-of-fold probs
        wrong = (oof.argmax(1) != ytr[:NTRAIN]).astype(np.float32)
        w = torch.from_numpy(1.0 + alpha * wrong)
        w = w / w.mean()
        print(f"  boost from {src}: {int(wrong.sum())} oof errors weighted {1 + alpha}x", flush=True)
    idx_all = torch.arange(NTRAIN)
    bs, epochs = s.get("bs", 128), s["epochs"]
    steps = (NTRAIN + bs - 1) // bs
    opt = torch.optim.AdamW(model.parameters(), lr=s["lr"], weight_decay=s.get("wd", 5e-4))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=s["lr"], total_steps=epochs * steps, pct_start=0.25)
    gen = torch.Generator().manual_seed(s["seed"])
    t0 = time.time()
    for ep in range(epochs):
        model.train()
        perm = torch.randperm(NTRAIN, generator=gen)
        tot = 0.0
        for st in range(steps):
            b = perm[st * bs:(st + 1) * bs]
            xb, yb = x[b], y[b]
            if s.get("crop") or s.get("flip"):
                xb = augment(xb, gen, s.get("crop", 0), s.get("flip", False))
            if s.get("erase"):
                xb = erase(xb, gen, s["erase"])
            xb = xb.contiguous(memory_format=torch.channels_last)
            if s.get("mixup"):
                lam = float(np.random.RandomState(ep * 100003 + st + s["seed"]).beta(s["mixup"], s["mixup"]))
                pm = torch.randperm(len(b), generator=gen)
                out = model(lam * xb + (1 - lam) * xb[pm])
                sm = s.get("smooth", 0.0)
                loss = lam * F.cross_entropy(out, yb, label_smoothing=sm) + (1 - lam) * F.cross_entropy(out, yb[pm], label_smoothing=sm)
            else:
                out = model(xb)
            if s.get("mixup"):
                pass
            elif w is None:
                loss = F.cross_entropy(out, yb, label_smoothing=s.get("smooth", 0.0))
            else:
                loss = (F.cross_entropy(out, yb, reduction="none", label_smoothing=s.get("smooth", 0.0)) * w[b]).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            tot += loss.item() * len(b)
        print(f"  {name} epoch {ep + 1}/{epochs} loss {tot / NTRAIN:.4f} ({time.time() - t0:.0f}s)", flush=True)
    model = model.to(memory_format=torch.contiguous_format).eval()
    os.makedirs(ONNX_DIR, exist_ok=True)
    path = os.path.join(ONNX_DIR, name + ".onnx")
    check_contract(export(model, path))
    sess = ort_session(path, 2)
    def logits(a):
        return np.concatenate([sess.run(["logits"], {"image": a[i:i + 500]})[0] for i in range(0, len(a), 500)])
    lv, lt = logits(xtr[NTRAIN:]), logits(xte)
    with torch.no_grad():
        tl = model(torch.from_numpy(xte[:500])).numpy()
    assert np.abs(tl - lt[:500]).max() < 1e-2
    va, ta = float((lv.argmax(1) == ytr[NTRAIN:]).mean()), float((lt.argmax(1) == yte).mean())
    os.makedirs(OUT_DIR, exist_ok=True)
    np.savez(os.path.join(OUT_DIR, name + ".npz"), val=lv, test=lt)
    params = sum(p.numel() for p in model.parameters())
    meta = dict(name=name, **{k: v for k, v in s.items() if k != "sample_w"}, params=params,
                val_acc=va, test_acc=ta, train_s=round(time.time() - t0))
    json.dump(meta, open(os.path.join(OUT_DIR, name + ".json"), "w"))
    print(f"DONE {name}: val {va:.4f} test {ta:.4f} params {params} ({time.time() - t0:.0f}s)", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(2)
    xtr, ytr, xte, yte = load_data()
    for n in sys.argv[1:]:
        train_one(n, xtr, ytr, xte, yte)
