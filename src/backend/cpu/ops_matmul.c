// ops_matmul.c — C reference of 03_matmul: the forward GEMM and the two backward GEMMs.
// Weights are [OC, C] (PyTorch Linear layout), so the forward is inp·Wᵀ. OpenBLAS does the
// arithmetic: these three calls are nearly all of a CPU training step's FLOPs.
//
// Threading: OpenBLAS runs single-threaded and OpenMP splits each GEMM into independent output
// blocks, one sgemm per thread. Letting OpenBLAS's own pthreads run between our OpenMP ops
// makes the two pools spin against each other (OpenMP workers keep spinning after a parallel
// region ends): measured on 2 cores, a step's GEMMs ran 4-8x slower that way. Output blocks
// never overlap and no GEMM is split along its reduction dimension, so results do not depend
// on the thread count.
#include <limits.h>
#include "backend/cpu/cpu_nothreads.h"  // OpenMP, pthread_once and cblas, or their stand-ins
#include "backend/cpu/ops.h"

static CPU_ONCE_T blas_once = CPU_ONCE_INIT;
static void blas_single_thread(void) { openblas_set_num_threads(1); }

static void check_dims(uint32_t N, uint32_t C, uint32_t OC) {
    WGT_ASSERT(N <= INT_MAX && C <= INT_MAX && OC <= INT_MAX, "matmul dimension exceeds BLAS int");
    cpu_once(&blas_once, blas_single_thread);
}

// Below this many multiply-adds a GEMM is not worth waking the thread team for.
#define PAR_MIN_FMA (1u << 18)

// Block [lo, hi) of a dimension of size n for thread id of nt, boundaries on multiples of 16
// so that every block but the last keeps whole SIMD-width column groups.
static void split(int n, int id, int nt, int *lo, int *hi) {
    int per = ((n + nt - 1) / nt + 15) / 16 * 16;
    *lo = per * id < n ? per * id : n;
    *hi = per * (id + 1) < n ? per * (id + 1) : n;
}

// out[N,OC] = inp[N,C]·weight[OC,C]ᵀ + bias[OC]. The bias is broadcast into each block first
// and the GEMM accumulates onto it (beta = 1). Split over rows of out, or over its columns
// when there are fewer rows than columns (e.g. the lm_head at sampling time, N = 1).
void cpu_matmul(float *out, const float *inp, const float *weight, const float *bias,
                uint32_t N, uint32_t C, uint32_t OC) {
    check_dims(N, C, OC);
    if (N == 0 || OC == 0) return;
    const int by_rows = N >= OC;
    #pragma omp parallel if ((double)N * C * OC >= PAR_MIN_FMA)
    {
        int lo, hi;
        split(by_rows ? (int)N : (int)OC, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        int r0 = by_rows ? lo : 0, r1 = by_rows ? hi : (int)N;
        int c0 = by_rows ? 0 : lo, c1 = by_rows ? (int)OC : hi;
        if (r1 > r0 && c1 > c0) {
            for (int r = r0; r < r1; r++) {
                float *o = out + (size_t)r * OC + c0;
                if (bias) memcpy(o, bias + c0, (size_t)(c1 - c0) * sizeof(float));
                else if (C == 0) memset(o, 0, (size_t)(c1 - c0) * sizeof(float));
            }
            if (C > 0)  // BLAS rejects a zero leading dimension
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, c1 - c0, (int)C, 1.0f,
                            inp + (size_t)r0 * C, (int)C, weight + (size_t)c0 * C, (int)C,
                            bias ? 1.0f : 0.0f, out + (size_t)r0 * OC + c0, (int)OC);
        }
    }
}

// dinp[N,C] = dout[N,OC]·weight[OC,C]  (overwrites). Split over rows or columns of dinp.
void cpu_matmul_t(float *dinp, const float *dout, const float *weight,
                  uint32_t N, uint32_t C, uint32_t OC) {
    check_dims(N, C, OC);
    if (N == 0 || C == 0) return;
    if (OC == 0) { memset(dinp, 0, (size_t)N * C * sizeof(float)); return; }
    const int by_rows = N >= C;
    #pragma omp parallel if ((double)N * C * OC >= PAR_MIN_FMA)
    {
        int lo, hi;
        split(by_rows ? (int)N : (int)C, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        int r0 = by_rows ? lo : 0, r1 = by_rows ? hi : (int)N;
        int c0 = by_rows ? 0 : lo, c1 = by_rows ? (int)C : hi;
        if (r1 > r0 && c1 > c0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, c1 - c0, (int)OC, 1.0f,
                        dout + (size_t)r0 * OC, (int)OC, weight + c0, (int)C, 0.0f,
                        dinp + (size_t)r0 * C + c0, (int)C);
    }
}

// dweight[OC,C] += dout[N,OC]ᵀ·inp[N,C];  dbias[OC] += Σ_n dout[n,:]
// Split over rows or columns of dweight (never over N, the reduction), and each thread sums
// the bias gradient of its own row block, in double.
void cpu_matmul_at(float *dweight, float *dbias, const float *dout, const float *inp,
                   uint32_t N, uint32_t C, uint32_t OC) {
    check_dims(N, C, OC);
    if (N == 0 || OC == 0) return;
    const int by_rows = OC >= C;
    #pragma omp parallel if ((double)N * C * OC >= PAR_MIN_FMA)
    {
        int id = omp_get_thread_num(), nt = omp_get_num_threads(), lo, hi;
        split(by_rows ? (int)OC : (int)C, id, nt, &lo, &hi);
        int r0 = by_rows ? lo : 0, r1 = by_rows ? hi : (int)OC;
        int c0 = by_rows ? 0 : lo, c1 = by_rows ? (int)C : hi;
        if (r1 > r0 && c1 > c0)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1 - r0, c1 - c0, (int)N, 1.0f,
                        dout + r0, (int)OC, inp + c0, (int)C, 1.0f,
                        dweight + (size_t)r0 * C + c0, (int)C);
        if (dbias) {
            // Column sums of dout in blocks of 64 columns: contiguous reads, fixed order.
            int b0, b1;
            split((int)OC, id, nt, &b0, &b1);
            for (int o0 = b0; o0 < b1; o0 += 64) {
                int o1 = o0 + 64 < b1 ? o0 + 64 : b1;
                double s[64] = {0};
                for (uint32_t n = 0; n < N; n++) {
                    const float *g = dout + (size_t)n * OC;
                    for (int o = o0; o < o1; o++) s[o - o0] += g[o];
                }
                for (int o = o0; o < o1; o++) dbias[o] += (float)s[o - o0];
            }
        }
    }
}
