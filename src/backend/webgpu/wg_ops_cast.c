// wg_ops_cast.c — dispatch wrappers for kernels/08_cast.wgsl (cast_f16, cast_f32): one thread a
// 4-byte word of the f16 side, both tensors cut into binding windows, so a cast of any length and
// at any word offset works (the model casts the whole weight range in one call).
#include "backend/webgpu/wg_ops.h"

typedef struct { uint32_t n, words, out_off, inp_off; } cast_params;  // CastParams / WidenParams

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

// Words of the f16 side per dispatch: the f32 side's window (2 elements a word, plus the
// alignment remainder) must fit one binding, and the index a u32.
static uint64_t chunk_words(wgt_backend *be) {
    uint64_t lim = wg_binding_limit(be);
    uint64_t w = (lim - WGT_VIEW_ALIGN) / 2;
    w = min_u64(w, (uint64_t)1 << 30);
    return w / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
}

void wg_cast_f16(wgt_backend *be, wgt_view out, wgt_view inp, size_t n) {
    wg_ctx *ctx = wg_of(be);
    if (n == 0) return;
    const int native = wg_f16_native(ctx);
    const char *defs = native ? "alias CF_OUT_T = vec2<f16>;\nfn cf_store(i : u32, w : u32) { cf_out[i] = bitcast<vec2<f16>>(w); }\n"
                              : "alias CF_OUT_T = u32;\nfn cf_store(i : u32, w : u32) { cf_out[i] = w; }\n";
    WGPUComputePipeline pipe = wg_pipeline(ctx, "08_cast.wgsl", "cast_f16", defs);
    const uint64_t words = (n + 1) / 2, cw = chunk_words(be);
    for (uint64_t w0 = 0; w0 < words; w0 += cw) {
        uint64_t wc = min_u64(cw, words - w0), e0 = 2 * w0, ec = min_u64(2 * wc, n - e0);
        cast_params p = {(uint32_t)ec, (uint32_t)wc, 0, 0};
        wg_bind b[] = {wg_binding_window(out, w0, wc, &p.out_off), wg_binding_window(inp, e0, ec, &p.inp_off)};
        wg_dispatch(ctx, native ? "cast_f16 (native)" : "cast_f16 (packed)", pipe, b, 2, &p, sizeof p, wg_groups(wc, 256));
    }
}

void wg_cast_f32(wgt_backend *be, wgt_view out, wgt_view inp, size_t n) {
    wg_ctx *ctx = wg_of(be);
    if (n == 0) return;
    WGPUComputePipeline pipe = wg_pipeline(ctx, "08_cast.wgsl", "cast_f32", "alias CF_OUT_T = u32;\nfn cf_store(i : u32, w : u32) { cf_out[i] = w; }\n");
    const uint64_t words = (n + 1) / 2, cw = chunk_words(be);
    for (uint64_t w0 = 0; w0 < words; w0 += cw) {
        uint64_t wc = min_u64(cw, words - w0), e0 = 2 * w0, ec = min_u64(2 * wc, n - e0);
        cast_params p = {(uint32_t)ec, (uint32_t)wc, 0, 0};
        wg_bind b[] = {wg_binding_window(out, e0, ec, &p.out_off), wg_binding_window(inp, w0, wc, &p.inp_off)};
        wg_dispatch(ctx, "cast_f32", pipe, b, 2, &p, sizeof p, wg_groups(wc, 256));
    }
}
