// wg_ops_attention.c — dispatch wrappers for kernels/05_attention.wgsl (forward) and
// kernels/10_backward_attention.wgsl (backward, three variants). Tile sizes are compile-time
// constants of each pipeline, chosen here from the head size and the device's workgroup memory.
//
// Backward variant rule (wg_attention_backward, variant 0 = auto):
//   1. split-short   when T <= the largest T whose T×T P and dS fit in workgroup memory
//                    (56 with 32 KiB, 64 with 48 KiB): one workgroup per (b, h), nothing recomputed;
//   2. streaming     when B·NH >= WG_ATTN_STREAM_MIN_HEADS: one workgroup per (b, h) already
//                    fills the device, and streaming computes P and dS once instead of twice;
//   3. split-dKdV    otherwise (e.g. GPT-2 124M, B·NH = 96, T = 1024): B·NH·T/BK workgroups for
//                    dK, dV and as many for dQ, which fills a large GPU at the price of computing
//                    the scores twice.
// bench/bench_attention times each variant, which is how the threshold below should be revisited.
#include <math.h>
#include <stdio.h>
#include "backend/webgpu/wg_ops.h"

#define WG_ATTN_STREAM_MIN_HEADS 1024u

// TEST ONLY: -1 (default) unrolls the score loops on real GPUs only; 0 or 1 forces the choice, so
// that the software-GPU tests also run the unrolled form the real GPUs use.
int wg_attention_unroll_override = -1;

typedef struct {
    uint32_t B, T, C, NH;
    uint32_t C3, nblk, hs4, p1;
    float scale_log2, scale, f0, f1;
} attn_params;

typedef struct { uint32_t rows, keys; } attn_tile;

static uint32_t smem_limit(wg_ctx *ctx) { return wg_ctx_info(ctx)->limits.maxComputeWorkgroupStorageSize; }

static uint32_t hs4_of(uint32_t HS) { return (HS + 3) / 4; }

// Whether the score loops over head columns get a constant trip count (unrolled by the shader
// compiler). Not on the software rasterizer: there unrolling costs seconds of shader compilation
// per pipeline and gains nothing that matters.
static int unroll_ok(wg_ctx *ctx) {
    if (wg_attention_unroll_override >= 0) return wg_attention_unroll_override;
    return wg_ctx_info(ctx)->type != WGPUAdapterType_CPU;
}

// Workgroup memory of attention_forward: Q block, one K/V tile, the P tile (as declared there).
static uint32_t fwd_bytes(uint32_t HS, uint32_t rpt, uint32_t bc) {
    uint32_t br = 32 * rpt, hs4 = hs4_of(HS);
    return br * hs4 * 16 + bc * hs4 * 16 + bc * br * 4;
}

// Workgroup memory of the tiled backward kernels: Q and dout tiles, K and V tiles, (P, dS).
static uint32_t bwd_bytes(uint32_t HS, uint32_t bq, uint32_t bk) {
    uint32_t hs4 = hs4_of(HS);
    return 2 * bq * hs4 * 16 + 2 * bk * hs4 * 16 + bq * bk * 8;
}

// Largest T handled by split-short: P and dS (SS² floats each) plus lse and D (SS each).
static uint32_t short_max_t(wg_ctx *ctx) {
    uint32_t lim = smem_limit(ctx), best = 0;
    for (uint32_t ss = 8; ss <= 64; ss += 8)
        if (8 * ss * ss + 8 * ss <= lim) best = ss;
    return best;
}

// Forward tile: (rows per thread, keys per tile), largest first.
static attn_tile fwd_tile(wg_ctx *ctx, uint32_t HS) {
    static const attn_tile cand[] = {{2, 32}, {1, 32}, {1, 16}, {1, 8}};
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if (fwd_bytes(HS, cand[i].rows, cand[i].keys) <= smem_limit(ctx)) return cand[i];
    WGT_ASSERT(0, "attention head size too large for this device's workgroup memory (HS <= 128 is supported)");
    return cand[0];
}

