# test_gpt2_torch.py — wgtrain's whole GPT-2 vs PyTorch, in the manner of llm.c's test_gpt2:
# loss, every parameter gradient, then the losses of 10 AdamW steps; on the C reference and on
# WebGPU (lavapipe in CI). PyTorch runs in float64, so the tolerances below are float32 error.
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_torch_ref as ref  # noqa: E402
import torch_test_lib  # noqa: E402
from torch_test_lib import check, finish  # noqa: E402


def run(args):
    return torch_test_lib.run(args, show_failure=True)


def case(L, NH, C, F, V, maxT, B, T, seed, backends, steps=10, ignore=False):
    torch.manual_seed(seed)
    P = ref.random_params(L, C, F, V, maxT, seed)
    tokens = torch.randint(0, V, (B, T + 1), generator=torch.Generator().manual_seed(seed + 1))
    targets = tokens[:, 1:].clone()
    if ignore:
        targets[0, 1] = -1
        tokens[0, 2] = -1 if T + 1 == 3 else tokens[0, 2]
    with tempfile.TemporaryDirectory() as d:
        mpath, tpath = os.path.join(d, "m.safetensors"), os.path.join(d, "t.npy")
        ref.save_safetensors(mpath, P)
        tok = tokens.numpy().astype(np.int32)
        if ignore:
            tok[0, -1] = -1  # an ignored target (the last column is never an input)
            targets = torch.from_numpy(tok[:, 1:].astype(np.int64))
            tok_in = torch.from_numpy(np.where(tok[:, :-1] < 0, 0, tok[:, :-1]).astype(np.int64))
        else:
            tok_in = tokens[:, :-1]
        np.save(tpath, tok)
        # reference loss and gradients
        Pg = {k: v.clone().requires_grad_(True) for k, v in P.items()}
        loss = ref.loss_fn(ref.forward(Pg, tok_in, L, NH), targets)
        loss.backward()
        for be in backends:
            gpath = os.path.join(d, f"g_{be}.safetensors")
            r = run(["grad", "--model", mpath, "--heads", str(NH), "--tokens", tpath, "--backend", be, "--out", gpath])
            tag = f"[{be} L={L} NH={NH} C={C} F={F} V={V} B={B} T={T}]"
            check(r.returncode == 0, f"{tag} wgtrain grad ran")
            if r.returncode != 0:
                continue
            got = float(r.stdout.split("loss")[1].split()[0])
            # loss: float32 sums over V and T terms
            check(abs(got - loss.item()) <= 1e-5 + 1e-5 * abs(loss.item()), f"{tag} loss {got} vs torch {loss.item()}")
            G = ref.load_safetensors(gpath)
            for name, p in Pg.items():
                g_ref = p.grad.numpy()
                g = G.get(name)
                if g is None or g.shape != g_ref.shape:
                    check(False, f"{tag} gradient {name} missing or wrong shape")
                    continue
                # float32 accumulation over B*T rows: error relative to the tensor's scale
                scale = np.abs(g_ref).max() + 1e-12
                err = np.abs(g - g_ref).max()
                check(err <= 2e-4 * scale + 1e-7, f"{tag} grad {name}: max err {err:.3g} (scale {scale:.3g})")
        if steps and not ignore:
            # 10 AdamW steps on the same batch: decay on matrices/embeddings, none on biases and norms
            lr, wd = 1e-3, 0.1
            Pt = {k: v.clone().requires_grad_(True) for k, v in P.items()}
            decay = [p for k, p in Pt.items() if p.dim() == 2]
            no_decay = [p for k, p in Pt.items() if p.dim() == 1]
            opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                                    lr=lr, betas=(0.9, 0.999), eps=1e-8)
            ref_losses = []
            for s in range(steps + 1):
                opt.zero_grad()
                l = ref.loss_fn(ref.forward(Pt, tok_in, L, NH), targets)
                ref_losses.append(l.item())
                if s < steps:
                    l.backward()
                    opt.step()
            for be in backends:
                r = run(["grad", "--model", mpath, "--heads", str(NH), "--tokens", tpath, "--backend", be,
                         "--steps", str(steps), "--lr", str(lr), "--weight-decay", str(wd)])
                tag = f"[{be} adamw L={L} C={C}]"
                check(r.returncode == 0, f"{tag} ran")
                if r.returncode != 0:
                    continue
                got = [float(line.split()[3]) for line in r.stdout.splitlines() if line.startswith("step ")]
                check(len(got) == steps + 1, f"{tag} printed {len(got)} step losses")
                for s, (a, b) in enumerate(zip(got, ref_losses)):
                    # float32 vs float64 drift over the steps stays well below this
                    check(abs(a - b) <= 1e-4 + 1e-4 * abs(b), f"{tag} step {s}: loss {a} vs torch {b}")


backends = os.environ.get("WGTRAIN_TEST_BACKENDS", "cpu,webgpu").split(",")
torch.set_default_dtype(torch.float64)
case(L=2, NH=2, C=16, F=64, V=37, maxT=12, B=2, T=8, seed=1, backends=backends)
case(L=1, NH=4, C=32, F=48, V=300, maxT=20, B=3, T=17, seed=2, backends=backends, steps=0, ignore=True)
case(L=3, NH=1, C=8, F=40, V=5, maxT=4, B=1, T=1, seed=3, backends=backends, steps=3)
sys.exit(finish())
