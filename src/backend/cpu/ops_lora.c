// ops_lora.c — C reference of the op that LoRA adapters need beside the GEMMs: a scaled copy or
// sum between column windows of two row-major matrices. An adapter of one projection inside a
// packed matrix (LLaMA's q | k | v) adds its output into that projection's columns of the packed
// output, and its backward reads the same columns of the packed gradient (docs/lora.md).
#include "backend/cpu/ops.h"

// out[n, oo + j] = (accumulate ? out[n, oo + j] : 0) + scale * inp[n, io + j] for n < N, j < W.
void cpu_add_cols(float *out, const float *inp, uint32_t N, uint32_t OS, uint32_t IS, uint32_t W, uint32_t oo,
                  uint32_t io, float scale, uint32_t accumulate) {
    WGT_ASSERT((uint64_t)oo + W <= OS && (uint64_t)io + W <= IS, "add_cols: a column window lies outside its matrix");
    #pragma omp parallel for schedule(static) if ((uint64_t)N * W > 65536)
    for (uint32_t n = 0; n < N; n++) {
        float *o = out + (size_t)n * OS + oo;
        const float *x = inp + (size_t)n * IS + io;
        for (uint32_t j = 0; j < W; j++) o[j] = (accumulate ? o[j] : 0.0f) + scale * x[j];
    }
}
