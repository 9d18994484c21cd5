// test_wgpu_abi.c — checks our own webgpu.h declarations (src/backend/webgpu/wgpu_abi.h) against
// the pinned Dawn library, without going through the runtime. Why: docs/architecture.md#the-pinned-dawn-and-its-abi lists where this
// Dawn differs from the headers found elsewhere (WGPULimits of 152 bytes, feature ids shifted by
// one from 0x50006 up, a work-done callback with a message, ...). A wrong declaration does not
// fail to link; it silently reads the wrong field, overwrites the stack or passes userdata in
// the wrong register, so every such fact is checked here by what the library actually does:
//   - WGPULimits: the library writes exactly 152 bytes (canary past the end), the last fields
//     hold sane values, and the device request reads each field we name at our offset (asking for
//     adapter-max + 1 of a limit must fail with a message naming that limit);
//   - WGPUAdapterInfo: nothing written past sizeof, sane backend/adapter type and strings;
//   - feature ids: wgpuAdapterHasFeature agrees with wgpuAdapterGetFeatures, and the ids mean
//     what we think: requesting 0x0A enables `enable f16;`, 0x11 `enable subgroups;`, 0x03
//     timestamp query sets;
//   - callbacks: request-adapter / request-device / work-done / map / uncaptured-error /
//     device-lost callbacks get their status, message and both userdata pointers intact;
//   - the instance capability timedWaitAnyEnable is honoured (WaitAny with a timeout fails
//     without it);
//   - a buffer round trip: write, copy, map a sub-range at an offset, read back.
// The adapter: a real GPU if Dawn offers one, else the fallback (lavapipe); Null is refused.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testlib.h"
#include "backend/webgpu/wgpu_abi.h"

#define CANARY 0xA5
#define TIMEOUT_NS (60ull * 1000000000ull)

static WGPUStringView sv(const char *s) { WGPUStringView v = {s, WGPU_STRLEN}; return v; }
static void sv_copy(char *dst, size_t cap, WGPUStringView s) {
    size_t n = s.data ? (s.length == WGPU_STRLEN ? strlen(s.data) : s.length) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, s.data, n);
    dst[n] = 0;
}
static int canary_intact(const unsigned char *p, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) if (p[i] != CANARY) return 0;
    return 1;
}

static void *const U2 = (void *)(uintptr_t)0x5eed1234abcdull;  // a recognisable userdata2

// ---------------------------------------------------------------- callbacks (record everything)
typedef struct {
    int calls;
    int status;
    void *handle;
    char msg[1024];
    void *u1, *u2;
} cb_rec;

static void on_adapter(WGPURequestAdapterStatus st, WGPUAdapter a, WGPUStringView m, void *u1, void *u2) {
    cb_rec *r = u1;
    r->calls++; r->status = st; r->handle = a; r->u1 = u1; r->u2 = u2;
    sv_copy(r->msg, sizeof r->msg, m);
}
static void on_device(WGPURequestDeviceStatus st, WGPUDevice d, WGPUStringView m, void *u1, void *u2) {
    cb_rec *r = u1;
    r->calls++; r->status = st; r->handle = d; r->u1 = u1; r->u2 = u2;
    sv_copy(r->msg, sizeof r->msg, m);
}
// The work-done callback records into a global, not through u1: were the library's signature
// (status, userdata1, userdata2), u1 here would be garbage, and the test should fail, not crash.
static cb_rec done_rec;
static void on_done(WGPUQueueWorkDoneStatus st, WGPUStringView m, void *u1, void *u2) {
    cb_rec *r = &done_rec;
    r->calls++; r->status = st; r->u1 = u1; r->u2 = u2;
    // a message view must be empty or a short readable string
    if (m.length == WGPU_STRLEN || m.length < sizeof r->msg) sv_copy(r->msg, sizeof r->msg, m);
    else snprintf(r->msg, sizeof r->msg, "<message view of length %zu: not a message>", m.length);
}
static void on_map(WGPUMapAsyncStatus st, WGPUStringView m, void *u1, void *u2) {
    cb_rec *r = u1;
    r->calls++; r->status = st; r->u1 = u1; r->u2 = u2;
    sv_copy(r->msg, sizeof r->msg, m);
}
static void on_error(const WGPUDevice *d, WGPUErrorType t, WGPUStringView m, void *u1, void *u2) {
    cb_rec *r = u1;
    r->calls++; r->status = t; r->handle = d ? (void *)*d : NULL; r->u1 = u1; r->u2 = u2;
    if (!r->msg[0]) sv_copy(r->msg, sizeof r->msg, m);
}
static void on_lost(const WGPUDevice *d, WGPUDeviceLostReason why, WGPUStringView m, void *u1, void *u2) {
    cb_rec *r = u1;
    r->calls++; r->status = why; r->u1 = u1; r->u2 = u2;
    sv_copy(r->msg, sizeof r->msg, m);
}
typedef struct { int calls, errors; void *u1, *u2; char text[2048]; } compile_rec;
static void on_compiled(WGPUCompilationInfoRequestStatus st, const WGPUCompilationInfo *info, void *u1, void *u2) {
    compile_rec *r = u1;
    r->calls++; r->u1 = u1; r->u2 = u2;
    if (st != WGPUCompilationInfoRequestStatus_Success || !info) return;
    for (size_t i = 0; i < info->messageCount; i++) {
        if (info->messages[i].type != WGPUCompilationMessageType_Error) continue;
        r->errors++;
        size_t len = strlen(r->text);
        sv_copy(r->text + len, sizeof r->text - len, info->messages[i].message);
    }
}

