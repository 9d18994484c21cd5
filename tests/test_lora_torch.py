# test_lora_torch.py — wgtrain's LoRA against a plain-PyTorch LoRA (float64), through
# `wgtrain grad --lora-adapter DIR` on PEFT adapter directories written here: the loss, every
# adapter's gradient (lora_A and lora_B under PEFT's names), then the losses of AdamW steps that
# train the adapters alone, on the C reference and on WebGPU (lavapipe in CI). The reference is
# the family's PyTorch model (llama_torch_ref.py, gpt2_torch_ref.py) with each targeted weight
# replaced by W + s B A (GPT-2's Conv1D weights, stored [in, out]: W + s (B A)^T); without dropout
# that is the LoRA forward, and autograd through it gives LoRA's gradients of A and B. Cases: LLaMA
# with grouped-query heads and adapters on every projection (q, k and v each inside the packed
# q | k | v matrix), LLaMA with q and v only and rsLoRA, GPT-2 on c_attn, both c_proj and c_fc.
# Also: adapter directories this build cannot read are refused by name.
import json
import os
import sys
import tempfile

import numpy as np
import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_torch_ref as gref  # noqa: E402
import llama_torch_ref as lref  # noqa: E402
from torch_test_lib import check, finish, run  # noqa: E402

def write_adapter(d, targets, r, alpha, adapters, rslora=False, extra=None):
    os.makedirs(d, exist_ok=True)
    cfg = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": r, "lora_alpha": alpha, "lora_dropout": 0.0,
           "target_modules": targets, "bias": "none", "use_rslora": rslora, "modules_to_save": None}
    cfg.update(extra or {})
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(cfg, f)
    gref.save_safetensors(os.path.join(d, "adapter_model.safetensors"), adapters)


def case(family, P, fwd, modules, targets, r, alpha, rslora, tok, backends, model_args, prefix, conv1d, steps=4):
    """modules: the Hugging Face module names (without prefix) that get adapters."""
    g = torch.Generator().manual_seed(11)
    s = alpha / (r ** 0.5 if rslora else r)
    AB = {}
    for mod in modules:
        out_f, in_f = P[mod + ".weight"].shape[::-1] if conv1d else P[mod + ".weight"].shape
        # O(1) adapters (B != 0, else A's gradient is 0), float32-exact values
        AB[mod] = (torch.randn(r, in_f, generator=g, dtype=torch.float64).float().double() / in_f ** 0.5,
                   (0.3 * torch.randn(out_f, r, generator=g, dtype=torch.float64)).float().double())
    tok_in = torch.from_numpy(tok[:, :-1].astype(np.int64))
    targets_t = torch.from_numpy(tok[:, 1:].astype(np.int64))

    def loss_of(ab):
        Pe = dict(P)
        for mod, (A, B) in ab.items():
            d = s * (B @ A)
            Pe[mod + ".weight"] = P[mod + ".weight"] + (d.T if conv1d else d)
        return fwd(Pe, tok_in)

    tag0 = f"{family} r={r} alpha={alpha} rslora={rslora} targets={targets}"
    with tempfile.TemporaryDirectory() as d:
        adir, tpath = os.path.join(d, "adapter"), os.path.join(d, "t.npy")
        write_adapter(adir, targets, r, alpha, {f"base_model.model.{prefix}{m}.lora_{x}.weight": t
                                                for m, (A, B) in AB.items() for x, t in (("A", A), ("B", B))},
                      rslora)
        np.save(tpath, tok)
        ab = {m: (A.clone().requires_grad_(True), B.clone().requires_grad_(True)) for m, (A, B) in AB.items()}
        loss = loss_of(ab)
        loss.backward()
        for be in backends:
            gpath = os.path.join(d, f"g_{be}.safetensors")
            res = run(["grad"] + model_args(d) + ["--tokens", tpath, "--backend", be, "--lora-adapter", adir,
                                                  "--out", gpath])
            tag = f"[{be} {tag0}]"
            check(res.returncode == 0, f"{tag} wgtrain grad ran: {res.stdout} {res.stderr}")
            if res.returncode != 0:
                continue
            got = float(res.stdout.split("loss")[1].split()[0])
            check(abs(got - loss.item()) <= 1e-5 + 1e-5 * abs(loss.item()), f"{tag} loss {got} vs torch {loss.item()}")
            G = gref.load_safetensors(gpath)
            want = {f"base_model.model.{prefix}{m}.lora_{x}.weight": t.grad.numpy()
                    for m, (A, B) in ab.items() for x, t in (("A", A), ("B", B))}
            check(sorted(G) == sorted(want), f"{tag} gradient names differ: {sorted(set(G) ^ set(want))}")
            worst = 0.0
            for name, gr in want.items():
                got_g = G.get(name)
                if got_g is None or got_g.shape != gr.shape:
                    check(False, f"{tag} {name} missing or of the wrong shape")
                    continue
                # float32 sums over B*T rows and C inputs, as test_llama_torch.py: error relative to
                # the tensor's largest entry
                scale = np.abs(gr).max()
                err = np.abs(got_g - gr).max()
                check(scale > 1e-6, f"{tag} {name}: a zero reference gradient checks nothing")
                check(err <= 2e-4 * scale + 1e-7, f"{tag} {name}: max err {err:.3g} (scale {scale:.3g})")
                worst = max(worst, err / max(scale, 1e-30))
            print(f"{tag} loss {got:.8f} (torch {loss.item():.8f}), worst gradient error {worst:.2e} of its max")
        # AdamW on the adapters alone (all decayed, as PEFT's under Trainer's AdamW)
        lr, wd = 1e-2, 0.1
        abt = {m: (A.clone().requires_grad_(True), B.clone().requires_grad_(True)) for m, (A, B) in AB.items()}
        opt = torch.optim.AdamW([t for pair in abt.values() for t in pair], lr=lr, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=wd)
        ref_losses = []
        for st in range(steps + 1):
            opt.zero_grad()
            lo = loss_of(abt)
            ref_losses.append(lo.item())
            if st < steps:
                lo.backward()
                opt.step()
        check(ref_losses[-1] < ref_losses[0] - 1e-3, f"{tag0}: the reference's AdamW steps do not lower the loss")
        for be in backends:
            res = run(["grad"] + model_args(d) + ["--tokens", tpath, "--backend", be, "--lora-adapter", adir,
                                                  "--steps", str(steps), "--lr", str(lr), "--weight-decay", str(wd)])
            tag = f"[{be} adamw {tag0}]"
            check(res.returncode == 0, f"{tag} ran: {res.stderr}")
            if res.returncode != 0:
                continue
            got = [float(line.split()[3]) for line in res.stdout.splitlines() if line.startswith("step ")]
            check(len(got) == steps + 1, f"{tag} printed {len(got)} step losses")
            for i, (a, b) in enumerate(zip(got, ref_losses)):
                # float32 forward and AdamW: ~1e-6 relative a step, compounded over a few steps
                check(abs(a - b) <= 1e-4 + 1e-4 * abs(b), f"{tag} step {i}: loss {a} vs torch {b}")


