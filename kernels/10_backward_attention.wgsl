// 10_backward_attention.wgsl — backward of causal multi-head attention (05_attention.wgsl).
// From dout, qkv and the forward's lse, with P recomputed as exp(S·scale - lse) (flash style):
//   D_t = dout_t · out_t,  dS = P ∘ (dout·Vᵀ - D),  dQ = dS·K·scale,  dK = dSᵀ·Q·scale,  dV = Pᵀ·dout
// into dqkv[B,T,W] (overwritten), laid out as qkv: dQ (NH heads) | dK (NKV heads from column C)
// | dV (NKV heads from column vc). Grouped-query attention: query head h reads kv head
// g = h / GQ, so dK and dV of head g are sums over the GQ query heads g·GQ .. g·GQ + GQ - 1 of
// their group. WGSL has no float atomics, so no two workgroups ever add to the same element; the
// variants (docs/kernels.md#attention_backward) differ in how they avoid that:
//   attention_backward_dkdv + attention_backward_dq (split-dKdV): one workgroup per (key block,
//     kv head) accumulates dK, dV over the group's query heads in order and, for each, the query
//     blocks at or after it; one per (query block, query head) accumulates dQ over the key blocks
//     at or before it; both compute P and dS (the scores twice in all);
//   attention_backward_fused + attention_backward_dq_reduce (fused): the dK/dV pass (per key
//     block and kv head, over the group's query heads as split-dKdV) also forms, per query tile,
//     the dQ contribution of its key block, dS·K, and writes it to a scratch buffer (one slot
//     per (query head, key block, query row)); the reduction adds the slots of each row in a
//     fixed order: deterministic, and the scores are computed once;
//   attention_backward_stream: one workgroup per (b, kv head) walks the group's query heads and,
//     for each, the query blocks in order; dQ of the block stays in registers, and dK, dV are
//     read-modify-written in dqkv by the thread that owns them (the same thread every time, so
//     no other invocation ever touches them);
//   attention_backward_dkdv_reg + attention_backward_dq_reg (reg) or attention_backward_dq_ds
//     (reg-ds): the split pair with the resident rows in registers (below); with DSW the dK/dV
//     kernel also stores dS in a scratch, and dQ = scale·dS·K is a causal GEMM over it;
//   attention_backward_short (split-short, T <= SS): one workgroup per (b, kv head); for each
//     query head of the group it keeps the whole T×T P and dS in workgroup memory, then forms
//     dQ and adds dK, dV from them (each element always by the same thread).
// Mask (05_attention.wgsl, docs/kernels.md#attention-mask): query t of sequence b attends keys
// [lo(t), t], lo(t) = max(doc[b,t], t - window + 1), doc (u32 [B,T], non-decreasing along t) read
// only when has_doc is 1. P of a masked pair is 0, so its dS and its share of dQ, dK, dV are too.
// Fully masked tiles are skipped: the query-block loops of the dK/dV kernels stop at the first
// block whose first row's lo is past the key block, and the dQ loops start at the key block
// holding lo of the query block's first row (dq_reduce then adds only the slots fused wrote).
// Every sum over a group runs in the fixed order of its query heads. With GQ = 1 (NKV = NH, a
// host constant) the loops over a group have one constant trip and compile away.
// attention_backward_dsum runs first for every variant: it stores D_t in dqkv at the first dQ
// column of (t, h), a slot no other kernel reads after that row's dQ is written.
//
// Host constants (chosen per device in wg_ops_attention.c): HS; GQ (query heads per kv head,
// NH / NKV); BQ, BK (query / key tile rows,
// powers of 2) and RQS, RKS (score micro-tile, (BQ/RQS)·(BK/RKS) = 128) for the tiled kernels;
// NCP (column groups of the products, a power of 2 <= 64); SS for short; UNROLL (constant trip
// counts for the loops over head columns, a tile's queries and its keys: false on the software
// rasterizer, where unrolling costs seconds of shader compilation); QT / QV4 (qkv, dout and out
// bound as vec4<f32> when HS % 4 == 0, one 16-byte load per 4 columns); DROP (dropout on the
// probabilities, p > 0; false at p = 0, which leaves the code without dropout).
//
// Dropout (docs/kernels.md#dropout): the forward multiplied P[t, j] by m = dscale or 0 (kept when
// dropout_bits(dropout_key(dseed, (b·NH + h)·T + t, DROPOUT_ATTN), j) >= dthr) before P·V; here
// the same m is regenerated and, with D from the dropped out,
//   dP = (dout·Vᵀ) ∘ m,  dS = P ∘ (dP - D),  dV = (P ∘ m)ᵀ·dout;
// the tiled kernels apply m in the fix-up (which then leaves P ∘ m in ab_pp for dV), split-short
// where it forms P and dS.
//
// The products' register blocking is what limits these kernels on an FP32-only GPU: a warp
// reads workgroup memory at about 128 bytes a clock per SM while the SM does 128 FMAs, so each
// phase is laid out for few loads per FMA and few distinct addresses per warp load.
//
// Tiled kernels, per (query tile, key tile), 4 barriers:
//   stage: Q and dout rows into ab_qd, K and V rows into ab_kv (vec4, XOR-swizzled by the score
//     micro-tile a row belongs to, so that the warps' loads fall in different banks);
//   score: threads 0..127 compute S = Q·Kᵀ, threads 128..255 dP = dout·Vᵀ, the same code on the
//     two halves of ab_qd / ab_kv: a (BQ/RQS) × (BK/RKS) grid, each thread RQS rows × RKS
//     adjacent keys (per vec4 of head columns RQS + RKS loads feed 4·RQS·RKS FMAs), warps laid
//     out 4 rows × 8 key groups; the first half stores P = exp2(S·scale·log2e - lse·log2e)
//     (masked), the second dP, both as [q][k] rows of vec4 (vec4 index XOR-swizzled by the dQ
//     product's row group, ab_pslot);
//   fix-up: dS = P ∘ (dP - D) in place of dP, one vec4 a thread;
//   products (ab_acc_kv: dV += Pᵀ·dout, dK += dSᵀ·Q over the tile's queries; ab_acc_q: dQ +=
//     dS·K over its keys): thread owns RKP keys (or RQP queries) × CP vec4 columns cg + NCP·i,
//     reading P / dS 4 keys at a time as one vec4 (dK, dV: 4 loads per 8·RKP·CP FMAs at RKP = 4;
//     dQ: RQP + 4·CP loads per 16·RQP·CP FMAs).
// The split pair and fused keep BK rows of K and V (dK/dV side) or BQ rows of Q and dout (dQ
// side) resident and stream the other tile; workgroup memory is 32·(BQ + BK)·HS4 + 8·BQ·BK bytes
// (48 KiB for 16×64 or 64×16 at HS = 64).
// Rows past T are staged as zeros and their P and dS are 0, so loops run whole tiles.

const AB_LOG2E : f32 = 1.4426950408889634;

struct AttnParams {
    B : u32, T : u32, C : u32, NH : u32,          // C = NH·HS: dout's width, dqkv's first dK column
    W : u32, nblk : u32, hs4 : u32, nkb : u32,    // W: qkv's row width; nkb: key blocks (fused scratch)
    ntri : u32, bq : u32, bk4 : u32, nkv : u32,   // ntri: scratch rows per (b, h); bq = BQ, bk4 = BK/4
    vc : u32, dseed : u32, dthr : u32, p6 : u32,  // vc: first dV column; dropout seed, threshold
    scale_log2 : f32, scale : f32, dscale : f32, f1 : f32,  // dscale: 1/(1 - p)
    has_doc : u32, window : u32, p7 : u32, p8 : u32,        // the mask: doc bound, window (0 none)
};

@group(0) @binding(0) var<storage, read_write> ab_dqkv : array<f32>;
@group(0) @binding(1) var<storage, read> ab_dout : array<QT>;
@group(0) @binding(2) var<storage, read> ab_qkv : array<QT>;
@group(0) @binding(3) var<storage, read> ab_lse : array<f32>;
@group(0) @binding(4) var<storage, read> ab_doc : array<u32>;
@group(0) @binding(5) var<uniform> ab_p : AttnParams;

// attention_backward_fused: the same plus the dQ scratch, params last
@group(0) @binding(5) var<storage, read_write> ab_scr : array<vec4<f32>>;
@group(0) @binding(6) var<uniform> ab_pf : AttnParams;

// attention_backward_dsum's own bindings (dqkv and dout as above)
@group(0) @binding(2) var<storage, read> ab_out : array<QT>;
@group(0) @binding(3) var<uniform> ab_pd : AttnParams;

// attention_backward_dq_reduce's own bindings (dqkv as above)
@group(0) @binding(1) var<storage, read> ab_scr_in : array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> ab_doc_r : array<u32>;
@group(0) @binding(3) var<uniform> ab_pr : AttnParams;

// attention_backward_dkdv_reg with DSW: dS into its scratch at binding 5, params at 6 (ab_pf);
// the host's ar_params() returns ab_p or ab_pf and its ar_ds_put(i, v) stores ab_dsw[i] = v or
// nothing, so that the kernel without DSW names neither (one binding each, none at 6)
@group(0) @binding(5) var<storage, read_write> ab_dsw : array<f32>;

// attention_backward_dq_ds's own bindings (dqkv and qkv as above)
@group(0) @binding(1) var<storage, read> ab_dsr : array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> ab_doc_q : array<u32>;
@group(0) @binding(4) var<uniform> ab_pq : AttnParams;

