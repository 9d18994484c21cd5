#!/usr/bin/env python3
# torch_peer.py — the peer that bench_matmul and bench_attention compare against in the same run:
# PyTorch's cuBLAS fp32 GEMMs (TF32 off) at the GEMM shapes of a GPT-2 124M step in the three
# forms of the model's ops, and scaled-dot-product attention (causal, forward and backward) at
# the attention sizes bench_attention times. Prints one line per measurement:
#   gemm <shape> <op> <N> <C> <OC> <ms> <TFLOP/s>
#   attention <B> <T> <NH> <HS> <fwd ms> <fwd+bwd ms> <backend>
# which `bench_matmul --peer FILE` and `bench_attention --peer FILE` read (bench/README.md).
# Method: CUDA events around `reps` calls after 3 warm-up calls, best of 3 batches.
import sys

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) / reps)
    return best


# the shapes of bench_matmul.c (name, N rows, C in, OC out); `torch_peer.py ROWS VOCAB` as
# `bench_matmul --rows ROWS --vocab VOCAB` (8192 and 50257 by default)
R = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
V = int(sys.argv[2]) if len(sys.argv) > 2 else 50257
SHAPES = [("qkv", R, 768, 2304), ("attproj", R, 768, 768), ("fc", R, 768, 3072),
          ("fcproj", R, 3072, 768), ("lm_head", R, 768, V), ("square", 4096, 4096, 4096)]

for name, N, C, OC in SHAPES:
    x = torch.randn(N, C, device=dev)
    w = torch.randn(OC, C, device=dev)
    dy = torch.randn(N, OC, device=dev)
    out = torch.empty(N, OC, device=dev)
    dx = torch.empty(N, C, device=dev)
    dw = torch.empty(OC, C, device=dev)
    flop = 2.0 * N * C * OC
    forms = [("matmul", lambda: torch.matmul(x, w.t(), out=out)),      # out = x·Wᵀ
             ("matmul_t", lambda: torch.matmul(dy, w, out=dx)),        # dx = dy·W
             ("matmul_at", lambda: torch.matmul(dy.t(), x, out=dw))]   # dW = dyᵀ·x
    for op, fn in forms:
        ms = timed(fn)
        print(f"gemm {name} {op} {N} {C} {OC} {ms:.4f} {flop / ms / 1e9:.2f}", flush=True)
    del x, w, dy, out, dx, dw
    torch.cuda.empty_cache()

# attention: GPT-2's B=8 T=1024 NH=12 HS=64, and head size 128 at the same width
for B, T, NH, HS in [(8, 1024, 12, 64), (8, 1024, 6, 128), (4, 1024, 4, 256)]:
    q, k, v = (torch.randn(B, NH, T, HS, device=dev, requires_grad=True) for _ in range(3))
    g = torch.randn(B, NH, T, HS, device=dev)

    def fwd():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def fwdbwd():
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y.backward(g)

    with torch.no_grad():
        f = timed(fwd)
    fb = timed(fwdbwd)
    from torch.nn.attention import sdpa_kernel, SDPBackend
    backend = "auto"
    for cand, label in [(SDPBackend.EFFICIENT_ATTENTION, "efficient"), (SDPBackend.FLASH_ATTENTION, "flash")]:
        try:
            with sdpa_kernel([cand]):
                fwdbwd()
            backend = label  # the first fp32-capable backend the dispatcher accepts
            break
        except RuntimeError:
            continue
    print(f"attention {B} {T} {NH} {HS} {f:.4f} {fb:.4f} {backend}", flush=True)
print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}", file=sys.stderr)
