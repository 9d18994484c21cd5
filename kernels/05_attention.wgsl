// 05_attention.wgsl — causal multi-head attention forward, flash style
// (docs/kernels.md#attention_forward): the T×T scores are never stored; each workgroup keeps a running max and sum per query row (online
// softmax) and saves the row log-sum-exp for the backward (10_backward_attention.wgsl).
//
// Layout: qkv[B,T,W], W = C + 2·NKV·HS with C = NH·HS: q (NH heads, head h in columns h·HS..)
// | k (NKV heads from column C) | v (NKV heads from column vc = C + NKV·HS); query head h reads
// kv head h / (NH/NKV) (grouped-query attention; NKV = NH is plain multi-head). out[B,T,C],
// lse[B,NH,T] (natural log of the sum of exp of the scaled scores q·k/sqrt(HS) over the keys the
// row attends).
//
// Mask (docs/kernels.md#attention-mask): query t of sequence b attends keys [lo(t), t] with
// lo(t) = max(doc[b,t], t - window + 1): doc (binding 3, u32 [B,T], read only when the uniform's
// has_doc is 1) is the first position of t's packed example, window (0: none) a sliding window.
// doc is non-decreasing along t (the host guarantees it), so lo is too: a query block starts at
// the key tile holding lo of its first row, and the tiles before it (fully masked) are skipped.
//
// Host constants (prepended as defines, chosen per device in wg_ops_attention.c):
//   HS    head size;
//   GQ    query heads per kv head, NH / NKV (a constant, so that GQ = 1 costs nothing);
//   NL    key lanes per query row group (4, 8 or 16): 256 threads = NG = 256/NL row groups × NL;
//   TR    query rows per thread: one workgroup handles BR = NG·TR rows of one (b, h);
//   BC    keys per tile (a power of 2, 16..128, a multiple of NL);
//   SG    row max / sum across the NL lanes by subgroup shuffles (fa_sg, defined by the host
//         with subgroupShuffleXor only when the device has subgroups of at least NL lanes, which
//         then hold whole row groups: invocations fill subgroups in local index order); false:
//         through workgroup memory (the tail of fa_kp), and fa_sg is a placeholder;
//   UNROLL constant trip counts for the head-column and key loops (false on the software
//         rasterizer, where unrolling costs seconds of shader compilation per pipeline);
//   QT, QV4 the element type qkv is bound as: vec4<f32> (one 16-byte load per 4 columns) when
//         HS is a multiple of 4, else f32;
//   DROP  dropout on the probabilities (p > 0): P of key j in row t is multiplied by dscale or 0,
//         kept when dropout_bits(dropout_key(dseed, (b·NH + h)·T + t, DROPOUT_ATTN), j) >= dthr
//         (00_shared.wgsl; docs/kernels.md#dropout), after it joined the row sum (so lse is that
//         of the undropped softmax) and before P·V. False at p = 0: the code without dropout.
//
// Per key tile (4 barriers):
//   1. K (XOR-swizzled by key) and V tiles -> workgroup memory, from registers loaded during the
//      previous tile (the loads of tile kt+1 are issued right after tile kt is stored);
//   2. S: thread (row group rg, lane kl) scores rows rg·TR + r against keys kl + NL·j, Q read
//      from workgroup memory (staged once, prescaled by scale·log2(e) so the softmax runs on
//      exp2); register blocking TR × BC/NL: per vec4 of head columns TR + BC/NL loads feed
//      4·TR·BC/NL FMAs;
//   3. row max over the NL lanes; rescale the running sums; P = exp2(s - m) written over the K
//      tile (all K reads are done) as [row][key], key index XOR-swizzled by row group so that the
//      32 stores of a warp hit 32 different banks;
//   4. O += P·V: thread owns rows rg·TR + r × vec4 columns kl + NL·i; per 4 keys it reads TR vec4
//      of P and 4 vec4 of V per column.
// Warps see NL distinct keys / columns and 32/NL distinct rows per load; Q rows are swizzled by
// row group and K rows by key so that those land in different banks. Workgroup memory:
// 16·(BR + BC)·HS4 + 16·max(BC·HS4, BR·BC/4) bytes, plus 4·BR·NL without SG (48 KiB for NL = 8,
// TR = 2, BC = 64 at HS = 64). Register blocking is what matters on an FP32-only GPU: an SM
// reads workgroup memory at about 128 bytes a clock and does 128 FMAs a clock.
//
// Numerics: FA_NEG is a finite "minus infinity" (WGSL lets compilers assume finite floats); a
// query row always has key t itself in a tile it visits, so its max is finite from that tile on
// (before it, m = FA_NEG and alpha = exp2(0) rescale nothing but zeros) and masked entries are
// exactly 0.

