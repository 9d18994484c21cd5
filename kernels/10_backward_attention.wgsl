// 10_backward_attention.wgsl — backward of causal multi-head attention (05_attention.wgsl).
// From dout, qkv and the forward's lse, with P recomputed as exp(S·scale - lse) (flash style):
//   D_t = dout_t · out_t,  dS = P ∘ (dout·Vᵀ - D),  dQ = dS·K·scale,  dK = dSᵀ·Q·scale,  dV = Pᵀ·dout
// into dqkv[B,T,3C] (overwritten). WGSL has no float atomics, so no two workgroups ever add to
// the same element; the three variants (SPEC §3) differ in how they avoid that:
//   attention_backward_stream: one workgroup per (b, h) walks the query blocks in order; dQ of
//     the block stays in registers, and dK, dV are read-modify-written in dqkv by the thread that
//     owns them (the same thread every time, so no other invocation ever touches them);
//   attention_backward_dkdv + attention_backward_dq (split-dKdV): one workgroup per key block
//     accumulates dK, dV over the query blocks at or after it; one per query block accumulates dQ
//     over the key blocks at or before it; both recompute P and dS;
//   attention_backward_short (split-short, T <= SS): one workgroup per (b, h) keeps the whole
//     T×T P and dS in workgroup memory, then forms dQ, dK, dV from them.
// attention_backward_dsum runs first for every variant: it stores D_t in dqkv at the first dQ
// column of (t, h), a slot no other kernel reads after that row's dQ is written.
//
// Host constants: HS; BQ, BK (query / key tile rows) for stream, dkdv and dq; SS for short;
// UNROLL (see ab_nd4).
// Tiled kernels: 256 threads as 16 (ty) × 16 (tx). Score phase: thread owns queries ty·RQ + r
// and keys tx + 16·j. Product phase: rows ty·R + r (keys for dK/dV, queries for dQ) and vec4
// columns tx + 16·i. K and V tiles are XOR-swizzled like the forward's K (see 05_attention).

const AB_LOG2E : f32 = 1.4426950408889634;

struct AttnParams {
    B : u32, T : u32, C : u32, NH : u32,
    C3 : u32, nblk : u32, hs4 : u32, p1 : u32,
    scale_log2 : f32, scale : f32, f0 : f32, f1 : f32,
};

@group(0) @binding(0) var<storage, read_write> ab_dqkv : array<f32>;
@group(0) @binding(1) var<storage, read> ab_dout : array<f32>;
@group(0) @binding(2) var<storage, read> ab_qkv : array<f32>;
@group(0) @binding(3) var<storage, read> ab_lse : array<f32>;
@group(0) @binding(4) var<uniform> ab_p : AttnParams;

// attention_backward_dsum's own bindings (dqkv and dout as above)
@group(0) @binding(2) var<storage, read> ab_out : array<f32>;
@group(0) @binding(3) var<uniform> ab_pd : AttnParams;

const HS4 : u32 = (HS + 3u) / 4u;
const SWM : u32 = select(0u, 7u, HS4 % 8u == 0u);
const RQ : u32 = (BQ + 15u) / 16u;
const RK : u32 = (BK + 15u) / 16u;
const CPT : u32 = (HS4 + 15u) / 16u;

var<workgroup> ab_q : array<vec4<f32>, BQ * HS4>;
var<workgroup> ab_do : array<vec4<f32>, BQ * HS4>;
var<workgroup> ab_k : array<vec4<f32>, BK * HS4>;
var<workgroup> ab_v : array<vec4<f32>, BK * HS4>;
var<workgroup> ab_ps : array<vec2<f32>, BQ * BK>;  // (P, dS) at [q·BK + k]

// ------------------------------------------------------------------ D = rowsum(dout ∘ out)
@compute @workgroup_size(256)
fn attention_backward_dsum(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    let NH = ab_pd.NH;
    if (i >= ab_pd.B * ab_pd.T * NH) { return; }
    let bt = i / NH;
    let h = i % NH;
    let base = bt * ab_pd.C + h * HS;
    var d = 0.0;
    for (var c = 0u; c < HS; c++) { d = d + ab_dout[base + c] * ab_out[base + c]; }
    ab_dqkv[bt * ab_pd.C3 + h * HS] = d;
}

