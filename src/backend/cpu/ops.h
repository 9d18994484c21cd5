// ops.h — the C reference of every op: plain functions on host pointers, one per kernel.
// Each cpu_<kernel> takes its arguments in the same order as the backend.h op (outputs,
// then inputs, then sizes / scalars), so the CPU backend is a thin forwarder and the WGSL
// tests can call the reference directly on arrays they own. The math follows SPEC §2–3
// exactly; element-wise ops compute in f32 like the kernels, while reductions (softmax sums,
// layernorm statistics, norms, bias and weight column sums) accumulate in double so the
// reference is at least as accurate as any kernel it judges.
#ifndef WGT_CPU_OPS_H
#define WGT_CPU_OPS_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "backend/backend.h"

// ---- shared scalar helpers (the C twins of 00_shared.wgsl and the activation preambles) ----

// 0 for NaN or ±Inf. Tested on the bits, as the WGSL must, so that the result does not
// depend on how the compiler treats non-finite floats.
static inline float cpu_nan_guard(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7f800000u) != 0x7f800000u ? x : 0.0f;
}

// Sigmoid branched on the sign so that exp only ever sees a non-positive argument: no
// overflow to Inf, and underflow lands on the correct limit 0 / 1.
static inline float cpu_sigmoid(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

// The tanh-GeLU "inner" argument with the input clamped to [-100, 100]: the clamp only keeps
// x³ small; the outer factor uses the unclamped x (SPEC §2, seed review finding 1).
#define CPU_GELU_CLAMP 100.0f
static inline float cpu_gelu_clamp(float x) {
    // fmaxf/fminf return the non-NaN operand, so NaN maps to a bound here; the outer x still
    // carries the NaN into the forward result.
    return fminf(fmaxf(x, -CPU_GELU_CLAMP), CPU_GELU_CLAMP);
}
static inline float cpu_gelu_inner(float xc) {
    return 0.7978845608f * (xc + 0.044715f * xc * xc * xc);
}

// ---- seed kernels (SPEC §2) ----
void cpu_gelu_inplace(float *x, size_t n);
void cpu_swiglu_combine(float *hidden, const float *gate, const float *up, size_t n);
// logits[R,V] are replaced by dlogits; losses[R]; targets >= V mark ignored rows.
void cpu_cross_entropy(float *logits, float *losses, const uint32_t *targets, uint32_t R,
                       uint32_t V, float alpha, float beta, float inv_norm);
void cpu_sum_losses(float *out, const float *losses, uint32_t n);
void cpu_ffn_gelu_backward(float *grad_pre, const float *grad_hidden, const float *pre_gelu,
                           size_t n);
void cpu_ffn_swiglu_backward(float *grad_gate, float *grad_up, const float *grad_hidden,
                             const float *gate, const float *up, size_t n);

// ---- GPT-2 ops (SPEC §3) ----
void cpu_embedding_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                           uint32_t B, uint32_t T, uint32_t C);
void cpu_embedding_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                            uint32_t B, uint32_t T, uint32_t C, uint32_t V);
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, uint32_t N, uint32_t C);
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, uint32_t N, uint32_t C);
// bias may be NULL.
void cpu_matmul(float *out, const float *inp, const float *weight, const float *bias,
                uint32_t N, uint32_t C, uint32_t OC);
void cpu_matmul_t(float *dinp, const float *dout, const float *weight,
                  uint32_t N, uint32_t C, uint32_t OC);
// dbias may be NULL.
void cpu_matmul_at(float *dweight, float *dbias, const float *dout, const float *inp,
                   uint32_t N, uint32_t C, uint32_t OC);
void cpu_attention_forward(float *out, float *lse, const float *qkv,
                           uint32_t B, uint32_t T, uint32_t C, uint32_t NH);
void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                            const float *lse, uint32_t B, uint32_t T, uint32_t C, uint32_t NH);
// out may alias a (or b).
void cpu_residual_forward(float *out, const float *a, const float *b, size_t n);
void cpu_add_inplace(float *out, const float *a, size_t n);
void cpu_grad_norm_sq(float *norm_sq, const float *g, size_t n, int accumulate);
void cpu_grad_clip_scale(float *scale, const float *norm_sq, float max_norm);
void cpu_adamw(float *params, float *m, float *v, const float *grads, const float *scale,
               size_t n, wgt_adamw_params hp);
#endif