// ---------------------------------------------------------------- helpers
static WGPUInstance inst;
static WGPUWaitStatus wait_one(WGPUFuture f) {
    WGPUFutureWaitInfo wi = {f, 0};
    WGPUWaitStatus st = wgpuInstanceWaitAny(inst, 1, &wi, TIMEOUT_NS);
    if (st == WGPUWaitStatus_Success && !wi.completed) return WGPUWaitStatus_Error;
    return st;
}

static WGPUAdapter request_adapter(WGPUPowerPreference pp, int fallback, cb_rec *r) {
    WGPURequestAdapterOptions o;
    memset(&o, 0, sizeof o);
    o.featureLevel = WGPUFeatureLevel_Core;
    o.powerPreference = pp;
    o.forceFallbackAdapter = fallback;
    o.backendType = WGPUBackendType_Vulkan;
    memset(r, 0, sizeof *r);
    WGPURequestAdapterCallbackInfo ci = {NULL, WGPUCallbackMode_WaitAnyOnly, on_adapter, r, U2};
    if (wait_one(wgpuInstanceRequestAdapter(inst, &o, ci)) != WGPUWaitStatus_Success) return NULL;
    return r->status == WGPURequestAdapterStatus_Success ? r->handle : NULL;
}

static WGPUBackendType backend_of(WGPUAdapter a) {
    WGPUAdapterInfo ai;
    memset(&ai, 0, sizeof ai);
    wgpuAdapterGetInfo(a, &ai);
    WGPUBackendType b = ai.backendType;
    wgpuAdapterInfoFreeMembers(ai);
    return b;
}

static cb_rec err_rec, lost_rec;

// A device with the given features and limits (NULL: defaults); NULL on failure, message in *r.
static WGPUDevice request_device(WGPUAdapter a, const WGPUFeatureName *feats, size_t nf, const WGPULimits *lim,
                                 cb_rec *r) {
    WGPUDeviceDescriptor dd;
    memset(&dd, 0, sizeof dd);
    dd.label = sv("abi-test");
    dd.requiredFeatureCount = nf;
    dd.requiredFeatures = feats;
    dd.requiredLimits = lim;
    dd.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
    dd.deviceLostCallbackInfo.callback = on_lost;
    dd.deviceLostCallbackInfo.userdata1 = &lost_rec;
    dd.deviceLostCallbackInfo.userdata2 = U2;
    dd.uncapturedErrorCallbackInfo.callback = on_error;
    dd.uncapturedErrorCallbackInfo.userdata1 = &err_rec;
    dd.uncapturedErrorCallbackInfo.userdata2 = U2;
    memset(r, 0, sizeof *r);
    WGPURequestDeviceCallbackInfo ci = {NULL, WGPUCallbackMode_WaitAnyOnly, on_device, r, U2};
    if (wait_one(wgpuAdapterRequestDevice(a, &dd, ci)) != WGPUWaitStatus_Success) return NULL;
    return r->status == WGPURequestDeviceStatus_Success ? r->handle : NULL;
}

static void destroy_device(WGPUDevice d) {
    if (!d) return;
    wgpuDeviceDestroy(d);
    wgpuDeviceRelease(d);
    wgpuInstanceProcessEvents(inst);
}

