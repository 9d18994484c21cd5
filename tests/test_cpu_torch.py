#!/usr/bin/env python3
"""test_cpu_torch.py — the C reference of cross_entropy (label smoothing alpha, z-loss beta,
ignored rows, dlogits in place) against PyTorch, in loss and gradient.

The C side runs through `wgtrain op cross_entropy --backend cpu` on .npy files, the same entry
point every kernel test uses, so nothing here links against the library. PyTorch computes the
reference in float64 from the very float32 logits the C code sees:
  loss_r = F.cross_entropy(l_r, t_r, label_smoothing=alpha) + beta * logsumexp(l_r)^2
for rows with t_r < V, 0 for the others, and dlogits = d(sum_r loss_r * inv_norm)/dlogits by
autograd. PyTorch's label smoothing mixes (1-alpha)*one_hot + alpha/V, which is docs/kernels.md#cross_entropy's
target distribution, so the two definitions agree term for term.

Tolerances (|c - ref| <= atol + rtol*|ref|): the C reference reduces each row in double and
rounds once to float32, so it should match a float64 reference to float32 rounding (6e-8
relative). We allow rtol 1e-5 and atol 1e-6 on losses (O(1..10) values) and atol 1e-7 on
dlogits, whose entries go down to p/N ~ 1e-6 at V = 50257: ~100x float32 rounding, far below
the effect of any wrong term (alpha/V, 2*beta*lse*p, inv_norm are each >= 1e-5 relative here).
`--backend webgpu` runs the same cases on the GPU kernel with float32 reductions over up to
50257 terms, and so gets 10x looser bounds.

Usage: /usr/bin/python3 tests/test_cpu_torch.py [--backend cpu|webgpu] [--bin build/wgtrain]
Prints "N passed, N failed"; the exit code is the verdict.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOL = {  # backend: (loss atol, loss rtol, dlogits atol, dlogits rtol)
    "cpu": (1e-6, 1e-5, 1e-7, 1e-5),
    "webgpu": (1e-5, 1e-4, 1e-6, 1e-4),
}

passed = 0
failed = 0


def report(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what} {detail}", file=sys.stderr)


def torch_reference(logits, targets, alpha, beta, inv_norm):
    """Per-row losses and dlogits of docs/kernels.md#cross_entropy by PyTorch autograd, in float64."""
    R, V = logits.shape
    l = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    t = torch.tensor(targets.astype(np.int64))
    valid = t < V
    t_safe = torch.where(valid, t, torch.zeros_like(t))  # any class; the row is masked below
    ce = F.cross_entropy(l, t_safe, reduction="none", label_smoothing=alpha)
    lse = torch.logsumexp(l, dim=1)
    rows = torch.where(valid, ce + beta * lse * lse, torch.zeros_like(ce))
    (rows.sum() * inv_norm).backward()
    return rows.detach().numpy(), l.grad.numpy()


def run_c(tmp, binary, backend, logits, targets, alpha, beta, inv_norm):
    """Runs the kernel through `wgtrain op`; returns (losses, dlogits) or raises."""
    lp, tp = os.path.join(tmp, "logits.npy"), os.path.join(tmp, "targets.npy")
    dp, sp = os.path.join(tmp, "dlogits.npy"), os.path.join(tmp, "losses.npy")
    np.save(lp, logits)
    np.save(tp, targets)
    cmd = [binary, "op", "cross_entropy", "--backend", backend,
           "--in", f"logits={lp}", "--in", f"targets={tp}",
           "--set", f"alpha={alpha!r}", "--set", f"beta={beta!r}"]
    if inv_norm is not None:
        cmd += ["--set", f"inv_norm={inv_norm!r}"]
    cmd += ["--out", f"logits={dp}", "--out", f"losses={sp}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n  exit {r.returncode}: {r.stderr.strip()}")
    return np.load(sp), np.load(dp)


