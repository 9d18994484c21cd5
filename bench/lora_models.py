# lora_models.py — the models and the PyTorch side of bench/lora_1b.sh.
#   write WORK: random BF16 models of the real configs of Llama-3.2-1B and SmolLM2-360M (config.json
#     as published, weights N(0, 0.02)) in WORK/llama-3.2-1b and WORK/smollm2-360m, and llm.c token
#     shards in WORK/data (vocabulary 49152, which both accept).
#   peft WORK [--steps N]: PyTorch + PEFT on the same shapes (bf16 base, fp32 compute: the adapters
#     and the activations in fp32, the frozen weights bf16 upcast per GEMM, TF32 off; then, for
#     context, the bf16-compute run PEFT users usually make), LoRA r=16 on every linear
#     layer at B=1, T=2048 with gradient checkpointing, and the SmolLM2-360M shape's full fine-tuning
#     at B=4, T=2048 (fp32); prints tokens/s and torch.cuda.max_memory_allocated.
import argparse
import json
import os
import time

import numpy as np
import torch

LLAMA_1B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
            "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 64, "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
            "rope_theta": 500000.0, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
            "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
            "torch_dtype": "bfloat16"}
SMOLLM_360M = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 960,
               "intermediate_size": 2560, "num_hidden_layers": 32, "num_attention_heads": 15, "num_key_value_heads": 5,
               "vocab_size": 49152, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 100000.0,
               "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
               "torch_dtype": "bfloat16"}


def shapes(c):
    C, F, V, L = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
    kv = c["num_key_value_heads"] * C // c["num_attention_heads"]
    s = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,)}
    for l in range(L):
        p = f"model.layers.{l}."
        s.update({p + "self_attn.q_proj.weight": (C, C), p + "self_attn.k_proj.weight": (kv, C),
                  p + "self_attn.v_proj.weight": (kv, C), p + "self_attn.o_proj.weight": (C, C),
                  p + "mlp.gate_proj.weight": (F, C), p + "mlp.up_proj.weight": (F, C),
                  p + "mlp.down_proj.weight": (C, F), p + "input_layernorm.weight": (C,),
                  p + "post_attention_layernorm.weight": (C,)})
    return s


def write_bf16(path, c, seed):
    g = torch.Generator().manual_seed(seed)
    header, blobs, off = {}, [], 0
    for name, shp in shapes(c).items():
        t = torch.ones(shp) if len(shp) == 1 else 0.02 * torch.randn(shp, generator=g)
        raw = t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(shp), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def cmd_write(a):
    for name, c, seed in (("llama-3.2-1b", LLAMA_1B, 1), ("smollm2-360m", SMOLLM_360M, 2)):
        d = os.path.join(a.work, name)
        os.makedirs(d, exist_ok=True)
        json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2)
        if not os.path.exists(os.path.join(d, "model.safetensors")):
            write_bf16(os.path.join(d, "model.safetensors"), c, seed)
    write_tokens(os.path.join(a.work, "data"), 1 << 20)


def write_tokens(d, n_train, vocab=49152):
    """llm.c token shards of uniform random ids below vocab in d: n_train train tokens, 65536 val."""
    os.makedirs(d, exist_ok=True)
    r = np.random.RandomState(0)
    for name, n in (("train_000.bin", n_train), ("val_000.bin", 1 << 16)):
        hdr = np.zeros(256, np.int32)
        hdr[0], hdr[1], hdr[2] = 20240520, 1, n
        with open(os.path.join(d, name), "wb") as f:
            f.write(hdr.tobytes())
            f.write(r.randint(0, vocab, n).astype("<u2").tobytes())


def timed(model, params, B, T, V, steps, dtype_ctx=None):
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1)
    x = torch.randint(0, V, (B, T + 1), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    for i in range(steps + 3):
        if i == 3:
            torch.cuda.synchronize()
            t0 = time.time()
        out = model(input_ids=x[:, :-1]).logits.float()
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, V), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return B * T * steps / (time.time() - t0), torch.cuda.max_memory_allocated() / 2 ** 30


def upcast_frozen_linears(model):
    """The frozen base as wgtrain's --base-precision bf16 holds it: every nn.Linear weight stored in
    bf16 and widened to fp32 per GEMM (TF32 off, so the GEMMs are strict fp32); everything else fp32."""
    import torch.nn.functional as F
    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear):
            mod.weight.data = mod.weight.data.to(torch.bfloat16)
            mod.forward = (lambda m: lambda x, *_, **__: F.linear(x, m.weight.float(), m.bias))(mod)


def cmd_peft(a):
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    c = {k: v for k, v in LLAMA_1B.items() if k not in ("architectures", "model_type")}
    for compute in ("fp32", "bf16"):
        # fp32: wgtrain's configuration (bf16 storage, fp32 GEMMs); bf16: what PEFT users usually run
        # (bf16 GEMMs on tensor cores, which WebGPU cannot reach here), for context only
        m = LlamaForCausalLM(LlamaConfig(**c))
        if compute == "fp32":
            upcast_frozen_linears(m)
        else:
            m = m.to(torch.bfloat16)
        m = m.cuda()
        m.gradient_checkpointing_enable()
        m.enable_input_require_grads()
        pm = get_peft_model(m, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
        for n, p in pm.named_parameters():
            if "lora_" in n:
                p.data = p.data.float()  # fp32 adapters; the frozen base stays bf16
        tps, mem = timed(pm, [p for p in pm.parameters() if p.requires_grad], 1, 2048, c["vocab_size"], a.steps)
        print(f"peft llama-3.2-1b lora r16 bf16 base, {compute} compute: {tps:.0f} tokens/s, peak {mem:.2f} GiB")
        del pm, m
        torch.cuda.empty_cache()
    c = {k: v for k, v in SMOLLM_360M.items() if k not in ("architectures", "model_type")}
    m = LlamaForCausalLM(LlamaConfig(**c)).float().cuda()
    m.gradient_checkpointing_enable()
    tps, mem = timed(m, list(m.parameters()), 4, 2048, c["vocab_size"], a.steps)
    print(f"torch smollm2-360m full fp32 with checkpointing: {tps:.0f} tokens/s, peak {mem:.2f} GiB")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("work")
    p = sub.add_parser("peft")
    p.add_argument("work")
    p.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    {"write": cmd_write, "peft": cmd_peft}[a.cmd](a)


if __name__ == "__main__":
    main()
