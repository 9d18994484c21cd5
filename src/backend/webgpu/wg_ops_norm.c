// wg_ops_norm.c — dispatch wrappers for kernels/02_norm.wgsl (layernorm_forward, rmsnorm_forward)
// and kernels/11_backward_norm.wgsl (layernorm_backward, rmsnorm_backward: dinp per row, then the
// parameter gradients by columns).
// One workgroup per row (the parameter gradients in two stages where C allows vec4: see
// ln_params_two_stage); N*C must fit one storage binding (it does for every GPT-2 activation:
// the op is not split).
#include "backend/webgpu/wg_ops.h"

typedef struct { uint32_t N, C, p0, p1; } ln_params;

static void check_fits(wgt_backend *be, uint64_t NC, const char *op) {
    if (NC > wg_binding_limit(be) || NC > UINT32_MAX) {
        fprintf(stderr, "wgtrain: %s of %llu elements exceeds one storage binding\n", op, (unsigned long long)NC);
        WGT_ASSERT(0, "layernorm tensors must fit one storage binding; use a smaller batch or sequence");
    }
}

// The row kernels of 19_norm_rows.wgsl: the lanes a row (the device's least subgroup size, a
// power of 2 from 4, at most 32), or 0 where subgroups are missing or C is not a multiple of 4
// (then 02_norm.wgsl's and 11_backward_norm.wgsl's kernel of a workgroup a row runs).
static uint32_t ln_rows_lanes(wg_ctx *ctx, uint32_t C) {
    const wg_device_info *in = wg_ctx_info(ctx);
    const uint32_t s = in->subgroup_min;
    if (C == 0 || C % 4 || !in->has_subgroups || s < 4 || (s & (s - 1))) return 0;
    return s < 32 ? s : 32;
}
// regs: the backward's LN_NJ, a lane's vec4 of a row held in registers, up to LN_ROW_REGS (0: each
// pass reads the row again, as the forward does)
#define LN_ROW_REGS 16
static WGPUComputePipeline ln_rows_pipeline(wg_ctx *ctx, const char *entry, uint32_t rl, uint32_t C, int regs) {
    char defs[224];
    const uint32_t nj = (C / 4 + rl - 1) / rl;
    snprintf(defs, sizeof defs,
             "const LN_RL=%uu;const LN_NJ=%uu;fn ln_rsum(x:f32)->f32{var y=x;for(var i=1u;i<LN_RL;i=i<<1u){"
             "y=y+subgroupShuffleXor(y,i);}return y;}",
             rl, regs && nj <= LN_ROW_REGS ? nj : 0);
    return wg_pipeline(ctx, "19_norm_rows.wgsl", entry, defs);
}

void wg_layernorm_forward(wgt_backend *be, wgt_view out, wgt_view mean, wgt_view rstd, wgt_view inp, wgt_view weight,
                          wgt_view bias, uint32_t N, uint32_t C) {
    wg_ctx *ctx = wg_of(be);
    uint64_t NC = (uint64_t)N * C;
    if (N == 0) return;
    check_fits(be, NC, "layernorm_forward");
    ln_params p = {N, C, 0, 0};
    wg_bind b[] = {wg_b(out, NC), wg_b(mean, N), wg_b(rstd, N), wg_b(inp, NC), wg_b(weight, C), wg_b(bias, C)};
    const uint32_t rl = ln_rows_lanes(ctx, C);
    if (rl) {
        wg_dispatch(ctx, "layernorm_forward", ln_rows_pipeline(ctx, "layernorm_forward_rows", rl, C, 0), b, 6, &p,
                    sizeof p, wg_groups(N, 256 / rl));
        return;
    }
    wg_dispatch(ctx, "layernorm_forward", wg_pipeline(ctx, "02_norm.wgsl", "layernorm_forward", NULL), b, 6, &p,
                sizeof p, N);
}

