// ops_lowbit.c — C reference of matmul_lowbit and matmul_t_lowbit (kernels/03_matmul.wgsl): the
// forward GEMM and the input gradient GEMM on a packed frozen weight (f16, bf16 or nf4; backend/lowbit.h). The weight is
// decoded into a temporary f32 matrix (one weight, never the model) and handed to the f32 GEMMs
// of ops_matmul.c, so a packed base computes exactly what an f32 base holding the decoded values
// computes (tests/test_lowbit.c checks that bit for bit).
#include <stdlib.h>
#include "backend/cpu/ops.h"
#include "backend/lowbit.h"

static float *decode(const uint32_t *weight, const float *absmax, uint32_t C, uint32_t OC, uint32_t fmt, uint32_t WW,
                     uint32_t NB, const char *op) {
    const uint64_t n = (uint64_t)C * OC;
    (void)op;  // (named in the assertions' file and line)
    WGT_ASSERT(fmt <= WGT_LOWBIT_NF4, "lowbit GEMM: fmt must be 0 (f16), 1 (bf16) or 2 (nf4)");
    WGT_ASSERT(wgt_lowbit_words(fmt, n) <= WW, "lowbit GEMM: the weight's WW words hold fewer than OC x C values");
    WGT_ASSERT(fmt != WGT_LOWBIT_NF4 || (absmax && wgt_lowbit_blocks(fmt, n) <= NB),
               "lowbit GEMM: an nf4 weight needs absmax, NB >= ceil(OC x C / 64)");
    float *w = wgt_malloc(n ? (size_t)n * sizeof *w : 1);
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t e = 0; e < (int64_t)n; e++) w[e] = wgt_lowbit_get(fmt, weight, absmax, (uint64_t)e);
    return w;
}

void cpu_matmul_lowbit(float *out, const float *inp, const uint32_t *weight, const float *absmax, const float *bias,
                       uint32_t N, uint32_t C, uint32_t OC, uint32_t fmt, uint32_t WW, uint32_t NB) {
    float *w = decode(weight, absmax, C, OC, fmt, WW, NB, "matmul_lowbit");
    cpu_matmul(out, inp, w, bias, N, C, OC);
    free(w);
}

void cpu_matmul_t_lowbit(float *dinp, const float *dout, const uint32_t *weight, const float *absmax, uint32_t N,
                         uint32_t C, uint32_t OC, uint32_t fmt, uint32_t WW, uint32_t NB) {
    float *w = decode(weight, absmax, C, OC, fmt, WW, NB, "matmul_t_lowbit");
    cpu_matmul_t(dinp, dout, w, N, C, OC);
    free(w);
}
