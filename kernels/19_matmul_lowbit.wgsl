// 19_matmul_lowbit.wgsl — the GEMMs of a frozen base stored in low precision (LoRA's
// --base-precision f16 | bf16 | nf4; docs/memory.md): `matmul_lowbit` (out = inp·Wᵀ + b) and
// `matmul_t_lowbit` (dinp = dout·W). A frozen weight has no gradient, so there is no matmul_at.
// W [OC, C] is never expanded to f32 in memory: each weight element is decoded as its tile is
// copied into workgroup memory, and the tiles, the FMAs and the accumulators are f32.
//
// Weight formats (lb_p.fmt; the host's backend/lowbit.h decodes the same bits), element e of W in
// row-major order:
//   0 f16   word e/2, half e%2 (low half first): unpack2x16float, so no shader-f16 is needed
//   1 bf16  word e/2, half e%2: the top 16 bits of an f32
//   2 nf4   word e/8, bits 4(e%8)..+3: index into the 16 NormalFloat levels (QLoRA), times the
//           absmax of its block of 64 (lb_s[e/64])
//
// Tiling, as 03_matmul.wgsl's register blocking without its variants: one kernel body computes
// C[M,N] = A[M,K]·B[K,N] with A = inp (or dout) row-major, k contiguous, and B(k,n) = W[n,k]
// (forward: k contiguous along a weight row) or W[k,n] (matmul_t: n contiguous). A workgroup of 256
// threads owns a 128 x 128 tile of C, each thread 8 x 8 outputs: rows 4ty..4ty+3 and 64+4ty..,
// columns 4tx..4tx+3 and 64+4tx.., so that every workgroup-memory read is one vec4 (a k-step: 4
// vec4 reads for 64 FMAs). Per 8-deep k-slice every thread loads 4 elements of each operand, as
// one vec4 of workgroup memory: 4 rows at one k for a k-contiguous operand (8 neighbouring threads
// read 8 consecutive k of those rows), 4 consecutive n for W[k,n]; edges are zero-filled. The tile
// rows are padded by one vec4 so the transposing stores spread over banks. Products are summed in
// k order.
struct LBParams {
    M : u32, N : u32, K : u32, flags : u32,          // flags 1: add bias
    a_off : u32, w_off : u32, s_off : u32, bias_off : u32,
    c_off : u32, fmt : u32, ldw : u32, p0 : u32,     // ldw: a weight row's length (C)
};

@group(0) @binding(0) var<storage, read_write> lb_c : array<f32>;
@group(0) @binding(1) var<storage, read> lb_a : array<f32>;
@group(0) @binding(2) var<storage, read> lb_w : array<u32>;
@group(0) @binding(3) var<storage, read> lb_s : array<f32>;
@group(0) @binding(4) var<storage, read> lb_bias : array<f32>;
@group(0) @binding(5) var<uniform> lb_p : LBParams;

const LB_BM : u32 = 128u;
const LB_BN : u32 = 128u;
const LB_BK : u32 = 8u;
const LB_S : u32 = 33u;  // vec4 a k-row of the tiles: 32 and one of padding

// The NF4 levels as f32 bits (model/nf4.c's nf4_levels, bit for bit).
var<private> lb_nf4 : array<u32, 16> = array<u32, 16>(
    0xbf800000u, 0xbf3239b1u, 0xbf066b30u, 0xbeca32a0u, 0xbe91a24du, 0xbe3d353fu, 0xbdba7871u, 0x00000000u,
    0x3da2faffu, 0x3e24cae3u, 0x3e7c04ddu, 0x3ead033au, 0x3ee1a4b8u, 0x3f1007abu, 0x3f3913b3u, 0x3f800000u);

var<workgroup> lb_as : array<vec4<f32>, 264>;  // [LB_BK][LB_S]: 4 rows of A at one k a vec4
var<workgroup> lb_bs : array<vec4<f32>, 264>;  // [LB_BK][LB_S]: 4 columns of B

// Element e of the packed weight.
fn lb_weight(e : u32) -> f32 {
    if (lb_p.fmt == 2u) {
        let code = (lb_w[lb_p.w_off + (e >> 3u)] >> ((e & 7u) * 4u)) & 15u;
        return bitcast<f32>(lb_nf4[code]) * lb_s[lb_p.s_off + (e >> 6u)];
    }
    let h = (lb_w[lb_p.w_off + (e >> 1u)] >> ((e & 1u) * 16u)) & 0xffffu;
    if (lb_p.fmt == 1u) { return bitcast<f32>(h << 16u); }
    return unpack2x16float(h).x;
}

