// wg_settings.h — the WebGPU backend's tuning and debugging settings: one struct per device
// context, filled from the environment once by wg_ctx_init and read by the op wrappers through
// wg_ctx_settings(ctx). Tests and benchmarks change fields (or call wg_settings_set) between ops
// instead of setting environment variables or globals; a change applies from the next op.
//
// The environment variables (docs/webgpu-settings.md is the same list with background):
// unset or empty means the default; a malformed or out-of-range value is a user error:
// wg_ctx_init fails with WGT_ERR_ARG and a message naming the variable and its accepted form.
//
//   variable                    accepted values        meaning (default)
//   WGTRAIN_ROBUST              0 | 1                  1: Dawn's bounds clamping on, to debug a
//                                                      suspected out-of-bounds access (0: off, every
//                                                      kernel checks its own bounds). Read when the
//                                                      device is created; changing it later does nothing.
//   WGTRAIN_MM_TILE             auto | big | small |   matmul tile shape (auto: the device's row of
//                               BMxBNxBK/TMxTN         the tile table, per output size); a spec forces
//                                                      one shape for every GEMM, e.g. 128x128x16/8x8
//   WGTRAIN_MM_PREFETCH         auto | 0 | 1           matmul prefetch of the next k-slice into
//                                                      registers (auto: the tile table's)
//   WGTRAIN_MM_WARP             auto | 0 | 4 | 8 | 16  matmul threads of a 32-lane group along n (0:
//                                                      row-major; auto: the tile table's)
//   WGTRAIN_MM_PAIR             auto | 0 | 1           matmul lanes paired on workgroup-memory reads
//                                                      (the lane index rotated by one bit; auto: the
//                                                      tile table's)
//   WGTRAIN_WG_ZERO_INIT        auto | 0 | 1           Dawn's zero-initialisation of workgroup memory
//                                                      (auto: on, as WGSL requires). Read when the
//                                                      device is created.
//   WGTRAIN_MM_SPLITK           auto | off | 0..1024   split-K: off or 0 never; S >= 1 every GEMM
//                                                      through the split path with up to S slices
//                                                      (auto: outputs of few tiles with a long K)
//   WGTRAIN_MM_STREAMK          auto | 0 | 1           the GEMMs that split-K takes, as stream-K
//                                                      instead (every workgroup the same share of
//                                                      the units of tile x k-slice; auto: 1)
//   WGTRAIN_MM_VEC4             auto | 0 | 1 | 2 | 3   vec4 operand loads where aligned: 1 both, 2 a B
//                                                      stored along n, 3 those stored along m or n
//                                                      (auto: 3); with 1-3 C stored as vec4 too
//   WGTRAIN_MM_GROUP            auto | 1..1024         row blocks per raster group, 1 = row-major
//                                                      (auto: 8)
//   WGTRAIN_MM_TCOPY            auto | 0 | 1           the forward GEMM (matmul) and matmul_t
//                                                     through transposed copies of their operands
//                                                     stored along k, in matmul_at's layout: 1
//                                                     wherever the copies fit the scratch, 0 never
//                                                     (auto: the tile table's row, at shapes where
//                                                     the copies cost less than they gain)
//   WGTRAIN_ATTN_FWD_CFG        k=v,...                attention forward tiles, keys nl, tr, bc, sg
//                                                      (integers), e.g. "nl=8,tr=2,bc=64,sg=1"
//   WGTRAIN_ATTN_BWD_CFG        k=v,...                attention backward: v=auto|stream|split|short|
//                                                      fused|reg|reg-ds, kv=/q=/st=BQxBK[/RQSxRKS],
//                                                      ncp=N, rkv=/rq=RLxRRxRB, rt, pf, dqb, dqk, dqm
//   WGTRAIN_ATTN_UNROLL         auto | 0 | 1           unrolled head-dimension loops (auto: on real
//                                                      GPUs, off on software adapters)
//   WGTRAIN_CE_CFG              k=v,...                cross_entropy kernel: wg=64..1024 (power of
//                                                      2), vec=0|1, sg=0|1, reg=0..16, sm=0..1024,
//                                                      rev=0|1; keys left out keep the default
//   WGTRAIN_F16                 auto | packed | native f16 storage of mixed precision: native
//                                                      array<f16> bindings where the device has
//                                                      shader-f16, else f16 pairs in u32 words
//                                                      (auto); packed forces the pairs (to test
//                                                      that path on an f16 device); native
//                                                      refuses a device without shader-f16
//   WGTRAIN_TUNE_CACHE          auto | off | PATH      the GEMM tuning cache (wg_tune.h; auto:
//                                                      $XDG_CACHE_HOME/wgtrain/tuning.json, else
//                                                      ~/.cache/wgtrain/tuning.json); off: neither
//                                                      read nor written
//   WGTRAIN_AUTOTUNE            auto | 0 | 1           the one-time tuning of train and bench on a
//                                                      GPU that neither the tile table nor the
//                                                      cache knows (auto: hardware GPUs only; 1:
//                                                      software adapters too; 0: never)
//   WGTRAIN_DECODE_SPLIT        auto | off | 1..64     decode_attention's key splits (split-K):
//                                                      off or 1 never; S forces S on every call
//                                                      (auto: few rows against a long cache,
//                                                      on a hardware GPU)
//   WGTRAIN_DECODE_TILES        auto | off | 0 | 1     decode_attention's tiled kernel for many
//                                                      new tokens a sequence (a prefill chunk):
//                                                      auto from 16 of them, 1 at any count,
//                                                      0 or off never (where a tile fits)
//   WGTRAIN_TEST_BINDING_LIMIT  0 | 256..2^62          TEST ONLY: the ops split tensors as if one
//                                                      storage binding held at most this many
//                                                      elements (0: the device's limit)
//
// The attention and cross_entropy texts are checked for their form here; whether a setting fits
// the device and head size is decided by the op (wg_ops_attention.c, wg_ops_loss.c document the
// keys), which reports one that does not fit once on stderr and runs its default instead.
#ifndef WGT_WG_SETTINGS_H
#define WGT_WG_SETTINGS_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

