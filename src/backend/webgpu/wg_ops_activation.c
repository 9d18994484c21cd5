// wg_ops_activation.c — dispatch wrappers for kernels/06_activation.wgsl.
#include "backend/webgpu/wg_ops.h"

typedef struct { uint32_t n, p0, p1, p2; } n_params;

// Entry `entry` of 06_activation.wgsl over n elements of the nv views (output first, in its
// binding order): one thread per element, or per vec4 where n and every offset allow it.
static void ew_dispatch(wgt_backend *be, const char *entry, const wgt_view *vs, int nv, size_t n) {
    wg_ctx *ctx = wg_of(be);
    WGT_ASSERT(n <= UINT32_MAX, "element-wise kernels index with u32");
    const char *defs;
    int lanes = wg_ew_lanes(n, vs, nv, &defs);
    n_params p = {(uint32_t)(n / lanes), 0, 0, 0};
    wg_bind b[3];
    for (int i = 0; i < nv; i++) b[i] = wg_b(vs[i], n);
    wg_dispatch(ctx, entry, wg_pipeline(ctx, "06_activation.wgsl", entry, defs), b, nv, &p, sizeof p,
                wg_groups(n / lanes, 256));
}

void wg_gelu_inplace(wgt_backend *be, wgt_view x, size_t n) { ew_dispatch(be, "gelu_inplace", &x, 1, n); }

// out may be inp itself (then in place); a buffer cannot be bound writable and read-only in one
// dispatch, so other parts of one buffer are refused
void wg_gelu_forward(wgt_backend *be, wgt_view out, wgt_view inp, size_t n) {
    if (out.buf == inp.buf && out.off == inp.off) {
        wg_gelu_inplace(be, out, n);
        return;
    }
    WGT_ASSERT(out.buf != inp.buf, "gelu_forward's out and inp are parts of one buffer: use gelu_inplace or two buffers");
    wgt_view vs[] = {out, inp};
    ew_dispatch(be, "gelu_forward", vs, 2, n);
}

void wg_swiglu_combine(wgt_backend *be, wgt_view hidden, wgt_view gate, wgt_view up, size_t n) {
    wgt_view vs[] = {hidden, gate, up};
    ew_dispatch(be, "swiglu_combine", vs, 3, n);
}

void wg_geglu_combine(wgt_backend *be, wgt_view hidden, wgt_view gate, wgt_view up, size_t n) {
    wgt_view vs[] = {hidden, gate, up};
    ew_dispatch(be, "geglu_combine", vs, 3, n);
}
