#!/usr/bin/env bash
# test_op_cli.sh — `wgtrain op` end to end: .npy files in, kernel on the CPU reference and on
# WebGPU, .npy files out. Checks that both backends agree (and match a NumPy evaluation of the
# formulas), and that bad input stops with a non-zero exit and a message naming the problem
# instead of a crash. Prints "N passed, N failed"; the exit code is the verdict.
# Needs build/wgtrain and python3 with numpy (PYTHON overrides which python).
set -uo pipefail
cd "$(dirname "$0")/.."
WGT=${WGT:-build/wgtrain}
PY=${PYTHON:-/usr/bin/python3}
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

if [[ ! -x $WGT ]]; then echo "missing $WGT: run make first" >&2; echo "0 passed, 1 failed"; exit 1; fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then echo "$PY has no numpy" >&2; echo "0 passed, 1 failed"; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- inputs
"$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(7)
x = (rng.standard_normal(5000) * 4).astype(np.float32)
x[:8] = [0, 80, -80, 1000, -1000, 3e38, -3e38, 1e4]
np.save(f"{d}/x.npy", x)
R, V = 37, 1000
np.save(f"{d}/logits.npy", (rng.standard_normal((R, V)) * 2).astype(np.float32))
t = rng.integers(0, V, R).astype(np.int32)
t[5] = -1          # int32 -1 = 0xffffffff as u32: ignored
t[9] = V           # ignored
np.save(f"{d}/targets.npy", t)
np.save(f"{d}/targets_short.npy", t[:-1])
np.save(f"{d}/logits_f64.npy", rng.standard_normal((R, V)))
np.save(f"{d}/logits_int.npy", np.ones((R, V), dtype=np.int32))
np.save(f"{d}/logits_v0.npy", np.zeros((4, 0), dtype=np.float32))
np.save(f"{d}/targets4.npy", np.zeros(4, dtype=np.int32))
np.save(f"{d}/targets_f32.npy", np.zeros(R, dtype=np.float32))
np.save(f"{d}/short_f32.npy", np.ones(4, dtype=np.float32))
# attention: plain heads (NH = 4, HS = 8) and grouped-query (NH = 4, NKV = 2, HS = 8)
np.save(f"{d}/qkv_mha.npy", rng.standard_normal((2, 9, 3 * 32)).astype(np.float32))
np.save(f"{d}/qkv_gqa.npy", rng.standard_normal((2, 9, (4 + 2 * 2) * 8)).astype(np.float32))
np.save(f"{d}/dout_gqa.npy", rng.standard_normal((2, 9, 32)).astype(np.float32))
# rope tables as Hugging Face LLaMA builds them (theta 10000), in double rounded to f32
HS, maxT = 8, 16
inv = 1.0 / 10000.0 ** (np.arange(0, HS, 2) / HS)
emb = np.concatenate([np.outer(np.arange(maxT), inv)] * 2, axis=1)
np.save(f"{d}/cos.npy", np.cos(emb).astype(np.float32)); np.save(f"{d}/sin.npy", np.sin(emb).astype(np.float32))
np.save(f"{d}/cos3.npy", np.ones((4, 3), np.float32)); np.save(f"{d}/qkv_hs3.npy", np.ones((1, 3, 18), np.float32))
EOF

# ---- the same kernel on both backends
run_both() {  # kernel, then the arguments with @BE@ standing for the backend name (mktemp names are alphanumeric, so the placeholder never occurs in the directory)
    local k=$1; shift
    for be in cpu webgpu; do
        local args=("${@//@BE@/$be}")
        if ! "$WGT" op "$k" --backend "$be" "${args[@]}" 2>"$tmp/err_$be"; then
            bad "$k on $be failed: $(cat "$tmp/err_$be")"
            return 1
        fi
    done
    return 0
}

if run_both gelu_inplace --in x="$tmp/x.npy" --out x="$tmp/gelu_@BE@.npy"; then
    # tolerance: both evaluate the same f32 formula; their tanh differ by ~1e-7 absolute
    if "$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
