// test_runtime.c — behaviours of the WebGPU runtime (src/backend/webgpu/wg_runtime.c) that no
// kernel test sees:
//   - the 2-D dispatch split: gelu_inplace on n = 65535·256 + 1000 elements needs 65539
//     workgroups, more than one grid dimension holds, so the runtime dispatches x·y and the
//     kernel recovers the index with flat_id. Every element must match the C reference (no
//     element skipped, none done twice: gelu∘gelu differs from gelu), and a sentinel region
//     after n, in the same buffer, must stay untouched. n = 65535·256 (the largest 1-D grid)
//     and 65535·256 + 1 (the smallest 2-D one) are checked too.
//   - errors are reported, not ignored: a buffer above maxBufferSize gives WGT_ERR_CONFIG with
//     a message; a real WebGPU validation error (a command on a destroyed buffer) comes back from
//     wg_flush / wg_download as WGT_ERR_DEVICE with Dawn's message, and the context keeps
//     working afterwards; a download past a buffer's end aborts with a message (in a child);
//     an error is not lost when the runtime submits on its own (a buffer free, a full uniform
//     ring) before the next sync, and a kernel compiled for the first time while an invalid
//     command is pending does not turn that command's error into a pipeline abort.
//   - the settings (wg_settings.h): wg_ctx_init reads them from the environment once; a malformed
//     value of each variable makes it fail with WGT_ERR_ARG and a message naming the variable and
//     the accepted form, before any device is made; valid values reach wg_ctx_settings (and the
//     test-only binding limit reaches wg_binding_limit); the backend's optional entries are there.
//   - the asynchronous readback and the step's traffic: readback_begin returns before the data
//     is there and readback_end (polling, then waiting) hands over what the recorded work wrote;
//     three slots in flight at once keep their own data; an upload whose buffer the recorded
//     work does not reference submits nothing, one that it references submits first (program
//     order); the uniform ring is written only where it changed (get_stats); the pass timer
//     counts the passes and a positive GPU time.
//   - the dry run: an op compiles its pipeline and writes nothing; the real op afterwards uses
//     the cached pipeline and writes the reference's result.
//   - the adapter choice: "software" gives the CPU (software) adapter, "cpu" is refused, "auto" never the Null
//     backend, a name that matches nothing fails with a message listing the adapters found, and
//     with no Vulkan driver at all (a child with VK_DRIVER_FILES pointing nowhere) wg_ctx_init
//     fails with a clear message instead of computing nothing on Dawn's Null adapter.
// Tolerance for gelu: the WGSL exp against the reference's, a few float ulps: atol 1e-6 + rtol 1e-5
// (test_kernels_activation_loss.c covers gelu's numerics; this test is about which elements are written).
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "testlib.h"
#include "backend/backend.h"
#include "backend/webgpu/wg_runtime.h"

#define GELU_ATOL 1e-6
#define GELU_RTOL 1e-5
#define SENTINEL 64  // elements after n that the kernel must not touch

#include "backend/cpu/ops.h"  // cpu_gelu_inplace, the C reference
#include "core/clock.h"


static const char *adapter_env(void) {
    const char *a = getenv("WGTRAIN_TEST_ADAPTER");
    return a ? a : "auto";
}

// ---------------------------------------------------------------- child modes
// Run in a fresh process (see run_child): a download past the buffer's end must abort.
static int child_overrun(void) {
    wg_ctx *ctx;
    if (wg_ctx_init(&ctx, adapter_env(), 0) != WGT_OK) { fprintf(stderr, "init: %s\n", wgt_last_error()); return 3; }
    wgt_buf *b;
    if (wg_buf_alloc(ctx, &b, 100, "small") != WGT_OK) return 3;
    float dst[200];
    wgt_view v = wgt_view_of(b, 0, b->n_elems);
    wg_download(ctx, dst, v, 101);  // one element too many: must not return
    fprintf(stderr, "download past the end returned\n");
    return 4;
}
// A kernel compiled for the first time while an invalid command is pending: the error belongs to
// that command and must come back from the next sync, not abort as a pipeline failure.
static int child_pipeline_after_error(void) {
    wgt_backend *be;
    if (backend_webgpu_init(&be, adapter_env()) != WGT_OK) { fprintf(stderr, "init: %s\n", wgt_last_error()); return 3; }
    wg_ctx *ctx = (wg_ctx *)be->impl;
    wgt_buf *victim, *x;
    if (wg_buf_alloc(ctx, &victim, 1024, "victim") != WGT_OK || wg_buf_alloc(ctx, &x, 256, "x") != WGT_OK) return 3;
    wgpuBufferDestroy(victim->b);
    wgt_view vv = wgt_view_of(victim, 0, victim->n_elems), xv = wgt_view_of(x, 0, x->n_elems);
    wg_fill_zero(ctx, vv, 1024);
    be->gelu_inplace(be, xv, 256);  // first use: the pipeline is compiled now
    wgt_status st = be->sync(be);
    printf("SYNC STATUS %d MESSAGE %s\n", (int)st, st == WGT_OK ? "" : wgt_last_error());
    return 0;
}

