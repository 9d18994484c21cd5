// wg_ops.h — the WebGPU implementation of each backend op (one wrapper per kernel). Each is
// defined in the wg_ops_<family>.c file next to the WGSL it dispatches; backend_webgpu.c puts
// them into the wgt_backend table. The arguments are those of backend.h.
#ifndef WGT_WG_OPS_H
#define WGT_WG_OPS_H
#include "backend/backend.h"
#include "backend/webgpu/wg_runtime.h"

// the wg_ctx behind a webgpu backend
static inline wg_ctx *wg_of(wgt_backend *be) { return (wg_ctx *)be->impl; }
static inline wg_bind wg_b(wgt_view v, size_t n) { wg_bind b = {v, n}; return b; }
static inline uint64_t wg_groups(uint64_t n, uint64_t per) { return (n + per - 1) / per; }

// Element type of the element-wise kernels (06, 09, 14): 4 floats per thread when the length and
// every view offset are multiples of 4 (16-byte aligned vec4 bindings), else 1. Returns the lanes
// and sets *defines to the WGSL aliases the kernel source expects (WG_EW_F32: one float a thread).
#define WG_EW_F32 "alias EW = f32;\nalias EU = u32;\n"
static inline int wg_ew_lanes(size_t n, const wgt_view *views, int nv, const char **defines) {
    int ok = n % 4 == 0;
    for (int i = 0; i < nv; i++) ok = ok && views[i].off % 4 == 0;
    *defines = ok ? "alias EW = vec4<f32>;\nalias EU = vec4<u32>;\n" : WG_EW_F32;
    return ok ? 4 : 1;
}

// wg_<op>(be, outputs, inputs, sizes) for every op of op_list.h, defined in wg_ops_<family>.c
#define WG_PROTO_(op, summary) void wg_##op(wgt_backend *be WGT_OP_##op(WGT_PARAM_B, WGT_PARAM_S));
WGT_OPS(WG_PROTO_)
#undef WG_PROTO_

// Column sums in two stages (03_matmul.wgsl, matmul_colsum_part / matmul_colsum_finish), for
// matmul_at's dbias and the LayerNorm parameter gradients where widths are multiples of 4:
// wg_colsum_scratch returns the partials' buffer for n floats, or NULL (then the caller runs its
// one-stage kernel) when n passes one binding or the buffer cannot be allocated;
// wg_colsum_finish adds out[N] += Σ_chunk part[part_off + chunk·N + n] (16 slices of the chunks,
// each summed in order, then the slices in order).
#define WG_COLSUM_ROWS 256u  // rows a chunk of the first stage (CS4_ROWS in 03_matmul.wgsl)
wgt_buf *wg_colsum_scratch(wgt_backend *be, uint64_t n);
void wg_colsum_finish(wgt_backend *be, const char *label, wgt_view out, wgt_view part, uint32_t N, uint32_t nchunk,
                      uint32_t part_off);
// matmul_at's dbias alone (bench_kernels times it): dbias[OC] += the column sums of dout[N, OC].
void wg_matmul_at_dbias(wgt_backend *be, wgt_view dbias, wgt_view dout, uint32_t N, uint32_t OC);

// The key splits decode_attention uses for `rows` query rows (B·T·NH) against caches of maxT
// positions (1: none; wg_ops_decode.c), for tests and benchmarks.
uint32_t wg_decode_attention_splits(wgt_backend *be, uint64_t rows, uint32_t maxT);
// Whether decode_attention takes the tiled kernel (decode_attention_tiles) for T new tokens a
// sequence at head size HS on this device (WGTRAIN_DECODE_TILES and the tiles that fit).
int wg_decode_attention_tiled(wgt_backend *be, uint32_t T, uint32_t HS);

// attention_backward with an explicit variant (0 auto, 1 streaming, 2 split-dKdV, 3 split-short,
// 4 fused, 5 rows: 17_attention_rows.wgsl, what auto runs where no tile fits the head size, 6 reg:
// the register-resident split pair);
// returns the variant that ran. The auto rule alone is wg_attention_backward_auto_variant.
int wg_attention_backward_with(wgt_backend *be, int variant, wgt_view dqkv, wgt_view dout, wgt_view qkv, wgt_view out,
                               wgt_view lse, wgt_view doc_start, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV,
                               uint32_t HS, float p, uint32_t seed, uint32_t window);
int wg_attention_backward_auto_variant(wgt_backend *be, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV,
                                       uint32_t HS);
// attention_forward through the row kernel whatever the head size (what attention_forward runs
// where no tile fits it), for tests.
void wg_attention_rows_forward(wgt_backend *be, wgt_view out, wgt_view lse, wgt_view qkv, wgt_view doc_start,
                               uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, float p_drop,
                               uint32_t seed, uint32_t window);
// For tests and benchmarks (tests/test_kernels_attention.c, bench/bench_attention.c): whether a
// forward (backward) setting text, complete or partial, parses and fits this device at head size
// HS, i.e. would be used as given rather than replaced by the default; and the settings the
// wrappers use now for HS as one line of text in buf ("fwd nl=..,tr=.. | bwd v=..,kv=..").
int wg_attention_fwd_cfg_ok(wgt_backend *be, uint32_t HS, const char *cfg);
int wg_attention_bwd_cfg_ok(wgt_backend *be, uint32_t HS, const char *cfg);
const char *wg_attention_describe(wgt_backend *be, uint32_t HS, char *buf, size_t cap);
#endif