// ------------------------------------------------------------------ tile helpers
fn ab_ld(is_dout : bool, base : u32, c4 : u32) -> vec4<f32> {
    let c = c4 * 4u;
    var v = vec4<f32>(0.0);
    if (is_dout) {
        if (HS % 4u == 0u) { return vec4<f32>(ab_dout[base + c], ab_dout[base + c + 1u], ab_dout[base + c + 2u], ab_dout[base + c + 3u]); }
        if (c < HS) { v.x = ab_dout[base + c]; }
        if (c + 1u < HS) { v.y = ab_dout[base + c + 1u]; }
        if (c + 2u < HS) { v.z = ab_dout[base + c + 2u]; }
        if (c + 3u < HS) { v.w = ab_dout[base + c + 3u]; }
    } else {
        if (HS % 4u == 0u) { return vec4<f32>(ab_qkv[base + c], ab_qkv[base + c + 1u], ab_qkv[base + c + 2u], ab_qkv[base + c + 3u]); }
        if (c < HS) { v.x = ab_qkv[base + c]; }
        if (c + 1u < HS) { v.y = ab_qkv[base + c + 1u]; }
        if (c + 2u < HS) { v.z = ab_qkv[base + c + 2u]; }
        if (c + 3u < HS) { v.w = ab_qkv[base + c + 3u]; }
    }
    return v;
}

// dqkv[base + 4·c4 ..] = v (or += v when add), within the head's HS columns
fn ab_st(base : u32, c4 : u32, v : vec4<f32>, add : bool) {
    let c = c4 * 4u;
    var w = v;
    if (HS % 4u == 0u) {  // the caller keeps c4 < HS4: all four columns exist
        if (add) { w = w + vec4<f32>(ab_dqkv[base + c], ab_dqkv[base + c + 1u], ab_dqkv[base + c + 2u], ab_dqkv[base + c + 3u]); }
        ab_dqkv[base + c] = w.x;
        ab_dqkv[base + c + 1u] = w.y;
        ab_dqkv[base + c + 2u] = w.z;
        ab_dqkv[base + c + 3u] = w.w;
        return;
    }
    if (add) {
        if (c < HS) { w.x = w.x + ab_dqkv[base + c]; }
        if (c + 1u < HS) { w.y = w.y + ab_dqkv[base + c + 1u]; }
        if (c + 2u < HS) { w.z = w.z + ab_dqkv[base + c + 2u]; }
        if (c + 3u < HS) { w.w = w.w + ab_dqkv[base + c + 3u]; }
    }
    if (c < HS) { ab_dqkv[base + c] = w.x; }
    if (c + 1u < HS) { ab_dqkv[base + c + 1u] = w.y; }
    if (c + 2u < HS) { ab_dqkv[base + c + 2u] = w.z; }
    if (c + 3u < HS) { ab_dqkv[base + c + 3u] = w.w; }
}

// Stages query rows q0.. of Q and dout (zero past T), unswizzled.
fn ab_stage_q(tid : u32, b : u32, h : u32, q0 : u32) {
    let T = ab_p.T;
    for (var i = tid; i < BQ * HS4; i = i + 256u) {
        let t = q0 + i / HS4;
        let c4 = i % HS4;
        var q = vec4<f32>(0.0);
        var g = vec4<f32>(0.0);
        if (t < T) {
            q = ab_ld(false, (b * T + t) * ab_p.C3 + h * HS, c4);
            g = ab_ld(true, (b * T + t) * ab_p.C + h * HS, c4);
        }
        ab_q[i] = q;
        ab_do[i] = g;
    }
}

