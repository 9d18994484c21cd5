# torch_llama.py — the peer for wgtrain's LLaMA training-speed benchmark: the same training
# step as wgtrain's llama family (RMSNorm, rotate-half RoPE, grouped-query causal attention
# through SDPA, SwiGLU MLP, untied lm_head, no biases, AdamW with weight decay on matrices,
# global-norm clipping) in plain PyTorch eager mode, strict fp32 (TF32 off), timed over N steps
# after warm-up. Prints "torch tokens/s X".
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_gpt2 import parse_args, time_steps  # the same timed step, optimizer and settings

# L, NH, NKV, C, F, V, T, B
PRESETS = {"llama-tiny": (4, 4, 2, 128, 352, 512, 64, 8), "llama-124m": (12, 12, 4, 768, 2048, 50257, 1024, 8)}


class RMSNorm(nn.Module):
    def __init__(s, C, eps=1e-5):
        super().__init__()
        s.weight, s.eps = nn.Parameter(torch.ones(C)), eps

    def forward(s, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + s.eps) * s.weight


def rope_tables(T, HS, theta, device):
    inv = 1.0 / theta ** (torch.arange(0, HS, 2, device=device).float() / HS)
    f = torch.outer(torch.arange(T, device=device).float(), inv)
    emb = torch.cat((f, f), dim=-1)
    return emb.cos(), emb.sin()


def rotate(x, cos, sin):
    h = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., h:], x[..., :h]), dim=-1) * sin


class Block(nn.Module):
    def __init__(s, C, NH, NKV, Fd):
        super().__init__()
        s.NH, s.NKV, s.HS = NH, NKV, C // NH
        s.ln1, s.ln2 = RMSNorm(C), RMSNorm(C)
        s.q, s.k, s.v = (nn.Linear(C, n * s.HS, bias=False) for n in (NH, NKV, NKV))
        s.o = nn.Linear(C, C, bias=False)
        s.gate, s.up, s.down = nn.Linear(C, Fd, bias=False), nn.Linear(C, Fd, bias=False), nn.Linear(Fd, C, bias=False)

    def forward(s, x, cos, sin):
        B, T, C = x.shape
        h = s.ln1(x)
        q = s.q(h).view(B, T, s.NH, s.HS).transpose(1, 2)
        k = s.k(h).view(B, T, s.NKV, s.HS).transpose(1, 2)
        v = s.v(h).view(B, T, s.NKV, s.HS).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        g = s.NH // s.NKV
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.o(y.transpose(1, 2).reshape(B, T, C))
        h = s.ln2(x)
        return x + s.down(F.silu(s.gate(h)) * s.up(h))


class Llama(nn.Module):
    def __init__(s, L, NH, NKV, C, Fd, V):
        super().__init__()
        s.embed = nn.Embedding(V, C)
        s.layers = nn.ModuleList(Block(C, NH, NKV, Fd) for _ in range(L))
        s.norm, s.lm_head = RMSNorm(C), nn.Linear(C, V, bias=False)
        s.HS = C // NH

    def forward(s, idx, targets):
        cos, sin = rope_tables(idx.shape[1], s.HS, 10000.0, idx.device)
        x = s.embed(idx)
        for b in s.layers:
            x = b(x, cos, sin)
        logits = s.lm_head(s.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    a = parse_args(PRESETS, "llama-tiny")
    L, NH, NKV, C, Fd, V, T, B = PRESETS[a.preset]
    time_steps(Llama(L, NH, NKV, C, Fd, V).to(a.device), V, T, B, a)


if __name__ == "__main__":
    main()
