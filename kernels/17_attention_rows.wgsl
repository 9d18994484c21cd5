// 17_attention_rows.wgsl — causal attention one query row (forward, dQ) or one key row (dK, dV)
// per workgroup, for head sizes whose tiles do not fit the device's workgroup memory (the tiled
// kernels of 05_attention.wgsl / 10_backward_attention.wgsl keep whole BR×HS and BC×HS tiles;
// at HS = 256 the smallest of them needs 48 KiB). Here a workgroup holds one or two rows of HS
// values and 256 scores: 3 KiB whatever the head size up to AR_HS_MAX. The same contract as
// attention_forward / attention_backward (docs/kernels.md#attention_forward): qkv[B,T,W] with
// q (NH heads) | k (NKV heads, from column C = NH·HS) | v (from column vc), query head h reading
// kv head h / GQ; out[B,T,C], lse[B,NH,T] natural log; dropout on the probabilities with the
// same hashed mask (dropout_bits(dropout_key(dseed, (b·NH + h)·T + t, DROPOUT_ATTN), j) >= dthr).
// The attention mask (docs/kernels.md#attention-mask) as in the tiled kernels: query t of
// sequence b attends keys [lo(t), t], lo(t) = max(doc[b,t], t - window + 1), doc (u32 [B,T],
// non-decreasing along t) read only when has_doc is 1; window 0: none.
//
// Each row is walked in chunks of 256 keys (or queries): a thread scores one of them (a dot
// product over HS from global memory), then each thread owns one head column (HS <= 256) and
// adds the chunk's weighted rows in key order. The sums run in a fixed order: deterministic.
//   attention_rows_forward        one workgroup per (b, h, t): online softmax over the chunks
//   attention_rows_dsum           one workgroup per (b, t, h): D = Σ dout·out, written into
//                                 dqkv's q slot (column 0 of the head), read by the next two
//   attention_rows_backward_dkdv  one workgroup per (b, g, key j): over the group's query heads
//                                 in order and t >= j, dV += P̃·dout_t, dK += scale·dS·q_t
//   attention_rows_backward_dq    one workgroup per (b, h, t): dQ = scale·Σ_j dS·k_j (reads its
//                                 D first, so it runs after dkdv, which reads every D)
// with P = exp(scale·q·k - lse), m the dropout multiplier (0 or 1/(1-p); 1 without dropout),
// P̃ = P·m, dP = (dout·v)·m, dS = P·(dP - D). K and V rows are re-read from global memory for
// each query row: slower than the tiles, which remain the path wherever they fit.

const AR_HS_MAX : u32 = 256u;
const AR_NEG : f32 = -1.0e30;

struct RowParams {
    B : u32, T : u32, NH : u32, NKV : u32,
    HS : u32, W : u32, C : u32, vc : u32,      // W: qkv's row; C = NH·HS; vc: first v column
    GQ : u32, dseed : u32, dthr : u32, drop : u32,
    scale : f32, dscale : f32, has_doc : u32, window : u32,  // the mask: doc bound, window (0 none)
};

@group(0) @binding(0) var<storage, read_write> ar_out : array<f32>;
@group(0) @binding(1) var<storage, read_write> ar_lse : array<f32>;
@group(0) @binding(2) var<storage, read> ar_qkv : array<f32>;
@group(0) @binding(3) var<storage, read> ar_doc : array<u32>;
@group(0) @binding(4) var<uniform> ar_p : RowParams;

// the backward kernels' bindings: attention_backward's dqkv, dout, qkv, lse, doc_start (dkdv, dq)
// or dqkv, dout, out (dsum), params last
@group(0) @binding(0) var<storage, read_write> arb_dqkv : array<f32>;
@group(0) @binding(1) var<storage, read> arb_dout : array<f32>;
@group(0) @binding(2) var<storage, read> arb_qkv : array<f32>;
@group(0) @binding(3) var<storage, read> arb_lse : array<f32>;
@group(0) @binding(4) var<storage, read> arb_doc : array<u32>;
@group(0) @binding(5) var<uniform> arb_p : RowParams;
@group(0) @binding(2) var<storage, read> ards_out : array<f32>;
@group(0) @binding(3) var<uniform> ards_p : RowParams;

var<workgroup> ar_a : array<f32, AR_HS_MAX>;   // a row of HS values (q, or k)
var<workgroup> ar_b : array<f32, AR_HS_MAX>;   // a second row (dout, or v)
var<workgroup> ar_s : array<f32, 256>;         // the chunk's weights
var<workgroup> ar_s2 : array<f32, 256>;        // a second set (dK's dS beside dV's P̃)

