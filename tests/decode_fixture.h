// decode_fixture.h — what test_decode_split.c and test_decode_tiles.c share: one decode_attention
// case's random inputs on both backends (queries in qkv, key/value caches, positions, optional
// RoPE tables, an output filled with a sentinel), the call on either backend, and a WebGPU
// setting changed by name (exits on a refusal).
#ifndef WGT_TEST_DECODE_FIXTURE_H
#define WGT_TEST_DECODE_FIXTURE_H
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend/webgpu/wg_ops.h"
#include "backend_pair.h"

#define DECODE_MAX_B 8
typedef struct {
    uint32_t B, T, NH, NKV, HS, maxT, window;
    int rope;
    size_t no;                  // output elements: B·T·NH·HS
    uint32_t pos[DECODE_MAX_B];
    float *sentinel;            // 1234.5 in every output element
    btensor q, k, v, p, cos, sin, out;
} decode_inputs;

static void decode_setting(wgt_backend *gpu, const char *name, const char *v) {
    if (wg_settings_set(wg_ctx_settings(wg_of(gpu)), name, v) != WGT_OK) {
        fprintf(stderr, "%s\n", wgt_last_error());
        exit(1);
    }
}

// Random inputs; sequence b at the last positions of the cache (b = 0), the first (b = 1), or
// between (b * step mod the room).
static decode_inputs decode_inputs_init(bpair *P, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS,
                                        uint32_t maxT, uint32_t window, int rope, uint32_t step) {
    decode_inputs d = {B, T, NH, NKV, HS, maxT, window, rope, (size_t)B * T * NH * HS, {0}, NULL, {0}, {0}, {0},
                       {0}, {0}, {0}, {0}};
    if (B > DECODE_MAX_B) { fprintf(stderr, "decode_inputs: at most %d sequences\n", DECODE_MAX_B); exit(1); }
    const size_t KV = (size_t)NKV * HS, W = (size_t)NH * HS + 2 * KV, nq = (size_t)B * T * W, nc = (size_t)B * maxT * KV;
    float *q = malloc(nq * 4), *kc = malloc(nc * 4), *vc = malloc(nc * 4);
    for (size_t i = 0; i < nq; i++) q[i] = trng_normal();
    for (size_t i = 0; i < nc; i++) kc[i] = 0.5f * trng_normal(), vc[i] = trng_normal();
    for (uint32_t b = 0; b < B; b++) d.pos[b] = b == 0 ? maxT - T : b == 1 ? 0 : (b * step) % (maxT - T + 1);
    d.q = bt_new(P, nq, q), d.k = bt_new(P, nc, kc), d.v = bt_new(P, nc, vc), d.p = bt_new(P, B, d.pos);
    if (rope) {  // rotation tables as rope_forward's (any values of cos, sin serve the comparison)
        float *ct = malloc((size_t)maxT * HS * 4), *st = malloc((size_t)maxT * HS * 4);
        for (uint32_t p = 0; p < maxT; p++)
            for (uint32_t e = 0; e < HS; e++) {
                double a = p / pow(10000.0, (double)(2 * (e % (HS / 2))) / HS);
                ct[(size_t)p * HS + e] = (float)cos(a);
                st[(size_t)p * HS + e] = (float)sin(a);
            }
        d.cos = bt_new(P, (size_t)maxT * HS, ct), d.sin = bt_new(P, (size_t)maxT * HS, st);
        free(ct), free(st);
    }
    d.sentinel = malloc(d.no * 4);
    for (size_t i = 0; i < d.no; i++) d.sentinel[i] = 1234.5f;
    d.out = bt_new(P, d.no, d.sentinel);
    free(q), free(kc), free(vc);
    return d;
}

// decode_attention on the CPU reference (gpu = 0) or on WebGPU into d->out (reset to the sentinel
// first); the result in got (d->no floats). Exits on a device error.
static void decode_inputs_run(bpair *P, decode_inputs *d, int gpu, float *got) {
    const wgt_view none = wgt_view_of(NULL, 0, 0);
    wgt_backend *be = gpu ? P->gpu : P->cpu;
    wgt_view (*v)(btensor) = gpu ? bt_g : bt_c;
    if (gpu) be->upload(be, v(d->out), d->sentinel, d->no);
    be->decode_attention(be, v(d->out), v(d->q), v(d->k), v(d->v), d->rope ? v(d->cos) : none,
                         d->rope ? v(d->sin) : none, v(d->p), d->B, d->T, d->NH, d->NKV, d->HS, d->maxT, d->window);
    if (be->download(be, got, v(d->out), d->no) != WGT_OK) {
        fprintf(stderr, "device error: %s\n", wgt_last_error());
        exit(1);
    }
}

static void decode_inputs_free(bpair *P, decode_inputs *d) {
    bt_free(P, &d->q), bt_free(P, &d->k), bt_free(P, &d->v), bt_free(P, &d->p), bt_free(P, &d->out);
    if (d->rope) bt_free(P, &d->cos), bt_free(P, &d->sin);
    free(d->sentinel);
}
#endif
