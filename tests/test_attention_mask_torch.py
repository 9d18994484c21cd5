"""test_attention_mask_torch.py — the attention mask (docs/kernels.md#attention-mask) against
PyTorch: `wgtrain op attention_forward` / `attention_backward` with doc_start (packed examples)
and a sliding window, on the C reference and on WebGPU, against a float64 PyTorch attention with
an explicit boolean mask (query t attends keys j with max(doc_start[t], t - window + 1) <= j <= t)
and its autograd gradient. Grouped kv heads, a head size that is no multiple of 4, examples of one
token, several tiles. Also: a doc_start that breaks the contract is refused with a message.
Prints "N passed, N failed"."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

W = os.environ.get("WGT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "wgtrain"))
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def op(args):
    r = subprocess.run([W, "op"] + args, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def ref(qkv, doc, B, T, NH, NKV, HS, window, dout):
    """out, lse, dqkv in float64, straight from the definition."""
    x = torch.tensor(qkv, dtype=torch.float64, requires_grad=True)
    C = NH * HS
    q = x[:, :, :C].reshape(B, T, NH, HS).transpose(1, 2)
    k = x[:, :, C:C + NKV * HS].reshape(B, T, NKV, HS).transpose(1, 2).repeat_interleave(NH // NKV, dim=1)
    v = x[:, :, C + NKV * HS:].reshape(B, T, NKV, HS).transpose(1, 2).repeat_interleave(NH // NKV, dim=1)
    t = torch.arange(T).view(T, 1)
    j = torch.arange(T).view(1, T)
    d = torch.tensor(doc.astype(np.int64)).view(B, 1, T, 1)
    lo = torch.maximum(d, (t - window + 1) if window else torch.zeros_like(t))
    allowed = (j <= t) & (j >= lo)  # [B, 1, T, T]
    s = (q @ k.transpose(-1, -2)) / np.sqrt(HS)
    s = s.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # [B, NH, T]
    out = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
    (out * torch.tensor(dout, dtype=torch.float64)).sum().backward()
    return out.detach().numpy(), lse.detach().numpy(), x.grad.numpy()


def docs(B, T, maxlen, rng):
    d = np.zeros((B, T), dtype=np.uint32)
    for b in range(B):
        t = 0
        first = True
        while t < T:
            n = 1 if first else int(rng.integers(1, maxlen + 1))  # a one-token example first
            d[b, t:t + n] = t
            t += n
            first = False
    return d


def case(B, T, NH, NKV, HS, maxlen, window, seed, tmp):
    rng = np.random.default_rng(seed)
    Wd = (NH + 2 * NKV) * HS
    qkv = rng.standard_normal((B, T, Wd)).astype(np.float32)
    dout = rng.standard_normal((B, T, NH * HS)).astype(np.float32)
    doc = docs(B, T, maxlen, rng) if maxlen else np.zeros((B, T), dtype=np.uint32)
    out, lse, dqkv = ref(qkv, doc, B, T, NH, NKV, HS, window, dout)
    f = lambda n: os.path.join(tmp, n)  # noqa: E731
    np.save(f("qkv.npy"), qkv)
    np.save(f("dout.npy"), dout)
    np.save(f("doc.npy"), doc)
    tag = f"B={B} T={T} NH={NH} NKV={NKV} HS={HS} examples<={maxlen} window={window}"
    for be in ("cpu", "webgpu"):
        sets = ["--set", f"NH={NH}", "--set", f"NKV={NKV}", "--set", f"window={window}"]
        rc, msg = op(["attention_forward", "--backend", be, "--in", "qkv=" + f("qkv.npy"), "--in", "doc_start=" + f("doc.npy")]
                     + sets + ["--out", "out=" + f("o.npy"), "--out", "lse=" + f("l.npy")])
        check(rc == 0, f"{tag} {be}: attention_forward ran ({msg})")
        if rc:
            continue
        o, l = np.load(f("o.npy")), np.load(f("l.npy"))
        # float32 dot products of HS terms and exp of scores up to ~5: a few 1e-6 of the largest
        check(np.abs(o - out).max() <= 1e-5 * max(1, np.abs(out).max()), f"{tag} {be}: out, worst {np.abs(o - out).max():.2e}")
        check(np.abs(l - lse).max() <= 1e-5 * max(1, np.abs(lse).max()), f"{tag} {be}: lse, worst {np.abs(l - lse).max():.2e}")
        # the backward on the reference's float32 out and lse, so that it is measured alone
        np.save(f("o32.npy"), out.astype(np.float32))
        np.save(f("l32.npy"), lse.astype(np.float32))
        rc, msg = op(["attention_backward", "--backend", be, "--in", "dout=" + f("dout.npy"), "--in", "qkv=" + f("qkv.npy"),
                      "--in", "out=" + f("o32.npy"), "--in", "lse=" + f("l32.npy"), "--in", "doc_start=" + f("doc.npy")]
                     + sets + ["--out", "dqkv=" + f("g.npy")])
        check(rc == 0, f"{tag} {be}: attention_backward ran ({msg})")
        if rc:
            continue
        g = np.load(f("g.npy"))
        # sums over up to T keys of float32 products (the kernels add in float32): 1e-4 of the largest
        err = np.abs(g - dqkv).max()
        check(err <= 1e-4 * np.abs(dqkv).max(), f"{tag} {be}: dqkv, worst {err:.2e} of max {np.abs(dqkv).max():.2e}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        case(2, 40, 4, 2, 8, 12, 0, 1, tmp)      # packed examples, grouped heads
        case(1, 90, 2, 1, 6, 40, 17, 2, tmp)     # both, HS = 6 (scalar loads), examples over several tiles
        case(2, 33, 2, 2, 16, 0, 5, 3, tmp)      # a sliding window alone
        # the contract: at most its position, non-decreasing
        np.save(os.path.join(tmp, "q.npy"), np.zeros((1, 4, 12), dtype=np.float32))
        for bad in ([0, 0, 3, 0], [0, 1, 1, 0]):
            np.save(os.path.join(tmp, "d.npy"), np.array([bad], dtype=np.uint32))
            rc, msg = op(["attention_forward", "--backend", "cpu", "--in", "qkv=" + os.path.join(tmp, "q.npy"), "--in",
                          "doc_start=" + os.path.join(tmp, "d.npy"), "--set", "NH=1", "--out",
                          "out=" + os.path.join(tmp, "o.npy"), "--out", "lse=" + os.path.join(tmp, "l.npy")])
            check(rc != 0 and "doc_start[0]" in msg, f"doc_start {bad} refused with a message ({msg.strip()})")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    sys.exit(main())
