// 05_attention.wgsl — causal multi-head attention forward, flash style (SPEC §3): the T×T
// scores are never stored; each workgroup keeps a running max and sum per query row (online
// softmax) and saves the row log-sum-exp for the backward (10_backward_attention.wgsl).
//
// Layout: qkv[B,T,3C] (q | k | v; head h in columns h·HS..), out[B,T,C], lse[B,NH,T] (natural
// log of the sum of exp of the scaled scores q·k/sqrt(HS) over keys s <= t).
//
// Host constants (prepended as defines): HS (head size), RPT (query rows per thread), BC (keys
// per tile), UNROLL (false on the software rasterizer, see nd4). One workgroup handles BR = 32·RPT query rows of one (b, h); its 256 threads form
// 32 row groups × 8 key lanes. Per key tile:
//   1. K tile -> workgroup memory; each thread scores its RPT rows against keys kl + 8·j;
//   2. per-row max over the 8 lanes through workgroup memory (no subgroup assumptions);
//   3. P = exp2(s - m) -> workgroup memory (transposed, so a thread's rows are adjacent), and the
//      V tile replaces K; each thread adds P·V for its RPT rows and vec4 columns kl + 8·i.
// Q is scaled by scale·log2(e) once when it is staged, so the softmax runs on exp2.
// K rows are stored XOR-swizzled (vec4 slot d ^ (row & 7)) so that the 8 lanes of a row group,
// which read 8 different keys at the same d, hit 8 different bank groups.

const BR : u32 = 32u * RPT;
const KPT : u32 = BC / 8u;                 // keys per thread in a tile
const HS4 : u32 = (HS + 3u) / 4u;          // vec4 per head row (zero padded)
const CPT : u32 = (HS4 + 7u) / 8u;         // output vec4 columns per thread
const SWM : u32 = select(0u, 7u, HS4 % 8u == 0u);
const FA_NEG : f32 = -1.0e30;              // finite "minus infinity": WGSL may assume finite floats
const FA_LOG2E : f32 = 1.4426950408889634;
const FA_LN2 : f32 = 0.6931471805599453;

struct AttnParams {
    B : u32, T : u32, C : u32, NH : u32,
    C3 : u32, nblk : u32, hs4 : u32, p1 : u32,
    scale_log2 : f32, scale : f32, f0 : f32, f1 : f32,
};

@group(0) @binding(0) var<storage, read> fa_qkv : array<f32>;
@group(0) @binding(1) var<storage, read_write> fa_out : array<f32>;
@group(0) @binding(2) var<storage, read_write> fa_lse : array<f32>;
@group(0) @binding(3) var<uniform> fa_p : AttnParams;

var<workgroup> fa_q : array<vec4<f32>, BR * HS4>;
var<workgroup> fa_kv : array<vec4<f32>, BC * HS4>;
var<workgroup> fa_pt : array<f32, BC * BR>;   // P transposed [key][row]; also the row reductions

// 4 consecutive head columns starting at 4·c4 of the row whose head column 0 is at `base`.
fn fa_load4(base : u32, c4 : u32) -> vec4<f32> {
    let c = c4 * 4u;
    if (HS % 4u == 0u) {
        return vec4<f32>(fa_qkv[base + c], fa_qkv[base + c + 1u], fa_qkv[base + c + 2u], fa_qkv[base + c + 3u]);
    }
    var v = vec4<f32>(0.0);
    if (c < HS) { v.x = fa_qkv[base + c]; }
    if (c + 1u < HS) { v.y = fa_qkv[base + c + 1u]; }
    if (c + 2u < HS) { v.z = fa_qkv[base + c + 2u]; }
    if (c + 3u < HS) { v.w = fa_qkv[base + c + 3u]; }
    return v;
}

// Stages rows k0.. of K (part 1) or V (part 2) into fa_kv; rows past T are zero.
fn fa_stage_kv(tid : u32, b : u32, h : u32, k0 : u32, part : u32, swizzle : bool) {
    for (var i = tid; i < BC * HS4; i = i + 256u) {
        let r = i / HS4;
        let c4 = i % HS4;
        let t = k0 + r;
        var v = vec4<f32>(0.0);
        if (t < fa_p.T) { v = fa_load4((b * fa_p.T + t) * fa_p.C3 + part * fa_p.C + h * HS, c4); }
        var slot = c4;
        if (swizzle) { slot = c4 ^ (r & SWM); }
        fa_kv[r * HS4 + slot] = v;
    }
}