// With no Vulkan driver, initialisation must fail with a message (never pick the Null adapter).
static int child_no_driver(void) {
    wg_ctx *ctx;
    wgt_status st = wg_ctx_init(&ctx, "auto", 0);
    if (st == WGT_OK) {
        const wg_device_info *inf = wg_ctx_info(ctx);
        printf("GOT ADAPTER '%s' backend %s\n", inf->name, wg_backend_type_name(inf->backend));
        return 5;
    }
    printf("STATUS %d MESSAGE %s\n", (int)st, wgt_last_error());
    return 0;
}

// Runs this test binary with `mode` (and extra environment) and returns its wait status;
// stdout+stderr of the child go to *out (caller frees).
static int run_child(const char *mode, const char *env_name, const char *env_value, char **out) {
    int fd[2];
    if (pipe(fd)) { perror("pipe"); exit(1); }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(1); }
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        if (env_name) setenv(env_name, env_value, 1);
        execl("/proc/self/exe", "test_runtime", mode, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    ssize_t r;
    while ((r = read(fd[0], buf + len, cap - len)) > 0 || (r < 0 && errno == EINTR)) if (r > 0) len += (size_t)r;
    buf[len] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    *out = buf;
    return status;
}

// ---------------------------------------------------------------- 2-D dispatch
static void check_gelu_split(wgt_backend *be, size_t n, const char *what) {
    double t0 = wgt_now_s();
    size_t total = n + SENTINEL;
    float *x = malloc(total * 4), *ref = malloc(total * 4), *got = malloc(total * 4);
    uint64_t s = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < total; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        // values in [-4, 4): gelu(gelu(x)) != gelu(x) there, so a doubly processed element shows
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 8.0 - 4.0);
    }
    x[n] = 1234.5f;  // the first sentinel, easy to spot
    memcpy(ref, x, total * 4);
    cpu_gelu_inplace(ref, n);
    wgt_buf *b;
    if (be->buf_alloc(be, &b, total, "gelu-split") != WGT_OK) {
        CHECK(0, "%s: allocation of %zu elements failed: %s", what, total, wgt_last_error());
        free(x); free(ref); free(got);
        return;
    }
    wgt_view v = wgt_view_of(b, 0, b->n_elems);
    wgt_status st = be->upload(be, v, x, total);
    be->gelu_inplace(be, v, n);
    if (st == WGT_OK) st = be->sync(be);
    if (st == WGT_OK) st = be->download(be, got, v, total);
    CHECK(st == WGT_OK, "%s: device error: %s", what, wgt_last_error());
    if (st == WGT_OK) {
        char lab[160];
        snprintf(lab, sizeof lab, "%s: gelu over all %zu elements", what, n);
        CHECK_CLOSE(lab, got, ref, n, GELU_ATOL, GELU_RTOL);
        // the tail: the last 256 + 1000 elements are in the second row of the 2-D grid
        size_t tail = n > 4096 ? 4096 : n;
        snprintf(lab, sizeof lab, "%s: gelu of the last %zu elements", what, tail);
        CHECK_CLOSE(lab, got + n - tail, ref + n - tail, tail, GELU_ATOL, GELU_RTOL);
        CHECK(memcmp(got + n, x + n, SENTINEL * 4) == 0, "%s: the kernel wrote past n (sentinel[0] = %g, was %g)", what,
              got[n], x[n]);
    }
    be->buf_free(be, b);
    free(x); free(ref); free(got);
    printf("%-40s n = %zu (%zu workgroups): %.2f s\n", what, n, (n + 255) / 256, wgt_now_s() - t0);
}

