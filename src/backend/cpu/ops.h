// ops.h — the C reference of every op: plain functions on host pointers, one per kernel.
// Each cpu_<kernel> takes its arguments in the same order as the backend.h op (outputs,
// then inputs, then sizes / scalars), so the CPU backend is a thin forwarder and the WGSL
// tests can call the reference directly on arrays they own. The math follows docs/kernels.md
// exactly; element-wise ops compute in f32 like the kernels, while reductions (softmax sums,
// layernorm statistics, norms, bias and weight column sums) accumulate in double so the
// reference is at least as accurate as any kernel it judges.
#ifndef WGT_CPU_OPS_H
#define WGT_CPU_OPS_H
#include <math.h>
#include "backend/cpu/cpu_nothreads.h"  // omp.h, or a team of one without -fopenmp
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "backend/backend.h"
#include "backend/dropout.h"
#include "backend/half.h"  // f16 on the bits (wgt_f32_to_f16 / wgt_f16_to_f32)  // the dropout mask (wgt_dropout_*), shared with the WebGPU hosts

// The hot loops of the CPU trainer (attention's rows, the activations) are compiled for
// AVX-512F, AVX2 and plain x86-64 and one is chosen once (CPU_ISA_DISPATCH, cpu_isa.h;
// WGTRAIN_CPU_ISA forces one). Their results must not depend on which: element-wise loops only,
// or reductions in a fixed lane order (ops_attention.c), and no FMA contraction (ISO C mode);
// test_cpu_isa requires the same bits from every variant the machine runs.
#include "backend/cpu/cpu_isa.h"

// Block [lo, hi) of n items for the calling thread of an OpenMP team (contiguous, in thread
// order; the whole range outside a parallel region).
static inline void cpu_thread_block(size_t n, size_t *lo, size_t *hi) {
    size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num(), per = (n + nt - 1) / nt;
    *lo = per * id < n ? per * id : n;
    *hi = per * (id + 1) < n ? per * (id + 1) : n;
}

// ---- shared scalar helpers (the C twins of 00_shared.wgsl and the activation preambles) ----

// 0 for NaN or ±Inf. Tested on the bits, as the WGSL must, so that the result does not
// depend on how the compiler treats non-finite floats.
static inline float cpu_nan_guard(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7f800000u) != 0x7f800000u ? x : 0.0f;
}

// e^x in f32 for x <= 0, without a libm call: x = n·ln 2 + r (n rounded by adding 1.5·2^23, ln 2
// in two parts) and e^r by its Taylor polynomial to r⁷, 2^n in the exponent bits. Below -87.3,
// where e^x is under the smallest normal float, the result is 0 (so x·e^x -> 0 for any finite
// x); NaN gives NaN. Relative error a few 1e-7 (test_cpu_grad checks it against libm).
static inline float cpu_expf_neg(float x) {
    float y = x > -87.3f ? x : -87.3f;
    union { float f; uint32_t u; } t = {y * 1.44269504f - 12582912.0f}, two_n;
    float nf = t.f + 12582912.0f;
    float r = (y - nf * 0.693359375f) + nf * 2.12194440e-4f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
    uint32_t k = t.u - 0xCB400000u;  // t = -(1.5·2^23 + k), k = -n in 0..126: its low bits
    two_n.u = (127u - k) << 23;
    float e = p * two_n.f;
    e = x > -87.3f ? e : 0.0f;
    return x == x ? e : x;
}

// Sigmoid branched on the sign so that exp only ever sees a non-positive argument: no
// overflow to Inf, and underflow lands on the correct limit 0 / 1.
// e^-|x| comes from cpu_expf_neg (no libm call, so that the SwiGLU loops vectorize).
static inline float cpu_sigmoid(float x) {
    float e = cpu_expf_neg(-fabsf(x));
    float s = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
    return x == x ? s : x;
}

// sigmoid(x) and 1 - sigmoid(x) = sigmoid(-x) from one e = e^-|x|, each without cancellation
// (1 - s computed as a difference has an absolute error of ~6e-8 where it is ~e^-x, which
// x·(1 - s) in SiLU's derivative multiplies by x). NaN gives NaN in both.
static inline void cpu_sigmoid_pair(float x, float *s, float *one_minus_s) {
    float e = cpu_expf_neg(-fabsf(x));
    float r = 1.0f / (1.0f + e);
    *s = x >= 0.0f ? r : e * r;
    *one_minus_s = x >= 0.0f ? e * r : r;
    *s = x == x ? *s : x;
    *one_minus_s = x == x ? *one_minus_s : x;
}

// The tanh-GeLU "inner" argument with the input clamped to [-100, 100]: the clamp only keeps
// x³ small; the outer factor uses the unclamped x (docs/kernels.md#gelu_inplace).
#define CPU_GELU_CLAMP 100.0f
static inline float cpu_gelu_clamp(float x) {
    // NaN maps to the lower bound (as fmaxf/fminf would: they return the non-NaN operand); the
    // outer x still carries the NaN into the forward result. Written as comparisons so that the
    // element loops vectorize (a call to fmaxf would not).
    return !(x >= -CPU_GELU_CLAMP) ? -CPU_GELU_CLAMP : x > CPU_GELU_CLAMP ? CPU_GELU_CLAMP : x;
}


static inline float cpu_gelu_inner(float xc) {
    return 0.7978845608f * (xc + 0.044715f * xc * xc * xc);
}

