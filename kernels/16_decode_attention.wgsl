// 16_decode_attention.wgsl — decoding with a key/value cache (docs/kernels.md#decode_attention):
// the token embedding at each row's own positions, the append of new keys and values to the
// per-layer caches, and the attention of new queries against everything cached. Row b of a batch
// has pos[b] tokens cached; its T new tokens are at positions p = pos[b] + t (T = 1 while
// generating, the prompt's length in a prefill). C reference: src/backend/cpu/ops_decode_attention.c.
// RoPE (when the tables are bound, opt = 1) is rope_forward's rotation at row p of the
// [maxT, HS] tables: kv_cache_append rotates k as it stores it, decode_attention rotates q as it
// loads it, so qkv is only read. Every tensor is bound as a window from an aligned start; the
// element offsets (*_off) come in the params. A position at or past maxT is skipped (the host
// never asks for one; the C reference aborts).

struct DecParams {
    B : u32, T : u32, NH : u32, NKV : u32,
    HS : u32, maxT : u32, window : u32, opt : u32,       // opt = 1: the optional tables (cos, sin; wpe) are bound
    C : u32, V : u32, W : u32, KV : u32,       // C, V: decode_embedding; W = NH·HS + 2·KV, KV = NKV·HS
    n : u32, group : u32, scale : f32, S : u32,   // S: decode_attention's key splits (1: none)
    o0 : u32, o1 : u32, o2 : u32, o3 : u32,     // element offsets of bindings 0..6
    o4 : u32, o5 : u32, o6 : u32, span : u32,   // span: decode_attention's least keys a split
};

// ---- decode_embedding: out[b,t,c] = wte[tokens[b,t], c] + wpe[p, c]; one thread per element.
// wte may be larger than one binding: the host binds a window of its rows, `window` the first
// of them and V their count, per dispatch; a thread whose token is outside the window leaves its
// element to another dispatch.
@group(0) @binding(0) var<storage, read_write> de_out : array<f32>;
@group(0) @binding(1) var<storage, read> de_tokens : array<i32>;
@group(0) @binding(2) var<storage, read> de_wte : array<f32>;
@group(0) @binding(3) var<storage, read> de_wpe : array<f32>;
@group(0) @binding(4) var<storage, read> de_pos : array<u32>;
@group(0) @binding(5) var<uniform> de_p : DecParams;

@compute @workgroup_size(256)
fn decode_embedding(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= de_p.n) { return; }
    let c = i % de_p.C;
    let bt = i / de_p.C;
    let p = de_pos[de_p.o4 + bt / de_p.T] + bt % de_p.T;
    let tok = de_tokens[de_p.o1 + bt];
    if (p >= de_p.maxT || tok < 0 || u32(tok) < de_p.window || u32(tok) - de_p.window >= de_p.V) { return; }
    var w = 0.0;
    if (de_p.opt == 1u) { w = de_wpe[de_p.o3 + p * de_p.C + c]; }
    de_out[de_p.o0 + i] = de_wte[de_p.o2 + (u32(tok) - de_p.window) * de_p.C + c] + w;
}

// ---- kv_cache_append: one thread per (b, t, kv head g, d < HS) writes kcache[b, p, g, d]
// (rotated) and vcache[b, p, g, d]
@group(0) @binding(0) var<storage, read_write> ka_k : array<f32>;
@group(0) @binding(1) var<storage, read_write> ka_v : array<f32>;
@group(0) @binding(2) var<storage, read> ka_qkv : array<f32>;
@group(0) @binding(3) var<storage, read> ka_cos : array<f32>;
@group(0) @binding(4) var<storage, read> ka_sin : array<f32>;
@group(0) @binding(5) var<storage, read> ka_pos : array<u32>;
@group(0) @binding(6) var<uniform> ka_p : DecParams;