// ---------------------------------------------------------------- errors
static void check_errors(wgt_backend *be) {
    wg_ctx *ctx = (wg_ctx *)be->impl;
    const wg_device_info *inf = wg_ctx_info(ctx);
    // (1) above maxBufferSize: refused up front, with the label and the limit in the message
    uint64_t maxb = inf->limits.maxBufferSize;
    size_t n_big = (size_t)(maxb / 4 + 1024);
    wgt_buf *b = NULL;
    wgt_status st = wg_buf_alloc(ctx, &b, n_big, "huge-tensor");
    const char *msg = wgt_last_error();
    CHECK(st == WGT_ERR_CONFIG && b == NULL, "allocating %zu elements (maxBufferSize %llu bytes) gave status %d", n_big,
          (unsigned long long)maxb, (int)st);
    CHECK(strstr(msg, "huge-tensor") && strstr(msg, "MiB"), "the message does not name the buffer and sizes: '%s'", msg);
    printf("over maxBufferSize: %s\n", msg);

    // (2) a real validation error: use a buffer whose WGPUBuffer was destroyed behind the
    // runtime's back. The submit is invalid; wg_flush must report Dawn's message.
    wgt_buf *victim, *ok;
    if (wg_buf_alloc(ctx, &victim, 1024, "victim") != WGT_OK || wg_buf_alloc(ctx, &ok, 1024, "bystander") != WGT_OK) {
        CHECK(0, "small allocations failed: %s", wgt_last_error());
        return;
    }
    wgpuBufferDestroy(victim->b);
    wgt_view vv = wgt_view_of(victim, 0, victim->n_elems), ov = wgt_view_of(ok, 0, ok->n_elems);
    wg_fill_zero(ctx, vv, 1024);
    st = wg_flush(ctx, 1);
    msg = wgt_last_error();
    CHECK(st == WGT_ERR_DEVICE, "a submit using a destroyed buffer gave status %d (expected WGT_ERR_DEVICE)", (int)st);
    CHECK(strcasestr(msg, "validation") && strcasestr(msg, "destroyed"),
          "the error message should carry Dawn's validation message: '%s'", msg);
    printf("validation error via wg_flush: %.160s\n", msg);
    // the same through a download (the path every readback takes)
    float tmp[1024];
    st = wg_download(ctx, tmp, vv, 1024);
    msg = wgt_last_error();
    CHECK(st == WGT_ERR_DEVICE && strcasestr(msg, "validation"),
          "a download from a destroyed buffer gave status %d, message '%s'", (int)st, msg);
    // the error is reported once; the context keeps working
    float src[1024], back[1024];
    for (int i = 0; i < 1024; i++) src[i] = (float)i * 0.5f;
    st = wg_upload(ctx, ov, src, 1024);
    if (st == WGT_OK) st = wg_flush(ctx, 1);
    if (st == WGT_OK) st = wg_download(ctx, back, ov, 1024);
    CHECK(st == WGT_OK && !memcmp(src, back, sizeof src), "the context does not work after a reported error: %s",
          st == WGT_OK ? "data differ" : wgt_last_error());
    wg_buf_free(ctx, ok);
    wg_buf_free(ctx, victim);  // destroying twice is allowed by WebGPU
    CHECK(wg_flush(ctx, 1) == WGT_OK, "a flush after freeing reported: %s", wgt_last_error());

    // (3) a download past the buffer's end is a caller bug: abort with a message (child process)
    char *out;
    int ws = run_child("--child-overrun", NULL, NULL, &out);
    CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGABRT, "download past the end: the child %s %d (expected SIGABRT)",
          WIFSIGNALED(ws) ? "died of signal" : "exited with", WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
    CHECK(strstr(out, "overruns") && strstr(out, "small"), "the abort message does not say what overran: '%.300s'", out);
    free(out);

    // (4) an error must survive the runtime's internal submits until a sync reports it
    // (backend.h: sync "reports any device error since last sync"). The runtime submits on its
    // own when a buffer is freed and when the uniform ring fills (4096 dispatches).
    wgt_buf *v2, *other, *x;
    if (wg_buf_alloc(ctx, &v2, 1024, "victim2") != WGT_OK || wg_buf_alloc(ctx, &other, 1024, "other") != WGT_OK ||
        wg_buf_alloc(ctx, &x, 256, "x") != WGT_OK) {
        CHECK(0, "small allocations failed: %s", wgt_last_error());
        return;
    }
    wgt_view v2v = wgt_view_of(v2, 0, v2->n_elems), xv = wgt_view_of(x, 0, x->n_elems);
    be->gelu_inplace(be, xv, 256);  // compile the pipelines before the error is pending
    wg_fill_zero(ctx, xv, 256);     // (fill_zero4's, which the 1024-element fills below take)
    CHECK(be->sync(be) == WGT_OK, "gelu on a small buffer: %s", wgt_last_error());
    wgpuBufferDestroy(v2->b);
    wg_fill_zero(ctx, v2v, 1024);
    wg_buf_free(ctx, other);  // submits what is recorded
    st = be->sync(be);
    CHECK(st == WGT_ERR_DEVICE, "a validation error followed by a buffer free was not reported by sync (status %d)",
          (int)st);
    wg_fill_zero(ctx, v2v, 1024);
    for (int i = 0; i < 4200; i++) be->gelu_inplace(be, xv, 256);  // fills the uniform ring: automatic submit
    st = be->sync(be);
    CHECK(st == WGT_ERR_DEVICE, "a validation error followed by 4200 dispatches was not reported by sync (status %d)",
          (int)st);
    be->sync(be);
    wg_buf_free(ctx, x);
    wg_buf_free(ctx, v2);
    be->sync(be);

    // (5) the first use of a kernel while an invalid command is pending (child process: today
    // this aborts, blaming the pipeline)
    ws = run_child("--child-pipeline-after-error", NULL, NULL, &out);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && strstr(out, "SYNC STATUS 5") && strcasestr(out, "destroyed"),
          "a kernel compiled while an invalid command was pending: child %s %d, output: %.400s",
          WIFSIGNALED(ws) ? "died of signal" : "exited with", WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws), out);
    free(out);
}