// GeLU's 0.5·(1 + tanh z) and 0.5·sech² z without cancellation: with e = e^{-2|z|} and
// r = 1/(1 + e), 0.5·(1 + tanh z) = r for z >= 0 and e·r below (= sigmoid(2z)), and
// 0.5·sech² z = 2·e·r². Written as 1 + tanh z and 1 - tanh² z they lose all relative accuracy
// where tanh z is near -1 or ±1 (gelu(-5.06) = -1.5e-7 and gelu'(-5.06) = -1.0e-6 came out 0).
// z is NaN-free here (it comes from the clamped x).
static inline void cpu_gelu_halves(float z, float *half_1pt, float *half_sech2) {
    float e = cpu_expf_neg(-2.0f * fabsf(z));
    float r = 1.0f / (1.0f + e);
    *half_1pt = z >= 0.0f ? r : e * r;
    *half_sech2 = 2.0f * e * r * r;
}

// e^x in double for the attention's softmax terms (x <= ~0 there), without a libm call so that
// a row's terms vectorize (libm's exp was a sixth of a CPU training step): x = n·ln2 + r with n rounded by the 1.5·2^52 trick and ln 2 in two parts (the
// first with 32 trailing zero bits, so n times it is exact), e^r by its Taylor polynomial to r^13
// (|r| <= ln2/2: truncation 1e-17), 2^n built in the exponent bits. Below -708 (e^x < 3e-308,
// nothing against the row's largest term, which is at least 1) the result is e^-708; NaN stays
// NaN. Relative error a few 1e-16 (test_cpu_grad checks it against libm), far below the f32
// results it feeds.
static inline double cpu_exp_d(double x) {
    double y = x > -708.0 ? x : -708.0;
    y = y < 709.0 ? y : 709.0;
    const double shift = 6755399441055744.0;  // 1.5·2^52: adding it rounds to an integer
    double t = y * 1.4426950408889634 + shift;
    double n = t - shift;
    double r = (y - n * 0.693147180369123816490) - n * 1.90821492927058770002e-10;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    union { double d; uint64_t u; } tb = {t}, two_n;
    two_n.u = (tb.u + 1023) << 52;  // the low bits of t hold n (two's complement)
    double e = p * two_n.d;
    return x == x ? e : x;
}

// ---- host helpers (not ops) ----

// RoPE's inverse frequencies inv_freq[HS/2] (one per rotated pair), in double, as Hugging Face's
// rope types compute them (modeling_rope_utils.py):
//   WGT_ROPE_DEFAULT: inv_freq[i] = 1 / theta^(2i/HS)
//   WGT_ROPE_LINEAR:  the default / factor
//   WGT_ROPE_LLAMA3:  Llama 3.1's (_compute_llama3_parameters): with wavelen = 2π / inv_freq and
//     orig = original_max_position_embeddings, a wavelength above orig / low is divided by factor,
//     one below orig / high kept, and one between them mixed, s·f + (1 - s)·f / factor with
//     s = (orig / wavelen - low) / (high - low).
// factor, low, high and orig are used by the types that have them (factor >= 1, high > low > 0,
// orig > 0: the model's config check enforces them). HS must be even, theta > 0.
enum { WGT_ROPE_DEFAULT = 0, WGT_ROPE_LINEAR = 1, WGT_ROPE_LLAMA3 = 2 };
void cpu_rope_inv_freq(double *inv_freq, uint32_t HS, double theta, int type, double factor, double low, double high,
                       double orig);
// The rotary-embedding tables of rope_forward / rope_backward, [maxT, HS] each, as Hugging Face
// LLaMA builds them from inv_freq[HS/2] (cpu_rope_inv_freq): angle[t, i] = t·inv_freq[i],
// emb = cat(angle, angle); cos_tab = cos(emb), sin_tab = sin(emb). Computed in double and
// rounded to f32 (HF forms the angles in f32, which differs by up to ~t·6e-8 rad). HS must be even.
void cpu_rope_tables(float *cos_tab, float *sin_tab, uint32_t maxT, uint32_t HS, const double *inv_freq);

// AdamW's bias correction 1 - beta^t as grad_clip_scale computes it (double-float powers, the
// same operations as the kernel; docs/kernels.md#grad_clip_scale).
float cpu_bias_correction(float beta, uint32_t t);

// ---- the references: cpu_<op>(outputs, inputs, sizes) for every op of op_list.h, e.g.
//   void cpu_matmul(float *out, const float *inp, const float *weight, const float *bias,
//                   uint32_t N, uint32_t C, uint32_t OC);
// An output binding is a float *, an input a const pointer of its element type; an optional
// binding may be NULL.
#define CPU_PTR_OUT_F32 float *
#define CPU_PTR_INOUT_F32 float *
#define CPU_PTR_INOUT_OPT_F32 float *
#define CPU_PTR_IN_F32 const float *
#define CPU_PTR_IN_OPT_F32 const float *
#define CPU_PTR_IN_I32 const int32_t *
#define CPU_PTR_IN_U32 const uint32_t *
#define CPU_PTR_IN_OPT_U32 const uint32_t *
#define CPU_PTR_OUT_F16 uint16_t *
#define CPU_PTR_IN_F16 const uint16_t *
#define CPU_ARG_B(name, role, type, shape) , CPU_PTR_##role##_##type name
#define CPU_PROTO_(op, summary) void cpu_##op(WGT_ARGS(WGT_OP_##op(CPU_ARG_B, WGT_PARAM_S)));
WGT_OPS(CPU_PROTO_)
#undef CPU_PROTO_
#endif