def close(got, ref, atol, rtol):
    """(ok, detail) for |got - ref| <= atol + rtol*|ref| elementwise; shapes must agree."""
    if got.shape != ref.shape:
        return False, f"shape {got.shape} vs {ref.shape}"
    err = np.abs(got.astype(np.float64) - ref) - (atol + rtol * np.abs(ref))
    if not np.all(np.isfinite(got)):
        return False, "non-finite output"
    i = int(np.argmax(err))
    ok = bool(err.flat[i] <= 0)
    return ok, f"worst at {np.unravel_index(i, ref.shape)}: got {got.flat[i]:.9g} ref {ref.flat[i]:.9g}"


def case(args, tmp, name, logits, targets, alpha, beta, set_inv_norm):
    V = logits.shape[1]
    nvalid = int(np.sum(targets.astype(np.int64) < V))
    inv_norm = 1.0 / nvalid if nvalid else 0.0
    # When inv_norm is not passed, `wgtrain op` derives 1/valid itself: both paths are tested.
    inv_arg = float(np.float32(inv_norm)) if set_inv_norm else None
    ref_loss, ref_grad = torch_reference(logits, targets, alpha, float(np.float32(beta)),
                                         float(np.float32(inv_norm)))
    try:
        loss, grad = run_c(tmp, args.bin, args.backend, logits, targets, alpha, beta, inv_arg)
    except RuntimeError as e:
        report(False, f"{name}: wgtrain op failed", str(e))
        return
    la, lr, ga, gr = TOL[args.backend]
    ok, detail = close(loss.reshape(-1), ref_loss, la, lr)
    report(ok, f"{name}: losses", detail)
    ok, detail = close(grad, ref_grad, ga, gr)
    report(ok, f"{name}: dlogits", detail)
    ignored = targets.astype(np.int64) >= V
    report(bool(np.all(grad[ignored] == 0) and np.all(loss.reshape(-1)[ignored] == 0)),
           f"{name}: ignored rows are exactly zero")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="cpu", choices=sorted(TOL))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "wgtrain"))
    args = ap.parse_args()
    if not os.access(args.bin, os.X_OK):
        print(f"FAIL {args.bin} is missing: build it first (make)", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1

    rng = np.random.default_rng(20240520)
    u32max = np.uint32(0xFFFFFFFF)

    def logits(R, V, scale):
        return (rng.standard_normal((R, V)) * scale).astype(np.float32)

    with tempfile.TemporaryDirectory() as tmp:
        # Rows ignored by target == V and by the u32 maximum (padding), uint32 targets.
        t = np.array([3, 10, 0, 11, 7, u32max], dtype=np.uint32)
        case(args, tmp, "R=6 V=11 alpha=0.1 beta=0.01", logits(6, 11, 2.0), t, 0.1, 0.01, True)
        case(args, tmp, "R=6 V=11 alpha=0 beta=0", logits(6, 11, 2.0), t, 0.0, 0.0, True)
        case(args, tmp, "R=6 V=11 alpha=0.2 beta=1e-4, inv_norm from the host",
             logits(6, 11, 2.0), t, 0.2, 1e-4, False)
        # int32 targets, V below and not a multiple of 256, peaky logits.
        t = rng.integers(0, 200, size=16).astype(np.int32)
        t[[2, 9]] = 200
        case(args, tmp, "R=16 V=200 alpha=0.05 beta=1e-3 int32", logits(16, 200, 8.0), t, 0.05, 1e-3, True)
        # V = 1: p = 1, so only the z-loss remains.
        case(args, tmp, "V=1", logits(4, 1, 3.0), np.zeros(4, dtype=np.uint32), 0.1, 0.01, True)
        # Every target ignored: zero losses and rows, inv_norm 0.
        case(args, tmp, "all ignored", logits(3, 37, 5.0), np.full(3, 37, dtype=np.uint32), 0.1, 1e-4, True)
        # GPT-2's vocabulary, with one ignored row.
        t = rng.integers(0, 50257, size=4).astype(np.uint32)
        t[1] = u32max
        t[3] = 50256
        case(args, tmp, "R=4 V=50257 alpha=0.1 beta=1e-4", logits(4, 50257, 3.0), t, 0.1, 1e-4, True)

    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
