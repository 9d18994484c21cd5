#!/usr/bin/env python3
# hf_verify.py — checks a `wgtrain export` directory with Hugging Face transformers (not run in
# CI, which has no transformers): from_pretrained must load it with no missing, unexpected or
# mismatched tensor; its logits on a random token batch must equal wgtrain's (`wgtrain grad
# --logits` on the exported config.json + model.safetensors) within 1e-4 relative; and with the
# tokenizer files, AutoTokenizer loads them and a prompt is continued greedily by both
# transformers and (with --run) `wgtrain sample --temperature 0`, which must agree.
#   python3 tests/hf_verify.py HF_DIR [--run RUN_DIR] [--wgtrain build/wgtrain] [--device cpu|webgpu]
# With --families WORK_DIR (instead of HF_DIR) it checks every family of the LLaMA computation
# against transformers itself: for each of llama (plain, llama3 and linear RoPE scaling,
# attention_bias; tied and untied), mistral (with a sliding window the sequence fits in, one
# shorter than the sequence, and none), qwen2 (tied and untied), qwen3 (q/k norms; head_dim other
# than hidden / heads, and equal to it with attention_bias), gemma3_text (head_dim 256 tied, 16
# untied, 16 tied with a window shorter than the sequence; sliding and full layers), it builds a
# random small model with transformers' own class,
# saves it with save_pretrained in BF16 with a small max_shard_size (a sharded checkpoint with its
# index), and requires: `wgtrain grad --logits` on the shards equals transformers' logits of the
# same BF16 weights in float32; `train --init` + `export` gives a directory that from_pretrained
# loads with nothing missing, unexpected or mismatched and whose logits equal wgtrain's on it
# (1e-5 relative: float32 on both sides, the RoPE tables differing by float32 rounding).
#   python3 tests/hf_verify.py --families /tmp/wgt_hf_families [--device cpu|webgpu]
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

CLASSES = {"gpt2": GPT2LMHeadModel, "llama": LlamaForCausalLM}
for _name, _cls in (("mistral", "MistralForCausalLM"), ("qwen2", "Qwen2ForCausalLM"), ("qwen3", "Qwen3ForCausalLM"),
                    ("gemma3_text", "Gemma3ForCausalLM")):
    if hasattr(transformers, _cls):
        CLASSES[_name] = getattr(transformers, _cls)

passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    if ok:
        passed += 1
    else:
        failed += 1


def wg_logits(a, config, model, tok, tmp, tag):
    """wgtrain grad --logits on (config.json, weights: a file or a shard index), or None."""
    tp, lp = os.path.join(tmp, "tok.npy"), os.path.join(tmp, "logits.npy")
    np.save(tp, tok)
    r = subprocess.run([a.wgtrain, "grad", "--config", config, "--model", model, "--tokens", tp, "--logits", lp,
                        "--device", a.device], capture_output=True, text=True)
    check(r.returncode == 0, f"{tag}: wgtrain grad --logits runs {r.stderr.strip()}")
    return np.load(lp).astype(np.float64) if r.returncode == 0 else None


def hf_logits(model, tok):
    with torch.no_grad():
        return model(torch.from_numpy(tok[:, :-1].astype(np.int64))).logits.double().numpy()


def rel_err(got, want):
    return np.abs(got - want).max() / np.abs(want).max()


# family, config class keyword arguments (beyond the shared sizes)
FAMILY_CASES = [
    ("llama", "plain untied", {"tie_word_embeddings": False}),
    ("llama", "llama3 rope tied", {"tie_word_embeddings": True, "rope_theta": 500000.0, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32}}),
    ("llama", "linear rope, attention_bias", {"tie_word_embeddings": False, "attention_bias": True,
                                              "rope_scaling": {"rope_type": "linear", "factor": 4.0}}),
    ("mistral", "sliding window 64", {"tie_word_embeddings": False, "sliding_window": 64}),
    ("mistral", "no window, tied", {"tie_word_embeddings": True, "sliding_window": None}),
    ("qwen2", "untied", {"tie_word_embeddings": False}),
    ("qwen2", "tied", {"tie_word_embeddings": True}),
    ("qwen3", "head_dim 16 (hidden / heads 8), untied", {"tie_word_embeddings": False, "head_dim": 16}),
    ("qwen3", "head_dim 8, attention_bias, tied", {"tie_word_embeddings": True, "head_dim": 8, "attention_bias": True}),
    # Gemma-3: sliding and full layers (every second full) with their two RoPE bases, the window
    # (64) at the sequence (48) or above; head size 256 as released, and 16
    ("gemma3_text", "head_dim 256, tied", {"tie_word_embeddings": True, "head_dim": 256, "query_pre_attn_scalar": 256,
                                           "sliding_window": 64, "layer_types": ["sliding_attention", "full_attention"],
                                           "hidden_activation": "gelu_pytorch_tanh"}),
    ("gemma3_text", "head_dim 16, untied", {"tie_word_embeddings": False, "head_dim": 16, "query_pre_attn_scalar": 16,
                                            "sliding_window": 48, "layer_types": ["sliding_attention", "full_attention"],
                                            "hidden_activation": "gelu_pytorch_tanh"}),
    # a window (16) shorter than the sequence (48): the windowed mask decides the logits (Mistral's
    # every layer, Gemma-3's sliding layer)
    ("mistral", "sliding window 16 below the sequence", {"tie_word_embeddings": False, "sliding_window": 16}),
    ("gemma3_text", "head_dim 16, window 16 below the sequence, tied",
     {"tie_word_embeddings": True, "head_dim": 16, "query_pre_attn_scalar": 16, "sliding_window": 16,
      "layer_types": ["sliding_attention", "full_attention"], "hidden_activation": "gelu_pytorch_tanh"}),
]