// Stages key rows k0.. of K and V (zero past T), swizzled.
fn ab_stage_k(tid : u32, b : u32, h : u32, k0 : u32) {
    let T = ab_p.T;
    for (var i = tid; i < BK * HS4; i = i + 256u) {
        let r = i / HS4;
        let t = k0 + r;
        let c4 = i % HS4;
        var k = vec4<f32>(0.0);
        var v = vec4<f32>(0.0);
        if (t < T) {
            let base = (b * T + t) * ab_p.C3 + h * HS;
            k = ab_ld(false, base + ab_p.C, c4);
            v = ab_ld(false, base + 2u * ab_p.C, c4);
        }
        let slot = r * HS4 + (c4 ^ (r & SWM));
        ab_k[slot] = k;
        ab_v[slot] = v;
    }
}

// lse (in log2 units) and D of this thread's score-phase queries
struct RowStats { lse2 : array<f32, RQ>, dd : array<f32, RQ> };

fn ab_row_stats(b : u32, h : u32, bh : u32, q0 : u32, ty : u32) -> RowStats {
    var st = RowStats();
    for (var r = 0u; r < RQ; r++) {
        let ql = ty * RQ + r;
        let t = q0 + ql;
        if (ql < BQ && t < ab_p.T) {
            st.lse2[r] = ab_lse[bh * ab_p.T + t] * AB_LOG2E;
            st.dd[r] = ab_dqkv[(b * ab_p.T + t) * ab_p.C3 + h * HS];
        }
    }
    return st;
}

// Trip count of the score loop over head columns: the constant HS4 lets GPU compilers unroll it;
// on the software rasterizer (UNROLL false, set by the host) the same count comes from the
// uniform instead, because unrolling it there costs seconds of shader compilation per pipeline.
fn ab_nd4() -> u32 {
    if (UNROLL) { return HS4; }
    return ab_p.hs4;
}

// Score phase: (P, dS) of the staged query and key tiles into ab_ps. The caller barriers before
// (tiles staged) and after (before ab_ps is read).
fn ab_scores(ty : u32, tx : u32, q0 : u32, k0 : u32, st : RowStats) {
    var s = array<array<f32, RK>, RQ>();
    var dp = array<array<f32, RK>, RQ>();
    let sw = tx & SWM;  // key tx + 16j has (key & 7) == (tx & 7)
    for (var d4 = 0u; d4 < ab_nd4(); d4++) {
        var qv : array<vec4<f32>, RQ>;
        var gv : array<vec4<f32>, RQ>;
        for (var r = 0u; r < RQ; r++) {
            let ql = min(ty * RQ + r, BQ - 1u);
            qv[r] = ab_q[ql * HS4 + d4];
            gv[r] = ab_do[ql * HS4 + d4];
        }
        for (var j = 0u; j < RK; j++) {
            let kl = min(tx + 16u * j, BK - 1u);
            let kv = ab_k[kl * HS4 + (d4 ^ sw)];
            let vv = ab_v[kl * HS4 + (d4 ^ sw)];
            for (var r = 0u; r < RQ; r++) {
                s[r][j] = s[r][j] + dot(qv[r], kv);
                dp[r][j] = dp[r][j] + dot(gv[r], vv);
            }
        }
    }
    for (var r = 0u; r < RQ; r++) {
        let ql = ty * RQ + r;
        let t = q0 + ql;
        for (var j = 0u; j < RK; j++) {
            let kl = tx + 16u * j;
            let key = k0 + kl;
            var p = 0.0;
            if (key <= t && t < ab_p.T) { p = exp2(s[r][j] * ab_p.scale_log2 - st.lse2[r]); }
            if (ql < BQ && kl < BK) { ab_ps[ql * BK + kl] = vec2<f32>(p, p * (dp[r][j] - st.dd[r])); }
        }
    }
}

// Per-thread accumulators of the product phase. Module-scope private variables rather than
// function pointers: passing ptr<function, array> made lavapipe's shader compiler several times
// slower (seconds per pipeline), and every invocation has its own copy either way.
var<private> ab_dk_acc : array<array<vec4<f32>, CPT>, RK>;
var<private> ab_dv_acc : array<array<vec4<f32>, CPT>, RK>;
var<private> ab_dq_acc : array<array<vec4<f32>, CPT>, RQ>;

