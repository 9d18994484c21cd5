#!/usr/bin/env python3
# families_1b.py — full fine-tuning of the 1B-class shapes of today's families on the GPU, against
# PyTorch strict fp32 on the same GPU (docs/huggingface.md): for Llama-3.2-1B and Qwen3-0.6B (their
# published config.json, random weights), transformers writes the model as save_pretrained does for
# such a model: BF16, sharded, with model.safetensors.index.json; then
#   - wgtrain: `train --init` from those shards in f32 and in f16 mixed precision: tokens/s, the
#     memory plan's total and the device buffers' peak;
#   - PyTorch: the same model class in fp32 (TF32 off, SDPA attention), AdamW, the same batch:
#     tokens/s and torch.cuda.max_memory_allocated;
#   - the round trip: `export` of the f32 run, from_pretrained of it with nothing missing, unexpected
#     or mismatched, and its logits on a random batch equal to `wgtrain grad --logits` on the export
#     (1e-4 relative: float32 on both sides, summation orders differing).
# Needs transformers and a CUDA GPU.
#   python3 bench/families_1b.py WORK_DIR [--wgtrain build/wgtrain] [--steps 10] [--batch 4] [--seq 1024]
import argparse
import os
import re
import subprocess
import time

import numpy as np
import torch

import lora_models  # beside this file: the shared configs and the token shards

# Llama-3.2-1B's published config (bench/lora_models.py), with its token ids
LLAMA_1B = dict(lora_models.LLAMA_1B, bos_token_id=128000, eos_token_id=128001)
QWEN3_06B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
             "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
             "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
             "rope_theta": 1000000.0, "rope_scaling": None, "tie_word_embeddings": True, "hidden_act": "silu",
             "attention_bias": False, "attention_dropout": 0.0, "use_sliding_window": False, "sliding_window": None,
             "max_window_layers": 28, "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16"}
MODELS = (("llama-3.2-1b", LLAMA_1B), ("qwen3-0.6b", QWEN3_06B))
DATA_VOCAB = 49152  # token ids of the random data: below both vocabularies, and 16-bit shards hold them


def write_models(work):
    from transformers import AutoConfig, AutoModelForCausalLM
    for name, c in MODELS:
        d = os.path.join(work, name)
        if os.path.exists(os.path.join(d, "model.safetensors.index.json")):
            continue
        cfg = AutoConfig.for_model(c["model_type"], **{k: v for k, v in c.items() if k not in ("model_type", "torch_dtype")})
        torch.manual_seed(1)
        with torch.device("cuda"):
            m = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
        m.save_pretrained(d, max_shard_size="1GB")
        del m
        torch.cuda.empty_cache()
    lora_models.write_tokens(os.path.join(work, "data"), 1 << 21, DATA_VOCAB)


def torch_peer(work, name, B, T, steps):
    from transformers import AutoModelForCausalLM
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    m = AutoModelForCausalLM.from_pretrained(os.path.join(work, name), torch_dtype=torch.float32,
                                             attn_implementation="sdpa").cuda()
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, weight_decay=0.1)
    x = torch.randint(0, DATA_VOCAB, (B, T + 1), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    for i in range(steps + 2):
        if i == 2:
            torch.cuda.synchronize()
            t0 = time.time()
        logits = m(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    tps = B * T * steps / (time.time() - t0)
    mem = torch.cuda.max_memory_allocated() / 2 ** 30
    del m, opt
    torch.cuda.empty_cache()
    return tps, mem


def wgtrain_run(a, name, precision):
    run = os.path.join(a.work, f"run_{name}_{precision}")
    subprocess.run(["rm", "-rf", run], check=True)
    # two intervals of log lines: the first holds the start (pipelines, first uploads), the last is timed
    cmd = [a.wgtrain, "train", "--init", os.path.join(a.work, name), "--data", os.path.join(a.work, "data"),
           "--out", run, "--device", "webgpu", "--adapter", "gpu", "--batch", str(a.batch), "--seq", str(a.seq),
           "--steps", str(2 * a.steps), "--warmup", "0", "--lr", "1e-5", "--val-every", "0", "--val-batches", "1",
           "--log-every", str(a.steps), "--precision", precision]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-600:], r.stderr[-2000:], sep="\n", flush=True)
    if r.returncode != 0:
        return None
    tps = [float(x) for x in re.findall(r"\| ([0-9.]+) tok/s", r.stdout)]
    plan = re.search(r"train:\s+total\s+([0-9.]+) (MiB|GiB)", r.stdout)
    peak = re.search(r"device buffers: peak ([0-9.]+) MiB", r.stdout)
    return {"run": run, "tps": tps[-1] if tps else float("nan"), "wall_s": time.time() - t0,
            "plan_gib": float(plan.group(1)) / (1024 if plan and plan.group(2) == "MiB" else 1) if plan else float("nan"),
            "peak_gib": float(peak.group(1)) / 1024 if peak else float("nan")}


