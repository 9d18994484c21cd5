// 00_shared.wgsl — helpers prepended to every kernel module (after `enable` directives and
// the host's constants such as HAS_SUBGROUPS). Kernels use workgroup_size 256.

const WG_SIZE : u32 = 256u;

// Linear thread index of a possibly 2-D dispatch: the host splits more than
// maxComputeWorkgroupsPerDimension workgroups into x * y, so n above 65535 * 256 works.
fn flat_id(gid : vec3<u32>, nwg : vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG_SIZE;
}

// Linear workgroup index of a possibly 2-D dispatch (for one-workgroup-per-row kernels).
fn flat_wg(wid : vec3<u32>, nwg : vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

// 0 for NaN and +-Inf, x otherwise. WGSL lets compilers assume floats are finite, so isnan-style
// comparisons may be folded away: test the exponent bits instead.
fn nan_guard(x : f32) -> f32 {
    if ((bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u) { return 0.0; }
    return x;
}

fn is_finite_bits(x : f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

// Workgroup reductions over 256 threads through workgroup memory. Every thread of the
// workgroup must call them (they contain barriers); all threads receive the result.
var<workgroup> wg_red : array<f32, 256>;

fn wg_reduce_sum(v : f32, lid : u32) -> f32 {
    wg_red[lid] = v;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) { wg_red[lid] = wg_red[lid] + wg_red[lid + s]; }
        workgroupBarrier();
    }
    let r = wg_red[0];
    workgroupBarrier();
    return r;
}

fn wg_reduce_max(v : f32, lid : u32) -> f32 {
    wg_red[lid] = v;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) { wg_red[lid] = max(wg_red[lid], wg_red[lid + s]); }
        workgroupBarrier();
    }
    let r = wg_red[0];
    workgroupBarrier();
    return r;
}

// Dropout masks (docs/kernels.md#dropout), the twins of wgt_hash32, wgt_dropout_key and
// wgt_dropout_bits in src/backend/dropout.h: integer operations only (u32 wrap-around), so
// both backends draw the same mask bit for bit. An element is kept when its bits >= the host's
// threshold floor(p·2^32); the host also passes the f32 scale 1/(1 - p).
const DROPOUT_ATTN : u32 = 0xffffffffu;  // third key word of attention's rows

fn hash32(v : u32) -> u32 {  // lowbias32 (C. Wellons): a bijection of u32
    var x = v;
    x = x ^ (x >> 16u);
    x = x * 0x7feb352du;
    x = x ^ (x >> 15u);
    x = x * 0x846ca68bu;
    x = x ^ (x >> 16u);
    return x;
}

fn dropout_key(seed : u32, a : u32, b : u32) -> u32 {
    return hash32(hash32(hash32(seed ^ 0x9e3779b9u) ^ a) ^ b);
}

fn dropout_bits(key : u32, i : u32) -> u32 {
    return hash32(key + i * 0x9e3779b9u);
}

// kept: the dropout bits of element i under key reach the threshold; the multiplier is then the
// host's scale 1/(1 - p), else 0.
fn dropout_kept(key : u32, i : u32, thr : u32) -> bool {
    return dropout_bits(key, i) >= thr;
}

fn dropout_mult(key : u32, i : u32, thr : u32, scale : f32) -> f32 {
    return select(0.0, scale, dropout_kept(key, i, thr));
}

// Attention's mask (docs/kernels.md#attention-mask), shared by 05, 10, 16 and 17: query t attends keys
// [attn_lo, t]. d is t's example's first position (doc_start; read by the caller only when has_doc
// is 1), window the sliding window (0: none). Never above t.
fn attn_lo(has_doc : u32, d : u32, t : u32, window : u32) -> u32 {
    var lo = 0u;
    if (has_doc != 0u) { lo = min(d, t); }
    if (window != 0u && t + 1u > window) { lo = max(lo, t + 1u - window); }
    return lo;
}

// Workgroup w of an attention grid of (block, b, head) with n heads a sequence, the B·n (b, head)
// of one block adjacent: (b, head, block).
fn attn_grid(w : u32, B : u32, n : u32) -> vec3<u32> {
    let bn = B * n;
    return vec3<u32>((w % bn) / n, (w % bn) % n, w / bn);
}

// Query-block workgroup w of nblk blocks of `rows` rows × B × NH heads, the last blocks (the
// longest causal loops) first: sequence b, query head h, its kv head g = h / gq, bh = b·NH + h and
// the block's first row r0.
struct AttnBlock { b : u32, h : u32, g : u32, bh : u32, r0 : u32 };
fn attn_qblock(w : u32, B : u32, NH : u32, gq : u32, nblk : u32, rows : u32) -> AttnBlock {
    let x = attn_grid(w, B, NH);
    return AttnBlock(x.x, x.y, x.y / gq, w % (B * NH), (nblk - 1u - x.z) * rows);
}

// whether query t, whose first key is lo, attends key
fn attn_sees(key : u32, t : u32, lo : u32) -> bool {
    return key <= t && key >= lo;
}

// s + a·b as one FMA chain (s + dot(a, b) would cost a separate add)
fn fma_dot4(s : f32, a : vec4<f32>, b : vec4<f32>) -> f32 {
    return fma(a.w, b.w, fma(a.z, b.z, fma(a.y, b.y, fma(a.x, b.x, s))));
}
