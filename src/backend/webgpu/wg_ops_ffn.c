// wg_ops_ffn.c — dispatch wrappers for kernels/09_backward_ffn.wgsl: the element-wise gradients
// through GeLU and SwiGLU. One thread per element, or per 4 (vec4) when the sizes allow; wg_dispatch turns more than 65535
// workgroups into a 2-D grid that the kernels flatten with flat_id.
#include "backend/webgpu/wg_ops.h"

typedef struct { uint32_t n, p0, p1, p2; } ffn_params;

void wg_ffn_gelu_backward(wgt_backend *be, wgt_view grad_pre, wgt_view grad_hidden, wgt_view pre_gelu, size_t n) {
    wg_ctx *ctx = wg_of(be);
    WGT_ASSERT(n <= UINT32_MAX, "element-wise kernels index with u32");
    const char *defs;
    wgt_view vs[] = {grad_pre, grad_hidden, pre_gelu};
    int lanes = wg_ew_lanes(n, vs, 3, &defs);
    ffn_params p = {(uint32_t)(n / lanes), 0, 0, 0};
    wg_bind b[] = {wg_b(grad_pre, n), wg_b(grad_hidden, n), wg_b(pre_gelu, n)};
    wg_dispatch(ctx, "ffn_gelu_backward", wg_pipeline(ctx, "09_backward_ffn.wgsl", "ffn_gelu_backward", defs), b, 3,
                &p, sizeof p, wg_groups(n / lanes, 256));
}

// The gated MLPs' backward (SwiGLU, GeGLU): one binding layout, the kernel named by entry.
static void gated_backward(wgt_backend *be, const char *entry, wgt_view grad_gate, wgt_view grad_up,
                           wgt_view grad_hidden, wgt_view gate, wgt_view up, size_t n) {
    wg_ctx *ctx = wg_of(be);
    WGT_ASSERT(n <= UINT32_MAX, "element-wise kernels index with u32");
    const char *defs;
    wgt_view vs[] = {grad_gate, grad_up, grad_hidden, gate, up};
    int lanes = wg_ew_lanes(n, vs, 5, &defs);
    ffn_params p = {(uint32_t)(n / lanes), 0, 0, 0};
    wg_bind b[] = {wg_b(grad_gate, n), wg_b(grad_up, n), wg_b(grad_hidden, n), wg_b(gate, n), wg_b(up, n)};
    wg_dispatch(ctx, entry, wg_pipeline(ctx, "09_backward_ffn.wgsl", entry, defs), b, 5, &p, sizeof p,
                wg_groups(n / lanes, 256));
}

void wg_ffn_swiglu_backward(wgt_backend *be, wgt_view grad_gate, wgt_view grad_up, wgt_view grad_hidden, wgt_view gate,
                            wgt_view up, size_t n) {
    gated_backward(be, "ffn_swiglu_backward", grad_gate, grad_up, grad_hidden, gate, up, n);
}

void wg_ffn_geglu_backward(wgt_backend *be, wgt_view grad_gate, wgt_view grad_up, wgt_view grad_hidden, wgt_view gate,
                           wgt_view up, size_t n) {
    gated_backward(be, "ffn_geglu_backward", grad_gate, grad_up, grad_hidden, gate, up, n);
}
