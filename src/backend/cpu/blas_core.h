// blas_core.h — which OpenBLAS kernels the CPU backend's GEMMs run (blas_core.c says why this
// needs care with Debian 12's OpenBLAS on new CPUs).
#ifndef WGT_BLAS_CORE_H
#define WGT_BLAS_CORE_H

// OpenBLAS's name of the kernels it uses ("SkylakeX", "Haswell", "Prescott", ...).
const char *cpu_blas_core(void);
// The kernels this CPU can run best among those OpenBLAS 0.3.21 has: "SkylakeX" (AVX-512),
// "Haswell" (AVX2 + FMA), or NULL (older x86 CPUs and other architectures: nothing to fix).
const char *cpu_blas_core_for_cpu(void);
// To be called first in main(): when OpenBLAS fell back to its Prescott kernels on a CPU with
// AVX2 or AVX-512 and OPENBLAS_CORETYPE is unset, sets it and re-executes the program with the
// same arguments (returns only when that is not needed or not possible).
void cpu_blas_core_fix(char **argv);
#endif
