#!/usr/bin/env python3
# hf_verify.py — checks a `wgtrain export` directory with Hugging Face transformers (not run in
# CI, which has no transformers): from_pretrained must load it with no missing, unexpected or
# mismatched tensor; its logits on a random token batch must equal wgtrain's (`wgtrain grad
# --logits` on the exported config.json + model.safetensors) within 1e-4 relative; and with the
# tokenizer files, AutoTokenizer loads them and a prompt is continued greedily by both
# transformers and (with --run) `wgtrain sample --temperature 0`, which must agree.
#   python3 tests/hf_verify.py HF_DIR [--run RUN_DIR] [--wgtrain build/wgtrain] [--device cpu|webgpu]
# Prints "N passed, N failed"; the exit code is the verdict.
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers
from transformers import AutoTokenizer, GPT2LMHeadModel, LlamaForCausalLM

passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    if ok:
        passed += 1
    else:
        failed += 1


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("--run", help="the run directory that was exported: compares greedy continuations with wgtrain sample")
    ap.add_argument("--wgtrain", default=os.path.join(here, "..", "build", "wgtrain"))
    ap.add_argument("--device", default="cpu", help="wgtrain's backend for grad and sample (cpu or webgpu)")
    ap.add_argument("--prompt", default="The meaning of life is")
    ap.add_argument("--new-tokens", type=int, default=20)
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    print("transformers", transformers.__version__, "torch", torch.__version__)
    cfg = json.load(open(os.path.join(a.hf_dir, "config.json")))
    cls = {"gpt2": GPT2LMHeadModel, "llama": LlamaForCausalLM}[cfg["model_type"]]
    model, info = cls.from_pretrained(a.hf_dir, output_loading_info=True, torch_dtype=torch.float32)
    model.eval()
    problems = {k: v for k, v in info.items() if v}
    check(not problems, f"{cls.__name__}.from_pretrained loads it with nothing missing, unexpected or mismatched {problems}")

    # logits on a random batch against wgtrain's
    V, maxT = model.config.vocab_size, cfg.get("n_positions", cfg.get("max_position_embeddings"))
    T = min(64, maxT)
    tok = np.random.RandomState(0).randint(0, V, (2, T + 1)).astype(np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        tp, lp = os.path.join(tmp, "tok.npy"), os.path.join(tmp, "logits.npy")
        np.save(tp, tok)
        r = subprocess.run([a.wgtrain, "grad", "--config", os.path.join(a.hf_dir, "config.json"), "--model",
                            os.path.join(a.hf_dir, "model.safetensors"), "--tokens", tp, "--logits", lp,
                            "--device", a.device], capture_output=True, text=True)
        check(r.returncode == 0, "wgtrain grad --logits on the export " + r.stderr.strip())
        if r.returncode == 0:
            got = np.load(lp).astype(np.float64)
            with torch.no_grad():
                want = model(torch.from_numpy(tok[:, :-1].astype(np.int64))).logits.double().numpy()
            rel = np.abs(got - want).max() / np.abs(want).max()
            check(rel < a.tol, f"logits: max |wgtrain - transformers| / max |transformers| = {rel:.2e} (< {a.tol:g})")

    # the tokenizer and a greedy continuation
    if not os.path.exists(os.path.join(a.hf_dir, "vocab.json")):
        print("no tokenizer files in the export (the run was not on GPT-2's tokenizer): no text continuation")
    else:
        tk = AutoTokenizer.from_pretrained(a.hf_dir)
        ids = tk(a.prompt, return_tensors="pt").input_ids
        check(ids.shape[1] > 0, f"AutoTokenizer ({type(tk).__name__}) encodes the prompt: {ids[0].tolist()}")
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=a.new_tokens, do_sample=False, pad_token_id=tk.eos_token_id)
        text = tk.decode(out[0])
        print("transformers greedy:", repr(text))
        if a.run:
            r = subprocess.run([a.wgtrain, "sample", "--run", a.run, "--prompt", a.prompt, "--tokens", str(a.new_tokens),
                                "--temperature", "0", "--device", a.device], capture_output=True, text=True)
            print("wgtrain greedy:     ", repr(r.stdout))
            # wgtrain prints the prompt then the continuation (maybe a final newline)
            check(r.returncode == 0 and r.stdout.rstrip("\n") == text.rstrip("\n") if r.returncode == 0 else False,
                  "wgtrain sample --temperature 0 continues the prompt as transformers' greedy generate does")
    print(f"{passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    main()