#define WG_AUTO (-1)  // an integer setting left to the automatic choice
#define WG_TCOPY_W 2  // WGTRAIN_MM_TCOPY=w: the forward copies its weight alone

typedef enum { WG_MM_TILE_AUTO, WG_MM_TILE_BIG, WG_MM_TILE_SMALL, WG_MM_TILE_SPEC } wg_mm_tile_choice;
// A matmul tile: BM x BN outputs per workgroup, BK-deep k-slices, TM x TN outputs a thread
// (kernels/03_matmul.wgsl; (BM/TM)*(BN/TN) threads).
typedef struct { int bm, bn, bk, tm, tn; } wg_mm_tile_spec;
// Whether a tile spec is one the kernel compiles (form only: workgroup memory is the device's).
int wg_mm_tile_spec_valid(const wg_mm_tile_spec *t);
// Parses "BMxBNxBK/TMxTN" (the whole text) into a valid spec; 0 when malformed or invalid.
int wg_mm_tile_spec_parse(const char *text, wg_mm_tile_spec *t);
// The spec as that text ("128x128x16/8x8").
void wg_mm_tile_spec_text(const wg_mm_tile_spec *t, char *buf, size_t cap);
typedef enum { WG_F16_AUTO, WG_F16_PACKED, WG_F16_NATIVE } wg_f16_choice;

// cross_entropy variant; each field WG_AUTO keeps the device's default
typedef struct { int wg, vec, sg, reg, sm, rev; } wg_ce_settings;

typedef struct {
    int robust;                  // WGTRAIN_ROBUST: 0 or 1
    wg_mm_tile_choice mm_tile;   // WGTRAIN_MM_TILE
    wg_mm_tile_spec mm_spec;     // WGTRAIN_MM_TILE=BMxBNxBK/TMxTN (mm_tile == WG_MM_TILE_SPEC)
    int mm_prefetch;             // WGTRAIN_MM_PREFETCH: WG_AUTO, 0 or 1
    int mm_warp;                 // WGTRAIN_MM_WARP: WG_AUTO, 0, 4, 8 or 16
    int mm_pair;                 // WGTRAIN_MM_PAIR: WG_AUTO, 0 or 1
    int mm_edge_first;           // WGTRAIN_MM_EDGE_FIRST: WG_AUTO, 0 or 1
    int wg_zero_init;            // WGTRAIN_WG_ZERO_INIT: WG_AUTO, 0 or 1
    int mm_splitk;               // WGTRAIN_MM_SPLITK: WG_AUTO, 0 (off) or S >= 1
    int mm_streamk;              // WGTRAIN_MM_STREAMK: WG_AUTO, 0 or 1
    int mm_vec4;                 // WGTRAIN_MM_VEC4: WG_AUTO, 0, 1, 2 or 3
    int mm_group;                // WGTRAIN_MM_GROUP: WG_AUTO or >= 1
    int mm_tcopy;                // WGTRAIN_MM_TCOPY: WG_AUTO, 0, 1 or WG_TCOPY_W ("w")
    char attn_fwd[256];          // WGTRAIN_ATTN_FWD_CFG ("" = the defaults)
    char attn_bwd[256];          // WGTRAIN_ATTN_BWD_CFG ("" = the defaults)
    int attn_unroll;             // WGTRAIN_ATTN_UNROLL: WG_AUTO, 0 or 1
    wg_ce_settings ce;           // WGTRAIN_CE_CFG
    wg_f16_choice f16;           // WGTRAIN_F16
    uint64_t binding_limit;      // WGTRAIN_TEST_BINDING_LIMIT: elements, 0 = the device's
    char tune_cache[4096];       // WGTRAIN_TUNE_CACHE: "" (auto), "off" or a path
    int autotune;                // WGTRAIN_AUTOTUNE: WG_AUTO, 0 or 1
    int decode_split;            // WGTRAIN_DECODE_SPLIT: WG_AUTO or S in 1..64 (off: 1)
    int decode_tiles;            // WGTRAIN_DECODE_TILES: WG_AUTO, 0 (off) or 1
    // Not from the environment: the device's tiles from the tuning cache or this process's
    // tuning run (wg_tune.h), per op (matmul, matmul_t, matmul_at) for large and small outputs;
    // they take the place of the tile table's row when mm_tuned is set.
    int mm_tuned;
    wg_mm_tile_spec mm_tuned_tile[3][2];
} wg_settings;

// Every field at its default (as with no variable set).
void wg_settings_default(wg_settings *s);
// Sets the field of environment variable `name` from `value` as if the environment held it
// (NULL or "" restores that field's default). On a malformed value nothing changes and the
// result is WGT_ERR_ARG with a message naming the variable and the accepted form; an unknown
// name is WGT_ERR_ARG too.
wgt_status wg_settings_set(wg_settings *s, const char *name, const char *value);
// The defaults, then every variable of the list above that is set. Called by wg_ctx_init.
wgt_status wg_settings_from_env(wg_settings *s);

// Provided by wg_ops_attention.c: whether an attention setting text has the form of
// WGTRAIN_ATTN_FWD_CFG (backward = 0) or WGTRAIN_ATTN_BWD_CFG (backward = 1).
int wg_attention_cfg_parses(const char *text, int backward);
#endif
