// wg_runtime.c — WebGPU device setup and execution for wgtrain (see wg_runtime.h).
// Design: one command encoder collects a whole step; compute dispatches share one open compute
// pass; every dispatch's small parameters go into a host-side uniform ring that is written to
// the GPU once per submit (and only when it changed), so a steady training step uploads nothing
// but its tokens. Bind groups are cached by their exact bindings, pipelines by kernel + variant.
#include "backend/webgpu/wg_runtime.h"
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "backend/webgpu/wgsl_sources.h"
#include "backend/webgpu/wg_tune.h"

#define UNIFORM_SLOT 256u              // minUniformBufferOffsetAlignment on every device we know
#define UNIFORM_SLOTS 4096u            // dispatches per submit before an automatic flush
#define WAIT_TIMEOUT_NS (600ull * 1000000000ull)  // a step longer than 10 min means a hung device
#define MAX_PROFILE 4096
#define MAX_TIMER_QUERIES 4096         // pass timestamps of wg_timer_start .. wg_timer_stop

// A pipeline's cache key: its file, entry point and defines (the GEMMs' defines, with an nf4
// weight's level table, are the longest at about 1.9 KB).
#define PIPE_KEY_MAX 4096

typedef struct {
    char key[PIPE_KEY_MAX];
    WGPUComputePipeline p;
    WGPUBindGroupLayout bgl;
} pipe_entry;

typedef struct {
    uint64_t hash;
    WGPUComputePipeline p;
    int nb;
    WGPUBuffer bufs[WG_MAX_BINDS + 1];
    uint64_t offs[WG_MAX_BINDS + 1], sizes[WG_MAX_BINDS + 1];
    WGPUBindGroup bg;
} bg_entry;

typedef struct { char label[48]; int calls; double ms; } prof_row;

struct wg_ctx {
    WGPUInstance instance;
    WGPUAdapter adapter;
    WGPUDevice device;
    WGPUQueue queue;
    wg_device_info info;

    WGPUCommandEncoder enc;
    WGPUComputePassEncoder pass;
    int n_recorded;

    uint8_t *uni_host, *uni_last;  // staging + what the GPU holds
    uint32_t uni_used, uni_last_used;
    WGPUBuffer uni_buf;

    pipe_entry *pipes;
    int n_pipes, cap_pipes;
    bg_entry *bgs;      // open addressing
    size_t cap_bgs, n_bgs;

    WGPUBuffer readback;
    uint64_t readback_bytes;
    uint64_t live_bytes, peak_bytes;  // buffers of wg_buf_alloc alive now, and the most at once

    char error[2048];   // first uncaptured device error since the last flush
    int lost;

    wg_settings settings;

    wgt_buf *scratch[WG_SCRATCH_SLOTS];

    uint64_t epoch;     // submits so far + 1: the number of the submit being recorded
    wgt_backend_stats stats;

    // asynchronous readback slots (wg_readback_begin / _end)
    WGPUBuffer rb[WGT_READBACK_SLOTS];
    WGPUFuture rb_future[WGT_READBACK_SLOTS];
    WGPUMapAsyncStatus rb_status[WGT_READBACK_SLOTS];
    int rb_pending[WGT_READBACK_SLOTS];
    size_t rb_n[WGT_READBACK_SLOTS];

    // pass timer: a begin and an end timestamp on every compute pass while on
    int timing;
    WGPUQuerySet tqset;
    WGPUBuffer tresolve, tread;
    int t_queries, t_resolved, t_overflow;

    int profile;
    // dry run (wg_dry_run): ops create their pipelines and scratch slots, nothing is recorded
    int dry;
    WGPUQuerySet qset;
    WGPUBuffer qresolve, qread;
    int n_queries;
    char qlabels[MAX_PROFILE / 2][48];
    prof_row prof[256];
    int n_prof;
};

static wgt_status submit_wait(wg_ctx *ctx, int wait);
static wgt_status take_error(wg_ctx *ctx);

static WGPUStringView sv(const char *s) { WGPUStringView v = {s, WGPU_STRLEN}; return v; }
static void sv_copy(char *dst, size_t cap, WGPUStringView s) {
    size_t n = s.data ? (s.length == WGPU_STRLEN ? strlen(s.data) : s.length) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, s.data, n);
    dst[n] = 0;
}

const char *wg_backend_type_name(WGPUBackendType t) {
    static const char *n[] = {"undefined", "null", "webgpu", "d3d11", "d3d12", "metal", "vulkan", "opengl", "opengles"};
    return (unsigned)t < 9 ? n[t] : "?";
}
const char *wg_adapter_type_name(WGPUAdapterType t) {
    switch (t) {
    case WGPUAdapterType_DiscreteGPU: return "discrete GPU";
    case WGPUAdapterType_IntegratedGPU: return "integrated GPU";
    case WGPUAdapterType_CPU: return "CPU (software)";
    default: return "unknown";
    }
}
const char *wg_feature_name(WGPUFeatureName f) {
    switch ((uint32_t)f) {
    case 0x01: return "depth-clip-control";
    case 0x02: return "depth32float-stencil8";
    case 0x03: return "timestamp-query";
    case 0x04: return "texture-compression-bc";
    case 0x05: return "texture-compression-bc-sliced-3d";
    case 0x06: return "texture-compression-etc2";
    case 0x07: return "texture-compression-astc";
    case 0x08: return "texture-compression-astc-sliced-3d";
    case 0x09: return "indirect-first-instance";
    case 0x0A: return "shader-f16";
    case 0x0B: return "rg11b10ufloat-renderable";
    case 0x0C: return "bgra8unorm-storage";
    case 0x0D: return "float32-filterable";
    case 0x0E: return "float32-blendable";
    case 0x0F: return "clip-distances";
    case 0x10: return "dual-source-blending";
    case 0x11: return "subgroups";
    case 0x12: return "core-features-and-limits";
    case 0x50037: return "chromium-experimental-subgroup-matrix";
    default: return NULL;
    }
}

// ------------------------------------------------------------------ waiting
static wgt_status wait_future(wg_ctx *ctx, WGPUInstance inst, WGPUFuture f, const char *what) {
    WGPUFutureWaitInfo wi = {f, 0};
    WGPUWaitStatus st = wgpuInstanceWaitAny(inst, 1, &wi, WAIT_TIMEOUT_NS);
    if (st == WGPUWaitStatus_TimedOut)
        return wgt_fail(WGT_ERR_DEVICE, "the GPU did not finish %s within 10 minutes (hung device or driver?)", what);
    if (st != WGPUWaitStatus_Success || !wi.completed)
        return wgt_fail(WGT_ERR_DEVICE, "waiting for %s failed (WaitAny status %d)", what, (int)st);
    (void)ctx;
    return WGT_OK;
}

// ------------------------------------------------------------------ callbacks
typedef struct { WGPURequestAdapterStatus status; WGPUAdapter adapter; char msg[512]; } adapter_result;
static void on_adapter(WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView msg, void *u1, void *u2) {
    (void)u2;
    adapter_result *r = u1;
    r->status = status;
    r->adapter = adapter;
    sv_copy(r->msg, sizeof r->msg, msg);
}
typedef struct { WGPURequestDeviceStatus status; WGPUDevice device; char msg[512]; } device_result;
static void on_device(WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView msg, void *u1, void *u2) {
    (void)u2;
    device_result *r = u1;
    r->status = status;
    r->device = device;
    sv_copy(r->msg, sizeof r->msg, msg);
}
static void on_error(const WGPUDevice *d, WGPUErrorType type, WGPUStringView msg, void *u1, void *u2) {
    (void)d; (void)u2;
    wg_ctx *ctx = u1;
    if (ctx->error[0]) return;  // keep the first: later ones are usually consequences
    static const char *names[] = {"?", "no error", "validation", "out of memory", "internal", "unknown"};
    char m[1800];
    sv_copy(m, sizeof m, msg);
    snprintf(ctx->error, sizeof ctx->error, "WebGPU %s error: %s", (unsigned)type < 6 ? names[type] : "?", m);
}
static void on_lost(const WGPUDevice *d, WGPUDeviceLostReason reason, WGPUStringView msg, void *u1, void *u2) {
    (void)d; (void)u2;
    wg_ctx *ctx = u1;
    if (reason == WGPUDeviceLostReason_Destroyed || reason == WGPUDeviceLostReason_CallbackCancelled) return;
    ctx->lost = 1;
    char m[1500];
    sv_copy(m, sizeof m, msg);
    snprintf(ctx->error, sizeof ctx->error, "the GPU device was lost (reason %d): %s", (int)reason, m);
}
static void on_map(WGPUMapAsyncStatus status, WGPUStringView msg, void *u1, void *u2) {
    (void)u2; (void)msg;
    *(WGPUMapAsyncStatus *)u1 = status;
}
// Starts mapping the first `bytes` of buffer b for reading; *status is set when it completes.
static WGPUFuture map_read_start(WGPUBuffer b, size_t bytes, WGPUMapAsyncStatus *status) {
    WGPUBufferMapCallbackInfo ci;
    memset(&ci, 0, sizeof ci);
    ci.mode = WGPUCallbackMode_WaitAnyOnly;
    ci.callback = on_map;
    ci.userdata1 = status;
    *status = 0;
    return wgpuBufferMapAsync(b, WGPUMapMode_Read, 0, bytes, ci);
}
static void on_done(WGPUQueueWorkDoneStatus status, WGPUStringView msg, void *u1, void *u2) {
    (void)u2; (void)msg;
    *(WGPUQueueWorkDoneStatus *)u1 = status;
}

