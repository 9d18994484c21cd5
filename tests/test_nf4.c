// test_nf4.c — the NF4 quantiser (model/nf4.h) against a float64 reference of QLoRA's definition:
// the 16 levels recomputed from the normal quantile function (by bisection on erfc, exact to double
// precision), every code of random blocks against the nearest float64 level of x / absmax, the
// dequantised error bound, the packing, double quantisation's error bound, and the refusal of
// non-finite weights.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testlib.h"
#include "model/nf4.h"

static double phi_inv(double p) {  // Φ^-1 by bisection on Φ(x) = erfc(-x / sqrt 2) / 2
    double lo = -10, hi = 10;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(-mid / sqrt(2.0)) < p) lo = mid; else hi = mid;
    }
    return 0.5 * (lo + hi);
}

static uint64_t rs = 99;
static double urand(void) {
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2.0 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

int main(void) {
    // ---- the levels: QLoRA's construction (offset 0.9677083; 8 positive quantiles of evenly spaced
    // probabilities from the offset toward 1/2, 7 negative, and 0; divided by the largest)
    double ref[16];
    const double off = 0.9677083, top = phi_inv(off);
    int k = 0;
    for (int i = 0; i < 7; i++) ref[k++] = -phi_inv(off + (0.5 - off) * i / 7.0) / top;
    ref[k++] = 0;
    for (int i = 7; i >= 0; i--) ref[k++] = phi_inv(off + (0.5 - off) * i / 8.0) / top;
    double worst = 0;
    for (int i = 0; i < 16; i++) worst = fmax(worst, fabs(nf4_levels[i] - ref[i]));
    // the released levels were computed from probabilities rounded to float32 (torch.linspace):
    // each moves by at most |dΦ^-1/dp| (below 14 here) x 2^-25 / 1.85 ≈ 2.3e-7, plus f32 rounding
    CHECK(worst <= 1e-6, "the NF4 levels differ from the definition by %.3g", worst);
    printf("levels: at most %.2e from the float64 definition\n", worst);
    for (int i = 1; i < 16; i++) CHECK(nf4_levels[i] > nf4_levels[i - 1], "the levels are not ascending at %d", i);

    // ---- codes of random blocks against the nearest float64 level
    const size_t nb = 300, n = nb * NF4_BLOCK;
    float *x = malloc(n * 4), *y = malloc(n * 4), *am = malloc(nb * 4);
    uint8_t *codes = malloc(n / 2);
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.02 * nrand());
    memset(x + 5 * NF4_BLOCK, 0, NF4_BLOCK * 4);      // an all-zero block
    x[7 * NF4_BLOCK + 3] = 3.0f;                       // an outlier dominating its block
    for (int i = 0; i < NF4_BLOCK; i++) x[9 * NF4_BLOCK + i] = (float)(nf4_levels[i % 16] * 0.5);  // exact levels
    CHECK(nf4_quantize(codes, am, x, n) == WGT_OK, "quantize: %s", wgt_last_error());
    size_t mismatch = 0, near_tie = 0;
    double maxgap = 0;
    for (int i = 1; i < 16; i++) maxgap = fmax(maxgap, ref[i] - ref[i - 1]);
    for (size_t b = 0; b < nb; b++) {
        double a = 0;
        for (int i = 0; i < NF4_BLOCK; i++) a = fmax(a, fabs((double)x[b * NF4_BLOCK + i]));
        CHECK(am[b] == (float)a, "block %zu: absmax %g, want %g", b, (double)am[b], a);
        for (int i = 0; i < NF4_BLOCK; i++) {
            size_t j = b * NF4_BLOCK + i;
            double q = a > 0 ? x[j] / a : 0;
            int best = 0;
            for (int l = 1; l < 16; l++) if (fabs(q - ref[l]) < fabs(q - ref[best])) best = l;
            int got = (codes[j / 2] >> (4 * (j & 1))) & 15;
            // within 1e-6 of a midpoint the f32 division and levels may pick either neighbour
            int tie = 0;
            for (int l = 1; l < 16; l++) tie |= fabs(q - 0.5 * (ref[l] + ref[l - 1])) < 1e-6;
            if (got != best) { if (tie) near_tie++; else mismatch++; }
        }
    }
    CHECK(mismatch == 0, "%zu codes differ from the nearest float64 level (away from any midpoint)", mismatch);
    CHECK(near_tie <= 3, "%zu codes at midpoints differ: more than rounding explains", near_tie);
    nf4_dequantize(y, codes, am, n);
    double derr = 0;
    for (size_t j = 0; j < n; j++) {
        double bound = am[j / NF4_BLOCK] * (maxgap / 2 + 1e-6);
        if (fabs(y[j] - x[j]) > bound) derr = fmax(derr, fabs(y[j] - x[j]) / bound);
    }
    CHECK(derr == 0, "a dequantised value is %.3g x beyond half the widest level gap", derr);
    for (int i = 0; i < NF4_BLOCK; i++)
        CHECK(y[9 * NF4_BLOCK + i] == x[9 * NF4_BLOCK + i], "the exact level %d did not come back exactly", i % 16);
    for (int i = 0; i < NF4_BLOCK; i++) CHECK(y[5 * NF4_BLOCK + i] == 0, "the zero block did not stay 0");
    CHECK(y[7 * NF4_BLOCK + 3] == 3.0f, "the block maximum did not come back exactly");
    // the packing: element 2i in the low nibble
    CHECK((codes[9 * NF4_BLOCK / 2] & 15) == 0 && (codes[9 * NF4_BLOCK / 2] >> 4) == 1,
          "element 2i is not the low nibble (byte %02x)", codes[9 * NF4_BLOCK / 2]);

    // ---- double quantisation: each absmax back within scale/2 (plus f32 rounding of mean + q scale)
    int8_t *q = malloc(nb);
    size_t ng = (nb + NF4_DQ_GROUP - 1) / NF4_DQ_GROUP;
    float *mean = malloc(ng * 4), *scale = malloc(ng * 4), *am2 = malloc(nb * 4);
    nf4_dq_quantize(q, mean, scale, am, nb);
    nf4_dq_restore(am2, q, mean, scale, nb);
    double dq = 0;
    for (size_t b = 0; b < nb; b++) {
        double bound = scale[b / NF4_DQ_GROUP] * 0.5 * (1 + 1e-5) + 4 * 1.2e-7 * fabs(am[b]);
        if (fabs(am2[b] - am[b]) > bound) dq = fmax(dq, fabs(am2[b] - am[b]) / bound);
    }
    CHECK(dq == 0, "a double-quantised absmax is %.3g x beyond its bound", dq);

    // ---- refusals
    x[100] = NAN;
    CHECK(nf4_quantize(codes, am, x, n) != WGT_OK && strstr(wgt_last_error(), "100"), "NaN: %s", wgt_last_error());
    free(x); free(y); free(am); free(codes); free(q); free(mean); free(scale); free(am2);
    return test_finish();
}