// Compiles a WGSL module on device d; returns the number of errors (-1 if no callback came).
static int compile_errors(WGPUDevice d, const char *code, char *text, size_t cap) {
    WGPUShaderSourceWGSL ws;
    memset(&ws, 0, sizeof ws);
    ws.chain.sType = WGPUSType_ShaderSourceWGSL;
    ws.code = sv(code);
    WGPUShaderModuleDescriptor md;
    memset(&md, 0, sizeof md);
    md.nextInChain = &ws.chain;
    WGPUShaderModule mod = wgpuDeviceCreateShaderModule(d, &md);
    compile_rec cr;
    memset(&cr, 0, sizeof cr);
    WGPUCompilationInfoCallbackInfo ci = {NULL, WGPUCallbackMode_WaitAnyOnly, on_compiled, &cr, U2};
    WGPUWaitStatus ws_ = wait_one(wgpuShaderModuleGetCompilationInfo(mod, ci));
    wgpuShaderModuleRelease(mod);
    if (text) snprintf(text, cap, "%s", cr.text);
    if (ws_ != WGPUWaitStatus_Success || cr.calls != 1) return -1;
    CHECK(cr.u1 == &cr && cr.u2 == U2, "compilation-info callback userdata arrived as %p %p", cr.u1, cr.u2);
    return cr.errors;
}

// ---------------------------------------------------------------- the checks
static void check_limits(WGPUAdapter a, WGPULimits *out) {
    unsigned char buf[512];
    memset(buf, CANARY, sizeof buf);
    memset(buf, 0, sizeof(void *));  // nextInChain = NULL (an input)
    WGPUStatus st = wgpuAdapterGetLimits(a, (WGPULimits *)buf);
    CHECK(st == WGPUStatus_Success, "wgpuAdapterGetLimits returned %d", (int)st);
    CHECK(sizeof(WGPULimits) == 152, "sizeof(WGPULimits) = %zu, the pinned Dawn writes 152", sizeof(WGPULimits));
    size_t last = sizeof buf;
    while (last > 0 && buf[last - 1] == CANARY) last--;
    CHECK(canary_intact(buf, sizeof(WGPULimits), sizeof buf),
          "wgpuAdapterGetLimits wrote past byte %zu (last written byte %zu): WGPULimits is larger in the library",
          sizeof(WGPULimits), last - 1);
    WGPULimits l;
    memcpy(&l, buf, sizeof l);
    *out = l;
    const uint32_t canary32 = 0xA5A5A5A5u;
    // every uint32 field was written (a smaller library struct would leave the canary in the last ones)
    const uint32_t *u32s[] = {&l.maxTextureDimension1D, &l.maxBindGroups, &l.maxStorageBuffersPerShaderStage,
                              &l.minUniformBufferOffsetAlignment, &l.minStorageBufferOffsetAlignment,
                              &l.maxVertexBuffers, &l.maxComputeWorkgroupStorageSize,
                              &l.maxComputeInvocationsPerWorkgroup, &l.maxComputeWorkgroupSizeX,
                              &l.maxComputeWorkgroupSizeY, &l.maxComputeWorkgroupSizeZ,
                              &l.maxComputeWorkgroupsPerDimension, &l.maxImmediateSize};
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++)
        CHECK(*u32s[i] != canary32, "limit field #%zu (byte %zu) still holds the canary", i,
              (size_t)((const unsigned char *)u32s[i] - (const unsigned char *)&l));
    // sane values: at least WebGPU's guaranteed minimums, and nothing absurd
    CHECK(l.maxComputeWorkgroupsPerDimension >= 65535 && l.maxComputeWorkgroupsPerDimension < (1u << 31),
          "maxComputeWorkgroupsPerDimension = %u", l.maxComputeWorkgroupsPerDimension);
    CHECK(l.maxImmediateSize <= 65536, "maxImmediateSize = %u (expected 0..64 KiB)", l.maxImmediateSize);
    CHECK(l.maxComputeInvocationsPerWorkgroup >= 256 && l.maxComputeInvocationsPerWorkgroup <= 4096,
          "maxComputeInvocationsPerWorkgroup = %u", l.maxComputeInvocationsPerWorkgroup);
    CHECK(l.maxComputeWorkgroupSizeX >= 256 && l.maxComputeWorkgroupSizeX <= 4096 && l.maxComputeWorkgroupSizeY >= 256 &&
          l.maxComputeWorkgroupSizeZ >= 64 && l.maxComputeWorkgroupSizeZ <= 4096,
          "maxComputeWorkgroupSize = %u x %u x %u", l.maxComputeWorkgroupSizeX, l.maxComputeWorkgroupSizeY,
          l.maxComputeWorkgroupSizeZ);
    CHECK(l.maxComputeWorkgroupStorageSize >= 16384 && l.maxComputeWorkgroupStorageSize <= (1u << 20),
          "maxComputeWorkgroupStorageSize = %u", l.maxComputeWorkgroupStorageSize);
    CHECK(l.maxStorageBufferBindingSize >= (128ull << 20) && l.maxStorageBufferBindingSize <= (1ull << 40),
          "maxStorageBufferBindingSize = %llu", (unsigned long long)l.maxStorageBufferBindingSize);
    CHECK(l.maxBufferSize >= (256ull << 20) && l.maxBufferSize <= (1ull << 48), "maxBufferSize = %llu",
          (unsigned long long)l.maxBufferSize);
    CHECK(l.maxUniformBufferBindingSize >= 16384 && l.maxUniformBufferBindingSize <= (1ull << 32),
          "maxUniformBufferBindingSize = %llu", (unsigned long long)l.maxUniformBufferBindingSize);
    int pow2 = l.minStorageBufferOffsetAlignment && !(l.minStorageBufferOffsetAlignment & (l.minStorageBufferOffsetAlignment - 1)) &&
               l.minUniformBufferOffsetAlignment && !(l.minUniformBufferOffsetAlignment & (l.minUniformBufferOffsetAlignment - 1));
    CHECK(pow2 && l.minStorageBufferOffsetAlignment <= 256 && l.minUniformBufferOffsetAlignment <= 256,
          "offset alignments %u / %u", l.minStorageBufferOffsetAlignment, l.minUniformBufferOffsetAlignment);
    CHECK(l.maxStorageBuffersPerShaderStage >= 8 && l.maxStorageBuffersPerShaderStage <= 1000000,
          "maxStorageBuffersPerShaderStage = %u", l.maxStorageBuffersPerShaderStage);
    CHECK(l.maxBindGroups >= 4 && l.maxBindGroups <= 64, "maxBindGroups = %u", l.maxBindGroups);
    printf("limits: workgroups/dim %u, immediate %u, invocations %u, wg storage %u, binding %llu, buffer %llu\n",
           l.maxComputeWorkgroupsPerDimension, l.maxImmediateSize, l.maxComputeInvocationsPerWorkgroup,
           l.maxComputeWorkgroupStorageSize, (unsigned long long)l.maxStorageBufferBindingSize,
           (unsigned long long)l.maxBufferSize);
}

