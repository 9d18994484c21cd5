// 02_norm.wgsl — LayerNorm forward (GPT-2: eps 1e-5, biased variance, weight and bias) and
// RMSNorm forward (LLaMA: no mean, no bias, eps from the config).
// One workgroup per row (flat_wg: N may exceed 65535); the 256 threads stride over the C
// columns. Two passes over the row, first the mean and then the squared deviations, so that
// rows with a large mean do not lose the variance to cancellation (E[x²] - E[x]² would).
// mean and rstd are saved for the backward.

struct LNParams { N : u32, C : u32, p0 : u32, p1 : u32 };

@group(0) @binding(0) var<storage, read_write> lf_out : array<f32>;
@group(0) @binding(1) var<storage, read_write> lf_mean : array<f32>;
@group(0) @binding(2) var<storage, read_write> lf_rstd : array<f32>;
@group(0) @binding(3) var<storage, read> lf_inp : array<f32>;
@group(0) @binding(4) var<storage, read> lf_weight : array<f32>;
@group(0) @binding(5) var<storage, read> lf_bias : array<f32>;
@group(0) @binding(6) var<uniform> lf_p : LNParams;

@compute @workgroup_size(256)
fn layernorm_forward(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                     @builtin(num_workgroups) nwg : vec3<u32>) {
    let row = flat_wg(wid, nwg);
    if (row >= lf_p.N || lf_p.C == 0u) { return; }   // uniform across the workgroup
    let C = lf_p.C;
    let base = row * C;
    // Statistics are taken around the row's first element x0: x - x0 is exact for a row with a
    // large common offset, so neither the mean's rounding to f32 nor cancellation in the
    // deviations loses the row's spread (the C reference works in double).
    let x0 = lf_inp[base];
    var s = 0.0;
    for (var c = lid; c < C; c += 256u) { s += lf_inp[base + c] - x0; }
    let mrel = wg_reduce_sum(s, lid) / f32(C);   // mean - x0
    var q = 0.0;
    for (var c = lid; c < C; c += 256u) {
        let d = (lf_inp[base + c] - x0) - mrel;
        q += d * d;
    }
    let rstd = 1.0 / sqrt(wg_reduce_sum(q, lid) / f32(C) + 1e-5);
    for (var c = lid; c < C; c += 256u) {
        lf_out[base + c] = ((lf_inp[base + c] - x0) - mrel) * rstd * lf_weight[c] + lf_bias[c];
    }
    let mean = x0 + mrel;
    if (lid == 0u) {
        lf_mean[row] = mean;
        lf_rstd[row] = rstd;
    }
}

// RMSNorm: out = x·rstd·weight, rstd = 1/sqrt(mean(x²) + eps); one workgroup per row like the
// LayerNorm above. rstd is saved for the backward.
struct RMSParams { N : u32, C : u32, eps : f32, p0 : u32 };

@group(0) @binding(0) var<storage, read_write> rf_out : array<f32>;
@group(0) @binding(1) var<storage, read_write> rf_rstd : array<f32>;
@group(0) @binding(2) var<storage, read> rf_inp : array<f32>;
@group(0) @binding(3) var<storage, read> rf_weight : array<f32>;
@group(0) @binding(4) var<uniform> rf_p : RMSParams;

@compute @workgroup_size(256)
fn rmsnorm_forward(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                   @builtin(num_workgroups) nwg : vec3<u32>) {
    let row = flat_wg(wid, nwg);
    if (row >= rf_p.N || rf_p.C == 0u) { return; }   // uniform across the workgroup
    let C = rf_p.C;
    let base = row * C;
    var q = 0.0;
    for (var c = lid; c < C; c += 256u) {
        let x = rf_inp[base + c];
        q += x * x;
    }
    let rstd = 1.0 / sqrt(wg_reduce_sum(q, lid) / f32(C) + rf_p.eps);
    for (var c = lid; c < C; c += 256u) { rf_out[base + c] = rf_inp[base + c] * rstd * rf_weight[c]; }
    if (lid == 0u) { rf_rstd[row] = rstd; }
}

// qk_norm_forward: RMSNorm over each q and k head of a fused qkv (Qwen3's q_norm / k_norm,
// Gemma-3's with 1 + w). qkv is N = B·T rows of H = NH + 2·NKV heads of HS values, so head row
// r = n·H + h starts at r·HS. One workgroup per head row: h < NH takes q_weight, h < NH + NKV
// k_weight, the v heads are copied. rstd [N, NH + NKV].
struct QKNParams { N : u32, NH : u32, NKV : u32, HS : u32, eps : f32, w_offset : f32, p0 : u32, p1 : u32 };

@group(0) @binding(0) var<storage, read_write> qf_out : array<f32>;
@group(0) @binding(1) var<storage, read_write> qf_rstd : array<f32>;
@group(0) @binding(2) var<storage, read> qf_qkv : array<f32>;
@group(0) @binding(3) var<storage, read> qf_qw : array<f32>;
@group(0) @binding(4) var<storage, read> qf_kw : array<f32>;
@group(0) @binding(5) var<uniform> qf_p : QKNParams;

@compute @workgroup_size(256)
fn qk_norm_forward(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                   @builtin(num_workgroups) nwg : vec3<u32>) {
    let H = qf_p.NH + 2u * qf_p.NKV;
    let HN = qf_p.NH + qf_p.NKV;
    let row = flat_wg(wid, nwg);
    if (row >= qf_p.N * H) { return; }   // uniform across the workgroup
    let HS = qf_p.HS;
    let n = row / H;
    let h = row % H;
    let base = row * HS;
    if (h >= HN) {  // a v head: copied
        for (var c = lid; c < HS; c += 256u) { qf_out[base + c] = qf_qkv[base + c]; }
        return;
    }
    var q = 0.0;
    for (var c = lid; c < HS; c += 256u) {
        let x = qf_qkv[base + c];
        q += x * x;
    }
    let rstd = 1.0 / sqrt(wg_reduce_sum(q, lid) / f32(HS) + qf_p.eps);
    for (var c = lid; c < HS; c += 256u) {
        let w = select(qf_kw[c], qf_qw[c], h < qf_p.NH);
        qf_out[base + c] = (qf_qkv[base + c] * rstd) * (qf_p.w_offset + w);
    }
    if (lid == 0u) { qf_rstd[n * HN + h] = rstd; }
}