// ------------------------------------------------------------------ adapter choice
static int contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) if (strncasecmp(hay, needle, n) == 0) return 1;
    return 0;
}

static WGPUAdapter request_adapter(WGPUInstance inst, WGPUPowerPreference pp, int fallback, char *msg, size_t cap) {
    WGPURequestAdapterOptions o;
    memset(&o, 0, sizeof o);
    o.featureLevel = WGPUFeatureLevel_Core;
    o.powerPreference = pp;
    o.forceFallbackAdapter = fallback;
    o.backendType = WGPUBackendType_Vulkan;  // the backend this build of Dawn is tested with on Linux
    adapter_result r;
    memset(&r, 0, sizeof r);
    WGPURequestAdapterCallbackInfo ci;
    memset(&ci, 0, sizeof ci);
    ci.mode = WGPUCallbackMode_WaitAnyOnly;
    ci.callback = on_adapter;
    ci.userdata1 = &r;
    if (wait_future(NULL, inst, wgpuInstanceRequestAdapter(inst, &o, ci), "the adapter request") != WGT_OK) return NULL;
    if (r.status != WGPURequestAdapterStatus_Success) {
        snprintf(msg, cap, "%s", r.msg);
        return NULL;
    }
    return r.adapter;
}

static void adapter_describe(WGPUAdapter a, wg_device_info *info) {
    WGPUAdapterInfo ai;
    memset(&ai, 0, sizeof ai);
    wgpuAdapterGetInfo(a, &ai);
    sv_copy(info->name, sizeof info->name, ai.device);
    sv_copy(info->vendor, sizeof info->vendor, ai.vendor);
    sv_copy(info->architecture, sizeof info->architecture, ai.architecture);
    sv_copy(info->driver, sizeof info->driver, ai.description);
    info->backend = ai.backendType;
    info->type = ai.adapterType;
    info->subgroup_min = ai.subgroupMinSize;
    info->subgroup_max = ai.subgroupMaxSize;
    wgpuAdapterInfoFreeMembers(ai);
}

static wgt_status choose_adapter(wg_ctx *ctx, const char *want) {
    // one meaning per word: "cpu" is the C backend (--device cpu), never an adapter
    if (want && !strcasecmp(want, "cpu"))
        return wgt_fail(WGT_ERR_ARG, "--adapter cpu is not an adapter: the software GPU (Mesa lavapipe) is --adapter "
                        "software, and the C backend is --device cpu");
    int want_gpu = want && !strcasecmp(want, "gpu");
    int want_cpu = want && (!strcasecmp(want, "software") || !strcasecmp(want, "lavapipe"));
    int want_name = want && *want && strcasecmp(want, "auto") && !want_gpu && !want_cpu;
    // Candidates: the high-performance choice, the low-power choice, the fallback (software).
    struct { WGPUPowerPreference pp; int fb; } tries[] = {
        {WGPUPowerPreference_HighPerformance, 0}, {WGPUPowerPreference_LowPower, 0}, {WGPUPowerPreference_Undefined, 1}};
    WGPUAdapter best = NULL;
    wg_device_info best_info;
    char seen[1024] = "", msg[512] = "";
    int best_rank = -1;
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        WGPUAdapter a = request_adapter(ctx->instance, tries[i].pp, tries[i].fb, msg, sizeof msg);
        if (!a) continue;
        wg_device_info inf;
        memset(&inf, 0, sizeof inf);
        adapter_describe(a, &inf);
        char entry[400];
        snprintf(entry, sizeof entry, "'%s' (%s, %s)", inf.name, wg_adapter_type_name(inf.type), wg_backend_type_name(inf.backend));
        if (!strstr(seen, entry) && strlen(seen) + strlen(entry) + 4 < sizeof seen)  // each adapter once
            snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s%s", seen[0] ? ", " : "", entry);
        // Dawn's Null backend computes nothing: never use it
        int rank = -1;
        if (inf.backend != WGPUBackendType_Null) {
            int is_cpu = inf.type == WGPUAdapterType_CPU;
            if (want_name) rank = contains_ci(inf.name, want) ? 1 : -1;
            else if (want_gpu) rank = is_cpu ? -1 : 1;
            else if (want_cpu) rank = is_cpu ? 1 : -1;
            else rank = is_cpu ? 0 : (inf.type == WGPUAdapterType_DiscreteGPU ? 2 : 1);
        }
        if (rank > best_rank) {
            if (best) wgpuAdapterRelease(best);
            best = a;
            best_info = inf;
            best_rank = rank;
        } else {
            wgpuAdapterRelease(a);
        }
    }
    if (!best || best_rank < 0) {
        if (best) wgpuAdapterRelease(best);
        if (want && *want && strcasecmp(want, "auto"))
            return wgt_fail(WGT_ERR_DEVICE, "no WebGPU adapter matches --adapter '%s'; found: %s. "
                            "Use 'auto', 'gpu', 'software' or a part of one of these names", want, seen[0] ? seen : "none");
        return wgt_fail(WGT_ERR_DEVICE, "no usable WebGPU adapter (found: %s%s%s). wgtrain needs a Vulkan driver: a GPU "
                        "driver, or Mesa 25 lavapipe (run scripts/setup.sh); Dawn's Null adapter computes nothing and is "
                        "refused. Use --device cpu to train on the CPU backend instead",
                        seen[0] ? seen : "none", msg[0] ? "; last message: " : "", msg);
    }
    ctx->adapter = best;
    ctx->info = best_info;
    return WGT_OK;
}

// ------------------------------------------------------------------ init
// A timestamp query set of `count` queries, the buffer they resolve into and the mappable one
// they are copied to for reading (per-kernel profiling and the pass timer).
static void timestamps_create(wg_ctx *ctx, const char *label, uint32_t count, WGPUQuerySet *qset, WGPUBuffer *resolve,
                              WGPUBuffer *read) {
    WGPUQuerySetDescriptor qd;
    memset(&qd, 0, sizeof qd);
    qd.label = sv(label);
    qd.type = WGPUQueryType_Timestamp;
    qd.count = count;
    *qset = wgpuDeviceCreateQuerySet(ctx->device, &qd);
    WGPUBufferDescriptor bd;
    memset(&bd, 0, sizeof bd);
    bd.size = (uint64_t)count * 8;
    bd.usage = WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc;
    *resolve = wgpuDeviceCreateBuffer(ctx->device, &bd);
    bd.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    *read = wgpuDeviceCreateBuffer(ctx->device, &bd);
}

