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
// Host defines: const MM_BM, MM_BN, MM_BK, MM_TM, MM_TN : u32 (TM, TN multiples of 4,
// (BM/TM)*(BN/TN) = 256, BM*BK and BN*BK multiples of 4).

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
const MM_TM4 : u32 = MM_TM / 4u;
const MM_TN4 : u32 = MM_TN / 4u;
// k-rows of the tiles in vec4, padded by one vec4 so the transposing stores spread over banks
const MM_AS_V : u32 = MM_BM / 4u + 1u;
const MM_BS_V : u32 = MM_BN / 4u + 1u;
const MM_A_SLOTS : u32 = MM_BM * MM_BK / 4u;   // vec4 per A tile
const MM_B_SLOTS : u32 = MM_BN * MM_BK / 4u;
const MM_A_PASSES : u32 = (MM_A_SLOTS + 255u) / 256u;
const MM_B_PASSES : u32 = (MM_B_SLOTS + 255u) / 256u;

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

fn mm_main(lid : u32, wid : vec3<u32>, a_kc : bool, b_kc : bool) {
    let tx = lid % MM_TX;
    let ty = lid / MM_TX;
    let n0 = wid.x * MM_BN;
    let m0 = wid.y * MM_BM;
    let ntiles = (mm_p.K + MM_BK - 1u) / MM_BK;

    var acc : array<vec4<f32>, MM_TM * MM_TN4>;
    for (var i = 0u; i < MM_TM * MM_TN4; i++) { acc[i] = vec4<f32>(0.0); }
    var ra : array<vec4<f32>, MM_A_PASSES>;
    var rb : array<vec4<f32>, MM_B_PASSES>;

    // first k-slice straight into buffer 0
    for (var p = 0u; p < MM_A_PASSES; p++) { mm_store_a(0u, lid + p * 256u, mm_fetch_a(lid + p * 256u, m0, 0u, a_kc), a_kc); }
    for (var p = 0u; p < MM_B_PASSES; p++) { mm_store_b(0u, lid + p * 256u, mm_fetch_b(lid + p * 256u, n0, 0u, b_kc), b_kc); }
    workgroupBarrier();

    for (var t = 0u; t < ntiles; t++) {
        let buf = t & 1u;
        let more = t + 1u < ntiles;
        if (more) {  // prefetch the next slice; its latency hides behind the FMAs below
            let k1 = (t + 1u) * MM_BK;
            for (var p = 0u; p < MM_A_PASSES; p++) { ra[p] = mm_fetch_a(lid + p * 256u, m0, k1, a_kc); }
            for (var p = 0u; p < MM_B_PASSES; p++) { rb[p] = mm_fetch_b(lid + p * 256u, n0, k1, b_kc); }
        }
        let abase = buf * MM_BK * MM_AS_V;
        let bbase = buf * MM_BK * MM_BS_V;
        for (var kk = 0u; kk < MM_BK; kk++) {
            var af : array<vec4<f32>, MM_TM4>;
            var bf : array<vec4<f32>, MM_TN4>;
            for (var g = 0u; g < MM_TM4; g++) { af[g] = mm_as[abase + kk * MM_AS_V + g * MM_TY + ty]; }
            for (var h = 0u; h < MM_TN4; h++) { bf[h] = mm_bs[bbase + kk * MM_BS_V + h * MM_TX + tx]; }
            for (var i = 0u; i < MM_TM; i++) {
                let a = vec4<f32>(af[i / 4u][i % 4u]);
                for (var h = 0u; h < MM_TN4; h++) {
                    acc[i * MM_TN4 + h] = fma(a, bf[h], acc[i * MM_TN4 + h]);
                }
            }
        }
        if (more) {
            // the other buffer was last read in iteration t-1, which every thread has left
            for (var p = 0u; p < MM_A_PASSES; p++) { mm_store_a(buf ^ 1u, lid + p * 256u, ra[p], a_kc); }
            for (var p = 0u; p < MM_B_PASSES; p++) { mm_store_b(buf ^ 1u, lid + p * 256u, rb[p], b_kc); }
        }
        workgroupBarrier();
    }

    let has_bias = (mm_p.flags & 1u) != 0u;
    let accumulate = (mm_p.flags & 2u) != 0u;
    for (var i = 0u; i < MM_TM; i++) {
        let m = m0 + ((i / 4u) * MM_TY + ty) * 4u + (i % 4u);
        if (m >= mm_p.M) { continue; }
        let row = mm_p.c_off + m * mm_p.ldc;
        for (var h = 0u; h < MM_TN4; h++) {
            let nb = n0 + (h * MM_TX + tx) * 4u;
            let v = acc[i * MM_TN4 + h];
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
