// 03_matmul.wgsl — the GEMMs of the model: forward `matmul` (out = inp·Wᵀ + b), and the two
// backward ones, `matmul_t` (dinp = dout·W) and `matmul_at` (dW += doutᵀ·inp), plus the column
// sum that gives dbias. They are nearly all of a training step's FLOPs.
//
// One register-blocked kernel serves the three: C[M,N] (=|+=) A[M,K]·B[K,N] (+ bias[N]). The
// variants differ only in which operand is stored transposed, and that is absorbed when a tile
// is copied into workgroup memory, where both operands are always k-major (As[k][m], Bs[k][n]).
//   matmul    A = inp  [M=N,  K=C ]  k contiguous    B(k,n) = W[n,k]   k contiguous
//   matmul_t  A = dout [M=N,  K=OC]  k contiguous    B(k,n) = W[k,n]   n contiguous
//   matmul_at A(m,k) = dout[k,m]     m contiguous    B(k,n) = inp[k,n] n contiguous
//
// Tiling (sizes come from the host's `defines`, chosen per device and per shape):
//   MM_BM x MM_BN outputs per workgroup, MM_BK deep k-slices, 256 threads as a
//   (MM_BN/MM_TN) x (MM_BM/MM_TM) grid, each thread owning MM_TM x MM_TN outputs. A thread's
//   rows are MM_TM/4 groups of 4 adjacent rows spread MM_BM/(MM_TM/4) apart (likewise columns),
//   so that every workgroup-memory read is one vec4 and the 16 threads of a half-warp read 16
//   consecutive vec4 (no bank conflicts). Workgroup memory is double buffered and the next
//   k-slice is prefetched into registers while the current one is multiplied: one barrier per
//   k-slice. Edges (M, N, K not multiples of the tile) are zero-filled on load and masked on store.
//
// Every operand carries an element offset and a leading dimension in the params, so the host can
// bind a 256-byte-aligned window of a larger matrix (splitting bindings larger than the device
// limit, e.g. the lm_head logits) and write a column block of `out` with a row stride > N.
//
// Host defines: const MM_BM, MM_BN, MM_BK, MM_TM, MM_TN : u32 with TM, TN in {4, 8},
// (BM/TM)*(BN/TN) = 256 and BM*BK, BN*BK at most 2048 (a tile is loaded in one or two passes).

struct MMParams {
    M : u32, N : u32, K : u32, flags : u32,   // flags: 1 = add bias, 2 = accumulate into C
    a_off : u32, b_off : u32, c_off : u32, bias_off : u32,
    lda : u32, ldb : u32, ldc : u32, pad0 : u32,
};

@group(0) @binding(0) var<storage, read> mm_a : array<f32>;
@group(0) @binding(1) var<storage, read> mm_b : array<f32>;
@group(0) @binding(2) var<storage, read> mm_bias : array<f32>;
@group(0) @binding(3) var<storage, read_write> mm_c : array<f32>;
@group(0) @binding(4) var<uniform> mm_p : MMParams;

const MM_TX : u32 = MM_BN / MM_TN;       // threads along n
const MM_TY : u32 = MM_BM / MM_TM;       // threads along m
const MM_TM4 : u32 = MM_TM / 4u;      // 1 or 2 vec4 of rows a thread
const MM_TN4 : u32 = MM_TN / 4u;      // 1 or 2 vec4 of columns a thread
// k-rows of the tiles in vec4, padded by one vec4 so the transposing stores spread over banks
const MM_AS_V : u32 = MM_BM / 4u + 1u;
const MM_BS_V : u32 = MM_BN / 4u + 1u;
const MM_A_SLOTS : u32 = MM_BM * MM_BK / 4u;   // vec4 per A tile
const MM_B_SLOTS : u32 = MM_BN * MM_BK / 4u;
const MM_A_PASSES : u32 = (MM_A_SLOTS + 255u) / 256u;
const MM_B_PASSES : u32 = (MM_B_SLOTS + 255u) / 256u;
const_assert MM_TX * MM_TY == 256u;
const_assert (MM_TM == 4u || MM_TM == 8u) && (MM_TN == 4u || MM_TN == 8u);
const_assert MM_A_PASSES <= 2u && MM_B_PASSES <= 2u;

var<workgroup> mm_as : array<vec4<f32>, 2u * MM_BK * MM_AS_V>;
var<workgroup> mm_bs : array<vec4<f32>, 2u * MM_BK * MM_BS_V>;

// Element (m, k) of A, 0 outside the matrix. a_kc: A is stored with k contiguous.
fn mm_load_a(m : u32, k : u32, a_kc : bool) -> f32 {
    if (m >= mm_p.M || k >= mm_p.K) { return 0.0; }
    if (a_kc) { return mm_a[mm_p.a_off + m * mm_p.lda + k]; }
    return mm_a[mm_p.a_off + k * mm_p.lda + m];
}