wgt_status wg_ctx_init(wg_ctx **out, const char *adapter, int profile) {
    *out = NULL;
    wg_settings settings;
    WGT_TRY(wg_settings_from_env(&settings));  // a malformed setting is the user's to fix: fail early
    wg_ctx *ctx = wgt_calloc(1, sizeof *ctx);
    ctx->settings = settings;
    ctx->profile = profile;
    WGPUInstanceDescriptor idesc;
    memset(&idesc, 0, sizeof idesc);
    idesc.capabilities.timedWaitAnyEnable = 1;  // WaitAny with a timeout needs this capability
    idesc.capabilities.timedWaitAnyMaxCount = 1;
    ctx->instance = wgpuCreateInstance(&idesc);
    if (!ctx->instance) { free(ctx); return wgt_fail(WGT_ERR_DEVICE, "could not create a WebGPU instance (Dawn)"); }
    wgt_status st = choose_adapter(ctx, adapter);
    if (st != WGT_OK) { wgpuInstanceRelease(ctx->instance); free(ctx); return st; }

    wg_device_info *info = &ctx->info;
    WGPULimits lim;
    memset(&lim, 0, sizeof lim);
    wgpuAdapterGetLimits(ctx->adapter, &lim);
    info->has_f16 = wgpuAdapterHasFeature(ctx->adapter, WGPUFeatureName_ShaderF16);
    info->has_subgroups = wgpuAdapterHasFeature(ctx->adapter, WGPUFeatureName_Subgroups);
    info->has_timestamp = wgpuAdapterHasFeature(ctx->adapter, WGPUFeatureName_TimestampQuery);
    info->has_subgroup_matrix = wgpuAdapterHasFeature(ctx->adapter, WGPUFeatureName_ChromiumExperimentalSubgroupMatrix);
    WGPUSupportedFeatures sf;
    memset(&sf, 0, sizeof sf);
    wgpuAdapterGetFeatures(ctx->adapter, &sf);
    for (size_t i = 0; i < sf.featureCount && info->n_features < 64; i++) info->features[info->n_features++] = sf.features[i];
    wgpuSupportedFeaturesFreeMembers(sf);
    if (profile && !info->has_timestamp) {
        wgpuAdapterRelease(ctx->adapter); wgpuInstanceRelease(ctx->instance); free(ctx);
        return wgt_fail(WGT_ERR_DEVICE, "per-kernel profiling needs the timestamp-query feature, which this adapter lacks; run without profiling");
    }

    if (ctx->settings.f16 == WG_F16_NATIVE && !info->has_f16) {
        wgpuAdapterRelease(ctx->adapter); wgpuInstanceRelease(ctx->instance); free(ctx);
        return wgt_fail(WGT_ERR_ARG, "WGTRAIN_F16=native needs the shader-f16 feature, which this adapter lacks; unset "
                        "WGTRAIN_F16 (or set it to auto or packed) to store f16 as pairs in u32 words");
    }
    WGPUFeatureName feats[4];
    size_t nf = 0;
    if (info->has_f16) feats[nf++] = WGPUFeatureName_ShaderF16;
    if (info->has_subgroups) feats[nf++] = WGPUFeatureName_Subgroups;
    if (info->has_timestamp) feats[nf++] = WGPUFeatureName_TimestampQuery;
    WGPULimits req = lim;  // ask for everything the adapter can do
    req.nextInChain = NULL;
    // Timestamps are quantized by default (a fingerprinting defence for browsers); we want them exact.
    static const char *disabled[] = {"timestamp_quantization"};
    const char *enabled[2];
    size_t ne = 0;
    // Bounds clamping costs bandwidth; every kernel bounds-checks its own indices. Opt out with
    // WGTRAIN_ROBUST=1 to debug a suspected out-of-bounds access.
    if (!ctx->settings.robust) enabled[ne++] = "disable_robustness";
    // Zeroing a kernel's workgroup memory before it starts costs every workgroup a pass over it
    // (WGSL's rule); WGTRAIN_WG_ZERO_INIT=0 skips it, for kernels that never read workgroup
    // memory they have not written.
    if (ctx->settings.wg_zero_init == 0) enabled[ne++] = "disable_workgroup_init";
    WGPUDawnTogglesDescriptor toggles;
    memset(&toggles, 0, sizeof toggles);
    toggles.chain.sType = WGPUSType_DawnTogglesDescriptor;
    toggles.disabledToggleCount = 1;
    toggles.disabledToggles = disabled;
    toggles.enabledToggleCount = ne;
    toggles.enabledToggles = enabled;
    WGPUDeviceDescriptor dd;
    memset(&dd, 0, sizeof dd);
    dd.nextInChain = &toggles.chain;
    dd.label = sv("wgtrain");
    dd.requiredFeatureCount = nf;
    dd.requiredFeatures = feats;
    dd.requiredLimits = &req;
    dd.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
    dd.deviceLostCallbackInfo.callback = on_lost;
    dd.deviceLostCallbackInfo.userdata1 = ctx;
    dd.uncapturedErrorCallbackInfo.callback = on_error;
    dd.uncapturedErrorCallbackInfo.userdata1 = ctx;
    device_result dr;
    memset(&dr, 0, sizeof dr);
    WGPURequestDeviceCallbackInfo dci;
    memset(&dci, 0, sizeof dci);
    dci.mode = WGPUCallbackMode_WaitAnyOnly;
    dci.callback = on_device;
    dci.userdata1 = &dr;
    st = wait_future(ctx, ctx->instance, wgpuAdapterRequestDevice(ctx->adapter, &dd, dci), "the device request");
    if (st == WGT_OK && (dr.status != WGPURequestDeviceStatus_Success || !dr.device))
        st = wgt_fail(WGT_ERR_DEVICE, "the adapter '%s' refused to create a device: %s", info->name, dr.msg);
    if (st != WGT_OK) { wgpuAdapterRelease(ctx->adapter); wgpuInstanceRelease(ctx->instance); free(ctx); return st; }
    ctx->device = dr.device;
    ctx->queue = wgpuDeviceGetQueue(ctx->device);
    memset(&info->limits, 0, sizeof info->limits);
    wgpuDeviceGetLimits(ctx->device, &info->limits);

    ctx->uni_host = wgt_calloc(UNIFORM_SLOTS, UNIFORM_SLOT);
    ctx->uni_last = wgt_calloc(UNIFORM_SLOTS, UNIFORM_SLOT);
    WGPUBufferDescriptor bd;
    memset(&bd, 0, sizeof bd);
    bd.label = sv("uniform-ring");
    bd.usage = WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst;
    bd.size = (uint64_t)UNIFORM_SLOTS * UNIFORM_SLOT;
    ctx->uni_buf = wgpuDeviceCreateBuffer(ctx->device, &bd);
    ctx->cap_bgs = 4096;
    ctx->bgs = wgt_calloc(ctx->cap_bgs, sizeof *ctx->bgs);
    ctx->epoch = 1;
    if (profile) timestamps_create(ctx, "profile", MAX_PROFILE, &ctx->qset, &ctx->qresolve, &ctx->qread);
    st = wg_flush(ctx, 1);
    if (st != WGT_OK) { wg_ctx_free(ctx); return st; }
    wg_tune_load(ctx);  // the device's tuned GEMM tiles, if a tuning run cached them
    *out = ctx;
    return WGT_OK;
}

const wg_device_info *wg_ctx_info(const wg_ctx *ctx) { return &ctx->info; }
int wg_f16_native(wg_ctx *ctx) {
    WGT_ASSERT(ctx->settings.f16 != WG_F16_NATIVE || ctx->info.has_f16,
               "WGTRAIN_F16=native on a device without shader-f16");
    return ctx->info.has_f16 && ctx->settings.f16 != WG_F16_PACKED;
}

uint64_t wg_max_binding_elems(const wg_ctx *ctx) { return ctx->info.limits.maxStorageBufferBindingSize / 4; }
wg_settings *wg_ctx_settings(wg_ctx *ctx) { return &ctx->settings; }

// ------------------------------------------------------------------ binding windows
// lim lowered to the binding_limit setting when that is nonzero and lower
static uint64_t limit_setting(const wg_ctx *ctx, uint64_t lim) {
    uint64_t test = ctx->settings.binding_limit;
    return test && test < lim ? test : lim;
}

uint64_t wg_binding_limit(wgt_backend *be) { return limit_setting(be->impl, be->max_binding_elems); }