// dK, dV of keys ty·RK + r, columns tx + 16·i: add Pᵀ·dout and dSᵀ·Q of the staged tiles.
// Shared-memory indices are clamped (min) even where they cannot overflow: it lets the software
// rasterizer's compiler prove them in range, which it otherwise guards at a large compile cost.
fn ab_acc_kv(ty : u32, tx : u32, nq : u32) {
    for (var qq = 0u; qq < nq; qq++) {
        let q = min(qq, BQ - 1u);
        var qv : array<vec4<f32>, CPT>;
        var gv : array<vec4<f32>, CPT>;
        for (var i = 0u; i < CPT; i++) {
            let c = min(tx + 16u * i, HS4 - 1u);
            qv[i] = ab_q[q * HS4 + c];
            gv[i] = ab_do[q * HS4 + c];
        }
        for (var r = 0u; r < RK; r++) {
            let ps = ab_ps[q * BK + min(ty * RK + r, BK - 1u)];
            for (var i = 0u; i < CPT; i++) {
                ab_dv_acc[r][i] = ab_dv_acc[r][i] + ps.x * gv[i];
                ab_dk_acc[r][i] = ab_dk_acc[r][i] + ps.y * qv[i];
            }
        }
    }
}

// dQ of queries ty·RQ + r, columns tx + 16·i: add dS·K of the staged tiles.
fn ab_acc_q(ty : u32, tx : u32, nk : u32) {
    for (var kk = 0u; kk < nk; kk++) {
        let k = min(kk, BK - 1u);
        var kv : array<vec4<f32>, CPT>;
        for (var i = 0u; i < CPT; i++) {
            let c = min(tx + 16u * i, HS4 - 1u);
            kv[i] = ab_k[k * HS4 + (c ^ (k & SWM))];
        }
        for (var r = 0u; r < RQ; r++) {
            let ds = ab_ps[min(ty * RQ + r, BQ - 1u) * BK + k].y;
            for (var i = 0u; i < CPT; i++) { ab_dq_acc[r][i] = ab_dq_acc[r][i] + ds * kv[i]; }
        }
    }
}

// Writes (or adds) dK, dV of key rows k0 + ty·RK + r.
fn ab_store_kv(b : u32, h : u32, k0 : u32, ty : u32, tx : u32, add : bool) {
    for (var r = 0u; r < RK; r++) {
        let kl = ty * RK + r;
        let t = k0 + kl;
        if (kl >= BK || t >= ab_p.T) { continue; }
        let base = (b * ab_p.T + t) * ab_p.C3 + h * HS;
        for (var i = 0u; i < CPT; i++) {
            let c = tx + 16u * i;
            if (c >= HS4) { continue; }
            ab_st(base + ab_p.C, c, ab_dk_acc[r][i] * ab_p.scale, add);
            ab_st(base + 2u * ab_p.C, c, ab_dv_acc[r][i], add);
        }
    }
}

// Writes dQ of query rows q0 + ty·RQ + r.
fn ab_store_q(b : u32, h : u32, q0 : u32, ty : u32, tx : u32) {
    for (var r = 0u; r < RQ; r++) {
        let ql = ty * RQ + r;
        let t = q0 + ql;
        if (ql >= BQ || t >= ab_p.T) { continue; }
        let base = (b * ab_p.T + t) * ab_p.C3 + h * HS;
        for (var i = 0u; i < CPT; i++) {
            let c = tx + 16u * i;
            if (c >= HS4) { continue; }
            ab_st(base, c, ab_dq_acc[r][i] * ab_p.scale, false);
        }
    }
}