// Element (m, k) of A and (k, n) of B, 0 outside.
fn lb_a_at(m : u32, k : u32) -> f32 {
    if (m >= lb_p.M || k >= lb_p.K) { return 0.0; }
    return lb_a[lb_p.a_off + m * lb_p.K + k];
}
fn lb_b_at(k : u32, n : u32, trans : bool) -> f32 {
    if (n >= lb_p.N || k >= lb_p.K) { return 0.0; }
    if (trans) { return lb_weight(k * lb_p.ldw + n); }  // B(k, n) = W[k, n]
    return lb_weight(n * lb_p.ldw + k);                  // B(k, n) = W[n, k]
}

fn lb_gemm(wid : vec3<u32>, lid : u32, trans : bool) {
    let m0 = wid.y * LB_BM;
    let n0 = wid.x * LB_BN;
    let tx = lid % 16u;
    let ty = lid / 16u;
    var acc : array<vec4<f32>, 16>;  // row r (0..7), column half h: acc[2r + h]
    for (var i = 0u; i < 16u; i++) { acc[i] = vec4<f32>(0.0); }
    // this thread's load slots: A (and a k-contiguous B) 4 rows 4*(lid/8).. at k lid%8; a
    // transposed B 4 columns 4*(lid%32).. at k lid/32
    let lk = lid % 8u;
    let lr = (lid / 8u) * 4u;
    let tk = lid / 32u;
    let tn = (lid % 32u) * 4u;
    for (var k0 = 0u; k0 < lb_p.K; k0 += LB_BK) {
        let k = k0 + lk;
        lb_as[lk * LB_S + lid / 8u] = vec4<f32>(lb_a_at(m0 + lr, k), lb_a_at(m0 + lr + 1u, k), lb_a_at(m0 + lr + 2u, k),
                                                lb_a_at(m0 + lr + 3u, k));
        if (trans) {
            let kt = k0 + tk;
            let n = n0 + tn;
            lb_bs[tk * LB_S + lid % 32u] = vec4<f32>(lb_b_at(kt, n, true), lb_b_at(kt, n + 1u, true),
                                                     lb_b_at(kt, n + 2u, true), lb_b_at(kt, n + 3u, true));
        } else {
            let n = n0 + lr;
            lb_bs[lk * LB_S + lid / 8u] = vec4<f32>(lb_b_at(k, n, false), lb_b_at(k, n + 1u, false),
                                                    lb_b_at(k, n + 2u, false), lb_b_at(k, n + 3u, false));
        }
        workgroupBarrier();
        for (var kk = 0u; kk < LB_BK; kk++) {
            let a0 = lb_as[kk * LB_S + ty];
            let a1 = lb_as[kk * LB_S + 16u + ty];
            let b0 = lb_bs[kk * LB_S + tx];
            let b1 = lb_bs[kk * LB_S + 16u + tx];
            for (var r = 0u; r < 4u; r++) {
                acc[2u * r] = fma(vec4<f32>(a0[r]), b0, acc[2u * r]);
                acc[2u * r + 1u] = fma(vec4<f32>(a0[r]), b1, acc[2u * r + 1u]);
                acc[2u * r + 8u] = fma(vec4<f32>(a1[r]), b0, acc[2u * r + 8u]);
                acc[2u * r + 9u] = fma(vec4<f32>(a1[r]), b1, acc[2u * r + 9u]);
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < 8u; r++) {
        let m = m0 + select(4u * ty + r, 64u + 4u * ty + r - 4u, r >= 4u);
        if (m >= lb_p.M) { continue; }
        for (var h = 0u; h < 2u; h++) {
            let v = acc[2u * r + h];
            for (var j = 0u; j < 4u; j++) {
                let n = n0 + 64u * h + 4u * tx + j;
                if (n >= lb_p.N) { continue; }
                var o = v[j];
                if ((lb_p.flags & 1u) != 0u) { o = o + lb_bias[lb_p.bias_off + n]; }
                lb_c[lb_p.c_off + m * lb_p.N + n] = o;
            }
        }
    }
}

@compute @workgroup_size(256)
fn matmul_lowbit(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_index) lid : u32) {
    lb_gemm(wid, lid, false);
}

@compute @workgroup_size(256)
fn matmul_t_lowbit(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_index) lid : u32) {
    lb_gemm(wid, lid, true);
}
