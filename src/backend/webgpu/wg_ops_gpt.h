// wg_ops_gpt.h — bench and test hooks of the GPT-2 matmul wrapper (wg_ops_matmul.c). Its choices
// (tile shape, split-K, vec4 loads, raster groups) are settings of the context (wg_settings.h,
// through wg_ctx_settings); the binding windows are the runtime's (wg_runtime.h).
#ifndef WGT_WG_OPS_GPT_H
#define WGT_WG_OPS_GPT_H
#include "backend/webgpu/wg_ops.h"

// BENCH ONLY: what the GEMM of op (0 matmul, 1 matmul_t, 2 matmul_at) would choose for these
// sizes under the current settings, as text ("128x128 tiles 36 split 15 vec4 1 group 8").
const char *wg_mm_describe(wgt_backend *be, int op, uint32_t N, uint32_t C, uint32_t OC, char *buf, size_t cap);

// "matmul", "matmul_t" or "matmul_at" (op 0, 1, 2): the entry point, and the op's name in reports
// and in the tuning cache.
const char *wg_mm_op_name(int op);
// Whether the GEMMs would run tile t on this device (a valid spec within its workgroup memory
// and threads).
int wg_mm_tile_fits(wg_ctx *ctx, const wg_mm_tile_spec *t);
// Whether the tile table has a row for this device other than the generic default.
int wg_mm_table_knows(wg_ctx *ctx);
// Whether this device's row of the tile table takes the transposed copies (WGTRAIN_MM_TCOPY auto).
int wg_mm_table_tcopy(wg_ctx *ctx);
// Whether this device's row runs a direct GEMM's tiles in reverse order (WGTRAIN_MM_EDGE_FIRST auto).
int wg_mm_table_edge_first(wg_ctx *ctx);
// The big and small tiles of op (0 matmul, 1 matmul_t, 2 matmul_at) on this device without a
// WGTRAIN_MM_TILE override, and where they come from: "tuned", the table row's pattern
// ("nvidia") or "default".
const char *wg_mm_tiles(wg_ctx *ctx, int op, wg_mm_tile_spec *big, wg_mm_tile_spec *small);

// BENCH ONLY: `groups` workgroups of 256 threads, each thread 64·iters FP32 FLOPs of independent
// FMAs (the device's FMA ceiling through this compiler stack); writes groups*256 floats to out.
void wg_matmul_peak(wgt_backend *be, wgt_view out, uint32_t groups, uint32_t iters);
#endif
