// ops_residual.c — C reference of the residual-stream element-wise ops: the forward sum of a
// block's input and output, and the in-place accumulation of a branch's gradient.
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
