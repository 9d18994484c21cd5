// test_cpu_grad.c — checks the C reference (src/backend/cpu) on its own: every backward op
// against central finite differences of a double-precision forward, every forward against that
// double forward, the edge cases docs/numerics.md#edge-cases names, the optimizer ops against hand-computed
// values, and the CPU backend's vtable (views, offsets, bounds) against the direct calls.
// The WGSL kernels are later tested against these references, so they must be right first.
//
// Method for a backward op: pick small random float inputs x and a random float weight w of
// the output's shape, define L(x) = Σ out(x)·w, and compare the float backward (called with
// dout = w) with (L(x+h·e_i) - L(x-h·e_i)) / 2h where L is evaluated by a separate double
// implementation of the forward written here from the formulas (not by calling the float code).
//
// Tolerances. With h = 1e-6 in double, the finite difference is accurate to ~1e-9: truncation
// h^2·L'''/6 ~ 1e-12 and rounding ~1e-16·|L|/h ~ 1e-9 for |L| ~ 10. The analytical side is f32
// and carries ~1e-7..1e-6 relative rounding per element plus its own reductions (all inputs
// and weights are O(1), so gradients are O(0.01..10)). Every check here passes at atol 1e-6 +
// rtol 1e-5; we allow atol 1e-5 + rtol 1e-4, a 10x margin against platform and BLAS-kernel
// differences, while a formula mistake (a missing term, a wrong index, a missing scale, eps
// 1e-6 instead of 1e-5) shows up at 1e-3..1. Forward results are compared with the double
// forward at atol 1e-5 + rtol 1e-5 (f32 rounding of O(1) values summed over <= a few dozen terms).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testlib.h"
#include "activation_f64.h"
#include "backend/cpu/ops.h"
#include "backend/opt_status.h"

#define FD_H 1e-6
#define G_ATOL 1e-5
#define G_RTOL 1e-4
#define F_ATOL 1e-5
#define F_RTOL 1e-5

// ---------------------------------------------------------------- helpers

static uint64_t rng_s = 0x9e3779b97f4a7c15ull;
static double urand(void) {  // splitmix64 -> [0, 1)
    uint64_t z = (rng_s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)urand(); }
static float *falloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static double *dalloc(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
static float *frandom(size_t n, float lo, float hi) {
    float *a = falloc(n);
    for (size_t i = 0; i < n; i++) a[i] = frand(lo, hi);
    return a;
}
static double *to_double(const float *a, size_t n) {
    double *d = dalloc(n);
    for (size_t i = 0; i < n; i++) d[i] = a[i];
    return d;
}
static float *to_float(const double *a, size_t n) {
    float *f = falloc(n);
    for (size_t i = 0; i < n; i++) f[i] = (float)a[i];
    return f;
}
static double dot_w(const double *out, const float *w, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += out[i] * w[i];
    return s;
}

// Central differences of L over the n doubles at x (restored afterwards).
typedef double (*loss_fn)(void *ctx);
static double *fd_grad(double *x, size_t n, loss_fn L, void *ctx) {
    double *g = dalloc(n);
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + FD_H;
        double lp = L(ctx);
        x[i] = x0 - FD_H;
        double lm = L(ctx);
        x[i] = x0;
        g[i] = (lp - lm) / (2 * FD_H);
    }
    return g;
}

// Compares a float analytical gradient with a double numerical one.
static void check_grad(const char *what, const float *got, const double *num, size_t n) {
    float *ref = to_float(num, n);
    CHECK_CLOSE(what, got, ref, n, G_ATOL, G_RTOL);
    free(ref);
}
static void check_fwd(const char *what, const float *got, const double *ref_d, size_t n) {
    float *ref = to_float(ref_d, n);
    CHECK_CLOSE(what, got, ref, n, F_ATOL, F_RTOL);
    free(ref);
}

// ---------------------------------------------------------------- double forwards

static double d_clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }
static double d_gelu(double x) {
    double xc = d_clamp(x, -100, 100);
    return 0.5 * x * (1 + tanh(0.7978845608 * (xc + 0.044715 * xc * xc * xc)));
}
static double d_silu(double x) { return x / (1 + exp(-x)); }

// ---------------------------------------------------------------- gelu / swiglu

typedef struct { double *x; const float *w; size_t n; } act_ctx;
static double gelu_loss(void *p) {
    act_ctx *c = p;
    double s = 0;
    for (size_t i = 0; i < c->n; i++) s += d_gelu(c->x[i]) * c->w[i];
    return s;
}

static void test_gelu_grad(void) {
    const size_t n = 72;
    float *x = frandom(n, -6, 6), *w = frandom(n, -1, 1);
    // Points past the clamp and around the origin (kept > h away from the clamp's kink).
    const float special[] = {0, 1e-3f, -1e-3f, 150, -150, -20, 20, 99.5f};
    memcpy(x, special, sizeof special);
    float *y = falloc(n), *g = falloc(n);
    memcpy(y, x, n * sizeof(float));
    cpu_gelu_inplace(y, n);
    double *yd = dalloc(n);
    for (size_t i = 0; i < n; i++) yd[i] = d_gelu(x[i]);
    check_fwd("gelu forward vs double", y, yd, n);

    cpu_ffn_gelu_backward(g, w, x, n);
    act_ctx c = {to_double(x, n), w, n};
    double *num = fd_grad(c.x, n, gelu_loss, &c);
    check_grad("ffn_gelu_backward vs finite differences", g, num, n);
    free(x); free(w); free(y); free(g); free(yd); free(c.x); free(num);
}

typedef struct { double *gate, *up; const float *w; size_t n; } swi_ctx;
static double swiglu_loss(void *p) {
    swi_ctx *c = p;
    double s = 0;
    for (size_t i = 0; i < c->n; i++) s += d_silu(c->gate[i]) * c->up[i] * c->w[i];
    return s;
}

static void test_swiglu_grad(void) {
    const size_t n = 64;
    float *gate = frandom(n, -8, 8), *up = frandom(n, -3, 3), *w = frandom(n, -1, 1);
    gate[0] = 0; gate[1] = 30; gate[2] = -30;
    float *h = falloc(n), *dg = falloc(n), *du = falloc(n);
    cpu_swiglu_combine(h, gate, up, n);
    double *hd = dalloc(n);
    for (size_t i = 0; i < n; i++) hd[i] = d_silu(gate[i]) * up[i];
    check_fwd("swiglu_combine vs double", h, hd, n);

    cpu_ffn_swiglu_backward(dg, du, w, gate, up, n);
    swi_ctx c = {to_double(gate, n), to_double(up, n), w, n};
    double *ng = fd_grad(c.gate, n, swiglu_loss, &c);
    double *nu = fd_grad(c.up, n, swiglu_loss, &c);
    check_grad("ffn_swiglu_backward grad_gate", dg, ng, n);
    check_grad("ffn_swiglu_backward grad_up", du, nu, n);
    free(gate); free(up); free(w); free(h); free(dg); free(du); free(hd);
    free(c.gate); free(c.up); free(ng); free(nu);
}

// GeGLU: hidden = gelu(gate)·up with the tanh GeLU of d_gelu; gates past the clamp and near 0
static double geglu_loss(void *p) {
    swi_ctx *c = p;
    double s = 0;
    for (size_t i = 0; i < c->n; i++) s += d_gelu(c->gate[i]) * c->up[i] * c->w[i];
    return s;
}

static void test_geglu_grad(void) {
    const size_t n = 64;
    float *gate = frandom(n, -6, 6), *up = frandom(n, -3, 3), *w = frandom(n, -1, 1);
    gate[0] = 0; gate[1] = 150; gate[2] = -150; gate[3] = -20;
    float *h = falloc(n), *dg = falloc(n), *du = falloc(n);
    cpu_geglu_combine(h, gate, up, n);
    double *hd = dalloc(n);
    for (size_t i = 0; i < n; i++) hd[i] = d_gelu(gate[i]) * up[i];
    check_fwd("geglu_combine vs double", h, hd, n);

    cpu_ffn_geglu_backward(dg, du, w, gate, up, n);
    swi_ctx c = {to_double(gate, n), to_double(up, n), w, n};
    double *ng = fd_grad(c.gate, n, geglu_loss, &c);
    double *nu = fd_grad(c.up, n, geglu_loss, &c);
    check_grad("ffn_geglu_backward grad_gate", dg, ng, n);
    check_grad("ffn_geglu_backward grad_up", du, nu, n);
    free(gate); free(up); free(w); free(h); free(dg); free(du); free(hd);
    free(c.gate); free(c.up); free(ng); free(nu);
}

// scale_inplace: one f32 product per element, exactly as x * s in C
static void test_scale_inplace(void) {
    const size_t n = 37;
    float *x = frandom(n, -5, 5), *y = falloc(n);
    memcpy(y, x, n * 4);
    cpu_scale_inplace(y, n, 33.941125f);
    int same = 1;
    for (size_t i = 0; i < n; i++) same &= y[i] == x[i] * 33.941125f;
    CHECK(same, "scale_inplace is not x * s");
    free(x); free(y);
}

// ---------------------------------------------------------------- cross entropy