// ---------------------------------------------------------------- settings
static void check_settings(void) {
    static const struct { const char *name, *value; } bad[] = {
        {"WGTRAIN_ROBUST", "yes"},          {"WGTRAIN_MM_TILE", "huge"},
        {"WGTRAIN_MM_SPLITK", "lots"},      {"WGTRAIN_MM_SPLITK", "-1"},
        {"WGTRAIN_MM_VEC4", "4"},           {"WGTRAIN_MM_GROUP", "0"},
        {"WGTRAIN_ATTN_FWD_CFG", "nl=8;tr=2"}, {"WGTRAIN_ATTN_BWD_CFG", "v=bogus"},
        {"WGTRAIN_ATTN_UNROLL", "maybe"},   {"WGTRAIN_CE_CFG", "wg=100"},
        {"WGTRAIN_CE_CFG", "reg=4,zz=1"},   {"WGTRAIN_TEST_BINDING_LIMIT", "12"},
        {"WGTRAIN_F16", "half"},            {"WGTRAIN_MM_TCOPY", "2"},
        {"WGTRAIN_MM_TCOPY", "W"},         {"WGTRAIN_MM_EDGE_FIRST", "2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv(bad[i].name, bad[i].value, 1);
        wg_ctx *ctx = NULL;
        wgt_status st = wg_ctx_init(&ctx, adapter_env(), 0);
        const char *m = wgt_last_error();
        CHECK(st == WGT_ERR_ARG && !ctx && strstr(m, bad[i].name) && strstr(m, "expected"),
              "%s=%s: wg_ctx_init gave status %d, message '%s'", bad[i].name, bad[i].value, (int)st, st ? m : "");
        if (i == 0) printf("malformed setting: %s\n", m);
        if (st == WGT_OK) wg_ctx_free(ctx);
        unsetenv(bad[i].name);
    }

    static const struct { const char *name, *value; } good[] = {
        {"WGTRAIN_ROBUST", "1"},          {"WGTRAIN_MM_TILE", "small"},
        {"WGTRAIN_MM_SPLITK", "off"},     {"WGTRAIN_MM_VEC4", "3"},
        {"WGTRAIN_MM_GROUP", "3"},        {"WGTRAIN_ATTN_FWD_CFG", "nl=8,tr=1"},
        {"WGTRAIN_ATTN_BWD_CFG", "v=split,kv=16x16/1x2"}, {"WGTRAIN_ATTN_UNROLL", "0"},
        {"WGTRAIN_CE_CFG", "wg=512,reg=2"}, {"WGTRAIN_TEST_BINDING_LIMIT", "4096"},
        {"WGTRAIN_F16", "packed"},        {"WGTRAIN_MM_TCOPY", "w"},
        {"WGTRAIN_MM_EDGE_FIRST", "1"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) setenv(good[i].name, good[i].value, 1);
    wgt_backend *be;
    wgt_status st = backend_webgpu_init(&be, adapter_env());
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) unsetenv(good[i].name);
    CHECK(st == WGT_OK, "valid settings: %s", st ? wgt_last_error() : "");
    if (st != WGT_OK) return;
    wg_ctx *ctx = (wg_ctx *)be->impl;
    const wg_settings *s = wg_ctx_settings(ctx);
    CHECK(s->robust == 1 && s->mm_tile == WG_MM_TILE_SMALL && s->mm_splitk == 0 && s->mm_vec4 == 3 && s->mm_group == 3 &&
              s->mm_tcopy == WG_TCOPY_W && s->mm_edge_first == 1,
          "matmul / robust settings did not reach the context: robust %d tile %d splitk %d vec4 %d group %d tcopy %d "
          "edge_first %d", s->robust, (int)s->mm_tile, s->mm_splitk, s->mm_vec4, s->mm_group, s->mm_tcopy, s->mm_edge_first);
    CHECK(!strcmp(s->attn_fwd, "nl=8,tr=1") && !strcmp(s->attn_bwd, "v=split,kv=16x16/1x2") && s->attn_unroll == 0,
          "attention settings did not reach the context: '%s' '%s' unroll %d", s->attn_fwd, s->attn_bwd, s->attn_unroll);
    CHECK(s->ce.wg == 512 && s->ce.reg == 2 && s->ce.sm == WG_AUTO && s->ce.vec == WG_AUTO,
          "cross_entropy settings did not reach the context: wg %d reg %d sm %d vec %d", s->ce.wg, s->ce.reg, s->ce.sm,
          s->ce.vec);
    CHECK(s->binding_limit == 4096 && wg_binding_limit(be) == 4096, "binding limit %llu, wg_binding_limit %llu",
          (unsigned long long)s->binding_limit, (unsigned long long)wg_binding_limit(be));
    CHECK(s->f16 == WG_F16_PACKED && !wg_f16_native(ctx), "WGTRAIN_F16=packed did not reach the context");
    // native: accepted where the device has shader-f16, refused with a message naming the fix elsewhere
    setenv("WGTRAIN_F16", "native", 1);
    {
        wg_ctx *c2 = NULL;
        wgt_status s2 = wg_ctx_init(&c2, adapter_env(), 0);
        if (wg_ctx_info(ctx)->has_f16) CHECK(s2 == WGT_OK && wg_f16_native(c2), "WGTRAIN_F16=native on an f16 device: %s", s2 ? wgt_last_error() : "");
        else CHECK(s2 == WGT_ERR_ARG && strstr(wgt_last_error(), "shader-f16"), "WGTRAIN_F16=native without shader-f16: %d %s", (int)s2, wgt_last_error());
        if (s2 == WGT_OK) wg_ctx_free(c2);
    }
    unsetenv("WGTRAIN_F16");
    // the settings are the context's: later changes to the environment do nothing
    setenv("WGTRAIN_MM_GROUP", "5", 1);
    CHECK(wg_ctx_settings(ctx)->mm_group == 3, "the settings changed with the environment after wg_ctx_init");
    unsetenv("WGTRAIN_MM_GROUP");
    // the setter: the same parser; an empty value restores the default; malformed text changes nothing
    wg_settings *w = wg_ctx_settings(ctx);
    CHECK(wg_settings_set(w, "WGTRAIN_MM_GROUP", "") == WGT_OK && w->mm_group == WG_AUTO, "'' does not restore auto");
    CHECK(wg_settings_set(w, "WGTRAIN_CE_CFG", "sm=1") == WGT_OK && w->ce.sm == 1 && w->ce.wg == WG_AUTO,
          "WGTRAIN_CE_CFG=sm=1 through the setter: wg %d sm %d", w->ce.wg, w->ce.sm);
    CHECK(wg_settings_set(w, "WGTRAIN_MM_SPLITK", "x") == WGT_ERR_ARG && w->mm_splitk == 0 &&
          strstr(wgt_last_error(), "WGTRAIN_MM_SPLITK"), "a malformed value through the setter: %s", wgt_last_error());
    CHECK(wg_settings_set(w, "WGTRAIN_MM_STREAMK", "0") == WGT_OK && w->mm_streamk == 0 &&
          wg_settings_set(w, "WGTRAIN_MM_STREAMK", "2") == WGT_ERR_ARG && w->mm_streamk == 0 &&
          wg_settings_set(w, "WGTRAIN_MM_STREAMK", "auto") == WGT_OK && w->mm_streamk == WG_AUTO,
          "WGTRAIN_MM_STREAMK takes auto, 0 or 1: %d", w->mm_streamk);
    CHECK(wg_settings_set(w, "WGTRAIN_NO_SUCH", "1") == WGT_ERR_ARG, "an unknown setting name was accepted");
    // the backend's optional entries: a device name; no profiling without profile mode
    CHECK(be->device_name && !strcmp(be->device_name(be), wg_ctx_info(ctx)->name), "device_name entry");
    CHECK(!be->profile_reset && !be->profile_report, "profile entries on a backend opened without profiling");
    be->free(be);
}

// ---------------------------------------------------------------- adapter choice
static void check_adapters(void) {
    wg_ctx *ctx;
    char cpu_name[256] = "";
    // "cpu" is the C backend, never an adapter: refused with the words to use
    wgt_status st = wg_ctx_init(&ctx, "cpu", 0);
    CHECK(st == WGT_ERR_ARG && strstr(wgt_last_error(), "--adapter software"), "--adapter cpu: %s",
          st == WGT_OK ? "accepted" : wgt_last_error());
    if (st == WGT_OK) wg_ctx_free(ctx);
    // "software": the software adapter (lavapipe)
    st = wg_ctx_init(&ctx, "software", 0);
    // a GPU machine may have no software adapter installed: then the refusal must list what exists
    if (st != WGT_OK && !getenv("WGTRAIN_TEST_ADAPTER"))
        CHECK(st == WGT_OK, "--adapter software failed: %s", wgt_last_error());
    else if (st != WGT_OK)
        CHECK(st == WGT_ERR_DEVICE && strstr(wgt_last_error(), "found:"), "--adapter software refusal: %s", wgt_last_error());
    if (st == WGT_OK) {
        const wg_device_info *inf = wg_ctx_info(ctx);
        CHECK(inf->type == WGPUAdapterType_CPU, "--adapter software gave '%s' of type %s", inf->name,
              wg_adapter_type_name(inf->type));
        CHECK(inf->backend != WGPUBackendType_Null, "--adapter software gave the Null backend");
        snprintf(cpu_name, sizeof cpu_name, "%s", inf->name);
        printf("cpu adapter: '%s' (%s, %s)\n", inf->name, wg_adapter_type_name(inf->type),
               wg_backend_type_name(inf->backend));
        wg_ctx_free(ctx);
    }
    // "auto": whatever it picks is not the Null backend
    st = wg_ctx_init(&ctx, "auto", 0);
    CHECK(st == WGT_OK, "--adapter auto failed: %s", wgt_last_error());
    if (st == WGT_OK) {
        const wg_device_info *inf = wg_ctx_info(ctx);
        CHECK(inf->backend != WGPUBackendType_Null && inf->name[0], "auto chose '%s' on backend %s", inf->name,
              wg_backend_type_name(inf->backend));
        printf("auto adapter: '%s' (%s)\n", inf->name, wg_adapter_type_name(inf->type));
        wg_ctx_free(ctx);
    }
    // "gpu": a real GPU or a clear refusal that lists what was found
    st = wg_ctx_init(&ctx, "gpu", 0);
    if (st == WGT_OK) {
        const wg_device_info *inf = wg_ctx_info(ctx);
        CHECK(inf->type != WGPUAdapterType_CPU && inf->backend != WGPUBackendType_Null, "--adapter gpu gave '%s' (%s)",
              inf->name, wg_adapter_type_name(inf->type));
        wg_ctx_free(ctx);
    } else {
        const char *m = wgt_last_error();
        CHECK(st == WGT_ERR_DEVICE && strstr(m, "'gpu'") && (!cpu_name[0] || strstr(m, cpu_name)),
              "--adapter gpu on a machine without one: status %d, message '%s'", (int)st, m);
        printf("gpu adapter: refused: %s\n", m);
    }
    // a name that matches nothing
    st = wg_ctx_init(&ctx, "no-such-gpu", 0);
    const char *m = wgt_last_error();
    CHECK(st == WGT_ERR_DEVICE, "--adapter no-such-gpu gave status %d", (int)st);
    if (st == WGT_OK) wg_ctx_free(ctx);
    CHECK(strstr(m, "no-such-gpu") && (!cpu_name[0] || strstr(m, cpu_name)),
          "the message should name the request and list the adapters found: '%s'", m);
    printf("no-such-gpu: %s\n", m);

    // no Vulkan driver at all: in a child, with the loader pointed at a driver list that does not exist
    char *out;
    int ws = run_child("--child-no-driver", "VK_DRIVER_FILES", "/nonexistent/wgtrain-test-icd.json", &out);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && strstr(out, "STATUS 5") && strstr(out, "no usable WebGPU adapter"),
          "without a Vulkan driver, wg_ctx_init should fail with 'no usable WebGPU adapter'; child exit %d: %.400s",
          WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, out);
    char *line = strstr(out, "MESSAGE ");
    if (line) printf("no driver: %.300s", line + 8);
    free(out);
}

