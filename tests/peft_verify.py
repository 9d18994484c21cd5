#!/usr/bin/env python3
# peft_verify.py — wgtrain's LoRA against Hugging Face PEFT itself (not run in CI, which has neither
# transformers nor peft; run it where both are installed). For a LLaMA (grouped-query, untied) and a
# GPT-2 (Conv1D weights: PEFT's fan_in_fan_out) built with transformers' own classes and random
# weights, saved with save_pretrained:
#   1. `wgtrain train --init BASE --lora R` trains a few steps and `wgtrain export` writes a PEFT
#      adapter directory; PeftModel.from_pretrained(base, dir) must load it with no missing or
#      unexpected adapter tensor, and its logits on a random batch must equal wgtrain's
#      (`wgtrain grad --lora-adapter dir --logits`) within 1e-4 relative (float32 on both sides);
#   2. the adapter's gradients: PEFT's loss.backward() on the same batch against `wgtrain grad
#      --lora-adapter dir --out` (2e-4 of each tensor's largest entry, float32 sums);
#   3. `wgtrain export --merge` against PEFT's merge_and_unload(): every weight within 1e-6
#      relative, and transformers' logits of the merged directory equal the PEFT model's.
#   python3 tests/peft_verify.py WORK_DIR [--wgtrain build/wgtrain] [--device cpu|webgpu]
# Prints "N passed, N failed"; the exit code is the verdict.
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
import transformers
from peft import PeftModel
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_torch_ref as gref  # noqa: E402  (safetensors reading)

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL", what)


def run(W, args):
    r = subprocess.run([W] + args, capture_output=True, text=True)
    if r.returncode:
        print(r.stdout, r.stderr)
    return r


def shards(d, V, T, seed):
    """llm.c shards: a train shard of T+1 tokens and a short validation one."""
    os.makedirs(d, exist_ok=True)
    r = np.random.RandomState(seed)
    for name, n in (("train_000.bin", 4 * T + 1), ("val_000.bin", 3 * T + 1)):
        hdr = np.zeros(256, np.int32)
        hdr[0], hdr[1], hdr[2] = 20240520, 1, n
        with open(os.path.join(d, name), "wb") as f:
            f.write(hdr.tobytes())
            f.write(r.randint(0, V, n).astype("<u2").tobytes())


def case(W, work, name, model, V, T, device, lora_flags):
    torch.manual_seed(0)
    base = os.path.join(work, name + "_base")
    model.save_pretrained(base, safe_serialization=True)
    data, rund, adir, mdir = (os.path.join(work, name + s) for s in ("_data", "_run", "_adapter", "_merged"))
    shutil.rmtree(rund, ignore_errors=True)  # a run of an earlier check in the same WORK_DIR: this one starts afresh
    shards(data, V, T, 1)
    r = run(W, ["train", "--init", base, "--data", data, "--out", rund, "--device", device, "--batch", "2", "--seq",
                str(T), "--steps", "5", "--lr", "1e-2", "--warmup", "0", "--val-batches", "1"] + lora_flags)
    check(r.returncode == 0, f"{name}: wgtrain train --lora")
    r = run(W, ["export", "--run", rund, "--out", adir, "--force"])
    check(r.returncode == 0, f"{name}: wgtrain export (adapter)")
    r = run(W, ["export", "--run", rund, "--out", mdir, "--force", "--merge"])
    check(r.returncode == 0, f"{name}: wgtrain export --merge")
    # a batch
    tok = np.random.RandomState(2).randint(0, V, (2, T + 1)).astype(np.int32)
    tpath, lpath, gpath = (os.path.join(work, name + s) for s in ("_tok.npy", "_logits.npy", "_grads.safetensors"))
    np.save(tpath, tok)
    st = os.path.join(base, "model.safetensors")
    r = run(W, ["grad", "--model", st, "--config", os.path.join(base, "config.json"), "--tokens", tpath, "--backend",
                device, "--lora-adapter", adir, "--logits", lpath, "--out", gpath])
    check(r.returncode == 0, f"{name}: wgtrain grad --lora-adapter")
    ours = np.load(lpath)
    # 1. PEFT loads the adapter: logits
    pm = PeftModel.from_pretrained(model, adir, is_trainable=True)  # (trainable: the gradients of step 2)
    pm.eval()
    inp = torch.from_numpy(tok[:, :-1].astype(np.int64))
    tgt = torch.from_numpy(tok[:, 1:].astype(np.int64))
    with torch.no_grad():
        ref = pm(inp).logits.float().numpy()
    err = np.abs(ours - ref).max() / np.abs(ref).max()
    check(err <= 1e-4, f"{name}: PEFT's logits against wgtrain's: {err:.3g} relative")
    print(f"{name}: logits agree within {err:.2e} of the largest")
    # 2. gradients of the adapters
    pm.train()
    for mod in pm.modules():  # no dropout: the same function on both sides
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    pm.zero_grad()
    out = pm(inp).logits
    loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]).float(), tgt.reshape(-1))
    loss.backward()
    G = gref.load_safetensors(gpath)
    want = {}
    for n_, p in pm.named_parameters():
        if "lora_" in n_:
            want[n_.replace(".default", "")] = p.grad.numpy()
    check(sorted(G) == sorted(want), f"{name}: gradient names differ: {sorted(set(G) ^ set(want))[:6]}")
    worst = 0.0
    for k, g in want.items():
        if k in G:
            e = np.abs(G[k] - g).max() / (np.abs(g).max() + 1e-30)
            worst = max(worst, e)
            check(e <= 2e-4, f"{name}: gradient {k}: {e:.3g} of its largest entry")
    print(f"{name}: adapter gradients agree within {worst:.2e} of each tensor's largest entry")
    # 3. the merge
    merged = pm.merge_and_unload()
    msd = {k: v.detach().float().numpy() for k, v in merged.state_dict().items()}
    ours_m = gref.load_safetensors(os.path.join(mdir, "model.safetensors"))
    worst = 0.0
    for k, v in ours_m.items():
        ref_v = msd.get(k)
        if ref_v is None:
            continue
        if ref_v.shape != v.shape:
            ref_v = ref_v.T
        worst = max(worst, np.abs(v - ref_v).max() / (np.abs(ref_v).max() + 1e-30))
    check(worst <= 1e-6, f"{name}: merged weights against merge_and_unload: {worst:.3g}")
    mm = type(model).from_pretrained(mdir)
    mm.eval()
    with torch.no_grad():
        lm = mm(inp).logits.float().numpy()
    err = np.abs(lm - ref).max() / np.abs(ref).max()
    check(err <= 1e-4, f"{name}: the merged export's logits against PEFT's: {err:.3g}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--wgtrain", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                                                      "wgtrain"))
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    print(f"transformers {transformers.__version__}")
    V, T = 128, 16
    torch.manual_seed(1)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                         rms_norm_eps=1e-5, tie_word_embeddings=False))
    case(a.wgtrain, a.work, "llama", llama.float(), V, T, a.device,
         ["--lora", "8", "--lora-alpha", "16", "--lora-targets", "all-linear"])
    torch.manual_seed(2)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=64, n_layer=2, n_head=4, n_positions=64))
    case(a.wgtrain, a.work, "gpt2", gpt2.float(), V, T, a.device,
         ["--lora", "4", "--lora-alpha", "8", "--lora-targets", "qkv,o,up,down", "--lora-rslora"])
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
