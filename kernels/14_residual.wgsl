// 14_residual.wgsl — the residual stream's element-wise ops, one thread per element:
//   residual_forward: out = a + b (the host dispatches add_inplace when out is a or b: a buffer
//     may not be bound both read-only and writable in one dispatch);
//   add_inplace: out += a (a branch's gradient joining the residual stream's);
//   scale_inplace: x *= s (Gemma-3's embedding scale, forward and backward);
//   dropout, dropout_inplace: out = inp·scale where element i is kept, else 0 (dropout_forward and
//     dropout_backward, which apply the same mask: docs/kernels.md#dropout).
// Element offsets in the params let the host bind 256-byte-aligned windows of large tensors.
// The host defines the element type EW of the first three: f32, or vec4<f32> (4 elements a thread,
// n and the offsets then counted in vec4) where every length and offset is a multiple of 4 (on
// the H200 a GPT-2 124M step's residual_forward went from 0.84 ms to 0.60 with it). Dropout stays one
// element a thread: its mask is drawn per element index.

struct ResParams { n : u32, out_off : u32, a_off : u32, b_off : u32 };

@group(0) @binding(0) var<storage, read_write> rf_out : array<EW>;
@group(0) @binding(1) var<storage, read> rf_a : array<EW>;
@group(0) @binding(2) var<storage, read> rf_b : array<EW>;
@group(0) @binding(3) var<uniform> rf_p : ResParams;

@compute @workgroup_size(256)
fn residual_forward(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= rf_p.n) { return; }
    rf_out[rf_p.out_off + i] = rf_a[rf_p.a_off + i] + rf_b[rf_p.b_off + i];
}

@group(0) @binding(0) var<storage, read_write> ai_out : array<EW>;
@group(0) @binding(1) var<storage, read> ai_a : array<EW>;
@group(0) @binding(2) var<uniform> ai_p : ResParams;

@compute @workgroup_size(256)
fn add_inplace(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= ai_p.n) { return; }
    ai_out[ai_p.out_off + i] += ai_a[ai_p.a_off + i];
}

struct ScaleParams { n : u32, off : u32, s : f32, p0 : u32 };
@group(0) @binding(0) var<storage, read_write> si_x : array<EW>;
@group(0) @binding(1) var<uniform> si_p : ScaleParams;

@compute @workgroup_size(256)
fn scale_inplace(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= si_p.n) { return; }
    si_x[si_p.off + i] = si_x[si_p.off + i] * si_p.s;
}

// Dropout. Element i of the tensor (index hi·2^32 + lo, lo = base_lo + the thread's element,
// carried into hi) is kept when dropout_bits(dropout_key(seed, stream, hi), lo) >= thr. Bound as
// u32 so that thr = 0 (p = 0) copies the bits, NaN payloads included; a dropped element is +0.
struct DropParams {
    n : u32, out_off : u32, in_off : u32, thr : u32,
    seed : u32, stream : u32, base_lo : u32, base_hi : u32,
    scale : f32, p0 : u32, p1 : u32, p2 : u32,
};

fn dr_apply(x : u32, i : u32, u : DropParams) -> u32 {
    if (u.thr == 0u) { return x; }
    let lo = u.base_lo + i;
    let hi = u.base_hi + select(0u, 1u, lo < u.base_lo);
    if (dropout_bits(dropout_key(u.seed, u.stream, hi), lo) < u.thr) { return 0u; }
    return bitcast<u32>(bitcast<f32>(x) * u.scale);
}

@group(0) @binding(0) var<storage, read_write> dr_out : array<u32>;
@group(0) @binding(1) var<storage, read> dr_in : array<u32>;
@group(0) @binding(2) var<uniform> dr_p : DropParams;

@compute @workgroup_size(256)
fn dropout(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= dr_p.n) { return; }
    dr_out[dr_p.out_off + i] = dr_apply(dr_in[dr_p.in_off + i], i, dr_p);
}

// out is inp (one binding)
@group(0) @binding(0) var<storage, read_write> di_x : array<u32>;
@group(0) @binding(1) var<uniform> di_p : DropParams;

@compute @workgroup_size(256)
fn dropout_inplace(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= di_p.n) { return; }
    di_x[di_p.out_off + i] = dr_apply(di_x[di_p.out_off + i], i, di_p);
}
