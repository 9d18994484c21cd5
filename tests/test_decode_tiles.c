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
#include "decode_fixture.h"

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

static void run_case(bpair *P, const tile_case *k) {
    decode_inputs d = decode_inputs_init(P, k->B, k->T, k->NH, k->NKV, k->HS, k->maxT, k->window, k->rope, 37);
    const uint32_t T = k->T, HS = k->HS;
    const size_t no = d.no;
    char what[220];
    float *ref = malloc(no * 4), *got = malloc(no * 4);
    decode_inputs_run(P, &d, 0, ref);
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
        decode_setting(P->gpu, "WGTRAIN_DECODE_TILES", settings[si]);
        const int tiled = wg_decode_attention_tiled(P->gpu, T, HS);
        if (want[si] >= 0)
            CHECK(tiled == want[si], "%s: WGTRAIN_DECODE_TILES=%s %s the tiled kernel", k->name, settings[si],
                  tiled ? "takes" : "does not take");
        decode_inputs_run(P, &d, 1, got);
        snprintf(what, sizeof what, "%s (B=%u T=%u NH=%u NKV=%u HS=%u maxT=%u window=%u), tiles %s", k->name, k->B, T,
                 k->NH, k->NKV, HS, k->maxT, k->window, settings[si]);
        CHECK_CLOSE(what, got, ref, no, 1e-5 * mx, 1e-4);
    }
    // a sequence past the cache (position maxT) is skipped: its output keeps the sentinel, the
    // other sequences are as before
    if (k->B >= 2) {
        uint32_t skip[DECODE_MAX_B];
        memcpy(skip, d.pos, sizeof skip);
        skip[0] = k->maxT;
        P->gpu->upload(P->gpu, bt_g(d.p), skip, k->B);
        decode_setting(P->gpu, "WGTRAIN_DECODE_TILES", "1");
        decode_inputs_run(P, &d, 1, got);
        const size_t row = (size_t)T * k->NH * HS;
        snprintf(what, sizeof what, "%s, tiles 1: the skipped sequence keeps its output", k->name);
        CHECK_CLOSE(what, got, d.sentinel, row, 0, 0);
        snprintf(what, sizeof what, "%s, tiles 1: the other sequences beside a skipped one", k->name);
        CHECK_CLOSE(what, got + row, ref + row, no - row, 1e-5 * mx, 1e-4);
    }
    decode_setting(P->gpu, "WGTRAIN_DECODE_TILES", "auto");
    decode_inputs_free(P, &d);
    free(ref), free(got);
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