// Per-row loss of docs/kernels.md#cross_entropy in double; 0 for an ignored row.
static double d_ce_row(const double *l, uint32_t t, uint32_t V, double a, double b) {
    if (t >= V) return 0;
    double mx = -INFINITY, sum = 0, sl = 0;
    for (uint32_t v = 0; v < V; v++) mx = fmax(mx, l[v]);
    for (uint32_t v = 0; v < V; v++) { sum += exp(l[v] - mx); sl += l[v]; }
    double lse = mx + log(fmax(sum, 1e-30));
    return lse - (1 - a) * l[t] - a * sl / V + b * lse * lse;
}

typedef struct { double *l; const uint32_t *t; uint32_t R, V; double a, b, inv_norm; } ce_ctx;
static double ce_loss(void *p) {
    ce_ctx *c = p;
    double s = 0;
    for (uint32_t r = 0; r < c->R; r++) s += d_ce_row(c->l + (size_t)r * c->V, c->t[r], c->V, c->a, c->b);
    return s * c->inv_norm;
}

// Runs cpu_cross_entropy on random logits and checks losses against the double loss and the
// in-place dlogits against d(Σ losses · inv_norm)/dlogits.
static void ce_case(const char *name, uint32_t R, uint32_t V, const uint32_t *targets, float alpha,
                    float beta, float lo, float hi) {
    size_t RV = (size_t)R * V;
    float *logits = frandom(RV, lo, hi), *losses = falloc(R);
    uint32_t valid = 0;
    for (uint32_t r = 0; r < R; r++) valid += targets[r] < V;
    float inv_norm = valid ? 1.0f / valid : 0.0f;
    ce_ctx c = {to_double(logits, RV), targets, R, V, alpha, beta, inv_norm};
    double *lref = dalloc(R);
    for (uint32_t r = 0; r < R; r++) lref[r] = d_ce_row(c.l + (size_t)r * V, targets[r], V, alpha, beta);
    cpu_cross_entropy(logits, losses, targets, NULL, R, V, alpha, beta, inv_norm);
    char what[160];
    snprintf(what, sizeof what, "cross_entropy %s: losses vs double", name);
    check_fwd(what, losses, lref, R);
    double *num = fd_grad(c.l, RV, ce_loss, &c);
    snprintf(what, sizeof what, "cross_entropy %s: dlogits vs finite differences", name);
    check_grad(what, logits, num, RV);
    free(logits); free(losses); free(c.l); free(lref); free(num);
}

static void test_cross_entropy_grad(void) {
    // Two ignored rows: target == V and the u32 maximum (padding).
    const uint32_t t5[] = {3, 7, 0, 6, 0xffffffffu};
    ce_case("alpha=0.1 beta=0.01 V=7", 5, 7, t5, 0.1f, 0.01f, -3, 3);
    ce_case("alpha=0 beta=0 V=7", 5, 7, t5, 0.0f, 0.0f, -3, 3);
    ce_case("default beta V=7, large logits", 5, 7, t5, 0.0f, 1e-4f, -40, 40);
    uint32_t t3[3] = {299, 300, 17};
    ce_case("alpha=0.05 beta=1e-3 V=300 (not a multiple of 256)", 3, 300, t3, 0.05f, 1e-3f, -4, 4);
}

// ---------------------------------------------------------------- embedding

typedef struct { double *wte, *wpe; const int32_t *tok; const float *w; uint32_t B, T, C; } emb_ctx;
static double emb_loss(void *p) {
    emb_ctx *c = p;
    double s = 0;
    for (uint32_t b = 0; b < c->B; b++)
        for (uint32_t t = 0; t < c->T; t++)
            for (uint32_t ch = 0; ch < c->C; ch++) {
                size_t bt = (size_t)b * c->T + t;
                s += (c->wte[(size_t)c->tok[bt] * c->C + ch] + c->wpe[(size_t)t * c->C + ch]) * c->w[bt * c->C + ch];
            }
    return s;
}

static void test_embedding_grad(void) {
    const uint32_t B = 2, T = 3, C = 4, V = 5;
    const int32_t tok[] = {1, 4, 1, 0, 1, 3};  // repeats, and token 2 unused
    float *wte = frandom(V * C, -1, 1), *wpe = frandom(T * C, -1, 1), *w = frandom(B * T * C, -1, 1);
    float *out = falloc(B * T * C);
    cpu_embedding_forward(out, tok, wte, wpe, B, T, C, V);
    emb_ctx c = {to_double(wte, V * C), to_double(wpe, T * C), tok, w, B, T, C};
    double *od = dalloc(B * T * C);
    for (uint32_t bt = 0; bt < B * T; bt++)
        for (uint32_t ch = 0; ch < C; ch++) od[bt * C + ch] = c.wte[tok[bt] * C + ch] + c.wpe[(bt % T) * C + ch];
    check_fwd("embedding_forward vs double", out, od, B * T * C);

    // Gradients accumulate: start from known values and subtract them afterwards.
    float *dwte = frandom(V * C, -1, 1), *dwpe = frandom(T * C, -1, 1);
    float *dwte0 = malloc(V * C * sizeof(float)), *dwpe0 = malloc(T * C * sizeof(float));
    memcpy(dwte0, dwte, V * C * sizeof(float));
    memcpy(dwpe0, dwpe, T * C * sizeof(float));
    cpu_embedding_backward(dwte, dwpe, w, tok, B, T, C, V);
    for (uint32_t i = 0; i < V * C; i++) dwte[i] -= dwte0[i];
    for (uint32_t i = 0; i < T * C; i++) dwpe[i] -= dwpe0[i];
    double *nwte = fd_grad(c.wte, V * C, emb_loss, &c), *nwpe = fd_grad(c.wpe, T * C, emb_loss, &c);
    check_grad("embedding_backward dwte (+=)", dwte, nwte, V * C);
    check_grad("embedding_backward dwpe (+=)", dwpe, nwpe, T * C);
    free(wte); free(wpe); free(w); free(out); free(od); free(c.wte); free(c.wpe);
    free(dwte); free(dwpe); free(dwte0); free(dwpe0); free(nwte); free(nwpe);
}

// ---------------------------------------------------------------- layernorm

