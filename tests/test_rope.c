// test_rope.c — rotary position embedding (rope_forward / rope_backward, docs/kernels.md#rope):
//   1. cpu_rope_tables against Hugging Face LLaMA's construction written out here in double
//      (inv_freq = 1/theta^(2i/HS), emb = cat(freqs, freqs)); cpu_rope_inv_freq's linear and
//      llama3 types against transformers' formulas written out here (_compute_linear_scaling_
//      rope_parameters, _compute_llama3_parameters: the where / smooth / is_medium_freq steps);
//   2. the C reference forward against HF's formula x·cos + rotate_half(x)·sin evaluated in
//      double on the same tables, on the q and k heads of a fused grouped-query qkv (v untouched,
//      bit for bit);
//   3. the backward against central finite differences of that double forward (a linear map, so
//      the differences are exact up to rounding) and the adjoint identity <R x, y> = <x, Rᵀ y>;
//   4. what RoPE is for: with real tables each pair keeps its length, and q·k after rotation
//      depends only on the distance between the two positions;
//   5. the WebGPU kernels against the reference with real tables (plain and llama3) at long
//      positions, head size 128, and views at offsets that are not 256-byte aligned (binding windows).
// test_backend_ops.c covers both backends on random data as well; an odd head size is refused
// by `wgtrain op` (test_op_cli.sh).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend_pair.h"
#include "backend/cpu/ops.h"

#define THETA 10000.0

// The default tables (theta 10000).
static void default_tables(float *ct, float *st, uint32_t maxT, uint32_t HS) {
    double *f = malloc(HS / 2 * sizeof(double));
    cpu_rope_inv_freq(f, HS, THETA, WGT_ROPE_DEFAULT, 0, 0, 0, 0);
    cpu_rope_tables(ct, st, maxT, HS, f);
    free(f);
}

// HF's rotation of one head in double: x' = x·cos + rotate_half(x)·sin, rotate_half(x) = [-x2, x1]
static void hf_rotate(double *out, const double *x, const float *c, const float *s, uint32_t HS) {
    uint32_t h2 = HS / 2;
    for (uint32_t d = 0; d < HS; d++) {
        double rh = d < h2 ? -x[d + h2] : x[d - h2];
        out[d] = x[d] * c[d] + rh * s[d];
    }
}

// The forward on a whole qkv[B, T, W] in double (q and k heads rotated, v copied).
static void hf_forward(double *out, const double *x, const float *ct, const float *st, uint32_t B, uint32_t T,
                       uint32_t NH, uint32_t NKV, uint32_t HS) {
    size_t W = (size_t)(NH + 2 * NKV) * HS;
    memcpy(out, x, (size_t)B * T * W * sizeof(double));
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (uint32_t h = 0; h < NH + NKV; h++)
            hf_rotate(out + r * W + h * HS, x + r * W + h * HS, ct + (r % T) * HS, st + (r % T) * HS, HS);
}

static double *to_d(const float *a, size_t n) {
    double *d = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = a[i];
    return d;
}

// transformers' scaled rope types, written out as modeling_rope_utils.py computes them (in double
// here): linear divides every frequency; llama3 = torch.where(wavelen > low_wl, f / factor, f),
// then smooth = (orig / wavelen - low) / (high - low), smoothed = (1 - smooth) f' / factor +
// smooth f', used where ~(wavelen < high_wl) & ~(wavelen > low_wl).
static void test_inv_freq(uint32_t HS, double theta, double factor, double low, double high, double orig) {
    double *d = malloc(HS / 2 * sizeof(double)), *lin = malloc(HS / 2 * sizeof(double)),
           *l3 = malloc(HS / 2 * sizeof(double));
    cpu_rope_inv_freq(d, HS, theta, WGT_ROPE_DEFAULT, 0, 0, 0, 0);
    cpu_rope_inv_freq(lin, HS, theta, WGT_ROPE_LINEAR, factor, 0, 0, 0);
    cpu_rope_inv_freq(l3, HS, theta, WGT_ROPE_LLAMA3, factor, low, high, orig);
    double wd = 0, wl = 0, w3 = 0;
    int n_low = 0, n_mid = 0, n_high = 0;
    for (uint32_t i = 0; i < HS / 2; i++) {
        double f = 1.0 / pow(theta, (double)(2 * i) / HS);
        double wavelen = 2 * M_PI / f, low_wl = orig / low, high_wl = orig / high;
        double fl = wavelen > low_wl ? f / factor : f;
        double smooth = (orig / wavelen - low) / (high - low);
        double smoothed = (1 - smooth) * fl / factor + smooth * fl;
        int medium = !(wavelen < high_wl) && !(wavelen > low_wl);
        double want = medium ? smoothed : fl;
        n_low += wavelen > low_wl;
        n_mid += medium;
        n_high += wavelen < high_wl;
        wd = fmax(wd, fabs(d[i] - f) / f);
        wl = fmax(wl, fabs(lin[i] - f / factor) / f);
        w3 = fmax(w3, fabs(l3[i] - want) / want);
    }
    // the same double operations in another order: a few ulps
    CHECK(wd <= 1e-15 && wl <= 1e-15 && w3 <= 1e-14, "rope inv_freq HS=%u theta=%g: default %.3g, linear %.3g, llama3 "
          "%.3g relative off transformers' formulas", HS, theta, wd, wl, w3);
    CHECK(n_low > 0 && n_mid > 0 && n_high > 0, "rope llama3 HS=%u: the case has low (%d), medium (%d) and high (%d) "
          "frequencies", HS, n_low, n_mid, n_high);
    free(d);
    free(lin);
    free(l3);
}

