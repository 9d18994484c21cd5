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
// Tiling, as 03_matmul.wgsl's in its simplest form: one kernel body computes C[M,N] = A[M,K]·B[K,N]
// with A = inp (or dout) row-major, k contiguous, and B(k,n) = W[n,k] (forward: k contiguous along
// a weight row) or W[k,n] (matmul_t: n contiguous). A workgroup of 256 threads owns a 64 x 64 tile
// of C, each thread 4 x 4 outputs strided 16 apart (rows ty + 16i, columns tx + 16j) so that the
// workgroup-memory reads of a k-step are broadcasts and consecutive words. Per 16-deep k-slice
// every thread loads 4 elements of each operand (consecutive threads along the operand's
// contiguous direction, for coalesced reads), edges zero-filled; products summed in k order.
// Every operand carries an element (word, block) offset so the host can bind 256-byte-aligned
// windows of larger buffers.

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

const LB_BM : u32 = 64u;
const LB_BN : u32 = 64u;
const LB_BK : u32 = 16u;

// The NF4 levels as f32 bits (model/nf4.c's nf4_levels, bit for bit).
var<private> lb_nf4 : array<u32, 16> = array<u32, 16>(
    0xbf800000u, 0xbf3239b1u, 0xbf066b30u, 0xbeca32a0u, 0xbe91a24du, 0xbe3d353fu, 0xbdba7871u, 0x00000000u,
    0x3da2faffu, 0x3e24cae3u, 0x3e7c04ddu, 0x3ead033au, 0x3ee1a4b8u, 0x3f1007abu, 0x3f3913b3u, 0x3f800000u);

var<workgroup> lb_as : array<f32, 1024>;  // [LB_BK][LB_BM]
var<workgroup> lb_bs : array<f32, 1024>;  // [LB_BK][LB_BN]

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

fn lb_gemm(wid : vec3<u32>, lid : u32, trans : bool) {
    let m0 = wid.y * LB_BM;
    let n0 = wid.x * LB_BN;
    let tx = lid % 16u;
    let ty = lid / 16u;
    var acc : array<array<f32, 4>, 4>;
    for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) { acc[i][j] = 0.0; }
    }
    for (var k0 = 0u; k0 < lb_p.K; k0 += LB_BK) {
        for (var q = 0u; q < 4u; q++) {
            let s = lid + q * 256u;
            let kk = s % LB_BK;      // k-contiguous slots: 16 threads read 16 consecutive k of a row
            let r = s / LB_BK;
            let k = k0 + kk;
            var a = 0.0;
            if (m0 + r < lb_p.M && k < lb_p.K) { a = lb_a[lb_p.a_off + (m0 + r) * lb_p.K + k]; }
            lb_as[kk * LB_BM + r] = a;
            var b = 0.0;
            if (!trans) {            // B(k, n) = W[n, k]
                if (n0 + r < lb_p.N && k < lb_p.K) { b = lb_weight((n0 + r) * lb_p.ldw + k); }
                lb_bs[kk * LB_BN + r] = b;
            } else {                 // B(k, n) = W[k, n]: 64 threads read 64 consecutive n
                let nn = s % LB_BN;
                let k2 = k0 + s / LB_BN;
                if (n0 + nn < lb_p.N && k2 < lb_p.K) { b = lb_weight(k2 * lb_p.ldw + n0 + nn); }
                lb_bs[(s / LB_BN) * LB_BN + nn] = b;
            }
        }
        workgroupBarrier();
        for (var kk = 0u; kk < LB_BK; kk++) {
            var av : array<f32, 4>;
            var bv : array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                av[i] = lb_as[kk * LB_BM + ty + 16u * i];
                bv[i] = lb_bs[kk * LB_BN + tx + 16u * i];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) { acc[i][j] = acc[i][j] + av[i] * bv[j]; }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let m = m0 + ty + 16u * i;
        if (m >= lb_p.M) { continue; }
        for (var j = 0u; j < 4u; j++) {
            let n = n0 + tx + 16u * j;
            if (n >= lb_p.N) { continue; }
            var v = acc[i][j];
            if ((lb_p.flags & 1u) != 0u) { v = v + lb_bias[lb_p.bias_off + n]; }
            lb_c[lb_p.c_off + m * lb_p.N + n] = v;
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
