// test_decode_tiles.c — decode_attention's tiled kernel on WebGPU (decode_attention_tiles in
// kernels/16_decode_attention.wgsl: a prefill chunk's query rows in tiles that share each key
// tile) against the C reference, table-driven: head sizes 16 to 128 (48: lanes past the last
// column), partial query tiles, grouped-query and one-kv-head attention, windows shorter than a
// key tile and than the chunk, RoPE tables bound or not, sequences of one batch at different
// positions (the last ones of the cache, the first, between), a single new token, and head sizes
// no tile serves (not a multiple of 4; 256 above the software GPU's workgroup memory), which
// take decode_attention. Each case runs with WGTRAIN_DECODE_TILES auto, 0 and 1; every result
// must equal the reference within the attention tolerance, and a sequence whose position is past
// the cache keeps its output (skipped, as by decode_attention).
//
// Tolerance: 1e-5 of the largest |output| plus 1e-4 relative, as test_decode_split: the kernel
// sums scores, exponentials and values in f32 in key-tile order, the reference in double; a tile
// that drops, repeats or misweights a key (a wrong range, mask or rescaling) moves outputs by a
// share of their scale.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend/webgpu/wg_ops.h"
#include "backend_pair.h"

typedef struct {
    const char *name;
    uint32_t B, T, NH, NKV, HS, maxT, window;
    int rope;
} tile_case;