static void test_tables(uint32_t maxT, uint32_t HS) {
    float *c = malloc((size_t)maxT * HS * 4), *s = malloc((size_t)maxT * HS * 4);
    default_tables(c, s, maxT, HS);
    double worst = 0;
    for (uint32_t t = 0; t < maxT; t++)
        for (uint32_t d = 0; d < HS; d++) {
            uint32_t i = d % (HS / 2);  // emb = cat(freqs, freqs)
            double a = (double)t / pow(THETA, (double)(2 * i) / HS);
            worst = fmax(worst, fmax(fabs(c[(size_t)t * HS + d] - cos(a)), fabs(s[(size_t)t * HS + d] - sin(a))));
        }
    // f32 rounding of a value in [-1, 1]: at most 2^-25 away from the double
    CHECK(worst <= 3.0e-8, "rope tables maxT=%u HS=%u: worst |table - HF formula| %.3g", maxT, HS, worst);
    CHECK(c[0] == 1.0f && s[0] == 0.0f && c[HS - 1] == 1.0f, "rope tables: position 0 is the identity");
    free(c);
    free(s);
}

typedef struct { double *x, *y; const float *w, *ct, *st; uint32_t B, T, NH, NKV, HS; size_t n; } fd_ctx;
static double fd_loss(fd_ctx *c) {
    hf_forward(c->y, c->x, c->ct, c->st, c->B, c->T, c->NH, c->NKV, c->HS);
    double L = 0;
    for (size_t i = 0; i < c->n; i++) L += c->y[i] * c->w[i];
    return L;
}

// random_tables: arbitrary cos / sin values (the two halves of a row differ), for which the
// backward must still be the exact transpose of the forward
static void test_reference(uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, int random_tables) {
    char tag[112];
    snprintf(tag, sizeof tag, "B=%u T=%u NH=%u NKV=%u HS=%u%s", B, T, NH, NKV, HS,
             random_tables ? " random tables" : "");
    size_t W = (size_t)(NH + 2 * NKV) * HS, n = (size_t)B * T * W, maxT = T + 3;
    float *ct = malloc(maxT * HS * 4), *st = malloc(maxT * HS * 4);
    default_tables(ct, st, (uint32_t)maxT, HS);
    for (size_t i = 0; random_tables && i < maxT * HS; i++) { ct[i] = trng_normal(); st[i] = trng_normal(); }
    float *x = trand_normal(n, 1.0f), *y = malloc(n * 4);
    memcpy(y, x, n * 4);
    cpu_rope_forward(y, ct, st, NULL, B, T, NH, NKV, HS);
    double *xd = to_d(x, n), *ref = malloc(n * sizeof(double));
    hf_forward(ref, xd, ct, st, B, T, NH, NKV, HS);
    // two f32 products and a sum of O(1) values: a few ulps of the larger term
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(y[i] - ref[i]));
    CHECK(worst <= (random_tables ? 4e-6 : 1e-6), "rope_forward %s: worst |ref - HF double| %.3g", tag, worst);
    int v_same = 1;
    size_t v0 = (size_t)(NH + NKV) * HS;  // first v column
    for (size_t r = 0; r < (size_t)B * T; r++) v_same &= !memcmp(y + r * W + v0, x + r * W + v0, (size_t)NKV * HS * 4);
    CHECK(v_same, "rope_forward %s: v was modified", tag);

    // backward: dL/dx of L = Σ rope(x)·w by central differences of the double forward
    float *w = trand_normal(n, 1.0f), *g = malloc(n * 4);
    memcpy(g, w, n * 4);
    cpu_rope_backward(g, ct, st, NULL, B, T, NH, NKV, HS);
    fd_ctx c = {xd, malloc(n * sizeof(double)), w, ct, st, B, T, NH, NKV, HS, n};
    double gw = 0, h = 1e-3;  // L is linear in x: any step is exact up to rounding
    for (size_t i = 0; i < n; i++) {
        double x0 = xd[i];
        xd[i] = x0 + h;
        double lp = fd_loss(&c);
        xd[i] = x0 - h;
        double lm = fd_loss(&c);
        xd[i] = x0;
        gw = fmax(gw, fabs(g[i] - (lp - lm) / (2 * h)));
    }
    CHECK(gw <= 1e-5, "rope_backward %s: worst |grad - finite difference| %.3g", tag, gw);
    // adjoint: <R x, w> = <x, Rᵀ w>
    double a = 0, b = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        a += (double)y[i] * w[i];
        b += (double)x[i] * g[i];
        m += fabs((double)y[i] * w[i]);
    }
    CHECK(fabs(a - b) <= 1e-6 * m, "rope %s: <R x, w> = %.9g but <x, R^T w> = %.9g", tag, a, b);
    free(ct); free(st); free(x); free(y); free(xd); free(ref); free(w); free(g); free(c.y);
}

