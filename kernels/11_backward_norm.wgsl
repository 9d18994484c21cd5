// 11_backward_norm.wgsl — LayerNorm and RMSNorm backward, each as two kernels because the
// parameter gradients are reductions across rows and WGSL has no float atomics:
//   layernorm_backward: one workgroup per row, dinp += rstd·(dxhat - mean(dxhat) - xhat·mean(dxhat·xhat))
//     with dxhat = dout·weight (dinp accumulates: the residual stream's gradient is already there);
//   layernorm_backward_params: column-parallel dweight += Σ_n dout·xhat, dbias += Σ_n dout. A
//     workgroup owns 8 columns; its 256 threads are 32 row slices × 8 columns (a warp reads 4 rows
//     × 32 contiguous bytes), and the 32 partials are added in a fixed order: deterministic.
//   rmsnorm_backward / rmsnorm_backward_params: the same shapes for RMSNorm, with
//     dinp += rstd·(dxhat - xhat·mean(dxhat·xhat)), xhat = x·rstd, and dweight += Σ_n dout·xhat.

struct LNBParams { N : u32, C : u32, p0 : u32, p1 : u32 };

@group(0) @binding(0) var<storage, read_write> lb_dinp : array<f32>;
@group(0) @binding(1) var<storage, read> lb_dout : array<f32>;
@group(0) @binding(2) var<storage, read> lb_inp : array<f32>;
@group(0) @binding(3) var<storage, read> lb_weight : array<f32>;
@group(0) @binding(4) var<storage, read> lb_mean : array<f32>;
@group(0) @binding(5) var<storage, read> lb_rstd : array<f32>;
@group(0) @binding(6) var<uniform> lb_p : LNBParams;

@compute @workgroup_size(256)
fn layernorm_backward(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                      @builtin(num_workgroups) nwg : vec3<u32>) {
    let row = flat_wg(wid, nwg);
    if (row >= lb_p.N) { return; }   // uniform across the workgroup
    let C = lb_p.C;
    let base = row * C;
    let m = lb_mean[row];
    let rs = lb_rstd[row];
    var s1 = 0.0;
    var s2 = 0.0;
    for (var c = lid; c < C; c += 256u) {
        let dxh = lb_dout[base + c] * lb_weight[c];
        s1 += dxh;
        s2 += dxh * ((lb_inp[base + c] - m) * rs);
    }
    let mean_d = wg_reduce_sum(s1, lid) / f32(C);
    let mean_dx = wg_reduce_sum(s2, lid) / f32(C);
    for (var c = lid; c < C; c += 256u) {
        let xh = (lb_inp[base + c] - m) * rs;
        let dxh = lb_dout[base + c] * lb_weight[c];
        lb_dinp[base + c] += rs * (dxh - mean_d - xh * mean_dx);
    }
}

@group(0) @binding(0) var<storage, read_write> lp_dweight : array<f32>;
@group(0) @binding(1) var<storage, read_write> lp_dbias : array<f32>;
@group(0) @binding(2) var<storage, read> lp_dout : array<f32>;
@group(0) @binding(3) var<storage, read> lp_inp : array<f32>;
@group(0) @binding(4) var<storage, read> lp_mean : array<f32>;
@group(0) @binding(5) var<storage, read> lp_rstd : array<f32>;
@group(0) @binding(6) var<uniform> lp_p : LNBParams;

var<workgroup> lp_w : array<f32, 256>;
var<workgroup> lp_b : array<f32, 256>;

@compute @workgroup_size(256)
fn layernorm_backward_params(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                             @builtin(num_workgroups) nwg : vec3<u32>) {
    let col = lid % 8u;
    let slice = lid / 8u;
    let c = flat_wg(wid, nwg) * 8u + col;
    let C = lp_p.C;
    var sw = 0.0;
    var sb = 0.0;
    if (c < C) {
        for (var n = slice; n < lp_p.N; n += 32u) {
            let g = lp_dout[n * C + c];
            sw += g * ((lp_inp[n * C + c] - lp_mean[n]) * lp_rstd[n]);
            sb += g;
        }
    }
    lp_w[lid] = sw;
    lp_b[lid] = sb;
    workgroupBarrier();
    if (slice == 0u && c < C) {
        var tw = 0.0;
        var tb = 0.0;
        for (var k = 0u; k < 32u; k++) {
            tw += lp_w[k * 8u + col];
            tb += lp_b[k * 8u + col];
        }
        lp_dweight[c] += tw;
        lp_dbias[c] += tb;
    }
}

// layernorm_backward_params_part: the first stage of the parameter sums in two stages, for a C
// that is a multiple of 4 (as matmul_colsum_part in 03_matmul.wgsl, whose matmul_colsum_finish is
// the second): a workgroup per (64-column block, 256-row chunk), 16 vec4 columns × 16 row slices;
// the chunk's dweight sums go to part[chunk·C + c], its dbias sums to part[(nchunk + chunk)·C + c].
struct LNQParams { N : u32, C : u32, nchunk : u32, p0 : u32 };

