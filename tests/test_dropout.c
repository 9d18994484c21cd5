// test_dropout.c — the dropout mask (src/backend/dropout.h, kernels/00_shared.wgsl) and the
// element-wise ops dropout_forward / dropout_backward on both backends:
//   - the hash pinned by known values (a change of the function changes every trained model's
//     masks, so it must be deliberate);
//   - over 10^6 elements the fraction kept is 1 - p within 5 standard deviations, and the
//     backends agree bit for bit (the same mask, the same product);
//   - p = 0 is an exact copy of the bits (NaN payloads, -0, subnormals, ±Inf), in place too;
//   - in place (out = inp) gives the bits of out of place;
//   - the backward is the transpose: <fwd(x), y> = <x, bwd(y)>, with zeros at the same places;
//   - another seed or stream gives an independent mask, the same ones the same mask;
//   - windows (a lowered binding limit) do not change the mask: it belongs to the element index.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend_pair.h"
#include "testlib.h"
#include "backend/dropout.h"
#include "backend/webgpu/wg_ops.h"

// out = dropout(inp) on one backend (which 0 cpu, 1 gpu), in place when inplace; returns out
// (caller frees)
static float *run_drop(bpair *p, int which, int backward, const float *inp, size_t n, float pd, uint32_t seed,
                       uint32_t stream, int inplace) {
    wgt_backend *be = which ? p->gpu : p->cpu;
    btensor ti = bt_new(p, n, inp), to = bt_new(p, n, NULL);
    wgt_view vi = which ? bt_g(ti) : bt_c(ti), vo = which ? bt_g(to) : bt_c(to);
    if (inplace) vo = vi;
    if (backward) be->dropout_backward(be, vo, vi, n, pd, seed, stream);
    else be->dropout_forward(be, vo, vi, n, pd, seed, stream);
    float *out = malloc(n * 4);
    CHECK(be->sync(be) == WGT_OK, "sync: %s", wgt_last_error());
    be->download(be, out, inplace ? vi : vo, n);
    bt_free(p, &ti);
    bt_free(p, &to);
    return out;
}

static void test_known_values(void) {
    CHECK(wgt_hash32(0) == 0 && wgt_hash32(1) == 0x688990c0u && wgt_hash32(0xdeadbeefu) == 0xe628c683u,
          "hash32 changed: %08x %08x %08x", wgt_hash32(0), wgt_hash32(1), wgt_hash32(0xdeadbeefu));
    uint32_t k = wgt_dropout_key(0, 0, 0);
    CHECK(k == 0x944fb554u && wgt_dropout_bits(k, 0) == 0x41f39e5eu && wgt_dropout_bits(k, 1) == 0xdb104d37u,
          "dropout_key / dropout_bits changed: %08x %08x %08x", k, wgt_dropout_bits(k, 0), wgt_dropout_bits(k, 1));
    k = wgt_dropout_key(1234, 307, WGT_DROPOUT_ATTN);
    CHECK(k == 0xa1d5e8e0u && wgt_dropout_bits(k, 11) == 0xb89e4cfbu, "attention row key changed: %08x %08x", k,
          wgt_dropout_bits(k, 11));
    CHECK(wgt_dropout_threshold(0.0f) == 0 && wgt_dropout_threshold(0.5f) == 0x80000000u &&
              wgt_dropout_threshold(0.1f) == 429496736u,
          "thresholds: %u %u", wgt_dropout_threshold(0.5f), wgt_dropout_threshold(0.1f));
    CHECK(wgt_dropout_threshold(0.99999994f) == 0xffffff00u, "threshold just below 1: %08x",
          wgt_dropout_threshold(0.99999994f));
    CHECK(wgt_dropout_scale(0.1f) == 1.0f / 0.9f, "scale 1/(1 - p) in f32");
}

static int same_bits(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * 4); }

static void test_keep_fraction(bpair *p) {
    const size_t n = 1000003;
    float *x = malloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = trng_normal();
    const float ps[] = {0.1f, 0.5f, 0.9f, 0.3333f};
    for (int k = 0; k < 4; k++) {
        float pd = ps[k];
        uint32_t seed = 1000 + (uint32_t)k, stream = 7;
        float *c = run_drop(p, 0, 0, x, n, pd, seed, stream, 0), *g = run_drop(p, 1, 0, x, n, pd, seed, stream, 0);
        size_t kept = 0, wrong = 0;
        float scale = wgt_dropout_scale(pd);
        for (size_t i = 0; i < n; i++) {
            if (c[i] != 0.0f) kept++;
            if (c[i] != 0.0f && c[i] != x[i] * scale) wrong++;
            if (c[i] == 0.0f && x[i] != 0.0f) wrong += signbit(c[i]) != 0;  // dropped: +0
        }
        double frac = (double)kept / n, sd = sqrt(pd * (1.0 - pd) / n);
        CHECK(fabs(frac - (1 - pd)) < 5 * sd, "p=%g: kept %.5f of 1e6, want %.5f ± %.5f", pd, frac, 1 - pd, 5 * sd);
        CHECK(wrong == 0, "p=%g: %zu kept values are not inp/(1-p) or dropped ones not +0", pd, wrong);
        CHECK(same_bits(c, g, n), "p=%g: the backends' outputs differ (another mask)", pd);
        free(c);
        free(g);
    }
    free(x);
}