static void check_readback(wgt_backend *be) {
    wgt_buf *a, *b;
    CHECK(be->buf_alloc(be, &a, 1000, "rb-a") == WGT_OK && be->buf_alloc(be, &b, 1000, "rb-b") == WGT_OK, "alloc");
    float x[1000], y[1000];
    for (int i = 0; i < 1000; i++) x[i] = (float)i * 0.01f - 3.0f, y[i] = 0.5f;
    be->upload(be, wgt_buf_view(be, a), x, 1000);
    be->sync(be);
    wgt_backend_stats s0, s1;
    be->get_stats(be, &s0);
    // three slots in flight: each holds the value the work recorded before it left
    for (int k = 0; k < WGT_READBACK_SLOTS; k++) {
        be->gelu_inplace(be, wgt_buf_view(be, a), 1000);
        CHECK(be->readback_begin(be, k, wgt_view_of(a, 64, 64), 64) == WGT_OK, "readback_begin %d: %s", k, wgt_last_error());
    }
    be->get_stats(be, &s1);
    CHECK(s1.submits - s0.submits == WGT_READBACK_SLOTS && s1.waits == s0.waits,
          "three readbacks: %llu submits, %llu waits (want 3, 0)", (unsigned long long)(s1.submits - s0.submits),
          (unsigned long long)(s1.waits - s0.waits));
    float ref[64], got[64];
    memcpy(ref, x + 64, sizeof ref);
    int polled = 0;
    for (int k = 0; k < WGT_READBACK_SLOTS; k++) {
        cpu_gelu_inplace(ref, 64);
        int ready = 0;
        // poll a little (the device may not be there yet), then wait
        for (int tries = 0; tries < 3 && !ready; tries++)
            CHECK(be->readback_end(be, k, got, 64, 0, &ready) == WGT_OK, "poll %d: %s", k, wgt_last_error());
        polled += !ready;
        if (!ready) CHECK(be->readback_end(be, k, got, 64, 1, &ready) == WGT_OK && ready, "wait %d", k);
        CHECK_CLOSE("readback slot data", got, ref, 64, GELU_ATOL, GELU_RTOL);
    }
    printf("readback: %d of %d slots were not ready at the first polls\n", polled, WGT_READBACK_SLOTS);
    // an upload into a buffer the recorded work does not touch submits nothing; into one it
    // touches, the recorded work goes first
    be->sync(be);
    be->get_stats(be, &s0);
    be->gelu_inplace(be, wgt_buf_view(be, a), 1000);
    be->upload(be, wgt_buf_view(be, b), y, 1000);
    be->get_stats(be, &s1);
    CHECK(s1.submits == s0.submits, "an upload into an untouched buffer submitted (%llu)",
          (unsigned long long)(s1.submits - s0.submits));
    be->upload(be, wgt_buf_view(be, a), y, 1000);
    be->get_stats(be, &s0);
    CHECK(s0.submits == s1.submits + 1, "an upload into a buffer the recorded work uses did not submit it first");
    float back[1000];
    be->download(be, back, wgt_buf_view(be, a), 1000);
    CHECK(back[0] == 0.5f && back[999] == 0.5f, "the upload lands after the recorded gelu: %g", back[0]);
    // the same dispatches again: the uniform ring is not written again
    be->gelu_inplace(be, wgt_buf_view(be, b), 1000);
    be->sync(be);
    be->get_stats(be, &s0);
    be->gelu_inplace(be, wgt_buf_view(be, b), 1000);
    be->sync(be);
    be->get_stats(be, &s1);
    CHECK(s1.uniform_bytes == s0.uniform_bytes, "an unchanged dispatch rewrote %llu uniform bytes",
          (unsigned long long)(s1.uniform_bytes - s0.uniform_bytes));
    be->gelu_inplace(be, wgt_buf_view(be, b), 999);  // one parameter changed: one slot
    be->sync(be);
    be->get_stats(be, &s0);
    CHECK(s0.uniform_bytes - s1.uniform_bytes == 256, "a changed dispatch wrote %llu uniform bytes, want one slot",
          (unsigned long long)(s0.uniform_bytes - s1.uniform_bytes));
    if (be->gpu_timer_start) {
        double ms;
        long passes;
        CHECK(be->gpu_timer_start(be) == WGT_OK, "timer start: %s", wgt_last_error());
        be->gelu_inplace(be, wgt_buf_view(be, a), 1000);
        be->copy(be, wgt_buf_view(be, b), wgt_buf_view(be, a), 10);  // a copy command ends the pass
        be->gelu_inplace(be, wgt_buf_view(be, a), 1000);
        wgt_status ts = be->gpu_timer_stop(be, &ms, &passes);  // (the last error's text only if this one failed)
        CHECK(ts == WGT_OK && passes == 2 && ms > 0, "timer: %ld passes, %g ms: %s", passes, ms,
              ts == WGT_OK ? "" : wgt_last_error());
        be->fill_zero(be, wgt_buf_view(be, b), 10);  // its pipeline compiled outside the timer (a compile submits)
        CHECK(be->gpu_timer_start(be) == WGT_OK, "timer start: %s", wgt_last_error());
        be->gelu_inplace(be, wgt_buf_view(be, a), 1000);
        be->fill_zero(be, wgt_buf_view(be, b), 10);  // a dispatch: the pass goes on
        be->gelu_inplace(be, wgt_buf_view(be, a), 1000);
        ts = be->gpu_timer_stop(be, &ms, &passes);
        CHECK(ts == WGT_OK && passes == 1, "timer with fill_zero: %ld passes: %s", passes,
              ts == WGT_OK ? "" : wgt_last_error());
    }
    be->buf_free(be, a);
    be->buf_free(be, b);
}

