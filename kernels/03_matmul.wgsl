// 03_matmul.wgsl — the GEMMs of the model: forward `matmul` (out = inp·Wᵀ + b), and the two
// backward ones, `matmul_t` (dinp = dout·W) and `matmul_at` (dW += doutᵀ·inp), plus the split-K
// reduction, the column sum that gives dbias, the transposed copies of the forward's operands
// (matmul_transpose, where the host runs the forward in matmul_at's layout) and the FMA ceiling
// of the benchmark. The GEMMs are nearly all of a training step's FLOPs.
//
// One register-blocked kernel serves the three: C[M,N] (=|+=) A[M,K]·B[K,N] (+ bias[N]). The
// variants differ only in which operand is stored transposed, and that is absorbed when a tile
// is copied into workgroup memory, where both operands are always k-major (As[k][m], Bs[k][n]).
//   matmul    A = inp  [M=N,  K=C ]  k contiguous    B(k,n) = W[n,k]   k contiguous
//   matmul_t  A = dout [M=N,  K=OC]  k contiguous    B(k,n) = W[k,n]   n contiguous
//   matmul_at A(m,k) = dout[k,m]     m contiguous    B(k,n) = inp[k,n] n contiguous
//
// Tiling (sizes come from the host's `defines`, chosen per device and per shape):
//   MM_BM x MM_BN outputs per workgroup, MM_BK deep k-slices, MM_WG threads (64, 128 or 256) as a
//   (MM_BN/MM_TN) x (MM_BM/MM_TM) grid, each thread owning MM_TM x MM_TN outputs. A thread's
//   rows are MM_TM/4 groups of 4 adjacent rows spread MM_BM/(MM_TM/4) apart (likewise columns),
//   so that every workgroup-memory read is one vec4 and the 16 threads of a half-warp read 16
//   consecutive vec4 (no bank conflicts). Workgroup memory is double buffered and the next
//   k-slice is prefetched into registers while the current one is multiplied: one barrier per
//   k-slice. Edges (M, N, K not multiples of the tile) are zero-filled on load and masked on store.
//
// Global loads (per operand, chosen by the host when the operand's leading dimension and offset
// are multiples of 4 and its binding can be rounded up to whole vec4): the operand is bound as
// array<vec4<f32>> and every load is one 16-byte vec4, edges masked by select. An operand that is
// contiguous along m (or n) lands in workgroup memory as that same vec4; one contiguous along k
// (4 k of one row) is scattered as 4 scalars into 4 k-rows. Otherwise the operand is bound as
// array<f32> and each vec4 of the tile is 4 scalar loads.
//
// Grid: x = column blocks, y = row blocks, z = k-slices. With z > 1 (split-K, for outputs of too
// few tiles to fill the GPU and a long K) slice z covers k in [z·ks, (z+1)·ks) and writes its
// partial tile to C + z·zs, a scratch buffer, without bias or accumulation;
// `matmul_splitk_reduce` then sums the slices in a fixed order into the real output: the result
// is deterministic. With MM_SK (stream-K, mm_streamk below) the grid is instead P workgroups
// along x that share the tiles' k-slices evenly, and `matmul_splitk_reduce` sums each tile's
// pieces. Blocks are visited in groups of `group` row blocks, row-fastest inside a group, so
// that neighbouring workgroups share a B tile and a few A tiles stay in L2 (group 1 is plain
// row-major order).
//
// Every operand carries an element offset and a leading dimension in the params, so the host can
// bind a 256-byte-aligned window of a larger matrix (splitting bindings larger than the device
// limit, e.g. the lm_head logits) and write a column block of `out` with a row stride > N.
//
// Host defines: const MM_BM, MM_BN, MM_BK, MM_TM, MM_TN, MM_WG : u32 with TM, TN in {4, 8},
// (BM/TM)*(BN/TN) = MM_WG and BM*BK, BN*BK at most 16*MM_WG (a tile is loaded in 1-4 passes);
// alias MM_C_T = f32 or vec4<f32> (C's binding, when N, ldc and C's offsets are multiples of 4)
// with const MM_C_V4 : bool and the accessors mm_c_get/mm_c_put (element i) and mm_c_get4/mm_c_put4
// (vec4 i; stubs for an f32 binding); const MM_SK : bool, the stream-K grid;
// alias MM_A_T, MM_B_T = f32 or vec4<f32> with const MM_A_V4, MM_B_V4 : bool to match, or for an
// f16 operand (mixed precision: matmul_f16, matmul_t_f16, matmul_at_f16) f16 (native, with
// shader-f16) or u32 (packed pairs) with V4 false, its offset and leading dimension then counted
// in halves; the accessors mm_a_at, mm_a_el, mm_b_at, mm_b_el (below); const MM_PF : bool,
// prefetch the next k-slice into registers during the FMAs (false: load it after them, fewer
// registers a thread so more workgroups fit a core).
// const MM_PAIR : bool, the lanes paired on workgroup-memory reads (mm_thread_xy);
// const MM_WX : u32, the threads' layout over the grid: 0 puts them row-major (a 32-lane warp
// is then 32/TX rows of the grid), 4, 8 or 16 makes each group of 32 consecutive threads a
// (32/WX) x WX block of it (warp tiling: a warp's workgroup-memory reads are WX distinct vec4 of
// B and 32/WX of A, fewer bytes per k than a row-major warp's). Results do not depend on it.
// An f16 operand is widened to f32 as it is loaded: the tiles in workgroup memory, the FMAs and
// the accumulators stay f32.
//
// A frozen weight stored packed (LoRA's --base-precision; the host labels these dispatches
// `matmul_lowbit` and `matmul_t_lowbit`, docs/kernels.md) is a B operand of type u32 whose mm_b_el
// decodes element i: f16 and bf16 pairs (half i&1 of word i/2), or nf4 (nibble i&7 of word i/8, a
// level of the 16-entry table mm_lut, times the block's absmax mm_s[s_off + (i - b_off)/64]; the
// host binds the whole weight, so i - b_off is the element's index in it). const MM_LUT: the
// kernel first fills the workgroup table (mm_lut_init, from the host's levels); MM_PB: the
// uniform's binding, 5 when the absmax takes binding 4.

struct MMParams {
    M : u32, N : u32, K : u32, flags : u32,   // flags: 1 add bias, 2 accumulate into C, 4 edge tiles first
    a_off : u32, b_off : u32, c_off : u32, bias_off : u32,
    lda : u32, ldb : u32, ldc : u32, ks : u32,  // ks: k-range of one grid layer (a multiple of MM_BK);
    zs : u32, p0 : u32, group : u32, s_off : u32,  // stream-K: k-slices a tile, and p0 its workgroups.
};                                                 // zs: C offset a layer; s_off: an nf4 weight's absmax in mm_s

@group(0) @binding(0) var<storage, read_write> mm_c : array<MM_C_T>;
@group(0) @binding(1) var<storage, read> mm_a : array<MM_A_T>;
@group(0) @binding(2) var<storage, read> mm_b : array<MM_B_T>;
@group(0) @binding(3) var<storage, read> mm_bias : array<f32>;
@group(0) @binding(MM_PB) var<uniform> mm_p : MMParams;

