// backend.h — the one interface both backends implement (a struct of function pointers).
// The model code (src/model/) calls only these, so the C reference (cpu) and WebGPU run the
// very same schedule. Ops only enqueue work: on WebGPU they record dispatches into the
// current step's command encoder; backend->sync() submits and waits.
//
// The ops themselves are listed once, in op_list.h; this file declares their entries from it.
// Conventions for every op:
//   - argument order: outputs first, then inputs, then sizes / scalars (as the C references);
//   - tensors are wgt_view: a buffer, an offset and a length in 4-byte elements (f32, i32, u32);
//     offsets used by the model are multiples of WGT_VIEW_ALIGN elements (256 bytes), which is
//     what WebGPU requires of storage binding offsets;
//   - parameter gradients (dweight, dbias, dwte, dwpe, ...) ACCUMULATE (+=) so that gradient
//     accumulation over micro-batches is free; activation gradients overwrite unless noted.
#ifndef WGT_BACKEND_H
#define WGT_BACKEND_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "core/error.h"
#include "backend/op_list.h"

#define WGT_VIEW_ALIGN 64  // elements (= 256 bytes)

typedef struct wgt_buf wgt_buf;  // opaque, owned by the backend
// A tensor: n 4-byte elements of buf from element off on. An op may touch only [off, off + n);
// the backends check that every view holds what its op's shape needs (op_desc.h).
typedef struct {
    wgt_buf *buf;
    size_t off;  // in 4-byte elements
    size_t n;    // elements
} wgt_view;

static inline wgt_view wgt_view_of(wgt_buf *buf, size_t off, size_t n) { wgt_view v = {buf, off, n}; return v; }
// The view of nothing, for optional bindings (no bias).
static inline wgt_view wgt_view_none(void) { wgt_view v = {NULL, 0, 0}; return v; }
// The n elements of v that start `elems` into it.
wgt_view wgt_view_sub(wgt_view v, size_t elems, size_t n);
// The rest of v from `elems` on.
static inline wgt_view wgt_view_at(wgt_view v, size_t elems) { return wgt_view_sub(v, elems, elems <= v.n ? v.n - elems : 0); }

typedef struct wgt_backend wgt_backend;

#define WGT_READBACK_SLOTS 3   // asynchronous readbacks in flight at once
#define WGT_READBACK_MAX 64    // elements per readback slot

typedef struct {
    uint64_t submits;         // command buffers submitted to the device
    uint64_t uniform_bytes;   // kernel parameter bytes written to the device
    uint64_t upload_bytes;    // bytes of upload()
    uint64_t waits;           // times the host blocked on the device (download, sync, a waiting readback_end)
} wgt_backend_stats;

// The view of a whole buffer.
wgt_view wgt_buf_view(wgt_backend *be, wgt_buf *buf);

struct wgt_backend {
    const char *name;  // "cpu" or "webgpu"
    void *impl;

    // ---- memory ----
    // Allocates n 4-byte elements, zero-filled. Fails with WGT_ERR_MEMORY/WGT_ERR_CONFIG.
    wgt_status (*buf_alloc)(wgt_backend *be, wgt_buf **out, size_t n_elems, const char *label);
    void (*buf_free)(wgt_backend *be, wgt_buf *buf);
    size_t (*buf_elems)(const wgt_buf *buf);  // the n it was allocated with
    // Host <-> device copies of n elements at view v. download waits for queued work.
    wgt_status (*upload)(wgt_backend *be, wgt_view dst, const void *src, size_t n_elems);
    wgt_status (*download)(wgt_backend *be, void *dst, wgt_view src, size_t n_elems);
    void (*fill_zero)(wgt_backend *be, wgt_view dst, size_t n_elems);
    void (*copy)(wgt_backend *be, wgt_view dst, wgt_view src, size_t n_elems);
    // Largest number of elements one op may see in a single binding (splitting is done by the
    // ops that can exceed it, e.g. the lm_head matmul and the loss).
    size_t max_binding_elems;

    // ---- execution ----
    // Submits everything recorded so far and waits; reports any device error since last sync.
    wgt_status (*sync)(wgt_backend *be);
    void (*free)(wgt_backend *be);