static const tile_case cases[] = {
    {"GQA, partial last tile, rope", 2, 40, 4, 2, 64, 300, 0, 1},
    {"HS 128, window 37 of a 100-token chunk, rope", 1, 100, 2, 1, 128, 400, 37, 1},
    {"HS 48 (lanes past the last column)", 2, 33, 3, 3, 48, 120, 0, 0},
    {"HS 16, window 5, three sequences", 3, 17, 4, 1, 16, 90, 5, 1},
    {"a chunk as long as the cache", 1, 70, 2, 2, 64, 70, 0, 1},
    {"one new token", 2, 1, 4, 2, 64, 50, 0, 1},
    {"HS 6: no tile, decode_attention", 1, 20, 2, 1, 6, 40, 0, 1},
    {"HS 256: no tile on 32 KiB", 1, 24, 2, 2, 256, 60, 0, 1},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static void set_tiles(wgt_backend *gpu, const char *v) {
    if (wg_settings_set(wg_ctx_settings(wg_of(gpu)), "WGTRAIN_DECODE_TILES", v) != WGT_OK) {
        fprintf(stderr, "%s\n", wgt_last_error());
        exit(1);
    }
}

// Rotation tables as rope_forward's (any values of cos, sin serve the comparison).
static void tables(float *c, float *s, uint32_t maxT, uint32_t HS) {
    for (uint32_t p = 0; p < maxT; p++)
        for (uint32_t d = 0; d < HS; d++) {
            double a = p / pow(10000.0, (double)(2 * (d % (HS / 2))) / HS);
            c[(size_t)p * HS + d] = (float)cos(a);
            s[(size_t)p * HS + d] = (float)sin(a);
        }
}

static void run_case(bpair *P, const tile_case *k) {
    const uint32_t B = k->B, T = k->T, NH = k->NH, NKV = k->NKV, HS = k->HS, maxT = k->maxT;
    const size_t KV = (size_t)NKV * HS, W = (size_t)NH * HS + 2 * KV, nq = (size_t)B * T * W,
                 nc = (size_t)B * maxT * KV, no = (size_t)B * T * NH * HS;
    float *q = malloc(nq * 4), *kc = malloc(nc * 4), *vc = malloc(nc * 4), *ct = NULL, *st = NULL;
    for (size_t i = 0; i < nq; i++) q[i] = trng_normal();
    for (size_t i = 0; i < nc; i++) kc[i] = 0.5f * trng_normal(), vc[i] = trng_normal();
    uint32_t pos[8];
    for (uint32_t b = 0; b < B; b++)  // the last positions, the first ones, between
        pos[b] = b == 0 ? maxT - T : b == 1 ? 0 : (b * 37u) % (maxT - T + 1);
    btensor tq = bt_new(P, nq, q), tk = bt_new(P, nc, kc), tv = bt_new(P, nc, vc), tp = bt_new(P, B, pos);
    btensor tc = {0}, ts = {0};
    if (k->rope) {
        ct = malloc((size_t)maxT * HS * 4), st = malloc((size_t)maxT * HS * 4);
        tables(ct, st, maxT, HS);
        tc = bt_new(P, (size_t)maxT * HS, ct), ts = bt_new(P, (size_t)maxT * HS, st);
    }
    float *sentinel = malloc(no * 4);
    for (size_t i = 0; i < no; i++) sentinel[i] = 1234.5f;
    btensor to = bt_new(P, no, sentinel);
    const wgt_view none = wgt_view_of(NULL, 0, 0);
    char what[220];
    P->cpu->decode_attention(P->cpu, bt_c(to), bt_c(tq), bt_c(tk), bt_c(tv), k->rope ? bt_c(tc) : none,
                             k->rope ? bt_c(ts) : none, bt_c(tp), B, T, NH, NKV, HS, maxT, k->window);
    float *ref = malloc(no * 4), *got = malloc(no * 4);
    P->cpu->download(P->cpu, ref, bt_c(to), no);
    double mx = 0;
    for (size_t i = 0; i < no; i++) mx = fmax(mx, fabs(ref[i]));
    // which kernel each setting must take: a tile serves HS % 4 == 0 where the device's
    // workgroup memory holds one (at HS <= 128 the smallest needs 25.7 KiB; HS = 256 depends on
    // the device: -1, either); auto from 16 new tokens
    const uint32_t wgmem = wg_ctx_info(wg_of(P->gpu))->limits.maxComputeWorkgroupStorageSize;
    const int fits = HS % 4 ? 0 : HS <= 128 && wgmem >= 32768 ? 1 : HS <= 128 ? 0 : -1;
    const char *settings[] = {"auto", "0", "1"};
    const int want[] = {T >= 16 ? fits : 0, 0, fits};
    for (int si = 0; si < 3; si++) {
        set_tiles(P->gpu, settings[si]);
        const int tiled = wg_decode_attention_tiled(P->gpu, T, HS);
        if (want[si] >= 0)
            CHECK(tiled == want[si], "%s: WGTRAIN_DECODE_TILES=%s %s the tiled kernel", k->name, settings[si],
                  tiled ? "takes" : "does not take");
        P->gpu->upload(P->gpu, bt_g(to), sentinel, no);
        P->gpu->decode_attention(P->gpu, bt_g(to), bt_g(tq), bt_g(tk), bt_g(tv), k->rope ? bt_g(tc) : none,
                                 k->rope ? bt_g(ts) : none, bt_g(tp), B, T, NH, NKV, HS, maxT, k->window);
        if (P->gpu->download(P->gpu, got, bt_g(to), no) != WGT_OK) {
            fprintf(stderr, "device error: %s\n", wgt_last_error());
            exit(1);
        }
        snprintf(what, sizeof what, "%s (B=%u T=%u NH=%u NKV=%u HS=%u maxT=%u window=%u), tiles %s", k->name, B, T, NH,
                 NKV, HS, maxT, k->window, settings[si]);
        CHECK_CLOSE(what, got, ref, no, 1e-5 * mx, 1e-4);
    }
    // a sequence past the cache (position maxT) is skipped: its output keeps the sentinel, the
    // other sequences are as before
    if (B >= 2) {
        uint32_t skip[8];
        memcpy(skip, pos, sizeof skip);
        skip[0] = maxT;
        P->gpu->upload(P->gpu, bt_g(tp), skip, B);
        set_tiles(P->gpu, "1");
        P->gpu->upload(P->gpu, bt_g(to), sentinel, no);
        P->gpu->decode_attention(P->gpu, bt_g(to), bt_g(tq), bt_g(tk), bt_g(tv), k->rope ? bt_g(tc) : none,
                                 k->rope ? bt_g(ts) : none, bt_g(tp), B, T, NH, NKV, HS, maxT, k->window);
        P->gpu->download(P->gpu, got, bt_g(to), no);
        const size_t row = (size_t)T * NH * HS;
        snprintf(what, sizeof what, "%s, tiles 1: the skipped sequence keeps its output", k->name);
        CHECK_CLOSE(what, got, sentinel, row, 0, 0);
        snprintf(what, sizeof what, "%s, tiles 1: the other sequences beside a skipped one", k->name);
        CHECK_CLOSE(what, got + row, ref + row, no - row, 1e-5 * mx, 1e-4);
    }
    set_tiles(P->gpu, "auto");
    bt_free(P, &tq), bt_free(P, &tk), bt_free(P, &tv), bt_free(P, &tp), bt_free(P, &to);
    if (k->rope) bt_free(P, &tc), bt_free(P, &ts);
    free(q), free(kc), free(vc), free(ct), free(st), free(sentinel), free(ref), free(got);
}

int main(void) {
    bpair P = bpair_open();
    for (int i = 0; i < NCASES; i++) run_case(&P, &cases[i]);
    // the setting's refusals
    wg_settings s;
    wg_settings_default(&s);
    CHECK(wg_settings_set(&s, "WGTRAIN_DECODE_TILES", "2") == WGT_ERR_ARG && s.decode_tiles == WG_AUTO,
          "WGTRAIN_DECODE_TILES=2 is refused");
    CHECK(wg_settings_set(&s, "WGTRAIN_DECODE_TILES", "off") == WGT_OK && s.decode_tiles == 0,
          "WGTRAIN_DECODE_TILES=off is 0");
    bpair_close(&P);
    return test_finish();
}