static void d_layernorm(double *out, const double *x, const double *wt, const double *bs, uint32_t N, uint32_t C) {
    for (uint32_t n = 0; n < N; n++) {
        const double *xr = x + (size_t)n * C;
        double m = 0, v = 0;
        for (uint32_t c = 0; c < C; c++) m += xr[c];
        m /= C;
        for (uint32_t c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
        v /= C;
        double rs = 1 / sqrt(v + 1e-5);
        for (uint32_t c = 0; c < C; c++) out[(size_t)n * C + c] = (xr[c] - m) * rs * wt[c] + bs[c];
    }
}
typedef struct { double *x, *wt, *bs, *out; const float *w; uint32_t N, C; } ln_ctx;
static double ln_loss(void *p) {
    ln_ctx *c = p;
    d_layernorm(c->out, c->x, c->wt, c->bs, c->N, c->C);
    return dot_w(c->out, c->w, (size_t)c->N * c->C);
}

static void test_layernorm_grad(void) {
    const uint32_t N = 3, C = 8;
    float *x = frandom(N * C, -2, 2), *wt = frandom(C, 0.5f, 1.5f), *bs = frandom(C, -0.5f, 0.5f);
    float *w = frandom(N * C, -1, 1);
    x[C] = 0.3f;  // one row of small spread, where eps matters most
    for (uint32_t c = 1; c < C; c++) x[C + c] = 0.3f + 0.01f * c;
    float *out = falloc(N * C), *mean = falloc(N), *rstd = falloc(N);
    cpu_layernorm_forward(out, mean, rstd, x, wt, bs, N, C);
    ln_ctx c = {to_double(x, N * C), to_double(wt, C), to_double(bs, C), dalloc(N * C), w, N, C};
    d_layernorm(c.out, c.x, c.wt, c.bs, N, C);
    check_fwd("layernorm_forward vs double", out, c.out, N * C);

    float *dx = frandom(N * C, -1, 1), *dwt = frandom(C, -1, 1), *dbs = frandom(C, -1, 1);
    float *dx0 = malloc(N * C * 4), *dwt0 = malloc(C * 4), *dbs0 = malloc(C * 4);
    memcpy(dx0, dx, N * C * 4); memcpy(dwt0, dwt, C * 4); memcpy(dbs0, dbs, C * 4);
    cpu_layernorm_backward(dx, dwt, dbs, w, x, wt, mean, rstd, N, C);
    for (uint32_t i = 0; i < N * C; i++) dx[i] -= dx0[i];
    for (uint32_t i = 0; i < C; i++) { dwt[i] -= dwt0[i]; dbs[i] -= dbs0[i]; }
    double *nx = fd_grad(c.x, N * C, ln_loss, &c), *nw = fd_grad(c.wt, C, ln_loss, &c), *nb = fd_grad(c.bs, C, ln_loss, &c);
    check_grad("layernorm_backward dinp (+=)", dx, nx, N * C);
    check_grad("layernorm_backward dweight (+=)", dwt, nw, C);
    check_grad("layernorm_backward dbias (+=)", dbs, nb, C);
    free(x); free(wt); free(bs); free(w); free(out); free(mean); free(rstd);
    free(c.x); free(c.wt); free(c.bs); free(c.out); free(dx); free(dwt); free(dbs);
    free(dx0); free(dwt0); free(dbs0); free(nx); free(nw); free(nb);
}

// ---------------------------------------------------------------- rmsnorm

// LLaMA's RMSNorm written directly in double: y = x / sqrt(mean(x²) + eps) · w
static void d_rmsnorm(double *out, const double *x, const double *wt, uint32_t N, uint32_t C, double eps) {
    for (uint32_t n = 0; n < N; n++) {
        const double *xr = x + (size_t)n * C;
        double ms = 0;
        for (uint32_t c = 0; c < C; c++) ms += xr[c] * xr[c];
        double rs = 1 / sqrt(ms / C + eps);
        for (uint32_t c = 0; c < C; c++) out[(size_t)n * C + c] = xr[c] * rs * wt[c];
    }
}
typedef struct { double *x, *wt, *out; const float *w; uint32_t N, C; double eps; } rms_ctx;
static double rms_loss(void *p) {
    rms_ctx *c = p;
    d_rmsnorm(c->out, c->x, c->wt, c->N, c->C, c->eps);
    return dot_w(c->out, c->w, (size_t)c->N * c->C);
}

static void test_rmsnorm_grad(void) {
    const uint32_t N = 3, C = 8;
    const float eps = 1e-2f;  // large, so that a wrong eps placement shows in every row
    float *x = frandom(N * C, -2, 2), *wt = frandom(C, 0.5f, 1.5f), *w = frandom(N * C, -1, 1);
    for (uint32_t c = 0; c < C; c++) x[C + c] = 0.01f * (float)c;  // a row of small values, where eps matters
    float *out = falloc(N * C), *rstd = falloc(N);
    cpu_rmsnorm_forward(out, rstd, x, wt, N, C, eps);
    rms_ctx c = {to_double(x, N * C), to_double(wt, C), dalloc(N * C), w, N, C, eps};
    d_rmsnorm(c.out, c.x, c.wt, N, C, eps);
    check_fwd("rmsnorm_forward vs double", out, c.out, N * C);

    float *dx = frandom(N * C, -1, 1), *dwt = frandom(C, -1, 1);
    float *dx0 = malloc(N * C * 4), *dwt0 = malloc(C * 4);
    memcpy(dx0, dx, N * C * 4); memcpy(dwt0, dwt, C * 4);
    cpu_rmsnorm_backward(dx, dwt, w, x, wt, rstd, N, C);
    for (uint32_t i = 0; i < N * C; i++) dx[i] -= dx0[i];
    for (uint32_t i = 0; i < C; i++) dwt[i] -= dwt0[i];
    double *nx = fd_grad(c.x, N * C, rms_loss, &c), *nw = fd_grad(c.wt, C, rms_loss, &c);
    check_grad("rmsnorm_backward dinp (+=)", dx, nx, N * C);
    check_grad("rmsnorm_backward dweight (+=)", dwt, nw, C);
    free(x); free(wt); free(w); free(out); free(rstd); free(c.x); free(c.wt); free(c.out);
    free(dx); free(dwt); free(dx0); free(dwt0); free(nx); free(nw);
}

// ---------------------------------------------------------------- qk_norm

// Per-head RMSNorm of the q and k heads of qkv in double: each head row of HS values
// y = x / sqrt(mean(x²) + eps) · (w_offset + w), q heads with wq, k heads with wk, v copied.
static void d_qk_norm(double *out, const double *x, const double *wq, const double *wk, uint32_t N, uint32_t NH,
                      uint32_t NKV, uint32_t HS, double eps, double w_offset) {
    const uint32_t H = NH + 2 * NKV;
    for (uint32_t r = 0; r < N * H; r++) {
        const uint32_t h = r % H;
        const double *xr = x + (size_t)r * HS;
        double *o = out + (size_t)r * HS;
        if (h >= NH + NKV) {
            for (uint32_t c = 0; c < HS; c++) o[c] = xr[c];
            continue;
        }
        const double *w = h < NH ? wq : wk;
        double ms = 0;
        for (uint32_t c = 0; c < HS; c++) ms += xr[c] * xr[c];
        double rs = 1 / sqrt(ms / HS + eps);
        for (uint32_t c = 0; c < HS; c++) o[c] = xr[c] * rs * (w_offset + w[c]);
    }
}
typedef struct { double *x, *wq, *wk, *out; const float *w; uint32_t N, NH, NKV, HS; double eps, wo; } qkn_ctx;
static double qkn_loss(void *p) {
    qkn_ctx *c = p;
    d_qk_norm(c->out, c->x, c->wq, c->wk, c->N, c->NH, c->NKV, c->HS, c->eps, c->wo);
    return dot_w(c->out, c->w, (size_t)c->N * (c->NH + 2 * c->NKV) * c->HS);
}

// grouped heads (NH = 4 q heads, NKV = 2); both the plain weight (Qwen3) and 1 + w (Gemma-3)
static void test_qk_norm_grad(float w_offset) {
    const uint32_t B = 2, T = 2, N = B * T, NH = 4, NKV = 2, HS = 6, n = N * (NH + 2 * NKV) * HS;
    const float eps = 1e-2f;  // large, so that a wrong eps placement shows
    float *x = frandom(n, -2, 2), *wq = frandom(HS, 0.5f, 1.5f), *wk = frandom(HS, -0.5f, 0.5f), *w = frandom(n, -1, 1);
    for (uint32_t c = 0; c < HS; c++) x[HS + c] = 0.01f * (float)c;  // a q head of small values, where eps matters
    float *out = falloc(n), *rstd = falloc(N * (NH + NKV));
    cpu_qk_norm_forward(out, rstd, x, wq, wk, B, T, NH, NKV, HS, eps, w_offset);
    qkn_ctx c = {to_double(x, n), to_double(wq, HS), to_double(wk, HS), dalloc(n), w, N, NH, NKV, HS, eps, w_offset};
    d_qk_norm(c.out, c.x, c.wq, c.wk, N, NH, NKV, HS, eps, w_offset);
    check_fwd(w_offset ? "qk_norm_forward (1 + w) vs double" : "qk_norm_forward vs double", out, c.out, n);

    float *dx = frandom(n, -1, 1), *dwq = frandom(HS, -1, 1), *dwk = frandom(HS, -1, 1);
    float *dwq0 = malloc(HS * 4), *dwk0 = malloc(HS * 4);
    memcpy(dwq0, dwq, HS * 4); memcpy(dwk0, dwk, HS * 4);
    cpu_qk_norm_backward(dx, dwq, dwk, w, x, wq, wk, rstd, B, T, NH, NKV, HS, w_offset);  // dqkv: overwritten
    for (uint32_t i = 0; i < HS; i++) { dwq[i] -= dwq0[i]; dwk[i] -= dwk0[i]; }
    double *nx = fd_grad(c.x, n, qkn_loss, &c), *nq = fd_grad(c.wq, HS, qkn_loss, &c),
           *nk = fd_grad(c.wk, HS, qkn_loss, &c);
    check_grad("qk_norm_backward dqkv", dx, nx, n);
    check_grad("qk_norm_backward dq_weight (+=)", dwq, nq, HS);
    check_grad("qk_norm_backward dk_weight (+=)", dwk, nk, HS);
    free(x); free(wq); free(wk); free(w); free(out); free(rstd); free(c.x); free(c.wq); free(c.wk); free(c.out);
    free(dx); free(dwq); free(dwk); free(dwq0); free(dwk0); free(nx); free(nq); free(nk);
}

// ---------------------------------------------------------------- matmul

static void d_matmul(double *out, const double *x, const double *W, const double *b, uint32_t N, uint32_t C, uint32_t OC) {
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t o = 0; o < OC; o++) {
            double s = b ? b[o] : 0;
            for (uint32_t c = 0; c < C; c++) s += x[(size_t)n * C + c] * W[(size_t)o * C + c];
            out[(size_t)n * OC + o] = s;
        }
}
typedef struct { double *x, *W, *b, *out; const float *w; uint32_t N, C, OC; } mm_ctx;
static double mm_loss(void *p) {
    mm_ctx *c = p;
    d_matmul(c->out, c->x, c->W, c->b, c->N, c->C, c->OC);
    return dot_w(c->out, c->w, (size_t)c->N * c->OC);
}