// dropout multiplier of key j in the row with key rkey (1 without dropout)
fn ar_mult(u : RowParams, rkey : u32, j : u32) -> f32 {
    if (u.drop == 0u) { return 1.0; }
    return dropout_mult(rkey, j, u.dthr, u.dscale);
}

// The first key query t (< T) of sequence b attends (the mask above, attn_lo); never above t.
// The forward reads its own doc_start binding, the backward kernels theirs (only when has_doc is 1).
fn ar_lo(u : RowParams, b : u32, t : u32) -> u32 {
    var d = 0u;
    if (u.has_doc != 0u) { d = ar_doc[b * u.T + t]; }
    return attn_lo(u.has_doc, d, t, u.window);
}
fn arb_lo(u : RowParams, b : u32, t : u32) -> u32 {
    var d = 0u;
    if (u.has_doc != 0u) { d = arb_doc[b * u.T + t]; }
    return attn_lo(u.has_doc, d, t, u.window);
}

// The backward's P = exp(scale·q·k - lse) from the dot product sq, and dS = P·(dP·m - D) from
// dout·v = dp, the dropout multiplier m and the row's D: (P, dS).
fn arb_pds(u : RowParams, sq : f32, dp : f32, lse : f32, m : f32, D : f32) -> vec2<f32> {
    let p = exp(sq * u.scale - lse);
    return vec2<f32>(p, p * (dp * m - D));
}

@compute @workgroup_size(256)
fn attention_rows_forward(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                          @builtin(num_workgroups) nwg : vec3<u32>) {
    let u = ar_p;
    let row = flat_wg(wid, nwg);           // (b·NH + h)·T + t
    if (row >= u.B * u.NH * u.T) { return; }  // uniform across the workgroup
    let t = row % u.T;
    let bh = row / u.T;
    let b = bh / u.NH;
    let h = bh % u.NH;
    let g = h / u.GQ;
    let HS = u.HS;
    if (lid < HS) { ar_a[lid] = ar_qkv[(b * u.T + t) * u.W + h * HS + lid]; }
    workgroupBarrier();
    let rkey = dropout_key(u.dseed, row, DROPOUT_ATTN);
    var m = AR_NEG;
    var l = 0.0;
    var acc = 0.0;  // out column lid
    for (var j0 = ar_lo(u, b, t); j0 <= t; j0 += 256u) {
        let j = j0 + lid;
        var s = AR_NEG;
        if (j <= t) {
            let kb = (b * u.T + j) * u.W + u.C + g * HS;
            var d = 0.0;
            for (var c = 0u; c < HS; c++) { d += ar_a[c] * ar_qkv[kb + c]; }
            s = d * u.scale;
        }
        let mn = max(m, wg_reduce_max(s, lid));
        var p = 0.0;
        if (j <= t) { p = exp(s - mn); }
        let alpha = exp(m - mn);
        l = l * alpha + wg_reduce_sum(p, lid);
        if (j <= t) { p = p * ar_mult(u, rkey, j); }
        ar_s[lid] = p;
        workgroupBarrier();
        acc = acc * alpha;
        let n = min(256u, t + 1u - j0);
        if (lid < HS) {
            for (var e = 0u; e < n; e++) { acc += ar_s[e] * ar_qkv[(b * u.T + j0 + e) * u.W + u.vc + g * HS + lid]; }
        }
        workgroupBarrier();
        m = mn;
    }
    if (lid < HS) { ar_out[(b * u.T + t) * u.C + h * HS + lid] = acc / l; }
    if (lid == 0u) { ar_lse[row] = m + log(l); }
}

@compute @workgroup_size(256)
fn attention_rows_dsum(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                       @builtin(num_workgroups) nwg : vec3<u32>) {
    let u = ards_p;
    let row = flat_wg(wid, nwg);           // (b·T + t)·NH + h
    if (row >= u.B * u.T * u.NH) { return; }
    let HS = u.HS;
    var d = 0.0;
    if (lid.x < HS) { d = arb_dout[row * HS + lid.x] * ards_out[row * HS + lid.x]; }
    let s = wg_reduce_sum(d, lid.x);
    if (lid.x == 0u) { arb_dqkv[(row / u.NH) * u.W + (row % u.NH) * HS] = s; }
}

