// ops_matmul.c — C reference of 03_matmul: the forward GEMM and the two backward GEMMs.
// Weights are [OC, C] (PyTorch Linear layout), so the forward is inp·Wᵀ. OpenBLAS does the
// work: these three calls are nearly all of a CPU training step's FLOPs.
#include <cblas.h>
#include <limits.h>
#include "backend/cpu/ops.h"

static void check_dims(uint32_t N, uint32_t C, uint32_t OC) {
    WGT_ASSERT(N <= INT_MAX && C <= INT_MAX && OC <= INT_MAX, "matmul dimension exceeds BLAS int");
}

// out[N,OC] = inp[N,C]·weight[OC,C]ᵀ + bias[OC]. The bias is broadcast into out first and
// the GEMM accumulates onto it (beta = 1), saving a second pass.
void cpu_matmul(float *out, const float *inp, const float *weight, const float *bias,
                uint32_t N, uint32_t C, uint32_t OC) {
    check_dims(N, C, OC);
    if (N == 0 || OC == 0) return;
    if (bias) {
        #pragma omp parallel for schedule(static)
        for (uint32_t n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
    } else if (C == 0) {
        memset(out, 0, (size_t)N * OC * sizeof(float));
    }
    if (C == 0) return;  // BLAS rejects a zero leading dimension
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)OC, (int)C, 1.0f,
                inp, (int)C, weight, (int)C, bias ? 1.0f : 0.0f, out, (int)OC);
}

// dinp[N,C] = dout[N,OC]·weight[OC,C]  (overwrites)
void cpu_matmul_t(float *dinp, const float *dout, const float *weight,
                  uint32_t N, uint32_t C, uint32_t OC) {
    check_dims(N, C, OC);
    if (N == 0 || C == 0) return;
    if (OC == 0) { memset(dinp, 0, (size_t)N * C * sizeof(float)); return; }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)C, (int)OC, 1.0f,
                dout, (int)OC, weight, (int)C, 0.0f, dinp, (int)C);
}

// dweight[OC,C] += dout[N,OC]ᵀ·inp[N,C];  dbias[OC] += Σ_n dout[n,:]
void cpu_matmul_at(float *dweight, float *dbias, const float *dout, const float *inp,
                   uint32_t N, uint32_t C, uint32_t OC) {
    check_dims(N, C, OC);
    if (N == 0 || OC == 0) return;
    if (C > 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)OC, (int)C, (int)N, 1.0f,
                    dout, (int)OC, inp, (int)C, 1.0f, dweight, (int)C);
    if (!dbias) return;
    // Column sums of dout, by blocks of 64 columns: fixed order, contiguous reads, double sums.
    const uint32_t OB = 64;
    #pragma omp parallel for schedule(static)
    for (uint32_t o0 = 0; o0 < OC; o0 += OB) {
        uint32_t o1 = o0 + OB < OC ? o0 + OB : OC;
        double s[64] = {0};
        for (uint32_t n = 0; n < N; n++) {
            const float *g = dout + (size_t)n * OC;
            for (uint32_t o = o0; o < o1; o++) s[o - o0] += g[o];
        }
        for (uint32_t o = o0; o < o1; o++) dbias[o] += (float)s[o - o0];
    }
}
