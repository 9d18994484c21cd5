// wg_ops_gpt.h — helpers shared by the GPT-2 op wrappers (embedding, norm, matmul, residual,
// optimizer): binding windows and the binding-size limit with its test-only override.
#ifndef WGT_WG_OPS_GPT_H
#define WGT_WG_OPS_GPT_H
#include "backend/webgpu/wg_ops.h"

// TEST ONLY: when nonzero, the GPT-2 op wrappers treat this many elements as the largest storage
// binding (if below the device's), so that their splitting paths run on small tensors. Never set
// it outside tests and benchmarks.
extern size_t wg_test_binding_limit;

// The binding-size limit in elements that the wrappers split against.
uint64_t wg_gpt_binding_limit(wgt_backend *be);

// A binding of `count` elements starting `start` elements into view v, bound from the
// 256-byte-aligned element at or below that start; *rem receives the offset of the wanted first
// element inside the binding (the kernel adds it). count 0 binds a placeholder.
wg_bind wg_gpt_window(wgt_view v, uint64_t start, uint64_t count, uint32_t *rem);

// TEST/BENCH ONLY: forces the matmul tile shape (AUTO: chosen per device and shape).
typedef enum { WG_MM_TILE_AUTO, WG_MM_TILE_BIG, WG_MM_TILE_SMALL } wg_mm_tile_choice;
extern wg_mm_tile_choice wg_mm_tile_override;

// TEST/BENCH ONLY: the other GEMM choices. WG_MM_AUTO (the default) leaves each to its
// environment variable, or when that is unset to the automatic choice; anything else forces it.
//   wg_mm_splitk_override (WGTRAIN_MM_SPLITK): 0 never split K; S >= 1 every GEMM through the
//     split-K path with up to S slices (1: the path with one slice); auto: small outputs, long K.
//   wg_mm_vec4_override (WGTRAIN_MM_VEC4): 0 scalar global loads; 1 vec4 where aligned (auto: 1).
//   wg_mm_group_override (WGTRAIN_MM_GROUP): row blocks per raster group, 1 = row-major (auto: 8).
#define WG_MM_AUTO (-1)
extern int wg_mm_splitk_override;
extern int wg_mm_vec4_override;
extern int wg_mm_group_override;

// BENCH ONLY: what the GEMM of op (0 matmul, 1 matmul_t, 2 matmul_at) would choose for these
// sizes under the current settings, as text ("128x128 tiles 36 split 15 vec4 1 group 8").
const char *wg_mm_describe(wgt_backend *be, int op, uint32_t N, uint32_t C, uint32_t OC, char *buf, size_t cap);

// BENCH ONLY: `groups` workgroups of 256 threads, each thread 64·iters FP32 FLOPs of independent
// FMAs (the device's FMA ceiling through this compiler stack); writes groups*256 floats to out.
void wg_matmul_peak(wgt_backend *be, wgt_view out, uint32_t groups, uint32_t iters);
#endif