// Element (k, n) of B, 0 outside the matrix. b_kc: B is stored with k contiguous (W[n,k]).
fn mm_load_b(k : u32, n : u32, b_kc : bool) -> f32 {
    if (n >= mm_p.N || k >= mm_p.K) { return 0.0; }
    if (b_kc) { return mm_b[mm_p.b_off + n * mm_p.ldb + k]; }
    return mm_b[mm_p.b_off + k * mm_p.ldb + n];
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

fn mm_fetch_a(s : u32, m0 : u32, k0 : u32, a_kc : bool) -> vec4<f32> {
    if (s >= MM_A_SLOTS) { return vec4<f32>(0.0); }
    let q = mm_slot_a(s, a_kc);
    let m = m0 + q.y * 4u;
    let k = k0 + q.x;
    return vec4<f32>(mm_load_a(m, k, a_kc), mm_load_a(m + 1u, k, a_kc), mm_load_a(m + 2u, k, a_kc),
                     mm_load_a(m + 3u, k, a_kc));
}
fn mm_fetch_b(s : u32, n0 : u32, k0 : u32, b_kc : bool) -> vec4<f32> {
    if (s >= MM_B_SLOTS) { return vec4<f32>(0.0); }
    let q = mm_slot_b(s, b_kc);
    let n = n0 + q.y * 4u;
    let k = k0 + q.x;
    return vec4<f32>(mm_load_b(k, n, b_kc), mm_load_b(k, n + 1u, b_kc), mm_load_b(k, n + 2u, b_kc),
                     mm_load_b(k, n + 3u, b_kc));
}
fn mm_store_a(buf : u32, s : u32, v : vec4<f32>, a_kc : bool) {
    if (s >= MM_A_SLOTS) { return; }
    let q = mm_slot_a(s, a_kc);
    mm_as[(buf * MM_BK + q.x) * MM_AS_V + q.y] = v;
}
fn mm_store_b(buf : u32, s : u32, v : vec4<f32>, b_kc : bool) {
    if (s >= MM_B_SLOTS) { return; }
    let q = mm_slot_b(s, b_kc);
    mm_bs[(buf * MM_BK + q.x) * MM_BS_V + q.y] = v;
}

// One output row of a thread: up to 8 columns in two vec4 (v1 only when MM_TN4 == 2), with the
// bias and the accumulation of the params.
fn mm_store_row(m0 : u32, n0 : u32, g : u32, j : u32, tx : u32, ty : u32, v0 : vec4<f32>, v1 : vec4<f32>) {
    let m = m0 + (g * MM_TY + ty) * 4u + j;
    if (m >= mm_p.M) { return; }
    let row = mm_p.c_off + m * mm_p.ldc;
    let has_bias = (mm_p.flags & 1u) != 0u;
    let accumulate = (mm_p.flags & 2u) != 0u;
    for (var h = 0u; h < MM_TN4; h++) {
        let nb = n0 + (h * MM_TX + tx) * 4u;
        let v = select(v0, v1, h == 1u);
        for (var q = 0u; q < 4u; q++) {
            let n = nb + q;
            if (n >= mm_p.N) { break; }
            var r = v[q];
            if (has_bias) { r += mm_bias[mm_p.bias_off + n]; }
            if (accumulate) { r += mm_c[row + n]; }
            mm_c[row + n] = r;
        }
    }
}

// The accumulators are 16 named vec4 (row r, column half h: c<r><h>) rather than an array, and
// the 8x8 update is written out: every register index is a literal, so no compiler needs to
// unroll loops to keep them in registers. Rows 4-7 exist when MM_TM4 == 2, halves 1 when
// MM_TN4 == 2: constant conditions, folded away for the 4-wide shapes.
fn mm_main(lid : u32, wid : vec3<u32>, a_kc : bool, b_kc : bool) {
    let tx = lid % MM_TX;
    let ty = lid / MM_TX;
    let n0 = wid.x * MM_BN;
    let m0 = wid.y * MM_BM;
    let ntiles = (mm_p.K + MM_BK - 1u) / MM_BK;
    let z = vec4<f32>(0.0);
    var c00 = z; var c01 = z; var c10 = z; var c11 = z; var c20 = z; var c21 = z; var c30 = z; var c31 = z;
    var c40 = z; var c41 = z; var c50 = z; var c51 = z; var c60 = z; var c61 = z; var c70 = z; var c71 = z;
    var ra0 = z; var ra1 = z; var rb0 = z; var rb1 = z;   // prefetch (at most 2 passes a tile)

    // first k-slice straight into buffer 0
    mm_store_a(0u, lid, mm_fetch_a(lid, m0, 0u, a_kc), a_kc);
    if (MM_A_PASSES > 1u) { mm_store_a(0u, lid + 256u, mm_fetch_a(lid + 256u, m0, 0u, a_kc), a_kc); }
    mm_store_b(0u, lid, mm_fetch_b(lid, n0, 0u, b_kc), b_kc);
    if (MM_B_PASSES > 1u) { mm_store_b(0u, lid + 256u, mm_fetch_b(lid + 256u, n0, 0u, b_kc), b_kc); }
    workgroupBarrier();

    for (var t = 0u; t < ntiles; t++) {
        let buf = t & 1u;
        let more = t + 1u < ntiles;
        if (more) {  // prefetch the next slice; its latency hides behind the FMAs below
            let k1 = (t + 1u) * MM_BK;
            ra0 = mm_fetch_a(lid, m0, k1, a_kc);
            if (MM_A_PASSES > 1u) { ra1 = mm_fetch_a(lid + 256u, m0, k1, a_kc); }
            rb0 = mm_fetch_b(lid, n0, k1, b_kc);
            if (MM_B_PASSES > 1u) { rb1 = mm_fetch_b(lid + 256u, n0, k1, b_kc); }
        }
        var ai = buf * MM_BK * MM_AS_V + ty;
        var bi = buf * MM_BK * MM_BS_V + tx;
        for (var kk = 0u; kk < MM_BK; kk++) {
            let a0 = mm_as[ai];
            let b0 = mm_bs[bi];
            c00 = fma(vec4<f32>(a0.x), b0, c00);
            c10 = fma(vec4<f32>(a0.y), b0, c10);
            c20 = fma(vec4<f32>(a0.z), b0, c20);
            c30 = fma(vec4<f32>(a0.w), b0, c30);
            if (MM_TN4 == 2u) {
                let b1 = mm_bs[bi + MM_TX];
                c01 = fma(vec4<f32>(a0.x), b1, c01);
                c11 = fma(vec4<f32>(a0.y), b1, c11);
                c21 = fma(vec4<f32>(a0.z), b1, c21);
                c31 = fma(vec4<f32>(a0.w), b1, c31);
                if (MM_TM4 == 2u) {
                    let a1 = mm_as[ai + MM_TY];
                    c40 = fma(vec4<f32>(a1.x), b0, c40);
                    c50 = fma(vec4<f32>(a1.y), b0, c50);
                    c60 = fma(vec4<f32>(a1.z), b0, c60);
                    c70 = fma(vec4<f32>(a1.w), b0, c70);
                    c41 = fma(vec4<f32>(a1.x), b1, c41);
                    c51 = fma(vec4<f32>(a1.y), b1, c51);
                    c61 = fma(vec4<f32>(a1.z), b1, c61);
                    c71 = fma(vec4<f32>(a1.w), b1, c71);
                }
            } else if (MM_TM4 == 2u) {
                let a1 = mm_as[ai + MM_TY];
                c40 = fma(vec4<f32>(a1.x), b0, c40);
                c50 = fma(vec4<f32>(a1.y), b0, c50);
                c60 = fma(vec4<f32>(a1.z), b0, c60);
                c70 = fma(vec4<f32>(a1.w), b0, c70);
            }
            ai += MM_AS_V;
            bi += MM_BS_V;
        }
        if (more) {
            // the other buffer was last read in iteration t-1, which every thread has left
            mm_store_a(buf ^ 1u, lid, ra0, a_kc);
            if (MM_A_PASSES > 1u) { mm_store_a(buf ^ 1u, lid + 256u, ra1, a_kc); }
            mm_store_b(buf ^ 1u, lid, rb0, b_kc);
            if (MM_B_PASSES > 1u) { mm_store_b(buf ^ 1u, lid + 256u, rb1, b_kc); }
        }
        workgroupBarrier();
    }

    mm_store_row(m0, n0, 0u, 0u, tx, ty, c00, c01);
    mm_store_row(m0, n0, 0u, 1u, tx, ty, c10, c11);
    mm_store_row(m0, n0, 0u, 2u, tx, ty, c20, c21);
    mm_store_row(m0, n0, 0u, 3u, tx, ty, c30, c31);
    if (MM_TM4 == 2u) {
        mm_store_row(m0, n0, 1u, 0u, tx, ty, c40, c41);
        mm_store_row(m0, n0, 1u, 1u, tx, ty, c50, c51);
        mm_store_row(m0, n0, 1u, 2u, tx, ty, c60, c61);
        mm_store_row(m0, n0, 1u, 3u, tx, ty, c70, c71);
    }
}

@compute @workgroup_size(256)
fn matmul(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>) {
    mm_main(lid, wid, true, true);
}

@compute @workgroup_size(256)
fn matmul_t(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>) {
    mm_main(lid, wid, true, false);
}

@compute @workgroup_size(256)
fn matmul_at(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>) {
    mm_main(lid, wid, false, false);
}

// dbias[n] += Σ_r x[r, n] for a column block: the workgroup owns 8 columns, its 256 threads are
// 32 row slices × 8 columns (a warp reads 4 rows × 32 contiguous bytes), and the 32 slice
// partials are summed in a fixed order: deterministic, no atomics.
struct ColSumParams { R : u32, N : u32, ld : u32, x_off : u32, out_off : u32, p0 : u32, p1 : u32, p2 : u32 };

@group(0) @binding(0) var<storage, read> cs_x : array<f32>;
@group(0) @binding(1) var<storage, read_write> cs_out : array<f32>;
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
