// wg_ops_activation.c — dispatch wrappers for kernels/06_activation.wgsl.
#include "backend/webgpu/wg_ops.h"

typedef struct { uint32_t n, p0, p1, p2; } n_params;

void wg_gelu_inplace(wgt_backend *be, wgt_view x, size_t n) {
    wg_ctx *ctx = wg_of(be);
    WGT_ASSERT(n <= UINT32_MAX, "element-wise kernels index with u32");
    const char *defs;
    int lanes = wg_ew_lanes(n, &x, 1, &defs);
    n_params p = {(uint32_t)(n / lanes), 0, 0, 0};
    wg_bind b[] = {wg_b(x, n)};
    wg_dispatch(ctx, "gelu_inplace", wg_pipeline(ctx, "06_activation.wgsl", "gelu_inplace", defs), b, 1, &p, sizeof p,
                wg_groups(n / lanes, 256));
}

void wg_gelu_forward(wgt_backend *be, wgt_view out, wgt_view inp, size_t n) {
    wg_ctx *ctx = wg_of(be);
    WGT_ASSERT(n <= UINT32_MAX, "element-wise kernels index with u32");
    if (out.buf == inp.buf && out.off == inp.off) {  // the same elements: in place
        wg_gelu_inplace(be, out, n);
        return;
    }
    // a buffer cannot be bound writable and read-only in one dispatch
    WGT_ASSERT(out.buf != inp.buf, "gelu_forward's out and inp are parts of one buffer: use gelu_inplace or two buffers");
    const char *defs;
    wgt_view vs[] = {out, inp};
    int lanes = wg_ew_lanes(n, vs, 2, &defs);
    n_params p = {(uint32_t)(n / lanes), 0, 0, 0};
    wg_bind b[] = {wg_b(out, n), wg_b(inp, n)};
    wg_dispatch(ctx, "gelu_forward", wg_pipeline(ctx, "06_activation.wgsl", "gelu_forward", defs), b, 2, &p, sizeof p,
                wg_groups(n / lanes, 256));
}

void wg_swiglu_combine(wgt_backend *be, wgt_view hidden, wgt_view gate, wgt_view up, size_t n) {
    wg_ctx *ctx = wg_of(be);
    WGT_ASSERT(n <= UINT32_MAX, "element-wise kernels index with u32");
    const char *defs;
    wgt_view vs[] = {hidden, gate, up};
    int lanes = wg_ew_lanes(n, vs, 3, &defs);
    n_params p = {(uint32_t)(n / lanes), 0, 0, 0};
    wg_bind b[] = {wg_b(hidden, n), wg_b(gate, n), wg_b(up, n)};
    wg_dispatch(ctx, "swiglu_combine", wg_pipeline(ctx, "06_activation.wgsl", "swiglu_combine", defs), b, 3, &p,
                sizeof p, wg_groups(n / lanes, 256));
}

void wg_geglu_combine(wgt_backend *be, wgt_view hidden, wgt_view gate, wgt_view up, size_t n) {
    wg_ctx *ctx = wg_of(be);
    WGT_ASSERT(n <= UINT32_MAX, "element-wise kernels index with u32");
    const char *defs;
    wgt_view vs[] = {hidden, gate, up};
    int lanes = wg_ew_lanes(n, vs, 3, &defs);
    n_params p = {(uint32_t)(n / lanes), 0, 0, 0};
    wg_bind b[] = {wg_b(hidden, n), wg_b(gate, n), wg_b(up, n)};
    wg_dispatch(ctx, "geglu_combine", wg_pipeline(ctx, "06_activation.wgsl", "geglu_combine", defs), b, 3, &p,
                sizeof p, wg_groups(n / lanes, 256));
}
