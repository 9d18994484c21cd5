// wg_ops_matmul.c — dispatch wrappers for kernels/03_matmul.wgsl (matmul, matmul_t, matmul_at).
// One GEMM routine serves the three ops. It picks the tile shape (a pipeline variant through
// `defines`) from the device's workgroup memory and the output's size, and splits any operand
// larger than one storage binding (the lm_head's logits and wte) into windows: rows of the
// operand's slow dimension, bound at a 256-byte-aligned start with the remainder passed to the
// kernel as an element offset. A split of the reduction dimension accumulates into the output.
#include <stdlib.h>
#include <string.h>
#include "backend/webgpu/wg_ops.h"
#include "backend/webgpu/wg_ops_gpt.h"

size_t wg_test_binding_limit = 0;

uint64_t wg_gpt_binding_limit(wgt_backend *be) {
    uint64_t lim = be->max_binding_elems;
    if (wg_test_binding_limit && wg_test_binding_limit < lim) lim = wg_test_binding_limit;
    return lim;
}

wg_bind wg_gpt_window(wgt_view v, uint64_t start, uint64_t count, uint32_t *rem) {
    uint64_t abs = v.off + start;
    uint64_t base = abs / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
    *rem = (uint32_t)(abs - base);
    wgt_view w = {v.buf, (size_t)base};
    return wg_b(w, count ? (size_t)(count + *rem) : 0);
}

// ------------------------------------------------------------------ tile shapes
typedef struct { uint32_t bm, bn, bk, tm, tn; } mm_tile;

static const mm_tile TILE_BIG = {128, 128, 16, 8, 8};   // 64 outputs a thread: the FLOP workhorse
static const mm_tile TILE_BIG_K8 = {128, 128, 8, 8, 8}; // same, for 32 KiB of workgroup memory
static const mm_tile TILE_SMALL = {64, 64, 16, 4, 4};   // more workgroups for small outputs

wg_mm_tile_choice wg_mm_tile_override = WG_MM_TILE_AUTO;

static size_t tile_smem(mm_tile t) { return (size_t)2 * t.bk * ((t.bm / 4 + 1) + (t.bn / 4 + 1)) * 16; }

// Fewer big tiles than this many means that some of a large GPU's cores would idle (an H200
// holds two 128x128 workgroups on each of its 132 SMs: 264): take 64x64 tiles instead, 4x the
// workgroups at lower arithmetic intensity. In GPT-2 124M this picks the small tiles for the
// dW of every layer GEMM (768 x 768 .. 3072 x 768) and the big ones for everything else.
// WebGPU does not report the number of cores; bench_matmul --tiles measures both choices.
#define MM_MIN_BIG_TILES 256

static mm_tile tile_pick(wg_ctx *ctx, uint32_t M, uint32_t N) {
    size_t smem = wg_ctx_info(ctx)->limits.maxComputeWorkgroupStorageSize;
    mm_tile big = tile_smem(TILE_BIG) <= smem ? TILE_BIG : TILE_BIG_K8;
    switch (wg_mm_tile_override) {
    case WG_MM_TILE_BIG: return big;
    case WG_MM_TILE_SMALL: return TILE_SMALL;
    default: break;
    }
    uint64_t nbig = (uint64_t)((M + 127) / 128) * ((N + 127) / 128);
    return nbig < MM_MIN_BIG_TILES ? TILE_SMALL : big;
}

// The module's tile constants (every entry point of 03_matmul.wgsl needs them to compile).
static const char *tile_defines(mm_tile t, char *buf, size_t cap) {
    snprintf(buf, cap, "const MM_BM=%uu;const MM_BN=%uu;const MM_BK=%uu;const MM_TM=%uu;const MM_TN=%uu;", t.bm, t.bn,
             t.bk, t.tm, t.tn);
    return buf;
}

// ------------------------------------------------------------------ the GEMM
typedef enum { MM_NT, MM_NN, MM_TN } mm_variant;  // matmul, matmul_t, matmul_at
static const char *const mm_entry[] = {"matmul", "matmul_t", "matmul_at"};

typedef struct {
    uint32_t M, N, K, flags;
    uint32_t a_off, b_off, c_off, bias_off;
    uint32_t lda, ldb, ldc, pad0;
} mm_params;

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

// Largest chunk of a dimension whose rows of length ld fit one binding (leaving room for the
// alignment remainder), rounded down to whole tiles when that leaves at least one.
static uint64_t chunk_rows(uint64_t lim, uint64_t ld, uint64_t tile) {
    uint64_t r = (lim - WGT_VIEW_ALIGN) / (ld ? ld : 1);
    WGT_ASSERT(r >= 1, "a single matrix row is larger than one storage binding");
    return r >= tile ? r / tile * tile : r;
}