def families(a):
    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(a.families, exist_ok=True)
    V, T = 101, 48
    data = os.path.join(a.families, "data")
    subprocess.run([sys.executable, os.path.join(here, "finetune_helper.py"), "shards", data, "--V", str(V), "--T",
                    str(T)], check=True)
    tok = np.random.RandomState(0).randint(0, V, (2, T + 1)).astype(np.int32)
    for k, (family, what, kw) in enumerate(FAMILY_CASES):
        tag = f"{family} ({what})"
        if family not in CLASSES:
            check(False, f"{tag}: this transformers has no class for {family}")
            continue
        cls = CLASSES[family]
        cfg_cls = transformers.AutoConfig.for_model(family).__class__
        cfg = cfg_cls(vocab_size=V, hidden_size=48, intermediate_size=88, num_hidden_layers=2, num_attention_heads=6,
                      num_key_value_heads=2 if k % 2 == 0 else 1, max_position_embeddings=64, rms_norm_eps=1e-5,
                      initializer_range=0.2, **kw)
        torch.manual_seed(k)
        model = cls(cfg).float().eval()
        with torch.no_grad():  # biases and norm weights away from their 0 / 1 init
            for n, p in model.named_parameters():
                if p.dim() == 1:
                    p.add_(0.2 * torch.randn_like(p))
        src = os.path.join(a.families, f"src_{k}")
        model.to(torch.bfloat16).save_pretrained(src, max_shard_size="20KB", safe_serialization=True)
        index = os.path.join(src, "model.safetensors.index.json")
        check(os.path.exists(index), f"{tag}: save_pretrained wrote a sharded checkpoint")
        ref = cls.from_pretrained(src, torch_dtype=torch.float32).eval()  # the BF16 weights, as float32
        want = hf_logits(ref, tok)
        with tempfile.TemporaryDirectory() as tmp:
            got = wg_logits(a, os.path.join(src, "config.json"), index, tok, tmp, tag + " shards")
            if got is not None:
                e = rel_err(got, want)
                check(e < a.tol, f"{tag}: logits of the BF16 shards, wgtrain vs transformers {e:.2e} (< {a.tol:g})")
            run, out = os.path.join(a.families, f"run_{k}"), os.path.join(a.families, f"export_{k}")
            r = subprocess.run([a.wgtrain, "train", "--init", src, "--data", data, "--out", run, "--steps", "0",
                                "--device", "cpu", "--batch", "1", "--seq", str(T)], capture_output=True, text=True)
            check(r.returncode == 0, f"{tag}: train --init of the shards {r.stderr.strip()}")
            r = subprocess.run([a.wgtrain, "export", "--run", run, "--out", out, "--force"], capture_output=True, text=True)
            check(r.returncode == 0, f"{tag}: export {r.stderr.strip()}")
            if r.returncode != 0:
                continue
            m2, info = cls.from_pretrained(out, output_loading_info=True, torch_dtype=torch.float32)
            problems = {x: y for x, y in info.items() if y}
            check(not problems, f"{tag}: from_pretrained(export) with nothing missing, unexpected or mismatched {problems}")
            check(type(m2.config).__name__ == type(cfg).__name__, f"{tag}: the export's config class {type(m2.config).__name__}")
            e = rel_err(hf_logits(m2.eval(), tok), want)
            check(e < a.tol, f"{tag}: transformers' logits of the export vs of the original {e:.2e} (< {a.tol:g})")
            got = wg_logits(a, os.path.join(out, "config.json"), os.path.join(out, "model.safetensors"), tok, tmp,
                            tag + " export")
            if got is not None:
                e = rel_err(got, hf_logits(m2, tok))
                check(e < a.tol, f"{tag}: the export's logits, wgtrain vs transformers {e:.2e} (< {a.tol:g})")
    print(f"{passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 else 1)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir", nargs="?")
    ap.add_argument("--families", metavar="WORK_DIR",
                    help="check every LLaMA-computation family against transformers (see the top of this file)")
    ap.add_argument("--run", help="the run directory that was exported: compares greedy continuations with wgtrain sample")
    ap.add_argument("--wgtrain", default=os.path.join(here, "..", "build", "wgtrain"))
    ap.add_argument("--device", default="cpu", help="wgtrain's backend for grad and sample (cpu or webgpu)")
    ap.add_argument("--prompt", default="The meaning of life is")
    ap.add_argument("--new-tokens", type=int, default=20)
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    print("transformers", transformers.__version__, "torch", torch.__version__)
    if a.families:
        if a.tol == 1e-4:
            a.tol = 1e-5
        return families(a)
    if not a.hf_dir:
        ap.error("give HF_DIR or --families WORK_DIR")
    cfg = json.load(open(os.path.join(a.hf_dir, "config.json")))
    cls = CLASSES[cfg["model_type"]]
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
        weights = os.path.join(a.hf_dir, "model.safetensors")
        if not os.path.exists(weights):
            weights = os.path.join(a.hf_dir, "model.safetensors.index.json")
        r = subprocess.run([a.wgtrain, "grad", "--config", os.path.join(a.hf_dir, "config.json"), "--model", weights,
                            "--tokens", tp, "--logits", lp, "--device", a.device], capture_output=True, text=True)
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
