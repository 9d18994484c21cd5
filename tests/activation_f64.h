// activation_f64.h — float64 evaluations of the activation formulas (docs/kernels.md#gelu_inplace,
// #swiglu_combine, #ffn_gelu_backward, #ffn_swiglu_backward) and the tolerance that an f32
// implementation of them must meet against these (docs/numerics.md#activations). Shared by
// test_cpu_grad (the C reference) and test_kernels_activation_loss (the WGSL kernels).
//
// Tolerance: |got - ref| <= 2^-24·(ACT_ULPS·max(|f|_terms, ACT_FLOOR) + ACT_COND·|x·f'(x)|).
// The first term is a few ulp of the value, or rather of its terms where it is a sum (|f|_terms:
// gelu' = h + xc·sech²/2·inner' and silu' = s + s·x·(1 - s) have terms of opposite signs
// near their minima, where the sum's rounding is relative to the terms): the rounding of the
// final products, quotients and sums and the relative error of exp (a few 1e-7). The second is the input's condition number: the f32
// code rounds its intermediate z = inner(x) (relative error a few ulp), and every formula here is
// a smooth function of z, so the result is that of an input perturbed by a few ulp; where f
// changes fast relative to its value (the tails, where f ~ e^{-2|z|} and a relative error δ in z
// becomes 2|z|·δ in f, or next to a zero of f) that is what bounds the error. No f32 evaluation
// can do better than that second term, and a correct one does not need more. ACT_FLOOR keeps the
// first term at 2^-24·1e-27·ACT_ULPS ~ 5e-34 for tiny values: where e = e^{-2|z|} falls below
// FLT_MIN (x < -10), an exp that underflows to 0 there (the C reference's) or a device that
// flushes denormals (WGSL allows it) loses all of gelu'(x) ~ 2·x·e·inner'(x), at most ~3e-36.
#ifndef WGT_TEST_ACTIVATION_F64_H
#define WGT_TEST_ACTIVATION_F64_H
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define ACT_ULPS 8.0
#define ACT_COND 8.0
#define ACT_FLOOR 1e-27

// ACT_SILU_GUARDED: silu through nan_guard (ffn_swiglu_backward's grad_up with g = 1)
typedef enum { ACT_GELU, ACT_GELU_GRAD, ACT_SILU, ACT_SILU_GRAD, ACT_SILU_GUARDED, ACT_KINDS } act_kind;

