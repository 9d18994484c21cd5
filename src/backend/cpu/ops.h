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
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "backend/backend.h"
#include "backend/dropout.h"
#include "backend/half.h"  // f16 on the bits (wgt_f32_to_f16 / wgt_f16_to_f32)  // the dropout mask (wgt_dropout_*), shared with the WebGPU hosts

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
// x³ small; the outer factor uses the unclamped x (docs/kernels.md#gelu_inplace).
#define CPU_GELU_CLAMP 100.0f
static inline float cpu_gelu_clamp(float x) {
    // fmaxf/fminf return the non-NaN operand, so NaN maps to a bound here; the outer x still
    // carries the NaN into the forward result.
    return fminf(fmaxf(x, -CPU_GELU_CLAMP), CPU_GELU_CLAMP);
}
static inline float cpu_gelu_inner(float xc) {
    return 0.7978845608f * (xc + 0.044715f * xc * xc * xc);
}

// ---- host helpers (not ops) ----

// The rotary-embedding tables of rope_forward / rope_backward, [maxT, HS] each, as Hugging Face
// LLaMA builds them: inv_freq[i] = 1 / theta^(2i/HS) for i < HS/2, angle[t, i] = t·inv_freq[i],
// emb = cat(angle, angle); cos_tab = cos(emb), sin_tab = sin(emb). Computed in double and
// rounded to f32 (HF forms the angles in f32, which differs by up to ~t·6e-8 rad). HS must be even.
void cpu_rope_tables(float *cos_tab, float *sin_tab, uint32_t maxT, uint32_t HS, double theta);

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
#define CPU_PTR_OUT_F16 uint16_t *
#define CPU_PTR_IN_F16 const uint16_t *
#define CPU_ARG_B(name, role, type, shape) , CPU_PTR_##role##_##type name
#define CPU_PROTO_(op, summary) void cpu_##op(WGT_ARGS(WGT_OP_##op(CPU_ARG_B, WGT_PARAM_S)));
WGT_OPS(CPU_PROTO_)
#undef CPU_PROTO_
#endif
