// wg_ops_norm.c — dispatch wrappers for kernels/02_norm.wgsl (layernorm_forward, rmsnorm_forward)
// and kernels/11_backward_norm.wgsl (layernorm_backward, rmsnorm_backward: dinp per row, then the
// parameter gradients by columns).
// One workgroup per row; N*C must fit one storage binding (it does for every GPT-2 activation:
// the op is not split).
#include "backend/webgpu/wg_ops.h"

typedef struct { uint32_t N, C, p0, p1; } ln_params;

static void check_fits(wgt_backend *be, uint64_t NC, const char *op) {
    if (NC > wg_binding_limit(be) || NC > UINT32_MAX) {
        fprintf(stderr, "wgtrain: %s of %llu elements exceeds one storage binding\n", op, (unsigned long long)NC);
        WGT_ASSERT(0, "layernorm tensors must fit one storage binding; use a smaller batch or sequence");
    }
}

void wg_layernorm_forward(wgt_backend *be, wgt_view out, wgt_view mean, wgt_view rstd, wgt_view inp, wgt_view weight,
                          wgt_view bias, uint32_t N, uint32_t C) {
    wg_ctx *ctx = wg_of(be);
    uint64_t NC = (uint64_t)N * C;
    if (N == 0) return;
    check_fits(be, NC, "layernorm_forward");
    ln_params p = {N, C, 0, 0};
    wg_bind b[] = {wg_b(out, NC), wg_b(mean, N), wg_b(rstd, N), wg_b(inp, NC), wg_b(weight, C), wg_b(bias, C)};
    wg_dispatch(ctx, "layernorm_forward", wg_pipeline(ctx, "02_norm.wgsl", "layernorm_forward", NULL), b, 6, &p,
                sizeof p, N);
}

void wg_layernorm_backward(wgt_backend *be, wgt_view dinp, wgt_view dweight, wgt_view dbias, wgt_view dout,
                           wgt_view inp, wgt_view weight, wgt_view mean, wgt_view rstd, uint32_t N, uint32_t C) {
    wg_ctx *ctx = wg_of(be);
    uint64_t NC = (uint64_t)N * C;
    if (N == 0 || C == 0) return;
    check_fits(be, NC, "layernorm_backward");
    ln_params p = {N, C, 0, 0};
    wg_bind b[] = {wg_b(dinp, NC), wg_b(dout, NC), wg_b(inp, NC), wg_b(weight, C), wg_b(mean, N), wg_b(rstd, N)};
    wg_dispatch(ctx, "layernorm_backward", wg_pipeline(ctx, "11_backward_norm.wgsl", "layernorm_backward", NULL), b, 6,
                &p, sizeof p, N);
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