static void test_matmul_grad(void) {
    const uint32_t N = 3, C = 5, OC = 4;
    float *x = frandom(N * C, -1, 1), *W = frandom(OC * C, -1, 1), *b = frandom(OC, -1, 1);
    float *w = frandom(N * OC, -1, 1), *out = falloc(N * OC);
    mm_ctx c = {to_double(x, N * C), to_double(W, OC * C), to_double(b, OC), dalloc(N * OC), w, N, C, OC};
    cpu_matmul(out, x, W, b, N, C, OC);
    d_matmul(c.out, c.x, c.W, c.b, N, C, OC);
    check_fwd("matmul (bias) vs double", out, c.out, N * OC);
    for (uint32_t i = 0; i < N * OC; i++) out[i] = NAN;  // must be overwritten, not accumulated
    cpu_matmul(out, x, W, NULL, N, C, OC);
    d_matmul(c.out, c.x, c.W, NULL, N, C, OC);
    check_fwd("matmul (no bias) vs double", out, c.out, N * OC);

    float *dx = falloc(N * C);
    for (uint32_t i = 0; i < N * C; i++) dx[i] = NAN;  // matmul_t overwrites
    cpu_matmul_t(dx, w, W, N, C, OC);
    double *nx = fd_grad(c.x, N * C, mm_loss, &c);
    check_grad("matmul_t dinp", dx, nx, N * C);

    float *dW = frandom(OC * C, -1, 1), *db = frandom(OC, -1, 1);
    float *dW0 = malloc(OC * C * 4), *db0 = malloc(OC * 4);
    memcpy(dW0, dW, OC * C * 4); memcpy(db0, db, OC * 4);
    cpu_matmul_at(dW, db, w, x, N, C, OC);
    for (uint32_t i = 0; i < OC * C; i++) dW[i] -= dW0[i];
    for (uint32_t i = 0; i < OC; i++) db[i] -= db0[i];
    double *nW = fd_grad(c.W, OC * C, mm_loss, &c), *nb = fd_grad(c.b, OC, mm_loss, &c);
    check_grad("matmul_at dweight (+=)", dW, nW, OC * C);
    check_grad("matmul_at dbias (+=)", db, nb, OC);
    // Without a bias gradient the weight gradient is unchanged.
    memcpy(dW, dW0, OC * C * 4);
    cpu_matmul_at(dW, NULL, w, x, N, C, OC);
    for (uint32_t i = 0; i < OC * C; i++) dW[i] -= dW0[i];
    check_grad("matmul_at dweight, no dbias", dW, nW, OC * C);
    free(x); free(W); free(b); free(w); free(out); free(c.x); free(c.W); free(c.b); free(c.out);
    free(dx); free(nx); free(dW); free(db); free(dW0); free(db0); free(nW); free(nb);
}

// The GEMMs split into per-thread blocks above a size threshold, by rows or by columns of the
// output depending on its shape; these sizes take every split path with block edges that are
// not multiples of 16. Reference: the double GEMM. The sums run over <= 1000 products of O(1)
// values, so f32 accumulation error is ~1e-5 absolute: atol 1e-4 + rtol 1e-4.
static void matmul_big_case(uint32_t N, uint32_t C, uint32_t OC) {
    float *x = frandom((size_t)N * C, -1, 1), *W = frandom((size_t)OC * C, -1, 1), *b = frandom(OC, -1, 1);
    float *g = frandom((size_t)N * OC, -1, 1), *out = falloc((size_t)N * OC), *dx = falloc((size_t)N * C);
    float *dW = frandom((size_t)OC * C, -1, 1), *db = frandom(OC, -1, 1);
    double *xd = to_double(x, (size_t)N * C), *Wd = to_double(W, (size_t)OC * C), *bd = to_double(b, OC);
    double *ref = dalloc((size_t)N * OC), *rdx = dalloc((size_t)N * C), *rdW = dalloc((size_t)OC * C), *rdb = dalloc(OC);
    d_matmul(ref, xd, Wd, bd, N, C, OC);
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t c = 0; c < C; c++) {
            double s = 0;
            for (uint32_t o = 0; o < OC; o++) s += (double)g[(size_t)n * OC + o] * W[(size_t)o * C + c];
            rdx[(size_t)n * C + c] = s;
        }
    for (uint32_t o = 0; o < OC; o++) {
        double sb = db[o];
        for (uint32_t n = 0; n < N; n++) sb += g[(size_t)n * OC + o];
        rdb[o] = sb;
        for (uint32_t c = 0; c < C; c++) {
            double s = dW[(size_t)o * C + c];
            for (uint32_t n = 0; n < N; n++) s += (double)g[(size_t)n * OC + o] * x[(size_t)n * C + c];
            rdW[(size_t)o * C + c] = s;
        }
    }
    cpu_matmul(out, x, W, b, N, C, OC);
    cpu_matmul_t(dx, g, W, N, C, OC);
    cpu_matmul_at(dW, db, g, x, N, C, OC);
    char what[96];
    float *f;
    snprintf(what, sizeof what, "matmul N=%u C=%u OC=%u", N, C, OC);
    CHECK_CLOSE(what, out, (f = to_float(ref, (size_t)N * OC)), (size_t)N * OC, 1e-4, 1e-4); free(f);
    snprintf(what, sizeof what, "matmul_t N=%u C=%u OC=%u", N, C, OC);
    CHECK_CLOSE(what, dx, (f = to_float(rdx, (size_t)N * C)), (size_t)N * C, 1e-4, 1e-4); free(f);
    snprintf(what, sizeof what, "matmul_at dweight N=%u C=%u OC=%u", N, C, OC);
    CHECK_CLOSE(what, dW, (f = to_float(rdW, (size_t)OC * C)), (size_t)OC * C, 1e-4, 1e-4); free(f);
    snprintf(what, sizeof what, "matmul_at dbias N=%u C=%u OC=%u", N, C, OC);
    CHECK_CLOSE(what, db, (f = to_float(rdb, OC)), OC, 1e-4, 1e-4); free(f);
    free(x); free(W); free(b); free(g); free(out); free(dx); free(dW); free(db);
    free(xd); free(Wd); free(bd); free(ref); free(rdx); free(rdW); free(rdb);
}

static void test_matmul_big(void) {
    matmul_big_case(67, 45, 130);   // more output columns than rows; dweight split by rows
    matmul_big_case(301, 37, 29);   // split by rows everywhere except dweight (C > OC)
    matmul_big_case(3, 1000, 200);  // a few rows: split by columns (the sampling lm_head shape)
}

// ---------------------------------------------------------------- attention

// out[B,T,NH·HS] and lse[B,NH,T] of causal attention with grouped kv heads (qkv rows q | k | v of
// NH, NKV, NKV heads; query head h reads kv head h / (NH/NKV)), straight from the definition, in double.
// Dropout p > 0: probability P[b,h,t,j] times m = 1/(1-p) or 0, the mask drawn by the shared hash
// (backend/dropout.h) of (seed, (b·NH + h)·T + t, j); lse that of the undropped softmax.
// The mask: query t attends keys j with lo <= j <= t, lo = max(doc[b·T + t], t - window + 1),
// written here as the definition states it (doc NULL: 0; window 0: none).
static uint32_t g_att_window = 0;
static const uint32_t *g_att_doc = NULL;
static int d_attends(uint32_t b, uint32_t T, uint32_t t, uint32_t j) {
    if (j > t) return 0;
    if (g_att_doc && j < g_att_doc[(size_t)b * T + t]) return 0;
    if (g_att_window && (int64_t)j < (int64_t)t - (int64_t)g_att_window + 1) return 0;
    return 1;
}
static void d_attention(double *out, double *lse, const double *qkv, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV,
                        uint32_t HS, float p, uint32_t seed) {
    size_t C = (size_t)NH * HS, W = C + 2 * (size_t)NKV * HS;
    uint32_t thr = wgt_dropout_threshold(p);
    double keep_scale = 1 / (1 - (double)p);
    double scale = 1 / sqrt((double)HS), *s = dalloc(T), *m = dalloc(T);
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t h = 0; h < NH; h++)
            for (uint32_t t = 0; t < T; t++) {
                size_t g = h / (NH / NKV), kc = C + g * HS, vc = C + (NKV + g) * HS;
                const double *q = qkv + ((size_t)b * T + t) * W + h * HS;
                double mx = -INFINITY, sum = 0;
                for (uint32_t j = 0; j <= t; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * W + kc;
                    s[j] = 0;
                    if (!d_attends(b, T, t, j)) continue;
                    for (uint32_t d = 0; d < HS; d++) s[j] += q[d] * k[d];
                    s[j] *= scale;
                    mx = fmax(mx, s[j]);
                }
                for (uint32_t j = 0; j <= t; j++) sum += d_attends(b, T, t, j) ? exp(s[j] - mx) : 0;
                if (lse) lse[((size_t)b * NH + h) * T + t] = mx + log(sum);
                uint32_t key = wgt_dropout_key(seed, (b * NH + h) * T + t, WGT_DROPOUT_ATTN);
                for (uint32_t j = 0; j <= t; j++) m[j] = !thr ? 1 : wgt_dropout_bits(key, j) >= thr ? keep_scale : 0;
                for (uint32_t d = 0; d < HS; d++) {
                    double o = 0;
                    for (uint32_t j = 0; j <= t; j++)
                        if (d_attends(b, T, t, j)) o += exp(s[j] - mx) / sum * m[j] * qkv[((size_t)b * T + j) * W + vc + d];
                    out[((size_t)b * T + t) * C + h * HS + d] = o;
                }
            }
    free(s);
    free(m);
}
typedef struct { double *qkv, *out; const float *w; uint32_t B, T, NH, NKV, HS; float p; uint32_t seed; } att_ctx;
static double att_loss(void *p) {
    att_ctx *c = p;
    d_attention(c->out, NULL, c->qkv, c->B, c->T, c->NH, c->NKV, c->HS, c->p, c->seed);
    return dot_w(c->out, c->w, (size_t)c->B * c->T * c->NH * c->HS);
}

