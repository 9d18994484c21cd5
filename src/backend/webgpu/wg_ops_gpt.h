// wg_ops_gpt.h — bench and test hooks of the GPT-2 matmul wrapper (wg_ops_matmul.c). Its choices
// (tile shape, split-K, vec4 loads, raster groups) are settings of the context (wg_settings.h,
// through wg_ctx_settings); the binding windows are the runtime's (wg_runtime.h).
#ifndef WGT_WG_OPS_GPT_H
#define WGT_WG_OPS_GPT_H
#include "backend/webgpu/wg_ops.h"

// BENCH ONLY: what the GEMM of op (0 matmul, 1 matmul_t, 2 matmul_at) would choose for these
// sizes under the current settings, as text ("128x128 tiles 36 split 15 vec4 1 group 8").
const char *wg_mm_describe(wgt_backend *be, int op, uint32_t N, uint32_t C, uint32_t OC, char *buf, size_t cap);

// BENCH ONLY: `groups` workgroups of 256 threads, each thread 64·iters FP32 FLOPs of independent
// FMAs (the device's FMA ceiling through this compiler stack); writes groups*256 floats to out.
void wg_matmul_peak(wgt_backend *be, wgt_view out, uint32_t groups, uint32_t iters);
#endif