const MM_TX : u32 = MM_BN / MM_TN;       // threads along n
const MM_TY : u32 = MM_BM / MM_TM;       // threads along m
const MM_TM4 : u32 = MM_TM / 4u;      // 1 or 2 vec4 of rows a thread
const MM_TN4 : u32 = MM_TN / 4u;      // 1 or 2 vec4 of columns a thread
// k-rows of the tiles in vec4, padded by one vec4 so the transposing stores spread over banks
const MM_AS_V : u32 = MM_BM / 4u + 1u;
const MM_BS_V : u32 = MM_BN / 4u + 1u;
const MM_A_SLOTS : u32 = MM_BM * MM_BK / 4u;   // vec4 per A tile
const MM_B_SLOTS : u32 = MM_BN * MM_BK / 4u;
const MM_A_PASSES : u32 = (MM_A_SLOTS + MM_WG - 1u) / MM_WG;
const MM_B_PASSES : u32 = (MM_B_SLOTS + MM_WG - 1u) / MM_WG;
// every pass's slot exists (the slot tests then fold away)
const MM_A_EXACT : bool = MM_A_SLOTS == MM_A_PASSES * MM_WG;
const MM_B_EXACT : bool = MM_B_SLOTS == MM_B_PASSES * MM_WG;
// The interior fetch (mm_fast_a) for tiles of 8x8 outputs a thread: on the H200 it took their
// GEMMs 4-8 % faster, while the 8x4 tile, compiled to 80 registers, spilled with it and ran 6-13 %
// slower (bench/README.md).
const MM_FAST : bool = MM_TM * MM_TN == 64u;
// elements a load of each operand takes (its index's unit: 4 for a vec4 binding)
const MM_A_LU : u32 = select(1u, 4u, MM_A_V4);
const MM_B_LU : u32 = select(1u, 4u, MM_B_V4);
const MM_IOTA : vec4<u32> = vec4<u32>(0u, 1u, 2u, 3u);
const_assert MM_TX * MM_TY == MM_WG;
const MM_WY : u32 = 32u / max(MM_WX, 1u);  // rows of the grid a 32-lane group covers (MM_WX > 0)
const_assert MM_WX == 0u || ((MM_WX == 4u || MM_WX == 8u || MM_WX == 16u) && MM_TX % max(MM_WX, 1u) == 0u && MM_TY % MM_WY == 0u);
const_assert MM_WG == 64u || MM_WG == 128u || MM_WG == 256u;
const_assert (MM_TM == 4u || MM_TM == 8u) && (MM_TN == 4u || MM_TN == 8u);
const_assert MM_A_PASSES <= 4u && MM_B_PASSES <= 4u;
const_assert MM_BM % 16u == 0u && MM_BN % 16u == 0u && MM_BK % 4u == 0u;
const_assert (!MM_A_V4 && !MM_B_V4) || MM_BK % 8u == 0u;  // the k-contiguous vec4 slots

var<workgroup> mm_as : array<vec4<f32>, 2u * MM_BK * MM_AS_V>;
var<workgroup> mm_bs : array<vec4<f32>, 2u * MM_BK * MM_BS_V>;

// The operand accessors come from the host's defines, one pair per operand type:
//   mm_a_at(i) -> vec4<f32>  vector i of a vec4-bound operand (a stub for the other types)
//   mm_a_el(i) -> f32        element i of a scalar-bound one: mm_a[i] for f32; for f16,
//                            f32(mm_a[i]) of an array<f16> (native) or half i&1 of
//                            unpack2x16float(mm_a[i/2]) of an array<u32> (packed)
// (likewise mm_b_at, mm_b_el), so that the one body compiles for every binding type.

// Element (m, k) of A (scalar binding), 0 outside [0, M) x [0, ke). a_kc: stored k-contiguous.
fn mm_load_a(m : u32, k : u32, ke : u32, a_kc : bool) -> f32 {
    if (m >= mm_p.M || k >= ke) { return 0.0; }
    if (a_kc) { return mm_a_el(mm_p.a_off + m * mm_p.lda + k); }
    return mm_a_el(mm_p.a_off + k * mm_p.lda + m);
}

// Element (k, n) of B (scalar binding), 0 outside. b_kc: B is stored k-contiguous (W[n,k]).
fn mm_load_b(k : u32, n : u32, ke : u32, b_kc : bool) -> f32 {
    if (n >= mm_p.N || k >= ke) { return 0.0; }
    if (b_kc) { return mm_b_el(mm_p.b_off + n * mm_p.ldb + k); }
    return mm_b_el(mm_p.b_off + k * mm_p.ldb + n);
}

// Slot s of a tile = 4 adjacent m (or n) at one k. The slot -> (k, m4) order follows the
// operand's contiguous direction so that a warp's global reads are coalesced.
fn mm_slot_a(s : u32, a_kc : bool) -> vec2<u32> {  // (kk, mm4)
    if (a_kc) { return vec2<u32>(s % MM_BK, s / MM_BK); }
    return vec2<u32>(s / (MM_BM / 4u), s % (MM_BM / 4u));
}
fn mm_slot_b(s : u32, b_kc : bool) -> vec2<u32> {  // (kk, nn4)
    if (b_kc) { return vec2<u32>(s % MM_BK, s / MM_BK); }
    return vec2<u32>(s / (MM_BN / 4u), s % (MM_BN / 4u));
}
// Slot s of a k-contiguous operand read as vec4 = 4 adjacent k of one row. Two adjacent lanes read
// the two k-quads of one row's 8 k (one 32-byte sector), 16 rows a warp; a slice of 16 k takes
// its next 8 k in the next warp's slots. A quarter-warp's 16-byte loads then fall in 4 rows, not
// 8 (on the H200 that took qkv's forward under WGTRAIN_MM_VEC4=1 from 0.90 to 0.78 ms, still
// slower than scalar loads' 0.68), and the scattered scalar stores of a warp hit 32 distinct banks
// (16 rows x 2 k-rows 16 banks apart: a k-row is MM_BM + 4 words, 4 of them 16 banks on).
fn mm_slot_kc4(s : u32) -> vec2<u32> {  // (kk, row)
    let kh = MM_BK / 8u;  // 8-k halves of the slice
    return vec2<u32>((s % 2u) * 4u + ((s / 32u) % kh) * 8u, (s / 2u) % 16u + (s / (32u * kh)) * 16u);
}

// The part of slot s's first element index that does not change from slice to slice (k0 = 0),
// computed once before the k-loop so that a whole-tile load costs an add, not a multiply-add
// chain, per slice (the loads are a fixed share of a slice's instructions, the FMAs the rest).
// (A k-contiguous operand bound as vec4 has its own slot order, mm_slot_kc4: one row a slot.)
fn mm_base_a(s : u32, m0 : u32, a_kc : bool) -> u32 {
    if (MM_A_V4 && a_kc) {
        let q = mm_slot_kc4(s);
        return mm_p.a_off + (m0 + q.y) * mm_p.lda + q.x;
    }
    let q = mm_slot_a(s, a_kc);
    let m = m0 + q.y * 4u;
    return mm_p.a_off + select(q.x * mm_p.lda + m, m * mm_p.lda + q.x, a_kc);
}
fn mm_base_b(s : u32, n0 : u32, b_kc : bool) -> u32 {
    if (MM_B_V4 && b_kc) {
        let q = mm_slot_kc4(s);
        return mm_p.b_off + (n0 + q.y) * mm_p.ldb + q.x;
    }
    let q = mm_slot_b(s, b_kc);
    let n = n0 + q.y * 4u;
    return mm_p.b_off + select(q.x * mm_p.ldb + n, n * mm_p.ldb + q.x, b_kc);
}

// Slot s (base: mm_base_a's) of a slice wholly inside the matrices, for a thread whose slot
// exists: the loads alone. The k-loop takes these for every slice of an interior tile but a
// partial last one, after one test a slice (mm_main), which leaves the slice's compiled code
// without the nested tests and the selects of mm_fetch_a. The element index is base + k0's
// offset, or with MM_SK `ic`, the index carried by the k-loop (mm_main), in load units (vec4
// units for a vec4 binding).
fn mm_fast_a(base : u32, k0 : u32, ic : u32, a_kc : bool) -> vec4<f32> {
    let i = base + select(k0 * mm_p.lda, k0, a_kc);
    if (MM_A_V4) { return mm_a_at(select(i / 4u, ic, MM_SK)); }
    let j = select(i, ic, MM_SK);
    if (a_kc) {
        let l = mm_p.lda;
        return vec4<f32>(mm_a_el(j), mm_a_el(j + l), mm_a_el(j + 2u * l), mm_a_el(j + 3u * l));
    }
    return vec4<f32>(mm_a_el(j), mm_a_el(j + 1u), mm_a_el(j + 2u), mm_a_el(j + 3u));
}
fn mm_fast_b(base : u32, k0 : u32, ic : u32, b_kc : bool) -> vec4<f32> {
    let i = base + select(k0 * mm_p.ldb, k0, b_kc);
    if (MM_B_V4) { return mm_b_at(select(i / 4u, ic, MM_SK)); }
    let j = select(i, ic, MM_SK);
    if (b_kc) {
        let l = mm_p.ldb;
        return vec4<f32>(mm_b_el(j), mm_b_el(j + l), mm_b_el(j + 2u * l), mm_b_el(j + 3u * l));
    }
    return vec4<f32>(mm_b_el(j), mm_b_el(j + 1u), mm_b_el(j + 2u), mm_b_el(j + 3u));
}

