// 13_optimizer.wgsl — the optimizer step on the GPU, with no readback:
//   grad_norm_partial + grad_norm_sq: global gradient norm, a two-stage deterministic reduction
//     (stage 1: up to 1024 workgroups each write the sum of squares of a strided share of g to a
//     scratch buffer; stage 2: one workgroup adds the partials in a fixed order into norm_sq[0]);
//   grad_clip_scale: one thread turns the optimizer status (norm_sq, loss sum, loss scale) into
//     the update's decisions: the unscaled norm, adamw's multiplier, skip, t, the bias
//     corrections bc1 = 1-β1^t, bc2 = 1-β2^t, the next loss scale;
//   adamw: one thread per parameter, the gradient multiplied by the status's multiplier first,
//     decoupled weight decay, the status's bias corrections.

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

// The optimizer status words (src/backend/opt_status.h; the two lists must agree).
const ST_NORM_SQ : u32 = 0u;
const ST_LOSS_SUM : u32 = 1u;
const ST_LOSS_SCALE : u32 = 2u;
const ST_CLIP : u32 = 3u;
const ST_NORM : u32 = 4u;
const ST_STEP_SCALE : u32 = 5u;
const ST_BC1 : u32 = 6u;
const ST_BC2 : u32 = 7u;
const ST_T : u32 = 8u;
const ST_SKIPS : u32 = 9u;
const ST_SKIPPED : u32 = 10u;
const ST_CLEAN : u32 = 11u;
const U32_MAX : u32 = 4294967295u;

struct ClipParams { max_norm : f32, beta1 : f32, beta2 : f32, dynamic : u32, window : u32, st_off : u32, p0 : u32, p1 : u32 };

@group(0) @binding(0) var<storage, read_write> gc_st : array<f32>;
@group(0) @binding(1) var<uniform> gc_p : ClipParams;