const HS4 : u32 = (HS + 3u) / 4u;
const SWM : u32 = select(0u, 7u, HS4 % 8u == 0u);
const BK4 : u32 = BK / 4u;
const NXS : u32 = BK / RKS;                    // score grid of one half: (BQ/RQS) × NXS = 128
const CP : u32 = (HS4 + NCP - 1u) / NCP;       // product vec4 columns per thread
const NKP : u32 = 256u / NCP;                  // key groups of the dK/dV product
const RKP : u32 = (BK + NKP - 1u) / NKP;       // keys per thread (threads past BK idle)
const RQP : u32 = (BQ + NKP - 1u) / NKP;       // queries per thread of the dQ product
const NQV : u32 = (BQ * HS4 + 255u) / 256u;    // Q (and dout) vec4 a thread stages per tile
const NKV : u32 = (BK * HS4 + 255u) / 256u;    // K (and V) vec4 a thread stages per tile
const NFX : u32 = (BQ * BK4 + 255u) / 256u;    // fix-up vec4 a thread

var<workgroup> ab_qd : array<vec4<f32>, 2u * BQ * HS4>;  // Q rows, then dout rows
var<workgroup> ab_kv : array<vec4<f32>, 2u * BK * HS4>;  // K rows, then V rows
var<workgroup> ab_pp : array<vec4<f32>, BQ * BK4>;       // P [q][k] (ab_pslot)
var<workgroup> ab_ds : array<vec4<f32>, BQ * BK4>;       // dP, then dS [q][k] (ab_pslot)

// ------------------------------------------------------------------ small helpers
// Thread t of a grid nx wide (a power of 2) -> (row, column); a warp covers 4 rows × 8 columns
// (or 32/nx × nx when nx < 8), so its loads see few distinct rows and columns. A bijection for
// any subgroup size; only the bank pattern assumes 32.
fn ab_map(t : u32, nx : u32) -> vec2<u32> {
    let wx = min(nx, 8u);
    let wy = 32u / wx;
    let nwx = nx / wx;
    let w = t / 32u;
    let lane = t % 32u;
    return vec2<u32>((w / nwx) * wy + lane / wx, (w % nwx) * wx + lane % wx);
}

// 4 head columns from 4·c4 of qkv (dout when is_dout) whose head column 0 is element `base`.
fn ab_ld(is_dout : bool, base : u32, c4 : u32) -> vec4<f32> {
    if (!is_dout) { return ab_ld_qkv(base, c4); }
    let c = c4 * 4u;
    if (QV4) { return vec4<f32>(ab_dout[(base + c) / 4u]); }
    var v = vec4<f32>(0.0);
    for (var e = 0u; e < 4u; e++) {
        if (c + e < HS) { v[e] = vec4<f32>(ab_dout[base + c + e]).x; }
    }
    return v;
}

// the same from qkv only (a kernel that calls it does not bind dout)
fn ab_ld_qkv(base : u32, c4 : u32) -> vec4<f32> {
    let c = c4 * 4u;
    if (QV4) { return vec4<f32>(ab_qkv[(base + c) / 4u]); }
    var v = vec4<f32>(0.0);
    for (var e = 0u; e < 4u; e++) {
        if (c + e < HS) { v[e] = vec4<f32>(ab_qkv[base + c + e]).x; }
    }
    return v;
}

// Element i of a tile of `rows` rows from r0 (vec4 i % HS4 of row r0 + i / HS4) of qkv (dout when
// is_dout) whose row t has its head column 0 at base + t·stride; zero past the tile and past T.
fn ab_tile4(u : AttnParams, is_dout : bool, base : u32, stride : u32, r0 : u32, i : u32, rows : u32) -> vec4<f32> {
    let t = r0 + i / HS4;
    if (i >= rows * HS4 || t >= u.T) { return vec4<f32>(0.0); }
    return ab_ld(is_dout, base + t * stride, i % HS4);
}

// dqkv[base + 4·c4 ..] = v (or += v when add), within the head's HS columns
fn ab_st(base : u32, c4 : u32, v : vec4<f32>, add : bool) {
    let c = c4 * 4u;
    for (var e = 0u; e < 4u; e++) {
        if (c + e < HS) {
            var x = v[e];
            if (add) { x = x + ab_dqkv[base + c + e]; }
            ab_dqkv[base + c + e] = x;
        }
    }
}

// swizzled slots: Q / dout row q (score micro-tile q / RQS), K / V row k (k / RKS), and the vec4
// of keys 4·k4.. in row q of P / dS (by the dQ product's row group q / RQP, whose warps read 4
// rows at once)
fn ab_qslot(q : u32, d4 : u32) -> u32 { return q * HS4 + (d4 ^ ((q / RQS) & SWM)); }
fn ab_kslot(k : u32, d4 : u32) -> u32 { return k * HS4 + (d4 ^ ((k / RKS) & SWM)); }
fn ab_pslot(q : u32, k4 : u32) -> u32 { return q * BK4 + (k4 ^ ((q / RQP) & (BK4 - 1u))); }

// Staging goes through registers: the fetch functions load this thread's share of a tile (element
// i = tid + 256·n) from global memory, the put functions store it into workgroup memory. The
// streamed tile of the next iteration is fetched while the current one is computed, so the
// loads' latency hides behind a tile of FMAs instead of stalling every tile.
struct QStats {
    lse2 : array<f32, RQS>,        // lse·log2e of this thread's score rows (used by the S half)
    lo : array<u32, RQS>,          // their first keys (the mask)
    dd : array<f32, NFX>,          // D of this thread's fix-up elements
    rk : array<u32, NFX>,          // their rows' dropout keys (DROP)
};
struct QRegs {
    q : array<vec4<f32>, NQV>,     // Q and dout rows
    g : array<vec4<f32>, NQV>,
    st : QStats,                   // the row statistics this thread needs
};
struct KRegs { k : array<vec4<f32>, NKV>, v : array<vec4<f32>, NKV> };
// module-scope private, like the accumulators below (cheaper to compile on the software
// rasterizer than values passed around)
var<private> ab_xq : QRegs;
var<private> ab_xk : KRegs;

// Query rows q0.. of Q and dout (zero past T), with the row statistics this thread needs, into ab_xq.
fn ab_fetch_q(u : AttnParams, tid : u32, b : u32, h : u32, q0 : u32) {
    let T = u.T;
    ab_xq = QRegs();
    let x = &ab_xq;
    for (var n = 0u; n < NQV; n++) {
        x.q[n] = ab_tile4(u, false, b * T * u.W + h * HS, u.W, q0, tid + 256u * n, BQ);
        x.g[n] = ab_tile4(u, true, b * T * u.C + h * HS, u.C, q0, tid + 256u * n, BQ);
    }
    let qa = ab_map(tid % 128u, NXS).x * RQS;
    for (var r = 0u; r < RQS; r++) {
        let t = q0 + qa + r;
        if (t < T) {
            x.st.lse2[r] = ab_lse2(u, b * u.NH + h, t);
            x.st.lo[r] = ab_lo(u, b, t);
        }
    }
    for (var n = 0u; n < NFX; n++) { x.st.dd[n] = ab_dval(u, b, h, q0 + (tid + 256u * n) / BK4); }
    if (DROP) {
        for (var n = 0u; n < NFX; n++) { x.st.rk[n] = ab_rkey(u, b * u.NH + h, q0 + (tid + 256u * n) / BK4); }
    }
}

fn ab_put_q(tid : u32) {
    let x = &ab_xq;
    for (var n = 0u; n < NQV; n++) {
        let i = tid + 256u * n;
        if (i < BQ * HS4) {
            let s = ab_qslot(i / HS4, i % HS4);
            ab_qd[s] = x.q[n];
            ab_qd[BQ * HS4 + s] = x.g[n];
        }
    }
}

// Key rows k0.. of K and V of kv head g (zero past T), into ab_xk.
fn ab_fetch_k(u : AttnParams, tid : u32, b : u32, g : u32, k0 : u32) {
    let x = &ab_xk;
    let base = b * u.T * u.W + g * HS;
    for (var n = 0u; n < NKV; n++) {
        x.k[n] = ab_tile4(u, false, base + u.C, u.W, k0, tid + 256u * n, BK);
        x.v[n] = ab_tile4(u, false, base + u.vc, u.W, k0, tid + 256u * n, BK);
    }
}

fn ab_put_k(tid : u32) {
    let x = &ab_xk;
    for (var n = 0u; n < NKV; n++) {
        let i = tid + 256u * n;
        if (i < BK * HS4) {
            let s = ab_kslot(i / HS4, i % HS4);
            ab_kv[s] = x.k[n];
            ab_kv[BK * HS4 + s] = x.v[n];
        }
    }
}

// Trip counts of the loops over head columns, a tile's queries and its keys / 4: constants where
// UNROLL, else the same numbers from the uniform (see UNROLL above).
fn ab_nd4(u : AttnParams) -> u32 {
    if (UNROLL) { return HS4; }
    return u.hs4;
}
fn ab_nq(u : AttnParams) -> u32 {
    if (UNROLL) { return BQ; }
    return u.bq;
}
fn ab_nk4(u : AttnParams) -> u32 {
    if (UNROLL) { return BK4; }
    return u.bk4;
}