// Tiles wholly inside the matrices (nearly all of them) load without any bounds test: the test
// of every element costs issue slots that the FMAs need. inside: the whole BM x BK (BN x BK) tile
// of this k-slice is in range, the same for every thread of the workgroup.
fn mm_fetch_a(s : u32, base : u32, m0 : u32, k0 : u32, ke : u32, a_kc : bool) -> vec4<f32> {
    if (!MM_A_EXACT && s >= MM_A_SLOTS) { return vec4<f32>(0.0); }
    let inside = m0 + MM_BM <= mm_p.M && k0 + MM_BK <= ke;
    if (inside && MM_A_V4) { return mm_a_at((base + select(k0 * mm_p.lda, k0, a_kc)) / 4u); }
    if (inside) {
        let i = base + select(k0 * mm_p.lda, k0, a_kc);
        if (a_kc) {
            let l = mm_p.lda;
            return vec4<f32>(mm_a_el(i), mm_a_el(i + l), mm_a_el(i + 2u * l), mm_a_el(i + 3u * l));
        }
        return vec4<f32>(mm_a_el(i), mm_a_el(i + 1u), mm_a_el(i + 2u), mm_a_el(i + 3u));
    }
    if (MM_A_V4) {
        if (a_kc) {
            let q = mm_slot_kc4(s);
            let m = m0 + q.y;
            let k = k0 + q.x;
            if (m >= mm_p.M || k >= ke) { return vec4<f32>(0.0); }
            let v = mm_a_at((mm_p.a_off + m * mm_p.lda + k) / 4u);
            return select(vec4<f32>(0.0), v, vec4<u32>(k) + MM_IOTA < vec4<u32>(ke));
        }
        let q = mm_slot_a(s, false);
        let m = m0 + q.y * 4u;
        let k = k0 + q.x;
        if (m >= mm_p.M || k >= ke) { return vec4<f32>(0.0); }
        let v = mm_a_at((mm_p.a_off + k * mm_p.lda + m) / 4u);
        return select(vec4<f32>(0.0), v, vec4<u32>(m) + MM_IOTA < vec4<u32>(mm_p.M));
    }
    let q = mm_slot_a(s, a_kc);
    let m = m0 + q.y * 4u;
    let k = k0 + q.x;
    return vec4<f32>(mm_load_a(m, k, ke, a_kc), mm_load_a(m + 1u, k, ke, a_kc), mm_load_a(m + 2u, k, ke, a_kc),
                     mm_load_a(m + 3u, k, ke, a_kc));
}
fn mm_fetch_b(s : u32, base : u32, n0 : u32, k0 : u32, ke : u32, b_kc : bool) -> vec4<f32> {
    if (!MM_B_EXACT && s >= MM_B_SLOTS) { return vec4<f32>(0.0); }
    let inside = n0 + MM_BN <= mm_p.N && k0 + MM_BK <= ke;
    if (inside && MM_B_V4) { return mm_b_at((base + select(k0 * mm_p.ldb, k0, b_kc)) / 4u); }
    if (inside) {
        let i = base + select(k0 * mm_p.ldb, k0, b_kc);
        if (b_kc) {
            let l = mm_p.ldb;
            return vec4<f32>(mm_b_el(i), mm_b_el(i + l), mm_b_el(i + 2u * l), mm_b_el(i + 3u * l));
        }
        return vec4<f32>(mm_b_el(i), mm_b_el(i + 1u), mm_b_el(i + 2u), mm_b_el(i + 3u));
    }
    if (MM_B_V4) {
        if (b_kc) {
            let q = mm_slot_kc4(s);
            let n = n0 + q.y;
            let k = k0 + q.x;
            if (n >= mm_p.N || k >= ke) { return vec4<f32>(0.0); }
            let v = mm_b_at((mm_p.b_off + n * mm_p.ldb + k) / 4u);
            return select(vec4<f32>(0.0), v, vec4<u32>(k) + MM_IOTA < vec4<u32>(ke));
        }
        let q = mm_slot_b(s, false);
        let n = n0 + q.y * 4u;
        let k = k0 + q.x;
        if (n >= mm_p.N || k >= ke) { return vec4<f32>(0.0); }
        let v = mm_b_at((mm_p.b_off + k * mm_p.ldb + n) / 4u);
        return select(vec4<f32>(0.0), v, vec4<u32>(n) + MM_IOTA < vec4<u32>(mm_p.N));
    }
    let q = mm_slot_b(s, b_kc);
    let n = n0 + q.y * 4u;
    let k = k0 + q.x;
    return vec4<f32>(mm_load_b(k, n, ke, b_kc), mm_load_b(k, n + 1u, ke, b_kc), mm_load_b(k, n + 2u, ke, b_kc),
                     mm_load_b(k, n + 3u, ke, b_kc));
}
fn mm_store_a(buf : u32, s : u32, v : vec4<f32>, a_kc : bool) {
    if (!MM_A_EXACT && s >= MM_A_SLOTS) { return; }
    if (MM_A_V4 && a_kc) {  // 4 k of one row: one component in each of 4 k-rows
        let q = mm_slot_kc4(s);
        let i = (buf * MM_BK + q.x) * MM_AS_V + q.y / 4u;
        let c = q.y % 4u;
        mm_as[i][c] = v.x;
        mm_as[i + MM_AS_V][c] = v.y;
        mm_as[i + 2u * MM_AS_V][c] = v.z;
        mm_as[i + 3u * MM_AS_V][c] = v.w;
        return;
    }
    let q = mm_slot_a(s, a_kc);
    mm_as[(buf * MM_BK + q.x) * MM_AS_V + q.y] = v;
}
fn mm_store_b(buf : u32, s : u32, v : vec4<f32>, b_kc : bool) {
    if (!MM_B_EXACT && s >= MM_B_SLOTS) { return; }
    if (MM_B_V4 && b_kc) {
        let q = mm_slot_kc4(s);
        let i = (buf * MM_BK + q.x) * MM_BS_V + q.y / 4u;
        let c = q.y % 4u;
        mm_bs[i][c] = v.x;
        mm_bs[i + MM_BS_V][c] = v.y;
        mm_bs[i + 2u * MM_BS_V][c] = v.z;
        mm_bs[i + 3u * MM_BS_V][c] = v.w;
        return;
    }
    let q = mm_slot_b(s, b_kc);
    mm_bs[(buf * MM_BK + q.x) * MM_BS_V + q.y] = v;
}

// The prefetched slots of both tiles into buffer `buf` (pass p holds slot lid + p·MM_WG).
fn mm_store_tiles(buf : u32, lid : u32, a0 : vec4<f32>, a1 : vec4<f32>, a2 : vec4<f32>, a3 : vec4<f32>,
                  b0 : vec4<f32>, b1 : vec4<f32>, b2 : vec4<f32>, b3 : vec4<f32>, a_kc : bool, b_kc : bool) {
    mm_store_a(buf, lid, a0, a_kc);
    if (MM_A_PASSES > 1u) { mm_store_a(buf, lid + MM_WG, a1, a_kc); }
    if (MM_A_PASSES > 2u) { mm_store_a(buf, lid + 2u * MM_WG, a2, a_kc); }
    if (MM_A_PASSES > 3u) { mm_store_a(buf, lid + 3u * MM_WG, a3, a_kc); }
    mm_store_b(buf, lid, b0, b_kc);
    if (MM_B_PASSES > 1u) { mm_store_b(buf, lid + MM_WG, b1, b_kc); }
    if (MM_B_PASSES > 2u) { mm_store_b(buf, lid + 2u * MM_WG, b2, b_kc); }
    if (MM_B_PASSES > 3u) { mm_store_b(buf, lid + 3u * MM_WG, b3, b_kc); }
}