// One binding of lim elements less the slack of a window's start, in whole multiples of 64, and
// at most what a u32 element index (plus a workgroup) reaches.
static uint64_t window_chunk(uint64_t lim) {
    uint64_t c = (lim - WGT_VIEW_ALIGN) / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
    if (c > (uint64_t)UINT32_MAX - 255) c = ((uint64_t)UINT32_MAX - 255) / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
    return c;
}

uint64_t wg_binding_chunk(wgt_backend *be) { return window_chunk(wg_binding_limit(be)); }

wg_bind wg_binding_window(wgt_view v, uint64_t start, uint64_t count, uint32_t *rem) {
    WGT_ASSERT(start <= v.n && count <= v.n - start, "binding window runs past the end of its view");
    uint64_t abs = v.off + start;
    uint64_t base = abs / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
    *rem = (uint32_t)(abs - base);
    // starts up to 63 elements before v: the kernel adds *rem
    wg_bind b = {{v.buf, (size_t)base, (size_t)(count + *rem)}, count ? (size_t)(count + *rem) : 0};
    return b;
}

static void bg_cache_clear(wg_ctx *ctx) {
    for (size_t i = 0; i < ctx->cap_bgs; i++)
        if (ctx->bgs[i].bg) { wgpuBindGroupRelease(ctx->bgs[i].bg); memset(&ctx->bgs[i], 0, sizeof ctx->bgs[i]); }
    ctx->n_bgs = 0;
}

void wg_ctx_free(wg_ctx *ctx) {
    if (!ctx) return;
    if (ctx->enc) wg_flush(ctx, 1);
    for (int i = 0; i < WG_SCRATCH_SLOTS; i++) wg_buf_free(ctx, ctx->scratch[i]);
    bg_cache_clear(ctx);
    free(ctx->bgs);
    for (int i = 0; i < ctx->n_pipes; i++) {
        wgpuBindGroupLayoutRelease(ctx->pipes[i].bgl);
        wgpuComputePipelineRelease(ctx->pipes[i].p);
    }
    free(ctx->pipes);
    if (ctx->readback) wgpuBufferRelease(ctx->readback);
    for (int i = 0; i < WGT_READBACK_SLOTS; i++)
        if (ctx->rb[i]) { wgpuBufferDestroy(ctx->rb[i]); wgpuBufferRelease(ctx->rb[i]); }
    if (ctx->tqset) { wgpuQuerySetRelease(ctx->tqset); wgpuBufferRelease(ctx->tresolve); wgpuBufferRelease(ctx->tread); }
    if (ctx->uni_buf) wgpuBufferRelease(ctx->uni_buf);
    if (ctx->qset) { wgpuQuerySetRelease(ctx->qset); wgpuBufferRelease(ctx->qresolve); wgpuBufferRelease(ctx->qread); }
    free(ctx->uni_host);
    free(ctx->uni_last);
    if (ctx->queue) wgpuQueueRelease(ctx->queue);
    if (ctx->device) { wgpuDeviceDestroy(ctx->device); wgpuDeviceRelease(ctx->device); }
    if (ctx->adapter) wgpuAdapterRelease(ctx->adapter);
    if (ctx->instance) { wgpuInstanceProcessEvents(ctx->instance); wgpuInstanceRelease(ctx->instance); }
    free(ctx);
}

// ------------------------------------------------------------------ buffers
wgt_status wg_buf_alloc(wg_ctx *ctx, wgt_buf **out, size_t n_elems, const char *label) {
    *out = NULL;
    uint64_t bytes = ((uint64_t)(n_elems ? n_elems : 1) * 4 + 255) & ~255ull;
    if (bytes > ctx->info.limits.maxBufferSize)
        return wgt_fail(WGT_ERR_CONFIG, "buffer '%s' needs %llu bytes (%.1f MiB) but the device's largest buffer is %llu "
                        "bytes; use a smaller model, batch or sequence length", label, (unsigned long long)bytes,
                        bytes / 1048576.0, (unsigned long long)ctx->info.limits.maxBufferSize);
    wgt_buf *b = wgt_calloc(1, sizeof *b);
    WGPUBufferDescriptor bd;
    memset(&bd, 0, sizeof bd);
    bd.label = sv(label);
    bd.usage = WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
    bd.size = bytes;
    b->b = wgpuDeviceCreateBuffer(ctx->device, &bd);
    b->n_elems = n_elems;
    b->bytes = bytes;
    snprintf(b->label, sizeof b->label, "%s", label);
    // WebGPU zero-initialises buffers; an allocation failure arrives as an uncaptured OOM error
    // (an error that was already pending is not this allocation's and stays pending)
    int had_error = ctx->error[0] != 0;
    wgt_status st = submit_wait(ctx, 1);
    if (st == WGT_OK && !had_error && ctx->error[0]) st = take_error(ctx);
    if (st != WGT_OK || !b->b) {
        if (b->b) wgpuBufferRelease(b->b);
        free(b);
        return wgt_fail(WGT_ERR_MEMORY, "could not allocate %.1f MiB on the GPU for '%s' (%s); use a smaller model, "
                        "batch or sequence length", bytes / 1048576.0, label, st != WGT_OK ? wgt_last_error() : "no buffer");
    }
    ctx->live_bytes += bytes;
    if (ctx->live_bytes > ctx->peak_bytes) ctx->peak_bytes = ctx->live_bytes;
    *out = b;
    return WGT_OK;
}

void wg_bytes_allocated(const wg_ctx *ctx, uint64_t *live, uint64_t *peak) {
    *live = ctx->live_bytes;
    *peak = ctx->peak_bytes;
}

void wg_buf_free(wg_ctx *ctx, wgt_buf *buf) {
    if (!buf) return;
    ctx->live_bytes -= buf->bytes;
    if (ctx->enc) submit_wait(ctx, 0);
    bg_cache_clear(ctx);  // cached bind groups may reference this buffer
    wgpuBufferDestroy(buf->b);
    wgpuBufferRelease(buf->b);
    free(buf);
}

wgt_buf *wg_scratch(wg_ctx *ctx, wg_scratch_slot slot, size_t n, const char *label) {
    WGT_ASSERT(slot >= 0 && slot < WG_SCRATCH_SLOTS, "unknown scratch slot");
    wgt_buf **b = &ctx->scratch[slot];
    if (*b && (*b)->n_elems >= n) return *b;
    wg_buf_free(ctx, *b);  // submits what is recorded first, so a grow mid-step is safe
    *b = NULL;
    if (wg_buf_alloc(ctx, b, n, label) != WGT_OK) *b = NULL;
    return *b;
}

static void check_view(wgt_view v, size_t n, const char *what) {
    WGT_ASSERT(v.buf != NULL, "a kernel was given a NULL buffer");
    if (v.off + n > v.buf->n_elems) {
        fprintf(stderr, "wgtrain: %s of %zu elements at offset %zu overruns buffer '%s' of %zu elements\n", what, n,
                v.off, v.buf->label, v.buf->n_elems);
        WGT_ASSERT(0, "view out of range: the caller's shapes do not match the buffer it allocated");
    }
}

static void end_pass(wg_ctx *ctx) {
    if (ctx->pass) {
        wgpuComputePassEncoderEnd(ctx->pass);
        wgpuComputePassEncoderRelease(ctx->pass);
        ctx->pass = NULL;
    }
}
static void ensure_encoder(wg_ctx *ctx) {
    if (!ctx->enc) ctx->enc = wgpuDeviceCreateCommandEncoder(ctx->device, NULL);
}

void wg_dry_run(wg_ctx *ctx, int on) {
    ctx->dry = on != 0;
}
int wg_pipeline_count(const wg_ctx *ctx) { return ctx->n_pipes; }

wgt_status wg_upload(wg_ctx *ctx, wgt_view dst, const void *src, size_t n) {
    check_view(dst, n, "upload");
    if (ctx->dry) return WGT_OK;
    // queue writes run before any later submit: when the recorded commands reference the
    // destination, submit them first so the order holds (otherwise the order cannot matter, and
    // the step stays one submit: the gradient clear does not force one before the tokens)
    if (ctx->enc && dst.buf->epoch == ctx->epoch) WGT_TRY(submit_wait(ctx, 0));
    size_t bytes = n * 4;
    if (bytes & 3) return WGT_OK;
    wgpuQueueWriteBuffer(ctx->queue, dst.buf->b, dst.off * 4, src, bytes);
    ctx->stats.upload_bytes += bytes;
    return WGT_OK;
}

