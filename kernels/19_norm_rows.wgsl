// 19_norm_rows.wgsl — LayerNorm forward and backward with a row on a few lanes of a subgroup,
// for devices with subgroups and a C that is a multiple of 4. The kernels of 02_norm.wgsl and
// 11_backward_norm.wgsl give each row a workgroup of 256 threads and two tree reductions through
// workgroup memory (8 barriers each); a GPT-2 row is 192 vec4, so most of their time went to the
// barriers (on the H200 about a quarter of the memory bandwidth). Here a workgroup of 256 threads
// holds 256/LN_RL rows, each on LN_RL adjacent lanes that read vec4 columns ln, ln + LN_RL, ...
// and add their partial sums by the host's ln_rsum (subgroupShuffleXor butterflies: every lane
// ends with the same sum; the host uses it only where every subgroup has at least LN_RL lanes,
// which then hold whole rows). No workgroup memory, no barriers. The ops, their statistics
// (around the row's first element x0) and bindings are those of layernorm_forward and
// layernorm_backward (docs/kernels.md); only the order of the sums differs.
// The backward loads a lane's vec4 of a row (nj = ceil(C/4 / LN_RL)) of dout, inp and dinp once
// into registers where the host gives LN_NJ = nj (rows of up to LN_RL·64 columns): every load
// issued before the first sum, the second pass over the row from the registers (on the H200 a
// GPT-2 124M step's layernorm_backward 1.04 -> 0.84 ms). Otherwise (LN_NJ = 0) each pass reads
// the row again, as the forward does (the same change measured no faster there: 0.584 ->
// 0.577 ms). The same sums in the same order either way.
// Host constants: LN_RL (a power of 2), LN_NJ (0 or nj, at most 16) and ln_rsum.

const LN_NJC : u32 = max(LN_NJ, 1u);  // the register arrays' length

struct LNRParams { N : u32, C : u32, p0 : u32, p1 : u32 };

const LN_ROWS : u32 = 256u / LN_RL;  // rows a workgroup

@group(0) @binding(0) var<storage, read_write> lr_out : array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> lr_mean : array<f32>;
@group(0) @binding(2) var<storage, read_write> lr_rstd : array<f32>;
@group(0) @binding(3) var<storage, read> lr_inp : array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> lr_weight : array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> lr_bias : array<vec4<f32>>;
@group(0) @binding(6) var<uniform> lr_p : LNRParams;

// (lane, row, vec4 a lane) of an invocation for N rows of C4 vec4. Rows past N compute row
// N - 1's values and store nothing, so that every lane of a subgroup reaches the shuffles (trip
// counts are the same for every lane: uniform control flow; a lane's last ones may pass C4).
fn ln_place(lid : u32, wid : vec3<u32>, nwg : vec3<u32>, C4 : u32) -> vec3<u32> {
    return vec3<u32>(lid % LN_RL, flat_wg(wid, nwg) * LN_ROWS + lid / LN_RL, (C4 + LN_RL - 1u) / LN_RL);
}

@compute @workgroup_size(256)
fn layernorm_forward_rows(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                          @builtin(num_workgroups) nwg : vec3<u32>) {
    let N = lr_p.N;
    let C4 = lr_p.C / 4u;
    let pl = ln_place(lid, wid, nwg, C4);
    let ln = pl.x;
    let row = pl.y;
    let nj = pl.z;
    let base = min(row, N - 1u) * C4;
    let x0 = vec4<f32>(lr_inp[base].x);
    var s = 0.0;
    for (var j = 0u; j < nj; j++) {
        let c4 = ln + LN_RL * j;
        if (c4 < C4) {
            let v = lr_inp[base + c4] - x0;
            s += (v.x + v.y) + (v.z + v.w);
        }
    }
    let mrel = ln_rsum(s) / f32(lr_p.C);  // mean - x0
    var q = 0.0;
    for (var j = 0u; j < nj; j++) {
        let c4 = ln + LN_RL * j;
        if (c4 < C4) {
            let d = (lr_inp[base + c4] - x0) - vec4<f32>(mrel);
            q += (d.x * d.x + d.y * d.y) + (d.z * d.z + d.w * d.w);
        }
    }
    let rstd = 1.0 / sqrt(ln_rsum(q) / f32(lr_p.C) + 1e-5);
    if (row >= N) { return; }
    for (var j = 0u; j < nj; j++) {
        let c4 = ln + LN_RL * j;
        if (c4 < C4) {
            lr_out[base + c4] = ((lr_inp[base + c4] - x0) - vec4<f32>(mrel)) * rstd * lr_weight[c4] + lr_bias[c4];
        }
    }
    if (ln == 0u) {
        lr_mean[row] = x0.x + mrel;
        lr_rstd[row] = rstd;
    }
}