// The dry run (backend.h dry_run) that creates a training step's pipelines before step 1:
// while on, an op compiles its pipeline and changes nothing (nor do upload and fill_zero); off
// again, the same op runs on the cached pipeline (no new one) and writes its result.
static void check_dry_run(wgt_backend *be) {
    CHECK(be->dry_run != NULL, "the WebGPU backend has a dry run");
    if (!be->dry_run) return;
    enum { N = 1001 };  // odd: the scalar element-wise variant, a pipeline of its own
    float x[N], got[N], ref[N], zeros[N] = {0};
    for (int i = 0; i < N; i++) x[i] = ref[i] = (float)(i % 17) * 0.25f - 2.0f;
    cpu_gelu_inplace(ref, N);
    wgt_buf *b;
    CHECK(be->buf_alloc(be, &b, N, "dry-run test") == WGT_OK, "alloc: %s", wgt_last_error());
    wgt_view v = wgt_view_of(b, 0, N);
    CHECK(be->upload(be, v, x, N) == WGT_OK, "upload");
    int before = be->dry_run(be, 1);
    be->upload(be, v, zeros, N);
    be->fill_zero(be, v, N);
    be->gelu_inplace(be, v, N);
    int during = be->dry_run(be, 0);
    CHECK(during == before + 1, "the dry run compiled the op's pipeline: %d pipelines before, %d after", before, during);
    CHECK(be->download(be, got, v, N) == WGT_OK && !memcmp(got, x, sizeof x),
          "a dry run changed the buffer (upload, fill_zero or the op ran)");
    be->gelu_inplace(be, v, N);
    CHECK(be->dry_run(be, 0) == during, "the real op compiled its pipeline again instead of using the cached one");
    CHECK(be->download(be, got, v, N) == WGT_OK, "download");
    CHECK_CLOSE("gelu after the dry run", got, ref, N, GELU_ATOL, GELU_RTOL);
    be->buf_free(be, b);
}