// Dawn validates requiredLimits against the adapter field by field and names the offending
// limit: asking for one more than the adapter's maximum in the field we declare at a given
// offset must fail with that field's name, which proves the library reads it at our offset.
static void check_limit_offsets(WGPUAdapter a, const WGPULimits *al) {
    struct { const char *name; size_t off; int is64; } f[] = {
        {"maxStorageBufferBindingSize", offsetof(WGPULimits, maxStorageBufferBindingSize), 1},
        {"maxBufferSize", offsetof(WGPULimits, maxBufferSize), 1},
        {"maxComputeWorkgroupStorageSize", offsetof(WGPULimits, maxComputeWorkgroupStorageSize), 0},
        {"maxComputeInvocationsPerWorkgroup", offsetof(WGPULimits, maxComputeInvocationsPerWorkgroup), 0},
        {"maxComputeWorkgroupSizeZ", offsetof(WGPULimits, maxComputeWorkgroupSizeZ), 0},
        {"maxComputeWorkgroupsPerDimension", offsetof(WGPULimits, maxComputeWorkgroupsPerDimension), 0},
        {"maxImmediateSize", offsetof(WGPULimits, maxImmediateSize), 0},
        {"maxStorageBuffersPerShaderStage", offsetof(WGPULimits, maxStorageBuffersPerShaderStage), 0},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        WGPULimits req = *al;
        req.nextInChain = NULL;
        unsigned char *p = (unsigned char *)&req + f[i].off;
        if (f[i].is64) { uint64_t v; memcpy(&v, p, 8); v += 256; memcpy(p, &v, 8); }
        else { uint32_t v; memcpy(&v, p, 4); v += 1; memcpy(p, &v, 4); }
        cb_rec r;
        WGPUDevice d = request_device(a, NULL, 0, &req, &r);
        CHECK(d == NULL && r.calls == 1 && strstr(r.msg, f[i].name),
              "requiring %s = adapter maximum + 1 (field at byte %zu) gave %s; message: '%s'", f[i].name, f[i].off,
              d ? "a device" : "a failure", r.msg);
        CHECK(r.u2 == U2, "request-device callback userdata2 arrived as %p", r.u2);
        destroy_device(d);
    }
    // and the adapter's own maxima are accepted, all at once
    WGPULimits req = *al;
    req.nextInChain = NULL;
    cb_rec r;
    WGPUDevice d = request_device(a, NULL, 0, &req, &r);
    CHECK(d != NULL, "a device with every limit at the adapter's maximum was refused: %s", r.msg);
    if (d) {
        unsigned char buf[512];
        memset(buf, CANARY, sizeof buf);
        memset(buf, 0, sizeof(void *));
        wgpuDeviceGetLimits(d, (WGPULimits *)buf);
        CHECK(canary_intact(buf, sizeof(WGPULimits), sizeof buf), "wgpuDeviceGetLimits wrote past %zu bytes",
              sizeof(WGPULimits));
        WGPULimits dl;
        memcpy(&dl, buf, sizeof dl);
        CHECK(dl.maxStorageBufferBindingSize == al->maxStorageBufferBindingSize &&
              dl.maxComputeWorkgroupsPerDimension == al->maxComputeWorkgroupsPerDimension &&
              dl.maxComputeWorkgroupStorageSize == al->maxComputeWorkgroupStorageSize,
              "the device's limits differ from the adapter maxima it was asked for");
    }
    destroy_device(d);
}

