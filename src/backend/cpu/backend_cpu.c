// backend_cpu.c — the CPU backend: the backend.h vtable over host memory. A buffer is a plain
// 64-byte-aligned float array, a view is a pointer into it, and every op runs its cpu_ reference
// at once (so sync has nothing to wait for). Each op's forwarder, generated from op_list.h,
// checks that the views it is given lie inside their buffers and hold what the op's shapes
// need: a layout bug in the model then stops with a clear message here instead of corrupting a
// neighbouring tensor.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend/cpu/blas_core.h"
#include "backend/cpu/ops.h"
#include "backend/op_desc.h"

struct wgt_buf {
    float *data;
    size_t n;  // elements
    size_t bytes;
};

// be->impl: what bytes_allocated reports
typedef struct { uint64_t live, peak; } cpu_counts;

// Element pointer of view v after checking that `need` elements lie inside the view and the
// view inside its buffer.
static float *at(wgt_view v, size_t need) {
    WGT_ASSERT(v.buf != NULL, "a view without a buffer");
    WGT_ASSERT(v.off <= v.buf->n && v.n <= v.buf->n - v.off, "view runs past the end of its buffer");
    WGT_ASSERT(need <= v.n, "copy of more elements than the view holds");
    return v.buf->data + v.off;
}

// ---- memory ----

// The machine's physical memory in bytes (0: unknown).
static double host_memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    return pages > 0 && psize > 0 ? (double)pages * (double)psize : 0;
}

static wgt_status buf_alloc(wgt_backend *be, wgt_buf **out, size_t n_elems, const char *label) {
    *out = NULL;
    cpu_counts *k = be->impl;
    if (n_elems > (SIZE_MAX - 64) / sizeof(float))
        return wgt_fail(WGT_ERR_CONFIG, "buffer '%s' of %zu elements is too large", label ? label : "", n_elems);
    size_t bytes = (n_elems * sizeof(float) + 63) / 64 * 64;  // aligned_alloc wants a multiple
    if (bytes == 0) bytes = 64;
    // every buffer is zero-filled, so all of them must fit in memory at once: more than the
    // machine has is refused here, by size, before the allocator is asked (a size that large
    // may abort it rather than fail)
    const double ram = host_memory_bytes();
    if (ram > 0 && (double)k->live + (double)bytes > ram)
        return wgt_fail(WGT_ERR_MEMORY, "cannot allocate %.1f GiB of host memory for '%s': with the %.1f GiB already "
                        "allocated that is more than this machine's %.1f GiB", bytes / 1073741824.0,
                        label ? label : "", k->live / 1073741824.0, ram / 1073741824.0);
    float *data = aligned_alloc(64, bytes);
    if (!data)
        return wgt_fail(WGT_ERR_MEMORY, "cannot allocate %zu bytes of host memory for '%s'",
                        bytes, label ? label : "");
    memset(data, 0, bytes);
    wgt_buf *b = wgt_malloc(sizeof *b);
    b->data = data;
    b->n = n_elems;
    b->bytes = bytes;
    k->live += bytes;
    if (k->live > k->peak) k->peak = k->live;
    *out = b;
    return WGT_OK;
}

static void buf_free(wgt_backend *be, wgt_buf *buf) {
    if (!buf) return;
    ((cpu_counts *)be->impl)->live -= buf->bytes;
    free(buf->data);
    free(buf);
}

static size_t buf_elems(const wgt_buf *b) { return b->n; }

static wgt_status upload(wgt_backend *be, wgt_view dst, const void *src, size_t n) {
    if (n) memcpy(at(dst, n), src, n * sizeof(float));
    return WGT_OK;
}

static wgt_status download(wgt_backend *be, void *dst, wgt_view src, size_t n) {
    if (n) memcpy(dst, at(src, n), n * sizeof(float));
    return WGT_OK;
}

static void fill_zero(wgt_backend *be, wgt_view dst, size_t n) {
    if (n) memset(at(dst, n), 0, n * sizeof(float));
}

// memmove: source and destination may overlap when both are views of one buffer.
static void copy_elems(wgt_backend *be, wgt_view dst, wgt_view src, size_t n) {
    if (n) memmove(at(dst, n), at(src, n), n * sizeof(float));
}

static wgt_status sync_noop(wgt_backend *be) { return WGT_OK; }