@compute @workgroup_size(256)
fn kv_cache_append(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= ka_p.n) { return; }
    let HS = ka_p.HS;
    let d = i % HS;
    let rest = i / HS;
    let g = rest % ka_p.NKV;
    let bt = rest / ka_p.NKV;
    let b = bt / ka_p.T;
    let p = ka_pos[ka_p.o5 + b] + bt % ka_p.T;
    if (p >= ka_p.maxT) { return; }
    let kr = ka_p.o2 + bt * ka_p.W + ka_p.NH * HS + g * HS;  // this head's k in qkv
    var x = ka_qkv[kr + d];
    if (ka_p.opt == 1u) {
        let H2 = HS / 2u;
        let cb = p * HS + d;
        if (d < H2) {
            x = x * ka_cos[ka_p.o3 + cb] - ka_qkv[kr + d + H2] * ka_sin[ka_p.o4 + cb];
        } else {
            x = x * ka_cos[ka_p.o3 + cb] + ka_qkv[kr + d - H2] * ka_sin[ka_p.o4 + cb];
        }
    }
    let dst = (b * ka_p.maxT + p) * ka_p.KV + g * HS + d;
    ka_k[ka_p.o0 + dst] = x;
    ka_v[ka_p.o1 + dst] = ka_qkv[kr + ka_p.KV + d];
}

// ---- decode_attention: one workgroup per (b, t, query head h) and key split s < S. The 256
// threads score 256 cached keys at a time (thread j: the f32 dot product of q with key
// a + chunk + j), the chunk's maximum and sum of exponentials come from workgroup reductions (an
// online softmax across chunks, as flash attention), and the weighted values of the chunk are
// summed by G = max(1, 256 / HS) groups of HS threads: thread g·HS + d (g < G) accumulates
// dimension d over the chunk's keys g, g + G, g + 2G, ..., and the G partial sums are added in
// group order at the end.
// Split-K (S > 1, when there are too few rows to fill the GPU): the row's keys [lo, p] are cut
// into S ranges of max(span, ceil(len / S)) keys (the last ones may be empty; span is 64 when the
// host chooses S, 1 when a setting forces it, so that short caches split too); workgroup (r, s)
// writes its range's unnormalised sum acc[0..HS), its maximum m and its sum of exponentials l to
// part[(r·S + s)·(HS + 2)] (bound at binding 0 instead of out), and decode_attention_combine
// rescales and adds the S partials: out = Σ_s e^(m_s − M) acc_s / Σ_s e^(m_s − M) l_s, M = max m_s.
@group(0) @binding(0) var<storage, read_write> da_out : array<f32>;
@group(0) @binding(1) var<storage, read> da_qkv : array<f32>;
@group(0) @binding(2) var<storage, read> da_k : array<f32>;
@group(0) @binding(3) var<storage, read> da_v : array<f32>;
@group(0) @binding(4) var<storage, read> da_cos : array<f32>;
@group(0) @binding(5) var<storage, read> da_sin : array<f32>;
@group(0) @binding(6) var<storage, read> da_pos : array<u32>;
@group(0) @binding(7) var<uniform> da_p : DecParams;

var<workgroup> da_q : array<f32, 256>;   // the rotated query

// Element d of the query head at qkv[qb ..) rotated at position p (opt = 1; as kv_cache_append's
// keys), or as it is without tables.
fn da_q_rotated(qb : u32, d : u32, p : u32) -> f32 {
    let x = da_qkv[qb + d];
    if (da_p.opt != 1u) { return x; }
    let H2 = da_p.HS / 2u;
    let cb = p * da_p.HS + d;
    if (d < H2) { return x * da_cos[da_p.o4 + cb] - da_qkv[qb + d + H2] * da_sin[da_p.o5 + cb]; }
    return x * da_cos[da_p.o4 + cb] + da_qkv[qb + d - H2] * da_sin[da_p.o5 + cb];
}
var<workgroup> da_e : array<f32, 256>;   // a chunk's exp(s_j - m)

