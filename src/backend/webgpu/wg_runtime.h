// wg_runtime.h — the WebGPU runtime under the webgpu backend: device setup, buffers, the
// pipeline cache, the per-step command encoder, uniform parameters, 2-D dispatch splitting, the
// binding windows of ops whose tensors exceed one storage binding, and the settings (wg_settings.h).
// Kernel wrappers (wg_ops_*.c) use only this header and wgpu_abi.h.
#ifndef WGT_WG_RUNTIME_H
#define WGT_WG_RUNTIME_H
#include <stdint.h>
#include <stdio.h>
#include "backend/backend.h"
#include "backend/webgpu/wg_settings.h"
#include "backend/webgpu/wgpu_abi.h"

typedef struct wg_ctx wg_ctx;

struct wgt_buf {
    WGPUBuffer b;
    size_t n_elems;  // usable size in 4-byte elements
    uint64_t bytes;  // allocated size
    uint64_t epoch;  // the submit whose recorded commands last referenced it (wg_upload's ordering)
    char label[48];
};

typedef struct {
    char name[256];          // adapter device name
    char vendor[128], architecture[128], driver[256];
    WGPUBackendType backend;
    WGPUAdapterType type;
    uint32_t subgroup_min, subgroup_max;
    int has_f16, has_subgroups, has_timestamp, has_subgroup_matrix;
    WGPULimits limits;       // the device's limits (= adapter maximum)
    WGPUFeatureName features[64];
    size_t n_features;
} wg_device_info;

// adapter: NULL/""/"auto" the best (discrete GPU, then integrated, then software); "gpu" a real
// GPU only; "software" or "lavapipe" the software GPU (Mesa lavapipe); "cpu" is refused with
// WGT_ERR_ARG (it names the C backend, --device cpu); anything else: a case-insensitive
// substring of the adapter's name. Only Vulkan adapters are requested.
// The settings are read from the environment first (wg_settings_from_env): a malformed one fails
// with WGT_ERR_ARG before any device is touched.
wgt_status wg_ctx_init(wg_ctx **out, const char *adapter, int profile);
void wg_ctx_free(wg_ctx *ctx);
const wg_device_info *wg_ctx_info(const wg_ctx *ctx);
// The context's settings, which the op wrappers read on every call: tests and benchmarks change
// fields (directly or with wg_settings_set) between ops.
wg_settings *wg_ctx_settings(wg_ctx *ctx);
const char *wg_backend_type_name(WGPUBackendType t);
const char *wg_adapter_type_name(WGPUAdapterType t);
const char *wg_feature_name(WGPUFeatureName f);

wgt_status wg_buf_alloc(wg_ctx *ctx, wgt_buf **out, size_t n_elems, const char *label);
void wg_buf_free(wg_ctx *ctx, wgt_buf *buf);
// Bytes of the wg_buf_alloc buffers (scratch slots included) alive now, and the most alive at once.
void wg_bytes_allocated(const wg_ctx *ctx, uint64_t *live, uint64_t *peak);
wgt_status wg_upload(wg_ctx *ctx, wgt_view dst, const void *src, size_t n_elems);
wgt_status wg_download(wg_ctx *ctx, void *dst, wgt_view src, size_t n_elems);
void wg_fill_zero(wg_ctx *ctx, wgt_view dst, size_t n_elems);
void wg_copy(wg_ctx *ctx, wgt_view dst, wgt_view src, size_t n_elems);
// Submits everything recorded; waits when wait != 0. Reports the first device error.
wgt_status wg_flush(wg_ctx *ctx, int wait);
// Dry run (backend.h dry_run): while on, the ops create the pipelines (and scratch slots) they
// would use and check their views, but upload, clear, copy, dispatch and readback_begin do
// nothing; download and readback_end abort (they would need results). wg_pipeline_count: the
// pipelines created so far.
void wg_dry_run(wg_ctx *ctx, int on);
int wg_pipeline_count(const wg_ctx *ctx);
// Asynchronous readback into slot 0..WGT_READBACK_SLOTS-1 (backend.h readback_begin/_end).
wgt_status wg_readback_begin(wg_ctx *ctx, int slot, wgt_view src, size_t n);
wgt_status wg_readback_end(wg_ctx *ctx, int slot, void *dst, size_t n, int wait, int *ready);
void wg_get_stats(wg_ctx *ctx, wgt_backend_stats *out);
// GPU time of every compute pass between start and stop (backend.h gpu_timer_start/_stop);
// start fails when the device has no timestamp queries.
wgt_status wg_timer_start(wg_ctx *ctx);
wgt_status wg_timer_stop(wg_ctx *ctx, double *busy_ms, long *passes);