const NG : u32 = 256u / NL;
const BR : u32 = NG * TR;
const KPT : u32 = BC / NL;                 // keys per thread in a tile
const BC4 : u32 = BC / 4u;
const HS4 : u32 = (HS + 3u) / 4u;          // vec4 per head row (zero padded)
const CPT : u32 = (HS4 + NL - 1u) / NL;    // output vec4 columns per thread
const NKV : u32 = (BC * HS4 + 255u) / 256u; // K (and V) vec4 a thread stages per tile
const SWM : u32 = select(0u, 7u, HS4 % 8u == 0u);
const KP_MAIN : u32 = max(BC * HS4, BR * BC4);       // K tile, then P tile (vec4s)
const KP_N : u32 = KP_MAIN + select(BR * NL / 4u, 0u, SG);  // + lane maxima / sums without SG
const FA_NEG : f32 = -1.0e30;
const FA_LN2 : f32 = 0.6931471805599453;

struct AttnParams {
    B : u32, T : u32, C : u32, NH : u32,         // C = NH·HS: out's width, qkv's first k column
    W : u32, nblk : u32, hs4 : u32, bc4 : u32,   // W: qkv's row width
    rb : u32, p1 : u32, p2 : u32, nkv : u32,     // rb: RB (attention_forward_reg's loops without UNROLL)
    vc : u32, dseed : u32, dthr : u32, p6 : u32, // vc: qkv's first v column; dropout seed, threshold
    scale_log2 : f32, scale : f32, dscale : f32, f1 : f32,  // dscale: 1/(1 - p)
    has_doc : u32, window : u32, p7 : u32, p8 : u32,        // the mask: doc bound, window (0 none)
};

@group(0) @binding(0) var<storage, read_write> fa_out : array<f32>;
@group(0) @binding(1) var<storage, read_write> fa_lse : array<f32>;
@group(0) @binding(2) var<storage, read> fa_qkv : array<QT>;
@group(0) @binding(3) var<storage, read> fa_doc : array<u32>;
@group(0) @binding(4) var<uniform> fa_p : AttnParams;

var<workgroup> fa_q : array<vec4<f32>, BR * HS4>;   // [row][d4 ^ (row group & SWM)], prescaled
// K [key][d4 ^ (key & SWM)], then P [row][key4]; without SG, from KP_MAIN on, the lane maxima or
// sums [row][lane] (an array of its own would cost 4 bytes with SG, which a 48 KiB tile lacks)
var<workgroup> fa_kp : array<vec4<f32>, KP_N>;
var<workgroup> fa_v : array<vec4<f32>, BC * HS4>;   // V [key][d4]

// 4 consecutive head columns starting at 4·c4 of the row whose head column 0 is element `base`
// (zero past HS).
fn fa_load4(base : u32, c4 : u32) -> vec4<f32> {
    let c = c4 * 4u;
    if (QV4) { return vec4<f32>(fa_qkv[(base + c) / 4u]); }
    var v = vec4<f32>(0.0);
    if (c < HS) { v.x = vec4<f32>(fa_qkv[base + c]).x; }
    if (c + 1u < HS) { v.y = vec4<f32>(fa_qkv[base + c + 1u]).x; }
    if (c + 2u < HS) { v.z = vec4<f32>(fa_qkv[base + c + 2u]).x; }
    if (c + 3u < HS) { v.w = vec4<f32>(fa_qkv[base + c + 3u]).x; }
    return v;
}