@compute @workgroup_size(256)
fn decode_attention(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>,
                    @builtin(num_workgroups) nwg : vec3<u32>) {
    let rs = flat_wg(wid, nwg);  // ((b·T + t)·NH + h)·S + s
    let r = rs / da_p.S;
    let split = rs % da_p.S;
    if (r >= da_p.n) { return; }
    let i = lid.x;
    let HS = da_p.HS;
    let h = r % da_p.NH;
    let bt = r / da_p.NH;
    let b = bt / da_p.T;
    let p = da_pos[da_p.o6 + b] + bt % da_p.T;
    if (p >= da_p.maxT) { return; }
    let qb = da_p.o1 + bt * da_p.W + h * HS;
    if (i < HS) { da_q[i] = da_q_rotated(qb, i, p); }
    workgroupBarrier();
    let kvh = h / da_p.group;
    let base = b * da_p.maxT * da_p.KV + kvh * HS;  // key 0 of this kv head in the caches
    let lo = attn_lo(0u, 0u, p, da_p.window);  // (no documents in a cache)
    // this split's keys [a, e) (S = 1: all of [lo, p])
    let len = p + 1u - lo;
    let per = max(min(max(da_p.span, 1u), len), (len + da_p.S - 1u) / da_p.S);
    let a = min(lo + split * per, p + 1u);
    let e = min(a + per, p + 1u);
    let NEG = -3.0e38;
    var m = NEG;    // running maximum of the scores
    var l = 0.0;    // running sum of exp(s - m)
    var acc = 0.0;  // thread g·HS + d (g < G): running sum of exp(s - m)·v[d] over its group's keys
    let G = max(1u, 256u / HS);
    let grp = i / HS;
    let dim = i % HS;
    for (var j0 = a; j0 < e; j0 = j0 + 256u) {
        let j = j0 + i;
        var s = NEG;
        if (j < e) {
            let kr = da_p.o2 + base + j * da_p.KV;
            var dot = 0.0;
            for (var d = 0u; d < HS; d = d + 1u) { dot = dot + da_q[d] * da_k[kr + d]; }
            s = dot * da_p.scale;
        }
        let m_new = max(m, wg_reduce_max(s, i));
        var ex = 0.0;
        if (j < e) { ex = exp(s - m_new); }
        da_e[i] = ex;
        let corr = exp(m - m_new);  // 0 on the first chunk (m = NEG)
        l = l * corr + wg_reduce_sum(ex, i);  // (its barriers also publish da_e)
        if (grp < G) {
            let cnt = min(256u, e - j0);
            let vb = da_p.o3 + base + j0 * da_p.KV + dim;
            var sum = acc * corr;
            for (var jj = grp; jj < cnt; jj = jj + G) { sum = sum + da_e[jj] * da_v[vb + jj * da_p.KV]; }
            acc = sum;
        }
        m = m_new;
        workgroupBarrier();  // da_e is rewritten by the next chunk
    }
    da_e[i] = acc;  // the groups' partial sums (0 past the last group)
    workgroupBarrier();
    if (i < HS) {
        var t = 0.0;
        for (var k = 0u; k < G; k = k + 1u) { t = t + da_e[k * HS + i]; }
        acc = t;
    }
    if (da_p.S == 1u) {
        if (i < HS) { da_out[da_p.o0 + bt * da_p.NH * HS + h * HS + i] = acc / l; }
        return;
    }
    let pb = da_p.o0 + rs * (HS + 2u);  // an empty split writes acc = 0, m = NEG, l = 0
    if (i < HS) { da_out[pb + i] = acc; }
    if (i == 0u) {
        da_out[pb + HS] = m;
        da_out[pb + HS + 1u] = l;
    }
}

// ---- decode_attention_combine: one workgroup per row r = (b·T + t)·NH + h; thread d < HS adds
// the S partials of decode_attention's split-K in split order.
@group(0) @binding(0) var<storage, read_write> dc_out : array<f32>;
@group(0) @binding(1) var<storage, read> dc_part : array<f32>;
@group(0) @binding(2) var<storage, read> dc_pos : array<u32>;
@group(0) @binding(3) var<uniform> dc_p : DecParams;