static void check_info(WGPUAdapter a, int *is_cpu) {
    unsigned char buf[256];
    memset(buf, CANARY, sizeof buf);
    memset(buf, 0, sizeof(void *));
    WGPUStatus st = wgpuAdapterGetInfo(a, (WGPUAdapterInfo *)buf);
    CHECK(st == WGPUStatus_Success, "wgpuAdapterGetInfo returned %d", (int)st);
    CHECK(canary_intact(buf, sizeof(WGPUAdapterInfo), sizeof buf), "wgpuAdapterGetInfo wrote past %zu bytes",
          sizeof(WGPUAdapterInfo));
    WGPUAdapterInfo ai;
    memcpy(&ai, buf, sizeof ai);
    char dev[256], ven[256], arch[256], desc[256];
    // string views must be readable: length either explicit and small, or WGPU_STRLEN
    int views_ok = 1;
    WGPUStringView vs[] = {ai.vendor, ai.architecture, ai.device, ai.description};
    for (int i = 0; i < 4; i++)
        views_ok &= (vs[i].data != NULL || vs[i].length == 0 || vs[i].length == WGPU_STRLEN) &&
                    (vs[i].length < 4096 || vs[i].length == WGPU_STRLEN);
    CHECK(views_ok, "adapter info string views look wrong (data/length swapped?)");
    if (views_ok) {
        sv_copy(dev, sizeof dev, ai.device);
        sv_copy(ven, sizeof ven, ai.vendor);
        sv_copy(arch, sizeof arch, ai.architecture);
        sv_copy(desc, sizeof desc, ai.description);
    } else {
        dev[0] = ven[0] = arch[0] = desc[0] = 0;
    }
    CHECK(dev[0] != 0, "the adapter's device name is empty");
    CHECK(ai.backendType == WGPUBackendType_Vulkan, "backendType = %d, expected Vulkan (6) on Linux", (int)ai.backendType);
    CHECK(ai.adapterType >= 1 && ai.adapterType <= 4, "adapterType = %d, expected 1..4", (int)ai.adapterType);
    int sg_ok = ai.subgroupMinSize <= ai.subgroupMaxSize && ai.subgroupMaxSize <= 128 &&
                (ai.subgroupMinSize == 0 || !(ai.subgroupMinSize & (ai.subgroupMinSize - 1))) &&
                (ai.subgroupMaxSize == 0 || !(ai.subgroupMaxSize & (ai.subgroupMaxSize - 1)));
    CHECK(sg_ok, "subgroup sizes %u..%u", ai.subgroupMinSize, ai.subgroupMaxSize);
    printf("adapter: '%s' vendor '%s' arch '%s' driver '%s', backend %d, type %d, vendor id 0x%x, subgroups %u..%u\n",
           dev, ven, arch, desc, (int)ai.backendType, (int)ai.adapterType, ai.vendorID, ai.subgroupMinSize,
           ai.subgroupMaxSize);
    *is_cpu = ai.adapterType == WGPUAdapterType_CPU;
    wgpuAdapterInfoFreeMembers(ai);
}

static int has_in_list(const WGPUSupportedFeatures *sf, uint32_t id) {
    for (size_t i = 0; i < sf->featureCount; i++) if ((uint32_t)sf->features[i] == id) return 1;
    return 0;
}

