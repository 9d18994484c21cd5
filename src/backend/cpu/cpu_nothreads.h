// cpu_nothreads.h — what the CPU backend uses of OpenMP, pthreads and OpenBLAS, for a build
// without them (the browser build: `make web`, docs/web.md). Without -fopenmp a build is one
// thread: OpenMP's queries answer for a team of one and a once-guard is a flag. With WGT_NO_BLAS
// the three row-major sgemm shapes of ops_matmul.c are plain loops (our own: the only BLAS in
// Debian for wasm32 is none); they sum over the reduction index in order, in f32.
#ifndef WGT_CPU_NOTHREADS_H
#define WGT_CPU_NOTHREADS_H
#include <stddef.h>

#ifdef _OPENMP
#include <omp.h>
#include <pthread.h>
#define CPU_ONCE_T pthread_once_t
#define CPU_ONCE_INIT PTHREAD_ONCE_INIT
#define cpu_once(flag, fn) pthread_once(flag, fn)
#else
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_max_threads(void) { return 1; }
#define CPU_ONCE_T int
#define CPU_ONCE_INIT 0
#define cpu_once(flag, fn) do { if (!*(flag)) { *(flag) = 1; (fn)(); } } while (0)
#endif

#ifdef WGT_NO_BLAS
enum CBLAS_ORDER { CblasRowMajor = 101 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };
// C[M,N] = alpha·op(A)[M,K]·op(B)[K,N] + beta·C, row-major with leading dimensions lda/ldb/ldc
static inline void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N,
                               int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                               int ldc) {
    (void)order;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) {
                float a = ta == CblasNoTrans ? A[(size_t)i * lda + k] : A[(size_t)k * lda + i];
                float b = tb == CblasNoTrans ? B[(size_t)k * ldb + j] : B[(size_t)j * ldb + k];
                s += a * b;
            }
            float *c = &C[(size_t)i * ldc + j];
            *c = alpha * s + (beta == 0 ? 0 : beta * *c);
        }
}
static inline void openblas_set_num_threads(int n) { (void)n; }
static inline const char *openblas_get_corename(void) { return "none (plain C loops)"; }
#else
#include <cblas.h>
#endif
#endif