    // ---- asynchronous readback: a step's results come back while the next step runs ----
    // readback_begin records a copy of n elements of src (n <= WGT_READBACK_MAX) into readback
    // slot `slot` (0 .. WGT_READBACK_SLOTS-1) behind all work recorded so far, submits, and
    // returns without waiting; the slot must be free. readback_end finishes it: wait = 1 blocks
    // until the data is there; wait = 0 returns at once, with *ready = 0 while the device has not
    // got that far. With *ready = 1 the n elements are in dst and the slot is free again. Both
    // report a device error since the last report. The CPU backend copies at once.
    wgt_status (*readback_begin)(wgt_backend *be, int slot, wgt_view src, size_t n);
    wgt_status (*readback_end)(wgt_backend *be, int slot, void *dst, size_t n, int wait, int *ready);

    // ---- ops: one typed entry per op of op_list.h, e.g.
    //   void (*matmul)(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight,
    //                  wgt_view bias, uint32_t N, uint32_t C, uint32_t OC);
#define WGT_BACKEND_ENTRY_(op, summary) void (*op)(wgt_backend *be WGT_OP_##op(WGT_PARAM_B, WGT_PARAM_S));
    WGT_OPS(WGT_BACKEND_ENTRY_)
#undef WGT_BACKEND_ENTRY_

    // ---- optional entries: NULL where a backend does not offer them (check before calling) ----
    // Tools (wgtrain bench, info lines) use these instead of reaching into `impl`.
    // The device's name for reports ("NVIDIA H200", "llvmpipe (LLVM ...)").
    const char *(*device_name)(wgt_backend *be);
    // Nonzero when the device is a software rasterizer (Mesa lavapipe): correct, but far slower
    // than the C backend for training.
    int (*device_is_software)(wgt_backend *be);
    // The one-time tuning of a GPU that the backend has no measured settings for (WebGPU: the
    // GEMM tiles, docs/tuning.md), with a progress line on stderr; does nothing when it has them.
    // Long-running commands (train, bench) call it after opening the backend.
    wgt_status (*tune_auto)(wgt_backend *be);
    // Per-kernel GPU time, on a backend opened with profiling (backend_webgpu_init_ex, profile=1):
    // profile_reset forgets what was timed so far; profile_report waits for queued work, writes a
    // table of kernel, calls, total ms and share to f (when not NULL) and returns the total GPU ms.
    void (*profile_reset)(wgt_backend *be);
    double (*profile_report)(wgt_backend *be, FILE *f);
    // Counters of what crossed between host and device since the backend opened (benchmarks and
    // tests check that a steady step submits little and uploads little).
    void (*get_stats)(wgt_backend *be, wgt_backend_stats *out);
    // GPU busy time, on a device with timestamp queries: gpu_timer_start times every compute
    // pass from now on; gpu_timer_stop waits for queued work and gives the summed GPU time of
    // those passes in ms (copies and clears between passes are not counted), and how many
    // passes were timed (*passes < 0: more passes than the query set holds; the time is then
    // that of the first ones).
    wgt_status (*gpu_timer_start)(wgt_backend *be);
    wgt_status (*gpu_timer_stop)(wgt_backend *be, double *busy_ms, long *passes);
    // Bytes of the buffers allocated through buf_alloc (and, on WebGPU, the runtime's scratch
    // slots) that are alive now, and the most that were alive at once since the backend opened
    // (the figure `wgtrain bench` reports as the memory of a configuration).
    void (*bytes_allocated)(wgt_backend *be, uint64_t *live, uint64_t *peak);
    // Dry run (WebGPU): while on, each op creates the pipelines and scratch it would use, and
    // records and runs nothing; uploads, clears and copies are skipped, and a download or a
    // readback_end aborts. model_prepare_step runs one step this way, so that every pipeline
    // is compiled before step 1 (docs/architecture.md). Returns the pipelines created so far.
    int (*dry_run)(wgt_backend *be, int on);
};

wgt_status backend_cpu_init(wgt_backend **out);
// adapter: as wg_ctx_init (webgpu/wg_runtime.h): NULL, "" or "auto" the best (a discrete GPU, then
// an integrated one, then lavapipe); "gpu" a real GPU only; "software" (or "lavapipe") the
// software GPU; anything else a case-insensitive substring of the adapter's name. There is no
// selection by index; "cpu" is refused (the C backend is backend_cpu_init).
wgt_status backend_webgpu_init(wgt_backend **out, const char *adapter);
// profile != 0: time every kernel with timestamp queries (the profile_* entries)
wgt_status backend_webgpu_init_ex(wgt_backend **out, const char *adapter, int profile);
#endif