// p > 0: dropout on the probabilities with the given seed (the mask is fixed, so L stays smooth)
static void attention_case_p(uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, float spread, float p,
                             uint32_t seed) {
    size_t BT = (size_t)B * T, C = (size_t)NH * HS, nqkv = BT * (C + 2 * (size_t)NKV * HS);
    float *qkv = frandom(nqkv, -spread, spread), *w = frandom(BT * C, -1, 1);
    float *out = falloc(BT * C), *lse = falloc(BT * NH), *dqkv = falloc(nqkv);
    cpu_attention_forward(out, lse, qkv, g_att_doc, B, T, NH, NKV, HS, p, seed, g_att_window);
    att_ctx c = {to_double(qkv, nqkv), dalloc(BT * C), w, B, T, NH, NKV, HS, p, seed};
    double *lsed = dalloc(BT * NH);
    d_attention(c.out, lsed, c.qkv, B, T, NH, NKV, HS, p, seed);
    char what[128], tag[96];
    snprintf(tag, sizeof tag, "B=%u T=%u NH=%u NKV=%u HS=%u p=%g seed=%u%s window=%u", B, T, NH, NKV, HS, p, seed,
             g_att_doc ? " packed" : "", g_att_window);
    snprintf(what, sizeof what, "attention_forward out %s", tag);
    check_fwd(what, out, c.out, BT * C);
    snprintf(what, sizeof what, "attention_forward lse %s", tag);
    check_fwd(what, lse, lsed, BT * NH);
    for (size_t i = 0; i < nqkv; i++) dqkv[i] = NAN;  // overwrites every element
    cpu_attention_backward(dqkv, w, qkv, out, lse, g_att_doc, B, T, NH, NKV, HS, p, seed, g_att_window);
    double *num = fd_grad(c.qkv, nqkv, att_loss, &c);
    snprintf(what, sizeof what, "attention_backward dqkv %s", tag);
    check_grad(what, dqkv, num, nqkv);
    free(qkv); free(w); free(out); free(lse); free(dqkv); free(c.qkv); free(c.out); free(lsed); free(num);
}

static void attention_case(uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, float spread) {
    attention_case_p(B, T, NH, NKV, HS, spread, 0.0f, 0);
}

static void test_attention_grad(void) {
    attention_case(2, 5, 2, 2, 4, 1.5f);
    attention_case(1, 7, 3, 3, 4, 3.0f);  // peakier softmax, odd head count
    attention_case(1, 1, 1, 1, 4, 1.0f);  // T = 1: out = v, dq = dk = 0
    // grouped-query: dK, dV sum over the query heads of a group
    attention_case(2, 6, 4, 2, 4, 2.0f);
    attention_case(1, 7, 6, 2, 3, 2.0f);  // 3 query heads a group, odd head size
    attention_case(1, 5, 4, 1, 2, 1.5f);  // one kv head (multi-query)
    // dropout on the probabilities: dP = dO·Vᵀ ∘ m, dS = P ∘ (dP - D) with D from the dropped out
    attention_case_p(2, 6, 2, 2, 4, 1.5f, 0.3f, 11);
    attention_case_p(1, 9, 4, 2, 3, 2.0f, 0.5f, 3000000000u);  // grouped, odd head size
    attention_case_p(1, 7, 3, 1, 4, 3.0f, 0.1f, 0);            // one kv head, peaky
    // the mask: packed examples (doc_start), a sliding window, both; with grouped heads and dropout
    static const uint32_t doc[2 * 9] = {0, 0, 0, 3, 3, 5, 5, 5, 5,   // examples [0,3) [3,5) [5,9)
                                        0, 1, 1, 1, 1, 1, 6, 7, 7};  // [0] [1,6) [6] [7,9)
    g_att_doc = doc;
    attention_case(2, 9, 2, 2, 4, 1.5f);
    attention_case_p(2, 9, 4, 2, 3, 2.0f, 0.3f, 5);
    g_att_window = 3;
    attention_case(2, 9, 2, 1, 4, 1.5f);
    g_att_doc = NULL;
    attention_case(2, 9, 2, 2, 4, 1.5f);
    g_att_window = 1;  // each token attends itself only: out = v
    attention_case(1, 5, 2, 2, 4, 1.5f);
    g_att_window = 0;
    // T = 1 with real widths: out = v, so dq and dk are exactly 0 (dO·v and dO·out are one sum)
    const uint32_t NH = 4, NKV = 2, HS = 37, W = (NH + 2 * NKV) * HS, B = 3;
    float *qkv = malloc(sizeof(float) * B * W), *o = malloc(sizeof(float) * B * NH * HS), *l = malloc(sizeof(float) * B * NH);
    float *dout = malloc(sizeof(float) * B * NH * HS), *dqkv = malloc(sizeof(float) * B * W);
    uint64_t r = 99;
    for (uint32_t i = 0; i < B * W; i++) { r = r * 6364136223846793005ull + 1442695040888963407ull; qkv[i] = (float)((r >> 40) % 2001) / 1000.0f - 1.0f; }
    for (uint32_t i = 0; i < B * NH * HS; i++) { r = r * 6364136223846793005ull + 1442695040888963407ull; dout[i] = (float)((r >> 40) % 2001) / 500.0f - 2.0f; }
    cpu_attention_forward(o, l, qkv, NULL, B, 1, NH, NKV, HS, 0.0f, 0, 0);
    cpu_attention_backward(dqkv, dout, qkv, o, l, NULL, B, 1, NH, NKV, HS, 0.0f, 0, 0);
    int zero = 1;
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t c = 0; c < (NH + NKV) * HS; c++) zero &= dqkv[b * W + c] == 0.0f;
    CHECK(zero, "attention backward at T = 1: dq and dk must be exactly 0");
    free(qkv), free(o), free(l), free(dout), free(dqkv);
}

// ---------------------------------------------------------------- residual

static void test_residual(void) {
    const size_t n = 37;
    float *a = frandom(n, -1, 1), *b = frandom(n, -1, 1), *out = falloc(n), *ref = falloc(n);
    for (size_t i = 0; i < n; i++) ref[i] = a[i] + b[i];
    cpu_residual_forward(out, a, b, n);
    CHECK_CLOSE("residual_forward", out, ref, n, 0, 0);
    cpu_residual_forward(a, a, b, n);  // out aliasing a, as the model uses it
    CHECK_CLOSE("residual_forward out == a", a, ref, n, 0, 0);
    // The residual's backward is the identity to both inputs: add_inplace accumulates it.
    for (size_t i = 0; i < n; i++) ref[i] = out[i] + b[i];
    cpu_add_inplace(out, b, n);
    CHECK_CLOSE("add_inplace", out, ref, n, 0, 0);
    free(a); free(b); free(out); free(ref);
}

// ---------------------------------------------------------------- dropout

typedef struct { double *x; const float *w, *mult; size_t n; } drop_ctx;
static double drop_loss(void *p) {  // L = Σ m_i·x_i·w_i with the mask's multipliers m fixed
    drop_ctx *c = p;
    double s = 0;
    for (size_t i = 0; i < c->n; i++) s += (double)c->mult[i] * c->x[i] * c->w[i];
    return s;
}

// dropout_forward against its definition (the mask from backend/dropout.h, bit for bit), and
// dropout_backward against finite differences of L = Σ out·w
static void test_dropout_grad(void) {
    const size_t n = 301;
    const float ps[] = {0.0f, 0.25f, 0.6f};
    for (size_t k = 0; k < 3; k++) {
        float p = ps[k];
        uint32_t seed = 17 + (uint32_t)k, stream = 5;
        float *x = frandom(n, -2, 2), *w = frandom(n, -1, 1), *out = falloc(n), *dx = falloc(n), *ref = falloc(n);
        float *mult = falloc(n);
        uint32_t thr = wgt_dropout_threshold(p), key = wgt_dropout_key(seed, stream, 0);
        for (size_t i = 0; i < n; i++) {
            mult[i] = wgt_dropout_bits(key, (uint32_t)i) >= thr ? 1.0f / (1.0f - p) : 0.0f;
            ref[i] = mult[i] ? x[i] * mult[i] : 0.0f;
        }
        cpu_dropout_forward(out, x, n, p, seed, stream);
        char what[96];
        snprintf(what, sizeof what, "dropout_forward p=%g", p);
        CHECK(!memcmp(out, ref, n * 4), "%s: differs from its definition", what);
        cpu_dropout_backward(dx, w, n, p, seed, stream);
        drop_ctx c = {to_double(x, n), w, mult, n};
        double *num = fd_grad(c.x, n, drop_loss, &c);
        snprintf(what, sizeof what, "dropout_backward p=%g", p);
        check_grad(what, dx, num, n);
        free(x); free(w); free(out); free(dx); free(ref); free(mult); free(c.x); free(num);
    }
}