static inline double act_clamp_d(double x) { return !(x >= -100.0) ? -100.0 : x > 100.0 ? 100.0 : x; }
static inline double act_inner_d(double xc) { return 0.7978845608 * (xc + 0.044715 * xc * xc * xc); }
// 0.5·(1 + tanh z) = sigmoid(2z) and 0.5·sech² z, exactly as functions of z (no cancellation)
static inline double act_half_1pt_d(double z) {
    double e = exp(-2.0 * fabs(z));
    return z >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
static inline double act_half_sech2_d(double z) {
    double e = exp(-2.0 * fabs(z));
    return 2.0 * e / ((1.0 + e) * (1.0 + e));
}
static inline double act_sigmoid_d(double x) {
    double e = exp(-fabs(x));
    return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
static inline double act_nan_guard_d(double v) { return isfinite(v) ? v : 0.0; }

// The value the kernel computes, in float64: the forward ops as IEEE arithmetic would carry a
// non-finite input (gelu(-inf) = -inf·0 = NaN, as the f32 formula gives), the backward ones
// through nan_guard (0 for a non-finite result).
static inline double act_eval_d(act_kind k, double x) {
    switch (k) {
    case ACT_GELU: return x * act_half_1pt_d(act_inner_d(act_clamp_d(x)));
    case ACT_GELU_GRAD: {
        double xc = act_clamp_d(x), z = act_inner_d(xc);
        double d_inner = 0.7978845608 * (1.0 + 3.0 * 0.044715 * xc * xc);
        return act_nan_guard_d(act_half_1pt_d(z) + xc * act_half_sech2_d(z) * d_inner);
    }
    case ACT_SILU: return isnan(x) ? x : x * act_sigmoid_d(x);
    case ACT_SILU_GUARDED: return act_nan_guard_d(isnan(x) ? x : x * act_sigmoid_d(x));
    case ACT_SILU_GRAD: {
        if (!isfinite(x)) return 0.0;
        double s = act_sigmoid_d(x), q = act_sigmoid_d(-x);
        return s * (1.0 + x * q);
    }
    default: return NAN;
    }
}

// The magnitude of the terms that the formula sums (|f| where it is a product).
static inline double act_mag_d(act_kind k, double x) {
    if (!isfinite(x)) return 0;
    if (k == ACT_GELU_GRAD) {
        double xc = act_clamp_d(x), z = act_inner_d(xc);
        return act_half_1pt_d(z) + fabs(xc * act_half_sech2_d(z) * 0.7978845608 * (1.0 + 3.0 * 0.044715 * xc * xc));
    }
    if (k == ACT_SILU_GRAD) return act_sigmoid_d(x) * (1.0 + fabs(x * act_sigmoid_d(-x)));
    return fabs(act_eval_d(k, x));
}

// |x·f'(x)| by a central difference in float64 (relative step 1e-6: its error is ~1e-10 of the
// result, and 1e-12 from rounding), 0 at x = 0 and for non-finite x.
static inline double act_cond_d(act_kind k, double x) {
    if (x == 0 || !isfinite(x)) return 0;
    double h = 1e-6 * fabs(x);
    return fabs(x * (act_eval_d(k, x + h) - act_eval_d(k, x - h)) / (2 * h));
}

// x values: a dense sweep of [-20, 20] (step 2^-14: 655361 points, every value exact in f32),
// a logarithmic sweep of both signs from 1e-38 to 3e38 (2000 points), and the edge values ±0,
// denormals, ±FLT_MIN, ±FLT_MAX, ±inf, NaN, around the clamp and the underflow of e^-2|z|.
static inline size_t act_sweep_count(void) { return 655361 + 4000 + 26; }
static inline void act_sweep_fill(float *x) {
    size_t n = 0;
    for (int i = -327680; i <= 327680; i++) x[n++] = (float)i / 16384.0f;
    for (int i = 0; i < 2000; i++) {
        float m = (float)pow(10.0, -38.0 + 76.477 * i / 1999.0);
        x[n++] = m;
        x[n++] = -m;
    }
    const float edge[26] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, -1e-40f, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
                            INFINITY, -INFINITY, NAN, -NAN, 99.5f, -99.5f, 100.0f, -100.0f, 100.5f, -100.5f,
                            1e4f, -1e4f, 3e38f, -3e38f, -9.5f, -45.0f};
    for (int i = 0; i < 26; i++) x[n++] = edge[i];
}

// Checks got[i] (f32 results of kind k at inputs x[i]) against float64: NaN where the reference
// is NaN, the same infinity where it is infinite, the tolerance above elsewhere. Prints the
// worst error (absolute, and as a fraction of the tolerance) when verbose or when it fails; the
// worst ratio in *worst_ratio, the worst absolute error for x in [-20, 20] in *worst_abs.
static inline int act_check(const char *what, act_kind k, const float *x, const float *got, size_t n, int verbose,
                            double *worst_ratio, double *worst_abs) {
    size_t bad = 0, wi = 0, ai = 0;
    double wr = 0, wa = 0;
    for (size_t i = 0; i < n; i++) {
        double r = act_eval_d(k, x[i]), g = got[i];
        int ok;
        double ratio = 0;
        if (k == ACT_GELU && x[i] == -INFINITY) ok = isnan(g) || g == 0, ratio = ok ? 0 : INFINITY;  // not pinned (docs/numerics.md#non-finite-values): NaN by the formula, 0 allowed
        else if (isnan(r) || isnan(g)) ok = isnan(r) && isnan(g), ratio = ok ? 0 : INFINITY;
        else if (isinf(r) || isinf(g)) ok = g == r, ratio = ok ? 0 : INFINITY;
        else {
            double tol = ldexp(ACT_ULPS * fmax(fmax(fabs(r), act_mag_d(k, x[i])), ACT_FLOOR) + ACT_COND * act_cond_d(k, x[i]), -24);
            ratio = fabs(g - r) / tol;
            ok = ratio <= 1.0;
            if (fabs(x[i]) <= 20 && fabs(g - r) > wa) wa = fabs(g - r), ai = i;
        }
        if (!ok) bad++;
        if (!(ratio <= wr)) wr = ratio, wi = i;
    }
    if (bad || verbose)
        printf("  %-40s worst %.3g of the tolerance at x = %.9g (got %.9g, f64 %.9g); worst |err| on [-20, 20] "
               "%.3g at x = %.9g (f64 %.9g)\n", what, wr, x[wi], got[wi], act_eval_d(k, x[wi]), wa, x[ai],
               act_eval_d(k, x[ai]));
    if (worst_ratio) *worst_ratio = wr;
    if (worst_abs) *worst_abs = wa;
    return bad == 0;
}
#endif