c, g, x = np.load(f"{d}/gelu_cpu.npy"), np.load(f"{d}/gelu_webgpu.npy"), np.load(f"{d}/x.npy")
assert c.dtype == np.float32 and c.shape == x.shape, (c.dtype, c.shape)
assert np.allclose(g, c, atol=2e-6, rtol=1e-5), np.abs(g - c).max()
xd = x.astype(np.float64); xc = np.clip(xd, -100, 100)
ref = 0.5 * xd * (1 + np.tanh(0.7978845608 * (xc + 0.044715 * xc**3)))
assert np.allclose(g, ref, atol=2e-6, rtol=1e-5), np.abs(g - ref).max()
assert g[1] == 80 and g[3] == 1000 and g[5] == np.float32(3e38) and g[2] == 0 and g[6] == 0, g[:8]
EOF
    then ok; else bad "gelu_inplace: cpu and webgpu outputs differ (or differ from numpy)"; fi
fi

if run_both cross_entropy --in logits="$tmp/logits.npy" --in targets="$tmp/targets.npy" --set alpha=0.1 \
        --out logits="$tmp/dl_@BE@.npy" --out losses="$tmp/loss_@BE@.npy"; then
    # tolerances as in test_kernels_activation_loss.c: f32 sums over V = 1000 logits against double ones
    if "$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
l = np.load(f"{d}/logits.npy").astype(np.float64); t = np.load(f"{d}/targets.npy").astype(np.int64)
R, V = l.shape
a, b = 0.1, 1e-4
valid = (t >= 0) & (t < V)
inv_norm = 1.0 / valid.sum()
m = l.max(1, keepdims=True)
lse = (m + np.log(np.exp(l - m).sum(1, keepdims=True)))[:, 0]
tt = np.where(valid, t, 0)
loss = np.where(valid, lse - (1 - a) * l[np.arange(R), tt] - a * l.mean(1) + b * lse**2, 0)
p = np.exp(l - lse[:, None])
onehot = np.zeros_like(l); onehot[np.arange(R), tt] = 1
dl = ((p - ((1 - a) * onehot + a / V)) + 2 * b * lse[:, None] * p) * inv_norm
dl[~valid] = 0
for be in ("cpu", "webgpu"):
    gl, gd = np.load(f"{d}/loss_{be}.npy"), np.load(f"{d}/dl_{be}.npy")
    assert gl.shape == (R,) and gd.shape == (R, V), (gl.shape, gd.shape)
    assert np.allclose(gl, loss, atol=5e-5, rtol=1e-5), (be, np.abs(gl - loss).max())
    assert np.allclose(gd, dl, atol=1e-6 * inv_norm, rtol=1e-4), (be, np.abs(gd - dl).max())
    assert gl[5] == 0 and gl[9] == 0 and not gd[5].any() and not gd[9].any()
EOF
    then ok; else bad "cross_entropy: outputs differ between cpu, webgpu and numpy"; fi
fi

# attention: NKV defaults to NH when no shape tells it (then HS follows from qkv's width); the
# backward finds HS from dout and NKV from qkv
if run_both attention_forward --in qkv="$tmp/qkv_mha.npy" --set NH=4 --out out="$tmp/ao_@BE@.npy" --out lse="$tmp/al_@BE@.npy" &&
   run_both attention_forward --in qkv="$tmp/qkv_gqa.npy" --set NH=4 --set NKV=2 --out out="$tmp/go_@BE@.npy" \
        --out lse="$tmp/gl_@BE@.npy" &&
   run_both attention_backward --in dout="$tmp/dout_gqa.npy" --in qkv="$tmp/qkv_gqa.npy" --in out="$tmp/go_cpu.npy" \
        --in lse="$tmp/gl_cpu.npy" --set NH=4 --out dqkv="$tmp/gd_@BE@.npy"; then
    # tolerances as in test_backend_ops.c (f32 kernels against double sums)
    if "$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