wgt_status wg_download(wg_ctx *ctx, void *dst, wgt_view src, size_t n) {
    check_view(src, n, "download");
    WGT_ASSERT(!ctx->dry, "a download in a dry run: the dry run covers recording only");
    if (n == 0) return WGT_OK;
    uint64_t bytes = ((uint64_t)n * 4 + 3) & ~3ull;
    if (bytes > ctx->readback_bytes) {
        if (ctx->readback) wgpuBufferRelease(ctx->readback);
        WGPUBufferDescriptor bd;
        memset(&bd, 0, sizeof bd);
        bd.label = sv("readback");
        bd.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
        bd.size = bytes;
        ctx->readback = wgpuDeviceCreateBuffer(ctx->device, &bd);
        ctx->readback_bytes = bytes;
    }
    ensure_encoder(ctx);
    end_pass(ctx);
    src.buf->epoch = ctx->epoch;
    wgpuCommandEncoderCopyBufferToBuffer(ctx->enc, src.buf->b, src.off * 4, ctx->readback, 0, bytes);
    WGT_TRY(submit_wait(ctx, 0));
    ctx->stats.waits++;
    WGPUMapAsyncStatus ms;
    WGT_TRY(wait_future(ctx, ctx->instance, map_read_start(ctx->readback, bytes, &ms), "a readback"));
    if (ms != WGPUMapAsyncStatus_Success || ctx->error[0]) {
        if (ms == WGPUMapAsyncStatus_Success) wgpuBufferUnmap(ctx->readback);  // keep it usable
        if (ctx->error[0]) return take_error(ctx);
        return wgt_fail(WGT_ERR_DEVICE, "mapping a readback buffer failed (status %d)", (int)ms);
    }
    const void *p = wgpuBufferGetConstMappedRange(ctx->readback, 0, bytes);
    WGT_ASSERT(p != NULL, "mapped range of the readback buffer is NULL");
    memcpy(dst, p, n * 4);
    wgpuBufferUnmap(ctx->readback);
    return WGT_OK;
}

// A dispatch of 15_copy.wgsl's fill_zero, not ClearBuffer, which would end the compute pass
// (why there). Views of any offset: each binding is a window from the 256-byte boundary below,
// the remainder passed as an offset; views larger than one binding go in chunks (multiples of
// 256 bytes). Where the view's length and offset are multiples of 4, fill_zero4 writes a vec4 a
// thread (every window's remainder and length then multiples of 4 too).
void wg_fill_zero(wg_ctx *ctx, wgt_view dst, size_t n) {
    check_view(dst, n, "fill_zero");
    if (!n || ctx->dry) return;
    const uint64_t chunk = window_chunk(limit_setting(ctx, wg_max_binding_elems(ctx)));
    const uint32_t lanes = n % 4 == 0 && dst.off % 4 == 0 ? 4 : 1;
    WGPUComputePipeline pipe = wg_pipeline(ctx, "15_copy.wgsl", lanes == 4 ? "fill_zero4" : "fill_zero", NULL);
    for (uint64_t o = 0; o < n; o += chunk) {
        uint64_t k = n - o < chunk ? n - o : chunk;
        uint32_t rem;
        wg_bind b = wg_binding_window(dst, o, k, &rem);
        struct { uint32_t n, off, p0, p1; } p = {(uint32_t)k / lanes, rem / lanes, 0, 0};
        wg_dispatch(ctx, "fill_zero", pipe, &b, 1, &p, sizeof p, (p.n + 255) / 256);
    }
}

void wg_copy(wg_ctx *ctx, wgt_view dst, wgt_view src, size_t n) {
    check_view(dst, n, "copy destination");
    check_view(src, n, "copy source");
    if (!n || ctx->dry) return;
    ensure_encoder(ctx);
    end_pass(ctx);
    src.buf->epoch = dst.buf->epoch = ctx->epoch;
    wgpuCommandEncoderCopyBufferToBuffer(ctx->enc, src.buf->b, src.off * 4, dst.buf->b, dst.off * 4, (uint64_t)n * 4);
}

// ------------------------------------------------------------------ submit
static void profile_collect(wg_ctx *ctx);

// Submits what is recorded (and waits when asked) without reporting device errors: those stay
// pending in ctx->error until a caller that speaks for the user (sync, download) takes them, so
// the runtime's own submits (on upload, free, a full uniform ring) never swallow an error.
static wgt_status submit_wait(wg_ctx *ctx, int wait) {
    if (ctx->enc) {
        end_pass(ctx);
        if (ctx->profile && ctx->n_queries) {
            wgpuCommandEncoderResolveQuerySet(ctx->enc, ctx->qset, 0, ctx->n_queries, ctx->qresolve, 0);
            wgpuCommandEncoderCopyBufferToBuffer(ctx->enc, ctx->qresolve, 0, ctx->qread, 0, (uint64_t)ctx->n_queries * 8);
        }
        if (ctx->timing && ctx->t_queries > ctx->t_resolved) {
            // resolve offsets must be 256-byte aligned: start at a multiple of 32 queries (those
            // before t_resolved were written earlier and resolve to the same values again)
            uint32_t first = (uint32_t)ctx->t_resolved / 32u * 32u;
            wgpuCommandEncoderResolveQuerySet(ctx->enc, ctx->tqset, first, (uint32_t)ctx->t_queries - first,
                                              ctx->tresolve, (uint64_t)first * 8);
            ctx->t_resolved = ctx->t_queries;
        }
        // the uniform ring goes to the GPU before the commands that read it (queue order); only
        // the runs of 256-byte slots that differ from what the GPU holds are written, so a
        // steady step uploads the few parameters that change (the learning rate, dropout seeds)
        for (uint32_t a = 0; a < ctx->uni_used;) {
            int same = a + UNIFORM_SLOT <= ctx->uni_last_used && !memcmp(ctx->uni_host + a, ctx->uni_last + a, UNIFORM_SLOT);
            if (same) { a += UNIFORM_SLOT; continue; }
            uint32_t b = a + UNIFORM_SLOT;
            while (b < ctx->uni_used && !(b + UNIFORM_SLOT <= ctx->uni_last_used &&
                                          !memcmp(ctx->uni_host + b, ctx->uni_last + b, UNIFORM_SLOT)))
                b += UNIFORM_SLOT;
            wgpuQueueWriteBuffer(ctx->queue, ctx->uni_buf, a, ctx->uni_host + a, b - a);
            memcpy(ctx->uni_last + a, ctx->uni_host + a, b - a);
            ctx->stats.uniform_bytes += b - a;
            a = b;
        }
        if (ctx->uni_used > ctx->uni_last_used) ctx->uni_last_used = ctx->uni_used;
        WGPUCommandBuffer cb = wgpuCommandEncoderFinish(ctx->enc, NULL);
        wgpuCommandEncoderRelease(ctx->enc);
        ctx->enc = NULL;
        wgpuQueueSubmit(ctx->queue, 1, &cb);
        wgpuCommandBufferRelease(cb);
        ctx->epoch++;
        ctx->stats.submits++;
        ctx->uni_used = 0;
        ctx->n_recorded = 0;
        if (ctx->profile && ctx->n_queries) { profile_collect(ctx); wait = 0; }
    }
    if (wait) {
        WGPUQueueWorkDoneStatus ds = 0;
        WGPUQueueWorkDoneCallbackInfo ci;
        memset(&ci, 0, sizeof ci);
        ci.mode = WGPUCallbackMode_WaitAnyOnly;
        ci.callback = on_done;
        ci.userdata1 = &ds;
        WGT_TRY(wait_future(ctx, ctx->instance, wgpuQueueOnSubmittedWorkDone(ctx->queue, ci), "queued GPU work"));
        ctx->stats.waits++;
        if (ds != WGPUQueueWorkDoneStatus_Success && !ctx->error[0])
            snprintf(ctx->error, sizeof ctx->error, "queued GPU work did not complete (status %d)", (int)ds);
    } else {
        wgpuInstanceProcessEvents(ctx->instance);
    }
    return WGT_OK;
}