// One output row of a thread: up to 8 columns in two vec4 (v1 only when MM_TN4 == 2), with the
// bias and the accumulation of the params. cz: the element offset of this grid layer's C. With
// C bound as vec4 (MM_C_V4) each 4 columns are one 16-byte store: a warp then writes whole 32-byte
// sectors, where 4 scalar stores 16 bytes apart write a quarter of each sector 4 times over.
fn mm_store_row(cz : u32, m0 : u32, n0 : u32, g : u32, j : u32, tx : u32, ty : u32, v0 : vec4<f32>, v1 : vec4<f32>) {
    let m = m0 + (g * MM_TY + ty) * 4u + j;
    if (m >= mm_p.M) { return; }
    let row = cz + m * mm_p.ldc;
    let has_bias = (mm_p.flags & 1u) != 0u;
    let accumulate = (mm_p.flags & 2u) != 0u;
    for (var h = 0u; h < MM_TN4; h++) {
        let nb = n0 + (h * MM_TX + tx) * 4u;
        let v = select(v0, v1, h == 1u);
        if (MM_C_V4) {  // N, ldc and the offsets multiples of 4: the 4 columns are all in or all out
            if (nb >= mm_p.N) { continue; }
            var r = v;
            if (has_bias) {
                let bi = mm_p.bias_off + nb;
                r += vec4<f32>(mm_bias[bi], mm_bias[bi + 1u], mm_bias[bi + 2u], mm_bias[bi + 3u]);
            }
            if (accumulate) { r += mm_c_get4((row + nb) / 4u); }
            mm_c_put4((row + nb) / 4u, r);
            continue;
        }
        for (var q = 0u; q < 4u; q++) {
            let n = nb + q;
            if (n >= mm_p.N) { break; }
            var r = v[q];
            if (has_bias) { r += mm_bias[mm_p.bias_off + n]; }
            if (accumulate) { r += mm_c_get(row + n); }
            mm_c_put(row + n, r);
        }
    }
}

// (tx, ty): the thread's place in the (MM_TX x MM_TY) grid of the tile (see MM_WX).
// MM_PAIR first rotates the lane index (bits 0-4 of lid) right by one, so that lane bit 0 picks
// the row of the grid and bit 1 the column (for every layout whose 32-lane group spans at least 2
// rows and 2 columns): lanes i and i^1 then read the same vec4 of B each k-step, and lanes i and
// i^2 the same vec4 of A. NVIDIA's workgroup memory returns 128 bytes a cycle, so a warp's 16-byte
// load takes 4 cycles, and 2 when lanes pair up like that (row-major lanes pair up on A alone).
fn mm_thread_xy(lid0 : u32) -> vec2<u32> {
    var lid = lid0;
    if (MM_PAIR) { lid = (lid0 & ~31u) | ((lid0 & 31u) >> 1u) | ((lid0 & 1u) << 4u); }
    if (MM_WX == 0u) { return vec2<u32>(lid % MM_TX, lid / MM_TX); }
    let lane = lid % 32u;
    let w = lid / 32u;
    let wx = max(MM_WX, 1u);
    let wpx = MM_TX / wx;  // 32-lane groups along n
    return vec2<u32>((w % wpx) * wx + lane % wx, (w / wpx) * MM_WY + lane / wx);
}

// (column block, row block) of this workgroup: `group` row blocks at a time, rows fastest.
fn mm_tile_of(wid : vec3<u32>, nwg : vec3<u32>) -> vec2<u32> {
    let g = mm_p.group;
    if (g <= 1u) { return wid.xy; }
    let t = wid.y * nwg.x + wid.x;
    let per = g * nwg.x;             // workgroups in one group of row blocks
    let first = (t / per) * g;       // its first row block
    let gs = min(g, nwg.y - first);  // the last group may be shorter
    let r = t - (t / per) * per;
    return vec2<u32>(r / gs, first + r % gs);
}

// A thread's accumulators: 16 named vec4 (row r, column half h: c<r><h>) rather than an array,
// so that every register index is a literal. Rows 4-7 are used when MM_TM4 == 2, halves 1 when
// MM_TN4 == 2: constant conditions, folded away for the 4-wide shapes.
struct MMAcc {
    c00 : vec4<f32>, c01 : vec4<f32>, c10 : vec4<f32>, c11 : vec4<f32>,
    c20 : vec4<f32>, c21 : vec4<f32>, c30 : vec4<f32>, c31 : vec4<f32>,
    c40 : vec4<f32>, c41 : vec4<f32>, c50 : vec4<f32>, c51 : vec4<f32>,
    c60 : vec4<f32>, c61 : vec4<f32>, c70 : vec4<f32>, c71 : vec4<f32>,
};

// One k of the tiles in workgroup memory into the accumulators: the thread's A rows at ai (and
// ai + MM_TY), its B columns at bi (and bi + MM_TX), the 8x8 update written out.
fn mm_k_step(c : ptr<function, MMAcc>, ai : u32, bi : u32) {
    let a0 = mm_as[ai];
    let b0 = mm_bs[bi];
    (*c).c00 = fma(vec4<f32>(a0.x), b0, (*c).c00);
    (*c).c10 = fma(vec4<f32>(a0.y), b0, (*c).c10);
    (*c).c20 = fma(vec4<f32>(a0.z), b0, (*c).c20);
    (*c).c30 = fma(vec4<f32>(a0.w), b0, (*c).c30);
    if (MM_TN4 == 2u) {
        let b1 = mm_bs[bi + MM_TX];
        (*c).c01 = fma(vec4<f32>(a0.x), b1, (*c).c01);
        (*c).c11 = fma(vec4<f32>(a0.y), b1, (*c).c11);
        (*c).c21 = fma(vec4<f32>(a0.z), b1, (*c).c21);
        (*c).c31 = fma(vec4<f32>(a0.w), b1, (*c).c31);
        if (MM_TM4 == 2u) {
            let a1 = mm_as[ai + MM_TY];
            (*c).c40 = fma(vec4<f32>(a1.x), b0, (*c).c40);
            (*c).c50 = fma(vec4<f32>(a1.y), b0, (*c).c50);
            (*c).c60 = fma(vec4<f32>(a1.z), b0, (*c).c60);
            (*c).c70 = fma(vec4<f32>(a1.w), b0, (*c).c70);
            (*c).c41 = fma(vec4<f32>(a1.x), b1, (*c).c41);
            (*c).c51 = fma(vec4<f32>(a1.y), b1, (*c).c51);
            (*c).c61 = fma(vec4<f32>(a1.z), b1, (*c).c61);
            (*c).c71 = fma(vec4<f32>(a1.w), b1, (*c).c71);
        }
    } else if (MM_TM4 == 2u) {
        let a1 = mm_as[ai + MM_TY];
        (*c).c40 = fma(vec4<f32>(a1.x), b0, (*c).c40);
        (*c).c50 = fma(vec4<f32>(a1.y), b0, (*c).c50);
        (*c).c60 = fma(vec4<f32>(a1.z), b0, (*c).c60);
        (*c).c70 = fma(vec4<f32>(a1.w), b0, (*c).c70);
    }
}

