// cpu_isa.h — which instruction set the CPU backend's hot loops run with. Each such loop
// (GeLU, SwiGLU and their backwards, an attention row) is compiled three times: for plain x86-64
// (baseline), AVX2 and AVX-512F, and one table entry per ISA is chosen once, the first time an op
// asks. By default that is the best the CPU has; WGTRAIN_CPU_ISA=baseline|avx2|avx512 forces one
// (refused with a clear error when the CPU lacks it), so that the test suite can run every
// variant the machine supports and require the same bits from each (docs/numerics.md#cpu-isa).
#ifndef WGT_CPU_ISA_H
#define WGT_CPU_ISA_H
#include "core/error.h"

typedef enum { CPU_ISA_BASELINE = 0, CPU_ISA_AVX2 = 1, CPU_ISA_AVX512 = 2, CPU_ISA_COUNT = 3 } cpu_isa;

// "baseline", "avx2", "avx512"
const char *cpu_isa_name(cpu_isa isa);
// 1 when this CPU (and this build: non-x86 builds have only the baseline) can run isa's variant.
int cpu_isa_supported(cpu_isa isa);
// The variant the ops use. The first call settles it from WGTRAIN_CPU_ISA (or the best one
// supported); an unknown or unsupported setting aborts with a message there, but
// backend_cpu_init checks the setting first and returns the error instead.
cpu_isa cpu_isa_active(void);
// Validates WGTRAIN_CPU_ISA (unset or empty: fine) and settles the choice; WGT_ERR_CONFIG with a
// message naming the value and the supported ones otherwise.
wgt_status cpu_isa_init(void);
// Switches the variant (tests comparing them in one process); WGT_ERR_CONFIG if unsupported.
// Not to be called while ops run on other threads.
wgt_status cpu_isa_set(cpu_isa isa);

// Defines `static void name(params)` as a dispatcher over three copies of `body`, one compiled for
// each ISA (target attributes; the body is a static always-inline function, so the static inline
// helpers it calls are compiled into each copy too). args: the parameter names, in parentheses.
#if defined(__x86_64__) && defined(__GNUC__)
#define CPU_ISA_DISPATCH(name, params, args)                                                   \
    static inline __attribute__((always_inline)) void name##_body params;                     \
    __attribute__((target("avx512f"))) static void name##_avx512 params { name##_body args; } \
    __attribute__((target("avx2"))) static void name##_avx2 params { name##_body args; }      \
    static void name##_baseline params { name##_body args; }                                  \
    static void name params {                                                                 \
        switch (cpu_isa_active()) {                                                           \
        case CPU_ISA_AVX512: name##_avx512 args; break;                                       \
        case CPU_ISA_AVX2: name##_avx2 args; break;                                           \
        default: name##_baseline args; break;                                                 \
        }                                                                                     \
    }                                                                                         \
    static inline __attribute__((always_inline)) void name##_body params
#else
#define CPU_ISA_DISPATCH(name, params, args)                                                   \
    static inline void name##_body params;                                                    \
    static void name params { name##_body args; }                                             \
    static inline void name##_body params
#endif
#endif
