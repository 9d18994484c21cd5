// cmd_tune.c — `wgtrain tune`: times the GEMM tile candidates on this GPU and caches the fastest
// per adapter and driver (src/backend/webgpu/wg_tune.h, docs/tuning.md); `--show` prints the
// tiles in use and where they come from.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/webgpu/wg_ops.h"
#include "backend/webgpu/wg_ops_gpt.h"
#include "backend/webgpu/wg_tune.h"
#include "cli/cli.h"

static const char *const tune_flags[] = {"--adapter=", "--cache=", "--tiles=", "--quick", "--show", "--help", NULL};

static void print_tiles(wg_ctx *ctx) {
    char path[4096];
    const char *p = wg_tune_cache_path(ctx, path, sizeof path);
    printf("tuning cache: %s\n", p ? p : "off");
    for (int op = 0; op < WG_TUNE_OPS; op++) {
        wg_mm_tile_spec big, small;
        const char *src = wg_mm_tiles(ctx, op, &big, &small);
        char b[32], s[32];
        wg_mm_tile_spec_text(&big, b, sizeof b), wg_mm_tile_spec_text(&small, s, sizeof s);
        printf("%-10s large %-15s small %-15s (%s%s)\n", wg_mm_op_name(op), b, s, !strcmp(src, "tuned") || !strcmp(src, "default")
               ? "" : "tile table: ", src);
    }
}

static wgt_status tune_main(int argc, char **argv) {
    const char *adapter = NULL, *cache = NULL, *tiles = NULL;
    int quick = 0, show = 0;
    WGT_TRY(cli_args_split(&argc, &argv, tune_flags));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) {
            printf("usage: wgtrain tune [--adapter auto|gpu|software|NAME] [--quick] [--tiles LIST] [--cache PATH] [--show]\n"
                   "  Times the tile shapes of the three GEMMs (matmul, matmul_t, matmul_at) on this GPU, at a large\n"
                   "  and a small output each, checks every candidate's results against the host, and caches the\n"
                   "  fastest for this adapter and driver. Every later run on this GPU uses them; `train` and `bench`\n"
                   "  do this once by themselves on a GPU that the built-in tile table does not know.\n"
                   "  --quick   fewer candidates and repetitions (what the automatic run does)\n"
                   "  --tiles   the candidates, comma-separated BMxBNxBK/TMxTN (default: a built-in list of 14)\n"
                   "  --cache   the cache file (default: WGTRAIN_TUNE_CACHE, else $XDG_CACHE_HOME/wgtrain/tuning.json\n"
                   "            or ~/.cache/wgtrain/tuning.json)\n"
                   "  --show    print the tiles in use and where they come from; time nothing\n");
            exit(0);
        } else if (!strcmp(a, "--quick")) quick = 1;
        else if (!strcmp(a, "--show")) show = 1;
        else if (!strcmp(a, "--adapter") && i + 1 < argc) adapter = argv[++i];
        else if (!strcmp(a, "--tiles") && i + 1 < argc) tiles = argv[++i];
        else if (!strcmp(a, "--cache") && i + 1 < argc) {
            cache = argv[++i];
            if (!*cache || !strcmp(cache, "off") || !strcmp(cache, "auto") || strlen(cache) >= 4096)
                return wgt_fail(WGT_ERR_ARG, "--cache needs the path of a file (at most 4095 bytes; 'off' and 'auto' are "
                                "WGTRAIN_TUNE_CACHE's words, not paths)");
        } else if (cli_flag_known(a, tune_flags)) {
            return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        } else {
            return cli_unknown_flag("tune", a, tune_flags);
        }
    }
    // the context reads its cache when it opens: point it at ours first
    if (cache && setenv("WGTRAIN_TUNE_CACHE", cache, 1) != 0) return wgt_fail(WGT_ERR_ARG, "cannot set WGTRAIN_TUNE_CACHE");
    wgt_backend *be;
    WGT_TRY(cli_backend_open(&be, "webgpu", adapter, 0));
    wg_ctx *ctx = wg_of(be);
    const wg_device_info *d = wg_ctx_info(ctx);
    printf("tune: %s (%s; %s)\n", d->name, d->vendor, d->driver);
    if (show) {
        print_tiles(ctx);
        be->free(be);
        return WGT_OK;
    }
    char path[4096];
    const char *p = wg_tune_cache_path(ctx, path, sizeof path);
    if (!p) {
        be->free(be);
        return wgt_fail(WGT_ERR_ARG, "no tuning cache to write: WGTRAIN_TUNE_CACHE is off (or neither XDG_CACHE_HOME nor "
                        "HOME is set); give --cache PATH");
    }
    // a file at the path that is not a tuning cache is refused before the run, not replaced after it
    wgt_status cs = wg_tune_cache_check(p);
    if (cs != WGT_OK) {
        be->free(be);
        return cs;
    }
    char bad[1100];
    if (tiles && !wg_tune_tiles_valid(ctx, tiles, bad, sizeof bad)) {
        wgt_status e = wgt_fail(WGT_ERR_ARG, "--tiles: '%s' is not a tile BMxBNxBK/TMxTN that this device runs (TM, TN 4 "
                                "or 8; BM, BN multiples of 16 up to 256; BK 4, 8, 16 or 32; 64, 128 or 256 threads; within "
                                "its %u bytes of workgroup memory); give 1 to 64 of them", bad,
                                d->limits.maxComputeWorkgroupStorageSize);
        be->free(be);
        return e;
    }
    const int software = d->type == WGPUAdapterType_CPU;
    wg_tune_opts o = {quick, 0, tiles, stderr};
    wg_tune_result r;
    wgt_status st = wg_tune_run(be, &o, &r);
    if (st == WGT_OK) {
        printf("%-10s %-6s %-15s %10s   %-15s %10s  %s\n", "op", "output", "tuned", "GFLOP/s", "before", "GFLOP/s", "gain");
        for (int op = 0; op < WG_TUNE_OPS; op++) {
            for (int c = 0; c < WG_TUNE_CLASSES; c++) {
                char t[32], was[32];
                wg_mm_tile_spec_text(&r.tile[op][c], t, sizeof t);
                wg_mm_tile_spec_text(&r.table_tile[op][c], was, sizeof was);
                double g = r.gflops[op][c], b = r.table_gflops[op][c];
                printf("%-10s %-6s %-15s %10.1f   %-15s %10.1f  %+.0f%%\n", wg_mm_op_name(op), c ? "small" : "large", t, g,
                       was, b, b > 0 ? (g / b - 1) * 100 : 0.0);
            }
        }
        if (software)
            printf("(a software adapter: the shapes were 8x smaller, and its figures say little about a GPU)\n");
        st = wg_tune_save(ctx, p, &r);
        if (st == WGT_OK) printf("saved to %s (%d candidates a GEMM)\n", p, r.candidates);
    }
    be->free(be);
    return st;
}

int cmd_tune(int argc, char **argv) {
    wgt_status st = tune_main(argc, argv);
    return st == WGT_OK ? 0 : cli_fail("tune", st);
}
