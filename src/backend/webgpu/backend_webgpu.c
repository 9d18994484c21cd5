// backend_webgpu.c — the WebGPU backend: fills the wgt_backend table with the runtime's memory
// functions and, for every op of op_list.h, a forwarder that checks the views and calls the
// op's wrapper in wg_ops_*.c.
#include <stdlib.h>
#include "backend/op_desc.h"
#include "backend/webgpu/wg_tune.h"
#include "backend/webgpu/wg_ops.h"

static wgt_status be_buf_alloc(wgt_backend *be, wgt_buf **out, size_t n, const char *label) {
    return wg_buf_alloc(wg_of(be), out, n, label);
}
static size_t be_buf_elems(const wgt_buf *b) { return b->n_elems; }
static void be_buf_free(wgt_backend *be, wgt_buf *b) { wg_buf_free(wg_of(be), b); }
static wgt_status be_upload(wgt_backend *be, wgt_view dst, const void *src, size_t n) { return wg_upload(wg_of(be), dst, src, n); }
static wgt_status be_download(wgt_backend *be, void *dst, wgt_view src, size_t n) { return wg_download(wg_of(be), dst, src, n); }
static void be_fill_zero(wgt_backend *be, wgt_view dst, size_t n) { wg_fill_zero(wg_of(be), dst, n); }
static void be_copy(wgt_backend *be, wgt_view dst, wgt_view src, size_t n) { wg_copy(wg_of(be), dst, src, n); }
static wgt_status be_sync(wgt_backend *be) { return wg_flush(wg_of(be), 1); }
static const char *be_device_name(wgt_backend *be) { return wg_ctx_info(wg_of(be))->name; }
static int be_device_is_software(wgt_backend *be) { return wg_ctx_info(wg_of(be))->type == WGPUAdapterType_CPU; }
static void be_profile_reset(wgt_backend *be) { wg_profile_reset(wg_of(be)); }
static double be_profile_report(wgt_backend *be, FILE *f) {
    return f ? wg_profile_report(wg_of(be), f) : wg_profile_total_ms(wg_of(be));
}
static wgt_status be_readback_begin(wgt_backend *be, int slot, wgt_view src, size_t n) {
    return wg_readback_begin(wg_of(be), slot, src, n);
}
static wgt_status be_readback_end(wgt_backend *be, int slot, void *dst, size_t n, int wait, int *ready) {
    return wg_readback_end(wg_of(be), slot, dst, n, wait, ready);
}
static void be_get_stats(wgt_backend *be, wgt_backend_stats *out) { wg_get_stats(wg_of(be), out); }
static wgt_status be_timer_start(wgt_backend *be) { return wg_timer_start(wg_of(be)); }
static wgt_status be_timer_stop(wgt_backend *be, double *ms, long *passes) { return wg_timer_stop(wg_of(be), ms, passes); }
static void be_bytes_allocated(wgt_backend *be, uint64_t *live, uint64_t *peak) { wg_bytes_allocated(wg_of(be), live, peak); }
static int be_dry_run(wgt_backend *be, int on) {
    wg_dry_run(wg_of(be), on);
    return wg_pipeline_count(wg_of(be));
}
static void be_free(wgt_backend *be) {
    if (!be) return;
    wg_ctx_free(wg_of(be));
    free(be);
}

// Generated forwarders: each checks its views against the op's shapes, then records the
// op's dispatches (wg_ops_<family>.c).
#define FWD_PASS_B(name, role, type, shape) , name
#define FWD_PASS_S(name, type, def, lo, hi) , name
#define FWD(op, summary)                                                          \
    static void fwd_##op(wgt_backend *be WGT_OP_##op(WGT_PARAM_B, WGT_PARAM_S)) { \
        WGT_OP_CHECK_VIEWS(op);                                                   \
        wg_##op(be WGT_OP_##op(FWD_PASS_B, FWD_PASS_S));                          \
    }
WGT_OPS(FWD)

wgt_status backend_webgpu_init_ex(wgt_backend **out, const char *adapter, int profile) {
    *out = NULL;
    wg_ctx *ctx;
    WGT_TRY(wg_ctx_init(&ctx, adapter, profile));
    wgt_backend *be = wgt_calloc(1, sizeof *be);
    be->name = "webgpu";
    be->impl = ctx;
    be->buf_alloc = be_buf_alloc;
    be->buf_free = be_buf_free;
    be->buf_elems = be_buf_elems;
    be->upload = be_upload;
    be->download = be_download;
    be->fill_zero = be_fill_zero;
    be->copy = be_copy;
    be->max_binding_elems = wg_max_binding_elems(ctx);
    be->sync = be_sync;
    be->free = be_free;
    be->readback_begin = be_readback_begin;
    be->readback_end = be_readback_end;
#define FILL(op, summary) be->op = fwd_##op;
    WGT_OPS(FILL)
    // optional entries
    be->device_name = be_device_name;
    be->device_is_software = be_device_is_software;
    be->tune_auto = wg_tune_auto;
    be->get_stats = be_get_stats;
    if (wg_ctx_info(ctx)->has_timestamp && !profile) {
        be->gpu_timer_start = be_timer_start;
        be->gpu_timer_stop = be_timer_stop;
    }
    be->bytes_allocated = be_bytes_allocated;
    be->dry_run = be_dry_run;
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