@compute @workgroup_size(256)
fn attention_rows_backward_dkdv(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                                @builtin(num_workgroups) nwg : vec3<u32>) {
    let u = arb_p;
    let row = flat_wg(wid, nwg);           // (b·NKV + g)·T + j
    if (row >= u.B * u.NKV * u.T) { return; }
    let j = row % u.T;
    let bg = row / u.T;
    let b = bg / u.NKV;
    let g = bg % u.NKV;
    let HS = u.HS;
    let kvb = (b * u.T + j) * u.W + g * HS;  // + C: k, + vc: v
    if (lid < HS) {
        ar_a[lid] = arb_qkv[kvb + u.C + lid];
        ar_b[lid] = arb_qkv[kvb + u.vc + lid];
    }
    workgroupBarrier();
    var dk = 0.0;
    var dv = 0.0;
    for (var i = 0u; i < u.GQ; i++) {
        let h = g * u.GQ + i;
        // the queries that see key j: t >= j with lo(t) <= j, a run from j (lo is non-decreasing)
        for (var t0 = j; t0 < u.T && arb_lo(u, b, t0) <= j; t0 += 256u) {
            let t = t0 + lid;
            var pt = 0.0;
            var ds = 0.0;
            if (t < u.T && arb_lo(u, b, t) <= j) {
                let qb = (b * u.T + t) * u.W + h * HS;
                let ob = (b * u.T + t) * u.C + h * HS;
                var sq = 0.0;
                var dp = 0.0;
                for (var c = 0u; c < HS; c++) {
                    sq += arb_qkv[qb + c] * ar_a[c];
                    dp += arb_dout[ob + c] * ar_b[c];
                }
                let r = (b * u.NH + h) * u.T + t;
                let mult = ar_mult(u, dropout_key(u.dseed, r, DROPOUT_ATTN), j);
                let x = arb_pds(u, sq, dp, arb_lse[r], mult, arb_dqkv[qb]);  // D of row t (attention_rows_dsum)
                pt = x.x * mult;
                ds = x.y;
            }
            ar_s[lid] = pt;
            ar_s2[lid] = ds;
            workgroupBarrier();
            let n = min(256u, u.T - t0);
            if (lid < HS) {
                for (var e = 0u; e < n; e++) {
                    let tt = t0 + e;
                    dv += ar_s[e] * arb_dout[(b * u.T + tt) * u.C + h * HS + lid];
                    dk += ar_s2[e] * arb_qkv[(b * u.T + tt) * u.W + h * HS + lid];
                }
            }
            workgroupBarrier();
        }
    }
    if (lid < HS) {
        arb_dqkv[kvb + u.C + lid] = dk * u.scale;
        arb_dqkv[kvb + u.vc + lid] = dv;
    }
}

@compute @workgroup_size(256)
fn attention_rows_backward_dq(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                              @builtin(num_workgroups) nwg : vec3<u32>) {
    let u = arb_p;
    let row = flat_wg(wid, nwg);           // (b·NH + h)·T + t
    if (row >= u.B * u.NH * u.T) { return; }
    let t = row % u.T;
    let bh = row / u.T;
    let b = bh / u.NH;
    let h = bh % u.NH;
    let g = h / u.GQ;
    let HS = u.HS;
    let qb = (b * u.T + t) * u.W + h * HS;
    if (lid < HS) {
        ar_a[lid] = arb_qkv[qb + lid];
        ar_b[lid] = arb_dout[(b * u.T + t) * u.C + h * HS + lid];
    }
    let D = arb_dqkv[qb];  // before this workgroup overwrites it
    let lse = arb_lse[row];
    let rkey = dropout_key(u.dseed, row, DROPOUT_ATTN);
    workgroupBarrier();
    var dq = 0.0;
    for (var j0 = arb_lo(u, b, t); j0 <= t; j0 += 256u) {
        let j = j0 + lid;
        var ds = 0.0;
        if (j <= t) {
            let kb = (b * u.T + j) * u.W + g * HS;
            var sq = 0.0;
            var dp = 0.0;
            for (var c = 0u; c < HS; c++) {
                sq += ar_a[c] * arb_qkv[kb + u.C + c];
                dp += ar_b[c] * arb_qkv[kb + u.vc + c];
            }
            ds = arb_pds(u, sq, dp, lse, ar_mult(u, rkey, j), D).y;
        }
        ar_s[lid] = ds;
        workgroupBarrier();
        let n = min(256u, t + 1u - j0);
        if (lid < HS) {
            for (var e = 0u; e < n; e++) { dq += ar_s[e] * arb_qkv[(b * u.T + j0 + e) * u.W + u.C + g * HS + lid]; }
        }
        workgroupBarrier();
    }
    if (lid < HS) { arb_dqkv[qb + lid] = dq * u.scale; }
}
