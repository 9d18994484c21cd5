// 09_backward_ffn.wgsl — element-wise part of the FFN backward (docs/kernels.md#ffn_gelu_backward): the
// gradients through GeLU and through SwiGLU's silu(gate) * up. The GEMMs around them are
// matmul_t / matmul_at. One thread per element (or per 4: the host defines the element type EW as
// f32 or vec4<f32>, with EU the matching u32 type; the math is component-wise),
// no shared memory, no barriers. Outputs pass
// through nan_guard: one stray non-finite activation then gives a zero gradient instead of
// poisoning every weight gradient through the next GEMM.

struct FfnParams { n : u32, p0 : u32, p1 : u32, p2 : u32 };

fn ffn_nan_guard(x : EW) -> EW {
    return select(x, EW(0.0), (bitcast<EU>(x) & EU(0x7f800000u)) == EU(0x7f800000u));
}

// d/dx of gelu(x) = 0.5 x (1 + tanh(z)), z = inner(xc), xc = clamp(x, -100, 100):
//   0.5 (1 + tanh(z)) + 0.5 x sech^2(z) inner'(xc), with inner' = 0 outside the clamp.
// Outside the clamp sech^2 is exactly 0 in f32 anyway (|z| > 3e4), so the second term uses xc:
// the same value, and an infinite x cannot make Inf * 0. NaN is mapped to the lower bound
// explicitly (clamp of NaN is not defined in WGSL), as fmaxf / fminf do in the reference.
// Both tanh terms come from e = exp(-2|z|) (exp never sees a positive argument, so no Inf / Inf):
// 0.5 (1 + tanh z) = 1 / (1 + e) for z >= 0, e / (1 + e) below; sech^2 z = 4 e / (1 + e)^2.
// This avoids the cancellation of 1 - tanh^2 near |tanh| = 1, where the gradient's absolute
// error would otherwise be ~|x| inner' * 1e-7 (~2e-6 at x = -5).
fn ffn_gelu_grad(x : EW) -> EW {
    let is_nan = (bitcast<EU>(x) & EU(0x7fffffffu)) > EU(0x7f800000u);
    let xc = select(clamp(x, EW(-100.0), EW(100.0)), EW(-100.0), is_nan);
    let z = 0.7978845608 * (xc + 0.044715 * xc * xc * xc);
    let e = exp(-2.0 * abs(z));
    let r = 1.0 / (1.0 + e);
    let half_1pt = select(e * r, r, z >= EW(0.0));
    let sech2 = 4.0 * e * r * r;
    let d_inner = 0.7978845608 * (1.0 + 3.0 * 0.044715 * xc * xc);
    return half_1pt + 0.5 * xc * sech2 * d_inner;
}

@group(0) @binding(0) var<storage, read_write> gb_grad_pre : array<EW>;
@group(0) @binding(1) var<storage, read> gb_grad_hidden : array<EW>;
@group(0) @binding(2) var<storage, read> gb_pre_gelu : array<EW>;
@group(0) @binding(3) var<uniform> gb_params : FfnParams;

@compute @workgroup_size(256)
fn ffn_gelu_backward(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= gb_params.n) { return; }
    gb_grad_pre[i] = ffn_nan_guard(gb_grad_hidden[i] * ffn_gelu_grad(gb_pre_gelu[i]));
}

@group(0) @binding(0) var<storage, read_write> sb_grad_gate : array<EW>;
@group(0) @binding(1) var<storage, read_write> sb_grad_up : array<EW>;
@group(0) @binding(2) var<storage, read> sb_grad_hidden : array<EW>;
@group(0) @binding(3) var<storage, read> sb_gate : array<EW>;
@group(0) @binding(4) var<storage, read> sb_up : array<EW>;
@group(0) @binding(5) var<uniform> sb_params : FfnParams;

// One sigmoid per element gives silu = x s and silu' = s (1 + x (1 - s)) (docs/kernels.md#ffn_swiglu_backward).
// s and 1 - s both come from e = exp(-|x|) (exp never sees a positive argument): with
// r = 1 / (1 + e), s = r and 1 - s = e r for x >= 0, the other way round below. 1 - s as a
// difference would cancel for large x, where x (1 - s) multiplies its absolute error by x.
@compute @workgroup_size(256)
fn ffn_swiglu_backward(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= sb_params.n) { return; }
    let g = sb_grad_hidden[i];
    let x = sb_gate[i];
    let e = exp(-abs(x));
    let r = 1.0 / (1.0 + e);
    let s = select(e * r, r, x >= EW(0.0));
    let one_minus_s = select(r, e * r, x >= EW(0.0));
    let dsilu = s * (1.0 + x * one_minus_s);
    sb_grad_gate[i] = ffn_nan_guard(g * sb_up[i] * dsilu);
    sb_grad_up[i] = ffn_nan_guard(g * (x * s));
}

@group(0) @binding(0) var<storage, read_write> gq_grad_gate : array<EW>;
@group(0) @binding(1) var<storage, read_write> gq_grad_up : array<EW>;
@group(0) @binding(2) var<storage, read> gq_grad_hidden : array<EW>;
@group(0) @binding(3) var<storage, read> gq_gate : array<EW>;
@group(0) @binding(4) var<storage, read> gq_up : array<EW>;
@group(0) @binding(5) var<uniform> gq_params : FfnParams;

// GeGLU (docs/kernels.md#ffn_geglu_backward): grad_gate = g·up·gelu'(gate) (ffn_gelu_grad),
// grad_up = g·gelu(gate), gelu as 06_activation.wgsl's (the same sign-branched halves)
@compute @workgroup_size(256)
fn ffn_geglu_backward(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= gq_params.n) { return; }
    let g = gq_grad_hidden[i];
    let x = gq_gate[i];
    let xc = clamp(x, EW(-100.0), EW(100.0));
    let z = 0.7978845608 * (xc + 0.044715 * xc * xc * xc);
    let e = exp(-2.0 * abs(z));
    let r = 1.0 / (1.0 + e);
    let gelu = x * select(e * r, r, z >= EW(0.0));
    gq_grad_gate[i] = ffn_nan_guard(g * gq_up[i] * ffn_gelu_grad(x));
    gq_grad_up[i] = ffn_nan_guard(g * gelu);
}
