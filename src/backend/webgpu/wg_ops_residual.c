// wg_ops_residual.c — dispatch wrappers for kernels/14_residual.wgsl (residual_forward,
// add_inplace). Tensors larger than one storage binding are processed in windows.
#include "backend/webgpu/wg_ops.h"

typedef struct { uint32_t n, out_off, a_off, b_off; } res_params;

// elements per dispatch: one binding (less the alignment slack), whole multiples of 64
static size_t res_chunk(wgt_backend *be) {
    uint64_t c = (wg_binding_limit(be) - WGT_VIEW_ALIGN) / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
    if (c > (uint64_t)UINT32_MAX - 255) c = ((uint64_t)UINT32_MAX - 255) / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
    return (size_t)c;
}

static int same_view(wgt_view x, wgt_view y) { return x.buf == y.buf && x.off == y.off; }
static int overlaps(wgt_view x, wgt_view y, size_t n) {
    return x.buf == y.buf && x.off < y.off + n && y.off < x.off + n;
}

void wg_add_inplace(wgt_backend *be, wgt_view out, wgt_view a, size_t n) {
    wg_ctx *ctx = wg_of(be);
    WGT_ASSERT(!overlaps(out, a, n), "add_inplace: out and a overlap");
    WGPUComputePipeline pipe = wg_pipeline(ctx, "14_residual.wgsl", "add_inplace", NULL);
    size_t ch = res_chunk(be);
    for (size_t o = 0; o < n; o += ch) {
        size_t k = n - o < ch ? n - o : ch;
        res_params p = {(uint32_t)k, 0, 0, 0};
        wg_bind b[] = {wg_binding_window(out, o, k, &p.out_off), wg_binding_window(a, o, k, &p.a_off)};
        wg_dispatch(ctx, "add_inplace", pipe, b, 2, &p, sizeof p, wg_groups(k, 256));
    }
}

void wg_residual_forward(wgt_backend *be, wgt_view out, wgt_view a, wgt_view b, size_t n) {
    // out = a + b with out aliasing a (or b) is out += b (or a): a buffer cannot be bound both
    // read-only and writable in one dispatch, and in place needs no read-only copy anyway.
    if (same_view(out, a)) { wg_add_inplace(be, out, b, n); return; }
    if (same_view(out, b)) { wg_add_inplace(be, out, a, n); return; }
    WGT_ASSERT(!overlaps(out, a, n) && !overlaps(out, b, n), "residual_forward: out partially overlaps an input");
    wg_ctx *ctx = wg_of(be);
    WGPUComputePipeline pipe = wg_pipeline(ctx, "14_residual.wgsl", "residual_forward", NULL);
    size_t ch = res_chunk(be);
    for (size_t o = 0; o < n; o += ch) {
        size_t k = n - o < ch ? n - o : ch;
        res_params p = {(uint32_t)k, 0, 0, 0};
        wg_bind bd[] = {wg_binding_window(out, o, k, &p.out_off), wg_binding_window(a, o, k, &p.a_off),
                        wg_binding_window(b, o, k, &p.b_off)};
        wg_dispatch(ctx, "residual_forward", pipe, bd, 3, &p, sizeof p, wg_groups(k, 256));
    }
}
