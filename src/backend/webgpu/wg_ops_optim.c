// wg_ops_optim.c — dispatch wrappers for kernels/13_optimizer.wgsl: gradient norm (two-stage
// reduction), the optimizer status of an update and AdamW. Nothing here reads back: the norm,
// the clip multiplier, the update count and the loss scale stay in the optimizer status buffer
// (backend/opt_status.h) that the next kernels read.
//
// The norm's first stage needs a buffer of partial sums that the op signature does not provide:
// the runtime's scratch slot (1024 floats), allocated on first use and freed with the device.
#include <math.h>
#include <string.h>
#include "backend/opt_status.h"
#include "backend/webgpu/wg_ops.h"

#define NORM_MAX_WG 1024u   // stage-1 workgroups: enough to fill a large GPU, few to add up

static wgt_buf *norm_scratch(wgt_backend *be) {
    wgt_buf *b = wg_scratch(wg_of(be), WG_SCRATCH_NORM, NORM_MAX_WG, "grad-norm partials");
    WGT_ASSERT(b != NULL, "could not allocate the 4 KiB gradient-norm scratch buffer");
    return b;
}

typedef struct { uint32_t n, nwg, g_off, out_off, accumulate, p0, p1, p2; } norm_params;

void wg_grad_norm_sq(wgt_backend *be, wgt_view norm_sq, wgt_view g, size_t n, uint32_t accumulate) {
    wg_ctx *ctx = wg_of(be);
    wgt_view part = wgt_view_of(norm_scratch(be), 0, NORM_MAX_WG);
    WGPUComputePipeline p1 = wg_pipeline(ctx, "13_optimizer.wgsl", "grad_norm_partial", NULL);
    WGPUComputePipeline p2 = wg_pipeline(ctx, "13_optimizer.wgsl", "grad_norm_sq", NULL);
    size_t ch = (size_t)wg_binding_chunk(be);
    size_t o = 0;
    do {  // one chunk per binding window; chunks after the first add to norm_sq
        size_t k = n - o < ch ? n - o : ch;
        // ~4 elements a thread at least, at most NORM_MAX_WG workgroups; 1 for an empty tensor
        uint64_t nwg = wg_groups(k, 1024);
        if (nwg > NORM_MAX_WG) nwg = NORM_MAX_WG;
        if (nwg == 0) nwg = 1;
        norm_params p = {(uint32_t)k, (uint32_t)nwg, 0, 0, (accumulate || o > 0) ? 1u : 0u, 0, 0, 0};
        wg_bind b1[] = {wg_b(part, nwg), wg_binding_window(g, o, k, &p.g_off)};
        wg_dispatch3(ctx, "grad_norm_partial", p1, b1, 2, &p, sizeof p, (uint32_t)nwg, 1, 1);
        wg_bind b2[] = {wg_binding_window(norm_sq, 0, 1, &p.out_off), wg_b(part, nwg)};
        wg_dispatch3(ctx, "grad_norm_sq", p2, b2, 2, &p, sizeof p, 1, 1, 1);
        o += k;
    } while (o < n);
}

typedef struct { float max_norm, beta1, beta2; uint32_t dynamic, window, st_off, p0, p1; } clip_params;

void wg_grad_clip_scale(wgt_backend *be, wgt_view status, float max_norm, float beta1, float beta2, uint32_t dynamic,
                        uint32_t window) {
    wg_ctx *ctx = wg_of(be);
    clip_params p = {max_norm, beta1, beta2, dynamic, window, 0, 0, 0};
    wg_bind b[] = {wg_binding_window(status, 0, WGT_ST_WORDS, &p.st_off)};
    wg_dispatch3(ctx, "grad_clip_scale", wg_pipeline(ctx, "13_optimizer.wgsl", "grad_clip_scale", NULL), b, 1, &p,
                 sizeof p, 1, 1, 1);
}

typedef struct {
    uint32_t n, p_off, m_off, v_off, g_off, s_off, p0, p1;
    float lr, beta1, beta2, eps, weight_decay, p2, p3, p4;
} adam_params;

void wg_adamw(wgt_backend *be, wgt_view params, wgt_view m, wgt_view v, wgt_view grads, wgt_view status, size_t n,
              float lr, float beta1, float beta2, float eps, float weight_decay) {
    wg_ctx *ctx = wg_of(be);
    WGPUComputePipeline pipe = wg_pipeline(ctx, "13_optimizer.wgsl", "adamw", NULL);
    size_t ch = (size_t)wg_binding_chunk(be);
    for (size_t o = 0; o < n; o += ch) {
        size_t k = n - o < ch ? n - o : ch;
        adam_params p = {(uint32_t)k, 0, 0, 0, 0, 0, 0, 0, lr, beta1, beta2, eps, weight_decay, 0, 0, 0};
        wg_bind b[] = {wg_binding_window(params, o, k, &p.p_off), wg_binding_window(m, o, k, &p.m_off),
                       wg_binding_window(v, o, k, &p.v_off), wg_binding_window(grads, o, k, &p.g_off),
                       wg_binding_window(status, 0, WGT_ST_WORDS, &p.s_off)};
        wg_dispatch(ctx, "adamw", pipe, b, 5, &p, sizeof p, wg_groups(k, 256));
    }
}