// 1 - beta^t in 64-bit fixed point with u32 pairs (lo, hi), exactly the integers of
// cpu_bias_correction (src/backend/cpu/ops_optim.c says why: float tricks for exact products
// do not survive GPU compilers).
// The full 64-bit product of two u32, from 16-bit limbs: (lo, hi).
fn mul32(a : u32, b : u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

// The top 64 bits of the 128-bit product of two 64-bit numbers (lo, hi).
fn fx_mul(x : vec2<u32>, y : vec2<u32>) -> vec2<u32> {
    let A = mul32(x.y, y.y);
    let B = mul32(x.y, y.x);
    let C = mul32(x.x, y.y);
    let D = mul32(x.x, y.x);
    let s1a = B.x + C.x;
    var c1 = select(0u, 1u, s1a < B.x);
    let s1 = s1a + D.y;
    c1 = c1 + select(0u, 1u, s1 < s1a);
    let s2a = A.x + B.y;
    var c2 = select(0u, 1u, s2a < A.x);
    let s2b = s2a + C.y;
    c2 = c2 + select(0u, 1u, s2b < s2a);
    let s2 = s2b + c1;
    c2 = c2 + select(0u, 1u, s2 < s2b);
    return vec2<u32>(s2, A.y + c2);
}

fn fx_from_f32(beta : f32) -> vec2<u32> {
    let bits = bitcast<u32>(beta);
    let E = (bits >> 23u) & 0xffu;
    if (E == 0u || (bits >> 31u) != 0u) { return vec2<u32>(0u, 0u); }
    let mant = (bits & 0x7fffffu) | 0x800000u;
    let sh = i32(E) - 86;
    if (sh > 40) { return vec2<u32>(0u, 0u); }
    if (sh >= 32) { return vec2<u32>(0u, mant << u32(sh - 32)); }
    if (sh > 0) { return vec2<u32>(mant << u32(sh), mant >> u32(32 - sh)); }
    if (sh == 0) { return vec2<u32>(mant, 0u); }
    if (-sh < 32) { return vec2<u32>(mant >> u32(-sh), 0u); }
    return vec2<u32>(0u, 0u);
}

fn bias_correction(beta : f32, t : u32) -> f32 {
    var b = fx_from_f32(beta);
    var r = vec2<u32>(0u, 0u);
    var one = true;
    for (var k = t; k != 0u; k = k >> 1u) {
        if ((k & 1u) != 0u) {
            if (one) { r = b; } else { r = fx_mul(r, b); }
            one = false;
        }
        b = fx_mul(b, b);
    }
    if (one) { return 0.0; }
    if (r.x == 0u && r.y == 0u) { return 1.0; }
    // d = 2^64 - r (two's complement)
    var dl = ~r.x + 1u;
    var dh = ~r.y + select(0u, 1u, dl == 0u);
    var lz = 0u;
    if (dh == 0u) { dh = dl; dl = 0u; lz = 32u; }
    let z = countLeadingZeros(dh);
    var w = dh;  // the top 32 bits of d << (lz + z)
    if (z > 0u) { w = (dh << z) | (dl >> (32u - z)); }
    lz = lz + z;
    let top = w >> 7u;  // the leading 25 bits
    let mant = (top + 1u) >> 1u;
    return ldexp(f32(mant), -24 - i32(lz));
}

fn st_u32(i : u32) -> u32 { return bitcast<u32>(gc_st[gc_p.st_off + i]); }
fn st_set_u32(i : u32, v : u32) { gc_st[gc_p.st_off + i] = bitcast<f32>(v); }

// One thread: the update's decisions (docs/kernels.md#grad_clip_scale, cpu_grad_clip_scale).
// norm = sqrt(norm_sq) / S; applied when the norm and the loss sum are finite (t += 1, adamw's
// multiplier clip / S, the bias corrections), skipped otherwise (multiplier 0); with dynamic
// scaling S halves on a skip and doubles after `window` applied updates in a row.
@compute @workgroup_size(1)
fn grad_clip_scale() {
    let o = gc_p.st_off;
    let S = gc_st[o + ST_LOSS_SCALE];
    let norm = sqrt(gc_st[o + ST_NORM_SQ]) / S;
    var clip = 1.0;
    if (gc_p.max_norm > 0.0 && norm > gc_p.max_norm) { clip = gc_p.max_norm / norm; }
    // a multiplier below the smallest normal f32 is skipped (flushed to 0 on some GPUs, kept as a
    // subnormal on others and on the CPU: skipping is the one answer all agree on)
    let ok = is_finite_bits(norm) && is_finite_bits(gc_st[o + ST_LOSS_SUM]) && clip / S >= 1.17549435e-38;
    var t = st_u32(ST_T);
    var clean = st_u32(ST_CLEAN);
    var next = S;
    gc_st[o + ST_NORM] = norm;
    gc_st[o + ST_STEP_SCALE] = S;
    if (ok) {
        t = t + select(0u, 1u, t < U32_MAX);
        gc_st[o + ST_CLIP] = clip / S;
        gc_st[o + ST_BC1] = bias_correction(gc_p.beta1, t);
        gc_st[o + ST_BC2] = bias_correction(gc_p.beta2, t);
        clean = clean + select(0u, 1u, clean < U32_MAX);
        if (gc_p.dynamic != 0u && clean >= gc_p.window) {
            if (S * 2.0 <= 18446744073709551616.0) { next = S * 2.0; }  // 2^64, WGT_LOSS_SCALE_MAX
            clean = 0u;
        }
        st_set_u32(ST_SKIPPED, 0u);
    } else {
        gc_st[o + ST_CLIP] = 0.0;
        let skips = st_u32(ST_SKIPS);
        st_set_u32(ST_SKIPS, skips + select(0u, 1u, skips < U32_MAX));
        st_set_u32(ST_SKIPPED, 1u);
        if (gc_p.dynamic != 0u) {
            next = max(S * 0.5, 1.17549435e-38);
            clean = 0u;
        }
    }
    st_set_u32(ST_T, t);
    st_set_u32(ST_CLEAN, clean);
    gc_st[o + ST_LOSS_SCALE] = next;
}

struct AdamParams {
    n : u32, p_off : u32, m_off : u32, v_off : u32,
    g_off : u32, s_off : u32, p0 : u32, p1 : u32,
    lr : f32, beta1 : f32, beta2 : f32, eps : f32,
    weight_decay : f32, p2 : f32, p3 : f32, p4 : f32,
};

@group(0) @binding(0) var<storage, read_write> ad_params : array<f32>;
@group(0) @binding(1) var<storage, read_write> ad_m : array<f32>;
@group(0) @binding(2) var<storage, read_write> ad_v : array<f32>;
@group(0) @binding(3) var<storage, read> ad_grads : array<f32>;
@group(0) @binding(4) var<storage, read> ad_st : array<f32>;
@group(0) @binding(5) var<uniform> ad_p : AdamParams;

@compute @workgroup_size(256)
fn adamw(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= ad_p.n) { return; }
    let scale = ad_st[ad_p.s_off + ST_CLIP];
    if (scale == 0.0) { return; }  // a skipped update (non-finite gradient norm): nothing changes
    let bc1 = ad_st[ad_p.s_off + ST_BC1];
    let bc2 = ad_st[ad_p.s_off + ST_BC2];
    let g = ad_grads[ad_p.g_off + i] * scale;
    let m = ad_p.beta1 * ad_m[ad_p.m_off + i] + (1.0 - ad_p.beta1) * g;
    let v = ad_p.beta2 * ad_v[ad_p.v_off + i] + (1.0 - ad_p.beta2) * g * g;
    ad_m[ad_p.m_off + i] = m;
    ad_v[ad_p.v_off + i] = v;
    let mhat = m / bc1;
    let vhat = v / bc2;
    let p = ad_params[ad_p.p_off + i];
    ad_params[ad_p.p_off + i] = p - ad_p.lr * (mhat / (sqrt(vhat) + ad_p.eps) + ad_p.weight_decay * p);
}