// ---------------------------------------------------------------- forward edge cases

static int is_neg_zero_or_zero(float x) { return x == 0.0f; }

static void test_gelu_edges(void) {
    const float big[] = {80, 100, 1000, 1e4f, 3e38f};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        float x[2] = {big[i], -big[i]};
        cpu_gelu_inplace(x, 2);
        CHECK(x[0] == big[i], "gelu(%g) = %g, want x itself", big[i], x[0]);
        CHECK(is_neg_zero_or_zero(x[1]), "gelu(%g) = %g, want 0", -big[i], x[1]);
        float g[2] = {1, 1}, pre[2] = {big[i], -big[i]}, gp[2];
        cpu_ffn_gelu_backward(gp, g, pre, 2);
        CHECK(gp[0] == 1.0f && gp[1] == 0.0f, "gelu'(±%g) = %g, %g, want 1, 0", big[i], gp[0], gp[1]);
    }
    float x[3] = {NAN, INFINITY, -INFINITY};
    cpu_gelu_inplace(x, 3);
    CHECK(isnan(x[0]), "gelu(NaN) = %g: a NaN input must stay visible in the forward", x[0]);
    CHECK(x[1] == INFINITY, "gelu(+Inf) = %g", x[1]);
    // gelu(-Inf) = 0.5·(-Inf)·(1 + tanh(-big)) = -Inf·0 = NaN by the formula: not asserted,
    // only reported, since docs/numerics.md#non-finite-values does not pin it and a GPU may give 0.
    printf("note: gelu(-Inf) = %g by the literal formula\n", x[2]);
    // The backward never lets a non-finite value out.
    float pre[4] = {NAN, INFINITY, -INFINITY, 1}, g[4] = {1, 1, 1, INFINITY}, gp[4];
    cpu_ffn_gelu_backward(gp, g, pre, 4);
    for (int i = 0; i < 4; i++) CHECK(isfinite(gp[i]), "ffn_gelu_backward[%d] = %g not finite", i, gp[i]);
    CHECK(gp[0] == 0 && gp[3] == 0, "nan_guard must give 0, got %g %g", gp[0], gp[3]);
    // gelu_forward is gelu_inplace into another buffer: the same bits over a sweep of values
    // (both tails, the edges above, NaN, ±Inf), with n past the parallel threshold
    size_t n = 70001;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) a[i] = (float)((double)i - 35000.0) * 1e-3f;
    a[0] = NAN, a[1] = INFINITY, a[2] = -INFINITY, a[3] = 1e4f, a[4] = -3e38f, a[5] = -0.0f;
    cpu_gelu_forward(b, a, n);
    cpu_gelu_inplace(a, n);
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
    CHECK(diff == 0, "gelu_forward differs from gelu_inplace in %zu of %zu elements", diff, n);
    free(a);
    free(b);
}

// The libm-free helpers the CPU ops vectorize with: cpu_expf_neg (GeLU's and SwiGLU's
// e^-|z|) within 4e-7 relative and cpu_exp_d (attention)
// within 1e-15 relative of libm's exp on the ranges they serve.
static void test_fast_math(void) {
    double worst = 0, at = 0;
    for (long i = 0; i <= 2000000; i++) {
        double x = -700.0 * (double)i / 2000000.0 + (i % 3 ? 1e-3 : 0.0);
        double e = fabs(cpu_exp_d(x) - exp(x)) / exp(x);
        if (e > worst) worst = e, at = x;
    }
    CHECK(worst < 1e-15, "cpu_exp_d: relative error %.3g at %g", worst, at);
    worst = 0;
    for (long i = 0; i <= 2000000; i++) {
        float x = -87.0f * (float)i / 2000000.0f;
        double e = fabs((double)cpu_expf_neg(x) - exp((double)x)) / exp((double)x);
        if (e > worst) worst = e, at = x;
    }
    CHECK(worst < 4e-7, "cpu_expf_neg: relative error %.3g at %g", worst, at);
    CHECK(cpu_expf_neg(0.0f) == 1.0f && cpu_expf_neg(-88.0f) == 0.0f && cpu_expf_neg(-3e38f) == 0.0f &&
          cpu_expf_neg(-INFINITY) == 0.0f && isnan(cpu_expf_neg(NAN)), "cpu_expf_neg edges");
    CHECK(isnan(cpu_sigmoid(NAN)) && cpu_sigmoid(100.0f) == 1.0f && cpu_sigmoid(-100.0f) == 0.0f && cpu_sigmoid(0.0f) == 0.5f,
          "cpu_sigmoid edges: %g %g %g", cpu_sigmoid(100.0f), cpu_sigmoid(-100.0f), cpu_sigmoid(0.0f));
    CHECK(cpu_exp_d(0.0) == 1.0 && cpu_exp_d(-1e300) > 0 && cpu_exp_d(-1e300) < 1e-307 && isnan(cpu_exp_d(NAN)),
          "cpu_exp_d edges: %g %g %g", cpu_exp_d(0.0), cpu_exp_d(-1e300), cpu_exp_d(NAN));
}

// The activation ops against float64 over the whole float range (activation_f64.h: a dense sweep
// of [-20, 20], a logarithmic one to ±3e38, the edge values), each kind read from the op with the
// other operands 1: gelu_inplace, ffn_gelu_backward (gelu'), swiglu_combine (silu) and
// ffn_swiglu_backward (silu' and grad_up = nan_guard(silu)).
static void test_activation_f64(void) {
    size_t n = act_sweep_count();
    float *x = malloc(n * 4), *one = malloc(n * 4), *o[5];
    act_sweep_fill(x);
    for (size_t i = 0; i < n; i++) one[i] = 1.0f;
    for (int k = 0; k < 5; k++) o[k] = malloc(n * 4);
    memcpy(o[ACT_GELU], x, n * 4);
    cpu_gelu_inplace(o[ACT_GELU], n);
    cpu_ffn_gelu_backward(o[ACT_GELU_GRAD], one, x, n);
    cpu_swiglu_combine(o[ACT_SILU], x, one, n);
    cpu_ffn_swiglu_backward(o[ACT_SILU_GRAD], o[ACT_SILU_GUARDED], one, x, one, n);
    const char *what[5] = {"gelu_inplace", "ffn_gelu_backward", "swiglu_combine", "ffn_swiglu_backward grad_gate",
                           "ffn_swiglu_backward grad_up"};
    int verbose = getenv("WGTRAIN_TEST_VERBOSE") != NULL;
    for (int k = 0; k < 5; k++) {
        char label[96];
        snprintf(label, sizeof label, "cpu %s vs float64", what[k]);
        CHECK(act_check(label, (act_kind)k, x, o[k], n, verbose, NULL, NULL), "%s: beyond the tolerance of activation_f64.h", label);
    }
    for (int k = 0; k < 5; k++) free(o[k]);
    free(x);
    free(one);
}

static void test_swiglu_edges(void) {
    const float big[] = {80, 100, 1000, 1e4f, 3e38f};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        float gate[2] = {big[i], -big[i]}, up[2] = {1, 1}, h[2];
        cpu_swiglu_combine(h, gate, up, 2);
        CHECK(h[0] == big[i], "silu(%g) = %g, want x", big[i], h[0]);
        // silu(-80) = -80·e^-80 ≈ -1e-33: not 0, but it must be tiny and finite.
        CHECK(fabsf(h[1]) < 1e-30f, "silu(%g) = %g, want ~0", -big[i], h[1]);
        float g[2] = {1, 1}, dg[2], du[2];
        cpu_ffn_swiglu_backward(dg, du, g, gate, up, 2);
        CHECK(dg[0] == 1.0f && fabsf(dg[1]) < 1e-30f, "silu'(±%g) = %g, %g, want 1, 0", big[i], dg[0], dg[1]);
        CHECK(du[0] == big[i] && fabsf(du[1]) < 1e-30f, "grad_up at ±%g = %g, %g", big[i], du[0], du[1]);
    }
    float gate[4] = {NAN, INFINITY, -INFINITY, 3e38f}, up[4] = {1, 1, 1, 3e38f}, g[4] = {1, 1, 1, 1};
    float dg[4], du[4];
    cpu_ffn_swiglu_backward(dg, du, g, gate, up, 4);
    for (int i = 0; i < 4; i++)
        CHECK(isfinite(dg[i]) && isfinite(du[i]), "swiglu backward [%d]: %g %g not finite", i, dg[i], du[i]);
    CHECK(cpu_nan_guard(NAN) == 0 && cpu_nan_guard(-INFINITY) == 0 && cpu_nan_guard(3e38f) == 3e38f &&
          cpu_nan_guard(-1.5f) == -1.5f, "nan_guard bit test");
}

