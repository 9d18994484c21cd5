// blas_core.c — makes OpenBLAS use the SIMD kernels of the CPU it runs on. Debian 12's OpenBLAS
// (0.3.21, built for every x86 core and choosing one when it loads) does not know CPUs newer than
// it, such as Intel's Emerald Rapids, and falls back to its Prescott kernels (SSE3 only): on such
// a 2-core Xeon a tiny-config CPU training step ran 1.4-2x slower than with its AVX-512 kernels.
// The core is chosen once, in the library's constructor, from OPENBLAS_CORETYPE; so when that is
// unset and the fallback happened on a CPU with AVX2 or AVX-512, the program sets it and
// re-executes itself, before it has done anything else (docs/architecture.md#the-cpu-backend).
#include "backend/cpu/blas_core.h"
#include "backend/cpu/cpu_nothreads.h"  // cblas.h, or the stand-ins of a build without BLAS
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

const char *cpu_blas_core_for_cpu(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}

const char *cpu_blas_core(void) { return openblas_get_corename(); }

void cpu_blas_core_fix(char **argv) {
    if (getenv("OPENBLAS_CORETYPE")) return;  // the user's choice, or this is the re-executed process
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "prescott")) return;
    const char *better = cpu_blas_core_for_cpu();
    if (!better || setenv("OPENBLAS_CORETYPE", better, 1) != 0) return;
    execv("/proc/self/exe", argv);
    // no /proc, or the binary is gone: carry on with the slow kernels, and the variable set for
    // the children this process may start
}
