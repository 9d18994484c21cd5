// wg_ops_residual.c — dispatch wrappers for kernels/14_residual.wgsl (residual_forward,
// add_inplace, dropout_forward, dropout_backward). Tensors larger than one storage binding are
// processed in windows. The additions and the scale run 4 elements a thread where the length and
// every view offset are multiples of 4 (wg_ew_lanes): the windows then start and end on whole
// vec4 too, as wg_binding_chunk and the bindings' 256-byte alignment are multiples of 4 elements.
#include "backend/dropout.h"
#include "backend/webgpu/wg_ops.h"

typedef struct { uint32_t n, out_off, a_off, b_off; } res_params;

static int same_view(wgt_view x, wgt_view y) { return x.buf == y.buf && x.off == y.off; }
static int overlaps(wgt_view x, wgt_view y, size_t n) {
    return x.buf == y.buf && x.off < y.off + n && y.off < x.off + n;
}

// The window's params in the kernel's elements (EW): length and offsets divided by the lanes.
static res_params res_lanes(res_params p, int lanes) {
    res_params q = {p.n / lanes, p.out_off / lanes, p.a_off / lanes, p.b_off / lanes};
    return q;
}

void wg_add_inplace(wgt_backend *be, wgt_view out, wgt_view a, size_t n) {
    wg_ctx *ctx = wg_of(be);
    WGT_ASSERT(!overlaps(out, a, n), "add_inplace: out and a overlap");
    const char *defs;
    const wgt_view vs[] = {out, a};
    const int lanes = wg_ew_lanes(n, vs, 2, &defs);
    WGPUComputePipeline pipe = wg_pipeline(ctx, "14_residual.wgsl", "add_inplace", defs);
    size_t ch = (size_t)wg_binding_chunk(be);
    for (size_t o = 0; o < n; o += ch) {
        size_t k = n - o < ch ? n - o : ch;
        res_params p = {(uint32_t)k, 0, 0, 0};
        wg_bind b[] = {wg_binding_window(out, o, k, &p.out_off), wg_binding_window(a, o, k, &p.a_off)};
        p = res_lanes(p, lanes);
        wg_dispatch(ctx, "add_inplace", pipe, b, 2, &p, sizeof p, wg_groups(p.n, 256));
    }
}

typedef struct { uint32_t n, off; float s; uint32_t p0; } scale_params;

void wg_scale_inplace(wgt_backend *be, wgt_view x, size_t n, float s) {
    wg_ctx *ctx = wg_of(be);
    const char *defs;
    const int lanes = wg_ew_lanes(n, &x, 1, &defs);
    WGPUComputePipeline pipe = wg_pipeline(ctx, "14_residual.wgsl", "scale_inplace", defs);
    size_t ch = (size_t)wg_binding_chunk(be);
    for (size_t o = 0; o < n; o += ch) {
        size_t k = n - o < ch ? n - o : ch;
        scale_params p = {(uint32_t)k, 0, s, 0};
        wg_bind b[] = {wg_binding_window(x, o, k, &p.off)};
        p.n /= (uint32_t)lanes, p.off /= (uint32_t)lanes;
        wg_dispatch(ctx, "scale_inplace", pipe, b, 1, &p, sizeof p, wg_groups(p.n, 256));
    }
}

void wg_residual_forward(wgt_backend *be, wgt_view out, wgt_view a, wgt_view b, size_t n) {
    // out = a + b with out aliasing a (or b) is out += b (or a): a buffer cannot be bound both
    // read-only and writable in one dispatch, and in place needs no read-only copy anyway.
    if (same_view(out, a)) { wg_add_inplace(be, out, b, n); return; }
    if (same_view(out, b)) { wg_add_inplace(be, out, a, n); return; }
    WGT_ASSERT(!overlaps(out, a, n) && !overlaps(out, b, n), "residual_forward: out partially overlaps an input");
    wg_ctx *ctx = wg_of(be);
    const char *defs;
    const wgt_view vs[] = {out, a, b};
    const int lanes = wg_ew_lanes(n, vs, 3, &defs);
    WGPUComputePipeline pipe = wg_pipeline(ctx, "14_residual.wgsl", "residual_forward", defs);
    size_t ch = (size_t)wg_binding_chunk(be);
    for (size_t o = 0; o < n; o += ch) {
        size_t k = n - o < ch ? n - o : ch;
        res_params p = {(uint32_t)k, 0, 0, 0};
        wg_bind bd[] = {wg_binding_window(out, o, k, &p.out_off), wg_binding_window(a, o, k, &p.a_off),
                        wg_binding_window(b, o, k, &p.b_off)};
        p = res_lanes(p, lanes);
        wg_dispatch(ctx, "residual_forward", pipe, bd, 3, &p, sizeof p, wg_groups(p.n, 256));
    }
}

typedef struct {
    uint32_t n, out_off, in_off, thr, seed, stream, base_lo, base_hi;
    float scale;
    uint32_t p0, p1, p2;
} drop_params;  // DropParams

// out = dropout(inp), in windows of wg_binding_chunk elements; the window's first element index
// goes to the kernel (base_lo, base_hi), so the mask is that of the whole tensor whatever the
// windows.
static void dropout_map(wgt_backend *be, wgt_view out, wgt_view inp, size_t n, float p, uint32_t seed,
                        uint32_t stream, const char *what) {
    WGT_ASSERT(p >= 0.0f && p < 1.0f, "dropout needs p in [0, 1)");
    const uint32_t thr = wgt_dropout_threshold(p);
    const int inplace = same_view(out, inp);
    if (inplace && thr == 0) return;  // p = 0 in place: nothing to do
    WGT_ASSERT(inplace || !overlaps(out, inp, n), "dropout: out partially overlaps inp");
    wg_ctx *ctx = wg_of(be);
    const char *entry = inplace ? "dropout_inplace" : "dropout";
    // the module's EW alias, which dropout does not use (its mask is drawn per element)
    WGPUComputePipeline pipe = wg_pipeline(ctx, "14_residual.wgsl", entry, WG_EW_F32);
    size_t ch = (size_t)wg_binding_chunk(be);
    for (size_t o = 0; o < n; o += ch) {
        size_t k = n - o < ch ? n - o : ch;
        uint64_t base = o;
        drop_params q = {(uint32_t)k, 0, 0, thr, seed, stream, (uint32_t)base, (uint32_t)(base >> 32),
                         wgt_dropout_scale(p), 0, 0, 0};
        if (inplace) {
            wg_bind b[] = {wg_binding_window(out, o, k, &q.out_off)};
            wg_dispatch(ctx, what, pipe, b, 1, &q, sizeof q, wg_groups(k, 256));
        } else {
            wg_bind b[] = {wg_binding_window(out, o, k, &q.out_off), wg_binding_window(inp, o, k, &q.in_off)};
            wg_dispatch(ctx, what, pipe, b, 2, &q, sizeof q, wg_groups(k, 256));
        }
    }
}

void wg_dropout_forward(wgt_backend *be, wgt_view out, wgt_view inp, size_t n, float p, uint32_t seed,
                        uint32_t stream) {
    dropout_map(be, out, inp, n, p, seed, stream, "dropout_forward");
}

void wg_dropout_backward(wgt_backend *be, wgt_view dinp, wgt_view dout, size_t n, float p, uint32_t seed,
                         uint32_t stream) {
    dropout_map(be, dinp, dout, n, p, seed, stream, "dropout_backward");
}