static void check_features(WGPUAdapter a, int is_cpu, int *f16, int *sg, int *ts) {
    WGPUSupportedFeatures sf = {0, NULL};
    wgpuAdapterGetFeatures(a, &sf);
    CHECK(sf.featureCount > 0 && sf.featureCount < 256 && sf.features != NULL, "feature list of %zu entries",
          sf.featureCount);
    int all_agree = 1;
    for (size_t i = 0; i < sf.featureCount; i++) all_agree &= wgpuAdapterHasFeature(a, sf.features[i]) != 0;
    CHECK(all_agree, "wgpuAdapterHasFeature denies a feature that wgpuAdapterGetFeatures lists");
    const struct { uint32_t id; const char *name; } ids[] = {
        {0x03, "timestamp-query"}, {0x0A, "shader-f16"}, {0x11, "subgroups"},
        {0x50037, "chromium-experimental-subgroup-matrix"}, {0x7FFFFF00u, "(not a feature)"}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        int h = wgpuAdapterHasFeature(a, (WGPUFeatureName)ids[i].id) != 0, l = has_in_list(&sf, ids[i].id);
        CHECK(h == l, "feature 0x%x (%s): HasFeature %d but the list says %d", ids[i].id, ids[i].name, h, l);
    }
    *ts = has_in_list(&sf, 0x03);
    *f16 = has_in_list(&sf, 0x0A);
    *sg = has_in_list(&sf, 0x11);
    if (is_cpu) {  // docs/architecture.md#adapters: Mesa 25 lavapipe has all three
        CHECK(*f16 && *sg && *ts, "lavapipe should offer shader-f16, subgroups and timestamp-query (got %d %d %d)",
              *f16, *sg, *ts);
    }
    printf("features: %zu listed; timestamp-query %d, shader-f16 %d, subgroups %d\n", sf.featureCount, *ts, *f16, *sg);
    wgpuSupportedFeaturesFreeMembers(sf);
}

// The ids mean what we think: a feature requested by id enables exactly its WGSL / API use.
static void check_feature_semantics(WGPUAdapter a, int f16, int sg, int ts) {
    static const char *f16_src = "enable f16;\n@compute @workgroup_size(1) fn main() { var h : f16 = 1.0h; _ = h; }\n";
    static const char *sg_src = "enable subgroups;\n@compute @workgroup_size(32) fn main("
                                "@builtin(subgroup_size) s : u32) { _ = s; }\n";
    cb_rec r;
    char text[2048];
    WGPUDevice plain = request_device(a, NULL, 0, NULL, &r);
    CHECK(plain != NULL, "a default device was refused: %s", r.msg);
    if (!plain) return;
    memset(&err_rec, 0, sizeof err_rec);
    // without the features, both modules must fail to compile (this also shows the compiler runs)
    CHECK(compile_errors(plain, f16_src, text, sizeof text) > 0, "'enable f16' compiled on a device without shader-f16");
    CHECK(compile_errors(plain, sg_src, text, sizeof text) > 0, "'enable subgroups' compiled on a device without subgroups");
    CHECK(compile_errors(plain, "@compute @workgroup_size(1) fn main() {}\n", text, sizeof text) == 0,
          "a trivial module did not compile: %s", text);
    wgpuInstanceProcessEvents(inst);
    CHECK(err_rec.calls > 0 && err_rec.status == WGPUErrorType_Validation && err_rec.u1 == &err_rec && err_rec.u2 == U2 &&
          err_rec.msg[0] && err_rec.handle == (void *)plain,
          "uncaptured-error callback: %d calls, type %d, device %p (expected %p), userdata %p %p, message '%.80s'",
          err_rec.calls, err_rec.status, err_rec.handle, (void *)plain, err_rec.u1, err_rec.u2, err_rec.msg);
    if (ts) {
        memset(&err_rec, 0, sizeof err_rec);
        WGPUQuerySetDescriptor qd;
        memset(&qd, 0, sizeof qd);
        qd.type = WGPUQueryType_Timestamp;
        qd.count = 2;
        WGPUQuerySet q = wgpuDeviceCreateQuerySet(plain, &qd);
        wgpuInstanceProcessEvents(inst);
        CHECK(err_rec.calls > 0, "a timestamp query set was created without requesting timestamp-query (0x03)");
        if (q) wgpuQuerySetRelease(q);
    }
    memset(&lost_rec, 0, sizeof lost_rec);
    destroy_device(plain);
    CHECK(lost_rec.calls == 1 && lost_rec.status == WGPUDeviceLostReason_Destroyed && lost_rec.u1 == &lost_rec &&
          lost_rec.u2 == U2, "device-lost callback after destroy: %d calls, reason %d, userdata %p %p", lost_rec.calls,
          lost_rec.status, lost_rec.u1, lost_rec.u2);

    WGPUFeatureName feats[3];
    size_t nf = 0;
    if (f16) feats[nf++] = (WGPUFeatureName)0x0A;
    if (sg) feats[nf++] = (WGPUFeatureName)0x11;
    if (ts) feats[nf++] = (WGPUFeatureName)0x03;
    if (!nf) return;
    WGPUDevice d = request_device(a, feats, nf, NULL, &r);
    CHECK(d != NULL, "a device with the adapter's shader-f16/subgroups/timestamp features was refused: %s", r.msg);
    if (!d) return;
    if (f16) CHECK(compile_errors(d, f16_src, text, sizeof text) == 0, "'enable f16' failed with feature 0x0A: %s", text);
    if (sg) CHECK(compile_errors(d, sg_src, text, sizeof text) == 0, "'enable subgroups' failed with feature 0x11: %s", text);
    if (ts) {
        memset(&err_rec, 0, sizeof err_rec);
        WGPUQuerySetDescriptor qd;
        memset(&qd, 0, sizeof qd);
        qd.type = WGPUQueryType_Timestamp;
        qd.count = 2;
        WGPUQuerySet q = wgpuDeviceCreateQuerySet(d, &qd);
        wgpuInstanceProcessEvents(inst);
        CHECK(q && err_rec.calls == 0, "timestamp query set failed with feature 0x03: %s", err_rec.msg);
        if (q) wgpuQuerySetRelease(q);
    }
    destroy_device(d);
}