// dweight, dbias += the column sums in two stages (layernorm_backward_params_part, then
// matmul_colsum_finish for each) where C and the views allow vec4 and the partials fit; else 0
// and the one-stage layernorm_backward_params runs.
static int ln_params_two_stage(wgt_backend *be, wgt_view dweight, wgt_view dbias, wgt_view dout, wgt_view inp,
                               wgt_view mean, wgt_view rstd, uint32_t N, uint32_t C) {
    wg_ctx *ctx = wg_of(be);
    const uint64_t NC = (uint64_t)N * C, nchunk = (N + WG_COLSUM_ROWS - 1) / WG_COLSUM_ROWS, blocks = (C + 63) / 64;
    const uint32_t maxd = wg_ctx_info(ctx)->limits.maxComputeWorkgroupsPerDimension;
    if (C % 4 || dout.off % 4 || inp.off % 4 || dweight.off % 4 || dbias.off % 4 || nchunk > maxd || blocks > maxd)
        return 0;
    wgt_buf *part = wg_colsum_scratch(be, 2 * nchunk * C);
    if (!part) return 0;
    wgt_view pv = wgt_view_of(part, 0, (size_t)(2 * nchunk * C));
    struct { uint32_t N, C, nchunk, p0; } q = {N, C, (uint32_t)nchunk, 0};
    wg_bind b[] = {wg_b(pv, (size_t)(2 * nchunk * C)), wg_b(dout, NC), wg_b(inp, NC), wg_b(mean, N), wg_b(rstd, N)};
    wg_dispatch3(ctx, "layernorm_backward_params",
                 wg_pipeline(ctx, "11_backward_norm.wgsl", "layernorm_backward_params_part", NULL), b, 5, &q, sizeof q,
                 (uint32_t)blocks, (uint32_t)nchunk, 1);
    wg_colsum_finish(be, "layernorm_backward_params", dweight, pv, C, (uint32_t)nchunk, 0);
    wg_colsum_finish(be, "layernorm_backward_params", dbias, pv, C, (uint32_t)nchunk, (uint32_t)(nchunk * C));
    return 1;
}

void wg_layernorm_backward(wgt_backend *be, wgt_view dinp, wgt_view dweight, wgt_view dbias, wgt_view dout,
                           wgt_view inp, wgt_view weight, wgt_view mean, wgt_view rstd, uint32_t N, uint32_t C) {
    wg_ctx *ctx = wg_of(be);
    uint64_t NC = (uint64_t)N * C;
    if (N == 0 || C == 0) return;
    check_fits(be, NC, "layernorm_backward");
    ln_params p = {N, C, 0, 0};
    wg_bind b[] = {wg_b(dinp, NC), wg_b(dout, NC), wg_b(inp, NC), wg_b(weight, C), wg_b(mean, N), wg_b(rstd, N)};
    const uint32_t rl = ln_rows_lanes(ctx, C);
    if (rl)
        wg_dispatch(ctx, "layernorm_backward", ln_rows_pipeline(ctx, "layernorm_backward_rows", rl, C, 1), b, 6, &p,
                    sizeof p, wg_groups(N, 256 / rl));
    else
        wg_dispatch(ctx, "layernorm_backward", wg_pipeline(ctx, "11_backward_norm.wgsl", "layernorm_backward", NULL), b,
                    6, &p, sizeof p, N);
    if (ln_params_two_stage(be, dweight, dbias, dout, inp, mean, rstd, N, C)) return;
    wg_bind bp[] = {wg_b(dweight, C), wg_b(dbias, C), wg_b(dout, NC), wg_b(inp, NC), wg_b(mean, N), wg_b(rstd, N)};
    wg_dispatch(ctx, "layernorm_backward_params",
                wg_pipeline(ctx, "11_backward_norm.wgsl", "layernorm_backward_params", NULL), bp, 6, &p, sizeof p,
                wg_groups(C, 8));
}

typedef struct { uint32_t N, C; float eps; uint32_t p0; } rms_params;

void wg_rmsnorm_forward(wgt_backend *be, wgt_view out, wgt_view rstd, wgt_view inp, wgt_view weight, uint32_t N,
                        uint32_t C, float eps) {
    wg_ctx *ctx = wg_of(be);
    uint64_t NC = (uint64_t)N * C;
    if (N == 0) return;
    check_fits(be, NC, "rmsnorm_forward");
    rms_params p = {N, C, eps, 0};
    wg_bind b[] = {wg_b(out, NC), wg_b(rstd, N), wg_b(inp, NC), wg_b(weight, C)};
    wg_dispatch(ctx, "rmsnorm_forward", wg_pipeline(ctx, "02_norm.wgsl", "rmsnorm_forward", NULL), b, 4, &p, sizeof p, N);
}

