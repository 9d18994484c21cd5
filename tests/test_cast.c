// test_cast.c — the f32 <-> f16 casts of 08_cast at their edges: a table of values with the bits
// IEEE round-to-nearest-even gives (65504, 65519.99, 65520, the smallest subnormal and half of it,
// ties, ±Inf, NaN, -0, f32 subnormals), on the C reference and on WebGPU through both f16 storage
// paths (native array<f16> where the device has shader-f16, packed u32 pairs always), at word
// offsets that are not 256-byte aligned and with odd counts; a million random f32 bit patterns
// against the compiler's own _Float16 conversion; every one of the 65536 halves widened to f32.
#include <float.h>
#include <stdint.h>
#include "backend/cpu/ops.h"
#include "backend/webgpu/wg_ops.h"
#include "backend_pair.h"

static float f_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

typedef struct { float x; uint16_t want; const char *what; } edge;

// Runs cast_f16 over n floats on both backends, the output view starting `woff` words into its
// buffer; returns the halves of each side (caller frees).
static void cast_both(bpair *P, const float *x, size_t n, size_t woff, uint16_t **hc, uint16_t **hg) {
    size_t words = (n + 1) / 2;
    btensor in = bt_new(P, n + 3, NULL), out = bt_new(P, words + woff + 1, NULL);
    float *pad = calloc(n + 3, 4);
    memcpy(pad + 3, x, n * 4);
    P->cpu->upload(P->cpu, bt_c(in), pad, n + 3);
    P->gpu->upload(P->gpu, bt_g(in), pad, n + 3);
    // a sentinel in the output so that the high half of an odd count's last word is checked
    uint32_t *fill = malloc((words + woff + 1) * 4);
    for (size_t i = 0; i < words + woff + 1; i++) fill[i] = 0xDEADBEEFu;
    P->cpu->upload(P->cpu, bt_c(out), fill, words + woff + 1);
    P->gpu->upload(P->gpu, bt_g(out), fill, words + woff + 1);
    P->cpu->cast_f16(P->cpu, wgt_view_sub(bt_c(out), woff, words), wgt_view_sub(bt_c(in), 3, n), n);
    P->gpu->cast_f16(P->gpu, wgt_view_sub(bt_g(out), woff, words), wgt_view_sub(bt_g(in), 3, n), n);
    float *c, *g;
    bt_get(P, out, &c, &g);
    CHECK(((uint32_t *)c)[words + woff] == 0xDEADBEEFu && ((uint32_t *)g)[words + woff] == 0xDEADBEEFu &&
              (woff == 0 || (((uint32_t *)c)[woff - 1] == 0xDEADBEEFu && ((uint32_t *)g)[woff - 1] == 0xDEADBEEFu)),
          "cast_f16 wrote outside its view (n %zu, offset %zu)", n, woff);
    if (n & 1) {
        CHECK(((uint16_t *)c)[2 * woff + n] == 0 && ((uint16_t *)g)[2 * woff + n] == 0,
              "cast_f16 of an odd count must zero the last word's high half");
    }
    *hc = malloc(words * 4);
    *hg = malloc(words * 4);
    memcpy(*hc, (uint32_t *)c + woff, words * 4);
    memcpy(*hg, (uint32_t *)g + woff, words * 4);
    free(c); free(g); free(pad); free(fill);
    bt_free(P, &in);
    bt_free(P, &out);
}

static void test_edges(bpair *P, const char *path) {
    const edge E[] = {
        {0.0f, 0x0000, "+0"}, {-0.0f, 0x8000, "-0"}, {1.0f, 0x3c00, "1"}, {-2.0f, 0xc000, "-2"},
        {65504.0f, 0x7bff, "65504, the largest f16"}, {65519.99f, 0x7bff, "65519.99 rounds down"},
        {65520.0f, 0x7c00, "65520 rounds up to Inf"}, {-65520.0f, 0xfc00, "-65520 to -Inf"},
        {1e10f, 0x7c00, "1e10 overflows"}, {FLT_MAX, 0x7c00, "FLT_MAX overflows"}, {-FLT_MAX, 0xfc00, "-FLT_MAX"},
        {f_of(0x7f800000u), 0x7c00, "+Inf"}, {f_of(0xff800000u), 0xfc00, "-Inf"},
        {f_of(0x7fc00000u), 0x7e00, "quiet NaN"}, {f_of(0xffc00000u), 0xfe00, "-NaN"},
        {f_of(0x7f800001u), 0x7e00, "signalling NaN with a low payload stays NaN"},
        {0x1p-24f, 0x0001, "2^-24, the smallest subnormal"}, {0x1p-25f, 0x0000, "2^-25: a tie, to even 0"},
        {-0x1p-25f, 0x8000, "-2^-25 to -0"}, {0x1.8p-25f, 0x0001, "1.5*2^-25 rounds up"},
        {0x1.8p-24f, 0x0002, "1.5*2^-24: a tie, to even 2"}, {0x1.4p-24f, 0x0001, "1.25*2^-24 down"},
        {0x1p-14f, 0x0400, "2^-14, the smallest normal"}, {0x1.ffcp-15f, 0x0400, "0x3ff.8 subnormal ties up to normal"},
        {0x1.ff0p-15f, 0x03fe, "0x3fe subnormal exact"}, {1e-40f, 0x0000, "an f32 subnormal"}, {-1e-40f, 0x8000, "-f32 subnormal"},
        {1.0f + 0x1p-11f, 0x3c00, "1 + 2^-11: a tie, to even"}, {1.0f + 0x3p-11f, 0x3c02, "1 + 3*2^-11: a tie, up to even"},
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01, "just above a tie"}, {2049.0f, 0x6800, "2049 to 2048"},
        {2051.0f, 0x6802, "2051 to 2052"}, {0.1f, 0x2e66, "0.1"}, {-3.14159265f, 0xc248, "-pi"},
        {65536.0f, 0x7c00, "65536"}, {32768.5f, 0x7800, "32768.5"},
    };
    const size_t n = sizeof E / sizeof E[0];
    float x[64];
    for (size_t i = 0; i < n; i++) x[i] = E[i].x;
    for (size_t i = 0; i < n; i++) CHECK(wgt_f32_to_f16(E[i].x) == E[i].want, "C %s: got 0x%04x want 0x%04x", E[i].what, wgt_f32_to_f16(E[i].x), E[i].want);
    const size_t counts[] = {n, n - 1}, offs[] = {0, 1, 37};
    for (int a = 0; a < 2; a++)
        for (int o = 0; o < 3; o++) {
            uint16_t *hc, *hg;
            cast_both(P, x, counts[a], offs[o], &hc, &hg);
            for (size_t i = 0; i < counts[a]; i++) {
                CHECK(hc[i] == E[i].want, "cpu cast_f16 %s: got 0x%04x want 0x%04x", E[i].what, hc[i], E[i].want);
                CHECK(hg[i] == E[i].want, "webgpu (%s) cast_f16 %s: got 0x%04x want 0x%04x", path, E[i].what, hg[i], E[i].want);
            }
            free(hc);
            free(hg);
        }
}

