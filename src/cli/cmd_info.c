// cmd_info.c — `wgtrain info`: which adapter wgtrain would use, its features and limits.
#include <stdio.h>
#include <string.h>
#include "backend/cpu/blas_core.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/webgpu/wg_runtime.h"
#include "cli/cli.h"

static const char *const info_flags[] = {"--device=", "--adapter=", "--help", NULL};

int cmd_info(int argc, char **argv) {
    const char *adapter = NULL;
    if (cli_args_split(&argc, &argv, info_flags) != WGT_OK) return cli_fail("info", WGT_ERR_ARG);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            printf("usage: wgtrain info [--adapter auto|gpu|software|NAME]\n"
                   "  Prints the WebGPU adapter wgtrain picks (a real GPU first, else Mesa lavapipe, the\n"
                   "  software GPU), its backend, features and limits. --device cpu is the C backend, which\n"
                   "  has no adapter.\n");
            return 0;
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            const char *d = argv[++i];
            if (!strcmp(d, "cpu")) {
                printf("device:       cpu (the C backend: OpenMP threads and OpenBLAS; no WebGPU adapter)\n");
                const char *best = cpu_blas_core_for_cpu();
                printf("blas kernels: %s (OpenBLAS; this CPU's best: %s)\n", cpu_blas_core(), best ? best : "as detected");
                if (cpu_isa_init() != WGT_OK) {
                    fprintf(stderr, "wgtrain info: %s\n", wgt_last_error());
                    return 1;
                }
                printf("cpu loops:    %s (WGTRAIN_CPU_ISA=baseline|avx2|avx512 forces one the CPU has)\n",
                       cpu_isa_name(cpu_isa_active()));
                return 0;
            }
            if (strcmp(d, "webgpu") && strcmp(d, "auto")) {
                fprintf(stderr, "wgtrain info: unknown device '%s'; use cpu, webgpu or auto\n", d);
                return 2;
            }
        } else if (!strcmp(argv[i], "--adapter") && i + 1 < argc) {
            adapter = argv[++i];
        } else {
            if (cli_flag_known(argv[i], info_flags)) wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", argv[i]);
            else cli_unknown_flag("info", argv[i], info_flags);
            fprintf(stderr, "wgtrain info: %s\n", wgt_last_error());
            return 2;
        }
    }
    wg_ctx *ctx;
    wgt_status st = wg_ctx_init(&ctx, adapter, 0);
    if (st != WGT_OK) return cli_fail("info", st);
    const wg_device_info *d = wg_ctx_info(ctx);
    const WGPULimits *L = &d->limits;
    printf("adapter:      %s\n", d->name);
    printf("vendor:       %s (%s)\n", d->vendor, d->architecture);
    printf("driver:       %s\n", d->driver);
    printf("backend:      %s\n", wg_backend_type_name(d->backend));
    printf("type:         %s\n", wg_adapter_type_name(d->type));
    printf("subgroups:    %s (size %u..%u)\n", d->has_subgroups ? "yes" : "no", d->subgroup_min, d->subgroup_max);
    printf("shader-f16:   %s\n", d->has_f16 ? "yes" : "no");
    printf("timestamps:   %s\n", d->has_timestamp ? "yes" : "no");
    printf("features:    ");
    for (size_t i = 0; i < d->n_features; i++) {
        const char *n = wg_feature_name(d->features[i]);
        if (n) printf(" %s", n);
        else printf(" 0x%x", (unsigned)d->features[i]);
    }
    printf("\nlimits:\n");
    printf("  maxBufferSize                     %llu\n", (unsigned long long)L->maxBufferSize);
    printf("  maxStorageBufferBindingSize       %llu\n", (unsigned long long)L->maxStorageBufferBindingSize);
    printf("  maxStorageBuffersPerShaderStage   %u\n", L->maxStorageBuffersPerShaderStage);
    printf("  maxUniformBufferBindingSize       %llu\n", (unsigned long long)L->maxUniformBufferBindingSize);
    printf("  maxComputeWorkgroupStorageSize    %u\n", L->maxComputeWorkgroupStorageSize);
    printf("  maxComputeInvocationsPerWorkgroup %u\n", L->maxComputeInvocationsPerWorkgroup);
    printf("  maxComputeWorkgroupSize           %u x %u x %u\n", L->maxComputeWorkgroupSizeX, L->maxComputeWorkgroupSizeY,
           L->maxComputeWorkgroupSizeZ);
    printf("  maxComputeWorkgroupsPerDimension  %u\n", L->maxComputeWorkgroupsPerDimension);
    printf("  minStorageBufferOffsetAlignment   %u\n", L->minStorageBufferOffsetAlignment);
    printf("  maxImmediateSize                  %u\n", L->maxImmediateSize);
    wg_ctx_free(ctx);
    return 0;
}
