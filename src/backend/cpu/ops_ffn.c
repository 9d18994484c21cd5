// ops_ffn.c — C reference of 09_backward_ffn.wgsl: the element-wise part of the FFN backward
// (the GEMMs are matmul_t / matmul_at). Outputs pass through nan_guard like the kernels', so a
// stray non-finite pre-activation yields a zero gradient instead of poisoning every weight.
#include "backend/cpu/ops.h"

// d/dx of 0.5·x·(1 + tanh(inner(clamp(x)))). Outside the clamp d(inner)/dx is 0, and there
// sech² is exactly 0 in f32 anyway (|inner| > 3e4), so using the clamped x in the second term
// is the exact derivative and keeps an infinite x from producing Inf·0. 0.5·(1 + tanh) and
// 0.5·sech² come from cpu_gelu_halves: as 1 + tanh and 1 - tanh² they cancel for large |z|.
static inline float gelu_grad(float x) {
    float xc = cpu_gelu_clamp(x), h, half_sech2;
    cpu_gelu_halves(cpu_gelu_inner(xc), &h, &half_sech2);
    float d_inner = 0.7978845608f * (1.0f + 3.0f * 0.044715f * xc * xc);
    return h + xc * half_sech2 * d_inner;
}

CPU_ISA_DISPATCH(gelu_backward_block, (float *grad_pre, const float *grad_hidden, const float *pre_gelu, size_t n),
                 (grad_pre, grad_hidden, pre_gelu, n)) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) grad_pre[i] = cpu_nan_guard(grad_hidden[i] * gelu_grad(pre_gelu[i]));
}

void cpu_ffn_gelu_backward(float *grad_pre, const float *grad_hidden, const float *pre_gelu,
                           size_t n) {
    #pragma omp parallel if (n > 65536)
    {
        size_t lo, hi;
        cpu_thread_block(n, &lo, &hi);
        gelu_backward_block(grad_pre + lo, grad_hidden + lo, pre_gelu + lo, hi - lo);
    }
}

// One sigmoid per element gives both silu = x·s and silu' = s·(1 + x·(1 - s))
// (docs/kernels.md#ffn_swiglu_backward); 1 - s comes from the same e^-|x| (cpu_sigmoid_pair),
// not as a difference, which would cancel for large x.
CPU_ISA_DISPATCH(swiglu_backward_block, (float *grad_gate, float *grad_up, const float *grad_hidden,
                                         const float *gate, const float *up, size_t n),
                 (grad_gate, grad_up, grad_hidden, gate, up, n)) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float g = grad_hidden[i], x = gate[i], s, q;
        cpu_sigmoid_pair(x, &s, &q);
        float dsilu = s * (1.0f + x * q);
        grad_gate[i] = cpu_nan_guard(g * up[i] * dsilu);
        grad_up[i] = cpu_nan_guard(g * (x * s));
    }
}

void cpu_ffn_swiglu_backward(float *grad_gate, float *grad_up, const float *grad_hidden,
                             const float *gate, const float *up, size_t n) {
    #pragma omp parallel if (n > 65536)
    {
        size_t lo, hi;
        cpu_thread_block(n, &lo, &hi);
        swiglu_backward_block(grad_gate + lo, grad_up + lo, grad_hidden + lo, gate + lo, up + lo, hi - lo);
    }
}

// GeGLU: grad_gate = g·up·gelu'(gate), grad_up = g·gelu(gate), gelu' as the GeLU backward's
void cpu_ffn_geglu_backward(float *grad_gate, float *grad_up, const float *grad_hidden, const float *gate,
                            const float *up, size_t n) {
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float g = grad_hidden[i], x = gate[i], h, unused;
        cpu_gelu_halves(cpu_gelu_inner(cpu_gelu_clamp(x)), &h, &unused);
        grad_gate[i] = cpu_nan_guard(g * up[i] * gelu_grad(x));
        grad_up[i] = cpu_nan_guard(g * (x * h));
    }
}