// The first key query t (< T) of sequence b attends (the mask above, attn_lo); never above t.
fn ab_lo(u : AttnParams, b : u32, t : u32) -> u32 {
    var d = 0u;
    if (u.has_doc != 0u) { d = ab_doc[b * u.T + t]; }
    return attn_lo(u.has_doc, d, t, u.window);
}

// Row t of head bh = b·NH + h: its lse·log2e and its dropout key.
fn ab_lse2(u : AttnParams, bh : u32, t : u32) -> f32 { return ab_lse[bh * u.T + t] * AB_LOG2E; }
fn ab_rkey(u : AttnParams, bh : u32, t : u32) -> u32 { return dropout_key(u.dseed, bh * u.T + t, DROPOUT_ATTN); }

// P of score s (q·k, unscaled) in a row with lse·log2e = lse2
fn ab_prob(u : AttnParams, s : f32, lse2 : f32) -> f32 { return exp2(s * u.scale_log2 - lse2); }

// The dropout multiplier of key j in the row with dropout key rk (DROP).
fn ab_mult(u : AttnParams, rk : u32, j : u32) -> f32 { return dropout_mult(rk, j, u.dthr, u.dscale); }

// The query blocks from qb0 whose rows can see key block k0: they end before the first block whose
// first row's lo is past the block (lo is non-decreasing). qb0's block holds row k0, so it is one.
fn ab_q_end(u : AttnParams, b : u32, qb0 : u32, k0 : u32) -> u32 {
    let nqb = (u.T + BQ - 1u) / BQ;
    var qb = qb0 + 1u;
    while (qb < nqb && ab_lo(u, b, qb * BQ) < k0 + BK) { qb++; }
    return qb;
}

// D_t of row t (in dqkv's first dQ column of the head until dQ is written)
fn ab_dval(u : AttnParams, b : u32, h : u32, t : u32) -> f32 {
    if (t >= u.T) { return 0.0; }
    return ab_dqkv[(b * u.T + t) * u.W + h * HS];
}

// ------------------------------------------------------------------ score and fix-up phases
// The caller barriers before (tiles staged) and after (before ab_pp / ab_ds are read).
fn ab_score(u : AttnParams, tid : u32, q0 : u32, k0 : u32, lse2 : array<f32, RQS>, rlo : array<u32, RQS>) {
    let half = tid / 128u;
    let yx = ab_map(tid % 128u, NXS);
    let qa = yx.x * RQS;  // first query row (local)
    let ka = yx.y * RKS;  // first key (local)
    let abase = half * BQ * HS4;
    let bbase = half * BK * HS4;
    var acc = array<array<f32, RKS>, RQS>();
    for (var d4 = 0u; d4 < ab_nd4(u); d4++) {
        var av = array<vec4<f32>, RQS>();
        for (var r = 0u; r < RQS; r++) { av[r] = ab_qd[abase + ab_qslot(qa + r, d4)]; }
        for (var j = 0u; j < RKS; j++) {
            let bv = ab_kv[bbase + ab_kslot(ka + j, d4)];
            for (var r = 0u; r < RQS; r++) { acc[r][j] = fma_dot4(acc[r][j], av[r], bv); }
        }
    }
    for (var r = 0u; r < RQS; r++) {
        let t = q0 + qa + r;
        var x = array<f32, RKS>();
        if (half == 0u) {
            for (var j = 0u; j < RKS; j++) {
                let key = k0 + ka + j;
                if (attn_sees(key, t, rlo[r]) && t < u.T) { x[j] = ab_prob(u, acc[r][j], lse2[r]); }
            }
        } else {
            x = acc[r];
        }
        let q = qa + r;
        if (RKS == 4u) {
            let v = vec4<f32>(x[0], x[min(1u, RKS - 1u)], x[min(2u, RKS - 1u)], x[min(3u, RKS - 1u)]);
            if (half == 0u) { ab_pp[ab_pslot(q, ka / 4u)] = v; } else { ab_ds[ab_pslot(q, ka / 4u)] = v; }
        } else {
            for (var j = 0u; j < RKS; j++) {
                let k = ka + j;
                if (half == 0u) { ab_pp[ab_pslot(q, k / 4u)][k % 4u] = x[j]; }
                else { ab_ds[ab_pslot(q, k / 4u)][k % 4u] = x[j]; }
            }
        }
    }
}

// dS = P ∘ (dP - D) in place of dP; dd: D of the rows of this thread's elements, rk: their
// dropout keys (ab_fetch_q). With DROP, dP = (dout·Vᵀ) ∘ m and P ∘ m replaces P (for dV), m the
// dropout multipliers of the element's 4 keys from k0 + 4·k4 (ab_pslot inverted).
fn ab_fixup(u : AttnParams, tid : u32, k0 : u32, dd : array<f32, NFX>, rk : array<u32, NFX>) {
    for (var n = 0u; n < NFX; n++) {
        let i = tid + 256u * n;
        if (i < BQ * BK4) {
            if (DROP) {
                let q = i / BK4;
                let key0 = k0 + 4u * ((i % BK4) ^ ((q / RQP) & (BK4 - 1u)));
                var m = vec4<f32>(0.0);
                for (var e = 0u; e < 4u; e++) {
                    m[e] = ab_mult(u, rk[n], key0 + e);
                }
                let pp = ab_pp[i];
                ab_ds[i] = pp * (ab_ds[i] * m - dd[n]);
                ab_pp[i] = pp * m;
            } else {
                ab_ds[i] = ab_pp[i] * (ab_ds[i] - dd[n]);
            }
        }
    }
}

// P and dS of the staged tiles (query rows q0.., key rows k0..) into ab_pp / ab_ds, between the
// caller's barrier after staging and the products.
fn ab_ds_tile(u : AttnParams, tid : u32, q0 : u32, k0 : u32, st : QStats) {
    ab_score(u, tid, q0, k0, st.lse2, st.lo);
    workgroupBarrier();
    ab_fixup(u, tid, k0, st.dd, st.rk);
    workgroupBarrier();
}

// ------------------------------------------------------------------ product phases
// Per-thread accumulators. Module-scope private variables rather than function pointers:
// passing ptr<function, array> made lavapipe's shader compiler several times slower (seconds per
// pipeline), and every invocation has its own copy either way.
var<private> ab_dk_acc : array<array<vec4<f32>, CP>, RKP>;
var<private> ab_dv_acc : array<array<vec4<f32>, CP>, RKP>;
var<private> ab_dq_acc : array<array<vec4<f32>, CP>, RQP>;

// P (or dS) of query q, keys k .. k + n - 1 (n = RKP or fewer; vec4 when 4 aligned keys)
fn ab_row4(is_ds : bool, q : u32, k : u32) -> vec4<f32> {
    let i = min(ab_pslot(q, k / 4u), BQ * BK4 - 1u);
    if (RKP == 4u) {
        if (is_ds) { return ab_ds[i]; }
        return ab_pp[i];
    }
    var v = vec4<f32>(0.0);
    for (var j = 0u; j < min(RKP, 4u); j++) {  // RKP keys inside one vec4 (k is a multiple of RKP)
        if (is_ds) { v[j] = ab_ds[i][(k + j) % 4u]; } else { v[j] = ab_pp[i][(k + j) % 4u]; }
    }
    return v;
}

// dK, dV of keys kg·RKP + j, columns cg + NCP·i: add Pᵀ·dout and dSᵀ·Q of the staged tiles.
// Shared-memory indices are clamped (min) even where they cannot overflow: it lets the software
// rasterizer's compiler prove them in range, which it otherwise guards at a large compile cost.
fn ab_acc_kv(u : AttnParams, tid : u32) {
    let yx = ab_map(tid, NCP);
    let ka = yx.x * RKP;
    for (var q = 0u; q < ab_nq(u); q++) {
        var qv = array<vec4<f32>, CP>();
        var gv = array<vec4<f32>, CP>();
        for (var i = 0u; i < CP; i++) {
            let c = min(yx.y + NCP * i, HS4 - 1u);
            qv[i] = ab_qd[ab_qslot(q, c)];
            gv[i] = ab_qd[BQ * HS4 + ab_qslot(q, c)];
        }
        let kc = min(ka, BK - 1u);
        let pv = ab_row4(false, q, kc);
        let dv = ab_row4(true, q, kc);
        for (var j = 0u; j < min(RKP, 4u); j++) {
            for (var i = 0u; i < CP; i++) {
                ab_dv_acc[j][i] = fma(vec4<f32>(pv[j]), gv[i], ab_dv_acc[j][i]);
                ab_dk_acc[j][i] = fma(vec4<f32>(dv[j]), qv[i], ab_dk_acc[j][i]);
            }
        }
    }
}

// dQ of queries qg·RQP + r, columns cg + NCP·i: add dS·K of the staged tiles, 4 keys at a time.
fn ab_acc_q(u : AttnParams, tid : u32) {
    let yx = ab_map(tid, NCP);
    let qa = yx.x * RQP;
    for (var k4 = 0u; k4 < ab_nk4(u); k4++) {
        var dv = array<vec4<f32>, RQP>();
        for (var r = 0u; r < RQP; r++) { dv[r] = ab_ds[ab_pslot(min(qa + r, BQ - 1u), k4)]; }
        for (var i = 0u; i < CP; i++) {
            let c = min(yx.y + NCP * i, HS4 - 1u);
            for (var e = 0u; e < 4u; e++) {
                let kv = ab_kv[ab_kslot(4u * k4 + e, c)];
                for (var r = 0u; r < RQP; r++) { ab_dq_acc[r][i] = fma(vec4<f32>(dv[r][e]), kv, ab_dq_acc[r][i]); }
            }
        }
    }
}