static void check_queue_and_map(WGPUAdapter a) {
    cb_rec r;
    WGPUDevice d = request_device(a, NULL, 0, NULL, &r);
    CHECK(d != NULL, "a default device was refused: %s", r.msg);
    if (!d) return;
    memset(&err_rec, 0, sizeof err_rec);
    WGPUQueue q = wgpuDeviceGetQueue(d);
    enum { N = 1024 };
    uint32_t data[N];
    for (uint32_t i = 0; i < N; i++) data[i] = i * 2654435761u;
    WGPUBufferDescriptor bd;
    memset(&bd, 0, sizeof bd);
    bd.usage = WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
    bd.size = sizeof data;
    WGPUBuffer src = wgpuDeviceCreateBuffer(d, &bd);
    bd.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    WGPUBuffer rb = wgpuDeviceCreateBuffer(d, &bd);
    wgpuQueueWriteBuffer(q, src, 0, data, sizeof data);
    WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(d, NULL);
    // copy with offsets: src[16..] -> rb[16..], so a swapped offset/size argument shows up
    wgpuCommandEncoderCopyBufferToBuffer(enc, src, 64, rb, 64, sizeof data - 64);
    WGPUCommandBuffer cb = wgpuCommandEncoderFinish(enc, NULL);
    wgpuQueueSubmit(q, 1, &cb);
    wgpuCommandBufferRelease(cb);
    wgpuCommandEncoderRelease(enc);

    cb_rec done;
    memset(&done_rec, 0, sizeof done_rec);
    WGPUQueueWorkDoneCallbackInfo wci = {NULL, WGPUCallbackMode_WaitAnyOnly, on_done, &done, U2};
    WGPUWaitStatus ws = wait_one(wgpuQueueOnSubmittedWorkDone(q, wci));
    CHECK(ws == WGPUWaitStatus_Success, "waiting for the work-done future: status %d", (int)ws);
    CHECK(done_rec.calls == 1 && done_rec.status == WGPUQueueWorkDoneStatus_Success,
          "work-done callback: %d calls, status %d", done_rec.calls, done_rec.status);
    CHECK(done_rec.u1 == &done && done_rec.u2 == U2,
          "work-done callback userdata arrived as %p %p (expected %p %p): the callback signature is not "
          "(status, message, userdata1, userdata2)", done_rec.u1, done_rec.u2, (void *)&done, U2);

    // map a sub-range at a nonzero offset: [128, 128 + 2048) bytes = elements 32..543
    cb_rec mr;
    memset(&mr, 0, sizeof mr);
    WGPUBufferMapCallbackInfo mci = {NULL, WGPUCallbackMode_WaitAnyOnly, on_map, &mr, U2};
    ws = wait_one(wgpuBufferMapAsync(rb, WGPUMapMode_Read, 128, 2048, mci));
    CHECK(ws == WGPUWaitStatus_Success && mr.calls == 1 && mr.status == WGPUMapAsyncStatus_Success,
          "map: wait %d, %d calls, status %d, message '%s'", (int)ws, mr.calls, mr.status, mr.msg);
    CHECK(mr.u1 == &mr && mr.u2 == U2, "map callback userdata arrived as %p %p", mr.u1, mr.u2);
    if (mr.status == WGPUMapAsyncStatus_Success) {
        const uint32_t *p = wgpuBufferGetConstMappedRange(rb, 128, 2048);
        CHECK(p != NULL, "GetConstMappedRange(128, 2048) returned NULL");
        if (p) {
            int ok = 1;
            for (int i = 0; i < 512; i++) ok &= p[i] == data[32 + i];
            CHECK(ok, "mapped data differ: first element %u, expected %u", p[0], data[32]);
        }
        // a range outside the mapped one must be refused
        CHECK(wgpuBufferGetConstMappedRange(rb, 0, 64) == NULL, "GetConstMappedRange outside the mapped range succeeded");
        wgpuBufferUnmap(rb);
    }
    wgpuInstanceProcessEvents(inst);
    CHECK(err_rec.calls == 0, "device errors during the round trip: %s", err_rec.msg);
    wgpuBufferDestroy(src); wgpuBufferRelease(src);
    wgpuBufferDestroy(rb); wgpuBufferRelease(rb);
    wgpuQueueRelease(q);
    destroy_device(d);
}