def attn(qkv, NH, NKV, HS):  # causal attention, query head h reads kv head h // (NH // NKV)
    B, T, _ = qkv.shape; C = NH * HS; x = qkv.astype(np.float64)
    out = np.zeros((B, T, C)); lse = np.zeros((B, NH, T))
    for h in range(NH):
        g = h // (NH // NKV)
        q = x[..., h*HS:(h+1)*HS]; k = x[..., C+g*HS:C+(g+1)*HS]; v = x[..., C+(NKV+g)*HS:C+(NKV+g+1)*HS]
        s = q @ k.transpose(0, 2, 1) / np.sqrt(HS) + np.triu(np.full((T, T), -np.inf), 1)
        m = s.max(-1, keepdims=True); l = m + np.log(np.exp(s - m).sum(-1, keepdims=True))
        out[..., h*HS:(h+1)*HS] = np.exp(s - l) @ v; lse[:, h] = l[..., 0]
    return out, lse
o, l = attn(np.load(f"{d}/qkv_mha.npy"), 4, 4, 8)
go, gl = attn(np.load(f"{d}/qkv_gqa.npy"), 4, 2, 8)
for be in ("cpu", "webgpu"):
    ao, al = np.load(f"{d}/ao_{be}.npy"), np.load(f"{d}/al_{be}.npy")
    g, glb = np.load(f"{d}/go_{be}.npy"), np.load(f"{d}/gl_{be}.npy")
    assert ao.shape == (2, 9, 32) and al.shape == (2, 4, 9) and g.shape == (2, 9, 32), (ao.shape, al.shape, g.shape)
    assert np.allclose(ao, o, atol=1e-5, rtol=1e-4) and np.allclose(al, l, atol=1e-5, rtol=1e-5), be
    assert np.allclose(g, go, atol=1e-5, rtol=1e-4) and np.allclose(glb, gl, atol=1e-5, rtol=1e-5), be
dc, dg = np.load(f"{d}/gd_cpu.npy"), np.load(f"{d}/gd_webgpu.npy")
assert dc.shape == (2, 9, 64) and np.allclose(dg, dc, atol=1e-4 * np.abs(dc).max(), rtol=1e-4), np.abs(dg - dc).max()
EOF
    then ok; else bad "attention: outputs differ between cpu, webgpu and numpy"; fi
fi

# rope on the grouped-query qkv (NKV found from the shapes) against HF's formula in numpy
if run_both rope_forward --in qkv="$tmp/qkv_gqa.npy" --in cos="$tmp/cos.npy" --in sin="$tmp/sin.npy" --set NH=4 \
        --out qkv="$tmp/rq_@BE@.npy"; then
    if "$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
