// wg_ops_lowbit.c — dispatch wrappers for kernels/19_matmul_lowbit.wgsl (matmul_lowbit,
// matmul_t_lowbit): the GEMMs of a frozen base stored as f16, bf16 or nf4 (backend/lowbit.h).
// Each operand is bound as a 256-byte-aligned window with the remainder passed as an offset; the
// model's activations and one frozen weight each fit one storage binding (the model allocates
// them so), so one dispatch of 128 x 128 tiles covers the GEMM.
#include "backend/lowbit.h"
#include "backend/webgpu/wg_ops.h"

typedef struct {
    uint32_t M, N, K, flags;
    uint32_t a_off, w_off, s_off, bias_off;
    uint32_t c_off, fmt, ldw, p0;
} lb_params;  // LBParams

// C[M,N] = A[M,K]·B[K,N] (+ bias), B from the packed weight W [OC, C] (ldw = C).
static void lb_gemm(wgt_backend *be, const char *entry, wgt_view c, wgt_view a, wgt_view weight, wgt_view absmax,
                    wgt_view bias, uint32_t M, uint32_t N, uint32_t K, uint32_t C, uint32_t OC, uint32_t fmt, uint32_t WW,
                    uint32_t NB) {
    const uint64_t n = (uint64_t)C * OC, words = wgt_lowbit_words(fmt, n), blocks = wgt_lowbit_blocks(fmt, n);
    WGT_ASSERT(fmt <= WGT_LOWBIT_NF4, "lowbit GEMM: fmt must be 0 (f16), 1 (bf16) or 2 (nf4)");
    WGT_ASSERT(words <= WW, "lowbit GEMM: the weight's WW words hold fewer than OC x C values");
    WGT_ASSERT(fmt != WGT_LOWBIT_NF4 || (absmax.buf && blocks <= NB),
               "lowbit GEMM: an nf4 weight needs absmax, NB >= ceil(OC x C / 64)");
    if (M == 0 || N == 0) return;
    wg_ctx *ctx = wg_of(be);
    const uint64_t lim = wg_binding_limit(be), nc = (uint64_t)M * N, na = (uint64_t)M * K;
    WGT_ASSERT(n <= UINT32_MAX && nc <= UINT32_MAX && na <= UINT32_MAX, "lowbit GEMM: a matrix above 2^32 elements");
    WGT_ASSERT(nc + WGT_VIEW_ALIGN <= lim && na + WGT_VIEW_ALIGN <= lim && words + WGT_VIEW_ALIGN <= lim,
               "lowbit GEMM: an operand above one storage binding");
    const uint64_t maxd = wg_ctx_info(ctx)->limits.maxComputeWorkgroupsPerDimension;
    const uint64_t gx = (N + 127) / 128, gy = (M + 127) / 128;  // 128 x 128 tiles
    WGT_ASSERT(gx <= maxd && gy <= maxd, "lowbit GEMM: more than the device's workgroups a dimension");
    lb_params p = {M, N, K, bias.buf ? 1u : 0u, 0, 0, 0, 0, 0, fmt, C, 0};
    wg_bind b[5];
    b[0] = wg_binding_window(c, 0, nc, &p.c_off);
    b[1] = wg_binding_window(a, 0, na, &p.a_off);
    b[2] = wg_binding_window(weight, 0, words, &p.w_off);
    b[3] = fmt == WGT_LOWBIT_NF4 ? wg_binding_window(absmax, 0, blocks, &p.s_off) : b[2];  // fmt 0, 1: an unread placeholder
    b[4] = bias.buf ? wg_binding_window(bias, 0, N, &p.bias_off) : b[2];
    WGPUComputePipeline pipe = wg_pipeline(ctx, "19_matmul_lowbit.wgsl", entry, NULL);
    wg_dispatch3(ctx, entry, pipe, b, 5, &p, sizeof p, (uint32_t)gx, (uint32_t)gy, 1);
}

void wg_matmul_lowbit(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view absmax, wgt_view bias,
                      uint32_t N, uint32_t C, uint32_t OC, uint32_t fmt, uint32_t WW, uint32_t NB) {
    lb_gemm(be, "matmul_lowbit", out, inp, weight, absmax, bias, N, OC, C, C, OC, fmt, WW, NB);
}

void wg_matmul_t_lowbit(wgt_backend *be, wgt_view dinp, wgt_view dout, wgt_view weight, wgt_view absmax, uint32_t N,
                        uint32_t C, uint32_t OC, uint32_t fmt, uint32_t WW, uint32_t NB) {
    lb_gemm(be, "matmul_t_lowbit", dinp, dout, weight, absmax, wgt_view_none(), N, C, OC, C, OC, fmt, WW, NB);
}