// Element i of a tile of `rows` key rows from k0 of kv head g (vec4 i % HS4 of key k0 + i / HS4):
// K where col is C, V where it is vc; zero past the tile and past T.
fn fa_tile4(b : u32, g : u32, k0 : u32, i : u32, rows : u32, col : u32) -> vec4<f32> {
    let t = k0 + i / HS4;
    if (i >= rows * HS4 || t >= fa_p.T) { return vec4<f32>(0.0); }
    return fa_load4((b * fa_p.T + t) * fa_p.W + g * HS + col, i % HS4);
}

// This thread's share of the K and V rows k0.. of kv head g (element i = tid + 256·n of the tile).
fn fa_fetch_kv(tid : u32, b : u32, g : u32, k0 : u32, kr : ptr<function, array<vec4<f32>, NKV>>,
               vr : ptr<function, array<vec4<f32>, NKV>>) {
    for (var n = 0u; n < NKV; n++) {
        (*kr)[n] = fa_tile4(b, g, k0, tid + 256u * n, BC, fa_p.C);
        (*vr)[n] = fa_tile4(b, g, k0, tid + 256u * n, BC, fa_p.vc);
    }
}

// vec4 c4 of query t of head h, prescaled by scale·log2(e) (the softmax runs on exp2)
fn fa_q4(b : u32, h : u32, t : u32, c4 : u32) -> vec4<f32> {
    return fa_load4((b * fa_p.T + t) * fa_p.W + h * HS, c4) * fa_p.scale_log2;
}

// The first key query t (< T) of sequence b attends (see Mask above); never above t.
fn fa_lo(b : u32, t : u32) -> u32 {
    var d = 0u;
    if (fa_p.has_doc != 0u) { d = fa_doc[b * fa_p.T + t]; }
    return attn_lo(fa_p.has_doc, d, t, fa_p.window);
}

// P of a score s against the row max m (log2 units): 0 where the row does not see the key
fn fa_exp(sees : bool, s : f32, m : f32) -> f32 {
    if (sees) { return exp2(s - m); }
    return 0.0;
}

// P after dropout (DROP): kept entries scaled by dscale, the others 0; rkey the row's key
fn fa_drop(p : f32, rkey : u32, key : u32) -> f32 {
    if (DROP) { return select(0.0, p * fa_p.dscale, dropout_kept(rkey, key, fa_p.dthr)); }
    return p;
}

// out[ob + 4·c4 ..] = v within the head's HS columns; lse of row i from the row max (log2 units)
// and sum
fn fa_put4(ob : u32, c4 : u32, v : vec4<f32>) {
    let col = c4 * 4u;
    if (col < HS) { fa_out[ob + col] = v.x; }
    if (col + 1u < HS) { fa_out[ob + col + 1u] = v.y; }
    if (col + 2u < HS) { fa_out[ob + col + 2u] = v.z; }
    if (col + 3u < HS) { fa_out[ob + col + 3u] = v.w; }
}
fn fa_put_lse(i : u32, m : f32, l : f32) { fa_lse[i] = (m + log2(l)) * FA_LN2; }

// lane partials (without SG) at row·NL + lane of the reduction area
fn fa_red_put(i : u32, x : f32) { fa_kp[KP_MAIN + i / 4u][i % 4u] = x; }
fn fa_red_get(i : u32) -> f32 { return fa_kp[KP_MAIN + i / 4u][i % 4u]; }

// Index of P[row][4·k4 .. 4·k4+3] in fa_kp: the key's vec4 index XOR the row group's place in
// its warp (a multiple of NL keys, so groups of 4 keys stay whole).
fn fa_pidx(row : u32, k4 : u32) -> u32 {
    let sw = (((row / TR) % (32u / NL)) * NL / 4u) & (BC4 - 1u);
    return row * BC4 + (k4 ^ sw);
}