@group(0) @binding(0) var<storage, read_write> lq_part : array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> lq_dout : array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> lq_inp : array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> lq_mean : array<f32>;
@group(0) @binding(4) var<storage, read> lq_rstd : array<f32>;
@group(0) @binding(5) var<uniform> lq_p : LNQParams;

var<workgroup> lq_w : array<vec4<f32>, 256>;
var<workgroup> lq_b : array<vec4<f32>, 256>;

// Row n's terms of the 4 columns c4 into the dweight and dbias sums.
fn lq_add_row(sw : ptr<function, vec4<f32>>, sb : ptr<function, vec4<f32>>, n : u32, c4n : u32, c4 : u32) {
    let g = lq_dout[n * c4n + c4];
    *sw += g * ((lq_inp[n * c4n + c4] - lq_mean[n]) * lq_rstd[n]);
    *sb += g;
}

@compute @workgroup_size(256)
fn layernorm_backward_params_part(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>) {
    let c4n = lq_p.C / 4u;
    let c4 = wid.x * 16u + lid % 16u;
    let slice = lid / 16u;
    var sw = vec4<f32>(0.0);
    var sb = vec4<f32>(0.0);
    if (c4 < c4n) {
        let n0 = wid.y * 256u + slice;
        if ((wid.y + 1u) * 256u <= lq_p.N) {  // a whole chunk: no row tests, its loads all in flight
            for (var i = 0u; i < 16u; i++) { lq_add_row(&sw, &sb, n0 + 16u * i, c4n, c4); }
        } else {
            for (var i = 0u; i < 16u; i++) {
                if (n0 + 16u * i < lq_p.N) { lq_add_row(&sw, &sb, n0 + 16u * i, c4n, c4); }
            }
        }
    }
    lq_w[lid] = sw;
    lq_b[lid] = sb;
    workgroupBarrier();
    if (slice == 0u && c4 < c4n) {
        var tw = vec4<f32>(0.0);
        var tb = vec4<f32>(0.0);
        for (var k = 0u; k < 16u; k++) {
            tw += lq_w[k * 16u + lid];
            tb += lq_b[k * 16u + lid];
        }
        lq_part[wid.y * c4n + c4] = tw;
        lq_part[(lq_p.nchunk + wid.y) * c4n + c4] = tb;
    }
}

@group(0) @binding(0) var<storage, read_write> rb_dinp : array<f32>;
@group(0) @binding(1) var<storage, read> rb_dout : array<f32>;
@group(0) @binding(2) var<storage, read> rb_inp : array<f32>;
@group(0) @binding(3) var<storage, read> rb_weight : array<f32>;
@group(0) @binding(4) var<storage, read> rb_rstd : array<f32>;
@group(0) @binding(5) var<uniform> rb_p : LNBParams;

@compute @workgroup_size(256)
fn rmsnorm_backward(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                    @builtin(num_workgroups) nwg : vec3<u32>) {
    let row = flat_wg(wid, nwg);
    if (row >= rb_p.N) { return; }   // uniform across the workgroup
    let C = rb_p.C;
    let base = row * C;
    let rs = rb_rstd[row];
    var s = 0.0;
    for (var c = lid; c < C; c += 256u) { s += rb_dout[base + c] * rb_weight[c] * (rb_inp[base + c] * rs); }
    let mean_dx = wg_reduce_sum(s, lid) / f32(C);
    for (var c = lid; c < C; c += 256u) {
        let xh = rb_inp[base + c] * rs;
        rb_dinp[base + c] += rs * (rb_dout[base + c] * rb_weight[c] - xh * mean_dx);
    }
}

@group(0) @binding(0) var<storage, read_write> rp_dweight : array<f32>;
@group(0) @binding(1) var<storage, read> rp_dout : array<f32>;
@group(0) @binding(2) var<storage, read> rp_inp : array<f32>;
@group(0) @binding(3) var<storage, read> rp_rstd : array<f32>;
@group(0) @binding(4) var<uniform> rp_p : LNBParams;

@compute @workgroup_size(256)
fn rmsnorm_backward_params(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                           @builtin(num_workgroups) nwg : vec3<u32>) {
    let col = lid % 8u;
    let slice = lid / 8u;
    let c = flat_wg(wid, nwg) * 8u + col;
    let C = rp_p.C;
    var sw = 0.0;
    if (c < C) {
        for (var n = slice; n < rp_p.N; n += 32u) { sw += rp_dout[n * C + c] * (rp_inp[n * C + c] * rp_rstd[n]); }
    }
    lp_w[lid] = sw;
    workgroupBarrier();
    if (slice == 0u && c < C) {
        var tw = 0.0;
        for (var k = 0u; k < 32u; k++) { tw += lp_w[k * 8u + col]; }
        rp_dweight[c] += tw;
    }
}