// Reports the pending device error once (a lost device keeps reporting).
static wgt_status take_error(wg_ctx *ctx) {
    if (!ctx->error[0]) return WGT_OK;
    wgt_status st = wgt_fail(WGT_ERR_DEVICE, "%s", ctx->error);
    if (!ctx->lost) ctx->error[0] = 0;
    return st;
}

wgt_status wg_flush(wg_ctx *ctx, int wait) {
    WGT_TRY(submit_wait(ctx, wait));
    return take_error(ctx);
}

// ------------------------------------------------------------------ pipelines
static const char *wgsl_find(const char *name) {
    for (const wgt_wgsl_source *s = wgt_wgsl_sources; s->name; s++)
        if (!strcmp(s->name, name)) return s->code;
    return NULL;
}

typedef struct { int done; char text[4096]; int errors; } compile_result;
static void on_compiled(WGPUCompilationInfoRequestStatus st, const WGPUCompilationInfo *info, void *u1, void *u2) {
    (void)u2;
    compile_result *r = u1;
    r->done = 1;
    if (st != WGPUCompilationInfoRequestStatus_Success || !info) return;
    for (size_t i = 0; i < info->messageCount; i++) {
        const WGPUCompilationMessage *m = &info->messages[i];
        if (m->type != WGPUCompilationMessageType_Error) continue;
        r->errors++;
        char msg[1024];
        sv_copy(msg, sizeof msg, m->message);
        size_t len = strlen(r->text);
        snprintf(r->text + len, sizeof r->text - len, "  line %llu:%llu: %s\n", (unsigned long long)m->lineNum,
                 (unsigned long long)m->linePos, msg);
    }
}

WGPUComputePipeline wg_pipeline(wg_ctx *ctx, const char *file, const char *entry, const char *defines) {
    char key[PIPE_KEY_MAX];
    int kl = snprintf(key, sizeof key, "%s:%s:%s", file, entry, defines ? defines : "");
    WGT_ASSERT(kl > 0 && (size_t)kl < sizeof key, "pipeline key (file, entry, defines) too long for the cache");
    for (int i = 0; i < ctx->n_pipes; i++)
        if (!strcmp(ctx->pipes[i].key, key)) return ctx->pipes[i].p;
    // let errors of work recorded so far surface first, so they are not blamed on this pipeline
    submit_wait(ctx, 1);
    int had_error = ctx->error[0] != 0;
    const char *shared = wgsl_find("00_shared.wgsl");
    const char *body = wgsl_find(file);
    WGT_ASSERT(shared && body, "a kernel file is missing from the embedded WGSL table (check kernels/ and the build)");
    // subgroup operations need the enable directive before any declaration
    // (and f16 types, which the native f16 storage path declares, need theirs: only where the
    // device has shader-f16 and WGTRAIN_F16 is not packed, so that the packed path compiles
    // here exactly as on a device without f16)
    const int f16 = ctx->info.has_f16 && ctx->settings.f16 != WG_F16_PACKED;
    const char *enables = ctx->info.has_subgroups ? (f16 ? "enable subgroups;\nenable f16;\n" : "enable subgroups;\n")
                                                  : (f16 ? "enable f16;\n" : "");
    char consts[256];
    snprintf(consts, sizeof consts, "const HAS_SUBGROUPS : bool = %s;\nconst HAS_F16 : bool = %s;\n",
             ctx->info.has_subgroups ? "true" : "false", f16 ? "true" : "false");
    size_t n = strlen(enables) + strlen(consts) + strlen(shared) + strlen(body) + (defines ? strlen(defines) : 0) + 8;
    char *src = wgt_malloc(n);
    snprintf(src, n, "%s%s%s\n%s\n%s", enables, consts, shared, defines ? defines : "", body);
    WGPUShaderSourceWGSL ws;
    memset(&ws, 0, sizeof ws);
    ws.chain.sType = WGPUSType_ShaderSourceWGSL;
    ws.code = sv(src);
    WGPUShaderModuleDescriptor md;
    memset(&md, 0, sizeof md);
    md.nextInChain = &ws.chain;
    md.label = sv(key);
    WGPUShaderModule mod = wgpuDeviceCreateShaderModule(ctx->device, &md);
    compile_result cr;
    memset(&cr, 0, sizeof cr);
    WGPUCompilationInfoCallbackInfo ci;
    memset(&ci, 0, sizeof ci);
    ci.mode = WGPUCallbackMode_WaitAnyOnly;
    ci.callback = on_compiled;
    ci.userdata1 = &cr;
    wait_future(ctx, ctx->instance, wgpuShaderModuleGetCompilationInfo(mod, ci), "shader compilation");
    if (cr.errors) {
        fprintf(stderr, "wgtrain: WGSL compilation of %s (entry %s) failed:\n%s", file, entry, cr.text);
        WGT_ASSERT(0, "a shipped WGSL kernel does not compile on this device");
    }
    WGPUComputePipelineDescriptor pd;
    memset(&pd, 0, sizeof pd);
    pd.label = sv(key);
    pd.compute.module = mod;
    pd.compute.entryPoint = sv(entry);
    WGPUComputePipeline p = wgpuDeviceCreateComputePipeline(ctx->device, &pd);
    wgpuShaderModuleRelease(mod);
    free(src);
    // only an error that appeared now is this pipeline's; one already pending stays for sync
    wgt_status st = submit_wait(ctx, 1);
    if (st == WGT_OK && !had_error && ctx->error[0]) st = take_error(ctx);
    if (st != WGT_OK || !p) {
        fprintf(stderr, "wgtrain: creating pipeline %s failed: %s\n", key, wgt_last_error());
        WGT_ASSERT(0, "a shipped WGSL kernel could not be turned into a pipeline on this device");
    }
    if (ctx->n_pipes == ctx->cap_pipes) {
        ctx->cap_pipes = ctx->cap_pipes ? ctx->cap_pipes * 2 : 32;
        ctx->pipes = realloc(ctx->pipes, ctx->cap_pipes * sizeof *ctx->pipes);
        WGT_ASSERT(ctx->pipes, "out of host memory");
    }
    pipe_entry *e = &ctx->pipes[ctx->n_pipes++];
    snprintf(e->key, sizeof e->key, "%s", key);
    e->p = p;
    e->bgl = wgpuComputePipelineGetBindGroupLayout(p, 0);
    return p;
}

static WGPUBindGroupLayout pipeline_bgl(wg_ctx *ctx, WGPUComputePipeline p) {
    for (int i = 0; i < ctx->n_pipes; i++) if (ctx->pipes[i].p == p) return ctx->pipes[i].bgl;
    WGT_ASSERT(0, "wg_dispatch got a pipeline not made by wg_pipeline");
    return NULL;
}

// ------------------------------------------------------------------ dispatch
static uint64_t mix(uint64_t h, uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); return h; }

static WGPUBindGroup bind_group(wg_ctx *ctx, WGPUComputePipeline p, int nb, const WGPUBuffer *bufs, const uint64_t *offs,
                                const uint64_t *sizes) {
    uint64_t h = mix(0, (uint64_t)(uintptr_t)p);
    for (int i = 0; i < nb; i++) h = mix(mix(mix(h, (uint64_t)(uintptr_t)bufs[i]), offs[i]), sizes[i]);
    size_t mask = ctx->cap_bgs - 1, i = h & mask;
    for (;; i = (i + 1) & mask) {
        bg_entry *e = &ctx->bgs[i];
        if (!e->bg) break;
        if (e->hash == h && e->p == p && e->nb == nb && !memcmp(e->bufs, bufs, nb * sizeof *bufs) &&
            !memcmp(e->offs, offs, nb * sizeof *offs) && !memcmp(e->sizes, sizes, nb * sizeof *sizes))
            return e->bg;
    }
    if (ctx->n_bgs * 2 >= ctx->cap_bgs) {  // keep the table sparse: drop everything and start over
        bg_cache_clear(ctx);
        i = h & mask;
    }
    WGPUBindGroupEntry ents[WG_MAX_BINDS + 1];
    memset(ents, 0, sizeof ents);
    for (int k = 0; k < nb; k++) { ents[k].binding = k; ents[k].buffer = bufs[k]; ents[k].offset = offs[k]; ents[k].size = sizes[k]; }
    WGPUBindGroupDescriptor d;
    memset(&d, 0, sizeof d);
    d.layout = pipeline_bgl(ctx, p);
    d.entryCount = nb;
    d.entries = ents;
    bg_entry *e = &ctx->bgs[i];
    e->hash = h;
    e->p = p;
    e->nb = nb;
    memcpy(e->bufs, bufs, nb * sizeof *bufs);
    memcpy(e->offs, offs, nb * sizeof *offs);
    memcpy(e->sizes, sizes, nb * sizeof *sizes);
    e->bg = wgpuDeviceCreateBindGroup(ctx->device, &d);
    ctx->n_bgs++;
    return e->bg;
}