// Backward tile (BQ, BK). The dK/dV kernels keep BK keys resident and stream query tiles, the
// dQ kernel the other way round: each prefers its resident side large.
static attn_tile bwd_tile(wg_ctx *ctx, uint32_t HS, int for_dq) {
    static const attn_tile kv_first[] = {{32, 32}, {16, 32}, {16, 16}, {8, 16}, {8, 8}};
    static const attn_tile q_first[] = {{32, 32}, {32, 16}, {16, 16}, {16, 8}, {8, 8}};
    const attn_tile *c = for_dq ? q_first : kv_first;
    for (size_t i = 0; i < 5; i++)
        if (bwd_bytes(HS, c[i].rows, c[i].keys) <= smem_limit(ctx)) return c[i];
    WGT_ASSERT(0, "attention head size too large for this device's workgroup memory (HS <= 128 is supported)");
    return c[0];
}

static attn_params make_params(uint32_t B, uint32_t T, uint32_t C, uint32_t NH, uint32_t nblk) {
    attn_params p = {B, T, C, NH, 3 * C, nblk, hs4_of(C / NH), 0, 0, 0, 0, 0};
    p.scale = 1.0f / sqrtf((float)(C / NH));  // as the C reference
    p.scale_log2 = p.scale * 1.4426950408889634f;
    return p;
}

static void check_shapes(wgt_backend *be, uint32_t B, uint32_t T, uint32_t C, uint32_t NH) {
    WGT_ASSERT(NH > 0 && C % NH == 0, "attention needs C divisible by the head count");
    uint64_t n = (uint64_t)B * T * 3 * C;
    WGT_ASSERT(n <= UINT32_MAX, "attention kernels index qkv with u32");
    WGT_ASSERT(n <= wg_max_binding_elems(wg_of(be)),
               "qkv [B,T,3C] exceeds the device's storage binding limit; run attention on fewer sequences at a time");
}

void wg_attention_forward(wgt_backend *be, wgt_view out, wgt_view lse, wgt_view qkv, uint32_t B, uint32_t T,
                          uint32_t C, uint32_t NH) {
    if (!B || !T || !C) return;
    check_shapes(be, B, T, C, NH);
    wg_ctx *ctx = wg_of(be);
    uint32_t HS = C / NH;
    attn_tile tl = fwd_tile(ctx, HS);
    char defs[96];
    snprintf(defs, sizeof defs, "const HS=%uu;const RPT=%uu;const BC=%uu;const UNROLL=%s;", HS, tl.rows, tl.keys,
             unroll_ok(ctx) ? "true" : "false");
    uint32_t br = 32 * tl.rows, nblk = (T + br - 1) / br;
    attn_params p = make_params(B, T, C, NH, nblk);
    size_t bt = (size_t)B * T;
    wg_bind b[] = {wg_b(qkv, bt * 3 * C), wg_b(out, bt * C), wg_b(lse, (size_t)B * NH * T)};
    wg_dispatch(ctx, "attention_forward", wg_pipeline(ctx, "05_attention.wgsl", "attention_forward", defs), b, 3, &p,
                sizeof p, (uint64_t)nblk * B * NH);
}

// The variant the automatic rule picks (see the top of this file): 1 streaming, 2 split-dKdV,
// 3 split-short.
int wg_attention_backward_auto_variant(wgt_backend *be, uint32_t B, uint32_t T, uint32_t C, uint32_t NH) {
    if (T <= short_max_t(wg_of(be))) return 3;
    if ((uint64_t)B * NH >= WG_ATTN_STREAM_MIN_HEADS) return 1;
    return 2;
}

static WGPUComputePipeline bwd_pipeline(wg_ctx *ctx, const char *entry, uint32_t HS, attn_tile tl, uint32_t ss) {
    char defs[112];
    snprintf(defs, sizeof defs, "const HS=%uu;const BQ=%uu;const BK=%uu;const SS=%uu;const UNROLL=%s;", HS, tl.rows,
             tl.keys, ss, unroll_ok(ctx) ? "true" : "false");
    return wg_pipeline(ctx, "10_backward_attention.wgsl", entry, defs);
}