void wg_rmsnorm_backward(wgt_backend *be, wgt_view dinp, wgt_view dweight, wgt_view dout, wgt_view inp,
                         wgt_view weight, wgt_view rstd, uint32_t N, uint32_t C) {
    wg_ctx *ctx = wg_of(be);
    uint64_t NC = (uint64_t)N * C;
    if (N == 0 || C == 0) return;
    check_fits(be, NC, "rmsnorm_backward");
    ln_params p = {N, C, 0, 0};
    wg_bind b[] = {wg_b(dinp, NC), wg_b(dout, NC), wg_b(inp, NC), wg_b(weight, C), wg_b(rstd, N)};
    wg_dispatch(ctx, "rmsnorm_backward", wg_pipeline(ctx, "11_backward_norm.wgsl", "rmsnorm_backward", NULL), b, 5, &p,
                sizeof p, N);
    wg_bind bp[] = {wg_b(dweight, C), wg_b(dout, NC), wg_b(inp, NC), wg_b(rstd, N)};
    wg_dispatch(ctx, "rmsnorm_backward_params", wg_pipeline(ctx, "11_backward_norm.wgsl", "rmsnorm_backward_params", NULL),
                bp, 4, &p, sizeof p, wg_groups(C, 8));
}

// qk_norm_forward / qk_norm_backward: one workgroup per head row of qkv (B·T·(NH + 2·NKV) rows),
// then the weights' column kernel (2·HS columns, 8 a workgroup).
typedef struct { uint32_t N, NH, NKV, HS; float eps, w_offset; uint32_t p0, p1; } qkn_params;

void wg_qk_norm_forward(wgt_backend *be, wgt_view out, wgt_view rstd, wgt_view qkv, wgt_view q_weight,
                        wgt_view k_weight, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, float eps,
                        float w_offset) {
    wg_ctx *ctx = wg_of(be);
    const uint64_t N = (uint64_t)B * T, rows = N * ((uint64_t)NH + 2 * (uint64_t)NKV), n = rows * HS;
    if (n == 0) return;
    check_fits(be, n, "qk_norm_forward");
    qkn_params p = {(uint32_t)N, NH, NKV, HS, eps, w_offset, 0, 0};
    wg_bind b[] = {wg_b(out, n), wg_b(rstd, N * (NH + NKV)), wg_b(qkv, n), wg_b(q_weight, HS), wg_b(k_weight, HS)};
    wg_dispatch(ctx, "qk_norm_forward", wg_pipeline(ctx, "02_norm.wgsl", "qk_norm_forward", NULL), b, 5, &p, sizeof p,
                rows);
}

void wg_qk_norm_backward(wgt_backend *be, wgt_view dqkv, wgt_view dq_weight, wgt_view dk_weight, wgt_view dout,
                         wgt_view qkv, wgt_view q_weight, wgt_view k_weight, wgt_view rstd, uint32_t B, uint32_t T,
                         uint32_t NH, uint32_t NKV, uint32_t HS, float w_offset) {
    wg_ctx *ctx = wg_of(be);
    const uint64_t N = (uint64_t)B * T, rows = N * ((uint64_t)NH + 2 * (uint64_t)NKV), n = rows * HS;
    const uint64_t nr = N * (NH + NKV);
    if (n == 0) return;
    check_fits(be, n, "qk_norm_backward");
    qkn_params p = {(uint32_t)N, NH, NKV, HS, 0, w_offset, 0, 0};
    wg_bind b[] = {wg_b(dqkv, n), wg_b(dout, n), wg_b(qkv, n), wg_b(q_weight, HS), wg_b(k_weight, HS), wg_b(rstd, nr)};
    wg_dispatch(ctx, "qk_norm_backward", wg_pipeline(ctx, "11_backward_norm.wgsl", "qk_norm_backward", NULL), b, 6, &p,
                sizeof p, rows);
    wg_bind bp[] = {wg_b(dq_weight, HS), wg_b(dk_weight, HS), wg_b(dout, n), wg_b(qkv, n), wg_b(rstd, nr)};
    wg_dispatch(ctx, "qk_norm_backward_params",
                wg_pipeline(ctx, "11_backward_norm.wgsl", "qk_norm_backward_params", NULL), bp, 5, &p, sizeof p,
                wg_groups(2 * (uint64_t)HS, 8));
}