x = np.load(f"{d}/qkv_gqa.npy").astype(np.float64); T, HS = x.shape[1], 8
c, s = np.load(f"{d}/cos.npy")[:T].astype(np.float64), np.load(f"{d}/sin.npy")[:T].astype(np.float64)
ref = x.copy()
for h in range(4 + 2):  # the q and k heads
    y = x[..., h*HS:(h+1)*HS]
    rot = np.concatenate([-y[..., HS//2:], y[..., :HS//2]], -1)  # rotate_half
    ref[..., h*HS:(h+1)*HS] = y * c + rot * s
for be in ("cpu", "webgpu"):
    r = np.load(f"{d}/rq_{be}.npy")
    assert r.shape == x.shape and np.allclose(r, ref, atol=2e-6, rtol=1e-6), (be, np.abs(r - ref).max())
    assert (r[..., 48:] == np.load(f"{d}/qkv_gqa.npy")[..., 48:]).all(), "v changed"
EOF
    then ok; else bad "rope_forward: outputs differ between cpu, webgpu and numpy"; fi
fi

# ---- bad input: non-zero exit (not a crash) and a message containing PATTERN
expect_fail() {  # description, grep -E pattern, wgtrain arguments...
    local what=$1 pat=$2; shift 2
    local rc
    "$WGT" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [[ $rc -eq 0 ]]; then bad "$what: exit code 0"; return; fi
    if [[ $rc -gt 125 ]]; then bad "$what: crashed (exit $rc): $(tail -3 "$tmp/err")"; return; fi
    if ! grep -qiE -- "$pat" "$tmp/err"; then bad "$what: message does not match /$pat/: $(cat "$tmp/err")"; return; fi
    ok
}
for be in cpu webgpu; do
    expect_fail "$be missing file" "no_such_file\.npy" \
        op gelu_inplace --backend $be --in x="$tmp/no_such_file.npy" --out x="$tmp/o.npy"
    expect_fail "$be float64 logits" "logits.*float32" \
        op cross_entropy --backend $be --in logits="$tmp/logits_f64.npy" --in targets="$tmp/targets.npy" --out losses="$tmp/o.npy"
    expect_fail "$be int32 logits" "logits.*float32" \
        op cross_entropy --backend $be --in logits="$tmp/logits_int.npy" --in targets="$tmp/targets.npy" --out losses="$tmp/o.npy"
    expect_fail "$be float32 targets" "targets.*int" \
        op cross_entropy --backend $be --in logits="$tmp/logits.npy" --in targets="$tmp/targets_f32.npy" --out losses="$tmp/o.npy"
    expect_fail "$be targets length != R" "targets.*36.*37|targets.*R" \
        op cross_entropy --backend $be --in logits="$tmp/logits.npy" --in targets="$tmp/targets_short.npy" --out losses="$tmp/o.npy"
    expect_fail "$be V = 0" "V = 0" \
        op cross_entropy --backend $be --in logits="$tmp/logits_v0.npy" --in targets="$tmp/targets4.npy" --out losses="$tmp/o.npy"
    expect_fail "$be alpha=nan" "alpha.*finite" \
        op cross_entropy --backend $be --in logits="$tmp/logits.npy" --in targets="$tmp/targets.npy" --set alpha=nan --out losses="$tmp/o.npy"
    expect_fail "$be alpha=inf" "alpha.*finite" \
        op cross_entropy --backend $be --in logits="$tmp/logits.npy" --in targets="$tmp/targets.npy" --set alpha=inf --out losses="$tmp/o.npy"
    expect_fail "$be missing required input" "targets" \
        op cross_entropy --backend $be --in logits="$tmp/logits.npy" --out losses="$tmp/o.npy"
done
expect_fail "odd rope head size" "HS = 3 is odd" \
    op rope_forward --in qkv="$tmp/qkv_hs3.npy" --in cos="$tmp/cos3.npy" --in sin="$tmp/cos3.npy" --set NH=2 --out qkv="$tmp/o.npy"
expect_fail "NKV not dividing NH" "NKV = 5.*divide NH = 6" \
    op attention_forward --in qkv="$tmp/qkv_mha.npy" --set NH=6 --set NKV=5 --out out="$tmp/o.npy"
expect_fail "grouped qkv, NKV left to its default" "qkv.*does not fit.*NKV = 3" \
    op attention_forward --in qkv="$tmp/qkv_gqa.npy" --set NH=3 --out out="$tmp/o.npy"
expect_fail "unknown op" "unknown op.*no_such_kernel" op no_such_kernel --in x="$tmp/x.npy"
expect_fail "unknown binding" "no binding.*bogus" op gelu_inplace --in bogus="$tmp/x.npy" --out x="$tmp/o.npy"
expect_fail "unknown scalar" "no scalar.*gamma" \
    op cross_entropy --in logits="$tmp/logits.npy" --in targets="$tmp/targets.npy" --set gamma=1 --out losses="$tmp/o.npy"
expect_fail "shape mismatch of an element-wise kernel" "up.*shape \\[4\\].*n = 5000" \
    op swiglu_combine --in gate="$tmp/x.npy" --in up="$tmp/short_f32.npy" --out hidden="$tmp/o.npy"

# scalars out of their range or not whole are refused before anything is allocated or run
"$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
np.save(f"{d}/dout_emb.npy", np.ones((2, 3, 16), dtype=np.float32))
np.save(f"{d}/tok_emb.npy", np.zeros((2, 3), dtype=np.int32))
np.save(f"{d}/qkv_small.npy", np.ones((1, 4, 48), dtype=np.float32))
EOF
expect_fail "op --set V=1e20 (not a u32)" "V = 1e\+?20.*outside its range" \
    op embedding_backward --in dout="$tmp/dout_emb.npy" --in tokens="$tmp/tok_emb.npy" --set V=1e20 --out dwte="$tmp/o.npy"
expect_fail "op --set NH=1e30" "NH = 1e\+?30.*outside its range" \
    op attention_forward --in qkv="$tmp/qkv_small.npy" --set NH=1e30 --out out="$tmp/o.npy"
expect_fail "op --set V=2.5 (not whole)" "V = 2.5.*whole number" \
    op embedding_backward --in dout="$tmp/dout_emb.npy" --in tokens="$tmp/tok_emb.npy" --set V=2.5 --out dwte="$tmp/o.npy"
expect_fail "op embedding_backward V=1.1e9: refused before allocating tens of GB" "GiB|storage binding" \
    op embedding_backward --in dout="$tmp/dout_emb.npy" --in tokens="$tmp/tok_emb.npy" --set V=1100000000 --out dwte="$tmp/o.npy"
expect_fail "op cross_entropy alpha 5" "alpha = 5 .*outside its range" \
    op cross_entropy --in logits="$tmp/logits.npy" --in targets="$tmp/targets.npy" --set alpha=5 --out losses="$tmp/o.npy"
expect_fail "op cross_entropy beta -1" "beta = -1 .*outside its range" \
    op cross_entropy --in logits="$tmp/logits.npy" --in targets="$tmp/targets.npy" --set beta=-1 --out losses="$tmp/o.npy"
expect_fail "op grad_clip_scale window=0 (the loss scale would grow on every update)" "window = 0 .*outside its range" \
    op grad_clip_scale --in status="$tmp/x.npy" --set window=0 --out status="$tmp/o.npy"
# an array over the device's largest storage binding (128 MiB on the software GPU) is refused, not an abort
if [[ $("$WGT" info 2>/dev/null) == *llvmpipe* ]]; then   # not a pipe into grep -q: under pipefail its early exit (SIGPIPE) would read as "not llvmpipe"
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.zeros(33554432 + 64, dtype=np.float32))" "$tmp/big.npy"
    expect_fail "op --backend webgpu over the binding limit" "largest storage binding.*--backend cpu" \
        op gelu_inplace --backend webgpu --in x="$tmp/big.npy" --out x="$tmp/o.npy"
    rm -f "$tmp/big.npy"
    # a qkv of exactly the binding limit (B = 1, T = 16384, NH = 8, NKV = 4, HS = 128: 2^25 elements), as the
    # model allocates it, is rotated on the software GPU as on the CPU
    "$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d, T, HS = sys.argv[1], 16384, 128
np.save(f"{d}/big_qkv.npy", np.random.default_rng(4).standard_normal((1, T, 2048)).astype(np.float32))
ang = np.outer(np.arange(T), 1.0 / 10000.0 ** (np.arange(0, HS, 2) / HS))
emb = np.concatenate([ang, ang], axis=1)
np.save(f"{d}/big_cos.npy", np.cos(emb).astype(np.float32)); np.save(f"{d}/big_sin.npy", np.sin(emb).astype(np.float32))
EOF
    if run_both rope_forward --in qkv="$tmp/big_qkv.npy" --in cos="$tmp/big_cos.npy" --in sin="$tmp/big_sin.npy" \
            --set NH=8 --set NKV=4 --out qkv="$tmp/big_rope_@BE@.npy"; then
        if "$PY" -c "import numpy as np, sys; a, b = (np.load(f'{sys.argv[1]}/big_rope_{x}.npy') for x in ('cpu', 'webgpu')); \
                assert np.allclose(a, b, atol=1e-5, rtol=1e-5), np.abs(a - b).max()" "$tmp"; then ok
        else bad "rope_forward of a qkv at the binding limit: cpu and webgpu differ"; fi
    fi
    rm -f "$tmp"/big_*.npy
fi

# ---- f16 bindings: float16 .npy in and out. cast_f16 against NumPy's own float32 -> float16
# rounding (round to nearest even) at the edges, cast_f32 back, matmul_f16 against NumPy
"$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
edge = np.array([0.0, -0.0, 1.0, 65504, 65519.99, 65520, -65520, 1e10, np.inf, -np.inf, np.nan, 2.0**-24, 2.0**-25,
                 1.5 * 2.0**-25, 1.5 * 2.0**-24, 2.0**-14, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 2049, 2051, 1e-40, 0.1],
                np.float32)
x = np.concatenate([edge, np.random.default_rng(1).standard_normal(1001).astype(np.float32) * 100])
np.save(f"{d}/h_in.npy", x)
r = np.random.default_rng(2)
np.save(f"{d}/h_a.npy", r.standard_normal((7, 33)).astype(np.float16))
np.save(f"{d}/h_w.npy", r.standard_normal((5, 33)).astype(np.float16))
EOF
if run_both cast_f16 --in inp="$tmp/h_in.npy" --out out="$tmp/h_@BE@.npy" &&
   run_both cast_f32 --in inp="$tmp/h_cpu.npy" --out out="$tmp/h32_@BE@.npy" &&
   run_both matmul_f16 --in inp="$tmp/h_a.npy" --in weight="$tmp/h_w.npy" --out out="$tmp/hmm_@BE@.npy"; then
    if "$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
x = np.load(f"{d}/h_in.npy")
c, g = np.load(f"{d}/h_cpu.npy"), np.load(f"{d}/h_webgpu.npy")
assert c.dtype == np.float16 and c.shape == x.shape, (c.dtype, c.shape)
with np.errstate(over="ignore"):
    ref = x.astype(np.float16)
nan = np.isnan(ref)
assert (np.isnan(c) == nan).all() and (np.isnan(g) == nan).all()
assert (c.view(np.uint16)[~nan] == ref.view(np.uint16)[~nan]).all(), np.nonzero(c.view(np.uint16) != ref.view(np.uint16))
assert (g.view(np.uint16) == c.view(np.uint16)).all()
for be in ("cpu", "webgpu"):
    w = np.load(f"{d}/h32_{be}.npy")
    assert w.dtype == np.float32 and (np.isnan(w) == nan).all() and (w[~nan] == ref[~nan].astype(np.float32)).all()
a, w = np.load(f"{d}/h_a.npy").astype(np.float64), np.load(f"{d}/h_w.npy").astype(np.float64)
for be in ("cpu", "webgpu"):
    o = np.load(f"{d}/hmm_{be}.npy")
    assert o.shape == (7, 5) and np.allclose(o, a @ w.T, atol=1e-4, rtol=1e-5), np.abs(o - a @ w.T).max()
EOF
    then ok; else bad "f16 ops through wgtrain op: the bits differ from NumPy's float16 (or the backends differ)"; fi
fi
# ---- the optimizer ops: grad_clip_scale turns a status (squared norm, loss sum, S = 1, t = 0)
# into clip/S, t = 1 and the bias corrections; adamw applies them. Both against NumPy.
"$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
r = np.random.default_rng(3)
n = 300
for k in ("p", "m", "g"):
    np.save(f"{d}/opt_{k}.npy", r.standard_normal(n).astype(np.float32))
np.save(f"{d}/opt_v.npy", (r.standard_normal(n) ** 2 * 0.01).astype(np.float32))
g = np.load(f"{d}/opt_g.npy").astype(np.float64)
st = np.zeros(16, np.float32)
st[0], st[1], st[2] = (g * g).sum(), 3.5, 1.0
np.save(f"{d}/opt_st.npy", st)
np.save(f"{d}/opt_st0.npy", np.zeros(16, np.float32))
st[3] = 1.0  # an applied update's multiplier, but t = 0
np.save(f"{d}/opt_st_t0.npy", st)
EOF
if run_both grad_clip_scale --in status="$tmp/opt_st.npy" --set max_norm=2 --out status="$tmp/opt_st_@BE@.npy" &&
   run_both adamw --in params="$tmp/opt_p.npy" --in m="$tmp/opt_m.npy" --in v="$tmp/opt_v.npy" --in grads="$tmp/opt_g.npy" \
       --in status="$tmp/opt_st_cpu.npy" --set lr=0.01 --set weight_decay=0.1 \
       --out params="$tmp/opt_p_@BE@.npy" --out m="$tmp/opt_m_@BE@.npy" --out v="$tmp/opt_v_@BE@.npy"; then
    if "$PY" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
L = lambda k: np.load(f"{d}/opt_{k}.npy").astype(np.float64)
p, m, v, g = L("p"), L("m"), L("v"), L("g")
norm = np.sqrt((g * g).sum())
clip = min(1.0, 2 / norm)
for be in ("cpu", "webgpu"):
    st = np.load(f"{d}/opt_st_{be}.npy")
    assert st.view(np.uint32)[8] == 1 and abs(st[3] - clip) < 1e-6 and abs(st[4] - norm) < 1e-5 * norm, st
    assert abs(st[6] - 0.1) < 1e-6 and abs(st[7] - 0.001) < 1e-7, st  # 1 - beta^1 of the f32 betas
gc = g * clip
m1 = 0.9 * m + 0.1 * gc
v1 = 0.999 * v + 0.001 * gc * gc
p1 = p - 0.01 * ((m1 / 0.1) / (np.sqrt(v1 / 0.001) + 1e-8) + 0.1 * p)
for be in ("cpu", "webgpu"):
    for k, want in (("p", p1), ("m", m1), ("v", v1)):
        got = np.load(f"{d}/opt_{k}_{be}.npy")
        assert got.shape == (300,) and np.allclose(got, want, atol=1e-6, rtol=1e-4), (be, k, np.abs(got - want).max())
EOF
    then ok; else bad "grad_clip_scale + adamw through wgtrain op: outputs differ between cpu, webgpu and numpy"; fi
fi
for be in cpu webgpu; do
    expect_fail "$be adamw without grads" "needs input 'grads'" op adamw --backend $be --in params="$tmp/opt_p.npy" \
        --in m="$tmp/opt_m.npy" --in v="$tmp/opt_v.npy" --in status="$tmp/opt_st_cpu.npy" --out params="$tmp/o.npy"
    expect_fail "$be adamw on a status that applies an update with t = 0" "update count t.*is 0" \
        op adamw --backend $be --in params="$tmp/opt_p.npy" --in m="$tmp/opt_m.npy" --in v="$tmp/opt_v.npy" \
        --in grads="$tmp/opt_g.npy" --in status="$tmp/opt_st_t0.npy" --out params="$tmp/o.npy"
    expect_fail "$be grad_clip_scale on a status without a loss scale" "loss scale S .*is 0" \
        op grad_clip_scale --backend $be --in status="$tmp/opt_st0.npy" --out status="$tmp/o.npy"
done

# a float32 file for a float16 binding is refused with the dtype named
out=$("$WGT" op cast_f32 --in inp="$tmp/h_in.npy" --out out="$tmp/bad.npy" 2>&1)
if [[ $? -ne 0 && $out == *"must be float16"* ]]; then ok; else bad "cast_f32 of a float32 file: $out"; fi

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