@compute @workgroup_size(256)
fn attention_forward(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                     @builtin(num_workgroups) nwg : vec3<u32>) {
    let w = flat_wg(wid, nwg);
    let T = fa_p.T;
    if (w >= fa_p.nblk * fa_p.B * fa_p.NH) { return; }
    // the heaviest (last) query blocks of every head go first: the causal triangle is uneven
    let blk = attn_qblock(w, fa_p.B, fa_p.NH, GQ, fa_p.nblk, BR);
    let b = blk.b;
    let q0 = blk.r0;
    let tid = lid.x;
    let rg = tid / NL;
    let kl = tid % NL;
    let row0 = rg * TR;  // first local row of this thread
    let qsw = rg & SWM;

    for (var i = tid; i < BR * HS4; i = i + 256u) {
        let r = i / HS4;
        let t = q0 + r;
        var v = vec4<f32>(0.0);
        if (t < T) { v = fa_q4(b, blk.h, t, i % HS4); }
        fa_q[r * HS4 + ((i % HS4) ^ ((r / TR) & SWM))] = v;
    }

    var m = array<f32, TR>();       // running row max (log2 units), equal in the NL lanes
    var l = array<f32, TR>();       // this lane's part of the row sum
    var o = array<array<vec4<f32>, CPT>, TR>();
    for (var r = 0u; r < TR; r++) { m[r] = FA_NEG; }
    var rkey = array<u32, TR>();    // dropout: the key of each row
    if (DROP) {
        for (var r = 0u; r < TR; r++) { rkey[r] = dropout_key(fa_p.dseed, blk.bh * T + q0 + row0 + r, DROPOUT_ATTN); }
    }

    var rlo = array<u32, TR>();     // each row's first key (rows past T: none masked below)
    for (var r = 0u; r < TR; r++) { rlo[r] = fa_lo(b, min(q0 + row0 + r, T - 1u)); }
    let n_tiles = (min(q0 + BR, T) + BC - 1u) / BC;
    let kt0 = fa_lo(b, q0) / BC;    // tiles before it are masked for every row of the block
    var nd4 = HS4;
    var nk4 = BC4;
    if (!UNROLL) { nd4 = fa_p.hs4; nk4 = fa_p.bc4; }
    // the next tile's K and V wait in registers while the current one is computed (the loads'
    // latency is hidden behind a tile of FMAs instead of stalling every tile)
    var kr = array<vec4<f32>, NKV>();
    var vr = array<vec4<f32>, NKV>();
    fa_fetch_kv(tid, b, blk.g, kt0 * BC, &kr, &vr);
    for (var kt = kt0; kt < n_tiles; kt++) {
        let k0 = kt * BC;
        workgroupBarrier();  // the previous tile's P·V reads are done
        for (var n = 0u; n < NKV; n++) {
            let i = tid + 256u * n;
            if (i < BC * HS4) {
                let r = i / HS4;
                fa_kp[r * HS4 + ((i % HS4) ^ (r & SWM))] = kr[n];
                fa_v[i] = vr[n];
            }
        }
        workgroupBarrier();
        if (kt + 1u < n_tiles) { fa_fetch_kv(tid, b, blk.g, k0 + BC, &kr, &vr); }

        // scores (explicitly zeroed: a var in a loop is not reliably re-zeroed on every driver)
        var s = array<array<f32, KPT>, TR>();
        for (var d4 = 0u; d4 < nd4; d4++) {
            var qv = array<vec4<f32>, TR>();
            for (var r = 0u; r < TR; r++) { qv[r] = fa_q[(row0 + r) * HS4 + (d4 ^ qsw)]; }
            for (var j = 0u; j < KPT; j++) {
                let key = kl + NL * j;
                let kv = fa_kp[key * HS4 + (d4 ^ (key & SWM))];
                for (var r = 0u; r < TR; r++) { s[r][j] = fma_dot4(s[r][j], qv[r], kv); }
            }
        }
        // causal mask and the row maxima
        var mt = array<f32, TR>();
        for (var r = 0u; r < TR; r++) {
            let t = q0 + row0 + r;
            var lm = FA_NEG;
            for (var j = 0u; j < KPT; j++) {
                let key = k0 + kl + NL * j;
                if (attn_sees(key, t, rlo[r]) && key < T) { lm = max(lm, s[r][j]); }
            }
            if (SG) { mt[r] = fa_sg(lm, true); } else { fa_red_put((row0 + r) * NL + kl, lm); }
        }
        workgroupBarrier();  // K reads are done (P overwrites it); the lane maxima are visible
        if (!SG) {
            for (var r = 0u; r < TR; r++) {
                var x = FA_NEG;
                for (var e = 0u; e < NL; e++) { x = max(x, fa_red_get((row0 + r) * NL + e)); }
                mt[r] = x;
            }
        }
        for (var r = 0u; r < TR; r++) {
            let row = row0 + r;
            let t = q0 + row;
            let m_new = max(m[r], mt[r]);
            let alpha = exp2(m[r] - m_new);
            m[r] = m_new;
            l[r] = l[r] * alpha;
            for (var i = 0u; i < CPT; i++) { o[r][i] = o[r][i] * alpha; }
            for (var j = 0u; j < KPT; j++) {
                let kk = kl + NL * j;
                let key = k0 + kk;
                let p = fa_exp(attn_sees(key, t, rlo[r]) && key < T, s[r][j], m_new);
                l[r] = l[r] + p;
                fa_kp[fa_pidx(row, kk / 4u)][kk % 4u] = fa_drop(p, rkey[r], key);
            }
        }
        workgroupBarrier();  // P is complete
        for (var k4 = 0u; k4 < nk4; k4++) {
            var pv = array<vec4<f32>, TR>();
            for (var r = 0u; r < TR; r++) { pv[r] = fa_kp[fa_pidx(row0 + r, k4)]; }
            for (var i = 0u; i < CPT; i++) {
                let c = min(kl + NL * i, HS4 - 1u);  // columns past HS4 compute a copy, never stored
                let v0 = fa_v[(4u * k4) * HS4 + c];
                let v1 = fa_v[(4u * k4 + 1u) * HS4 + c];
                let v2 = fa_v[(4u * k4 + 2u) * HS4 + c];
                let v3 = fa_v[(4u * k4 + 3u) * HS4 + c];
                for (var r = 0u; r < TR; r++) {
                    o[r][i] = fma(vec4<f32>(pv[r].w), v3, fma(vec4<f32>(pv[r].z), v2, fma(vec4<f32>(pv[r].y), v1,
                                 fma(vec4<f32>(pv[r].x), v0, o[r][i]))));
                }
            }
        }
    }

    // row sums: add the NL lanes' parts (the last tile's reads of the lane maxima finished before its
    // P barrier)
    var lt = array<f32, TR>();
    for (var r = 0u; r < TR; r++) {
        if (SG) { lt[r] = fa_sg(l[r], false); } else { fa_red_put((row0 + r) * NL + kl, l[r]); }
    }
    workgroupBarrier();
    for (var r = 0u; r < TR; r++) {
        let t = q0 + row0 + r;
        if (!SG) {
            var x = 0.0;
            for (var e = 0u; e < NL; e++) { x = x + fa_red_get((row0 + r) * NL + e); }
            lt[r] = x;
        }
        if (t >= T) { continue; }
        let inv = 1.0 / lt[r];  // >= 1: the row's max term contributes exp2(0)
        let ob = (b * T + t) * fa_p.C + blk.h * HS;
        for (var i = 0u; i < CPT; i++) {
            let c = kl + NL * i;
            if (c < HS4) { fa_put4(ob, c, o[r][i] * inv); }
        }
        if (kl == 0u) { fa_put_lse(blk.bh * T + t, m[r], lt[r]); }
    }
}