// Rotation keeps each pair's length, and (R_m q)·(R_n k) depends on m - n only.
static void test_properties(void) {
    const uint32_t HS = 16, maxT = 600;
    float *ct = malloc((size_t)maxT * HS * 4), *st = malloc((size_t)maxT * HS * 4);
    default_tables(ct, st, maxT, HS);
    double q[16], k[16], a[16], b[16];
    for (uint32_t d = 0; d < HS; d++) { q[d] = trng_normal(); k[d] = trng_normal(); }
    double worst_len = 0, worst_rel = 0;
    static const uint32_t pos[] = {0, 7, 100, 500};  // q at m, k at m + 5
    double ref = 0;
    for (int s = 0; s < 4; s++) {
        uint32_t m = pos[s];
        hf_rotate(a, q, ct + (size_t)m * HS, st + (size_t)m * HS, HS);
        for (uint32_t d = 0; d < HS / 2; d++)
            worst_len = fmax(worst_len, fabs(hypot(a[d], a[d + HS / 2]) - hypot(q[d], q[d + HS / 2])));
        hf_rotate(b, k, ct + (size_t)(m + 5) * HS, st + (size_t)(m + 5) * HS, HS);  // k 5 positions later
        double dot = 0;
        for (uint32_t d = 0; d < HS; d++) dot += a[d] * b[d];
        if (s == 0) ref = dot;
        else worst_rel = fmax(worst_rel, fabs(dot - ref));
    }
    CHECK(worst_len <= 1e-6, "rope: a rotated pair's length changed by %.3g", worst_len);
    CHECK(worst_rel <= 1e-5, "rope: q.k at a fixed distance changed with the position by %.3g", worst_rel);
    free(ct);
    free(st);
}

// Both backends on real tables; each tensor sits `off` elements into its buffer (not a multiple
// of 64, so the kernels see binding windows with a remainder).
static void test_webgpu(bpair *p, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, uint32_t maxT,
                        size_t off, int llama3) {
    char what[128];
    size_t W = (size_t)(NH + 2 * NKV) * HS, n = (size_t)B * T * W, nt = (size_t)maxT * HS;
    float *ct = malloc(nt * 4), *st = malloc(nt * 4);
    if (llama3) {  // Llama 3.1's settings
        double *f = malloc(HS / 2 * sizeof(double));
        cpu_rope_inv_freq(f, HS, 500000.0, WGT_ROPE_LLAMA3, 8.0, 1.0, 4.0, 8192.0);
        cpu_rope_tables(ct, st, maxT, HS, f);
        free(f);
    } else {
        default_tables(ct, st, maxT, HS);
    }
    float *x = trand_normal(n + 2 * off, 1.0f), *ctab = calloc(nt + 2 * off, 4), *stab = calloc(nt + 2 * off, 4);
    memcpy(ctab + off, ct, nt * 4);
    memcpy(stab + off, st, nt * 4);
    btensor tx = bt_new(p, n + 2 * off, x), tc = bt_new(p, nt + 2 * off, ctab), ts = bt_new(p, nt + 2 * off, stab);
    for (int bwd = 0; bwd < 2; bwd++) {
        wgt_backend *be[2] = {p->cpu, p->gpu};
        for (int k = 0; k < 2; k++) {
            wgt_view vx = wgt_view_sub(k ? bt_g(tx) : bt_c(tx), off, n);
            wgt_view vc = wgt_view_sub(k ? bt_g(tc) : bt_c(tc), off, nt);
            wgt_view vs = wgt_view_sub(k ? bt_g(ts) : bt_c(ts), off, nt);
            if (bwd) be[k]->rope_backward(be[k], vx, vc, vs, wgt_view_none(), B, T, NH, NKV, HS);
            else be[k]->rope_forward(be[k], vx, vc, vs, wgt_view_none(), B, T, NH, NKV, HS);
        }
        float *c, *g;
        bt_get(p, tx, &c, &g);
        snprintf(what, sizeof what, "rope_%s webgpu B=%u T=%u NH=%u NKV=%u HS=%u off=%zu%s", bwd ? "backward" : "forward",
                 B, T, NH, NKV, HS, off, llama3 ? " llama3" : "");
        // element-wise f32 on both sides; a fused multiply-add on one side moves ~1 ulp
        CHECK_CLOSE(what, g, c, n + 2 * off, 1e-6, 1e-6);
        CHECK(!memcmp(g, x, off * 4) && !memcmp(g + off + n, x + off + n, off * 4), "%s: wrote outside its view", what);
        free(c);
        free(g);
    }
    bt_free(p, &tx); bt_free(p, &tc); bt_free(p, &ts);
    free(ct); free(st); free(x); free(ctab); free(stab);
}

