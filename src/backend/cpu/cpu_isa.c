// cpu_isa.c — the choice of the CPU backend's instruction-set variant (cpu_isa.h): detected once,
// or forced by WGTRAIN_CPU_ISA so that every variant the machine has can be tested against the
// others.
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_nothreads.h"  // pthread_once, or a flag in a build of one thread
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const isa_names[CPU_ISA_COUNT] = {"baseline", "avx2", "avx512"};
static cpu_isa isa_chosen;
static wgt_status isa_status = WGT_OK;
static char isa_msg[256];
static CPU_ONCE_T isa_once = CPU_ONCE_INIT;

const char *cpu_isa_name(cpu_isa isa) { return (unsigned)isa < CPU_ISA_COUNT ? isa_names[isa] : "unknown"; }

int cpu_isa_supported(cpu_isa isa) {
    if (isa == CPU_ISA_BASELINE) return 1;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (isa == CPU_ISA_AVX2) return __builtin_cpu_supports("avx2") != 0;
    if (isa == CPU_ISA_AVX512) return __builtin_cpu_supports("avx512f") != 0;
#endif
    return 0;
}

static void supported_list(char *dst, size_t cap) {
    dst[0] = 0;
    for (int i = 0; i < CPU_ISA_COUNT; i++)
        if (cpu_isa_supported((cpu_isa)i))
            snprintf(dst + strlen(dst), cap - strlen(dst), "%s%s", dst[0] ? ", " : "", isa_names[i]);
}

static void isa_decide(void) {
    const char *env = getenv("WGTRAIN_CPU_ISA");
    isa_chosen = CPU_ISA_BASELINE;
    for (int i = CPU_ISA_COUNT - 1; i > 0; i--)
        if (cpu_isa_supported((cpu_isa)i)) { isa_chosen = (cpu_isa)i; break; }
    if (!env || !*env) return;
    char have[64];
    supported_list(have, sizeof have);
    for (int i = 0; i < CPU_ISA_COUNT; i++) {
        if (strcmp(env, isa_names[i]) != 0) continue;
        if (cpu_isa_supported((cpu_isa)i)) { isa_chosen = (cpu_isa)i; return; }
        snprintf(isa_msg, sizeof isa_msg, "WGTRAIN_CPU_ISA=%s: this CPU (or build) has no %s; it supports %s (unset "
                 "the variable to use the best one)", env, env, have);
        isa_status = WGT_ERR_CONFIG;
        return;
    }
    snprintf(isa_msg, sizeof isa_msg, "WGTRAIN_CPU_ISA='%.40s' is not an instruction set of the CPU backend; use "
             "baseline, avx2 or avx512 (this CPU supports %s), or unset it", env, have);
    isa_status = WGT_ERR_CONFIG;
}

wgt_status cpu_isa_init(void) {
    cpu_once(&isa_once, isa_decide);
    return isa_status == WGT_OK ? WGT_OK : wgt_fail(isa_status, "%s", isa_msg);
}

cpu_isa cpu_isa_active(void) {
    cpu_once(&isa_once, isa_decide);
    WGT_ASSERT(isa_status == WGT_OK, isa_msg);
    return isa_chosen;
}

wgt_status cpu_isa_set(cpu_isa isa) {
    cpu_once(&isa_once, isa_decide);
    if ((unsigned)isa >= CPU_ISA_COUNT || !cpu_isa_supported(isa))
        return wgt_fail(WGT_ERR_CONFIG, "the CPU backend cannot run its %s variant on this CPU", cpu_isa_name(isa));
    isa_chosen = isa;
    isa_status = WGT_OK;
    return WGT_OK;
}