// C[M,N] (=|+=) A[M,K]·B[K,N] (+ bias[N]). a_kc/b_kc follow from the variant. The kernel indexes
// each binding window with u32, which every window (at most one binding) satisfies.
static void mm_gemm(wgt_backend *be, mm_variant var, wgt_view c, wgt_view a, wgt_view b, wgt_view bias, uint32_t M,
                    uint32_t N, uint32_t K, uint32_t lda, uint32_t ldb, uint32_t ldc, int accumulate) {
    wg_ctx *ctx = wg_of(be);
    if (M == 0 || N == 0) return;
    const int a_kc = var != MM_TN, b_kc = var == MM_NT;
    mm_tile t = tile_pick(ctx, M, N);
    char defs[128];
    WGPUComputePipeline pipe = wg_pipeline(ctx, "03_matmul.wgsl", mm_entry[var], tile_defines(t, defs, sizeof defs));

    // chunk sizes: every operand's window must fit one binding; grids stay within 65535 a side
    uint64_t lim = wg_gpt_binding_limit(be);
    uint64_t maxd = wg_ctx_info(ctx)->limits.maxComputeWorkgroupsPerDimension;
    uint64_t cM = min_u64(M, maxd * t.bm), cN = min_u64(N, maxd * t.bn), cK = K ? K : 1;
    cM = min_u64(cM, chunk_rows(lim, ldc, t.bm));
    if (a_kc) cM = min_u64(cM, chunk_rows(lim, lda, t.bm));
    else cK = min_u64(cK, chunk_rows(lim, lda, t.bk));
    if (b_kc) cN = min_u64(cN, chunk_rows(lim, ldb, t.bn));
    else cK = min_u64(cK, chunk_rows(lim, ldb, t.bk));

    for (uint64_t m0 = 0; m0 < M; m0 += cM) {
        uint32_t mc = (uint32_t)min_u64(cM, M - m0);
        for (uint64_t n0 = 0; n0 < N; n0 += cN) {
            uint32_t nc = (uint32_t)min_u64(cN, N - n0);
            uint64_t k0 = 0;
            do {
                uint32_t kc = (uint32_t)min_u64(cK, K - k0);
                mm_params p = {mc, nc, kc, 0, 0, 0, 0, 0, lda, ldb, ldc, 0};
                int first_k = k0 == 0;
                if (first_k && bias.buf) p.flags |= 1;
                if (accumulate || !first_k) p.flags |= 2;
                wg_bind bd[4];
                // a window of rows [r0, r0+rows) x cols [c0, c0+cols) of a matrix with leading dim ld
#define WINDOW(v, r0, rows, c0, cols, ld, off) \
    wg_gpt_window(v, (uint64_t)(r0) * (ld) + (c0), (rows) && (cols) ? (uint64_t)((rows) - 1) * (ld) + (cols) : 0, off)
                if (a_kc) bd[0] = WINDOW(a, m0, mc, k0, kc, lda, &p.a_off);
                else bd[0] = WINDOW(a, k0, kc, m0, mc, lda, &p.a_off);
                if (b_kc) bd[1] = WINDOW(b, n0, nc, k0, kc, ldb, &p.b_off);
                else bd[1] = WINDOW(b, k0, kc, n0, nc, ldb, &p.b_off);
                if (p.flags & 1) bd[2] = wg_gpt_window(bias, n0, nc, &p.bias_off);
                else bd[2] = wg_b(bd[0].v, 0);  // an unread placeholder; read-only like A, so no usage conflict
                bd[3] = WINDOW(c, m0, mc, n0, nc, ldc, &p.c_off);
#undef WINDOW
                wg_dispatch3(ctx, mm_entry[var], pipe, bd, 4, &p, sizeof p, (nc + t.bn - 1) / t.bn,
                             (mc + t.bm - 1) / t.bm, 1);
                k0 += kc;
            } while (k0 < K);
        }
    }
}

void wg_matmul(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view bias, uint32_t N, uint32_t C,
               uint32_t OC) {
    mm_gemm(be, MM_NT, out, inp, weight, bias, N, OC, C, C, C, OC, 0);
}

void wg_matmul_t(wgt_backend *be, wgt_view dinp, wgt_view dout, wgt_view weight, uint32_t N, uint32_t C, uint32_t OC) {
    wgt_view nobias = {NULL, 0};
    mm_gemm(be, MM_NN, dinp, dout, weight, nobias, N, C, OC, OC, C, C, 0);
}

typedef struct { uint32_t R, N, ld, x_off, out_off, p0, p1, p2; } colsum_params;

void wg_matmul_at(wgt_backend *be, wgt_view dweight, wgt_view dbias, wgt_view dout, wgt_view inp, uint32_t N,
                  uint32_t C, uint32_t OC) {
    wgt_view nobias = {NULL, 0};
    mm_gemm(be, MM_TN, dweight, dout, inp, nobias, OC, C, N, OC, C, C, 1);
    if (!dbias.buf || N == 0 || OC == 0) return;
    // dbias[OC] += column sums of dout[N,OC], over row chunks that fit one binding
    wg_ctx *ctx = wg_of(be);
    char defs[128];
    WGPUComputePipeline pipe =
        wg_pipeline(ctx, "03_matmul.wgsl", "matmul_at_dbias", tile_defines(TILE_SMALL, defs, sizeof defs));
    uint64_t rows = chunk_rows(wg_gpt_binding_limit(be), OC, 1);
    for (uint64_t r0 = 0; r0 < N; r0 += rows) {
        uint32_t rc = (uint32_t)min_u64(rows, N - r0);
        colsum_params p = {rc, OC, OC, 0, 0, 0, 0, 0};
        wg_bind bd[2] = {wg_gpt_window(dout, r0 * OC, (uint64_t)rc * OC, &p.x_off), wg_gpt_window(dbias, 0, OC, &p.out_off)};
        wg_dispatch(ctx, "matmul_at_dbias", pipe, bd, 2, &p, sizeof p, wg_groups(OC, 8));
    }
}

typedef struct { uint32_t iters, n; float x, y; } peak_params;

void wg_matmul_peak(wgt_backend *be, wgt_view out, uint32_t groups, uint32_t iters) {
    wg_ctx *ctx = wg_of(be);
    char defs[128];
    peak_params p = {iters, groups * 256u, 0.999999f, 1e-6f};
    wg_bind b[] = {wg_b(out, (size_t)groups * 256)};
    wg_dispatch(ctx, "matmul_peak", wg_pipeline(ctx, "03_matmul.wgsl", "matmul_peak", tile_defines(TILE_SMALL, defs, sizeof defs)),
                b, 1, &p, sizeof p, groups);
}