// Writes (or adds) dK, dV of key rows k0 + kg·RKP + j of kv head g.
fn ab_store_kv(u : AttnParams, tid : u32, b : u32, g : u32, k0 : u32, add : bool) {
    let yx = ab_map(tid, NCP);
    for (var j = 0u; j < min(RKP, 4u); j++) {
        let kl = yx.x * RKP + j;
        let t = k0 + kl;
        if (kl >= BK || t >= u.T) { continue; }
        let base = (b * u.T + t) * u.W + g * HS;
        for (var i = 0u; i < CP; i++) {
            let c = yx.y + NCP * i;
            if (c >= HS4) { continue; }
            ab_st(base + u.C, c, ab_dk_acc[j][i] * u.scale, add);
            ab_st(base + u.vc, c, ab_dv_acc[j][i], add);
        }
    }
}

// Writes dQ of query rows q0 + qg·RQP + r.
fn ab_store_q(u : AttnParams, tid : u32, b : u32, h : u32, q0 : u32) {
    let yx = ab_map(tid, NCP);
    for (var r = 0u; r < RQP; r++) {
        let ql = yx.x * RQP + r;
        let t = q0 + ql;
        if (ql >= BQ || t >= u.T) { continue; }
        let base = (b * u.T + t) * u.W + h * HS;
        for (var i = 0u; i < CP; i++) {
            let c = yx.y + NCP * i;
            if (c >= HS4) { continue; }
            ab_st(base, c, ab_dq_acc[r][i] * u.scale, false);
        }
    }
}

fn ab_zero_kv() {
    ab_dk_acc = array<array<vec4<f32>, CP>, RKP>();
    ab_dv_acc = array<array<vec4<f32>, CP>, RKP>();
}

// The dK/dV pass over the resident key block k0 of kv head g (split-dKdV's first kernel, fused):
// stages K and V, zeroes the accumulators and fetches the group's first query tile (the block
// holding k0); returns the end of the query blocks that see the key block (ab_q_end).
fn ab_kv_begin(u : AttnParams, tid : u32, b : u32, g : u32, k0 : u32) -> u32 {
    ab_fetch_k(u, tid, b, g, k0);
    ab_put_k(tid);
    ab_zero_kv();
    let qb0 = k0 / BQ;
    ab_fetch_q(u, tid, b, g * GQ, qb0 * BQ);
    return ab_q_end(u, b, qb0, k0);  // the later blocks are masked off this key block
}

// Query block qb of head h (the group's j-th): stages its fetched rows, fetches the next tile (the
// next block, or the next head's first block qb0) and adds its dV, dK to the accumulators.
fn ab_kv_step(u : AttnParams, tid : u32, b : u32, h : u32, j : u32, qb : u32, qb0 : u32, nqb : u32, k0 : u32) {
    let q0 = qb * BQ;
    workgroupBarrier();  // the previous tile's products are done with ab_qd, ab_pp, ab_ds
    ab_put_q(tid);
    let st = ab_xq.st;
    workgroupBarrier();
    if (qb + 1u < nqb) { ab_fetch_q(u, tid, b, h, q0 + BQ); }
    else if (j + 1u < GQ) { ab_fetch_q(u, tid, b, h + 1u, qb0 * BQ); }  // the next head's first block
    ab_ds_tile(u, tid, q0, k0, st);
    ab_acc_kv(u, tid);
}

// ------------------------------------------------------------------ D = rowsum(dout ∘ out)
// Threads of a row: the next power of 2 >= HS4 (at most 32), each one vec4 of the row, added
// through workgroup memory; rows of one workgroup are consecutive (b, t, h), so loads coalesce.
var<workgroup> ab_dred : array<f32, 256>;

@compute @workgroup_size(256)
fn attention_backward_dsum(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                           @builtin(num_workgroups) nwg : vec3<u32>) {
    var npr = 1u;  // threads per row
    while (npr < HS4) { npr = npr * 2u; }
    let row = flat_wg(wid, nwg) * (256u / npr) + lid.x / npr;  // = bt·NH + h
    let c4 = lid.x % npr;
    var d = 0.0;
    if (row < ab_pd.B * ab_pd.T * ab_pd.NH && c4 < HS4) {
        let base = row * HS;  // out and dout rows [B·T, C] = [B·T·NH, HS]
        let c = c4 * 4u;
        if (QV4) {
            d = dot(vec4<f32>(ab_dout[(base + c) / 4u]), vec4<f32>(ab_out[(base + c) / 4u]));
        } else {
            for (var e = 0u; e < 4u; e++) {
                if (c + e < HS) { d = d + vec4<f32>(ab_dout[base + c + e]).x * vec4<f32>(ab_out[base + c + e]).x; }
            }
        }
    }
    ab_dred[lid.x] = d;
    workgroupBarrier();
    if (c4 == 0u && row < ab_pd.B * ab_pd.T * ab_pd.NH) {
        var s = 0.0;
        for (var e = 0u; e < npr; e++) { s = s + ab_dred[lid.x + e]; }
        ab_dqkv[(row / ab_pd.NH) * ab_pd.W + (row % ab_pd.NH) * HS] = s;
    }
}

// ------------------------------------------------------------------ split-dKdV: dK, dV
// One workgroup per (key block, b, kv head g); key block 0 (the longest loop) is dispatched first.
// dK, dV accumulate over the group's query heads in order and, for each, the query blocks at or
// after the key block.
@compute @workgroup_size(256)
fn attention_backward_dkdv(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                           @builtin(num_workgroups) nwg : vec3<u32>) {
    let u = ab_p;
    let w = flat_wg(wid, nwg);
    if (w >= u.nblk * u.B * u.nkv) { return; }
    let x = attn_grid(w, u.B, u.nkv);  // (b, g, key block)
    let b = x.x;
    let g = x.y;
    let k0 = x.z * BK;
    let tid = lid.x;
    let qb0 = k0 / BQ;
    let nqb = ab_kv_begin(u, tid, b, g, k0);
    for (var j = 0u; j < GQ; j++) {
        for (var qb = qb0; qb < nqb; qb++) { ab_kv_step(u, tid, b, g * GQ + j, j, qb, qb0, nqb, k0); }
    }
    ab_store_kv(u, tid, b, g, k0, false);
}

// ------------------------------------------------------------------ fused: dK, dV and dQ slots
// As attention_backward_dkdv; per query tile also dS·K of this key block for the tile's rows
// t >= k0 of query head h, into scratch row (b·NH + h)·ntri + off(kb) + t - k0 with
// off(kb) = Σ_{j<kb} (T - j·BK).
@compute @workgroup_size(256)
fn attention_backward_fused(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                            @builtin(num_workgroups) nwg : vec3<u32>) {
    let u = ab_pf;
    let w = flat_wg(wid, nwg);
    let T = u.T;
    if (w >= u.nblk * u.B * u.nkv) { return; }
    let x = attn_grid(w, u.B, u.nkv);  // (b, g, key block)
    let b = x.x;
    let g = x.y;
    let kb = x.z;
    let k0 = kb * BK;
    let tid = lid.x;
    let yx = ab_map(tid, NCP);
    let soff = kb * T - BK * (kb * (kb - 1u) / 2u) - k0;  // scratch row of t = 0 inside a head's rows
    let qb0 = k0 / BQ;
    let nqb = ab_kv_begin(u, tid, b, g, k0);
    for (var j = 0u; j < GQ; j++) {
        let h = g * GQ + j;
        let srow0 = (b * u.NH + h) * u.ntri + soff;
        for (var qb = qb0; qb < nqb; qb++) {
            let q0 = qb * BQ;
            ab_kv_step(u, tid, b, h, j, qb, qb0, nqb, k0);
            ab_dq_acc = array<array<vec4<f32>, CP>, RQP>();
            ab_acc_q(u, tid);
            for (var r = 0u; r < RQP; r++) {
                let ql = yx.x * RQP + r;
                let t = q0 + ql;
                if (ql >= BQ || t < k0 || t >= T) { continue; }
                for (var i = 0u; i < CP; i++) {
                    let c = yx.y + NCP * i;
                    if (c < HS4) { ab_scr[(srow0 + t) * HS4 + c] = ab_dq_acc[r][i]; }
                }
            }
        }
    }
    ab_store_kv(u, tid, b, g, k0, false);
}

// dQ of row (b, t, h) = scale · Σ over key blocks kb <= t / BK of its scratch rows, in kb order.
// One thread per vec4 of dQ.
@compute @workgroup_size(256)
fn attention_backward_dq_reduce(@builtin(global_invocation_id) gid : vec3<u32>,
                                @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    let T = ab_pr.T;
    if (i >= ab_pr.B * ab_pr.NH * T * HS4) { return; }
    let c4 = i % HS4;
    let r = i / HS4;              // = (b·NH + h)·T + t
    let t = r % T;
    let bh = r / T;
    let b = bh / ab_pr.NH;
    let h = bh % ab_pr.NH;
    let nk = min(t / BK + 1u, ab_pr.nkb);
    // the key blocks before lo(t)'s skipped this row (their slots were not written)
    var d = 0u;
    if (ab_pr.has_doc != 0u) { d = ab_doc_r[b * T + t]; }
    let lo = attn_lo(ab_pr.has_doc, d, t, ab_pr.window);
    var acc = vec4<f32>(0.0);
    for (var kb = lo / BK; kb < nk; kb++) {
        let srow = bh * ab_pr.ntri + kb * T - BK * (kb * (kb - 1u) / 2u) + t - kb * BK;
        acc = acc + ab_scr_in[srow * HS4 + c4];
    }
    ab_st((b * T + t) * ab_pr.W + h * HS, c4, acc * ab_pr.scale, false);
}

