// backend_pair.h — helpers for tests that run one op on the C reference and on WebGPU
// (lavapipe in CI, any GPU elsewhere) and compare: both backends get the same inputs.
#ifndef WGT_BACKEND_PAIR_H
#define WGT_BACKEND_PAIR_H
#include <stdint.h>
#include "backend/backend.h"
#include "testlib.h"

typedef struct {
    wgt_backend *cpu, *gpu;
} bpair;

// Opens both backends; exits the test with a clear message when WebGPU is unavailable.
static inline bpair bpair_open(void) {
    bpair p = {0};
    if (backend_cpu_init(&p.cpu) != WGT_OK) { fprintf(stderr, "cpu backend: %s\n", wgt_last_error()); exit(1); }
    const char *ad = getenv("WGTRAIN_TEST_ADAPTER");  // e.g. "gpu" on a machine with one
    if (backend_webgpu_init(&p.gpu, ad ? ad : "auto") != WGT_OK) {
        fprintf(stderr, "webgpu backend unavailable: %s\n", wgt_last_error());
        exit(1);
    }
    return p;
}
static inline void bpair_close(bpair *p) { p->cpu->free(p->cpu); p->gpu->free(p->gpu); }

// A tensor that lives on both backends.
typedef struct { wgt_buf *c, *g; size_t n; } btensor;

static inline btensor bt_new(bpair *p, size_t n, const void *init) {
    btensor t = {0, 0, n};
    if (p->cpu->buf_alloc(p->cpu, &t.c, n, "test") != WGT_OK || p->gpu->buf_alloc(p->gpu, &t.g, n, "test") != WGT_OK) {
        fprintf(stderr, "allocation of %zu elements failed: %s\n", n, wgt_last_error());
        exit(1);
    }
    if (init) {
        wgt_view vc = wgt_view_of(t.c, 0, n), vg = wgt_view_of(t.g, 0, n);
        p->cpu->upload(p->cpu, vc, init, n);
        p->gpu->upload(p->gpu, vg, init, n);
    }
    return t;
}
static inline wgt_view bt_c(btensor t) { return wgt_view_of(t.c, 0, t.n); }
static inline wgt_view bt_g(btensor t) { return wgt_view_of(t.g, 0, t.n); }
static inline void bt_free(bpair *p, btensor *t) { p->cpu->buf_free(p->cpu, t->c); p->gpu->buf_free(p->gpu, t->g); }

// Downloads a tensor from both backends into fresh arrays (caller frees).
static inline void bt_get(bpair *p, btensor t, float **cpu_out, float **gpu_out) {
    *cpu_out = malloc(t.n * 4 + 4);
    *gpu_out = malloc(t.n * 4 + 4);
    if (p->cpu->sync(p->cpu) != WGT_OK || p->gpu->sync(p->gpu) != WGT_OK) {
        fprintf(stderr, "device error: %s\n", wgt_last_error());
        exit(1);
    }
    p->cpu->download(p->cpu, *cpu_out, bt_c(t), t.n);
    if (p->gpu->download(p->gpu, *gpu_out, bt_g(t), t.n) != WGT_OK) {
        fprintf(stderr, "device error: %s\n", wgt_last_error());
        exit(1);
    }
}

// Compares a tensor across the backends (GPU result vs C reference).
static inline int bt_check(bpair *p, const char *what, btensor t, double atol, double rtol) {
    float *c, *g;
    bt_get(p, t, &c, &g);
    int ok = CHECK_CLOSE(what, g, c, t.n, atol, rtol);
    free(c);
    free(g);
    return ok;
}

// Deterministic test data.
static uint64_t trng_state = 0x243F6A8885A308D3ull;
static inline uint32_t trng_u32(void) {
    trng_state ^= trng_state >> 12; trng_state ^= trng_state << 25; trng_state ^= trng_state >> 27;
    return (uint32_t)((trng_state * 2685821657736338717ull) >> 32);
}
static inline float trng_uniform(float lo, float hi) { return lo + (hi - lo) * (trng_u32() >> 8) / 16777216.0f; }
static inline float trng_normal(void) {
    float u = (trng_u32() >> 8) / 16777216.0f + 1e-7f, v = (trng_u32() >> 8) / 16777216.0f;
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}
static inline float *trand_normal(size_t n, float scale) {
    float *x = malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) x[i] = scale * trng_normal();
    return x;
}
#endif