// Readback slots: the data is there at once (ops have already run), so begin copies it and
// end hands it over; the slot discipline is checked as on the device.
typedef struct {
    cpu_counts counts;  // first: the allocation counters read it through be->impl
    float slot[WGT_READBACK_SLOTS][WGT_READBACK_MAX];
    int pending[WGT_READBACK_SLOTS];
    size_t n[WGT_READBACK_SLOTS];
    char name[96];  // device_name: threads and OpenBLAS's kernels
} cpu_impl;

static wgt_status readback_begin(wgt_backend *be, int slot, wgt_view src, size_t n) {
    cpu_impl *c = be->impl;
    WGT_ASSERT(slot >= 0 && slot < WGT_READBACK_SLOTS && n <= WGT_READBACK_MAX, "readback slot or size out of range");
    WGT_ASSERT(!c->pending[slot], "readback_begin on a slot whose last readback has not ended");
    if (n) memcpy(c->slot[slot], at(src, n), n * sizeof(float));
    c->pending[slot] = 1;
    c->n[slot] = n;
    return WGT_OK;
}

static wgt_status readback_end(wgt_backend *be, int slot, void *dst, size_t n, int wait, int *ready) {
    cpu_impl *c = be->impl;
    WGT_ASSERT(slot >= 0 && slot < WGT_READBACK_SLOTS, "readback slot out of range");
    WGT_ASSERT(c->pending[slot] && n <= c->n[slot], "readback_end on a slot without that readback");
    if (n) memcpy(dst, c->slot[slot], n * sizeof(float));
    c->pending[slot] = 0;
    *ready = 1;
    return WGT_OK;
}

static void backend_free(wgt_backend *be) {
    free(be->impl);
    free(be);
}

static void bytes_allocated(wgt_backend *be, uint64_t *live, uint64_t *peak) {
    const cpu_counts *k = be->impl;
    *live = k->live;
    *peak = k->peak;
}

// ---- ops: generated forwarders, views checked against the op's shapes, then the reference ----

// Host pointer of a view (NULL for an absent optional one) after checking that it lies inside
// its buffer; wgt_op_check_views has checked that it holds what the op needs.
static void *ptr(wgt_view v) {
    if (!v.buf) return NULL;
    WGT_ASSERT(v.off <= v.buf->n && v.n <= v.buf->n - v.off, "view runs past the end of its buffer");
    return v.buf->data + v.off;
}

#define FWD_PTR_B(name, role, type, shape) , (CPU_PTR_##role##_##type)ptr(name)
#define FWD_PASS_S(name, type, def, lo, hi) , name
#define FWD(op, summary)                                                       \
    static void fwd_##op(wgt_backend *be WGT_OP_##op(WGT_PARAM_B, WGT_PARAM_S)) { \
        WGT_OP_CHECK_VIEWS(op);                                                \
        cpu_##op(WGT_ARGS(WGT_OP_##op(FWD_PTR_B, FWD_PASS_S)));                \
    }
WGT_OPS(FWD)

// "2 threads, OpenBLAS SkylakeX kernels, avx512 loops": what a CPU figure depends on (bench and
// train print it)
static const char *device_name(wgt_backend *be) {
    cpu_impl *k = be->impl;
    int t = omp_get_max_threads();
    snprintf(k->name, sizeof k->name, "%d thread%s, OpenBLAS %s kernels, %s loops", t, t == 1 ? "" : "s", cpu_blas_core(),
             cpu_isa_name(cpu_isa_active()));
    return k->name;
}

wgt_status backend_cpu_init(wgt_backend **out) {
    *out = NULL;
    WGT_TRY(cpu_isa_init());  // WGTRAIN_CPU_ISA: refused here, with its message, if the CPU lacks it
    wgt_backend *be = wgt_calloc(1, sizeof *be);
    be->name = "cpu";
    be->impl = wgt_calloc(1, sizeof(cpu_impl));
    be->bytes_allocated = bytes_allocated;
    be->device_name = device_name;
    be->buf_alloc = buf_alloc;
    be->buf_free = buf_free;
    be->buf_elems = buf_elems;
    be->upload = upload;
    be->download = download;
    be->fill_zero = fill_zero;
    be->copy = copy_elems;
    be->max_binding_elems = SIZE_MAX;
    be->sync = sync_noop;
    be->free = backend_free;
    be->readback_begin = readback_begin;
    be->readback_end = readback_end;
#define FILL(op, summary) be->op = fwd_##op;
    WGT_OPS(FILL)
    *out = be;
    return WGT_OK;
}