// The k-loop over a slice runs 8 k a trip, written out, so that slices of 4 or 8 are straight-line
// code: NVIDIA's compiler declined to unroll a loop of 8 steps of 8x8 outputs a thread (and
// rolled a loop of 4 written-out steps back into single steps), which left a loop of 64 FMAs
// with register copies at every trip (docs/kernels.md#the-gemm-kernel).
// One tile (column block tile.x, row block tile.y) over the k-range [kb, ke), written to C at
// element offset cz (the output, or a layer of split-K's or stream-K's partials).
fn mm_main(lid : u32, tile : vec2<u32>, kb : u32, ke : u32, cz : u32, a_kc : bool, b_kc : bool) {
    let txy = mm_thread_xy(lid);
    let tx = txy.x;
    let ty = txy.y;
    let n0 = tile.x * MM_BN;
    let m0 = tile.y * MM_BM;
    let ntiles = select(0u, (ke - kb + MM_BK - 1u) / MM_BK, ke > kb);
    let interior = m0 + MM_BM <= mm_p.M && n0 + MM_BN <= mm_p.N;  // the same for the whole workgroup
    let z = vec4<f32>(0.0);
    var acc = MMAcc(z, z, z, z, z, z, z, z, z, z, z, z, z, z, z, z);
    // prefetch registers: one vec4 per pass of each tile (at most 4; unused ones fold away)
    var ra0 = z; var ra1 = z; var ra2 = z; var ra3 = z; var rb0 = z; var rb1 = z; var rb2 = z; var rb3 = z;
    if (MM_LUT) {  // an nf4 weight: its levels into workgroup memory before the first decode
        mm_lut_init(lid);
        workgroupBarrier();
    }

    // first k-slice straight into buffer 0
    const W = MM_WG;
    let pa0 = mm_base_a(lid, m0, a_kc);
    let pa1 = mm_base_a(lid + W, m0, a_kc);
    let pa2 = mm_base_a(lid + 2u * W, m0, a_kc);
    let pa3 = mm_base_a(lid + 3u * W, m0, a_kc);
    let pb0 = mm_base_b(lid, n0, b_kc);
    let pb1 = mm_base_b(lid + W, n0, b_kc);
    let pb2 = mm_base_b(lid + 2u * W, n0, b_kc);
    let pb3 = mm_base_b(lid + 3u * W, n0, b_kc);
    ra0 = mm_fetch_a(lid, pa0, m0, kb, ke, a_kc);
    if (MM_A_PASSES > 1u) { ra1 = mm_fetch_a(lid + W, pa1, m0, kb, ke, a_kc); }
    if (MM_A_PASSES > 2u) { ra2 = mm_fetch_a(lid + 2u * W, pa2, m0, kb, ke, a_kc); }
    if (MM_A_PASSES > 3u) { ra3 = mm_fetch_a(lid + 3u * W, pa3, m0, kb, ke, a_kc); }
    rb0 = mm_fetch_b(lid, pb0, n0, kb, ke, b_kc);
    if (MM_B_PASSES > 1u) { rb1 = mm_fetch_b(lid + W, pb1, n0, kb, ke, b_kc); }
    if (MM_B_PASSES > 2u) { rb2 = mm_fetch_b(lid + 2u * W, pb2, n0, kb, ke, b_kc); }
    if (MM_B_PASSES > 3u) { rb3 = mm_fetch_b(lid + 3u * W, pb3, n0, kb, ke, b_kc); }
    mm_store_tiles(0u, lid, ra0, ra1, ra2, ra3, rb0, rb1, rb2, rb3, a_kc, b_kc);
    workgroupBarrier();

    // Slices t < fast_end fetch slice t + 1 through the interior fetch: those of an interior tile
    // whose next slice lies wholly inside K (kb + (t + 2)·MM_BK <= ke), decided once a tile: a slice
    // then tests one bound instead of the four terms (bench/README.md, "The interior fetch's test
    // once a tile").
    let nfull = select(0u, (ke - kb) / MM_BK, ke > kb);
    // Stream-K's pipelines (MM_SK) carry pass 0's load index of the fetched slice from slice to
    // slice (ia, ib: one add a slice; the other passes' lie a fixed distance from it), the others
    // compute it from the slice's k: on the H200 the carried index took stream-K's matmul_t 2 %
    // faster and the direct GEMMs 1-29 % slower (bench/README.md, "The load index carried").
    let sa = select(MM_BK * mm_p.lda, MM_BK, a_kc) / MM_A_LU;
    let sb = select(MM_BK * mm_p.ldb, MM_BK, b_kc) / MM_B_LU;
    var ia = (pa0 + select(kb * mm_p.lda, kb, a_kc)) / MM_A_LU;
    var ib = (pb0 + select(kb * mm_p.ldb, kb, b_kc)) / MM_B_LU;
    let da1 = (pa1 - pa0) / MM_A_LU;
    let da2 = (pa2 - pa0) / MM_A_LU;
    let da3 = (pa3 - pa0) / MM_A_LU;
    let db1 = (pb1 - pb0) / MM_B_LU;
    let db2 = (pb2 - pb0) / MM_B_LU;
    let db3 = (pb3 - pb0) / MM_B_LU;
    let fast_end = select(0u, nfull - 1u, MM_FAST && MM_PF && interior && nfull >= 1u);
    for (var t = 0u; t < ntiles; t++) {
        let buf = t & 1u;
        let more = t + 1u < ntiles;
        if (t < fast_end) {  // the next slice, inside
            let k1 = kb + (t + 1u) * MM_BK;
            if (MM_SK) { ia += sa; ib += sb; }
            if (MM_A_EXACT || lid < MM_A_SLOTS) { ra0 = mm_fast_a(pa0, k1, ia, a_kc); }
            if (MM_A_PASSES > 1u && (MM_A_EXACT || lid + W < MM_A_SLOTS)) { ra1 = mm_fast_a(pa1, k1, ia + da1, a_kc); }
            if (MM_A_PASSES > 2u && (MM_A_EXACT || lid + 2u * W < MM_A_SLOTS)) { ra2 = mm_fast_a(pa2, k1, ia + da2, a_kc); }
            if (MM_A_PASSES > 3u && (MM_A_EXACT || lid + 3u * W < MM_A_SLOTS)) { ra3 = mm_fast_a(pa3, k1, ia + da3, a_kc); }
            if (MM_B_EXACT || lid < MM_B_SLOTS) { rb0 = mm_fast_b(pb0, k1, ib, b_kc); }
            if (MM_B_PASSES > 1u && (MM_B_EXACT || lid + W < MM_B_SLOTS)) { rb1 = mm_fast_b(pb1, k1, ib + db1, b_kc); }
            if (MM_B_PASSES > 2u && (MM_B_EXACT || lid + 2u * W < MM_B_SLOTS)) { rb2 = mm_fast_b(pb2, k1, ib + db2, b_kc); }
            if (MM_B_PASSES > 3u && (MM_B_EXACT || lid + 3u * W < MM_B_SLOTS)) { rb3 = mm_fast_b(pb3, k1, ib + db3, b_kc); }
        } else if (more && MM_PF) {  // prefetch the next slice; its latency hides behind the FMAs below
            let k1 = kb + (t + 1u) * MM_BK;
            ra0 = mm_fetch_a(lid, pa0, m0, k1, ke, a_kc);
            if (MM_A_PASSES > 1u) { ra1 = mm_fetch_a(lid + W, pa1, m0, k1, ke, a_kc); }
            if (MM_A_PASSES > 2u) { ra2 = mm_fetch_a(lid + 2u * W, pa2, m0, k1, ke, a_kc); }
            if (MM_A_PASSES > 3u) { ra3 = mm_fetch_a(lid + 3u * W, pa3, m0, k1, ke, a_kc); }
            rb0 = mm_fetch_b(lid, pb0, n0, k1, ke, b_kc);
            if (MM_B_PASSES > 1u) { rb1 = mm_fetch_b(lid + W, pb1, n0, k1, ke, b_kc); }
            if (MM_B_PASSES > 2u) { rb2 = mm_fetch_b(lid + 2u * W, pb2, n0, k1, ke, b_kc); }
            if (MM_B_PASSES > 3u) { rb3 = mm_fetch_b(lid + 3u * W, pb3, n0, k1, ke, b_kc); }
        }
        var ai = buf * MM_BK * MM_AS_V + ty;
        var bi = buf * MM_BK * MM_BS_V + tx;
        for (var kk = 0u; kk < MM_BK; kk += 8u) {  // one trip for slices of 4 or 8
            mm_k_step(&acc, ai, bi);
            mm_k_step(&acc, ai + MM_AS_V, bi + MM_BS_V);
            mm_k_step(&acc, ai + 2u * MM_AS_V, bi + 2u * MM_BS_V);
            mm_k_step(&acc, ai + 3u * MM_AS_V, bi + 3u * MM_BS_V);
            if (MM_BK >= 8u) {
                mm_k_step(&acc, ai + 4u * MM_AS_V, bi + 4u * MM_BS_V);
                mm_k_step(&acc, ai + 5u * MM_AS_V, bi + 5u * MM_BS_V);
                mm_k_step(&acc, ai + 6u * MM_AS_V, bi + 6u * MM_BS_V);
                mm_k_step(&acc, ai + 7u * MM_AS_V, bi + 7u * MM_BS_V);
            }
            ai += 8u * MM_AS_V;
            bi += 8u * MM_BS_V;
        }
        if (more) {
            if (!MM_PF) {  // no prefetch registers: load now, other workgroups hide the latency
                let k1 = kb + (t + 1u) * MM_BK;
                ra0 = mm_fetch_a(lid, pa0, m0, k1, ke, a_kc);
                if (MM_A_PASSES > 1u) { ra1 = mm_fetch_a(lid + W, pa1, m0, k1, ke, a_kc); }
                if (MM_A_PASSES > 2u) { ra2 = mm_fetch_a(lid + 2u * W, pa2, m0, k1, ke, a_kc); }
                if (MM_A_PASSES > 3u) { ra3 = mm_fetch_a(lid + 3u * W, pa3, m0, k1, ke, a_kc); }
                rb0 = mm_fetch_b(lid, pb0, n0, k1, ke, b_kc);
                if (MM_B_PASSES > 1u) { rb1 = mm_fetch_b(lid + W, pb1, n0, k1, ke, b_kc); }
                if (MM_B_PASSES > 2u) { rb2 = mm_fetch_b(lid + 2u * W, pb2, n0, k1, ke, b_kc); }
                if (MM_B_PASSES > 3u) { rb3 = mm_fetch_b(lid + 3u * W, pb3, n0, k1, ke, b_kc); }
            }
            // the other buffer was last read in iteration t-1, which every thread has left
            mm_store_tiles(buf ^ 1u, lid, ra0, ra1, ra2, ra3, rb0, rb1, rb2, rb3, a_kc, b_kc);
        }
        workgroupBarrier();
    }

    mm_store_row(cz, m0, n0, 0u, 0u, tx, ty, acc.c00, acc.c01);
    mm_store_row(cz, m0, n0, 0u, 1u, tx, ty, acc.c10, acc.c11);
    mm_store_row(cz, m0, n0, 0u, 2u, tx, ty, acc.c20, acc.c21);
    mm_store_row(cz, m0, n0, 0u, 3u, tx, ty, acc.c30, acc.c31);
    if (MM_TM4 == 2u) {
        mm_store_row(cz, m0, n0, 1u, 0u, tx, ty, acc.c40, acc.c41);
        mm_store_row(cz, m0, n0, 1u, 1u, tx, ty, acc.c50, acc.c51);
        mm_store_row(cz, m0, n0, 1u, 2u, tx, ty, acc.c60, acc.c61);
        mm_store_row(cz, m0, n0, 1u, 3u, tx, ty, acc.c70, acc.c71);
    }
}

