// 14_residual.wgsl — the residual stream's element-wise ops, one thread per element:
//   residual_forward: out = a + b (the host dispatches add_inplace when out is a or b: a buffer
//     may not be bound both read-only and writable in one dispatch);
//   add_inplace: out += a (a branch's gradient joining the residual stream's).
// Element offsets in the params let the host bind 256-byte-aligned windows of large tensors.

struct ResParams { n : u32, out_off : u32, a_off : u32, b_off : u32 };

@group(0) @binding(0) var<storage, read_write> rf_out : array<f32>;
@group(0) @binding(1) var<storage, read> rf_a : array<f32>;
@group(0) @binding(2) var<storage, read> rf_b : array<f32>;
@group(0) @binding(3) var<uniform> rf_p : ResParams;

@compute @workgroup_size(256)
fn residual_forward(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= rf_p.n) { return; }
    rf_out[rf_p.out_off + i] = rf_a[rf_p.a_off + i] + rf_b[rf_p.b_off + i];
}

@group(0) @binding(0) var<storage, read_write> ai_out : array<f32>;
@group(0) @binding(1) var<storage, read> ai_a : array<f32>;
@group(0) @binding(2) var<uniform> ai_p : ResParams;

@compute @workgroup_size(256)
fn add_inplace(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= ai_p.n) { return; }
    ai_out[ai_p.out_off + i] += ai_a[ai_p.a_off + i];
}