// gelu_forward of a view onto itself runs in place (the f16 GPT-2 relies on it: its pre_gelu and
// fch are the same scratch); into another buffer it leaves its input as it was.
static void check_gelu_forward_views(wgt_backend *be) {
    enum { N = 1003 };
    float x[N], ref[N], got[N], back[N];
    for (int i = 0; i < N; i++) x[i] = (float)i * 0.008f - 4.0f;
    memcpy(ref, x, sizeof x);
    cpu_gelu_inplace(ref, N);
    wgt_buf *a, *b;
    if (be->buf_alloc(be, &a, N, "gf-a") != WGT_OK || be->buf_alloc(be, &b, N, "gf-b") != WGT_OK) {
        CHECK(0, "allocation failed: %s", wgt_last_error());
        return;
    }
    wgt_view va = wgt_buf_view(be, a), vb = wgt_buf_view(be, b);
    wgt_status st = be->upload(be, va, x, N);
    be->gelu_forward(be, vb, va, N);
    if (st == WGT_OK) st = be->download(be, got, vb, N);
    if (st == WGT_OK) st = be->download(be, back, va, N);
    CHECK(st == WGT_OK, "gelu_forward: %s", wgt_last_error());
    CHECK_CLOSE("gelu_forward into another buffer", got, ref, N, GELU_ATOL, GELU_RTOL);
    CHECK(memcmp(back, x, sizeof x) == 0, "gelu_forward changed its input");
    be->gelu_forward(be, va, va, N);
    st = be->download(be, got, va, N);
    CHECK(st == WGT_OK, "gelu_forward in place: %s", wgt_last_error());
    CHECK_CLOSE("gelu_forward of a view onto itself", got, ref, N, GELU_ATOL, GELU_RTOL);
    be->buf_free(be, a);
    be->buf_free(be, b);
}