// Stream-K (MM_SK): the grid is P = mm_p.p0 workgroups along x, and the U = tiles x ns units of
// work (ns = mm_p.ks k-slices of MM_BK a tile, tiles in mm_tile_of's order, k fastest) are dealt
// out evenly: workgroup w takes units [w·U/P, (w+1)·U/P), which cover pieces of one tile or of a
// few consecutive ones. Every piece is a partial tile: the j-th workgroup of tile t (j = w -
// mm_sk_owner(t·ns)) writes it to layer j of the partials (C + j·zs, no bias, no accumulation),
// and matmul_splitk_reduce (P > 0) adds a tile's layers in order j = 0, 1, ... into the output. Each
// workgroup does the same work (to one unit), so no wave is left partial, and a tile is cut into
// only as many pieces as workgroups share it, where split-K cuts every tile into S slices. The
// host keeps P·U < 2^32.
fn mm_sk_owner(u : u32, P : u32, U : u32) -> u32 {  // the last workgroup whose range starts at or before u
    return ((u + 1u) * P - 1u) / U;
}

fn mm_streamk(lid : u32, wid : vec3<u32>, a_kc : bool, b_kc : bool) {
    let P = mm_p.p0;
    let ns = mm_p.ks;
    let ntx = (mm_p.N + MM_BN - 1u) / MM_BN;
    let nty = (mm_p.M + MM_BM - 1u) / MM_BM;
    let U = ntx * nty * ns;
    let w = wid.x;
    let u1 = (w + 1u) * U / P;
    var u = w * U / P;
    loop {
        if (u >= u1) { break; }
        let t = u / ns;
        let s0 = u - t * ns;
        let s1 = min(ns, s0 + (u1 - u));
        let j = w - mm_sk_owner(t * ns, P, U);
        let tile = mm_tile_of(vec3<u32>(t % ntx, t / ntx, 0u), vec3<u32>(ntx, nty, 1u));
        mm_main(lid, tile, s0 * MM_BK, min(mm_p.K, s1 * MM_BK), mm_p.c_off + j * mm_p.zs, a_kc, b_kc);
        u += s1 - s0;
    }
}

// The grid's workgroup: its tile and k-range (wid.z: split-K's layer), or stream-K's pieces.
fn mm_entry(lid : u32, wid : vec3<u32>, nwg : vec3<u32>, a_kc : bool, b_kc : bool) {
    if (MM_SK) {
        mm_streamk(lid, wid, a_kc, b_kc);
        return;
    }
    let kb = wid.z * mm_p.ks;  // this layer's k-range [kb, ke)
    // flags & 4: the tiles in reverse order, the edge tiles (last row and column blocks) first
    let rev = (mm_p.flags & 4u) != 0u;
    let w = select(wid, vec3<u32>(nwg.x - 1u - wid.x, nwg.y - 1u - wid.y, wid.z), rev);
    mm_main(lid, mm_tile_of(w, nwg), kb, min(mm_p.K, kb + mm_p.ks), mm_p.c_off + wid.z * mm_p.zs, a_kc, b_kc);
}

@compute @workgroup_size(MM_WG)
fn matmul(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
          @builtin(num_workgroups) nwg : vec3<u32>) {
    mm_entry(lid, wid, nwg, true, true);
}

@compute @workgroup_size(MM_WG)
fn matmul_t(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
            @builtin(num_workgroups) nwg : vec3<u32>) {
    mm_entry(lid, wid, nwg, true, false);
}

@compute @workgroup_size(MM_WG)
fn matmul_at(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
             @builtin(num_workgroups) nwg : vec3<u32>) {
    mm_entry(lid, wid, nwg, false, false);
}

// The second stage of split-K and of stream-K: C[m, n] (=|+=) Σ_z part[z·zs + m·N + n] (+ bias[n]),
// the layers added in order z = 0, 1, ... (deterministic); one thread an element, a 2-D grid
// above 65535 workgroups. Flags as in MMParams. The layers of an element: split-K's S slices
// (P = 0), or (P > 0, stream-K with S = ns k-slices a tile, bm x bn tiles in raster groups of
// `group`, mm_streamk) as many as workgroups shared its tile.
struct SKParams {
    M : u32, N : u32, S : u32, flags : u32,
    ldc : u32, c_off : u32, bias_off : u32, zs : u32,
    P : u32, bm : u32, bn : u32, group : u32,
};

@group(0) @binding(0) var<storage, read_write> sk_c : array<f32>;
@group(0) @binding(1) var<storage, read> sk_part : array<f32>;
@group(0) @binding(2) var<storage, read> sk_bias : array<f32>;
@group(0) @binding(3) var<uniform> sk_p : SKParams;