// ------------------------------------------------------------------ split-dKdV: dQ
// One workgroup per (query block, b, h); the last query block (the longest loop) goes first.
@compute @workgroup_size(256)
fn attention_backward_dq(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                         @builtin(num_workgroups) nwg : vec3<u32>) {
    let u = ab_p;
    let w = flat_wg(wid, nwg);
    let T = u.T;
    if (w >= u.nblk * u.B * u.NH) { return; }
    let blk = attn_qblock(w, u.B, u.NH, GQ, u.nblk, BQ);
    let b = blk.b;
    let h = blk.h;
    let q0 = blk.r0;
    let tid = lid.x;
    ab_fetch_q(u, tid, b, h, q0);
    ab_put_q(tid);
    let st = ab_xq.st;
    ab_dq_acc = array<array<vec4<f32>, CP>, RQP>();
    let nkb = (min(q0 + BQ, T) + BK - 1u) / BK;
    let kb0 = ab_lo(u, b, q0) / BK;  // key blocks before it are masked for the whole query block
    ab_fetch_k(u, tid, b, blk.g, kb0 * BK);
    for (var kb = kb0; kb < nkb; kb++) {
        let k0 = kb * BK;
        workgroupBarrier();  // the previous tile's products are done with ab_kv, ab_pp, ab_ds
        ab_put_k(tid);
        workgroupBarrier();
        if (kb + 1u < nkb) { ab_fetch_k(u, tid, b, blk.g, k0 + BK); }
        ab_ds_tile(u, tid, q0, k0, st);
        ab_acc_q(u, tid);
    }
    storageBarrier();  // every thread has read its D (in the dQ slots) before any dQ is written
    ab_store_q(u, tid, b, h, q0);
}

// ------------------------------------------------------------------ streaming
// One workgroup per (b, kv head g). For each query head h of the group in order, and each of its
// query blocks in order: dQ in registers over the key blocks at or before it; each key block's
// dK, dV are written at the first query block of the group's first head that sees it and added
// to afterwards, always by the same thread (ab_store_kv's ownership is fixed).
@compute @workgroup_size(256)
fn attention_backward_stream(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                             @builtin(num_workgroups) nwg : vec3<u32>) {
    let u = ab_p;
    let bg = flat_wg(wid, nwg);
    let T = u.T;
    if (bg >= u.B * u.nkv) { return; }
    let b = bg / u.nkv;
    let g = bg % u.nkv;
    let tid = lid.x;
    let nqb = (T + BQ - 1u) / BQ;
    for (var j = 0u; j < GQ; j++) {
        let h = g * GQ + j;
        for (var qb = 0u; qb < nqb; qb++) {
            let q0 = qb * BQ;
            ab_fetch_q(u, tid, b, h, q0);
            let st = ab_xq.st;
            workgroupBarrier();
            ab_put_q(tid);
            ab_dq_acc = array<array<vec4<f32>, CP>, RQP>();
            let nkb = (min(q0 + BQ, T) + BK - 1u) / BK;
            // key blocks before lo of the first row are masked for the whole query block; a key
            // block's first visit is still its diagonal query block (kb0 <= k0 / BK there)
            for (var kb = ab_lo(u, b, q0) / BK; kb < nkb; kb++) {
                let k0 = kb * BK;
                ab_fetch_k(u, tid, b, g, k0);
                workgroupBarrier();
                ab_put_k(tid);
                workgroupBarrier();
                ab_ds_tile(u, tid, q0, k0, st);
                ab_acc_q(u, tid);
                ab_zero_kv();
                ab_acc_kv(u, tid);
                // first write of key block kb: at the first query block of the first head whose rows reach it
                ab_store_kv(u, tid, b, g, k0, j != 0u || qb != k0 / BQ);
            }
            storageBarrier();  // D of this block (in its dQ slots) has been read by every thread
            ab_store_q(u, tid, b, h, q0);
        }
    }
}

// ------------------------------------------------------------------ split-short
// One workgroup per (b, kv head g), T <= SS. For each query head h of the group in order: P and
// dS of the whole causal triangle in workgroup memory, then every dQ element of h as one sum over
// them, and every dK, dV element of g written (first head) or added to (the others) by the thread
// that owns it, the same for every head. Q, K, V, dout are read from the storage buffers directly
// (T rows of HS: small).
var<workgroup> as_p : array<f32, SS * SS>;
var<workgroup> as_ds : array<f32, SS * SS>;
var<workgroup> as_l : array<f32, SS>;
var<workgroup> as_d : array<f32, SS>;

fn as_qkv(i : u32) -> f32 {
    if (QV4) { return vec4<f32>(ab_qkv[i / 4u])[i % 4u]; }
    return vec4<f32>(ab_qkv[i]).x;
}
fn as_dout(i : u32) -> f32 {
    if (QV4) { return vec4<f32>(ab_dout[i / 4u])[i % 4u]; }
    return vec4<f32>(ab_dout[i]).x;
}