// fill_zero is a dispatch over binding windows: views at any offset, in chunks when a view is
// larger than one binding (here a 256-element limit: 192-element chunks, each window starting
// up to 63 elements before its chunk); nothing outside the view changes. Views whose offset and
// length are multiples of 4 take fill_zero4 (a vec4 a thread), the others fill_zero.
static void check_fill_zero(wgt_backend *be) {
    wg_ctx *ctx = (wg_ctx *)be->impl;
    const size_t N = 5000;
    static const struct { size_t off, n; uint64_t limit; } cases[] = {
        {37, 3001, 256}, {64, 192, 256}, {1, 4999, 256}, {100, 10, 0}, {4999, 1, 0}, {0, 5000, 0},
        {12, 3000, 256}, {100, 12, 0}, {4, 4996, 0}};
    wgt_buf *a;
    if (be->buf_alloc(be, &a, N, "fill") != WGT_OK) {
        CHECK(0, "allocation failed: %s", wgt_last_error());
        return;
    }
    float *x = malloc(N * sizeof *x), *got = malloc(N * sizeof *got);
    uint64_t saved = wg_ctx_settings(ctx)->binding_limit;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (size_t i = 0; i < N; i++) x[i] = 1.0f + (float)i;
        wg_ctx_settings(ctx)->binding_limit = cases[c].limit;
        wgt_status st = be->upload(be, wgt_buf_view(be, a), x, N);
        be->fill_zero(be, wgt_view_at(wgt_buf_view(be, a), cases[c].off), cases[c].n);
        if (st == WGT_OK) st = be->download(be, got, wgt_buf_view(be, a), N);
        size_t bad = 0;
        for (size_t i = 0; i < N; i++) {
            int inside = i >= cases[c].off && i < cases[c].off + cases[c].n;
            bad += got[i] != (inside ? 0.0f : x[i]);
        }
        CHECK(st == WGT_OK && bad == 0, "fill_zero of [%zu, %zu) with binding limit %llu: %zu wrong elements (%s)",
              cases[c].off, cases[c].off + cases[c].n, (unsigned long long)cases[c].limit, bad,
              st == WGT_OK ? "" : wgt_last_error());
    }
    wg_ctx_settings(ctx)->binding_limit = saved;
    free(x);
    free(got);
    be->buf_free(be, a);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--child-overrun")) return child_overrun();
    if (argc > 1 && !strcmp(argv[1], "--child-no-driver")) return child_no_driver();
    if (argc > 1 && !strcmp(argv[1], "--child-pipeline-after-error")) return child_pipeline_after_error();
    double t0 = wgt_now_s();

    check_settings();
    check_adapters();

    wgt_backend *be;
    if (backend_webgpu_init(&be, adapter_env()) != WGT_OK) {
        fprintf(stderr, "webgpu backend unavailable: %s\n", wgt_last_error());
        return 1;
    }
    uint32_t maxd = wg_ctx_info((wg_ctx *)be->impl)->limits.maxComputeWorkgroupsPerDimension;
    check_dry_run(be);  // first: its scalar gelu pipeline must not exist yet
    check_errors(be);
    check_readback(be);
    check_fill_zero(be);
    check_gelu_forward_views(be);
    check_gelu_split(be, (size_t)maxd * 256 + 1000, "2-D split (x*y grid)");
    check_gelu_split(be, (size_t)maxd * 256, "largest 1-D grid");
    check_gelu_split(be, (size_t)maxd * 256 + 1, "smallest 2-D grid");
    be->free(be);
    printf("total %.1f s\n", wgt_now_s() - t0);
    return test_finish();
}