@compute @workgroup_size(256)
fn decode_attention_combine(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>,
                            @builtin(num_workgroups) nwg : vec3<u32>) {
    let r = flat_wg(wid, nwg);
    let i = lid.x;
    let HS = dc_p.HS;
    if (r >= dc_p.n || i >= HS) { return; }
    let bt = r / dc_p.NH;
    let h = r % dc_p.NH;
    if (dc_pos[dc_p.o2 + bt / dc_p.T] + bt % dc_p.T >= dc_p.maxT) { return; }  // skipped as decode_attention
    let S = dc_p.S;
    let W = HS + 2u;
    let pb = dc_p.o1 + r * S * W;
    var M = -3.0e38;
    for (var s = 0u; s < S; s = s + 1u) { M = max(M, dc_part[pb + s * W + HS]); }
    var num = 0.0;
    var den = 0.0;
    for (var s = 0u; s < S; s = s + 1u) {
        let w = exp(dc_part[pb + s * W + HS] - M);  // 0 for an empty split (m = NEG)
        num = num + w * dc_part[pb + s * W + i];
        den = den + w * dc_part[pb + s * W + HS + 1u];
    }
    dc_out[dc_p.o0 + bt * dc_p.NH * HS + h * HS + i] = num / den;
}

// ---- decode_attention_tiles: decode_attention for many new tokens a sequence (a prefill chunk),
// as flash attention: one workgroup per (b, tile of DT_BQ new tokens, query head h), last tile
// first (the longest causal range). The tile's rotated queries (times the scale) stay in
// workgroup memory; the cached keys and values of its range [lo of the first row, p of the last]
// stream through it DT_BK at a time, each tile read once for DT_BQ rows (decode_attention reads
// the whole range again for every row). Threads: DT_LPR = 256 / DT_BQ lanes a row. Per key tile:
//   scores: lane l of row r the dot products of its DT_KPT keys l, l + DT_LPR, ... (masked
//           outside [lo(p), p]) into dt_s;
//   update: every lane of the row reads the row's DT_BK scores, takes their maximum into its
//           online softmax (m, l) and adds e^(s - m)·v over the tile's keys to its DT_CPT vec4
//           columns l, l + DT_LPR, ... of the output (the lanes of a row compute the same m, l).
// Host constants (wg_ops_decode.c): DT_HS (a multiple of 4), DT_BQ, DT_BK (DT_BK a multiple of
// 256 / DT_BQ). Rows past T or at a position past the cache are not written, as decode_attention.
const DT_HS4 : u32 = DT_HS / 4u;
const DT_LPR : u32 = 256u / DT_BQ;
const DT_KPT : u32 = DT_BK / DT_LPR;
const DT_CPT : u32 = (DT_HS4 + DT_LPR - 1u) / DT_LPR;
const DT_QS : u32 = DT_HS4 + 1u;   // padded rows of q and k: the lanes' rows start on distinct banks
const DT_SS : u32 = DT_BK + 1u;    // padded rows of the scores
const_assert DT_HS % 4u == 0u && DT_BQ * DT_LPR == 256u && DT_KPT >= 1u && DT_KPT * DT_LPR == DT_BK;
const_assert DT_KPT <= 8u && DT_CPT <= 8u;

var<workgroup> dt_q : array<vec4<f32>, DT_BQ * DT_QS>;
var<workgroup> dt_k : array<vec4<f32>, DT_BK * DT_QS>;
var<workgroup> dt_v : array<vec4<f32>, DT_BK * DT_HS4>;
var<workgroup> dt_s : array<f32, DT_BQ * DT_SS>;