// p = 0: a copy of the bits, whatever they are
static void test_p0_copy(bpair *p) {
    const size_t n = 1029;
    float *x = malloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = trng_normal();
    const uint32_t special[] = {0x7fc00001u, 0xffa12345u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x7f800000u,
                                0xff800000u, 0x7f7fffffu};
    for (size_t i = 0; i < sizeof special / 4; i++) memcpy(&x[3 + 100 * i], &special[i], 4);
    for (int which = 0; which < 2; which++)
        for (int inplace = 0; inplace < 2; inplace++)
            for (int bwd = 0; bwd < 2; bwd++) {
                float *o = run_drop(p, which, bwd, x, n, 0.0f, 99, 1, inplace);
                CHECK(same_bits(o, x, n), "p = 0 on %s (%s, %s) is not an exact copy", which ? "webgpu" : "cpu",
                      inplace ? "in place" : "out of place", bwd ? "backward" : "forward");
                free(o);
            }
    free(x);
}

static void test_inplace(bpair *p) {
    const size_t n = 5001;
    float *x = malloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = trng_normal();
    for (int which = 0; which < 2; which++) {
        float *a = run_drop(p, which, 0, x, n, 0.4f, 5, 6, 0), *b = run_drop(p, which, 0, x, n, 0.4f, 5, 6, 1);
        CHECK(same_bits(a, b, n), "%s: in place differs from out of place", which ? "webgpu" : "cpu");
        free(a);
        free(b);
    }
    free(x);
}

// <fwd(x), y> = <x, bwd(y)>: the backward is the transpose of the forward (the same diagonal mask)
static void test_adjoint(bpair *p) {
    const size_t n = 100003;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (size_t i = 0; i < n; i++) { x[i] = trng_normal(); y[i] = trng_normal(); }
    for (int which = 0; which < 2; which++) {
        float *fx = run_drop(p, which, 0, x, n, 0.35f, 31337, 2, 0);
        float *by = run_drop(p, which, 1, y, n, 0.35f, 31337, 2, 0);
        double l = 0, r = 0, mag = 0;
        size_t mism = 0;
        for (size_t i = 0; i < n; i++) {
            l += (double)fx[i] * y[i];
            r += (double)x[i] * by[i];
            mag += fabs((double)fx[i] * y[i]);
            mism += (fx[i] == 0.0f) != (by[i] == 0.0f);
        }
        // each term differs by the rounding of one f32 product (x·scale vs y·scale)
        CHECK(fabs(l - r) <= 1e-6 * mag, "%s: <fwd(x), y> = %.9g but <x, bwd(y)> = %.9g", which ? "webgpu" : "cpu", l,
              r);
        CHECK(mism == 0, "%s: the backward's mask differs from the forward's at %zu elements", which ? "webgpu" : "cpu",
              mism);
        free(fx);
        free(by);
    }
    free(x);
    free(y);
}

// fraction of elements where two masks (outputs of all-ones inputs) agree
static double agreement(const float *a, const float *b, size_t n) {
    size_t s = 0;
    for (size_t i = 0; i < n; i++) s += (a[i] == 0.0f) == (b[i] == 0.0f);
    return (double)s / n;
}

static void test_streams(bpair *p) {
    const size_t n = 200000;
    const float pd = 0.5f;
    float *ones = malloc(n * 4);
    for (size_t i = 0; i < n; i++) ones[i] = 1.0f;
    float *a = run_drop(p, 1, 0, ones, n, pd, 10, 0, 0), *a2 = run_drop(p, 1, 0, ones, n, pd, 10, 0, 0);
    float *b = run_drop(p, 1, 0, ones, n, pd, 11, 0, 0), *c = run_drop(p, 1, 0, ones, n, pd, 10, 1, 0);
    CHECK(same_bits(a, a2, n), "the same seed and stream gave another mask");
    double sd = 0.5 / sqrt((double)n), ab = agreement(a, b, n), ac = agreement(a, c, n);
    CHECK(fabs(ab - 0.5) < 5 * sd, "seeds 10 and 11: masks agree at %.4f, want 0.5 (independent)", ab);
    CHECK(fabs(ac - 0.5) < 5 * sd, "streams 0 and 1: masks agree at %.4f, want 0.5 (independent)", ac);
    // neighbours within one mask are independent too
    size_t s1 = 0;
    for (size_t i = 0; i + 1 < n; i++) s1 += (a[i] == 0.0f) == (a[i + 1] == 0.0f);
    CHECK(fabs((double)s1 / (n - 1) - 0.5) < 5 * sd, "neighbouring elements agree at %.4f", (double)s1 / (n - 1));
    free(a); free(a2); free(b); free(c); free(ones);
}

// A binding limit of 1000 elements makes the wrapper run windows; each passes its first index.
static void test_windows(bpair *p) {
    const size_t n = 10007;
    float *x = malloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = trng_normal();
    float *c = run_drop(p, 0, 0, x, n, 0.25f, 77, 8, 0);
    wg_settings *S = wg_ctx_settings(wg_of(p->gpu));
    S->binding_limit = 1000;
    float *g = run_drop(p, 1, 0, x, n, 0.25f, 77, 8, 0), *gi = run_drop(p, 1, 0, x, n, 0.25f, 77, 8, 1);
    S->binding_limit = 0;
    CHECK(same_bits(c, g, n), "windows of 1000 elements: another mask than the reference's");
    CHECK(same_bits(c, gi, n), "windows of 1000 elements in place: another mask than the reference's");
    free(c); free(g); free(gi); free(x);
}

int main(void) {
    test_known_values();
    bpair p = bpair_open();
    test_keep_fraction(&p);
    test_p0_copy(&p);
    test_inplace(&p);
    test_adjoint(&p);
    test_streams(&p);
    test_windows(&p);
    bpair_close(&p);
    return test_finish();
}