def main():
    backends = ["cpu", "webgpu"] if "--cpu-only" not in sys.argv else ["cpu"]
    with tempfile.TemporaryDirectory() as root:
        # ---- LLaMA: grouped-query, untied lm_head
        L, C, F, V, NH, NKV, T, B = 2, 32, 48, 40, 4, 2, 9, 2
        P = lref.random_params(L, C, F, V, NH, NKV, False, 5)
        mpath, cpath = os.path.join(root, "l.safetensors"), os.path.join(root, "config.json")
        lref.save_safetensors(mpath, P)
        lref.write_config(cpath, lref.hf_config(L, C, F, V, NH, NKV, False, 16))
        tok = torch.randint(0, V, (B, T + 1), generator=torch.Generator().manual_seed(6)).numpy().astype(np.int32)
        fwd = lambda Pe, idx: lref.loss_fn(lref.forward(Pe, idx, L, NH, NKV, 10000.0, 1e-5), targets_of(tok))
        proj = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                "mlp.up_proj", "mlp.down_proj"]
        margs = lambda d: ["--model", mpath, "--config", cpath]
        case("llama", P, fwd, [f"model.layers.{l}.{p}" for l in range(L) for p in proj], "all-linear", 4, 8.0, False,
             tok, backends, margs, "", False)
        case("llama", P, fwd, [f"model.layers.{l}.{p}" for l in range(L) for p in proj[1:3]], ["k_proj", "v_proj"], 2,
             4.0, True, tok, backends, margs, "", False)
        # ---- GPT-2 (hub names, Conv1D [in, out] weights; PEFT names carry "transformer.")
        L, C, F, V, maxT, NH, T = 2, 16, 64, 30, 12, 2, 8
        Pg = gref.random_params(L, C, F, V, maxT, 7)
        gpath = os.path.join(root, "g.safetensors")
        gref.save_safetensors(gpath, Pg)
        tokg = torch.randint(0, V, (B, T + 1), generator=torch.Generator().manual_seed(8)).numpy().astype(np.int32)
        fwdg = lambda Pe, idx: gref.loss_fn(gref.forward(Pe, idx, L, NH), targets_of(tokg))
        case("gpt2", Pg, fwdg, [f"h.{l}.{p}" for l in range(L) for p in ("attn.c_attn", "attn.c_proj", "mlp.c_fc",
                                                                           "mlp.c_proj")],
             ["c_attn", "c_proj", "c_fc"], 3, 6.0, False, tokg, backends, lambda d: ["--model", gpath, "--heads", str(NH)],
             "transformer.", True)
        # ---- refusals, naming what is wrong
        tpath = os.path.join(root, "t.npy")
        np.save(tpath, tokg)
        bad = [("DoRA", {"use_dora": True}, "use_dora"), ("another type", {"peft_type": "IA3"}, "peft_type"),
               ("trained biases", {"bias": "all"}, "bias"), ("unknown module", {"target_modules": ["q_proj"]}, "q_proj")]
        for what, extra, word in bad:
            adir = os.path.join(root, "bad_" + what.replace(" ", "_"))
            write_adapter(adir, ["c_attn"], 2, 4.0, {}, extra=extra)
            res = run(["grad", "--model", gpath, "--heads", str(NH), "--tokens", tpath, "--lora-adapter", adir])
            check(res.returncode != 0 and word in res.stderr, f"adapter with {what} refused naming {word}: {res.stderr}")
        # a missing tensor and a stray one
        adir = os.path.join(root, "bad_tensors")
        A = np.zeros((2, C), np.float32)
        write_adapter(adir, ["c_attn"], 2, 4.0, {"base_model.model.transformer.h.0.attn.c_attn.lora_A.weight": A})
        res = run(["grad", "--model", gpath, "--heads", str(NH), "--tokens", tpath, "--lora-adapter", adir])
        check(res.returncode != 0 and "lora_B" in res.stderr, f"a missing lora_B is refused: {res.stderr}")
    return finish()


def targets_of(tok):
    return torch.from_numpy(tok[:, 1:].astype(np.int64))


if __name__ == "__main__":
    sys.exit(main())
