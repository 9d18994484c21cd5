// ops_cast.c — C reference of 08_cast (f32 <-> f16) and of the GEMMs with an f16 operand. The
// conversions are backend/half.h's, on the bits, exactly as kernels/08_cast.wgsl does them; the
// f16 GEMMs widen their f16 operand to f32 (exact) and run the f32 reference, so a kernel that
// widens its tiles on load computes the same products.
#include <stdlib.h>
#include "backend/cpu/ops.h"

void cpu_cast_f16(uint16_t *out, const float *inp, size_t n) {
    #pragma omp parallel for schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) out[i] = wgt_f32_to_f16(inp[i]);
    if (n & 1) out[n] = 0;  // the high half of the last word
}

void cpu_cast_f32(float *out, const uint16_t *inp, size_t n) {
    #pragma omp parallel for schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) out[i] = wgt_f16_to_f32(inp[i]);
}

// The widened operands live in two scratch buffers per thread that only grow: a fresh
// allocation per call is a fresh mapping of pages the kernel must zero, which cost more than the
// GEMMs themselves at small sizes.
static _Thread_local struct { float *p; size_t cap; } g_scratch[2];

static float *widen(int slot, const uint16_t *h, size_t n) {
    if (n > g_scratch[slot].cap) {
        free(g_scratch[slot].p);
        g_scratch[slot].cap = n;
        g_scratch[slot].p = wgt_malloc(n * sizeof(float));
    }
    float *f = g_scratch[slot].p;
    cpu_cast_f32(f, h, n);
    return f;
}

void cpu_matmul_f16(float *out, const uint16_t *inp, const uint16_t *weight, const float *bias, uint32_t N, uint32_t C,
                    uint32_t OC) {
    float *a = widen(0, inp, (size_t)N * C), *w = widen(1, weight, (size_t)OC * C);
    cpu_matmul(out, a, w, bias, N, C, OC);
}

void cpu_matmul_t_f16(float *dinp, const float *dout, const uint16_t *weight, uint32_t N, uint32_t C, uint32_t OC) {
    cpu_matmul_t(dinp, dout, widen(1, weight, (size_t)OC * C), N, C, OC);
}

void cpu_matmul_at_f16(float *dweight, float *dbias, const float *dout, const uint16_t *inp, uint32_t N, uint32_t C,
                       uint32_t OC) {
    cpu_matmul_at(dweight, dbias, dout, widen(0, inp, (size_t)N * C), N, C, OC);
}