// Backward with an explicit variant: 0 auto, 1 streaming, 2 split-dKdV, 3 split-short. A variant
// that cannot run on this shape (split-short above its T limit) falls back to split-dKdV.
// Returns the variant that ran. Tests and benchmarks use it to run each variant; the model calls
// wg_attention_backward.
int wg_attention_backward_with(wgt_backend *be, int variant, wgt_view dqkv, wgt_view dout, wgt_view qkv,
                               wgt_view out, wgt_view lse, uint32_t B, uint32_t T, uint32_t C, uint32_t NH) {
    if (!B || !T || !C) return variant;
    check_shapes(be, B, T, C, NH);
    wg_ctx *ctx = wg_of(be);
    uint32_t HS = C / NH;
    if (variant < 1 || variant > 3) variant = wg_attention_backward_auto_variant(be, B, T, C, NH);
    if (variant == 3 && T > short_max_t(ctx)) variant = 2;
    size_t bt = (size_t)B * T, n3 = bt * 3 * C;
    uint64_t bnh = (uint64_t)B * NH;
    attn_tile none = {16, 16};

    // D_t = dout_t · out_t into the dQ slots (read by every variant)
    attn_params pd = make_params(B, T, C, NH, 0);
    wg_bind bd[] = {wg_b(dqkv, n3), wg_b(dout, bt * C), wg_b(out, bt * C)};
    wg_dispatch(ctx, "attention_backward_dsum", bwd_pipeline(ctx, "attention_backward_dsum", HS, none, 8), bd, 3, &pd,
                sizeof pd, wg_groups(bt * NH, 256));

    wg_bind b[] = {wg_b(dqkv, n3), wg_b(dout, bt * C), wg_b(qkv, n3), wg_b(lse, (size_t)B * NH * T)};
    if (variant == 3) {
        uint32_t ss = (T + 7) / 8 * 8;
        attn_params p = make_params(B, T, C, NH, 1);
        wg_dispatch(ctx, "attention_backward_short", bwd_pipeline(ctx, "attention_backward_short", HS, none, ss), b, 4,
                    &p, sizeof p, bnh);
    } else if (variant == 1) {
        attn_tile tl = bwd_tile(ctx, HS, 0);
        attn_params p = make_params(B, T, C, NH, 1);
        wg_dispatch(ctx, "attention_backward_stream", bwd_pipeline(ctx, "attention_backward_stream", HS, tl, 8), b, 4,
                    &p, sizeof p, bnh);
    } else {
        attn_tile tk = bwd_tile(ctx, HS, 0);
        attn_params pk = make_params(B, T, C, NH, (T + tk.keys - 1) / tk.keys);
        wg_dispatch(ctx, "attention_backward_dkdv", bwd_pipeline(ctx, "attention_backward_dkdv", HS, tk, 8), b, 4, &pk,
                    sizeof pk, (uint64_t)pk.nblk * bnh);
        attn_tile tq = bwd_tile(ctx, HS, 1);
        attn_params pq = make_params(B, T, C, NH, (T + tq.rows - 1) / tq.rows);
        wg_dispatch(ctx, "attention_backward_dq", bwd_pipeline(ctx, "attention_backward_dq", HS, tq, 8), b, 4, &pq,
                    sizeof pq, (uint64_t)pq.nblk * bnh);
    }
    return variant;
}

void wg_attention_backward(wgt_backend *be, wgt_view dqkv, wgt_view dout, wgt_view qkv, wgt_view out, wgt_view lse,
                           uint32_t B, uint32_t T, uint32_t C, uint32_t NH) {
    wg_attention_backward_with(be, 0, dqkv, dout, qkv, out, lse, B, T, C, NH);
}
