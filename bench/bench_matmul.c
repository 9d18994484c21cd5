// bench_matmul.c — TFLOP/s of the three GEMMs (matmul, matmul_t, matmul_at) at the shapes of a
// GPT-2 124M training step (B*T = 8192 rows), the tied lm_head (V = 50257) and 4096³, against
// the FP32 FMA ceiling measured in the same run by a register-only kernel (docs/architecture.md#performance-principles: a ceiling
// from the same device, driver and moment). The matmuls are most of a training step's FLOPs.
//
// The GEMM wrapper has choices that only a measurement can settle (split-K, vec4 global loads,
// the raster order of the tiles, the tile shape); --sweep times every shape under a list of
// settings in one run and prints a table of TFLOP/s with the best setting of each GEMM and the
// step time each setting would give, so that one run on the target GPU picks the defaults.
//
// Timing: one warm-up call and a sync (pipeline creation, scratch growth, first touch), then
// --batches batches of --reps calls, each in one submit, wall-clock around its closing sync; with
// --profile the GPU timestamps of the same dispatches (split-K's reduce included) are the primary
// figure; with --busy the GPU time of the batch's compute pass instead, start to end, as a step
// runs it (--profile puts each dispatch in a pass of its own, whose boundary costs a few µs: a
// GEMM of two or three dispatches, a copy or stream-K's fixup beside the GEMM, reads that much
// slower than in a step; the peer's CUDA events around a batch of calls measure the batch too).
// The fastest batch is reported (wall and GPU time each): on the H200 one batch of the
// lm_head's forward read anywhere from 14.3 to 18.8 ms between runs of the same build, while the
// other shapes agreed to 1 % (bench/README.md). A spot
// check recomputes random output elements (and dbias elements) in double on the host from the
// same inputs (the timed calls of matmul_at accumulate, so its expected value is scaled by the
// call count).
//
// Usage: bench_matmul [--adapter auto|gpu|software|NAME] [--small] [--reps N] [--profile] [--sweep]
//                     [--tiles auto|big|small] [--splitk auto|off|S] [--vec4 0|1|2|3] [--group G]
//                     [--only NAME] [--rows N] [--vocab V] [--batches N]
// --small shrinks every shape (÷16 rows, ÷8 columns) so that the software GPU finishes quickly.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend/backend.h"
#include "backend/webgpu/wg_ops.h"
#include "backend/webgpu/wg_ops_gpt.h"
#include "core/clock.h"
#include "bench_common.h"


typedef enum { OP_MM, OP_MM_T, OP_MM_AT } op_kind;
static const char *const op_name[] = {"matmul", "matmul_t", "matmul_at"};

typedef struct { const char *name; uint32_t N, C, OC; int bias, per_step; } shape;  // per_step: calls in a GPT-2 step

// One setting of the GEMM wrapper's choices. skip_tiles > 0: forced settings that make no sense
// for large outputs (split-K of 25000 tiles) skip GEMMs with at least that many 128² tiles.
typedef struct {
    const char *name;
    wg_mm_tile_choice tiles;
    int splitk, vec4, group;
    uint64_t skip_tiles;
    const char *spec;  // a WGTRAIN_MM_TILE tile (BMxBNxBK/TMxTN) for every GEMM, or NULL
    const char *warp;  // a WGTRAIN_MM_WARP layout for every GEMM, or NULL (the tile table's)
    const char *pair;  // a WGTRAIN_MM_PAIR setting for every GEMM, or NULL (the tile table's)
} config;

static const config SWEEP[] = {
    {"old", WG_MM_TILE_AUTO, 0, 0, 1, 0, NULL, NULL, NULL},          // the wrapper before split-K / vec4 / groups
    {"vec4", WG_MM_TILE_AUTO, 0, 1, 1, 0, NULL, NULL, NULL},
    {"vec4+g8", WG_MM_TILE_AUTO, 0, 1, 8, 0, NULL, NULL, NULL},
    {"big,nosk", WG_MM_TILE_BIG, 0, 1, 8, 0, NULL, NULL, NULL},      // 128² tiles for small outputs, no split
    {"sk", WG_MM_TILE_AUTO, WG_AUTO, 0, 1, 0, NULL, NULL, NULL},
    {"sk+vec4", WG_MM_TILE_AUTO, WG_AUTO, 1, 1, 0, NULL, NULL, NULL},
    {"default", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, NULL, NULL, NULL},
    {"S=2", WG_MM_TILE_AUTO, 2, 1, 8, 1024, NULL, NULL, NULL},
    {"S=4", WG_MM_TILE_AUTO, 4, 1, 8, 1024, NULL, NULL, NULL},
    {"S=7", WG_MM_TILE_AUTO, 7, 1, 8, 1024, NULL, NULL, NULL},
    {"S=12", WG_MM_TILE_AUTO, 12, 1, 8, 1024, NULL, NULL, NULL},
    {"S=16", WG_MM_TILE_AUTO, 16, 1, 8, 1024, NULL, NULL, NULL},
    {"small,S=4", WG_MM_TILE_SMALL, 4, 1, 8, 1024, NULL, NULL, NULL},
};
#define N_SWEEP (sizeof SWEEP / sizeof SWEEP[0])
#define DEFAULT_CFG 6

