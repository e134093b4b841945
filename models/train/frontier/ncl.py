"""Negative-correlation learning: K members (possibly different layouts) trained jointly on
the first 50k training images with  sum_i CE(p_i, y) - lam * sum_i ||p_i - mean_j p_j||^2
(probabilities), so that they spread around their mean.  Each member is exported as its own
model NAME (fashion.py contract) with out/NAME.npz (val/test logits) and out/NAME.json.
usage: ncl.py GROUP"""
import json, sys
from common import *
import archs
from train import NTRAIN, erase

GROUPS = {
    # group: (lam, epochs, lr, seed, crop, flip, [(member name, layout)])
    "ncl_a": (0.5, 8, 4e-3, 301, 1, True, [("ncl_a_pool", "pool_16_32"), ("ncl_a_cs", "cs_32_64"), ("ncl_a_w1", "w1_16")]),
    "ncl_b": (0.5, 8, 4e-3, 302, 1, True, [("ncl_b_pool", "pool_16_32"), ("ncl_b_cs", "cs3_16_32_64"), ("ncl_b_dil", "dil_16_32"), ("ncl_b_w1", "w1_16")]),
}


def run(group):
    lam, epochs, lr, seed, crop, flip, members = GROUPS[group]
    fashion.set_seed(seed)
    nets = nn.ModuleList([archs.ARCHS[a]() for _, a in members]).to(memory_format=torch.channels_last)
    xtr, ytr, xte, yte = load_data()
    x, y = torch.from_numpy(xtr[:NTRAIN]), torch.from_numpy(ytr[:NTRAIN])
    bs = 128; steps = (NTRAIN + bs - 1) // bs
    opt = torch.optim.AdamW(nets.parameters(), lr=lr, weight_decay=5e-4)
    sch = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * steps, pct_start=0.25)
    gen = torch.Generator().manual_seed(seed)
    t0 = time.time()
    for ep in range(epochs):
        nets.train(); perm = torch.randperm(NTRAIN, generator=gen); tot = 0.0
        for st in range(steps):
            b = perm[st * bs:(st + 1) * bs]
            xb = augment(x[b], gen, crop, flip).contiguous(memory_format=torch.channels_last)
            outs = [n(xb) for n in nets]
            ps = torch.stack([torch.softmax(o, 1) for o in outs])
            pbar = ps.mean(0, keepdim=True)
            loss = sum(F.cross_entropy(o, y[b]) for o in outs) - lam * ((ps - pbar) ** 2).sum(2).mean(1).sum()
            opt.zero_grad(set_to_none=True); loss.backward(); opt.step(); sch.step()
            tot += loss.item()
        print(f"  {group} epoch {ep + 1}/{epochs} loss {tot / steps:.4f} ({time.time() - t0:.0f}s)", flush=True)
    for (name, a), net in zip(members, nets):
        net = net.to(memory_format=torch.contiguous_format).eval()
        path = os.path.join(ONNX_DIR, name + ".onnx")
        check_contract(export(net, path))
        sess = ort_session(path, 2)
        lg = lambda arr: np.concatenate([sess.run(["logits"], {"image": arr[i:i + 500]})[0] for i in range(0, len(arr), 500)])
        lv, lt = lg(xtr[NTRAIN:]), lg(xte)
        va, ta = float((lv.argmax(1) == ytr[NTRAIN:]).mean()), float((lt.argmax(1) == yte).mean())
        np.savez(os.path.join(OUT_DIR, name + ".npz"), val=lv, test=lt)
        json.dump(dict(name=name, arch=a, group=group, lam=lam, epochs=epochs, lr=lr, seed=seed, crop=crop, flip=flip,
                       params=sum(p.numel() for p in net.parameters()), val_acc=va, test_acc=ta,
                       train_s=round(time.time() - t0)), open(os.path.join(OUT_DIR, name + ".json"), "w"))
        print(f"DONE {name}: val {va:.4f} test {ta:.4f}", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(2)
    run(sys.argv[1])