// ------------------------------------------------------------------ register-resident (v=reg)
// attention_forward_reg: the same op laid out for a large GPU's registers (docs/kernels.md#attention_forward).
// A thread owns RR query rows, each split over RL adjacent lanes: lane ln holds the vec4 head
// columns ln + RL·c (c < RC) of the row's q (prescaled by scale·log2e) and of its output
// accumulator in registers. Only the streamed K and V tiles (RB keys) live in workgroup memory,
// 32·RB·HS4 bytes (HS = 128 with 32-key tiles: 32 KiB). Per tile a thread forms its partial
// scores of its rows against every key of the tile, then the RL lanes of a row reduce-scatter
// them (reg_xor butterflies, halving the keys exchanged at each step) so that lane ln ends with
// the whole scores of its KPL = RB/RL own keys ln·KPL + i; the online softmax runs on those (the
// row max by a max butterfly, exp2 once per score, the row sum kept per lane and added over the
// lanes once at the end), and the lanes all-gather the probabilities back (the butterflies in
// reverse) for O += P·V on their columns. Slot i of a lane's score array holds key i ^ (ln·KPL)
// of the tile throughout, which is what makes every exchange a plain xor shuffle of one slot. A
// warp reads RL key rows at a time, the RL lanes different rows at adjacent vec4 columns (all row
// groups the same addresses): no bank conflicts.
// PW (v=reg,pw=1): the probabilities go to the other lanes through workgroup memory instead of
// the all-gather: each lane stores its KPL probabilities of each row, and after a barrier every
// lane reads its rows' RB probabilities as RB/4 vec4 (one address for the RL lanes of a row) and
// walks the tile's V rows in key order. A tile then costs RR·KPL stores, RR·RB/4 loads and a
// barrier instead of RR·(RB - KPL) shuffles, which, like the workgroup-memory loads, go through
// the SM's one shared-memory pipe.
// Host constants: RT threads (64, 128, 256), RL lanes a row (a power of 2, RL <= RB), RR rows a
// thread, RB keys a tile, PF the next tile prefetched into registers, PW above; reg_xor(x, m) the value x
// of lane ^ m (subgroupShuffleXor; RL > 1 only where every subgroup has at least RL lanes),
// fa_rsum(x) its sum over the RL lanes, RL_LOG = log2(RL) and RL_POW2 (fr_at). A workgroup owns
// RBLK = RT/RL·RR rows, row group rg holding rows rg + RT/RL·r.
// The mask, dropout and grouped heads as attention_forward.
const RNG : u32 = RT / RL;                     // row groups
const RBLK : u32 = RNG * RR;                   // query rows of a workgroup
const RC : u32 = (HS4 + RL - 1u) / RL;         // vec4 columns a lane
const RSN : u32 = (RB * HS4 + RT - 1u) / RT;   // K (and V) vec4 a thread stages per tile
const FR_NOROW : u32 = 0xffffffffu;            // lo of a row past T: no key attended
const KPL : u32 = RB / RL;                     // keys of a tile whose scores a lane finishes

