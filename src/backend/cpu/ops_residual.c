// ops_residual.c — C reference of the residual-stream element-wise ops: the forward sum of a
// block's input and output, the in-place accumulation of a branch's gradient, and the dropout of
// a branch (forward and backward, the mask hashed from seed, stream and index: backend/dropout.h).
#include "backend/cpu/ops.h"

// out = a + b. No restrict: the model writes the sum over a.
void cpu_residual_forward(float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void cpu_add_inplace(float *out, const float *a, size_t n) {
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) out[i] += a[i];
}

void cpu_scale_inplace(float *x, size_t n, float s) {
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

// Dropout of n elements: out[i] = inp[i]·scale when wgt_dropout_bits(key(i >> 32), i) >= thr,
// else +0; thr = 0 (p = 0) copies the bits. out may be inp (in place) but must not partially
// overlap it. The map is diagonal, so it is its own transpose: the backward applies it to dout.
static void dropout_map(float *out, const float *inp, size_t n, float p, uint32_t seed, uint32_t stream) {
    WGT_ASSERT(p >= 0.0f && p < 1.0f, "dropout needs p in [0, 1)");
    const uint32_t thr = wgt_dropout_threshold(p);
    if (thr == 0) {
        if (out != inp) memmove(out, inp, n * sizeof(float));
        return;
    }
    const float scale = wgt_dropout_scale(p);
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        uint32_t key = wgt_dropout_key(seed, stream, (uint32_t)((uint64_t)i >> 32));
        out[i] = wgt_dropout_bits(key, (uint32_t)i) >= thr ? inp[i] * scale : 0.0f;
    }
}

void cpu_dropout_forward(float *out, const float *inp, size_t n, float p, uint32_t seed, uint32_t stream) {
    dropout_map(out, inp, n, p, seed, stream);
}

void cpu_dropout_backward(float *dinp, const float *dout, size_t n, float p, uint32_t seed, uint32_t stream) {
    dropout_map(dinp, dout, n, p, seed, stream);
}