static void test_cross_entropy_edges(void) {
    // V = 1: p = 1, lse = l, so loss = β·l² and dlogits = 2β·l·inv_norm.
    {
        float l[2] = {3.0f, -2.0f}, loss[2];
        uint32_t t[2] = {0, 0};
        cpu_cross_entropy(l, loss, t, NULL, 2, 1, 0.1f, 0.01f, 0.5f);
        CHECK(fabsf(loss[0] - 0.09f) < 1e-6f && fabsf(loss[1] - 0.04f) < 1e-6f, "V=1 losses %g %g", loss[0], loss[1]);
        CHECK(fabsf(l[0] - 0.03f) < 1e-6f && fabsf(l[1] + 0.02f) < 1e-6f, "V=1 dlogits %g %g", l[0], l[1]);
    }
    // All targets ignored: zero losses and all-zero rows, whatever the logits held.
    {
        const uint32_t R = 3, V = 100;
        float *l = frandom(R * V, -50, 50), *loss = falloc(R), zero[300] = {0};
        uint32_t t[3] = {V, V + 1, 0xffffffffu};
        l[5] = NAN;
        l[150] = INFINITY;
        loss[0] = loss[1] = loss[2] = 7;
        cpu_cross_entropy(l, loss, t, NULL, R, V, 0.1f, 1e-4f, 0.0f);
        CHECK_CLOSE("all ignored: dlogits rows are 0", l, zero, R * V, 0, 0);
        CHECK_CLOSE("all ignored: losses are 0", loss, zero, R, 0, 0);
        free(l); free(loss);
    }
    // Huge logit spread stays finite; the softmax saturates to the one-hot of the maximum.
    {
        const uint32_t V = 5;
        float l[5] = {1e4f, -1e4f, 0, 3e4f, -3e4f}, loss[1];
        uint32_t t[1] = {0};
        cpu_cross_entropy(l, loss, t, NULL, 1, V, 0.0f, 0.0f, 1.0f);
        CHECK(fabsf(loss[0] - 2e4f) <= 2e4f * 1e-6f, "huge logits: loss %g, want 2e4", loss[0]);
        float want[5] = {-1, 0, 0, 1, 0};
        CHECK_CLOSE("huge logits: dlogits", l, want, V, 1e-6, 0);
    }
    // GPT-2's vocabulary, V = 50257 (not a multiple of 256): loss and gradient row sums.
    {
        const uint32_t R = 2, V = 50257;
        float *l = frandom((size_t)R * V, -5, 5), *loss = falloc(R);
        uint32_t t[2] = {50256, 12345};
        double *ld = to_double(l, (size_t)R * V), lref[2];
        for (uint32_t r = 0; r < R; r++) lref[r] = d_ce_row(ld + (size_t)r * V, t[r], V, 0.1, 1e-4);
        cpu_cross_entropy(l, loss, t, NULL, R, V, 0.1f, 1e-4f, 0.5f);
        check_fwd("V=50257 losses vs double", loss, lref, R);
        // Σ_v dlogits = (1 - 1 + 2β·lse)·inv_norm since p and the target distribution sum to 1.
        for (uint32_t r = 0; r < R; r++) {
            double s = 0, m = -INFINITY, e = 0;
            for (uint32_t v = 0; v < V; v++) { s += l[(size_t)r * V + v]; m = fmax(m, ld[(size_t)r * V + v]); }
            for (uint32_t v = 0; v < V; v++) e += exp(ld[(size_t)r * V + v] - m);
            double want = 2 * 1e-4 * (m + log(e)) * 0.5;
            CHECK(fabs(s - want) < 1e-5, "V=50257 row %u: Σ dlogits = %g, want %g", r, s, want);
        }
        free(l); free(loss); free(ld);
    }
    // sum_losses
    {
        float loss[5] = {1, 2.5f, 0, 4, 0.25f}, out[1];
        cpu_sum_losses(out, loss, 5, 0);
        CHECK(out[0] == 7.75f, "sum_losses = %g", out[0]);
        cpu_sum_losses(out, loss, 5, 1);
        CHECK(out[0] == 15.5f, "sum_losses accumulate = %g", out[0]);
    }
    // a loss scale multiplies every dlogit exactly (a power of two) and leaves the losses alone
    {
        const uint32_t R = 3, V = 77;
        float *a = frandom((size_t)R * V, -4, 4), *b = falloc((size_t)R * V), la[3], lb[3], S[1] = {1024.0f};
        memcpy(b, a, (size_t)R * V * 4);
        uint32_t t[3] = {1, 76, 30};
        cpu_cross_entropy(a, la, t, NULL, R, V, 0.1f, 1e-4f, 1.0f / 3);
        cpu_cross_entropy(b, lb, t, S, R, V, 0.1f, 1e-4f, 1.0f / 3);
        int exact = 1;
        for (size_t i = 0; i < (size_t)R * V; i++) exact &= b[i] == 1024.0f * a[i];
        CHECK(exact && !memcmp(la, lb, sizeof la), "loss scale 1024: dlogits scaled exactly, losses unchanged");
        free(a); free(b);
    }
}

// ---------------------------------------------------------------- optimizer