// A compute pipeline for entry point `entry` of kernels/`file`, compiled once and cached by
// (file, entry, defines). `defines` is WGSL prepended after 00_shared.wgsl (e.g. "const TILE=64u;").
WGPUComputePipeline wg_pipeline(wg_ctx *ctx, const char *file, const char *entry, const char *defines);

typedef struct { wgt_view v; size_t n; } wg_bind;  // n elements bound from v
#define WG_MAX_BINDS 10
// Records one dispatch: storage bindings 0..nb-1, then the uniform params at binding nb.
// groups = total workgroups; split into x*y when above the per-dimension limit (kernels
// recover the linear index with flat_id / flat_wg from 00_shared.wgsl).
void wg_dispatch(wg_ctx *ctx, const char *label, WGPUComputePipeline p, const wg_bind *binds, int nb,
                 const void *params, size_t params_size, uint64_t groups);
// Same with an explicit 3-D grid (no splitting), for tiled kernels.
void wg_dispatch3(wg_ctx *ctx, const char *label, WGPUComputePipeline p, const wg_bind *binds, int nb,
                  const void *params, size_t params_size, uint32_t gx, uint32_t gy, uint32_t gz);
uint64_t wg_max_binding_elems(const wg_ctx *ctx);
// Whether f16 tensors are bound as native array<f16> (the device has shader-f16 and the f16
// setting is not packed) rather than as pairs in u32 words. The bytes are the same either way.
int wg_f16_native(wg_ctx *ctx);

// Binding windows, for ops whose tensors can exceed one storage binding (maxStorageBufferBindingSize).
// The largest binding in elements that ops split against: the backend's max_binding_elems (which a
// test may lower), lowered further by the binding_limit setting when that is nonzero. be is a
// webgpu backend.
uint64_t wg_binding_limit(wgt_backend *be);
// Elements a dispatch over binding windows takes at a time: wg_binding_limit less the 63-element
// slack of a window's start, in whole multiples of 64, at most UINT32_MAX - 255 (u32 indices).
uint64_t wg_binding_chunk(wgt_backend *be);
// A binding of `count` elements starting `start` elements into view v, bound from the
// 256-byte-aligned element at or below that start; *rem receives the offset of the wanted first
// element inside the binding (the kernel adds it). count 0 binds a placeholder.
wg_bind wg_binding_window(wgt_view v, uint64_t start, uint64_t count, uint32_t *rem);

// Scratch buffers owned by the context, for ops whose signature has no room for temporaries:
// one per slot, grown to at least n elements on request (contents are not kept when it grows),
// freed with the context. Returns NULL, with the reason in wgt_last_error(), when the device
// cannot allocate it.
typedef enum {
    WG_SCRATCH_NORM, WG_SCRATCH_SPLITK, WG_SCRATCH_PLACEHOLDER, WG_SCRATCH_ATTN, WG_SCRATCH_DECODE, WG_SCRATCH_COLSUM, WG_SCRATCH_TCOPY,
    WG_SCRATCH_SLOTS
} wg_scratch_slot;
wgt_buf *wg_scratch(wg_ctx *ctx, wg_scratch_slot slot, size_t n, const char *label);

// Per-kernel GPU time (profile mode only): accumulated by label until wg_profile_report.
void wg_profile_reset(wg_ctx *ctx);
// Writes a table of label, calls, total ms, share; returns total ms.
double wg_profile_report(wg_ctx *ctx, FILE *f);
// GPU ms of every profiled dispatch so far (waits for queued work): differences time a block.
double wg_profile_total_ms(wg_ctx *ctx);
#endif