def round_trip(a, name, run):
    from transformers import AutoModelForCausalLM
    exp = os.path.join(a.work, f"export_{name}")
    subprocess.run(["rm", "-rf", exp], check=True)
    subprocess.run([a.wgtrain, "export", "--run", run, "--out", exp, "--max-shard-size", "2GB"], check=True)
    m, info = AutoModelForCausalLM.from_pretrained(exp, torch_dtype=torch.float32, output_loading_info=True)
    clean = not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    tok = np.random.RandomState(3).randint(0, DATA_VOCAB, (2, 65)).astype(np.int32)
    tp, lp = os.path.join(a.work, "rt_tok.npy"), os.path.join(a.work, "rt_logits.npy")
    np.save(tp, tok)
    weights = os.path.join(exp, "model.safetensors.index.json")
    if not os.path.exists(weights):
        weights = os.path.join(exp, "model.safetensors")
    subprocess.run([a.wgtrain, "grad", "--config", os.path.join(exp, "config.json"), "--model", weights, "--tokens", tp,
                    "--logits", lp, "--backend", "webgpu", "--adapter", "gpu"], check=True, capture_output=True)
    m = m.cuda().eval()
    with torch.no_grad():
        want = m(torch.from_numpy(tok[:, :-1].astype(np.int64)).cuda()).logits.double().cpu().numpy()
    got = np.load(lp).astype(np.float64)
    err = np.abs(got - want).max() / np.abs(want).max()
    del m
    torch.cuda.empty_cache()
    return clean, err, sorted(os.listdir(exp))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--wgtrain", default="build/wgtrain")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    write_models(a.work)
    rows, failed = [], 0
    for name, _ in MODELS:
        w32 = wgtrain_run(a, name, "f32")
        w16 = wgtrain_run(a, name, "f16")
        if w16 is not None:  # a 1B run's checkpoint is 15 GB: keep the disk for the next
            subprocess.run(["rm", "-rf", w16["run"]], check=True)
        t_tps, t_mem = torch_peer(a.work, name, a.batch, a.seq, a.steps)
        for prec, w in (("f32", w32), ("f16", w16)):
            if w is None:
                failed += 1
                print(f"FAIL {name} {prec}: wgtrain train failed")
                continue
            rows.append(f"| {name} | {prec} | {w['tps']:.0f} | {t_tps:.0f} | {w['tps'] / t_tps:.2f}x | "
                        f"{w['plan_gib']:.2f} | {w['peak_gib']:.2f} | {t_mem:.2f} |")
            print(rows[-1], flush=True)
        if w32 is not None:
            clean, err, files = round_trip(a, name, w32["run"])
            ok = clean and err < 1e-4
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}: export -> from_pretrained clean={clean}, logits rel err {err:.2e}; "
                  f"files {files}", flush=True)
            subprocess.run(["rm", "-rf", w32["run"], os.path.join(a.work, f"export_{name}")], check=True)
    print(f"\nB={a.batch}, T={a.seq}; PyTorch strict fp32 (TF32 off), AdamW; wgtrain --init from sharded BF16")
    print("| model | wgtrain precision | wgtrain tok/s | PyTorch fp32 tok/s | ratio | plan GiB | wgtrain peak GiB | "
          "PyTorch peak GiB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