// K rows, then V rows [key][d4]; with PW then the tile's probabilities [row of the block][key]
const FR_P0 : u32 = 2u * RB * HS4;
var<workgroup> fr_kv : array<vec4<f32>, FR_P0 + select(0u, RBLK * RB / 4u, PW)>;

// The fr_kv index of lane ln's column group c in the K row of slot i (key i ^ kx), lb = kx·HS4 + ln:
// with RL_POW2 ((i ^ kx)·HS4 + ln = (i·HS4) ^ lb) one xor a slot (i constant once the loops
// unroll) and constant offsets for c and the V rows; else a lane's columns past HS4 read the last
// one (q is 0 there).
fn fr_at(i : u32, kx : u32, ln : u32, lb : u32, c : u32) -> u32 {
    if (RL_POW2) { return ((i * HS4) ^ lb) + RL * c; }
    return (i ^ kx) * HS4 + fr_col(ln, c);
}

// Lane ln's column group c within a head row (the last one for lanes past HS4, where q is 0).
fn fr_col(ln : u32, c : u32) -> u32 { return select(min(ln + RL * c, HS4 - 1u), ln + RL * c, RL_POW2); }

// This thread's share of the K and V rows k0.. of kv head g (element i = tid + RT·n of the tile).
fn fr_fetch(tid : u32, b : u32, g : u32, k0 : u32, kr : ptr<function, array<vec4<f32>, RSN>>,
            vr : ptr<function, array<vec4<f32>, RSN>>) {
    for (var n = 0u; n < RSN; n++) {
        (*kr)[n] = fa_tile4(b, g, k0, tid + RT * n, RB, fa_p.C);
        (*vr)[n] = fa_tile4(b, g, k0, tid + RT * n, RB, fa_p.vc);
    }
}