static void record(wg_ctx *ctx, const char *label, WGPUComputePipeline p, const wg_bind *binds, int nb, const void *params,
                   size_t psize, uint32_t gx, uint32_t gy, uint32_t gz) {
    WGT_ASSERT(nb <= WG_MAX_BINDS, "too many bindings for one dispatch");
    WGT_ASSERT(psize <= UNIFORM_SLOT, "kernel parameters larger than one uniform slot");
    if (gx == 0 || gy == 0 || gz == 0 || ctx->dry) return;
    if (ctx->uni_used + UNIFORM_SLOT > UNIFORM_SLOTS * UNIFORM_SLOT) submit_wait(ctx, 0);
    if (ctx->profile && ctx->n_queries + 2 > MAX_PROFILE) submit_wait(ctx, 0);
    WGPUBuffer bufs[WG_MAX_BINDS + 1];
    uint64_t offs[WG_MAX_BINDS + 1], sizes[WG_MAX_BINDS + 1];
    uint64_t align = ctx->info.limits.minStorageBufferOffsetAlignment;
    for (int i = 0; i < nb; i++) {
        size_t n = binds[i].n ? binds[i].n : 1;
        // a binding may round its end up to a whole vec4 past the tensor (vec4 kernels); buffers
        // are allocated in 256-byte units, so that never leaves the allocation
        size_t end = binds[i].v.off + binds[i].n, lim = (binds[i].v.buf->n_elems + 3) & ~(size_t)3;
        if (end > binds[i].v.buf->n_elems && end <= lim && (uint64_t)end * 4 <= binds[i].v.buf->bytes) {
            wgt_view head = binds[i].v;
            check_view(head, binds[i].v.buf->n_elems - head.off, label);
        } else {
            check_view(binds[i].v, binds[i].n, label);
        }
        bufs[i] = binds[i].v.buf->b;
        binds[i].v.buf->epoch = ctx->epoch;
        offs[i] = binds[i].v.off * 4;
        sizes[i] = (uint64_t)n * 4;
        if (offs[i] % align) {
            fprintf(stderr, "wgtrain: %s binding %d offset %llu bytes is not a multiple of %llu\n", label, i,
                    (unsigned long long)offs[i], (unsigned long long)align);
            WGT_ASSERT(0, "storage binding offsets must be aligned; allocate tensors at WGT_VIEW_ALIGN");
        }
        if (sizes[i] > ctx->info.limits.maxStorageBufferBindingSize) {
            fprintf(stderr, "wgtrain: %s binding %d is %llu bytes, over the device's %llu-byte binding limit\n", label, i,
                    (unsigned long long)sizes[i], (unsigned long long)ctx->info.limits.maxStorageBufferBindingSize);
            WGT_ASSERT(0, "the op must split bindings larger than max_binding_elems");
        }
        if (offs[i] + sizes[i] > binds[i].v.buf->bytes) sizes[i] = binds[i].v.buf->bytes - offs[i];
    }
    uint32_t slot = ctx->uni_used;
    memset(ctx->uni_host + slot, 0, UNIFORM_SLOT);
    if (psize) memcpy(ctx->uni_host + slot, params, psize);
    ctx->uni_used += UNIFORM_SLOT;
    bufs[nb] = ctx->uni_buf;
    offs[nb] = slot;
    sizes[nb] = psize ? ((psize + 15) & ~15ull) : 16;
    WGPUBindGroup bg = bind_group(ctx, p, nb + 1, bufs, offs, sizes);
    ensure_encoder(ctx);
    if (ctx->profile) {
        // one pass per dispatch so that the pass timestamps measure exactly this kernel
        end_pass(ctx);
        WGPUPassTimestampWrites tw = {NULL, ctx->qset, (uint32_t)ctx->n_queries, (uint32_t)ctx->n_queries + 1};
        WGPUComputePassDescriptor pd;
        memset(&pd, 0, sizeof pd);
        pd.timestampWrites = &tw;
        snprintf(ctx->qlabels[ctx->n_queries / 2], 48, "%s", label);
        ctx->n_queries += 2;
        ctx->pass = wgpuCommandEncoderBeginComputePass(ctx->enc, &pd);
    } else if (!ctx->pass) {
        WGPUComputePassDescriptor pd;
        memset(&pd, 0, sizeof pd);
        WGPUPassTimestampWrites tw = {NULL, ctx->tqset, (uint32_t)ctx->t_queries, (uint32_t)ctx->t_queries + 1};
        if (ctx->timing && ctx->t_queries + 2 <= MAX_TIMER_QUERIES) {
            pd.timestampWrites = &tw;
            ctx->t_queries += 2;
        } else if (ctx->timing) {
            ctx->t_overflow = 1;
        }
        ctx->pass = wgpuCommandEncoderBeginComputePass(ctx->enc, &pd);
    }
    wgpuComputePassEncoderSetPipeline(ctx->pass, p);
    wgpuComputePassEncoderSetBindGroup(ctx->pass, 0, bg, 0, NULL);
    wgpuComputePassEncoderDispatchWorkgroups(ctx->pass, gx, gy, gz);
    ctx->n_recorded++;
    if (ctx->profile) end_pass(ctx);
}

void wg_dispatch(wg_ctx *ctx, const char *label, WGPUComputePipeline p, const wg_bind *binds, int nb, const void *params,
                 size_t psize, uint64_t groups) {
    if (groups == 0) return;
    uint64_t maxd = ctx->info.limits.maxComputeWorkgroupsPerDimension;
    uint32_t gx, gy;
    if (groups <= maxd) { gx = (uint32_t)groups; gy = 1; }
    else {
        gy = (uint32_t)((groups + maxd - 1) / maxd);
        gx = (uint32_t)((groups + gy - 1) / gy);  // balanced: x*y >= groups with little excess
        WGT_ASSERT(gy <= maxd, "dispatch too large even for a 2-D grid");
    }
    record(ctx, label, p, binds, nb, params, psize, gx, gy, 1);
}

void wg_dispatch3(wg_ctx *ctx, const char *label, WGPUComputePipeline p, const wg_bind *binds, int nb, const void *params,
                  size_t psize, uint32_t gx, uint32_t gy, uint32_t gz) {
    uint32_t maxd = ctx->info.limits.maxComputeWorkgroupsPerDimension;
    WGT_ASSERT(gx <= maxd && gy <= maxd && gz <= maxd, "3-D dispatch beyond the per-dimension limit");
    record(ctx, label, p, binds, nb, params, psize, gx, gy, gz);
}

// ------------------------------------------------------------------ profiling
static void profile_collect(wg_ctx *ctx) {
    int nq = ctx->n_queries;
    ctx->n_queries = 0;
    WGPUMapAsyncStatus ms;
    if (wait_future(ctx, ctx->instance, map_read_start(ctx->qread, (size_t)nq * 8, &ms), "profile readback") != WGT_OK ||
        ms != WGPUMapAsyncStatus_Success)
        return;
    const uint64_t *ts = wgpuBufferGetConstMappedRange(ctx->qread, 0, (size_t)nq * 8);
    for (int q = 0; q + 1 < nq; q += 2) {
        double ms_k = ts[q + 1] > ts[q] ? (ts[q + 1] - ts[q]) / 1e6 : 0;
        const char *label = ctx->qlabels[q / 2];
        int r = 0;
        while (r < ctx->n_prof && strcmp(ctx->prof[r].label, label)) r++;
        if (r == ctx->n_prof) {
            if (ctx->n_prof == 256) continue;
            memcpy(ctx->prof[ctx->n_prof].label, label, 48);  // both are 48-byte, NUL-terminated labels
            ctx->n_prof++;
        }
        ctx->prof[r].calls++;
        ctx->prof[r].ms += ms_k;
    }
    wgpuBufferUnmap(ctx->qread);
}