@compute @workgroup_size(256)
fn decode_attention_tiles(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_index) i : u32,
                          @builtin(num_workgroups) nwg : vec3<u32>) {
    let nqt = (da_p.T + DT_BQ - 1u) / DT_BQ;
    let w = flat_wg(wid, nwg);
    if (w >= nqt * da_p.NH * da_p.B) { return; }
    let qt = nqt - 1u - w % nqt;
    let h = (w / nqt) % da_p.NH;
    let b = w / (nqt * da_p.NH);
    let HS = DT_HS;
    let t0 = qt * DT_BQ;
    let p0 = da_pos[da_p.o6 + b] + t0;               // the first row's position
    if (p0 >= da_p.maxT) { return; }                 // every row of the tile is past the cache
    let rows = min(DT_BQ, da_p.T - t0);
    let plast = min(p0 + rows, da_p.maxT) - 1u;      // the last position written (and key read)
    let r = i / DT_LPR;
    let ln = i % DT_LPR;
    let p = p0 + r;
    let live = r < rows && p < da_p.maxT;
    let lo = attn_lo(0u, 0u, p, da_p.window);  // (no documents in a cache)
    let kvh = h / da_p.group;
    let base = b * da_p.maxT * da_p.KV + kvh * HS;    // key 0 of this kv head in the caches

    // the tile's queries, rotated at their positions as decode_attention's, times the scale
    for (var e = i; e < DT_BQ * DT_HS; e += 256u) {
        let rr = e / DT_HS;
        let d = e % DT_HS;
        var x = 0.0;
        let pr = p0 + rr;
        if (rr < rows && pr < da_p.maxT) { x = da_q_rotated(da_p.o1 + (b * da_p.T + t0 + rr) * da_p.W + h * HS, d, pr); }
        dt_q[rr * DT_QS + d / 4u][d % 4u] = x * da_p.scale;
    }

    let NEG = -3.0e38;
    var m = NEG;  // the row's running maximum and sum of e^(s - m)
    var l = 0.0;
    var acc : array<vec4<f32>, DT_CPT>;
    for (var c = 0u; c < DT_CPT; c++) { acc[c] = vec4<f32>(0.0); }
    for (var j0 = attn_lo(0u, 0u, p0, da_p.window); j0 <= plast; j0 += DT_BK) {
        for (var e = i; e < DT_BK * DT_HS; e += 256u) {  // the key tile [j0, j0 + DT_BK), zeros past plast
            let jj = e / DT_HS;
            let d = e % DT_HS;
            var kx = 0.0;
            var vx = 0.0;
            if (j0 + jj <= plast) {
                let src = base + (j0 + jj) * da_p.KV + d;
                kx = da_k[da_p.o2 + src];
                vx = da_v[da_p.o3 + src];
            }
            dt_k[jj * DT_QS + d / 4u][d % 4u] = kx;
            dt_v[jj * DT_HS4 + d / 4u][d % 4u] = vx;
        }
        workgroupBarrier();
        var s : array<f32, DT_KPT>;
        for (var k = 0u; k < DT_KPT; k++) { s[k] = 0.0; }
        for (var c = 0u; c < DT_HS4; c++) {
            let q = dt_q[r * DT_QS + c];
            for (var k = 0u; k < DT_KPT; k++) { s[k] += dot(q, dt_k[(ln + k * DT_LPR) * DT_QS + c]); }
        }
        for (var k = 0u; k < DT_KPT; k++) {
            let jj = ln + k * DT_LPR;
            let j = j0 + jj;
            dt_s[r * DT_SS + jj] = select(NEG, s[k], live && j >= lo && j <= p);
        }
        workgroupBarrier();
        var mt = NEG;
        for (var jj = 0u; jj < DT_BK; jj++) { mt = max(mt, dt_s[r * DT_SS + jj]); }
        let m_new = max(m, mt);
        let corr = exp(m - m_new);  // 1 while nothing counted (m = m_new = NEG, l = acc = 0)
        l *= corr;
        for (var c = 0u; c < DT_CPT; c++) { acc[c] *= corr; }
        for (var jj = 0u; jj < DT_BK; jj++) {
            let sj = dt_s[r * DT_SS + jj];
            let ex = select(0.0, exp(sj - m_new), sj > NEG);
            l += ex;
            for (var c = 0u; c < DT_CPT; c++) {
                let col = min(ln + c * DT_LPR, DT_HS4 - 1u);  // (a lane past the last column repeats it, unwritten)
                acc[c] = fma(vec4<f32>(ex), dt_v[jj * DT_HS4 + col], acc[c]);
            }
        }
        m = m_new;
        workgroupBarrier();  // the next tile overwrites dt_k, dt_v and dt_s
    }
    if (!live) { return; }
    let ob = da_p.o0 + ((b * da_p.T + t0 + r) * da_p.NH + h) * HS;
    for (var c = 0u; c < DT_CPT; c++) {
        let col = ln + c * DT_LPR;
        if (col < DT_HS4) {
            let v = acc[c] / l;
            da_out[ob + col * 4u] = v.x;
            da_out[ob + col * 4u + 1u] = v.y;
            da_out[ob + col * 4u + 2u] = v.z;
            da_out[ob + col * 4u + 3u] = v.w;
        }
    }
}
