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
EOF

# ---- the same kernel on both backends
run_both() {  # kernel, then the arguments with BE standing for the backend name
    local k=$1; shift
    for be in cpu webgpu; do
        local args=("${@//BE/$be}")
        if ! "$WGT" op "$k" --backend "$be" "${args[@]}" 2>"$tmp/err_$be"; then
            bad "$k on $be failed: $(cat "$tmp/err_$be")"
            return 1
        fi
    done
    return 0
}

if run_both gelu_inplace --in x="$tmp/x.npy" --out x="$tmp/gelu_BE.npy"; then
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
        --out logits="$tmp/dl_BE.npy" --out losses="$tmp/loss_BE.npy"; then
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
expect_fail "unknown op" "unknown op.*no_such_kernel" op no_such_kernel --in x="$tmp/x.npy"
expect_fail "unknown binding" "no binding.*bogus" op gelu_inplace --in bogus="$tmp/x.npy" --out x="$tmp/o.npy"
expect_fail "unknown scalar" "no scalar.*gamma" \
    op cross_entropy --in logits="$tmp/logits.npy" --in targets="$tmp/targets.npy" --set gamma=1 --out losses="$tmp/o.npy"
expect_fail "shape mismatch of an element-wise kernel" "up.*shape \\[4\\].*n = 5000" \
    op swiglu_combine --in gate="$tmp/x.npy" --in up="$tmp/short_f32.npy" --out hidden="$tmp/o.npy"

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