// ------------------------------------------------------------------ split-dKdV: dK, dV
// One workgroup per (key block, b, h); key block 0 (the longest loop) is dispatched first.
@compute @workgroup_size(256)
fn attention_backward_dkdv(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                           @builtin(num_workgroups) nwg : vec3<u32>) {
    let w = flat_wg(wid, nwg);
    let T = ab_p.T;
    let BNH = ab_p.B * ab_p.NH;
    if (w >= ab_p.nblk * BNH) { return; }
    let bh = w % BNH;
    let b = bh / ab_p.NH;
    let h = bh % ab_p.NH;
    let k0 = (w / BNH) * BK;
    let ty = lid.x / 16u;
    let tx = lid.x % 16u;
    ab_stage_k(lid.x, b, h, k0);
    ab_dk_acc = array<array<vec4<f32>, CPT>, RK>();
    ab_dv_acc = array<array<vec4<f32>, CPT>, RK>();
    let nqb = (T + BQ - 1u) / BQ;
    for (var qb = k0 / BQ; qb < nqb; qb++) {
        let q0 = qb * BQ;
        workgroupBarrier();  // the previous block's products are done with ab_q, ab_do, ab_ps
        ab_stage_q(lid.x, b, h, q0);
        let st = ab_row_stats(b, h, bh, q0, ty);
        workgroupBarrier();
        ab_scores(ty, tx, q0, k0, st);
        workgroupBarrier();
        ab_acc_kv(ty, tx, min(BQ, T - q0));
    }
    ab_store_kv(b, h, k0, ty, tx, false);
}

// ------------------------------------------------------------------ split-dKdV: dQ
// One workgroup per (query block, b, h); the last query block (the longest loop) goes first.
@compute @workgroup_size(256)
fn attention_backward_dq(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                         @builtin(num_workgroups) nwg : vec3<u32>) {
    let w = flat_wg(wid, nwg);
    let T = ab_p.T;
    let BNH = ab_p.B * ab_p.NH;
    if (w >= ab_p.nblk * BNH) { return; }
    let bh = w % BNH;
    let b = bh / ab_p.NH;
    let h = bh % ab_p.NH;
    let q0 = (ab_p.nblk - 1u - w / BNH) * BQ;
    let ty = lid.x / 16u;
    let tx = lid.x % 16u;
    ab_stage_q(lid.x, b, h, q0);
    let st = ab_row_stats(b, h, bh, q0, ty);
    ab_dq_acc = array<array<vec4<f32>, CPT>, RQ>();
    let nkb = (min(q0 + BQ, T) + BK - 1u) / BK;
    for (var kb = 0u; kb < nkb; kb++) {
        let k0 = kb * BK;
        workgroupBarrier();  // the previous block's products are done with ab_k, ab_ps
        ab_stage_k(lid.x, b, h, k0);
        workgroupBarrier();
        ab_scores(ty, tx, q0, k0, st);
        workgroupBarrier();
        ab_acc_q(ty, tx, min(BK, T - k0));
    }
    storageBarrier();  // every thread has read its D (in the dQ slots) before any dQ is written
    ab_store_q(b, h, q0, ty, tx);
}

// ------------------------------------------------------------------ streaming
// One workgroup per (b, h). For each query block in order: dQ in registers over the key blocks
// at or before it; each key block's dK, dV are written at the first query block that sees it
// and added to afterwards, always by the same thread (ab_store_kv's ownership is fixed).
@compute @workgroup_size(256)
fn attention_backward_stream(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                             @builtin(num_workgroups) nwg : vec3<u32>) {
    let bh = flat_wg(wid, nwg);
    let T = ab_p.T;
    if (bh >= ab_p.B * ab_p.NH) { return; }
    let b = bh / ab_p.NH;
    let h = bh % ab_p.NH;
    let ty = lid.x / 16u;
    let tx = lid.x % 16u;
    let nqb = (T + BQ - 1u) / BQ;
    for (var qb = 0u; qb < nqb; qb++) {
        let q0 = qb * BQ;
        workgroupBarrier();
        ab_stage_q(lid.x, b, h, q0);
        let st = ab_row_stats(b, h, bh, q0, ty);
        ab_dq_acc = array<array<vec4<f32>, CPT>, RQ>();
        let nkb = (min(q0 + BQ, T) + BK - 1u) / BK;
        for (var kb = 0u; kb < nkb; kb++) {
            let k0 = kb * BK;
            workgroupBarrier();
            ab_stage_k(lid.x, b, h, k0);
            workgroupBarrier();
            ab_scores(ty, tx, q0, k0, st);
            workgroupBarrier();
            ab_acc_q(ty, tx, min(BK, T - k0));
            ab_dk_acc = array<array<vec4<f32>, CPT>, RK>();
            ab_dv_acc = array<array<vec4<f32>, CPT>, RK>();
            ab_acc_kv(ty, tx, min(BQ, T - q0));
            ab_store_kv(b, h, k0, ty, tx, qb != k0 / BQ);
        }
        storageBarrier();  // D of this block (in its dQ slots) has been read by every thread
        ab_store_q(b, h, q0, ty, tx);
    }
}

