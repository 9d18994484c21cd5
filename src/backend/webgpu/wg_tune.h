// wg_tune.h — the GEMM tiles of a GPU the tile table does not know, found by timing and kept in
// a cache file per adapter and driver (docs/tuning.md). The tile table in wg_ops_matmul.c holds
// the measured rows of known GPUs; for any other GPU a one-time tuning run times the candidate
// tiles of each GEMM (matmul, matmul_t, matmul_at) at a large and a small output, checks each
// candidate's results against a double-precision host computation, and stores the fastest in
//   $WGTRAIN_TUNE_CACHE, or $XDG_CACHE_HOME/wgtrain/tuning.json, or ~/.cache/wgtrain/tuning.json
// under a key of the adapter's vendor, architecture, name, driver, backend, the matmul kernel's
// source and the wgtrain release, so that a new driver or a changed kernel is tuned afresh.
// Every context reads its entry when it opens (wg_tune_load); a cache that is missing, malformed
// or has no entry for the device is ignored (with a note on stderr when it is malformed), and the
// tile table applies.
//
// `wgtrain tune` runs the tuning on request; `wgtrain train` and `wgtrain bench` run it once,
// with a progress line, on a hardware GPU that neither the table nor the cache knows
// (wg_tune_auto; WGTRAIN_AUTOTUNE=0 turns that off, =1 makes it run on software adapters too).
#ifndef WGT_WG_TUNE_H
#define WGT_WG_TUNE_H
#include <stdio.h>
#include "backend/backend.h"
#include "backend/webgpu/wg_runtime.h"

#define WG_TUNE_OPS 3      // matmul, matmul_t, matmul_at (mm_variant order)
#define WG_TUNE_CLASSES 2  // 0: large outputs ("big" tile), 1: outputs of few tiles ("small")

// One tuning run's outcome: per op and class the chosen tile, its and the table's GFLOP/s.
typedef struct {
    wg_mm_tile_spec tile[WG_TUNE_OPS][WG_TUNE_CLASSES];
    double gflops[WG_TUNE_OPS][WG_TUNE_CLASSES];        // of the chosen tile
    wg_mm_tile_spec table_tile[WG_TUNE_OPS][WG_TUNE_CLASSES];  // the tile the table gives (the baseline)
    double table_gflops[WG_TUNE_OPS][WG_TUNE_CLASSES];         // and its GFLOP/s
    int candidates;                                     // tiles timed per op and class (at most)
} wg_tune_result;

typedef struct {
    int quick;          // fewer candidates and repetitions (the automatic run)
    int max_candidates; // of the built-in list, at most this many that fit the device (0: quick 6, else 13)
    const char *tiles;  // the candidates, comma-separated BMxBNxBK/TMxTN (NULL: the built-in list)
    FILE *progress;     // a progress line is rewritten here on a terminal, else a line per GEMM (NULL: silent)
} wg_tune_opts;

// The cache file this process uses, or NULL when WGTRAIN_TUNE_CACHE=off (or no path is known:
// neither XDG_CACHE_HOME nor HOME is set).
const char *wg_tune_cache_path(wg_ctx *ctx, char *buf, size_t cap);
// The device's cache key ("vendor|architecture|name|driver|backend|k=<hash of 03_matmul.wgsl>|wgtrain <v>").
void wg_tune_key(wg_ctx *ctx, char *buf, size_t cap);
// Parses the text of a cache file: 1 with the six tiles of key's entry (each a valid spec; whether
// they fit a device is the caller's to check), 0 when the cache has no entry for key, -1 when the
// text is not a tuning cache and -2 when key's entry is malformed (*why says how, for both).
int wg_tune_parse(const char *text, size_t n, const char *key, wg_mm_tile_spec t[WG_TUNE_OPS][WG_TUNE_CLASSES],
                  char *why, size_t cap);
// Whether the cache file at path may be written: missing, empty, or a file that names itself a
// tuning cache (a malformed one of ours is rewritten whole); any other file (not ours, over
// 1 MiB, not a regular file) is refused, naming it.
wgt_status wg_tune_cache_check(const char *path);
// Reads the device's entry from the cache into the context's settings (mm_tuned); called by
// wg_ctx_init. Never fails: a bad cache is reported on stderr and ignored.
void wg_tune_load(wg_ctx *ctx);
// Times the candidate tiles on this device (at 8x smaller shapes on a software adapter) and fills
// *r; the context's tiles are then the tuned ones (for this process). Fails only when the device
// fails.
wgt_status wg_tune_run(wgt_backend *be, const wg_tune_opts *o, wg_tune_result *r);
// Whether every tile of a comma-separated list is valid and runs on this device (1..64 of them);
// else 0 and the first one that is not in *bad.
int wg_tune_tiles_valid(wg_ctx *ctx, const char *list, char *bad, size_t cap);
// Writes r as the device's entry of the cache at path, atomically: the other devices' entries
// are kept, the newest WG_TUNE_MAX_DEVICES - 1 of them (one pass over the file: linear in its
// size, which is at most 1 MiB); a malformed cache of ours is replaced; a file that is not a
// tuning cache is refused (wg_tune_cache_check).
#define WG_TUNE_MAX_DEVICES 64
wgt_status wg_tune_save(wg_ctx *ctx, const char *path, const wg_tune_result *r);
// The automatic run: when the device is a hardware GPU (or WGTRAIN_AUTOTUNE=1), the tile table
// has no row for it, the cache has no entry and the cache path is known, tunes (quick, with a
// progress line on stderr) and saves. A failure to save is reported on stderr, not returned:
// the tuned tiles still apply to this process.
wgt_status wg_tune_auto(wgt_backend *be);
#endif
