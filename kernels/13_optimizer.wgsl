// 13_optimizer.wgsl — the optimizer step on the GPU, with no readback:
//   grad_norm_partial + grad_norm_sq: global gradient norm, a two-stage deterministic reduction
//     (stage 1: up to 1024 workgroups each write the sum of squares of a strided share of g to a
//     scratch buffer; stage 2: one workgroup adds the partials in a fixed order into norm_sq[0]);
//   grad_clip_scale: one thread turns norm_sq into the clip factor scale[0] (and the norm, scale[1]);
//   adamw: one thread per parameter, the gradient multiplied by scale[0] first, decoupled weight
//     decay, bias corrections bc1 = 1-β1^t, bc2 = 1-β2^t computed by the host (as the C reference).

struct NormParams { n : u32, nwg : u32, g_off : u32, out_off : u32, accumulate : u32, p0 : u32, p1 : u32, p2 : u32 };

@group(0) @binding(0) var<storage, read_write> gp_part : array<f32>;
@group(0) @binding(1) var<storage, read> gp_g : array<f32>;
@group(0) @binding(2) var<uniform> gp_p : NormParams;

@compute @workgroup_size(256)
fn grad_norm_partial(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>) {
    var s = 0.0;
    for (var i = wid.x * 256u + lid; i < gp_p.n; i += gp_p.nwg * 256u) {
        let x = gp_g[gp_p.g_off + i];
        s += x * x;
    }
    let t = wg_reduce_sum(s, lid);
    if (lid == 0u) { gp_part[wid.x] = t; }
}

@group(0) @binding(0) var<storage, read_write> gn_out : array<f32>;
@group(0) @binding(1) var<storage, read> gn_part : array<f32>;
@group(0) @binding(2) var<uniform> gn_p : NormParams;

@compute @workgroup_size(256)
fn grad_norm_sq(@builtin(local_invocation_index) lid : u32) {
    var s = 0.0;
    for (var i = lid; i < gn_p.nwg; i += 256u) { s += gn_part[i]; }
    let t = wg_reduce_sum(s, lid);
    if (lid == 0u) {
        let prev = select(0.0, gn_out[gn_p.out_off], gn_p.accumulate != 0u);
        gn_out[gn_p.out_off] = prev + t;
    }
}

struct ClipParams { max_norm : f32, scale_off : u32, norm_off : u32, p0 : u32 };

@group(0) @binding(0) var<storage, read_write> gc_scale : array<f32>;
@group(0) @binding(1) var<storage, read> gc_norm_sq : array<f32>;
@group(0) @binding(2) var<uniform> gc_p : ClipParams;

// scale[0] = min(1, max_norm / norm), 1 when clipping is off (max_norm <= 0) or the norm is 0 or
// NaN (comparisons with NaN are false, as in the C reference: the host checks scale[1]).
@compute @workgroup_size(256)
fn grad_clip_scale(@builtin(local_invocation_index) lid : u32) {
    if (lid != 0u) { return; }
    let norm = sqrt(gc_norm_sq[gc_p.norm_off]);
    var s = 1.0;
    if (gc_p.max_norm > 0.0 && norm > gc_p.max_norm) { s = gc_p.max_norm / norm; }
    // a NaN or infinite norm: scale 0 tells adamw to skip the whole update (no scale can repair it)
    if (!is_finite_bits(norm)) { s = 0.0; }
    gc_scale[gc_p.scale_off] = s;
    gc_scale[gc_p.scale_off + 1u] = norm;
}

struct AdamParams {
    n : u32, p_off : u32, m_off : u32, v_off : u32,
    g_off : u32, s_off : u32, p0 : u32, p1 : u32,
    lr : f32, beta1 : f32, beta2 : f32, eps : f32,
    weight_decay : f32, bc1 : f32, bc2 : f32, p2 : f32,
};

@group(0) @binding(0) var<storage, read_write> ad_params : array<f32>;
@group(0) @binding(1) var<storage, read_write> ad_m : array<f32>;
@group(0) @binding(2) var<storage, read_write> ad_v : array<f32>;
@group(0) @binding(3) var<storage, read> ad_grads : array<f32>;
@group(0) @binding(4) var<storage, read> ad_scale : array<f32>;
@group(0) @binding(5) var<uniform> ad_p : AdamParams;

@compute @workgroup_size(256)
fn adamw(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= ad_p.n) { return; }
    let scale = ad_scale[ad_p.s_off];
    if (scale == 0.0) { return; }  // a skipped update (non-finite gradient norm): nothing changes
    let g = ad_grads[ad_p.g_off + i] * scale;
    let m = ad_p.beta1 * ad_m[ad_p.m_off + i] + (1.0 - ad_p.beta1) * g;
    let v = ad_p.beta2 * ad_v[ad_p.v_off + i] + (1.0 - ad_p.beta2) * g * g;
    ad_m[ad_p.m_off + i] = m;
    ad_v[ad_p.v_off + i] = v;
    let mhat = m / ad_p.bc1;
    let vhat = v / ad_p.bc2;
    let p = ad_params[ad_p.p_off + i];
    ad_params[ad_p.p_off + i] = p - ad_p.lr * (mhat / (sqrt(vhat) + ad_p.eps) + ad_p.weight_decay * p);
}
