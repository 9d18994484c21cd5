# torch_gpt2.py — the peer for wgtrain's training-speed benchmark: the same GPT-2 training step
# (tanh GeLU, LayerNorm, causal attention, tied lm_head, AdamW with weight decay on matrices,
# global-norm clipping) in plain PyTorch eager mode, strict fp32 (TF32 off), timed over N steps
# after warm-up. Prints "torch tokens/s X".
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {"tiny": (4, 4, 128, 512, 512, 128, 8), "small": (6, 6, 384, 1536, 16384, 256, 8),
           "gpt2-124m": (12, 12, 768, 3072, 50257, 1024, 8), "seeds": (12, 12, 768, 3072, 16384, 512, 8)}


class Block(nn.Module):
    def __init__(s, C, NH, Fd):
        super().__init__()
        s.ln_1, s.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        s.c_attn, s.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        s.c_fc, s.mlp_proj = nn.Linear(C, Fd), nn.Linear(Fd, C)
        s.NH = NH

    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.c_attn(s.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, s.NH, C // s.NH).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch < 2.0 (Debian 12's 1.13)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + s.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + s.mlp_proj(F.gelu(s.c_fc(s.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(s, L, NH, C, Fd, V, T):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        s.h = nn.ModuleList(Block(C, NH, Fd) for _ in range(L))
        s.ln_f = nn.LayerNorm(C)

    def forward(s, idx, targets):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in s.h:
            x = b(x)
        logits = s.ln_f(x) @ s.wte.weight.T
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def parse_args(presets, default):
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default=default, choices=presets)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # strict fp32
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    return a


def time_steps(m, V, T, B, a):
    """AdamW (decay on matrices), clipping, one loss readback a step, as wgtrain does; prints tokens/s."""
    decay = [p for p in m.parameters() if p.dim() == 2]
    no_decay = [p for p in m.parameters() if p.dim() == 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4)
    idx = torch.randint(0, V, (B, T + 1), device=a.device)
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            sync()
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = m(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        loss.item()  # one readback per step, as wgtrain does
    sync()
    dt = time.perf_counter() - t0
    print(f"torch {a.device} threads={torch.get_num_threads()} step time {1e3 * dt / a.steps:.2f} ms, "
          f"torch tokens/s {a.steps * B * T / dt:.0f}")


def main():
    a = parse_args(PRESETS, "tiny")
    L, NH, C, Fd, V, T, B = PRESETS[a.preset]
    time_steps(GPT(L, NH, C, Fd, V, T).to(a.device), V, T, B, a)


if __name__ == "__main__":
    main()