@compute @workgroup_size(RT)
fn attention_forward_reg(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                         @builtin(num_workgroups) nwg : vec3<u32>) {
    let w = flat_wg(wid, nwg);
    let T = fa_p.T;
    if (w >= fa_p.nblk * fa_p.B * fa_p.NH) { return; }
    let blk = attn_qblock(w, fa_p.B, fa_p.NH, GQ, fa_p.nblk, RBLK);  // the heaviest (last) query blocks first
    let b = blk.b;
    let q0 = blk.r0;
    let tid = lid.x;
    let rg = tid / RL;
    let ln = tid % RL;
    let kx = ln * KPL;  // the lane's keys of a tile: kx .. kx + KPL - 1
    let lb = kx * HS4 + ln;
    var qr = array<array<vec4<f32>, RC>, RR>();
    var o = array<array<vec4<f32>, RC>, RR>();
    var m = array<f32, RR>();    // running row max (log2 units), equal in the RL lanes
    var l = array<f32, RR>();    // running sum of the row's probabilities over the lane's keys
    var rlo = array<u32, RR>();
    var rkey = array<u32, RR>(); // dropout: the key of each row
    for (var r = 0u; r < RR; r++) {
        let t = q0 + rg + RNG * r;
        m[r] = FA_NEG;
        rlo[r] = FR_NOROW;
        if (t < T) {
            for (var c = 0u; c < RC; c++) {
                let c4 = ln + RL * c;
                if (c4 < HS4) { qr[r][c] = fa_q4(b, blk.h, t, c4); }
            }
            rlo[r] = fa_lo(b, t);
            if (DROP) { rkey[r] = dropout_key(fa_p.dseed, blk.bh * T + t, DROPOUT_ATTN); }
        }
    }
    let n_tiles = (min(q0 + RBLK, T) - 1u) / RB + 1u;
    let kt0 = fa_lo(b, q0) / RB;  // tiles before it are masked for every row of the block
    var nb = RB;                  // keys a tile, a constant where UNROLL
    if (!UNROLL) { nb = fa_p.rb; }
    let lo_last = fa_lo(b, min(q0 + RBLK, T) - 1u);  // the largest lo of the block's rows
    // PF: the next tile's K and V wait in registers while the current one is computed (its
    // loads' latency hidden behind the tile's FMAs, for 8·RSN more registers)
    var pk = array<vec4<f32>, RSN>();
    var pv = array<vec4<f32>, RSN>();
    if (PF) { fr_fetch(tid, b, blk.g, kt0 * RB, &pk, &pv); }
    for (var kt = kt0; kt < n_tiles; kt++) {
        let k0 = kt * RB;
        // every key of the tile is attended by every row of the block (rows past T compute
        // values never stored): the softmax skips the mask tests
        let full = k0 + RB <= q0 + 1u && k0 >= lo_last;
        workgroupBarrier();  // the previous tile's reads are done
        if (!PF) { fr_fetch(tid, b, blk.g, k0, &pk, &pv); }
        for (var n = 0u; n < RSN; n++) {
            let i = tid + RT * n;
            if (i < RB * HS4) {
                fr_kv[i] = pk[n];
                fr_kv[RB * HS4 + i] = pv[n];
            }
        }
        workgroupBarrier();
        if (PF && kt + 1u < n_tiles) { fr_fetch(tid, b, blk.g, k0 + RB, &pk, &pv); }
        // partial scores over the lane's columns; slot i is key i ^ kx of the tile (explicitly
        // zeroed: a var in a loop is not reliably re-zeroed on every driver)
        var s = array<array<f32, RB>, RR>();
        for (var i = 0u; i < nb; i++) {
            var kv = array<vec4<f32>, RC>();
            for (var c = 0u; c < RC; c++) { kv[c] = fr_kv[fr_at(i, kx, ln, lb, c)]; }
            for (var r = 0u; r < RR; r++) {
                var x = 0.0;
                for (var c = 0u; c < RC; c++) { x = fma_dot4(x, qr[r][c], kv[c]); }
                s[r][i] = x;
            }
        }
        // reduce-scatter: at step j (lane mask h = RL/2^(j+1)), slots [0, ns) add the partner's
        // [ns, 2ns), the same keys since ns = h·KPL; at the end slots [0, KPL) hold whole scores,
        // of keys kx + i. (Loops of constant trip counts with constant-folded tests, so that
        // the compiler unrolls them and s stays in registers.)
        for (var j = 0u; j < RL_LOG; j++) {
            let h = RL >> (j + 1u);
            for (var i = 0u; i < RB / 2u; i++) {
                if (i < h * KPL) {
                    for (var r = 0u; r < RR; r++) { s[r][i] = s[r][i] + reg_xor(s[r][h * KPL + i], h); }
                }
            }
        }
        // online softmax on the lane's keys: P over s in place
        for (var r = 0u; r < RR; r++) {
            let t = q0 + rg + RNG * r;
            var mt = FA_NEG;
            for (var i = 0u; i < KPL; i++) {
                if (full || attn_sees(k0 + kx + i, t, rlo[r])) { mt = max(mt, s[r][i]); }
            }
            for (var h = 1u; h < RL; h = h * 2u) { mt = max(mt, reg_xor(mt, h)); }  // the same in the RL lanes
            let m_new = max(m[r], mt);
            let alpha = exp2(m[r] - m_new);
            m[r] = m_new;
            l[r] = l[r] * alpha;
            for (var c = 0u; c < RC; c++) { o[r][c] = o[r][c] * alpha; }
            for (var i = 0u; i < KPL; i++) {
                let key = k0 + kx + i;
                let p = fa_exp(full || attn_sees(key, t, rlo[r]), s[r][i], m_new);
                l[r] = l[r] + p;
                s[r][i] = fa_drop(p, rkey[r], key);
            }
        }
        if (PW) {  // the lane's probabilities to workgroup memory, then O += P·V in key order
            for (var r = 0u; r < RR; r++) {
                for (var i = 0u; i < KPL; i++) {
                    let e = (rg + RNG * r) * RB + kx + i;
                    fr_kv[FR_P0 + e / 4u][e % 4u] = s[r][i];
                }
            }
            workgroupBarrier();
            for (var j4 = 0u; j4 < nb / 4u; j4++) {
                var p4 = array<vec4<f32>, RR>();
                for (var r = 0u; r < RR; r++) { p4[r] = fr_kv[FR_P0 + (rg + RNG * r) * (RB / 4u) + j4]; }
                for (var e = 0u; e < 4u; e++) {
                    let vb = RB * HS4 + (j4 * 4u + e) * HS4;
                    var vv = array<vec4<f32>, RC>();
                    for (var c = 0u; c < RC; c++) { vv[c] = fr_kv[vb + fr_col(ln, c)]; }
                    for (var r = 0u; r < RR; r++) {
                        for (var c = 0u; c < RC; c++) { o[r][c] = fma(vec4<f32>(p4[r][e]), vv[c], o[r][c]); }
                    }
                }
            }
            continue;
        }
        // all-gather: at step j (lane mask h = 2^j), slots [ns, 2ns) take the partner's [0, ns),
        // ns = h·KPL
        for (var j = 0u; j < RL_LOG; j++) {
            let h = 1u << j;
            for (var i = 0u; i < RB / 2u; i++) {
                if (i < h * KPL) {
                    for (var r = 0u; r < RR; r++) { s[r][h * KPL + i] = reg_xor(s[r][i], h); }
                }
            }
        }
        for (var i = 0u; i < nb; i++) {
            var vv = array<vec4<f32>, RC>();
            for (var c = 0u; c < RC; c++) { vv[c] = fr_kv[RB * HS4 + fr_at(i, kx, ln, lb, c)]; }
            for (var r = 0u; r < RR; r++) {
                for (var c = 0u; c < RC; c++) { o[r][c] = fma(vec4<f32>(s[r][i]), vv[c], o[r][c]); }
            }
        }
    }
    for (var r = 0u; r < RR; r++) { l[r] = fa_rsum(l[r]); }  // the row sums, in every lane
    for (var r = 0u; r < RR; r++) {
        let t = q0 + rg + RNG * r;
        if (t >= T) { continue; }
        let inv = 1.0 / l[r];  // >= 1: the row's max term contributes exp2(0)
        let ob = (b * T + t) * fa_p.C + blk.h * HS;
        for (var c = 0u; c < RC; c++) {
            let c4 = ln + RL * c;
            if (c4 < HS4) { fa_put4(ob, c4, o[r][c] * inv); }
        }
        if (ln == 0u) { fa_put_lse(blk.bh * T + t, m[r], l[r]); }
    }
}