// random f32 bit patterns (every exponent), the C conversion against the compiler's and the GPU's
static void test_random(bpair *P, const char *path) {
    const size_t n = 1000001;
    float *x = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = trng_u32();
        if (i % 4 == 1) u = (u & 0x807fffffu) | ((uint32_t)(100 + trng_u32() % 45) << 23);  // near the f16 range
        if (i % 4 == 2) u = (u & 0x80001fffu) | (trng_u32() % 0x3ff << 13) | ((uint32_t)(102 + trng_u32() % 43) << 23) | 0x1000u * (trng_u32() & 1);  // ties
        x[i] = f_of(u);
    }
#ifdef __FLT16_MAX__
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i])) continue;
        _Float16 h = (_Float16)x[i];
        uint16_t u;
        memcpy(&u, &h, 2);
        if (u != wgt_f32_to_f16(x[i]) && bad++ < 5) fprintf(stderr, "  %a: C 0x%04x, compiler 0x%04x\n", x[i], wgt_f32_to_f16(x[i]), u);
    }
    CHECK(bad == 0, "%zu of %zu conversions differ from the compiler's _Float16", bad, n);
#endif
    uint16_t *hc, *hg;
    cast_both(P, x, n, 5, &hc, &hg);
    CHECK(!memcmp(hc, hg, n * 2), "webgpu (%s) cast_f16 differs from the C reference on random bits", path);
    free(hc);
    free(hg);
    free(x);
}

// every half widened: bitwise equal on both backends, exact against the compiler, and back again
static void test_widen(bpair *P) {
    const size_t n = 65536;
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = (uint16_t)i;
    btensor in = bt_new(P, n / 2 + 1, NULL), out = bt_new(P, n + 1, NULL);
    P->cpu->upload(P->cpu, wgt_view_sub(bt_c(in), 1, n / 2), h, n / 2);
    P->gpu->upload(P->gpu, wgt_view_sub(bt_g(in), 1, n / 2), h, n / 2);
    P->cpu->cast_f32(P->cpu, wgt_view_sub(bt_c(out), 1, n - 1), wgt_view_sub(bt_c(in), 1, n / 2), n - 1);
    P->gpu->cast_f32(P->gpu, wgt_view_sub(bt_g(out), 1, n - 1), wgt_view_sub(bt_g(in), 1, n / 2), n - 1);
    float *c, *g;
    bt_get(P, out, &c, &g);
    CHECK(!memcmp(c + 1, g + 1, (n - 1) * 4), "cast_f32: the backends differ");
    CHECK(c[0] == 0.0f && g[0] == 0.0f && c[n] == 0.0f && g[n] == 0.0f, "cast_f32 wrote outside its view");
    size_t bad = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        float f = c[1 + i];
        int nan = ((h[i] & 0x7c00) == 0x7c00) && (h[i] & 0x3ff);
        if (nan) { if (!isnan(f)) bad++; continue; }
        if (wgt_f32_to_f16(f) != h[i]) bad++;  // exact: the round trip is the identity
#ifdef __FLT16_MAX__
        _Float16 hh;
        memcpy(&hh, &h[i], 2);
        if ((float)hh != f || signbit((float)hh) != signbit(f)) bad++;
#endif
    }
    CHECK(bad == 0, "cast_f32: %zu halves widened wrongly", bad);
    free(c); free(g); free(h);
    bt_free(P, &in);
    bt_free(P, &out);
}

int main(void) {
    bpair P = bpair_open();
    wg_ctx *ctx = wg_of(P.gpu);
    wg_settings *S = wg_ctx_settings(ctx);
    const int native = wg_f16_native(ctx);
    test_edges(&P, native ? "native" : "packed");
    test_random(&P, native ? "native" : "packed");
    if (native) {  // and the packed path on the same device
        S->f16 = WG_F16_PACKED;
        test_edges(&P, "packed");
        test_random(&P, "packed");
        S->f16 = WG_F16_AUTO;
    } else {
        printf("the device has no shader-f16: the packed path only\n");
    }
    test_widen(&P);
    bpair_close(&P);
    return test_finish();
}