@group(0) @binding(0) var<storage, read_write> lrb_dinp : array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> lrb_dout : array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> lrb_inp : array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> lrb_weight : array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> lrb_mean : array<f32>;
@group(0) @binding(5) var<storage, read> lrb_rstd : array<f32>;
@group(0) @binding(6) var<uniform> lrb_p : LNRParams;

// layernorm_backward_rows with the row in registers (LN_NJ > 0): dout, inp and dinp loaded first
fn layernorm_backward_cached(ln : u32, row : u32, base : u32, C4 : u32, m : vec4<f32>, rs : f32) {
    var dxv : array<vec4<f32>, LN_NJC>;
    var xhv : array<vec4<f32>, LN_NJC>;
    var dv : array<vec4<f32>, LN_NJC>;
    let live = row < lrb_p.N;
    for (var j = 0u; j < LN_NJ; j++) {
        let c4 = ln + LN_RL * j;
        if (c4 < C4) {
            dxv[j] = lrb_dout[base + c4] * lrb_weight[c4];
            xhv[j] = (lrb_inp[base + c4] - m) * rs;
            if (live) { dv[j] = lrb_dinp[base + c4]; }
        }
    }
    var s1 = 0.0;
    var s2 = 0.0;
    for (var j = 0u; j < LN_NJ; j++) {
        if (ln + LN_RL * j < C4) {
            let dxh = dxv[j];
            let xh = xhv[j];
            s1 += (dxh.x + dxh.y) + (dxh.z + dxh.w);
            s2 += (dxh.x * xh.x + dxh.y * xh.y) + (dxh.z * xh.z + dxh.w * xh.w);
        }
    }
    let mean_d = ln_rsum(s1) / f32(lrb_p.C);
    let mean_dx = ln_rsum(s2) / f32(lrb_p.C);
    if (!live) { return; }
    for (var j = 0u; j < LN_NJ; j++) {
        let c4 = ln + LN_RL * j;
        if (c4 < C4) { lrb_dinp[base + c4] = dv[j] + rs * (dxv[j] - vec4<f32>(mean_d) - xhv[j] * mean_dx); }
    }
}

// dinp += rstd·(dxhat - mean(dxhat) - xhat·mean(dxhat·xhat)), dxhat = dout·weight (dinp
// accumulates); the parameter gradients are layernorm_backward_params(_part)'s.
@compute @workgroup_size(256)
fn layernorm_backward_rows(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                           @builtin(num_workgroups) nwg : vec3<u32>) {
    let N = lrb_p.N;
    let C4 = lrb_p.C / 4u;
    let pl = ln_place(lid, wid, nwg, C4);
    let ln = pl.x;
    let row = pl.y;
    let nj = pl.z;
    let r = min(row, N - 1u);
    let base = r * C4;
    let m = vec4<f32>(lrb_mean[r]);
    let rs = lrb_rstd[r];
    if (LN_NJ > 0u) {
        layernorm_backward_cached(ln, row, base, C4, m, rs);
        return;
    }
    var s1 = 0.0;
    var s2 = 0.0;
    for (var j = 0u; j < nj; j++) {
        let c4 = ln + LN_RL * j;
        if (c4 < C4) {
            let dxh = lrb_dout[base + c4] * lrb_weight[c4];
            let xh = (lrb_inp[base + c4] - m) * rs;
            s1 += (dxh.x + dxh.y) + (dxh.z + dxh.w);
            s2 += (dxh.x * xh.x + dxh.y * xh.y) + (dxh.z * xh.z + dxh.w * xh.w);
        }
    }
    let mean_d = ln_rsum(s1) / f32(lrb_p.C);
    let mean_dx = ln_rsum(s2) / f32(lrb_p.C);
    if (row >= N) { return; }
    for (var j = 0u; j < nj; j++) {
        let c4 = ln + LN_RL * j;
        if (c4 < C4) {
            let xh = (lrb_inp[base + c4] - m) * rs;
            let dxh = lrb_dout[base + c4] * lrb_weight[c4];
            lrb_dinp[base + c4] += rs * (dxh - vec4<f32>(mean_d) - xh * mean_dx);
        }
    }
}