static void test_optimizer(void) {
    // grad_norm_sq: overwrite, then accumulate.
    float g1[3] = {1, 2, 2}, g2[2] = {3, -4}, ns[1] = {99};
    cpu_grad_norm_sq(ns, g1, 3, 0);
    CHECK(ns[0] == 9.0f, "grad_norm_sq overwrite: %g", ns[0]);
    cpu_grad_norm_sq(ns, g2, 2, 1);
    CHECK(ns[0] == 34.0f, "grad_norm_sq accumulate: %g", ns[0]);

    // grad_clip_scale: clip only when the norm exceeds max_norm; max_norm <= 0 disables.
    float st[WGT_ST_WORDS];
    // a fresh status: scale S, norm_sq given, loss sum finite
#define ST_FRESH(nsq, S)                                                   \
    do {                                                                   \
        memset(st, 0, sizeof st);                                          \
        st[WGT_ST_NORM_SQ] = (nsq);                                        \
        st[WGT_ST_LOSS_SCALE] = (S);                                       \
        st[WGT_ST_LOSS_SUM] = 3.0f;                                        \
    } while (0)
    ST_FRESH(25, 1);
    cpu_grad_clip_scale(st, 1.0f, 0.9f, 0.999f, 0, 2000);
    CHECK(fabsf(st[WGT_ST_CLIP] - 0.2f) < 1e-7f && st[WGT_ST_NORM] == 5.0f && wgt_st_u32(st, WGT_ST_T) == 1 &&
          !wgt_st_u32(st, WGT_ST_SKIPPED), "clip 5 -> 1: %g %g", st[WGT_ST_CLIP], st[WGT_ST_NORM]);
    CHECK(st[WGT_ST_BC1] == (float)(1 - 0.9f) && st[WGT_ST_BC2] == (float)(1 - (double)0.999f),
          "bias corrections of t = 1: %.9g %.9g", st[WGT_ST_BC1], st[WGT_ST_BC2]);
    ST_FRESH(25, 1);
    cpu_grad_clip_scale(st, 10.0f, 0.9f, 0.999f, 0, 2000);
    CHECK(st[WGT_ST_CLIP] == 1.0f && st[WGT_ST_NORM] == 5.0f, "no clip below max: %g %g", st[WGT_ST_CLIP], st[WGT_ST_NORM]);
    ST_FRESH(25, 1);
    cpu_grad_clip_scale(st, 0.0f, 0.9f, 0.999f, 0, 2000);
    CHECK(st[WGT_ST_CLIP] == 1.0f, "max_norm 0 disables clipping: %g", st[WGT_ST_CLIP]);
    ST_FRESH(0, 1);
    cpu_grad_clip_scale(st, 1.0f, 0.9f, 0.999f, 0, 2000);
    CHECK(st[WGT_ST_CLIP] == 1.0f && st[WGT_ST_NORM] == 0.0f, "zero norm: %g %g", st[WGT_ST_CLIP], st[WGT_ST_NORM]);
    // a loss scale of 2^10: the norm is unscaled, the multiplier carries 1/S, exactly
    ST_FRESH(25.0f * 1048576.0f, 1024);
    cpu_grad_clip_scale(st, 1.0f, 0.9f, 0.999f, 0, 2000);
    CHECK(st[WGT_ST_NORM] == 5.0f && st[WGT_ST_CLIP] == 0.2f / 1024 && st[WGT_ST_STEP_SCALE] == 1024 &&
          st[WGT_ST_LOSS_SCALE] == 1024, "scale 1024: norm %g multiplier %g", st[WGT_ST_NORM], st[WGT_ST_CLIP]);
    // a non-finite norm or loss: skipped, t unchanged, skips counted; dynamic halves the scale
    ST_FRESH(INFINITY, 65536);
    wgt_st_set_u32(st, WGT_ST_T, 7);
    wgt_st_set_u32(st, WGT_ST_CLEAN, 5);
    cpu_grad_clip_scale(st, 1.0f, 0.9f, 0.999f, 1, 2000);
    CHECK(st[WGT_ST_CLIP] == 0 && wgt_st_u32(st, WGT_ST_T) == 7 && wgt_st_u32(st, WGT_ST_SKIPS) == 1 &&
          wgt_st_u32(st, WGT_ST_SKIPPED) == 1 && wgt_st_u32(st, WGT_ST_CLEAN) == 0 && st[WGT_ST_LOSS_SCALE] == 32768,
          "overflow: skipped and the scale halved (%g)", st[WGT_ST_LOSS_SCALE]);
    ST_FRESH(4, 2);
    st[WGT_ST_LOSS_SUM] = NAN;
    cpu_grad_clip_scale(st, 1.0f, 0.9f, 0.999f, 0, 2000);
    CHECK(st[WGT_ST_CLIP] == 0 && wgt_st_u32(st, WGT_ST_SKIPPED) == 1 && st[WGT_ST_LOSS_SCALE] == 2,
          "NaN loss: skipped, a static scale stays");
    // growth: the window-th clean update in a row doubles the scale and restarts the count
    ST_FRESH(4, 8);
    wgt_st_set_u32(st, WGT_ST_CLEAN, 2);
    cpu_grad_clip_scale(st, 1.0f, 0.9f, 0.999f, 1, 3);
    CHECK(st[WGT_ST_LOSS_SCALE] == 16 && st[WGT_ST_STEP_SCALE] == 8 && wgt_st_u32(st, WGT_ST_CLEAN) == 0,
          "growth after 3 clean updates: %g", st[WGT_ST_LOSS_SCALE]);
    ST_FRESH(4, WGT_LOSS_SCALE_MAX);
    wgt_st_set_u32(st, WGT_ST_CLEAN, 2);
    cpu_grad_clip_scale(st, 1.0f, 0.9f, 0.999f, 1, 3);
    CHECK(st[WGT_ST_LOSS_SCALE] == WGT_LOSS_SCALE_MAX && wgt_st_u32(st, WGT_ST_SKIPPED) == 0,
          "growth stops at 2^64: %g", st[WGT_ST_LOSS_SCALE]);
    // a scale so large that clip / S is no normal f32 (GPUs would flush it): skipped, halved
    ST_FRESH(4, 3e38f);
    cpu_grad_clip_scale(st, 1.0f, 0.9f, 0.999f, 1, 3);
    CHECK(st[WGT_ST_CLIP] == 0 && wgt_st_u32(st, WGT_ST_SKIPPED) == 1 && st[WGT_ST_LOSS_SCALE] == 1.5e38f,
          "a multiplier below 2^-126 skips: scale %g", st[WGT_ST_LOSS_SCALE]);
#undef ST_FRESH
    // bias corrections against double powers, over a range of t
    {
        double worst = 0;
        const float betas[3] = {0.9f, 0.95f, 0.999f};
        const uint32_t ts[8] = {1, 2, 3, 10, 100, 1000, 12345, 1000000};
        for (int b = 0; b < 3; b++)
            for (int k = 0; k < 8; k++) {
                double want = 1.0 - pow((double)betas[b], ts[k]);
                double rel = fabs(cpu_bias_correction(betas[b], ts[k]) - want) / want;
                if (rel > worst) worst = rel;
            }
        CHECK(worst < 1.2e-7, "bias corrections within f32 rounding of double powers: worst %.3g", worst);
    }

    // AdamW step 1 by hand: g = 0.5·2 = 1; m = 0.1, v = 0.001; mhat = vhat = 1;
    // p = 1 - 0.01·(1/(1 + 1e-8) + 0.1·1) = 0.989 (to 1e-10).
    float p[2] = {1.0f, -2.0f}, m[2] = {0, 0}, v[2] = {0, 0}, g[2] = {0.5f, 0.0f};
    memset(st, 0, sizeof st);
    st[WGT_ST_LOSS_SCALE] = 1;
    cpu_grad_clip_scale(st, 0.0f, 0.9f, 0.999f, 0, 2000);
    st[WGT_ST_CLIP] = 2.0f;  // the multiplier of the hand computation
    cpu_adamw(p, m, v, g, st, 2, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f);
    CHECK(fabsf(p[0] - 0.989f) < 1e-6f, "adamw step 1: p = %.9g, want 0.989", p[0]);
    // 1 - 0.999f is 1e-3 only to ~1.3e-5 relative in f32, hence v's looser bound.
    CHECK(fabsf(m[0] - 0.1f) < 1e-7f && fabsf(v[0] - 0.001f) < 2e-8f, "adamw step 1 moments %g %g", m[0], v[0]);
    // Zero gradient: only the decoupled decay acts, p = -2·(1 - lr·wd) = -1.998.
    CHECK(fabsf(p[1] + 1.998f) < 1e-6f, "adamw zero grad decay: p = %.9g, want -1.998", p[1]);

    // Step 2 against a double computation of the same update (g = -0.25·2 = -0.5, no decay).
    g[0] = -0.25f;
    double md = 0.9 * m[0] + 0.1 * -0.5, vd = 0.999 * v[0] + 0.001 * 0.25;
    double pd = p[0] - 0.01 * ((md / (1 - 0.81)) / (sqrt(vd / (1 - 0.999 * 0.999)) + 1e-8));
    cpu_grad_clip_scale(st, 0.0f, 0.9f, 0.999f, 0, 2000);
    st[WGT_ST_CLIP] = 2.0f;
    CHECK(wgt_st_u32(st, WGT_ST_T) == 2, "the status counts the second update: t = %u", wgt_st_u32(st, WGT_ST_T));
    cpu_adamw(p, m, v, g, st, 1, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f);
    CHECK(fabs(p[0] - pd) < 1e-6, "adamw step 2: p = %.9g, want %.9g", p[0], pd);
    // a multiplier of 0 (a skipped update) changes nothing
    float p0 = p[0], m0 = m[0];
    st[WGT_ST_CLIP] = 0.0f;
    cpu_adamw(p, m, v, g, st, 1, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f);
    CHECK(p[0] == p0 && m[0] == m0, "adamw with multiplier 0 changes nothing");
}

// ---------------------------------------------------------------- the backend vtable

// Views at non-zero offsets go to the same math as the direct calls; sync is a no-op.
static void test_backend(void) {
    wgt_backend *be = NULL;
    CHECK(backend_cpu_init(&be) == WGT_OK && be, "backend_cpu_init");
    if (!be) return;
    CHECK(strcmp(be->name, "cpu") == 0 && be->max_binding_elems == SIZE_MAX, "backend identity");
    const uint32_t N = 4, C = 6, OC = 3;
    wgt_buf *buf = NULL;
    CHECK(be->buf_alloc(be, &buf, 1024, "test") == WGT_OK, "buf_alloc");
    float zeros[1024] = {0}, back[1024];
    CHECK(be->download(be, back, wgt_view_of(buf, 0, 1024), 1024) == WGT_OK, "download");
    CHECK_CLOSE("buf_alloc zero-fills", back, zeros, 1024, 0, 0);

    float *x = frandom(N * C, -1, 1), *W = frandom(OC * C, -1, 1), *b = frandom(OC, -1, 1), *ref = falloc(N * OC);
    wgt_view vx = wgt_view_of(buf, 64, 1024 - 64), vW = wgt_view_at(vx, 64), vb = wgt_view_at(vx, 128), vo = wgt_view_at(vx, 192);
    be->upload(be, vx, x, N * C);
    be->upload(be, vW, W, OC * C);
    be->upload(be, vb, b, OC);
    be->matmul(be, vo, vx, vW, vb, N, C, OC);
    CHECK(be->sync(be) == WGT_OK, "sync");
    be->download(be, back, vo, N * OC);
    cpu_matmul(ref, x, W, b, N, C, OC);
    CHECK_CLOSE("vtable matmul at offsets", back, ref, N * OC, 0, 0);
    be->matmul(be, vo, vx, vW, wgt_view_none(), N, C, OC);
    be->download(be, back, vo, N * OC);
    cpu_matmul(ref, x, W, NULL, N, C, OC);
    CHECK_CLOSE("vtable matmul without bias", back, ref, N * OC, 0, 0);

    be->copy(be, wgt_view_at(vx, 512), vx, N * C);
    be->download(be, back, wgt_view_at(vx, 512), N * C);
    CHECK_CLOSE("copy", back, x, N * C, 0, 0);
    be->fill_zero(be, wgt_view_at(vx, 512), N * C);
    be->download(be, back, wgt_view_at(vx, 512), N * C);
    CHECK_CLOSE("fill_zero", back, zeros, N * C, 0, 0);

    // Every op slot is filled.
    void (**slot)(void) = (void (**)(void)) & be->gelu_inplace;
    void (**last)(void) = (void (**)(void)) & be->adamw;
    int missing = 0;
    for (; slot <= last; slot++) missing += *slot == NULL;
    CHECK(missing == 0, "%d op slots are NULL", missing);
    be->buf_free(be, buf);
    be->free(be);
    free(x); free(W); free(b); free(ref);
}

int main(void) {
    test_gelu_grad();
    test_swiglu_grad();
    test_geglu_grad();
    test_scale_inplace();
    test_cross_entropy_grad();
    test_embedding_grad();
    test_layernorm_grad();
    test_rmsnorm_grad();
    test_qk_norm_grad(0.0f);
    test_qk_norm_grad(1.0f);
    test_matmul_grad();
    test_matmul_big();
    test_attention_grad();
    test_residual();
    test_dropout_grad();
    test_gelu_edges();
    test_fast_math();
    test_swiglu_edges();
    test_activation_f64();
    test_cross_entropy_edges();
    test_optimizer();
    test_backend();
    return test_finish();
}