@compute @workgroup_size(256)
fn attention_forward(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>,
                     @builtin(num_workgroups) nwg : vec3<u32>) {
    let w = flat_wg(wid, nwg);
    let T = fa_p.T;
    let BNH = fa_p.B * fa_p.NH;
    if (w >= fa_p.nblk * BNH) { return; }
    // the heaviest (last) query blocks of every head go first: the causal triangle is uneven
    let bh = w % BNH;
    let qb = fa_p.nblk - 1u - w / BNH;
    let b = bh / fa_p.NH;
    let h = bh % fa_p.NH;
    let q0 = qb * BR;
    let tid = lid.x;
    let rg = tid / 8u;
    let kl = tid % 8u;
    let row0 = rg * RPT;  // first local row of this thread

    for (var i = tid; i < BR * HS4; i = i + 256u) {
        let r = i / HS4;
        let t = q0 + r;
        var v = vec4<f32>(0.0);
        if (t < T) { v = fa_load4((b * T + t) * fa_p.C3 + h * HS, i % HS4) * fa_p.scale_log2; }
        fa_q[i] = v;
    }

    var m = array<f32, RPT>();       // running row max (log2 units), equal in the 8 lanes
    var l = array<f32, RPT>();       // this lane's part of the row sum
    var o = array<array<vec4<f32>, CPT>, RPT>();
    for (var r = 0u; r < RPT; r++) { m[r] = FA_NEG; }

    let n_tiles = (min(q0 + BR, T) + BC - 1u) / BC;
    let sw = kl & SWM;  // key kl + 8j has (key & 7) == kl
    // the constant trip count lets GPU compilers unroll the score loop; the software rasterizer
    // (UNROLL false) takes it from the uniform, since unrolling costs it seconds of compilation
    var nd4 = HS4;
    if (!UNROLL) { nd4 = fa_p.hs4; }
    for (var kt = 0u; kt < n_tiles; kt++) {
        let k0 = kt * BC;
        workgroupBarrier();  // the previous tile's P·V reads are done
        fa_stage_kv(tid, b, h, k0, 1u, true);
        workgroupBarrier();

        // explicit zeroing: a var inside a loop is not reliably re-zeroed on every driver
        var s = array<array<f32, KPT>, RPT>();
        for (var d4 = 0u; d4 < nd4; d4++) {
            var qv : array<vec4<f32>, RPT>;
            for (var r = 0u; r < RPT; r++) { qv[r] = fa_q[(row0 + r) * HS4 + d4]; }
            for (var j = 0u; j < KPT; j++) {
                let kv = fa_kv[(kl + 8u * j) * HS4 + (d4 ^ sw)];
                for (var r = 0u; r < RPT; r++) { s[r][j] = s[r][j] + dot(qv[r], kv); }
            }
        }
        // causal mask and this lane's max
        for (var r = 0u; r < RPT; r++) {
            let t = q0 + row0 + r;
            var lm = FA_NEG;
            for (var j = 0u; j < KPT; j++) {
                let key = k0 + kl + 8u * j;
                if (key <= t && key < T) { lm = max(lm, s[r][j]); }
            }
            fa_pt[(row0 + r) * 8u + kl] = lm;
        }
        workgroupBarrier();
        var mt : array<f32, RPT>;
        for (var r = 0u; r < RPT; r++) {
            var x = FA_NEG;
            for (var e = 0u; e < 8u; e++) { x = max(x, fa_pt[(row0 + r) * 8u + e]); }
            mt[r] = x;
        }
        workgroupBarrier();  // the maxima are read and K is no longer needed
        for (var r = 0u; r < RPT; r++) {
            let t = q0 + row0 + r;
            let m_new = max(m[r], mt[r]);
            let alpha = exp2(m[r] - m_new);
            m[r] = m_new;
            l[r] = l[r] * alpha;
            for (var i = 0u; i < CPT; i++) { o[r][i] = o[r][i] * alpha; }
            for (var j = 0u; j < KPT; j++) {
                let key = k0 + kl + 8u * j;
                var p = 0.0;
                if (key <= t && key < T) { p = exp2(s[r][j] - m_new); }
                l[r] = l[r] + p;
                fa_pt[(kl + 8u * j) * BR + row0 + r] = p;
            }
        }
        fa_stage_kv(tid, b, h, k0, 2u, false);
        workgroupBarrier();
        let kn = min(BC, T - k0);
        for (var j = 0u; j < kn; j++) {
            var pr : array<f32, RPT>;
            for (var r = 0u; r < RPT; r++) { pr[r] = fa_pt[j * BR + row0 + r]; }
            for (var i = 0u; i < CPT; i++) {
                let c = kl + 8u * i;
                if (c < HS4) {
                    let vv = fa_kv[j * HS4 + c];
                    for (var r = 0u; r < RPT; r++) { o[r][i] = o[r][i] + pr[r] * vv; }
                }
            }
        }
    }

    // row sums: add the 8 lanes' parts
    workgroupBarrier();
    for (var r = 0u; r < RPT; r++) { fa_pt[(row0 + r) * 8u + kl] = l[r]; }
    workgroupBarrier();
    for (var r = 0u; r < RPT; r++) {
        let t = q0 + row0 + r;
        if (t >= T) { continue; }
        var lt = 0.0;
        for (var e = 0u; e < 8u; e++) { lt = lt + fa_pt[(row0 + r) * 8u + e]; }
        let inv = 1.0 / lt;  // lt >= 1: the row's max term contributes exp2(0)
        let ob = (b * T + t) * fa_p.C + h * HS;
        for (var i = 0u; i < CPT; i++) {
            let c = kl + 8u * i;
            if (c >= HS4) { continue; }
            let v = o[r][i] * inv;
            let col = c * 4u;
            if (col < HS) { fa_out[ob + col] = v.x; }
            if (col + 1u < HS) { fa_out[ob + col + 1u] = v.y; }
            if (col + 2u < HS) { fa_out[ob + col + 2u] = v.z; }
            if (col + 3u < HS) { fa_out[ob + col + 3u] = v.w; }
        }
        if (kl == 0u) { fa_lse[bh * T + t] = (m[r] + log2(lt)) * FA_LN2; }
    }
}
