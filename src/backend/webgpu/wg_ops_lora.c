// wg_ops_lora.c — dispatch wrapper for kernels/18_lora.wgsl (add_cols). The matrices of LoRA's
// adapters and of the projections they sit beside fit one storage binding (the model allocates
// them so), so one dispatch covers the window.
#include "backend/webgpu/wg_ops.h"

typedef struct {
    uint32_t N, OS, IS, W, oo, io;
    float scale;
    uint32_t acc, out_off, in_off, p0, p1;
} cols_params;  // ColsParams

void wg_add_cols(wgt_backend *be, wgt_view out, wgt_view inp, uint32_t N, uint32_t OS, uint32_t IS, uint32_t W,
                 uint32_t oo, uint32_t io, float scale, uint32_t accumulate) {
    WGT_ASSERT((uint64_t)oo + W <= OS && (uint64_t)io + W <= IS, "add_cols: a column window lies outside its matrix");
    WGT_ASSERT((uint64_t)N * W <= UINT32_MAX, "add_cols: N x W is above 2^32 elements");
    WGT_ASSERT(out.buf != inp.buf, "add_cols: out and inp share a buffer");
    const uint64_t no = (uint64_t)N * OS, ni = (uint64_t)N * IS;
    WGT_ASSERT(no <= wg_binding_limit(be) && ni <= wg_binding_limit(be), "add_cols: a matrix above one storage binding");
    wg_ctx *ctx = wg_of(be);
    WGPUComputePipeline pipe = wg_pipeline(ctx, "18_lora.wgsl", "add_cols", NULL);
    cols_params p = {N, OS, IS, W, oo, io, scale, accumulate ? 1u : 0u, 0, 0, 0, 0};
    wg_bind b[] = {wg_binding_window(out, 0, no, &p.out_off), wg_binding_window(inp, 0, ni, &p.in_off)};
    wg_dispatch(ctx, "add_cols", pipe, b, 2, &p, sizeof p, wg_groups((uint64_t)N * W, 256));
}