// The layers holding element (m, n)'s partial sums. For stream-K: the tile's index t in
// mm_tile_of's order (its inverse), then the workgroups whose ranges meet [t·ns, (t+1)·ns).
fn sk_layers(m : u32, n : u32) -> u32 {
    if (sk_p.P == 0u) { return sk_p.S; }
    let ntx = (sk_p.N + sk_p.bn - 1u) / sk_p.bn;
    let nty = (sk_p.M + sk_p.bm - 1u) / sk_p.bm;
    let bx = n / sk_p.bn;
    let by = m / sk_p.bm;
    var t = by * ntx + bx;
    let g = sk_p.group;
    if (g > 1u) {
        let first = (by / g) * g;
        let gs = min(g, nty - first);
        t = first * ntx + bx * gs + (by - first);
    }
    let ns = sk_p.S;
    let U = ntx * nty * ns;
    let u = t * ns;
    return mm_sk_owner(u + ns - 1u, sk_p.P, U) - mm_sk_owner(u, sk_p.P, U) + 1u;
}

@compute @workgroup_size(256)
fn matmul_splitk_reduce(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= sk_p.M * sk_p.N) { return; }
    let m = i / sk_p.N;
    let n = i - m * sk_p.N;
    let nl = sk_layers(m, n);
    var s = 0.0;
    for (var z = 0u; z < nl; z++) { s += sk_part[z * sk_p.zs + i]; }
    if ((sk_p.flags & 1u) != 0u) { s += sk_bias[sk_p.bias_off + n]; }
    let ci = sk_p.c_off + m * sk_p.ldc + n;
    if ((sk_p.flags & 2u) != 0u) { s += sk_c[ci]; }
    sk_c[ci] = s;
}

// The same sum 4 columns a thread, for outputs whose N, ldc and offsets (c_off, bias_off, zs) are
// multiples of 4, every binding then read as vec4: the same additions in the same order, so the
// same bits, in a quarter of the loads (a GPT-2 124M step runs 85 of these reductions).
@group(0) @binding(0) var<storage, read_write> sk4_c : array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> sk4_part : array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> sk4_bias : array<vec4<f32>>;

@compute @workgroup_size(256)
fn matmul_splitk_reduce4(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);  // vec4 index in the M x N/4 output
    let n4 = sk_p.N / 4u;
    if (i >= sk_p.M * n4) { return; }
    let m = i / n4;
    let n = i - m * n4;
    let nl = sk_layers(m, n * 4u);
    let zs4 = sk_p.zs / 4u;
    var s = vec4<f32>(0.0);
    for (var z = 0u; z < nl; z++) { s += sk4_part[z * zs4 + i]; }
    if ((sk_p.flags & 1u) != 0u) { s += sk4_bias[sk_p.bias_off / 4u + n]; }
    let ci = sk_p.c_off / 4u + m * (sk_p.ldc / 4u) + n;
    if ((sk_p.flags & 2u) != 0u) { s += sk4_c[ci]; }
    sk4_c[ci] = s;
}

// dbias[n] += Σ_r x[r, n] for a column block (matmul_at's dbias): the workgroup owns 8
// columns, its 256 threads are 32 row slices × 8 columns (a warp reads 4 rows × 32 contiguous
// bytes), and the 32 slice partials are summed in a fixed order: deterministic, no atomics.
struct ColSumParams { R : u32, N : u32, ld : u32, x_off : u32, out_off : u32, p0 : u32, p1 : u32, p2 : u32 };

@group(0) @binding(0) var<storage, read_write> cs_out : array<f32>;
@group(0) @binding(1) var<storage, read> cs_x : array<f32>;
@group(0) @binding(2) var<uniform> cs_p : ColSumParams;

var<workgroup> cs_part : array<f32, 256>;

@compute @workgroup_size(256)
fn matmul_at_dbias(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                   @builtin(num_workgroups) nwg : vec3<u32>) {
    let col = lid % 8u;
    let slice = lid / 8u;
    let n = flat_wg(wid, nwg) * 8u + col;
    var s = 0.0;
    if (n < cs_p.N) {
        for (var r = slice; r < cs_p.R; r += 32u) { s += cs_x[cs_p.x_off + r * cs_p.ld + n]; }
    }
    cs_part[lid] = s;
    workgroupBarrier();
    if (slice == 0u && n < cs_p.N) {
        var t = 0.0;
        for (var k = 0u; k < 32u; k++) { t += cs_part[k * 8u + col]; }
        cs_out[cs_p.out_off + n] += t;
    }
}

// Column sums in two stages, for an x whose width N, row stride and offset are multiples of 4
// (matmul_at's dbias at those widths; layernorm_backward_params_part shares the second stage).
// The kernel above gives each 8 columns one workgroup: 96 to 384 workgroups at GPT-2's widths,
// too few to keep the H200's memory busy (about a quarter of its bandwidth).
// matmul_colsum_part: one workgroup per (64-column block, CS4_ROWS-row chunk), its 256 threads 16
// vec4 columns × 16 row slices (a warp reads 2 rows × 256 contiguous bytes), each thread summing
// its 16 rows; the 16 slices are added in order and the block's sums go to
// part[part_off + chunk·N + n]. matmul_colsum_finish: out[out_off + n] += Σ_chunk
// part[part_off + chunk·N + n], in the same pattern over the chunks (below). Both deterministic;
// grid x = column blocks (of 16 vec4 columns), y = chunks (the finish: 1).
struct CS4Params { R : u32, N : u32, ld : u32, x_off : u32, out_off : u32, nchunk : u32, part_off : u32, p0 : u32 };
const CS4_ROWS : u32 = 256u;

@group(0) @binding(0) var<storage, read_write> cs4_part : array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> cs4_x : array<vec4<f32>>;
@group(0) @binding(2) var<uniform> cs4_p : CS4Params;

var<workgroup> cs4_red : array<vec4<f32>, 256>;

// Both stages' reduction: thread lid holds slice lid / 16's sum of vec4 column lid % 16; the 16
// slices added in order, returned to the threads of slice 0 (lid < 16; the others get 0). Called
// by every thread (a barrier).
fn cs4_slices_sum(lid : u32, s : vec4<f32>) -> vec4<f32> {
    cs4_red[lid] = s;
    workgroupBarrier();
    var t = vec4<f32>(0.0);
    if (lid < 16u) {
        for (var k = 0u; k < 16u; k++) { t += cs4_red[k * 16u + lid]; }
    }
    return t;
}

@compute @workgroup_size(256)
fn matmul_colsum_part(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>) {
    let n4 = cs4_p.N / 4u;
    let c4 = wid.x * 16u + lid % 16u;
    let slice = lid / 16u;
    var s = vec4<f32>(0.0);
    if (c4 < n4) {
        let r0 = wid.y * CS4_ROWS + slice;
        for (var i = 0u; i < CS4_ROWS / 16u; i++) {
            let r = r0 + 16u * i;
            if (r < cs4_p.R) { s += cs4_x[(cs4_p.x_off + r * cs4_p.ld) / 4u + c4]; }
        }
    }
    let t = cs4_slices_sum(lid, s);
    if (slice == 0u && c4 < n4) { cs4_part[cs4_p.part_off / 4u + wid.y * n4 + c4] = t; }
}

@group(0) @binding(0) var<storage, read_write> csf_out : array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> csf_part : array<vec4<f32>>;
@group(0) @binding(2) var<uniform> csf_p : CS4Params;

// The finish as the first stage over the partials: one workgroup per 16 vec4 columns, 16 chunk
// slices (slice s adds chunks s, s + 16, ... in order), the slices then added in order
// (cs4_slices_sum). A thread a column looping over every chunk (the earlier form) waited on each
// load in turn: 32 at GPT-2's 8192 rows, on 192-768 threads.
@compute @workgroup_size(256)
fn matmul_colsum_finish(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>) {
    let n4 = csf_p.N / 4u;
    let c4 = wid.x * 16u + lid % 16u;
    let slice = lid / 16u;
    var s = vec4<f32>(0.0);
    if (c4 < n4) {
        for (var ch = slice; ch < csf_p.nchunk; ch += 16u) { s += csf_part[csf_p.part_off / 4u + ch * n4 + c4]; }
    }
    let t = cs4_slices_sum(lid, s);
    if (slice == 0u && c4 < n4) { csf_out[csf_p.out_off / 4u + c4] += t; }
}

