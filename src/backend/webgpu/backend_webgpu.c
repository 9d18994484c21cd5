// backend_webgpu.c — the WebGPU backend: fills the wgt_backend table with the runtime's memory
// functions and the per-kernel wrappers of wg_ops_*.c.
#include <stdlib.h>
#include "backend/webgpu/wg_ops.h"

static wgt_status be_buf_alloc(wgt_backend *be, wgt_buf **out, size_t n, const char *label) {
    return wg_buf_alloc(wg_of(be), out, n, label);
}
static void be_buf_free(wgt_backend *be, wgt_buf *b) { wg_buf_free(wg_of(be), b); }
static wgt_status be_upload(wgt_backend *be, wgt_view dst, const void *src, size_t n) { return wg_upload(wg_of(be), dst, src, n); }
static wgt_status be_download(wgt_backend *be, void *dst, wgt_view src, size_t n) { return wg_download(wg_of(be), dst, src, n); }
static void be_fill_zero(wgt_backend *be, wgt_view dst, size_t n) { wg_fill_zero(wg_of(be), dst, n); }
static void be_copy(wgt_backend *be, wgt_view dst, wgt_view src, size_t n) { wg_copy(wg_of(be), dst, src, n); }
static wgt_status be_sync(wgt_backend *be) { return wg_flush(wg_of(be), 1); }
static const char *be_device_name(wgt_backend *be) { return wg_ctx_info(wg_of(be))->name; }
static void be_profile_reset(wgt_backend *be) { wg_profile_reset(wg_of(be)); }
static double be_profile_report(wgt_backend *be, FILE *f) {
    return f ? wg_profile_report(wg_of(be), f) : wg_profile_total_ms(wg_of(be));
}
static void be_free(wgt_backend *be) {
    if (!be) return;
    wg_ctx_free(wg_of(be));
    free(be);
}

wgt_status backend_webgpu_init_ex(wgt_backend **out, const char *adapter, int profile) {
    *out = NULL;
    wg_ctx *ctx;
    WGT_TRY(wg_ctx_init(&ctx, adapter, profile));
    wgt_backend *be = wgt_calloc(1, sizeof *be);
    be->name = "webgpu";
    be->impl = ctx;
    be->buf_alloc = be_buf_alloc;
    be->buf_free = be_buf_free;
    be->upload = be_upload;
    be->download = be_download;
    be->fill_zero = be_fill_zero;
    be->copy = be_copy;
    be->max_binding_elems = wg_max_binding_elems(ctx);
    be->sync = be_sync;
    be->free = be_free;
    be->gelu_inplace = wg_gelu_inplace;
    be->swiglu_combine = wg_swiglu_combine;
    be->cross_entropy = wg_cross_entropy;
    be->sum_losses = wg_sum_losses;
    be->ffn_gelu_backward = wg_ffn_gelu_backward;
    be->ffn_swiglu_backward = wg_ffn_swiglu_backward;
    be->embedding_forward = wg_embedding_forward;
    be->embedding_backward = wg_embedding_backward;
    be->layernorm_forward = wg_layernorm_forward;
    be->layernorm_backward = wg_layernorm_backward;
    be->matmul = wg_matmul;
    be->matmul_t = wg_matmul_t;
    be->matmul_at = wg_matmul_at;
    be->attention_forward = wg_attention_forward;
    be->attention_backward = wg_attention_backward;
    be->residual_forward = wg_residual_forward;
    be->add_inplace = wg_add_inplace;
    be->grad_norm_sq = wg_grad_norm_sq;
    be->grad_clip_scale = wg_grad_clip_scale;
    be->adamw = wg_adamw;
    // optional entries
    be->device_name = be_device_name;
    if (profile) {
        be->profile_reset = be_profile_reset;
        be->profile_report = be_profile_report;
    }
    *out = be;
    return WGT_OK;
}

wgt_status backend_webgpu_init(wgt_backend **out, const char *adapter) {
    return backend_webgpu_init_ex(out, adapter, 0);
}