@compute @workgroup_size(256)
fn attention_backward_short(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                            @builtin(num_workgroups) nwg : vec3<u32>) {
    let bg = flat_wg(wid, nwg);
    let T = ab_p.T;
    if (bg >= ab_p.B * ab_p.nkv) { return; }
    let b = bg / ab_p.nkv;
    let g = bg % ab_p.nkv;
    let C = ab_p.C;
    let W = ab_p.W;
    let kc = C + g * HS;         // first column of K (dK) of kv head g
    let vc = ab_p.vc + g * HS;   // first column of V (dV)
    let rows = b * T;  // first row of this batch element
    for (var jh = 0u; jh < GQ; jh++) {
        let h = g * GQ + jh;
        let bh = b * ab_p.NH + h;
        // (the previous head's last phase reads neither as_l nor as_d, and the barrier below
        // orders its reads of as_p, as_ds before this head's writes)
        for (var t = lid.x; t < T; t = t + 256u) {
            as_l[t] = ab_lse2(ab_p, bh, t);
            as_d[t] = ab_dqkv[(rows + t) * W + h * HS];
        }
        workgroupBarrier();
        for (var e = lid.x; e < T * T; e = e + 256u) {
            let i = e / T;  // query
            let j = e % T;  // key
            var p = 0.0;
            var ds = 0.0;
            if (j <= i && j >= ab_lo(ab_p, b, i)) {
                let qb = (rows + i) * W + h * HS;
                let kb = (rows + j) * W + kc;
                let vb = (rows + j) * W + vc;
                let gb = (rows + i) * C + h * HS;
                var s = 0.0;
                var dp = 0.0;
                for (var c = 0u; c < HS; c++) {
                    s = s + as_qkv(qb + c) * as_qkv(kb + c);
                    dp = dp + as_dout(gb + c) * as_qkv(vb + c);
                }
                p = ab_prob(ab_p, s, as_l[i]);
                if (DROP) {
                    let m = ab_mult(ab_p, ab_rkey(ab_p, bh, i), j);
                    ds = p * (dp * m - as_d[i]);
                    p = p * m;
                } else {
                    ds = p * (dp - as_d[i]);
                }
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
            var dst = (rows + t) * W + h * HS + c;
            if (part == 0u) {
                for (var j = 0u; j <= t; j++) { acc = acc + as_ds[t * SS + j] * as_qkv((rows + j) * W + kc + c); }
                acc = acc * ab_p.scale;
            } else if (part == 1u) {
                for (var i = t; i < T; i++) { acc = acc + as_ds[i * SS + t] * as_qkv((rows + i) * W + h * HS + c); }
                acc = acc * ab_p.scale;
                dst = (rows + t) * W + kc + c;
            } else {
                for (var i = t; i < T; i++) { acc = acc + as_p[i * SS + t] * as_dout((rows + i) * C + h * HS + c); }
                dst = (rows + t) * W + vc + c;
            }
            if (part != 0u && jh != 0u) { acc = acc + ab_dqkv[dst]; }  // the group's earlier heads
            ab_dqkv[dst] = acc;
        }
    }
}

// ------------------------------------------------------------------ register-resident split (v=reg)
// attention_backward_dkdv_reg + attention_backward_dq_reg: the split-dKdV pair laid out for a
// large GPU's registers instead of its workgroup memory (docs/kernels.md#attention_backward).
// A thread owns RR resident rows (key rows in dK/dV, query rows in dQ), each split over RL
// adjacent lanes: lane ln of a row holds the vec4 head columns ln + RL·c (c < RC) of the row's
// operands (K and V, or Q·scale·log2e and dout) and of its accumulators (dK and dV, or dQ), in
// registers. Workgroup memory holds only the streamed tile of RB rows (Q and dout, or K and V)
// and, in the dK/dV pass, the streamed rows' statistics: 32·RB·HS4 (+ 16·RB) bytes, so HS = 128
// takes 32-row tiles in 33 KiB where the shared-tile kernels above fit 16×16. Per streamed row a
// thread forms its partial dot products over its columns, the RL lanes add them by the host's
// ar_sum (subgroupShuffleXor butterflies: every lane ends with the whole sum; the host uses RL > 1
// only where every subgroup has at least RL lanes, which then hold whole rows), and every lane
// applies the same P, dS to its columns. All lanes of a warp read the same streamed row
// (one broadcast address per lane group) and RL adjacent vec4: no bank conflicts, no swizzle.
// Host constants: RT threads (64, 128, 256), RL lanes a row (a power of 2), RR rows a thread,
// RB streamed rows a tile, PF the next tile prefetched into registers during the current one; a workgroup owns RBLK = RT/RL·RR rows, its row group rg holding rows
// rg + RT/RL·r (interleaved, so that the causal work of a block is spread over its threads).
// The mask, dropout and grouped heads as the kernels above; D is read from the dQ slots (dsum).
const RNG : u32 = RT / RL;                     // row groups
const RBLK : u32 = RNG * RR;                   // resident rows of a workgroup
const RC : u32 = (HS4 + RL - 1u) / RL;         // vec4 columns a lane
const RSN : u32 = (RB * HS4 + RT - 1u) / RT;   // vec4 of each streamed operand a thread stages
const AR_NOROW : u32 = 0xffffffffu;            // lo of a row past T: no key attended

var<workgroup> ar_x : array<vec4<f32>, 2u * RB * HS4>;  // streamed rows [row][d4]: Q | dout, or K | V
var<workgroup> ar_st : array<vec4<u32>, RB>;            // dK/dV pass: (lse·log2e, D as bits, lo, dropout key) a row

// Streamed rows a tile: a constant where UNROLL, else the uniform's bq (= RB).
fn ar_nb(u : AttnParams) -> u32 {
    if (UNROLL) { return RB; }
    return u.bq;
}

const RST : u32 = (RB + RT - 1u) / RT;          // streamed rows' statistics a thread stages (dK/dV)

// The streamed tile in registers (this thread's share), before it goes to workgroup memory.
struct ARegs {
    a : array<vec4<f32>, RSN>,   // Q or K
    b : array<vec4<f32>, RSN>,   // dout or V
    st : array<vec4<u32>, RST>,  // dK/dV: rows tid + RT·n's (lse·log2e, D as bits, lo, dropout key)
};

// This thread's share of streamed rows r0.. of the two operands whose head column 0 of row t is
// at a_base + t·a_w and b_base + t·b_w (b from dout when b_dout), zero past T.
fn ar_fetch(u : AttnParams, tid : u32, r0 : u32, a_base : u32, a_w : u32, b_base : u32, b_w : u32, b_dout : bool,
            x : ptr<function, ARegs>) {
    for (var n = 0u; n < RSN; n++) {
        (*x).a[n] = ab_tile4(u, false, a_base, a_w, r0, tid + RT * n, RB);
        (*x).b[n] = ab_tile4(u, b_dout, b_base, b_w, r0, tid + RT * n, RB);
    }
}

// The statistics of query row t (< T) of head h: (lse·log2e, D as bits, lo, dropout key (DROP)).
fn ar_row_st(u : AttnParams, b : u32, h : u32, t : u32) -> vec4<u32> {
    var rk = 0u;
    if (DROP) { rk = ab_rkey(u, b * u.NH + h, t); }
    return vec4<u32>(bitcast<u32>(ab_lse2(u, b * u.NH + h, t)), bitcast<u32>(ab_dval(u, b, h, t)), ab_lo(u, b, t), rk);
}

// The dK/dV pass's streamed query rows q0..: Q, dout and each row's statistics (a row past T:
// lo = AR_NOROW, so that it attends nothing).
fn ar_fetch_q(u : AttnParams, tid : u32, b : u32, h : u32, q0 : u32, x : ptr<function, ARegs>) {
    let T = u.T;
    ar_fetch(u, tid, q0, b * T * u.W + h * HS, u.W, b * T * u.C + h * HS, u.C, true, x);
    for (var n = 0u; n < RST; n++) {
        let t = q0 + tid + RT * n;
        var st = vec4<u32>(0u, 0u, AR_NOROW, 0u);
        if (t < T && tid + RT * n < RB) { st = ar_row_st(u, b, h, t); }
        (*x).st[n] = st;
    }
}

// The vec4 column of lane ln's c-th column group, clamped to the head (a lane's columns past HS4
// compute a copy of the last one, never stored: their resident operands are 0 there).
fn ar_col(ln : u32, c : u32) -> u32 { return min(ln + RL * c, HS4 - 1u); }

fn ar_put(tid : u32, x : ptr<function, ARegs>) {
    for (var n = 0u; n < RSN; n++) {
        let i = tid + RT * n;
        if (i < RB * HS4) {
            ar_x[i] = (*x).a[n];
            ar_x[RB * HS4 + i] = (*x).b[n];
        }
    }
}

// the statistics too (a function of its own: a kernel that names ar_st allocates it)
fn ar_put_st(tid : u32, x : ptr<function, ARegs>) {
    ar_put(tid, x);
    for (var n = 0u; n < RST; n++) {
        let i = tid + RT * n;
        if (i < RB) { ar_st[i] = (*x).st[n]; }
    }
}

// The dK/dV pass's exchange: a group of RL streamed rows gives a lane 2·RR partial sums a
// streamed row (s and dP against each of its resident rows), AR_P slots. Slot group j of lane ln
// holds streamed row j ^ ln of the group throughout, so that every exchange is an xor shuffle of
// one slot (the forward's reduce-scatter, 05_attention.wgsl).
const AR_P : u32 = 2u * RR;
const AR_NX : u32 = RL * AR_P;

// The ar_x index of lane ln's column group c in streamed row i0 + (j ^ ln) (the Q rows; + RB·HS4
// the dout rows), lb = ln·HS4 + ln; with the host's RL_POW2 ((j ^ ln)·HS4 + ln = (j·HS4) ^ lb)
// one xor for j (constant once the loops unroll).
fn ar_at(i0 : u32, j : u32, ln : u32, lb : u32, c : u32) -> u32 {
    if (RL_POW2) { return i0 * HS4 + ((j * HS4) ^ lb) + RL * c; }
    return (i0 + (j ^ ln)) * HS4 + ar_col(ln, c);
}

// Reduce-scatter over the RL lanes of a row: at step e (lane mask m = RL/2^(e+1)) slots
// [0, m·AR_P) add the partner's [m·AR_P, 2m·AR_P), the same streamed rows; at the end slots
// [0, AR_P) hold the whole sums of streamed row ln. (Constant trip counts and constant-folded
// tests, so that the loops unroll and x stays in registers.)
fn ar_scatter(x : ptr<function, array<f32, AR_NX>>) {
    for (var e = 0u; e < RL_LOG; e++) {
        let m = RL >> (e + 1u);
        for (var k = 0u; k < AR_NX / 2u; k++) {
            if (k < m * AR_P) { (*x)[k] = (*x)[k] + reg_xor((*x)[m * AR_P + k], m); }
        }
    }
}

// The reverse: at step e (lane mask m = 2^e) slots [m·AR_P, 2m·AR_P) take the partner's [0, m·AR_P).
fn ar_gather(x : ptr<function, array<f32, AR_NX>>) {
    for (var e = 0u; e < RL_LOG; e++) {
        let m = 1u << e;
        for (var k = 0u; k < AR_NX / 2u; k++) {
            if (k < m * AR_P) { (*x)[m * AR_P + k] = reg_xor((*x)[k], m); }
        }
    }
}

// One workgroup per (key block of RBLK keys, b, kv head g); key block 0 (the longest) first.
@compute @workgroup_size(RT)
fn attention_backward_dkdv_reg(@builtin(local_invocation_id) lid : vec3<u32>,
                               @builtin(workgroup_id) wid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let u = ar_params();
    let w = flat_wg(wid, nwg);
    let T = u.T;
    if (w >= u.nblk * u.B * u.nkv) { return; }
    let x3 = attn_grid(w, u.B, u.nkv);  // (b, g, key block)
    let b = x3.x;
    let g = x3.y;
    let k0 = x3.z * RBLK;
    let tid = lid.x;
    let rg = tid / RL;
    let ln = tid % RL;
    let lb = ln * HS4 + ln;
    var kr = array<array<vec4<f32>, RC>, RR>();
    var vr = array<array<vec4<f32>, RC>, RR>();
    var dk = array<array<vec4<f32>, RC>, RR>();
    var dv = array<array<vec4<f32>, RC>, RR>();
    for (var r = 0u; r < RR; r++) {
        let key = k0 + rg + RNG * r;
        if (key < T) {
            let base = (b * T + key) * u.W + g * HS;
            for (var c = 0u; c < RC; c++) {
                let c4 = ln + RL * c;
                if (c4 < HS4) {
                    kr[r][c] = ab_ld(false, base + u.C, c4);
                    vr[r][c] = ab_ld(false, base + u.vc, c4);
                }
            }
        }
    }
    // the query tiles from the one holding k0 up to the first whose first row's lo is past the
    // block (lo is non-decreasing)
    let klast = k0 + RBLK - 1u;
    let qb0 = k0 / RB;
    let nqb = (T + RB - 1u) / RB;
    var qe = qb0 + 1u;
    while (qe < nqb && ab_lo(u, b, qe * RB) <= klast) { qe++; }
    let nb = ar_nb(u);
    // the group's query heads in order, for each the query tiles qb0 .. qe - 1; PF: the next
    // (head, tile)'s rows wait in registers while the current one is computed
    let nq = qe - qb0;
    var x = ARegs();
    if (PF) { ar_fetch_q(u, tid, b, g * GQ, qb0 * RB, &x); }
    for (var it = 0u; it < GQ * nq; it++) {
        let h = g * GQ + it / nq;
        let q0 = (qb0 + it % nq) * RB;
        workgroupBarrier();  // the previous tile's reads are done
        if (!PF) { ar_fetch_q(u, tid, b, h, q0, &x); }
        ar_put_st(tid, &x);
        workgroupBarrier();
        if (PF && it + 1u < GQ * nq) { ar_fetch_q(u, tid, b, g * GQ + (it + 1u) / nq, (qb0 + (it + 1u) % nq) * RB, &x); }
        {
            let dsb = (b * u.NH + h) * u.ntri;  // DSW: the head's dS triangle
            // groups of RL streamed rows: slot group j of x is row i0 + (j ^ ln); after the
            // reduce-scatter lane ln holds the whole s, dP of row i0 + ln against its RR rows
            for (var i0 = 0u; i0 < nb; i0 += RL) {
                var x = array<f32, AR_NX>();
                for (var j = 0u; j < RL; j++) {
                    var qv = array<vec4<f32>, RC>();
                    var gv = array<vec4<f32>, RC>();
                    for (var c = 0u; c < RC; c++) {
                        let a = ar_at(i0, j, ln, lb, c);
                        qv[c] = ar_x[a];
                        gv[c] = ar_x[RB * HS4 + a];
                    }
                    for (var r = 0u; r < RR; r++) {
                        var sp = 0.0;
                        var dpp = 0.0;
                        for (var c = 0u; c < RC; c++) {
                            sp = fma_dot4(sp, qv[c], kr[r][c]);
                            dpp = fma_dot4(dpp, gv[c], vr[r][c]);
                        }
                        x[j * AR_P + 2u * r] = sp;
                        x[j * AR_P + 2u * r + 1u] = dpp;
                    }
                }
                ar_scatter(&x);
                let i = i0 + ln;
                let t = q0 + i;
                let st = ar_st[i];
                let lo = st.z;
                let lse2 = bitcast<f32>(st.x);
                let dd = bitcast<f32>(st.y);
                for (var r = 0u; r < RR; r++) {
                    let key = k0 + rg + RNG * r;
                    var p = 0.0;
                    if (attn_sees(key, t, lo)) { p = ab_prob(u, x[2u * r], lse2); }
                    var pm = p;
                    var dpm = x[2u * r + 1u];
                    if (DROP) {
                        let m = ab_mult(u, st.w, key);
                        pm = p * m;
                        dpm = dpm * m;
                    }
                    let ds = p * (dpm - dd);
                    // DSW: dS (0 where masked) for attention_backward_dq_ds
                    if (DSW && key <= t && t < T) { ar_ds_put(dsb + ab_tri(t) + key, ds); }
                    x[2u * r] = pm;
                    x[2u * r + 1u] = ds;
                }
                ar_gather(&x);
                for (var j = 0u; j < RL; j++) {
                    var qv = array<vec4<f32>, RC>();
                    var gv = array<vec4<f32>, RC>();
                    for (var c = 0u; c < RC; c++) {
                        let a = ar_at(i0, j, ln, lb, c);
                        qv[c] = ar_x[a];
                        gv[c] = ar_x[RB * HS4 + a];
                    }
                    for (var r = 0u; r < RR; r++) {
                        let pm = x[j * AR_P + 2u * r];
                        let ds = x[j * AR_P + 2u * r + 1u];
                        for (var c = 0u; c < RC; c++) {
                            dv[r][c] = fma(vec4<f32>(pm), gv[c], dv[r][c]);
                            dk[r][c] = fma(vec4<f32>(ds), qv[c], dk[r][c]);
                        }
                    }
                }
            }
        }
    }
    for (var r = 0u; r < RR; r++) {
        let key = k0 + rg + RNG * r;
        if (key >= T) { continue; }
        let base = (b * T + key) * u.W + g * HS;
        for (var c = 0u; c < RC; c++) {
            let c4 = ln + RL * c;
            if (c4 >= HS4) { continue; }
            ab_st(base + u.C, c4, dk[r][c] * u.scale, false);
            ab_st(base + u.vc, c4, dv[r][c], false);
        }
    }
}

// One workgroup per (query block of RBLK rows, b, h); the last query block (the longest) first.
// Runs after attention_backward_dkdv_reg, which reads every row's D from the dQ slots.
@compute @workgroup_size(RT)
fn attention_backward_dq_reg(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                             @builtin(num_workgroups) nwg : vec3<u32>) {
    let u = ab_p;
    let w = flat_wg(wid, nwg);
    let T = u.T;
    if (w >= u.nblk * u.B * u.NH) { return; }
    let blk = attn_qblock(w, u.B, u.NH, GQ, u.nblk, RBLK);
    let b = blk.b;
    let h = blk.h;
    let q0 = blk.r0;
    let tid = lid.x;
    let rg = tid / RL;
    let ln = tid % RL;
    var qr = array<array<vec4<f32>, RC>, RR>();  // q·scale·log2e
    var gr = array<array<vec4<f32>, RC>, RR>();  // dout
    var dq = array<array<vec4<f32>, RC>, RR>();
    var lse2 = array<f32, RR>();
    var dd = array<f32, RR>();
    var rlo = array<u32, RR>();
    var rk = array<u32, RR>();
    for (var r = 0u; r < RR; r++) {
        let t = q0 + rg + RNG * r;
        rlo[r] = AR_NOROW;
        if (t < T) {
            for (var c = 0u; c < RC; c++) {
                let c4 = ln + RL * c;
                if (c4 < HS4) {
                    qr[r][c] = ab_ld(false, (b * T + t) * u.W + h * HS, c4) * u.scale_log2;
                    gr[r][c] = ab_ld(true, (b * T + t) * u.C + h * HS, c4);
                }
            }
            let st = ar_row_st(u, b, h, t);
            lse2[r] = bitcast<f32>(st.x);
            dd[r] = bitcast<f32>(st.y);
            rlo[r] = st.z;
            rk[r] = st.w;
        }
    }
    let nkb = (min(q0 + RBLK, T) - 1u) / RB + 1u;
    let kb0 = ab_lo(u, b, q0) / RB;  // key tiles before it are masked for the whole block
    let nb = ar_nb(u);
    let kbase = b * T * u.W + blk.g * HS + u.C;
    let vbase = b * T * u.W + blk.g * HS + u.vc;
    var x = ARegs();  // the streamed K and V rows (PF: the next tile's, fetched during this one)
    if (PF) { ar_fetch(u, tid, kb0 * RB, kbase, u.W, vbase, u.W, false, &x); }
    for (var kb = kb0; kb < nkb; kb++) {
        let k0 = kb * RB;
        workgroupBarrier();  // the previous tile's reads are done
        if (!PF) { ar_fetch(u, tid, k0, kbase, u.W, vbase, u.W, false, &x); }
        ar_put(tid, &x);
        workgroupBarrier();
        if (PF && kb + 1u < nkb) { ar_fetch(u, tid, k0 + RB, kbase, u.W, vbase, u.W, false, &x); }
        for (var i = 0u; i < nb; i++) {
            let key = k0 + i;
            var kv = array<vec4<f32>, RC>();
            var vv = array<vec4<f32>, RC>();
            for (var c = 0u; c < RC; c++) {
                kv[c] = ar_x[i * HS4 + ar_col(ln, c)];
                vv[c] = ar_x[(RB + i) * HS4 + ar_col(ln, c)];
            }
            var s = array<f32, RR>();
            var dp = array<f32, RR>();
            for (var r = 0u; r < RR; r++) {
                var x = array<f32, 4>();  // two FMA chains each (latency)
                for (var c = 0u; c < RC; c++) {
                    x[c % 2u] = fma_dot4(x[c % 2u], qr[r][c], kv[c]);
                    x[2u + c % 2u] = fma_dot4(x[2u + c % 2u], gr[r][c], vv[c]);
                }
                s[r] = x[0] + x[1];
                dp[r] = x[2] + x[3];
            }
            for (var r = 0u; r < RR; r++) {
                s[r] = ar_sum(s[r]);
                dp[r] = ar_sum(dp[r]);
            }
            for (var r = 0u; r < RR; r++) {
                let t = q0 + rg + RNG * r;
                var p = 0.0;
                if (attn_sees(key, t, rlo[r])) { p = exp2(s[r] - lse2[r]); }
                var dpm = dp[r];
                if (DROP) { dpm = dpm * ab_mult(u, rk[r], key); }
                let ds = p * (dpm - dd[r]);
                for (var c = 0u; c < RC; c++) { dq[r][c] = fma(vec4<f32>(ds), kv[c], dq[r][c]); }
            }
        }
    }
    storageBarrier();  // every thread has read its D (in the dQ slots) before any dQ is written
    workgroupBarrier();
    for (var r = 0u; r < RR; r++) {
        let t = q0 + rg + RNG * r;
        if (t >= T) { continue; }
        let base = (b * T + t) * u.W + h * HS;
        for (var c = 0u; c < RC; c++) {
            let c4 = ln + RL * c;
            if (c4 >= HS4) { continue; }
            ab_st(base, c4, dq[r][c] * u.scale, false);
        }
    }
}

// ------------------------------------------------------------------ dQ from the stored dS (reg-ds)
// The variant reg-ds runs attention_backward_dkdv_reg with DSW, which also stores every dS[t, j]
// it forms (j <= t, unscaled, 0 where masked) in a scratch of B·NH triangles: row t of head
// bh = b·NH + h at bh·ntri + ab_tri(t), its keys 0..t padded to a multiple of 4 so that every
// row starts on a vec4 (ntri = ab_tri(T)). dQ = scale·dS·K is then a causal GEMM, 1·HS FMAs a
// (query, key) pair where attention_backward_dq_reg recomputes the scores and dP (3·HS, plus
// the lane sums and exp2): one workgroup per (query block of DQ_BM rows, b, h), last block first,
// streams key tiles of DQ_BK keys from the one holding lo of its first row to the diagonal: the
// tile's dS (transposed, [key][row quad]) and K rows ([key][d4]) into workgroup memory, the next
// tile prefetched into registers. A thread owns DQ_TM rows (quads ty and ty + DQ_TY) × DQ_CN
// vec4 columns (tx + DQ_TX·c; columns past HS4 compute a copy of the last one, never stored):
// per key, DQ_TM/4 + DQ_CN vec4 loads feed DQ_TM·DQ_CN vec4 FMAs. Entries outside [lo(t), t]
// are selected to 0, never multiplied: the scratch holds stale values there. Host constants
// DQ_BM, DQ_BK, DQ_TM (4 or 8), DQ_TX (threads along the columns), DQ_CN.

// First element of row t of a padded triangle: Σ_{s<t} 4·(s/4 + 1).
fn ab_tri(t : u32) -> u32 {
    let a = t / 4u;
    return 4u * (a + 1u) * (2u * a + t % 4u);
}

const DQ_TY : u32 = DQ_BM / DQ_TM;                          // threads along the rows
const DQ_WG : u32 = DQ_TX * DQ_TY;
const DQ_SV : u32 = DQ_BM / 4u + 1u;                        // a transposed dS key row, padded
const DQ_SN : u32 = (DQ_BM * DQ_BK / 4u + DQ_WG - 1u) / DQ_WG;  // dS vec4 a thread stages
const DQ_KN : u32 = (DQ_BK * HS4 + DQ_WG - 1u) / DQ_WG;     // K vec4 a thread stages
const_assert DQ_TM == 4u || DQ_TM == 8u;
const_assert DQ_BM % DQ_TM == 0u && DQ_BK % 4u == 0u && DQ_WG <= 256u;

var<workgroup> dq_st : array<vec4<f32>, DQ_BK * DQ_SV>;  // dS tile [key][row quad]
var<workgroup> dq_kt : array<vec4<f32>, DQ_BK * HS4>;    // K tile [key][d4]

struct DqTile { s : array<vec4<f32>, DQ_SN>, k : array<vec4<f32>, DQ_KN> };

// ab_lo through this kernel's doc_start binding
fn dq_lo(u : AttnParams, b : u32, t : u32) -> u32 {
    var d = 0u;
    if (u.has_doc != 0u) { d = ab_doc_q[b * u.T + t]; }
    return attn_lo(u.has_doc, d, t, u.window);
}

// The tile of keys k0..: dS slot i = tid + DQ_WG·n is (row i / (DQ_BK/4), key quad i % (DQ_BK/4)),
// masked by its row's lo (slo[n]; AR_NOROW past T); K vec4 i = (key i / HS4, column i % HS4).
fn dq_fetch(u : AttnParams, tid : u32, sbase : u32, q0 : u32, k0 : u32, kbase : u32, slo : array<u32, DQ_SN>,
            x : ptr<function, DqTile>) {
    for (var n = 0u; n < DQ_SN; n++) {
        let i = tid + DQ_WG * n;
        let t = q0 + i / (DQ_BK / 4u);
        let j = k0 + 4u * (i % (DQ_BK / 4u));
        var v = vec4<f32>(0.0);
        if (i < DQ_BM * DQ_BK / 4u && slo[n] != AR_NOROW && j <= t && j + 3u >= slo[n]) {
            let w = ab_dsr[(sbase + ab_tri(t) + j) / 4u];
            let jj = vec4<u32>(j) + vec4<u32>(0u, 1u, 2u, 3u);
            v = select(vec4<f32>(0.0), w, (jj <= vec4<u32>(t)) & (jj >= vec4<u32>(slo[n])));
        }
        (*x).s[n] = v;
    }
    for (var n = 0u; n < DQ_KN; n++) {
        let i = tid + DQ_WG * n;
        let j = k0 + i / HS4;
        var v = vec4<f32>(0.0);
        if (i < DQ_BK * HS4 && j < u.T) { v = ab_ld_qkv(kbase + j * u.W, i % HS4); }
        (*x).k[n] = v;
    }
}

fn dq_put(tid : u32, x : ptr<function, DqTile>) {
    for (var n = 0u; n < DQ_SN; n++) {
        let i = tid + DQ_WG * n;
        if (i < DQ_BM * DQ_BK / 4u) {
            let row = i / (DQ_BK / 4u);
            let kq = 4u * (i % (DQ_BK / 4u));
            let v = (*x).s[n];
            let o = kq * DQ_SV + row / 4u;
            dq_st[o][row % 4u] = v.x;
            dq_st[o + DQ_SV][row % 4u] = v.y;
            dq_st[o + 2u * DQ_SV][row % 4u] = v.z;
            dq_st[o + 3u * DQ_SV][row % 4u] = v.w;
        }
    }
    for (var n = 0u; n < DQ_KN; n++) {
        let i = tid + DQ_WG * n;
        if (i < DQ_BK * HS4) { dq_kt[i] = (*x).k[n]; }
    }
}

@compute @workgroup_size(DQ_WG)
fn attention_backward_dq_ds(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                            @builtin(num_workgroups) nwg : vec3<u32>) {
    let u = ab_pq;
    let w = flat_wg(wid, nwg);
    let T = u.T;
    if (w >= u.nblk * u.B * u.NH) { return; }
    let blk = attn_qblock(w, u.B, u.NH, GQ, u.nblk, DQ_BM);
    let b = blk.b;
    let q0 = blk.r0;
    let tid = lid.x;
    let tx = tid % DQ_TX;
    let ty = tid / DQ_TX;
    let sbase = blk.bh * u.ntri;
    let kbase = b * T * u.W + u.C + blk.g * HS;
    // the lo of the rows this thread stages (the same rows for every tile)
    var slo = array<u32, DQ_SN>();
    for (var n = 0u; n < DQ_SN; n++) {
        let t = q0 + (tid + DQ_WG * n) / (DQ_BK / 4u);
        slo[n] = AR_NOROW;
        if (t < T) { slo[n] = dq_lo(u, b, t); }
    }
    let kt0 = dq_lo(u, b, q0) / DQ_BK;  // tiles before it are masked for every row
    let kt1 = (min(q0 + DQ_BM, T) - 1u) / DQ_BK;             // the diagonal's last tile
    var acc = array<array<vec4<f32>, DQ_CN>, DQ_TM>();
    var x = DqTile();
    dq_fetch(u, tid, sbase, q0, kt0 * DQ_BK, kbase, slo, &x);
    for (var kt = kt0; kt <= kt1; kt++) {
        workgroupBarrier();  // the previous tile's reads are done
        dq_put(tid, &x);
        workgroupBarrier();
        if (kt < kt1) { dq_fetch(u, tid, sbase, q0, (kt + 1u) * DQ_BK, kbase, slo, &x); }
        for (var k = 0u; k < DQ_BK; k++) {
            var kv = array<vec4<f32>, DQ_CN>();
            for (var c = 0u; c < DQ_CN; c++) { kv[c] = dq_kt[k * HS4 + min(tx + DQ_TX * c, HS4 - 1u)]; }
            for (var q = 0u; q < DQ_TM / 4u; q++) {
                let a = dq_st[k * DQ_SV + ty + DQ_TY * q];
                for (var c = 0u; c < DQ_CN; c++) {
                    acc[4u * q][c] = fma(vec4<f32>(a.x), kv[c], acc[4u * q][c]);
                    acc[4u * q + 1u][c] = fma(vec4<f32>(a.y), kv[c], acc[4u * q + 1u][c]);
                    acc[4u * q + 2u][c] = fma(vec4<f32>(a.z), kv[c], acc[4u * q + 2u][c]);
                    acc[4u * q + 3u][c] = fma(vec4<f32>(a.w), kv[c], acc[4u * q + 3u][c]);
                }
            }
        }
    }
    for (var i = 0u; i < DQ_TM; i++) {
        let t = q0 + 4u * (ty + DQ_TY * (i / 4u)) + i % 4u;
        if (t >= T) { continue; }
        let base = (b * T + t) * u.W + blk.h * HS;
        for (var c = 0u; c < DQ_CN; c++) {
            let c4 = tx + DQ_TX * c;
            if (c4 < HS4) { ab_st(base, c4, acc[i][c] * u.scale, false); }
        }
    }
}