// Packed examples restart their positions: rope with doc_start on a row of examples [0, a) and
// [a, T) equals rope without it on each example alone (the second moved to a sequence start),
// bit for bit, forward and backward.
static void test_packed(uint32_t T, uint32_t a, uint32_t NH, uint32_t NKV, uint32_t HS) {
    size_t W = (size_t)(NH + 2 * NKV) * HS, n = (size_t)T * W;
    float *ct = malloc((size_t)T * HS * 4), *st = malloc((size_t)T * HS * 4);
    default_tables(ct, st, T, HS);
    uint32_t *doc = malloc(T * 4);
    for (uint32_t t = 0; t < T; t++) doc[t] = t < a ? 0 : a;
    for (int bwd = 0; bwd < 2; bwd++) {
        float *x = trand_normal(n, 1.0f), *alone = malloc(n * 4);
        memcpy(alone, x, n * 4);
        if (bwd) cpu_rope_backward(x, ct, st, doc, 1, T, NH, NKV, HS);
        else cpu_rope_forward(x, ct, st, doc, 1, T, NH, NKV, HS);
        float *second = alone + (size_t)a * W;  // the second example as a sequence of its own
        if (bwd) {
            cpu_rope_backward(alone, ct, st, NULL, 1, a, NH, NKV, HS);
            cpu_rope_backward(second, ct, st, NULL, 1, T - a, NH, NKV, HS);
        } else {
            cpu_rope_forward(alone, ct, st, NULL, 1, a, NH, NKV, HS);
            cpu_rope_forward(second, ct, st, NULL, 1, T - a, NH, NKV, HS);
        }
        CHECK(!memcmp(x, alone, n * 4), "rope_%s T=%u with examples [0,%u) [%u,%u): not each example alone",
              bwd ? "backward" : "forward", T, a, a, T);
        free(x);
        free(alone);
    }
    free(doc); free(ct); free(st);
}

int main(void) {
    test_inv_freq(128, 500000.0, 8.0, 1.0, 4.0, 8192.0);  // Llama 3.1 / 3.2
    test_inv_freq(64, 500000.0, 32.0, 1.0, 4.0, 8192.0);  // Llama 3.2 1B/3B (head size 64, factor 32)
    test_inv_freq(16, 10000.0, 4.0, 1.0, 4.0, 64.0);     // a small model whose bands all hold pairs
    test_tables(64, 8);
    test_tables(4096, 128);
    test_reference(2, 9, 4, 2, 8, 0);   // grouped-query qkv
    test_reference(1, 7, 3, 3, 6, 0);   // plain heads, HS/2 odd
    test_reference(1, 4, 2, 1, 2, 0);   // the smallest head
    test_reference(1, 6, 2, 1, 8, 1);
    test_properties();
    test_packed(11, 4, 4, 2, 8);
    test_packed(9, 1, 2, 2, 6);
    bpair p = bpair_open();
    test_webgpu(&p, 2, 40, 8, 2, 16, 64, 5, 0);
    test_webgpu(&p, 1, 2048, 2, 1, 128, 2048, 70, 0);  // long positions (angles to 2047 rad), HS = 128
    test_webgpu(&p, 1, 300, 2, 1, 128, 300, 3, 1);     // llama3 frequencies
    bpair_close(&p);
    return test_finish();
}