// ------------------------------------------------------------------ split-short
// One workgroup per (b, h), T <= SS: P and dS of the whole causal triangle in workgroup memory,
// then every dQ, dK, dV element as one sum over them. Q, K, V, dout are read from the storage
// buffers directly (T rows of HS: small).
var<workgroup> as_p : array<f32, SS * SS>;
var<workgroup> as_ds : array<f32, SS * SS>;
var<workgroup> as_l : array<f32, SS>;
var<workgroup> as_d : array<f32, SS>;

@compute @workgroup_size(256)
fn attention_backward_short(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                            @builtin(num_workgroups) nwg : vec3<u32>) {
    let bh = flat_wg(wid, nwg);
    let T = ab_p.T;
    if (bh >= ab_p.B * ab_p.NH) { return; }
    let b = bh / ab_p.NH;
    let h = bh % ab_p.NH;
    let C = ab_p.C;
    let C3 = ab_p.C3;
    let rows = b * T;  // first row of this batch element
    for (var t = lid.x; t < T; t = t + 256u) {
        as_l[t] = ab_lse[bh * T + t] * AB_LOG2E;
        as_d[t] = ab_dqkv[(rows + t) * C3 + h * HS];
    }
    workgroupBarrier();
    for (var e = lid.x; e < T * T; e = e + 256u) {
        let i = e / T;  // query
        let j = e % T;  // key
        var p = 0.0;
        var ds = 0.0;
        if (j <= i) {
            let qb = (rows + i) * C3 + h * HS;
            let kb = (rows + j) * C3 + C + h * HS;
            let gb = (rows + i) * C + h * HS;
            var s = 0.0;
            var dp = 0.0;
            for (var c = 0u; c < HS; c++) {
                s = s + ab_qkv[qb + c] * ab_qkv[kb + c];
                dp = dp + ab_dout[gb + c] * ab_qkv[kb + C + c];
            }
            p = exp2(s * ab_p.scale_log2 - as_l[i]);
            ds = p * (dp - as_d[i]);
        }
        as_p[i * SS + j] = p;
        as_ds[i * SS + j] = ds;
    }
    storageBarrier();  // the D slots have been read before dQ overwrites them
    workgroupBarrier();
    let n = T * HS;
    for (var e = lid.x; e < 3u * n; e = e + 256u) {
        let part = e / n;  // 0 dQ, 1 dK, 2 dV
        let t = (e % n) / HS;
        let c = e % HS;
        var acc = 0.0;
        if (part == 0u) {
            for (var j = 0u; j <= t; j++) { acc = acc + as_ds[t * SS + j] * ab_qkv[(rows + j) * C3 + C + h * HS + c]; }
            acc = acc * ab_p.scale;
        } else if (part == 1u) {
            for (var i = t; i < T; i++) { acc = acc + as_ds[i * SS + t] * ab_qkv[(rows + i) * C3 + h * HS + c]; }
            acc = acc * ab_p.scale;
        } else {
            for (var i = t; i < T; i++) { acc = acc + as_p[i * SS + t] * ab_dout[(rows + i) * C + h * HS + c]; }
        }
        ab_dqkv[(rows + t) * C3 + part * C + h * HS + c] = acc;
    }
}