// qk_norm_backward (rows) / qk_norm_backward_params: the backward of qk_norm_forward
// (02_norm.wgsl). The row kernel writes dqkv (not +=: the op's output), one workgroup per head
// row, dx = rstd·(dxhat - xhat·mean(dxhat·xhat)), dxhat = dout·(w_offset + w), v heads copied.
// The params kernel owns 8 of the 2·HS columns (q_weight's, then k_weight's) per workgroup; its
// 32 row slices walk the (token, head) rows of that weight's heads, and the 32 partials are
// added in a fixed order.
struct QKNBParams { N : u32, NH : u32, NKV : u32, HS : u32, eps : f32, w_offset : f32, p0 : u32, p1 : u32 };

@group(0) @binding(0) var<storage, read_write> qb_dqkv : array<f32>;
@group(0) @binding(1) var<storage, read> qb_dout : array<f32>;
@group(0) @binding(2) var<storage, read> qb_qkv : array<f32>;
@group(0) @binding(3) var<storage, read> qb_qw : array<f32>;
@group(0) @binding(4) var<storage, read> qb_kw : array<f32>;
@group(0) @binding(5) var<storage, read> qb_rstd : array<f32>;
@group(0) @binding(6) var<uniform> qb_p : QKNBParams;

@compute @workgroup_size(256)
fn qk_norm_backward(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                    @builtin(num_workgroups) nwg : vec3<u32>) {
    let H = qb_p.NH + 2u * qb_p.NKV;
    let HN = qb_p.NH + qb_p.NKV;
    let row = flat_wg(wid, nwg);
    if (row >= qb_p.N * H) { return; }   // uniform across the workgroup
    let HS = qb_p.HS;
    let n = row / H;
    let h = row % H;
    let base = row * HS;
    if (h >= HN) {
        for (var c = lid; c < HS; c += 256u) { qb_dqkv[base + c] = qb_dout[base + c]; }
        return;
    }
    let rs = qb_rstd[n * HN + h];
    let isq = h < qb_p.NH;
    var s = 0.0;
    for (var c = lid; c < HS; c += 256u) {
        let g = qb_p.w_offset + select(qb_kw[c], qb_qw[c], isq);
        s += (qb_dout[base + c] * g) * (qb_qkv[base + c] * rs);
    }
    let mean = wg_reduce_sum(s, lid) / f32(HS);
    for (var c = lid; c < HS; c += 256u) {
        let g = qb_p.w_offset + select(qb_kw[c], qb_qw[c], isq);
        qb_dqkv[base + c] = rs * (qb_dout[base + c] * g - (qb_qkv[base + c] * rs) * mean);
    }
}

@group(0) @binding(0) var<storage, read_write> qp_dqw : array<f32>;
@group(0) @binding(1) var<storage, read_write> qp_dkw : array<f32>;
@group(0) @binding(2) var<storage, read> qp_dout : array<f32>;
@group(0) @binding(3) var<storage, read> qp_qkv : array<f32>;
@group(0) @binding(4) var<storage, read> qp_rstd : array<f32>;
@group(0) @binding(5) var<uniform> qp_p : QKNBParams;

@compute @workgroup_size(256)
fn qk_norm_backward_params(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                           @builtin(num_workgroups) nwg : vec3<u32>) {
    let col = lid % 8u;
    let slice = lid / 8u;
    let HS = qp_p.HS;
    let j = flat_wg(wid, nwg) * 8u + col;   // 0 .. 2·HS: q_weight's columns, then k_weight's
    let H = qp_p.NH + 2u * qp_p.NKV;
    let HN = qp_p.NH + qp_p.NKV;
    let isk = j >= HS;
    let c = select(j, j - HS, isk);
    let nh = select(qp_p.NH, qp_p.NKV, isk);   // heads of this weight per token
    let h0 = select(0u, qp_p.NH, isk);
    var sw = 0.0;
    if (j < 2u * HS) {
        for (var m = slice; m < qp_p.N * nh; m += 32u) {
            let n = m / nh;
            let h = h0 + m % nh;
            let e = (n * H + h) * HS + c;
            sw += qp_dout[e] * (qp_qkv[e] * qp_rstd[n * HN + h]);
        }
    }
    lp_w[lid] = sw;
    workgroupBarrier();
    if (slice == 0u && j < 2u * HS) {
        var tw = 0.0;
        for (var k = 0u; k < 32u; k++) { tw += lp_w[k * 8u + col]; }
        if (isk) { qp_dkw[c] += tw; } else { qp_dqw[c] += tw; }
    }
}