void wg_profile_reset(wg_ctx *ctx) {
    ctx->n_prof = 0;
    memset(ctx->prof, 0, sizeof ctx->prof);
}

static int prof_cmp(const void *a, const void *b) {
    double x = ((const prof_row *)a)->ms, y = ((const prof_row *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

double wg_profile_total_ms(wg_ctx *ctx) {
    wg_flush(ctx, 1);
    double total = 0;
    for (int i = 0; i < ctx->n_prof; i++) total += ctx->prof[i].ms;
    return total;
}

double wg_profile_report(wg_ctx *ctx, FILE *f) {
    double total = wg_profile_total_ms(ctx);
    qsort(ctx->prof, ctx->n_prof, sizeof ctx->prof[0], prof_cmp);
    fprintf(f, "%-32s %8s %12s %8s\n", "kernel", "calls", "total ms", "share");
    for (int i = 0; i < ctx->n_prof; i++)
        fprintf(f, "%-32s %8d %12.3f %7.1f%%\n", ctx->prof[i].label, ctx->prof[i].calls, ctx->prof[i].ms,
                total > 0 ? 100 * ctx->prof[i].ms / total : 0);
    fprintf(f, "%-32s %8s %12.3f\n", "total", "", total);
    return total;
}

// ------------------------------------------------------------------ asynchronous readback
wgt_status wg_readback_begin(wg_ctx *ctx, int slot, wgt_view src, size_t n) {
    WGT_ASSERT(slot >= 0 && slot < WGT_READBACK_SLOTS && n >= 1 && n <= WGT_READBACK_MAX, "readback slot or size out of range");
    WGT_ASSERT(!ctx->rb_pending[slot], "readback_begin on a slot whose last readback has not ended");
    check_view(src, n, "readback");
    if (ctx->dry) return WGT_OK;
    if (!ctx->rb[slot]) {
        WGPUBufferDescriptor bd;
        memset(&bd, 0, sizeof bd);
        bd.label = sv("readback-slot");
        bd.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
        bd.size = WGT_READBACK_MAX * 4;
        ctx->rb[slot] = wgpuDeviceCreateBuffer(ctx->device, &bd);
    }
    ensure_encoder(ctx);
    end_pass(ctx);
    src.buf->epoch = ctx->epoch;
    wgpuCommandEncoderCopyBufferToBuffer(ctx->enc, src.buf->b, src.off * 4, ctx->rb[slot], 0, (uint64_t)n * 4);
    WGT_TRY(submit_wait(ctx, 0));
    ctx->rb_future[slot] = map_read_start(ctx->rb[slot], (size_t)n * 4, &ctx->rb_status[slot]);
    ctx->rb_pending[slot] = 1;
    ctx->rb_n[slot] = n;
    return WGT_OK;
}

wgt_status wg_readback_end(wg_ctx *ctx, int slot, void *dst, size_t n, int wait, int *ready) {
    WGT_ASSERT(slot >= 0 && slot < WGT_READBACK_SLOTS, "readback slot out of range");
    WGT_ASSERT(!ctx->dry, "readback_end in a dry run: the dry run covers recording only");
    WGT_ASSERT(ctx->rb_pending[slot] && n <= ctx->rb_n[slot], "readback_end on a slot without that readback");
    *ready = 0;
    WGPUFutureWaitInfo wi = {ctx->rb_future[slot], 0};
    WGPUWaitStatus ws = wgpuInstanceWaitAny(ctx->instance, 1, &wi, wait ? WAIT_TIMEOUT_NS : 0);
    if (wait) ctx->stats.waits++;
    if (ws == WGPUWaitStatus_TimedOut && !wait) return take_error(ctx);
    if (ws == WGPUWaitStatus_TimedOut)
        return wgt_fail(WGT_ERR_DEVICE, "the GPU did not finish a step within 10 minutes (hung device or driver?)");
    if (ws != WGPUWaitStatus_Success || !wi.completed)
        return wgt_fail(WGT_ERR_DEVICE, "waiting for a readback failed (WaitAny status %d)", (int)ws);
    ctx->rb_pending[slot] = 0;
    if (ctx->rb_status[slot] != WGPUMapAsyncStatus_Success || ctx->error[0]) {
        if (ctx->rb_status[slot] == WGPUMapAsyncStatus_Success) wgpuBufferUnmap(ctx->rb[slot]);
        if (ctx->error[0]) return take_error(ctx);
        return wgt_fail(WGT_ERR_DEVICE, "mapping a readback slot failed (status %d)", (int)ctx->rb_status[slot]);
    }
    const void *p = wgpuBufferGetConstMappedRange(ctx->rb[slot], 0, ctx->rb_n[slot] * 4);
    WGT_ASSERT(p != NULL, "mapped range of a readback slot is NULL");
    memcpy(dst, p, n * 4);
    wgpuBufferUnmap(ctx->rb[slot]);
    *ready = 1;
    return WGT_OK;
}

void wg_get_stats(wg_ctx *ctx, wgt_backend_stats *out) { *out = ctx->stats; }

// ------------------------------------------------------------------ pass timer
wgt_status wg_timer_start(wg_ctx *ctx) {
    if (!ctx->info.has_timestamp)
        return wgt_fail(WGT_ERR_DEVICE, "timing GPU work needs the timestamp-query feature, which this adapter lacks");
    if (ctx->profile)
        return wgt_fail(WGT_ERR_ARG, "the pass timer and per-kernel profiling cannot run on one backend at once");
    if (!ctx->tqset) timestamps_create(ctx, "pass-timer", MAX_TIMER_QUERIES, &ctx->tqset, &ctx->tresolve, &ctx->tread);
    WGT_TRY(wg_flush(ctx, 1));  // the passes recorded before now are not timed
    ctx->timing = 1;
    ctx->t_queries = ctx->t_resolved = ctx->t_overflow = 0;
    return WGT_OK;
}

wgt_status wg_timer_stop(wg_ctx *ctx, double *busy_ms, long *passes) {
    WGT_ASSERT(ctx->timing, "wg_timer_stop without wg_timer_start");
    *busy_ms = 0;
    *passes = 0;
    wgt_status st = submit_wait(ctx, 0);  // resolves the queries of what is recorded
    ctx->timing = 0;
    int nq = ctx->t_queries;
    if (st == WGT_OK && nq) {
        ensure_encoder(ctx);
        wgpuCommandEncoderCopyBufferToBuffer(ctx->enc, ctx->tresolve, 0, ctx->tread, 0, (uint64_t)nq * 8);
        st = submit_wait(ctx, 0);
        WGPUMapAsyncStatus ms = 0;
        if (st == WGT_OK)
            st = wait_future(ctx, ctx->instance, map_read_start(ctx->tread, (size_t)nq * 8, &ms), "the pass timer's readback");
        if (st == WGT_OK && ms != WGPUMapAsyncStatus_Success)
            st = wgt_fail(WGT_ERR_DEVICE, "mapping the pass timer's queries failed (status %d)", (int)ms);
        if (st == WGT_OK) {
            const uint64_t *ts = wgpuBufferGetConstMappedRange(ctx->tread, 0, (size_t)nq * 8);
            WGT_ASSERT(ts != NULL, "mapped range of the pass timer's queries is NULL");
            double ns = 0;
            for (int q = 0; q + 1 < nq; q += 2) ns += ts[q + 1] > ts[q] ? (double)(ts[q + 1] - ts[q]) : 0.0;
            wgpuBufferUnmap(ctx->tread);
            *busy_ms = ns / 1e6;
        }
    }
    *passes = ctx->t_overflow ? -1 : nq / 2;
    if (st == WGT_OK) st = take_error(ctx);
    return st;
}