// An instance without timedWaitAnyEnable must refuse a WaitAny with a timeout; ours (with it) must
// accept one. If the capability struct were laid out differently, the flag would not reach Dawn.
// (Dawn prints "Error: Timeout waits are either not enabled or not supported." here: expected.)
static void check_timed_wait(void) {
    WGPUInstanceDescriptor id;
    memset(&id, 0, sizeof id);
    WGPUInstance plain = wgpuCreateInstance(&id);
    CHECK(plain != NULL, "wgpuCreateInstance without capabilities failed");
    if (!plain) return;
    cb_rec r;
    memset(&r, 0, sizeof r);
    WGPURequestAdapterOptions o;
    memset(&o, 0, sizeof o);
    o.backendType = WGPUBackendType_Vulkan;
    WGPURequestAdapterCallbackInfo ci = {NULL, WGPUCallbackMode_WaitAnyOnly, on_adapter, &r, U2};
    WGPUFutureWaitInfo wi = {wgpuInstanceRequestAdapter(plain, &o, ci), 0};
    WGPUWaitStatus st = wgpuInstanceWaitAny(plain, 1, &wi, 1000000000ull);
    CHECK(st == WGPUWaitStatus_Error, "WaitAny with a timeout on an instance without timedWaitAnyEnable returned %d, "
          "expected Error (3)", (int)st);
    st = wgpuInstanceWaitAny(plain, 1, &wi, 0);  // a zero timeout is always allowed
    for (int i = 0; i < 10000 && st == WGPUWaitStatus_TimedOut; i++) st = wgpuInstanceWaitAny(plain, 1, &wi, 0);
    CHECK(st == WGPUWaitStatus_Success && wi.completed && r.calls == 1, "polling WaitAny(0): status %d, completed %d",
          (int)st, (int)wi.completed);
    if (r.status == WGPURequestAdapterStatus_Success && r.handle) wgpuAdapterRelease(r.handle);
    wgpuInstanceRelease(plain);
}

int main(void) {
    WGPUInstanceDescriptor id;
    memset(&id, 0, sizeof id);
    id.capabilities.timedWaitAnyEnable = 1;
    inst = wgpuCreateInstance(&id);
    if (!inst) { fprintf(stderr, "wgpuCreateInstance failed\n"); return 1; }

    // the adapter: a real GPU first, else the fallback; never the Null backend
    cb_rec ar;
    WGPUAdapter a = request_adapter(WGPUPowerPreference_HighPerformance, 0, &ar);
    if (a && backend_of(a) == WGPUBackendType_Null) { wgpuAdapterRelease(a); a = NULL; }
    if (!a) a = request_adapter(WGPUPowerPreference_Undefined, 1, &ar);
    if (a && backend_of(a) == WGPUBackendType_Null) { wgpuAdapterRelease(a); a = NULL; }
    if (!a) {
        fprintf(stderr, "no usable Vulkan adapter (last message: %s); run scripts/setup.sh\n", ar.msg);
        return 1;
    }
    CHECK(ar.calls == 1 && ar.u1 == &ar && ar.u2 == U2, "request-adapter callback: %d calls, userdata %p %p", ar.calls,
          ar.u1, ar.u2);

    int is_cpu = 0, f16 = 0, sg = 0, ts = 0;
    WGPULimits lim;
    check_info(a, &is_cpu);
    check_limits(a, &lim);
    check_limit_offsets(a, &lim);
    check_features(a, is_cpu, &f16, &sg, &ts);
    check_feature_semantics(a, f16, sg, ts);
    check_queue_and_map(a);
    check_timed_wait();

    wgpuAdapterRelease(a);
    wgpuInstanceRelease(inst);
    return test_finish();
}
