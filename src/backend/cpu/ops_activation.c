// ops_activation.c — C reference of 06_activation.wgsl: gelu_inplace, gelu_forward, swiglu_combine and
// geglu_combine.
// Computed in f32 with the kernels' exact formulas so the WGSL results can be held to tight
// tolerances; one element per iteration, parallel over elements.
#include "backend/cpu/ops.h"

// gelu(x) = 0.5·x·(1 + tanh(inner(clamp(x)))), with 0.5·(1 + tanh) from cpu_gelu_halves (no
// cancellation where tanh is near -1). The clamp lives only inside inner, so gelu(x) = x for
// large x and (-)0 for very negative x instead of saturating at ±100. out may be inp (each
// element is read before it is written): gelu_inplace is gelu_forward onto itself.
CPU_ISA_DISPATCH(gelu_block, (float *out, const float *inp, size_t n), (out, inp, n)) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float xi = inp[i], h, unused;
        cpu_gelu_halves(cpu_gelu_inner(cpu_gelu_clamp(xi)), &h, &unused);
        out[i] = xi * h;
    }
}

void cpu_gelu_forward(float *out, const float *inp, size_t n) {
    #pragma omp parallel if (n > 65536)
    {
        size_t lo, hi;
        cpu_thread_block(n, &lo, &hi);
        gelu_block(out + lo, inp + lo, hi - lo);
    }
}

void cpu_gelu_inplace(float *x, size_t n) { cpu_gelu_forward(x, x, n); }

// hidden = silu(gate)·up with the sign-branched sigmoid; no clamp, so silu(x) -> x holds for
// any finite large x.
CPU_ISA_DISPATCH(swiglu_block, (float *hidden, const float *gate, const float *up, size_t n), (hidden, gate, up, n)) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        hidden[i] = g * cpu_sigmoid(g) * up[i];
    }
}

void cpu_swiglu_combine(float *hidden, const float *gate, const float *up, size_t n) {
    #pragma omp parallel if (n > 65536)
    {
        size_t lo, hi;
        cpu_thread_block(n, &lo, &hi);
        swiglu_block(hidden + lo, gate + lo, up + lo, hi - lo);
    }
}

// hidden = gelu(gate)·up (GeGLU), gelu as gelu_inplace's: the product rounded before the
// multiplication by up, as the kernel and PyTorch's gelu(gate) * up
void cpu_geglu_combine(float *hidden, const float *gate, const float *up, size_t n) {
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], h, unused;
        cpu_gelu_halves(cpu_gelu_inner(cpu_gelu_clamp(g)), &h, &unused);
        hidden[i] = (g * h) * up[i];
    }
}