// --sweep-tiles: the default wrapper, then one tile shape for every GEMM (split-K, vec4 and the
// raster order automatic; WGTRAIN_MM_PREFETCH=0 in the environment sweeps them without the
// register prefetch); a row of the tile table (wg_ops_matmul.c) comes from the best ones.
static const config TILE_SWEEP[] = {
    {"default", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, NULL, NULL, NULL},
    {"128²x16", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x128x16/8x8", NULL, NULL},
    {"128²x8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x128x8/8x8", NULL, NULL},
    {"128²x4", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x128x4/8x8", NULL, NULL},
    {"64x128x8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "64x128x8/8x8", NULL, NULL},
    {"128x64x8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x64x8/8x8", NULL, NULL},
    {"64x256x8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "64x256x8/8x8", NULL, NULL},
    {"64²x8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "64x64x8/8x8", NULL, NULL},
    {"64x128x4", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "64x128x4/8x8", NULL, NULL},
    {"128x64x4", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x64x4/8x8", NULL, NULL},
    {"64²x4", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "64x64x4/8x8", NULL, NULL},
    // the warp layouts (WGTRAIN_MM_WARP) and the narrower per-thread tiles (8x4, 4x8), whose fewer
    // accumulators leave registers for more workgroups a core
    {"default w0", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, NULL, "0", NULL},
    {"default w8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, NULL, "8", NULL},
    // paired lanes (WGTRAIN_MM_PAIR) on and off for every GEMM, and on the 8x4 tile
    {"default paired", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, NULL, NULL, "1"},
    {"default unpaired", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, NULL, NULL, "0"},
    {"128x64x8/8x4 w0 paired", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x64x8/8x4", "0", "1"},
    {"128²x4 w8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x128x4/8x8", "8", NULL},
    {"128x64x8/8x4 w0", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x64x8/8x4", "0", NULL},
    {"128x64x8/8x4 w4", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x64x8/8x4", "4", NULL},
    {"128x64x8/8x4 w8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x64x8/8x4", "8", NULL},
    {"128x64x8/8x4 w16", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x64x8/8x4", "16", NULL},
    {"128x64x8/8x4 w8 v4", WG_MM_TILE_AUTO, WG_AUTO, 1, WG_AUTO, 0, "128x64x8/8x4", "8", NULL},
    {"128x64x4/8x4 w8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x64x4/8x4", "8", NULL},
    {"128x64x16/8x4 w8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x64x16/8x4", "8", NULL},
    {"64x64x8/8x4 w8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "64x64x8/8x4", "8", NULL},
    {"128x32x8/8x4 w8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "128x32x8/8x4", "8", NULL},
    {"256x64x8 w8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "256x64x8/8x8", "8", NULL},
    {"64x128x8/4x8 w8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "64x128x8/4x8", "8", NULL},
    {"128²x4 w8 v4", WG_MM_TILE_AUTO, WG_AUTO, 1, WG_AUTO, 0, "128x128x4/8x8", "8", NULL},
    {"64x64x8/4x4 w8", WG_MM_TILE_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, 0, "64x64x8/4x4", "8", NULL},
};
#define N_TILE_SWEEP (sizeof TILE_SWEEP / sizeof TILE_SWEEP[0])
#define N_MAX_CFG (N_SWEEP > N_TILE_SWEEP ? N_SWEEP : N_TILE_SWEEP)

// Sets the context's GEMM settings to c; a field left automatic in c takes what the environment
// gave the context (env: its settings as wg_ctx_init read them).
static void config_apply(wgt_backend *be, const wg_settings *env, const config *c) {
    wg_settings *s = wg_ctx_settings(wg_of(be));
    s->mm_tile = c->tiles != WG_MM_TILE_AUTO ? c->tiles : env->mm_tile;
    s->mm_splitk = c->splitk != WG_AUTO ? c->splitk : env->mm_splitk;
    s->mm_vec4 = c->vec4 != WG_AUTO ? c->vec4 : env->mm_vec4;
    s->mm_group = c->group != WG_AUTO ? c->group : env->mm_group;
    if (!c->spec && c->tiles == WG_MM_TILE_AUTO) s->mm_spec = env->mm_spec;
    if (c->spec && wg_settings_set(s, "WGTRAIN_MM_TILE", c->spec) != WGT_OK) die("a tile of the sweep");
    s->mm_warp = env->mm_warp;
    if (c->warp && wg_settings_set(s, "WGTRAIN_MM_WARP", c->warp) != WGT_OK) die("a warp layout of the sweep");
    s->mm_pair = env->mm_pair;
    if (c->pair && wg_settings_set(s, "WGTRAIN_MM_PAIR", c->pair) != WGT_OK) die("a lane pairing of the sweep");
}

typedef struct {
    wgt_backend *be;
    int reps, profile, checks, warm;  // warm: 150 ms of calls before an op's timed batches
    int busy;                         // --busy: the batch's GPU time (gpu_timer) instead of --profile's
    int batches;                      // timed batches of reps calls; the fastest is reported
    uint64_t rng;
    double peak;  // GFLOP/s of the FMA ceiling
} bench;

// The GPU time of a batch of `reps` calls, a call's share: batch_begin before the calls (returns
// what batch_gpu_ms needs), batch_gpu_ms after their sync. NAN without --profile or --busy.
static double batch_begin(bench *B) {
    if (B->busy && B->be->gpu_timer_start(B->be) != WGT_OK) die("starting the GPU timer");
    return B->profile ? wg_profile_total_ms(wg_of(B->be)) : 0;
}
static double batch_gpu_ms(bench *B, double g0) {
    if (B->profile) return (wg_profile_total_ms(wg_of(B->be)) - g0) / B->reps;
    if (!B->busy) return NAN;
    double g = NAN;
    long passes = 0;
    if (B->be->gpu_timer_stop(B->be, &g, &passes) != WGT_OK || passes < 1) die("the GPU timer");
    if (passes > 1) fprintf(stderr, "bench_matmul: a batch ran as %ld passes\n", passes);
    return g / B->reps;
}

// host value of one output element of op for the given inputs, in double
static double ref_elem(op_kind op, const shape *s, const float *x, const float *w, const float *b, const float *d,
                       size_t r, size_t c) {
    double acc = 0;
    if (op == OP_MM) {  // out[r, c] = Σ_k inp[r,k] W[c,k] + bias[c]
        for (size_t k = 0; k < s->C; k++) acc += (double)x[r * s->C + k] * w[c * s->C + k];
        if (b) acc += b[c];
    } else if (op == OP_MM_T) {  // dinp[r, c] = Σ_o dout[r,o] W[o,c]
        for (size_t o = 0; o < s->OC; o++) acc += (double)d[r * s->OC + o] * w[o * s->C + c];
    } else {  // dW[r, c] = Σ_n dout[n,r] inp[n,c]
        for (size_t n = 0; n < s->N; n++) acc += (double)d[n * s->OC + r] * x[n * s->C + c];
    }
    return acc;
}

// the inputs and outputs of one shape, on the host (for the spot check) and on the device
typedef struct {
    const shape *s;
    float *hx, *hw, *hb, *hd;
    wgt_buf *x, *w, *b, *d, *out, *dx, *dw, *db;
} shape_data;

static void data_open(bench *B, shape_data *D, const shape *s) {
    wgt_backend *be = B->be;
    const size_t N = s->N, C = s->C, OC = s->OC;
    D->s = s;
    D->hx = host_rand(N * C, 1, 1.0f), D->hw = host_rand(OC * C, 2, 1.0f), D->hb = host_rand(OC, 3, 1.0f), D->hd = host_rand(N * OC, 4, 1.0f);
    D->x = dev_from(be, D->hx, N * C, "inp"), D->w = dev_from(be, D->hw, OC * C, "weight");
    D->b = dev_from(be, D->hb, OC, "bias"), D->d = dev_from(be, D->hd, N * OC, "dout");
    D->out = dev_from(be, NULL, N * OC, "out"), D->dx = dev_from(be, NULL, N * C, "dinp");
    D->dw = dev_from(be, NULL, OC * C, "dweight"), D->db = dev_from(be, NULL, OC, "dbias");
}

static void data_close(bench *B, shape_data *D) {
    wgt_backend *be = B->be;
    wgt_buf *all[] = {D->x, D->w, D->b, D->d, D->out, D->dx, D->dw, D->db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) be->buf_free(be, all[i]);
    free(D->hx); free(D->hw); free(D->hb); free(D->hd);
}

typedef struct { double ms, gpu_ms, err; int ok; } result;

static result run_op(bench *B, shape_data *D, op_kind op) {
    wgt_backend *be = B->be;
    const shape *s = D->s;
    const size_t N = s->N, C = s->C, OC = s->OC;
    wgt_view nob = wgt_view_none();
    wgt_view bias = s->bias ? V0(D->b) : nob, dbias = s->bias ? V0(D->db) : nob;
    // zero the accumulators so that the spot check knows the call count
    be->fill_zero(be, V0(D->dw), OC * C);
    be->fill_zero(be, V0(D->db), OC);
    int calls = 0;
    // matmul_at's dbias (a column sum of dout, kernels of its own) only in the first call: the
    // timed calls are the GEMM alone, as the peer's dW is
#define CALL(db)                                                                                 \
    do {                                                                                         \
        if (op == OP_MM) be->matmul(be, V0(D->out), V0(D->x), V0(D->w), bias, N, C, OC);         \
        else if (op == OP_MM_T) be->matmul_t(be, V0(D->dx), V0(D->d), V0(D->w), N, C, OC);       \
        else be->matmul_at(be, V0(D->dw), db, V0(D->d), V0(D->x), N, C, OC);                     \
        calls++;                                                                                 \
    } while (0)
    CALL(dbias);
    if (be->sync(be) != WGT_OK) die("warm-up");
    // the first call may have compiled pipelines while the GPU idled and lowered its clocks: keep
    // it busy for a while before the timed calls
    for (double w0 = wgt_now_s(); B->warm && wgt_now_s() - w0 < 0.15;) {
        for (int r = 0; r < 4; r++) CALL(nob);
        if (be->sync(be) != WGT_OK) die("warm-up");
    }
    result res = {INFINITY, B->profile || B->busy ? INFINITY : NAN, 0, 1};
    for (int b = 0; b < B->batches; b++) {
        double g0 = batch_begin(B);
        double t0 = wgt_now_s();
        for (int r = 0; r < B->reps; r++) CALL(nob);
        if (be->sync(be) != WGT_OK) die("timed calls");
        double ms = (wgt_now_s() - t0) * 1e3 / B->reps;
        if (ms < res.ms) res.ms = ms;
        double g = batch_gpu_ms(B, g0);
        if (g < res.gpu_ms) res.gpu_ms = g;
    }
#undef CALL
    // spot check: random elements in double, each downloaded alone (no whole lm_head readback)
    wgt_buf *out = op == OP_MM ? D->out : op == OP_MM_T ? D->dx : D->dw;
    size_t rows = op == OP_MM_AT ? OC : N, cols = op == OP_MM ? OC : C;
    size_t K = op == OP_MM ? C : op == OP_MM_T ? OC : N;
    for (int k = 0; k < B->checks; k++) {
        B->rng ^= B->rng << 13; B->rng ^= B->rng >> 7; B->rng ^= B->rng << 17;
        size_t r = (size_t)(B->rng % rows), c = (size_t)((B->rng >> 32) % cols);
        float got = NAN;
        wgt_view at = wgt_view_of(out, r * cols + c, 1);
        if (be->download(be, &got, at, 1) != WGT_OK) die("download");
        double ref = ref_elem(op, s, D->hx, D->hw, s->bias ? D->hb : NULL, D->hd, r, c);
        if (op == OP_MM_AT) ref *= calls;
        double err = fabs(got - ref) / (sqrt((double)K) * (op == OP_MM_AT ? calls : 1));
        if (!(err <= res.err)) res.err = isnan(err) ? INFINITY : err;
    }
    // matmul_at's dbias (matmul_at_dbias), of the first call alone: dbias[m] = Σ_n dout[n, m]
    for (int k = 0; op == OP_MM_AT && s->bias && k < (B->checks + 7) / 8; k++) {
        B->rng ^= B->rng << 13; B->rng ^= B->rng >> 7; B->rng ^= B->rng << 17;
        size_t m = (size_t)(B->rng % OC);
        float got = NAN;
        wgt_view at = wgt_view_of(D->db, m, 1);
        if (be->download(be, &got, at, 1) != WGT_OK) die("download");
        double ref = 0;
        for (size_t n = 0; n < N; n++) ref += D->hd[n * OC + m];
        double err = fabs(got - ref) / sqrt((double)N);
        if (!(err <= res.err)) res.err = isnan(err) ? INFINITY : err;
    }
    // inputs are uniform in [-1, 1): an element is a sum of K terms of spread ~1/3, so its f32
    // rounding error is ~1e-7·sqrt(K)·(a few); 1e-4 relative to sqrt(K) flags a wrong result
    res.ok = res.err < 1e-4;
    return res;
}

// FP32 FMA ceiling: GFLOP/s of a register-only FMA kernel
static double measure_peak(bench *B, int small) {
    wgt_backend *be = B->be;
    uint32_t groups = small ? 64 : 8192, iters = small ? 256 : 4096;
    wgt_buf *o = dev_from(be, NULL, (size_t)groups * 256, "peak");
    wg_matmul_peak(be, V0(o), groups, 16);
    if (be->sync(be) != WGT_OK) die("peak warm-up");
    double g0 = batch_begin(B);
    double t0 = wgt_now_s();
    for (int r = 0; r < B->reps; r++) wg_matmul_peak(be, V0(o), groups, iters);
    if (be->sync(be) != WGT_OK) die("peak");
    double ms = (wgt_now_s() - t0) * 1e3 / B->reps;
    if (B->profile || B->busy) ms = batch_gpu_ms(B, g0);
    double gflops = 64.0 * iters * groups * 256.0 / (ms * 1e6);
    printf("%-32s %9.3f ms %9.1f GFLOP/s (FP32 FMA ceiling, same run, %s)\n", "fma peak", ms, gflops,
           B->profile ? "GPU timestamps" : B->busy ? "GPU busy time" : "wall-clock");
    be->buf_free(be, o);
    return gflops;
}

// --peer FILE: the peer's times (bench/torch_peer.py's "gemm <shape> <op> <N> <C> <OC> <ms> ..."
// lines) of the same shapes; other lines and shapes of other sizes are ignored. NAN: none (all
// of them without --peer, path NULL).
static void peer_read(const char *path, const shape *shapes, size_t ns, double peer[][3]) {
    for (size_t i = 0; i < ns; i++)
        for (int op = 0; op < 3; op++) peer[i][op] = NAN;
    if (!path) return;
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "bench_matmul: cannot read --peer %s\n", path); exit(2); }
    char line[512], name[64], op[64];
    unsigned n, c, oc;
    double ms;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "gemm %63s %63s %u %u %u %lf", name, op, &n, &c, &oc, &ms) != 6 || !(ms > 0) || !isfinite(ms))
            continue;
        for (size_t i = 0; i < ns; i++)
            for (int k = 0; k < 3; k++)
                if (!strcmp(name, shapes[i].name) && !strcmp(op, op_name[k]) && n == shapes[i].N && c == shapes[i].C &&
                    oc == shapes[i].OC)
                    peer[i][k] = ms;
    }
    fclose(f);
}

// The peer's GEMM time of a GPT-2 step (NAN when a shape of the step is missing).
static double peer_step(double peer[][3], const shape *shapes, size_t ns) {
    double t = 0;
    for (size_t i = 0; i < ns; i++)
        for (int op = 0; op < 3; op++) t += shapes[i].per_step ? shapes[i].per_step * peer[i][op] : 0;
    return t;
}

static uint64_t big_tiles(const shape *s, op_kind op) {
    uint64_t M = op == OP_MM_AT ? s->OC : s->N, N = op == OP_MM ? s->OC : s->C;
    return ((M + 127) / 128) * ((N + 127) / 128);
}

int main(int argc, char **argv) {
    const char *adapter = "gpu", *tiles = "auto", *splitk = NULL, *peer_path = NULL;
    int small = 0, reps = -1, profile = 0, busy = 0, only = -1, sweep = 0, vec4 = WG_AUTO, group = WG_AUTO, batches = -1;
    long rows = 8192, vocab = 50257;  // the layer GEMMs' and the lm_head's rows (B*T), the lm_head's width
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--small")) small = 1;
        else if (!strcmp(a, "--profile")) profile = 1;
        else if (!strcmp(a, "--busy")) busy = 1;
        else if (!strcmp(a, "--sweep")) sweep = 1;
        else if (!strcmp(a, "--sweep-tiles")) sweep = 2;
        else if (!strcmp(a, "--adapter") && i + 1 < argc) adapter = argv[++i];
        else if (!strcmp(a, "--reps") && i + 1 < argc) reps = (int)arg_whole(a, argv[++i], 1, 1000);
        else if (!strcmp(a, "--batches") && i + 1 < argc) batches = (int)arg_whole(a, argv[++i], 1, 1000);
        else if (!strcmp(a, "--tiles") && i + 1 < argc) tiles = argv[++i];
        else if (!strcmp(a, "--peer") && i + 1 < argc) peer_path = argv[++i];
        else if (!strcmp(a, "--splitk") && i + 1 < argc) splitk = argv[++i];
        else if (!strcmp(a, "--vec4") && i + 1 < argc) vec4 = (int)arg_whole(a, argv[++i], 0, 3);  // docs/webgpu-settings.md
        else if (!strcmp(a, "--group") && i + 1 < argc) group = (int)arg_whole(a, argv[++i], 1, 1024);
        else if (!strcmp(a, "--rows") && i + 1 < argc) rows = arg_whole(a, argv[++i], 16, 262144);
        else if (!strcmp(a, "--vocab") && i + 1 < argc) vocab = arg_whole(a, argv[++i], 16, 262144);
        else if (!strcmp(a, "--only") && i + 1 < argc) {
            const char *o = argv[++i];
            for (int k = 0; k < 3; k++) if (!strcmp(o, op_name[k])) only = k;
            if (only < 0) { fprintf(stderr, "bench_matmul: --only takes matmul, matmul_t or matmul_at\n"); return 2; }
        } else {
            printf("usage: bench_matmul [--adapter auto|gpu|software|NAME] [--small] [--reps N] [--profile|--busy] [--sweep]\n"
                   "                    [--tiles auto|big|small] [--splitk auto|off|S] [--vec4 0|1|2|3] [--group G]\n"
                   "                    [--only matmul|matmul_t|matmul_at] [--peer FILE] [--rows N] [--vocab V]\n"
                   "                    [--batches N]\n"
                   "  --reps N     calls a timed batch (10; 2 with --small); --batches N  timed batches, the fastest\n"
                   "               reported (3; 1 with --small or a sweep)\n"
                   "  --rows N, --vocab V  the GEMMs of a GPT-2 124M step with N = B*T rows (8192) and a V-wide\n"
                   "               lm_head (50257), e.g. --rows 4096 --vocab 16384 for the seeds preset\n"
                   "  --peer FILE  the peer's times at the same shapes (bench/torch_peer.py's output): adds the ratio\n"
                   "  --sweep   time every shape under a list of GEMM settings (ignores the four setting flags)\n"
                   "  --sweep-tiles  the same over a list of tile shapes (WGTRAIN_MM_TILE specs)\n"
                   "  --profile GPU timestamps of each dispatch (the primary figure when given)\n"
                   "  --busy    the GPU time of each timed batch's pass, start to end, as a step runs it\n");
            return strcmp(a, "--help") ? 2 : 0;
        }
    }
    config one = {"this run", WG_MM_TILE_AUTO, WG_AUTO, vec4, group, 0, NULL, NULL, NULL};
    if (!strcmp(tiles, "big")) one.tiles = WG_MM_TILE_BIG;
    else if (!strcmp(tiles, "small")) one.tiles = WG_MM_TILE_SMALL;
    else if (strcmp(tiles, "auto")) { fprintf(stderr, "bench_matmul: --tiles takes auto, big or small\n"); return 2; }
    if (splitk && !strcmp(splitk, "off")) one.splitk = 0;
    else if (splitk && strcmp(splitk, "auto")) one.splitk = (int)arg_whole("--splitk", splitk, 1, 1024);
    if (reps < 1) reps = small ? 2 : 10;
    if (batches < 1) batches = small || sweep ? 1 : 3;

    wgt_backend *be;
    if (profile && busy) { fprintf(stderr, "bench_matmul: --profile and --busy exclude each other\n"); return 2; }
    if (backend_webgpu_init_ex(&be, adapter, profile) != WGT_OK) die("opening the WebGPU backend");
    if (busy && !be->gpu_timer_start) die("--busy: the device has no timestamp queries");
    const wg_device_info *info = wg_ctx_info(wg_of(be));
    const wg_settings env = *wg_ctx_settings(wg_of(be));  // WGTRAIN_MM_* as the environment set them
    printf("device: %s (%s), workgroup memory %u bytes, %d reps, %s\n", info->name, wg_adapter_type_name(info->type),
           info->limits.maxComputeWorkgroupStorageSize, reps,
           profile ? "GPU timestamps" : busy ? "GPU busy time of each batch" : "wall-clock");
    fflush(stdout);

    // GPT-2 124M, B*T = rows (8192): c_attn, attn c_proj, mlp c_fc, mlp c_proj, tied lm_head; and 4096³
    const uint32_t R = (uint32_t)rows, V = (uint32_t)vocab;
    shape shapes[] = {
        {"qkv", R, 768, 2304, 1, 12}, {"attproj", R, 768, 768, 1, 12}, {"fc", R, 768, 3072, 1, 12},
        {"fcproj", R, 3072, 768, 1, 12}, {"lm_head", R, 768, V, 0, 1}, {"square", 4096, 4096, 4096, 0, 0},
    };
    const size_t ns = sizeof shapes / sizeof shapes[0];
    if (small)
        for (size_t i = 0; i < ns; i++) {
            shapes[i].N /= 16;
            shapes[i].C = shapes[i].C / 8 + 3;   // + 3: exercise the edges too
            shapes[i].OC = shapes[i].OC / 8 + 1;
            if (!strcmp(shapes[i].name, "square")) shapes[i].N = shapes[i].C = shapes[i].OC = 259;
        }

    static double peer[6][3];
    peer_read(peer_path, shapes, ns, peer);
    const config *cfgs = sweep == 2 ? TILE_SWEEP : sweep ? SWEEP : &one;
    const size_t nc = sweep == 2 ? N_TILE_SWEEP : sweep ? N_SWEEP : 1;
    const size_t dflt = sweep == 2 ? 0 : DEFAULT_CFG;
    bench B = {be, reps, profile, sweep ? 8 : 64, !small, busy, batches, 0x243F6A8885A308D3ull, 0};
    if (sweep && !small) {  // bring the clocks up first: the first shape's rows would be slow otherwise
        wgt_buf *o = dev_from(be, NULL, (size_t)8192 * 256, "warm-up");
        double t0 = wgt_now_s();
        while (wgt_now_s() - t0 < 2.0) {
            for (int r = 0; r < 20; r++) wg_matmul_peak(be, V0(o), 8192, 4096);
            if (be->sync(be) != WGT_OK) die("warm-up");
        }
        be->buf_free(be, o);
    }
    B.peak = measure_peak(&B, small);

    // per (shape, op): the primary time of each config (NAN: skipped or not run)
    static double tms[6][3][N_MAX_CFG];
    static int bad[6][3][N_MAX_CFG];
    for (size_t i = 0; i < ns; i++)
        for (int op = 0; op < 3; op++)
            for (size_t c = 0; c < N_MAX_CFG; c++) tms[i][op][c] = NAN;

    if (!sweep) {
        config_apply(be, &env, &one);
        printf("%-10s %-10s %6s %6s %6s  %12s %17s %5s\n", "shape", "op", "N", "C", "OC", "time", "rate", "peak");
    }
    for (size_t i = 0; i < ns; i++) {
        shape_data D;
        data_open(&B, &D, &shapes[i]);
        const double flop = 2.0 * shapes[i].N * shapes[i].C * shapes[i].OC;
        for (int op = 0; op < 3; op++) {
            if (only >= 0 && op != only) continue;
            for (size_t c = 0; c < nc; c++) {
                if (cfgs[c].skip_tiles && big_tiles(&shapes[i], (op_kind)op) >= cfgs[c].skip_tiles) continue;
                config_apply(be, &env, &cfgs[c]);
                result r = run_op(&B, &D, (op_kind)op);
                double ms = profile || busy ? r.gpu_ms : r.ms;
                tms[i][op][c] = ms;
                bad[i][op][c] = !r.ok;
                if (sweep) continue;
                char how[96];
                printf("%-10s %-10s %6u %6u %6u  %9.3f ms %9.1f GFLOP/s %4.0f%%", shapes[i].name, op_name[op],
                       shapes[i].N, shapes[i].C, shapes[i].OC, ms, flop / (ms * 1e6), 100.0 * flop / (ms * 1e6) / B.peak);
                if (profile || busy) printf("  wall %9.3f ms", r.ms);
                if (!isnan(peer[i][op])) printf("  peer %.3f ms = %.2fx", peer[i][op], peer[i][op] / ms);
                printf("  check %s (%.1e)  [%s]\n", r.ok ? "ok" : "WRONG", r.err,
                       wg_mm_describe(be, op, shapes[i].N, shapes[i].C, shapes[i].OC, how, sizeof how));
                fflush(stdout);
            }
        }
        data_close(&B, &D);
        if (sweep) fprintf(stderr, "  %s done\n", shapes[i].name);
    }

    double tokens = shapes[0].N;
    if (!sweep) {
        double step = 0;
        for (size_t i = 0; i < ns; i++)
            for (int op = 0; op < 3; op++)
                if (!isnan(tms[i][op][0])) step += shapes[i].per_step * tms[i][op][0];
        if (only < 0)
            printf("GPT-2 step (B*T = %.0f): matmuls %.1f ms -> at most %.0f tokens/s if they were all of the step\n",
                   tokens, step, tokens / (step * 1e-3));
        double pstep = peer_step(peer, shapes, ns);
        if (only < 0 && !isnan(pstep)) printf("peer's matmuls of the same step: %.1f ms (ours %.2fx its speed)\n", pstep, pstep / step);
        be->free(be);
        return 0;
    }

    // the sweep's table: TFLOP/s of each GEMM under each config ('!' after a failed spot check);
    // GFLOP/s on a device below 1 TFLOP/s (the software GPU)
    const double unit = B.peak >= 1000 ? 1e12 : 1e9;
    const char *uname = B.peak >= 1000 ? "TFLOP/s" : "GFLOP/s";
    printf("\n%s (%s; FMA ceiling %.1f %s)\n%-8s %-9s", uname,
           profile ? "GPU timestamps" : busy ? "GPU busy time" : "wall-clock",
           B.peak * 1e9 / unit, uname, "shape", "op");
    for (size_t c = 0; c < nc; c++) printf(" %9s", cfgs[c].name);
    printf("  best%s\n", peer_path ? " (peer's TFLOP/s, our best / peer)" : "");
    double step[N_MAX_CFG] = {0}, step_best = 0;
    for (size_t i = 0; i < ns; i++) {
        const double flop = 2.0 * shapes[i].N * shapes[i].C * shapes[i].OC;
        for (int op = 0; op < 3; op++) {
            if (only >= 0 && op != only) continue;
            printf("%-8s %-9s", shapes[i].name, op_name[op]);
            size_t best = dflt;
            for (size_t c = 0; c < nc; c++) {
                double ms = tms[i][op][c];
                if (isnan(ms)) { printf(" %9s", "-"); continue; }
                printf(" %8.1f%s", flop / (ms * 1e-3) / unit, bad[i][op][c] ? "!" : " ");
                if (!bad[i][op][c] && (isnan(tms[i][op][best]) || ms < tms[i][op][best])) best = c;
            }
            char how[96];
            config_apply(be, &env, &cfgs[dflt]);
            printf("  %s (%.0f%% of ceiling", cfgs[best].name, 100.0 * flop / (tms[i][op][best] * 1e6) / B.peak);
            if (!isnan(peer[i][op]))
                printf("; peer %.1f, %.2fx", flop / (peer[i][op] * 1e-3) / unit, peer[i][op] / tms[i][op][best]);
            printf(")  [default: %s]\n",
                   wg_mm_describe(be, op, shapes[i].N, shapes[i].C, shapes[i].OC, how, sizeof how));
            for (size_t c = 0; c < nc; c++)  // a skipped GEMM counts with the default's time
                step[c] += shapes[i].per_step * (isnan(tms[i][op][c]) ? tms[i][op][dflt] : tms[i][op][c]);
            step_best += shapes[i].per_step * tms[i][op][best];
        }
    }
    printf("%-18s", "step matmuls, ms");
    for (size_t c = 0; c < nc; c++) printf(" %9.1f", step[c]);
    printf("  best of each: %.1f", step_best);
    double pstep = peer_step(peer, shapes, ns);
    if (only < 0 && !isnan(pstep)) printf("; peer %.1f (%.2fx)", pstep, pstep / step_best);
    printf("\n");
    printf("(a GPT-2 step: each layer GEMM 12x, the lm_head once; '-' = skipped, counted with the default's time)\n");
    be->free(be);
    return 0;
}
