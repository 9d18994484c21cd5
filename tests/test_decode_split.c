// test_decode_split.c — decode_attention's split-K on WebGPU (kernels/16_decode_attention.wgsl:
// the keys of each query row cut into S ranges scored by S workgroups, then
// decode_attention_combine) against the C reference, table-driven: long caches (thousands of
// positions), grouped-query and one-kv-head attention, windows shorter than a split and than the
// cache, head sizes up to 256, more splits than keys (empty splits), T > 1 (a prefill chunk),
// RoPE tables bound or not, and rows at different positions in one batch. Each case runs with
// the automatic choice (which must split the long, narrow cases on a hardware GPU, and splits
// nothing on the software one) and with forced split counts (WGTRAIN_DECODE_SPLIT);
// every result must equal the reference, and the split results the unsplit kernel's, within the
// attention tolerance. A row whose position is past the cache is skipped by both passes (its
// output stays as it was), as by the unsplit kernel.
//
// Tolerance: 1e-5 of the largest |output| plus 1e-4 relative, as test_backend_ops' attention
// cases: the kernel sums scores, exponentials and values in f32 in chunk order (and the combine
// rescales S partials), the reference in double; the measured error is ~1e-7 relative, while a
// split that drops, repeats or misweights keys (a wrong range or rescaling) moves outputs by a
// share of their scale.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "decode_fixture.h"

typedef struct {
    const char *name;
    uint32_t B, T, NH, NKV, HS, maxT, window;
    int rope;          // bind RoPE tables
    int auto_splits;   // 1: the automatic choice must split this shape
} split_case;

static const split_case cases[] = {
    {"long cache, one kv head", 1, 1, 4, 1, 64, 4100, 0, 1, 1},
    {"GQA, window 1000 of 3000, rope", 1, 1, 8, 2, 128, 3000, 1000, 1, 1},
    {"head size 256, two rows far apart", 2, 1, 2, 2, 256, 2500, 0, 0, 1},
    {"window 37 (one split holds it), prefill of 3", 1, 3, 3, 1, 10, 5000, 37, 1, 1},
    {"short cache, more splits than keys", 3, 1, 4, 4, 16, 300, 0, 1, 1},
    {"one cached key", 1, 1, 1, 1, 32, 4096, 0, 1, 1},
    {"many rows: unsplit by default", 8, 1, 32, 8, 64, 700, 0, 1, 0},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static void set_split(wgt_backend *gpu, const char *v) { decode_setting(gpu, "WGTRAIN_DECODE_SPLIT", v); }

static void run_case(bpair *P, const split_case *k) {
    const uint32_t B = k->B, T = k->T, NH = k->NH, NKV = k->NKV, HS = k->HS, maxT = k->maxT;
    decode_inputs d = decode_inputs_init(P, B, T, NH, NKV, HS, maxT, k->window, k->rope, 977);
    if (!strcmp(k->name, "one cached key")) {
        d.pos[0] = 0;
        P->cpu->upload(P->cpu, bt_c(d.p), d.pos, B);
        P->gpu->upload(P->gpu, bt_g(d.p), d.pos, B);
    }
    const size_t no = d.no;
    char what[200];
    const uint32_t auto_s = wg_decode_attention_splits(P->gpu, (uint64_t)B * T * NH, maxT);
    const int software = P->gpu->device_is_software(P->gpu);
    CHECK(k->auto_splits && !software ? auto_s > 1 : auto_s == 1, "%s: the automatic choice is %u splits on a %s GPU",
          k->name, auto_s, software ? "software" : "hardware");
    float *ref = malloc(no * 4), *unsplit = malloc(no * 4), *got = malloc(no * 4);
    decode_inputs_run(P, &d, 0, ref);  // the reference once
    double mx = 0;
    for (size_t i = 0; i < no; i++) mx = fmax(mx, fabs(ref[i]));
    const char *splits[] = {"off", "auto", "3", "7", "64"};
    for (int si = 0; si < 5; si++) {
        if (si == 1 && auto_s == 1) continue;  // (auto is "off" here: the software GPU, or many rows)
        set_split(P->gpu, splits[si]);
        decode_inputs_run(P, &d, 1, got);
        snprintf(what, sizeof what, "%s (B=%u T=%u NH=%u NKV=%u HS=%u maxT=%u window=%u), splits %s", k->name, B, T, NH,
                 NKV, HS, maxT, k->window, splits[si]);
        CHECK_CLOSE(what, got, ref, no, 1e-5 * mx, 1e-4);
        if (si == 0) memcpy(unsplit, got, no * 4);
        else {
            strncat(what, " against the unsplit kernel", sizeof what - strlen(what) - 1);
            CHECK_CLOSE(what, got, unsplit, no, 1e-5 * mx, 1e-4);
        }
    }
    // a row past the cache (position maxT) is skipped: its output keeps the sentinel, the other
    // rows are as before
    if (B >= 2) {
        uint32_t skip[DECODE_MAX_B];
        memcpy(skip, d.pos, sizeof skip);
        skip[0] = maxT;
        P->gpu->upload(P->gpu, bt_g(d.p), skip, B);
        for (int si = 0; si < 5; si += 3) {  // off and 7
            set_split(P->gpu, splits[si]);
            decode_inputs_run(P, &d, 1, got);
            const size_t row = (size_t)T * NH * HS;
            snprintf(what, sizeof what, "%s, splits %s: the skipped row keeps its output", k->name, splits[si]);
            CHECK_CLOSE(what, got, d.sentinel, row, 0, 0);
            snprintf(what, sizeof what, "%s, splits %s: the other rows beside a skipped one", k->name, splits[si]);
            CHECK_CLOSE(what, got + row, ref + row, no - row, 1e-5 * mx, 1e-4);
        }
    }
    set_split(P->gpu, "auto");
    decode_inputs_free(P, &d);
    free(ref), free(unsplit), free(got);
}

int main(void) {
    bpair P = bpair_open();
    for (int i = 0; i < NCASES; i++) run_case(&P, &cases[i]);
    // the setting's refusals
    wg_settings s;
    wg_settings_default(&s);
    CHECK(wg_settings_set(&s, "WGTRAIN_DECODE_SPLIT", "65") == WGT_ERR_ARG && s.decode_split == WG_AUTO,
          "WGTRAIN_DECODE_SPLIT=65 is refused");
    CHECK(wg_settings_set(&s, "WGTRAIN_DECODE_SPLIT", "0") == WGT_ERR_ARG, "WGTRAIN_DECODE_SPLIT=0 is refused");
    CHECK(wg_settings_set(&s, "WGTRAIN_DECODE_SPLIT", "off") == WGT_OK && s.decode_split == 1,
          "WGTRAIN_DECODE_SPLIT=off is one split");
    bpair_close(&P);
    return test_finish();
}