// matmul_transpose: out[out_off + c·ldo + r] = x[x_off + r·ldi + c] for r < R, c < C. It copies
// the forward's operands (inp [M, K] and W [N, K], both along k) into matmul_at's layout (along m
// and n) when the host runs the forward that way (wg_ops_matmul.c, fwd_t_pick). One workgroup a
// 32 x 32 block: 8 rows of 32 threads read it along the input's rows, then write it along the
// output's rows through workgroup memory 33 words a row, so that a warp's column reads fall in
// distinct banks. Output columns from R to ldo (the host's padding to a multiple of 4) are not
// written. Grid: x = column blocks of the input, y = row blocks.
struct TRParams { R : u32, C : u32, ldi : u32, ldo : u32, x_off : u32, out_off : u32, p0 : u32, p1 : u32 };
const TR_B : u32 = 32u;

@group(0) @binding(0) var<storage, read_write> tr_out : array<f32>;
@group(0) @binding(1) var<storage, read> tr_x : array<f32>;
@group(0) @binding(2) var<uniform> tr_p : TRParams;

var<workgroup> tr_tile : array<f32, 1056>;  // TR_B x (TR_B + 1)

@compute @workgroup_size(256)
fn matmul_transpose(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>) {
    let tx = lid % TR_B;
    let ty = lid / TR_B;  // 0..7
    let c0 = wid.x * TR_B;
    let r0 = wid.y * TR_B;
    for (var i = 0u; i < TR_B; i += 8u) {
        let r = r0 + ty + i;
        let c = c0 + tx;
        if (r < tr_p.R && c < tr_p.C) { tr_tile[(ty + i) * (TR_B + 1u) + tx] = tr_x[tr_p.x_off + r * tr_p.ldi + c]; }
    }
    workgroupBarrier();
    for (var i = 0u; i < TR_B; i += 8u) {
        let c = c0 + ty + i;
        let r = r0 + tx;
        if (c < tr_p.C && r < tr_p.R) { tr_out[tr_p.out_off + c * tr_p.ldo + r] = tr_tile[tx * (TR_B + 1u) + ty + i]; }
    }
}

// matmul_transpose4: two such copies in one dispatch, out1 = x1ᵀ and out2 = x2ᵀ (the forward's
// inp and W, both K wide: C is theirs), where C, ldi, both ldo and every offset are multiples of
// 4, by 64 x 64 blocks as vec4: row blocks y < nb1 are x1's, the rest x2's (R2 may be 0). One
// dispatch instead of two spares the GPU a drain between them, and the small copies of a layer's
// GEMM fill its waves better together. A thread loads 4 vec4 of input rows and stores 4 vec4 of
// output rows, all 4 loads issued before the first store, so a workgroup has 16 KiB in flight
// where matmul_transpose has 4. The block lies in workgroup memory transposed, each input
// column as 16 vec4 of rows, with the vec4 index XOR-ed by the column's 4-column group (tr4_at)
// so that the scatter of a loaded vec4 into 4 columns meets at most 2-way bank conflicts and a
// quarter-warp's vec4 reads of one column none; 16 KiB in all, the least WebGPU guarantees. Rows
// from R to the next multiple of 4 are written as zeros. Grid: x = 64-column blocks, y = 64-row
// blocks of x1 then of x2.
struct TR4Params {
    R1 : u32, R2 : u32, C : u32, ldi : u32,
    ldo1 : u32, ldo2 : u32, nb1 : u32, x1_off : u32,
    x2_off : u32, out1_off : u32, out2_off : u32, p0 : u32,
};

@group(0) @binding(0) var<storage, read_write> tr4_out : array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> tr4_x1 : array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> tr4_x2 : array<vec4<f32>>;
@group(0) @binding(3) var<uniform> tr4_p : TR4Params;

var<workgroup> tr4_tile : array<vec4<f32>, 1024>;

fn tr4_at(cl : u32, q : u32) -> u32 { return cl * 16u + (q ^ ((cl >> 2u) & 15u)); }  // column cl, rows 4q..4q+3

@compute @workgroup_size(256)
fn matmul_transpose4(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>) {
    let second = wid.y >= tr4_p.nb1;
    let R = select(tr4_p.R1, tr4_p.R2, second);
    let ldo = select(tr4_p.ldo1, tr4_p.ldo2, second);
    let out_off = select(tr4_p.out1_off, tr4_p.out2_off, second);
    let c0 = wid.x * 64u;
    let r0 = select(wid.y, wid.y - tr4_p.nb1, second) * 64u;
    var vs : array<vec4<f32>, 4>;  // the 4 loads first, then their scatter: 0.718 -> 0.680 ms a GPT-2 step
    for (var i = 0u; i < 4u; i++) {
        let j = lid + 256u * i;
        let rl = j / 16u;         // the block's row
        let cl = (j % 16u) * 4u;  // its first of 4 columns
        var v = vec4<f32>(0.0);
        if (r0 + rl < R && c0 + cl < tr4_p.C) {
            let e = (r0 + rl) * tr4_p.ldi + c0 + cl;
            if (second) { v = tr4_x2[(tr4_p.x2_off + e) / 4u]; } else { v = tr4_x1[(tr4_p.x1_off + e) / 4u]; }
        }
        vs[i] = v;
    }
    for (var i = 0u; i < 4u; i++) {
        let j = lid + 256u * i;
        let rl = j / 16u;
        let cl = (j % 16u) * 4u;
        let v = vs[i];
        let q = rl / 4u;
        let e = rl % 4u;
        tr4_tile[tr4_at(cl, q)][e] = v.x;
        tr4_tile[tr4_at(cl + 1u, q)][e] = v.y;
        tr4_tile[tr4_at(cl + 2u, q)][e] = v.z;
        tr4_tile[tr4_at(cl + 3u, q)][e] = v.w;
    }
    workgroupBarrier();
    for (var i = 0u; i < 4u; i++) {
        let j = lid + 256u * i;
        let cl = j / 16u;  // the block's column: an output row
        let q = j % 16u;   // its vec4 of rows
        if (c0 + cl < tr4_p.C && r0 + 4u * q < R) {
            tr4_out[(out_off + (c0 + cl) * ldo + r0 + 4u * q) / 4u] = tr4_tile[tr4_at(cl, q)];
        }
    }
}

// matmul_peak (benchmarks only): the FP32 FMA ceiling through this same compiler stack. Each
// thread runs 32 independent FMA chains (8 vec4) for `iters` steps; x and y come from the
// params so nothing folds, and one store a thread keeps the work alive. FLOPs = 64·iters·threads.
struct PeakParams { iters : u32, n : u32, x : f32, y : f32 };

@group(0) @binding(0) var<storage, read_write> pk_out : array<f32>;
@group(0) @binding(1) var<uniform> pk_p : PeakParams;

@compute @workgroup_size(256)
fn matmul_peak(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    let x = vec4<f32>(pk_p.x);
    let y = vec4<f32>(pk_p.y);
    var a0 = vec4<f32>(f32(i)); var a1 = a0 + 1.0; var a2 = a0 + 2.0; var a3 = a0 + 3.0;
    var a4 = a0 + 4.0; var a5 = a0 + 5.0; var a6 = a0 + 6.0; var a7 = a0 + 7.0;
    for (var t = 0u; t < pk_p.iters; t++) {
        a0 = fma(a0, x, y); a1 = fma(a1, x, y); a2 = fma(a2, x, y); a3 = fma(a3, x, y);
        a4 = fma(a4, x, y); a5 = fma(a5, x, y); a6 = fma(a6, x, y); a7 = fma(a7, x, y);
    }
    let s = (a0 + a1) + (a2 + a3) + (a4 + a5) + (a6 + a7);
    if (i < pk_p.n) { pk_out[i] = s.x + s.y + s.z + s.w; }
}
