// bench_matmul.c — GFLOP/s of the three GEMMs (matmul, matmul_t, matmul_at) at the shapes of a
// GPT-2 124M training step (B*T = 8192 rows), the tied lm_head (V = 50257) and 4096³, against
// the FP32 FMA ceiling measured in the same run by a register-only kernel (SPEC §7: a ceiling
// from the same device, driver and moment). The matmuls are most of a training step's FLOPs.
//
// Timing: one warm-up call and a sync (pipeline creation, first touch), then --reps calls in one
// submit, wall-clock around the closing sync; with --profile also GPU timestamps per dispatch.
// A spot check recomputes 64 random output elements in double on the host from the same inputs
// (the timed calls of matmul_at accumulate, so its expected value is scaled by the call count).
//
// Usage: bench_matmul [--adapter auto|gpu|cpu|NAME] [--small] [--reps N] [--profile]
//                     [--tiles auto|big|small] [--only NAME]
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

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "bench_matmul: %s: %s\n", what, wgt_last_error());
    exit(1);
}

static float *host_rand(size_t n, uint64_t seed) {
    float *h = malloc(n * 4 + 4);
    if (!h) { fprintf(stderr, "bench_matmul: out of host memory\n"); exit(1); }
    uint64_t s = 0x9e3779b97f4a7c15ull ^ seed;
    for (size_t i = 0; i < n; i++) {  // xorshift, uniform in [-1, 1)
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        h[i] = (float)(s >> 40) / 16777216.0f * 2.0f - 1.0f;
    }
    return h;
}

static wgt_buf *dev_from(wgt_backend *be, const float *h, size_t n, const char *label) {
    wgt_buf *b;
    if (be->buf_alloc(be, &b, n, label) != WGT_OK) die("allocation");
    wgt_view v = {b, 0};
    if (h && be->upload(be, v, h, n) != WGT_OK) die("upload");
    return b;
}
static wgt_view V0(wgt_buf *b) { wgt_view v = {b, 0}; return v; }

// GPU milliseconds of every profiled dispatch so far (differences time a block of calls)
static double gpu_total_ms(wgt_backend *be) {
    FILE *null = fopen("/dev/null", "w");
    double ms = wg_profile_report(wg_of(be), null ? null : stderr);
    if (null) fclose(null);
    return ms;
}

typedef enum { OP_MM, OP_MM_T, OP_MM_AT } op_kind;
static const char *const op_name[] = {"matmul", "matmul_t", "matmul_at"};

typedef struct { const char *name; uint32_t N, C, OC; int bias, per_step; } shape;  // per_step: calls in a GPT-2 step

typedef struct {
    wgt_backend *be;
    int reps, profile;
    uint64_t rng;
    double peak;     // GFLOP/s of the FMA ceiling
    double step_ms;  // matmul time of one GPT-2 training step (wall-clock figures)
} bench;

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

static void run_shape(bench *B, const shape *s, int only) {
    wgt_backend *be = B->be;
    const size_t N = s->N, C = s->C, OC = s->OC;
    float *hx = host_rand(N * C, 1), *hw = host_rand(OC * C, 2), *hb = host_rand(OC, 3), *hd = host_rand(N * OC, 4);
    wgt_buf *x = dev_from(be, hx, N * C, "inp"), *w = dev_from(be, hw, OC * C, "weight");
    wgt_buf *b = dev_from(be, hb, OC, "bias"), *d = dev_from(be, hd, N * OC, "dout");
    wgt_buf *out = dev_from(be, NULL, N * OC, "out"), *dx = dev_from(be, NULL, N * C, "dinp");
    wgt_buf *dw = dev_from(be, NULL, OC * C, "dweight"), *db = dev_from(be, NULL, OC, "dbias");
    wgt_view nob = {NULL, 0};
    const double flop = 2.0 * N * C * OC;
    for (int op = 0; op < 3; op++) {
        if (only >= 0 && op != only) continue;
        wgt_view bias = s->bias ? V0(b) : nob, dbias = s->bias ? V0(db) : nob;
        // zero the accumulators so that the spot check knows the call count
        be->fill_zero(be, V0(dw), OC * C);
        be->fill_zero(be, V0(db), OC);
        int calls = 0;
#define CALL()                                                                                   \
    do {                                                                                         \
        if (op == OP_MM) be->matmul(be, V0(out), V0(x), V0(w), bias, N, C, OC);                  \
        else if (op == OP_MM_T) be->matmul_t(be, V0(dx), V0(d), V0(w), N, C, OC);                \
        else be->matmul_at(be, V0(dw), dbias, V0(d), V0(x), N, C, OC);                           \
        calls++;                                                                                 \
    } while (0)
        CALL();
        if (be->sync(be) != WGT_OK) die("warm-up");
        double g0 = B->profile ? gpu_total_ms(be) : 0;
        double t0 = now_s();
        for (int r = 0; r < B->reps; r++) CALL();
        if (be->sync(be) != WGT_OK) die("timed calls");
        double ms = (now_s() - t0) * 1e3 / B->reps;
        double gms = B->profile ? (gpu_total_ms(be) - g0) / B->reps : 0;
#undef CALL
        // spot check: 64 random elements in double
        wgt_buf *res = op == OP_MM ? out : op == OP_MM_T ? dx : dw;
        size_t rows = op == OP_MM_AT ? OC : N, cols = op == OP_MM ? OC : C;
        float *got = malloc(rows * cols * 4 + 4);
        if (!got) { fprintf(stderr, "bench_matmul: out of host memory\n"); exit(1); }
        if (be->download(be, got, V0(res), rows * cols) != WGT_OK) die("download");
        double worst = 0;
        for (int k = 0; k < 64; k++) {
            B->rng ^= B->rng << 13; B->rng ^= B->rng >> 7; B->rng ^= B->rng << 17;
            size_t r = (size_t)(B->rng % rows), c = (size_t)((B->rng >> 32) % cols);
            double ref = ref_elem((op_kind)op, s, hx, hw, s->bias ? hb : NULL, hd, r, c);
            if (op == OP_MM_AT) ref *= calls;
            size_t K = op == OP_MM ? C : op == OP_MM_T ? OC : N;
            double err = fabs(got[r * cols + c] - ref) / (sqrt((double)K) * (op == OP_MM_AT ? calls : 1));
            if (err > worst) worst = err;
        }
        free(got);
        // inputs are uniform in [-1, 1): an element is a sum of K terms of spread ~1/3, so its f32
        // rounding error is ~1e-7·sqrt(K)·(a few); 1e-4 relative to sqrt(K) flags a wrong result
        const char *verdict = worst < 1e-4 ? "ok" : "WRONG";
        B->step_ms += s->per_step * ms;
        printf("%-10s %-10s %6u %6u %6u  %9.3f ms %9.1f GFLOP/s %4.0f%%", s->name, op_name[op], s->N, s->C, s->OC, ms,
               flop / (ms * 1e6), 100.0 * flop / (ms * 1e6) / B->peak);
        if (B->profile) printf("  gpu %9.3f ms %9.1f GFLOP/s", gms, flop / (gms * 1e6));
        printf("  check %s (%.1e)\n", verdict, worst);
        fflush(stdout);
    }
    be->buf_free(be, x); be->buf_free(be, w); be->buf_free(be, b); be->buf_free(be, d);
    be->buf_free(be, out); be->buf_free(be, dx); be->buf_free(be, dw); be->buf_free(be, db);
    free(hx); free(hw); free(hb); free(hd);
}

// FP32 FMA ceiling: GFLOP/s of a register-only FMA kernel
static double measure_peak(bench *B, int small) {
    wgt_backend *be = B->be;
    uint32_t groups = small ? 64 : 8192, iters = small ? 256 : 4096;
    wgt_buf *o = dev_from(be, NULL, (size_t)groups * 256, "peak");
    wg_matmul_peak(be, V0(o), groups, 16);
    if (be->sync(be) != WGT_OK) die("peak warm-up");
    double t0 = now_s();
    for (int r = 0; r < B->reps; r++) wg_matmul_peak(be, V0(o), groups, iters);
    if (be->sync(be) != WGT_OK) die("peak");
    double ms = (now_s() - t0) * 1e3 / B->reps;
    double gflops = 64.0 * iters * groups * 256.0 / (ms * 1e6);
    printf("%-32s %9.3f ms %9.1f GFLOP/s (FP32 FMA ceiling, same run)\n", "fma peak", ms, gflops);
    be->buf_free(be, o);
    return gflops;
}

int main(int argc, char **argv) {
    const char *adapter = "gpu", *tiles = "auto";
    int small = 0, reps = -1, profile = 0, only = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--small")) small = 1;
        else if (!strcmp(a, "--profile")) profile = 1;
        else if (!strcmp(a, "--adapter") && i + 1 < argc) adapter = argv[++i];
        else if (!strcmp(a, "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(a, "--tiles") && i + 1 < argc) tiles = argv[++i];
        else if (!strcmp(a, "--only") && i + 1 < argc) {
            const char *o = argv[++i];
            for (int k = 0; k < 3; k++) if (!strcmp(o, op_name[k])) only = k;
            if (only < 0) { fprintf(stderr, "bench_matmul: --only takes matmul, matmul_t or matmul_at\n"); return 2; }
        } else {
            printf("usage: bench_matmul [--adapter auto|gpu|cpu|NAME] [--small] [--reps N] [--profile]\n"
                   "                    [--tiles auto|big|small] [--only matmul|matmul_t|matmul_at]\n");
            return strcmp(a, "--help") ? 2 : 0;
        }
    }
    if (!strcmp(tiles, "big")) wg_mm_tile_override = WG_MM_TILE_BIG;
    else if (!strcmp(tiles, "small")) wg_mm_tile_override = WG_MM_TILE_SMALL;
    else if (strcmp(tiles, "auto")) { fprintf(stderr, "bench_matmul: --tiles takes auto, big or small\n"); return 2; }
    if (reps < 1) reps = small ? 2 : 10;

    wgt_backend *be;
    if (backend_webgpu_init_ex(&be, adapter, profile) != WGT_OK) die("opening the WebGPU backend");
    const wg_device_info *info = wg_ctx_info(wg_of(be));
    printf("device: %s (%s), workgroup memory %u bytes, tiles %s, %d reps\n", info->name,
           wg_adapter_type_name(info->type), info->limits.maxComputeWorkgroupStorageSize, tiles, reps);

    // GPT-2 124M, B*T = 8192: c_attn, attn c_proj, mlp c_fc, mlp c_proj, tied lm_head; and 4096³
    shape shapes[] = {
        {"qkv", 8192, 768, 2304, 1, 12}, {"attproj", 8192, 768, 768, 1, 12}, {"fc", 8192, 768, 3072, 1, 12},
        {"fcproj", 8192, 3072, 768, 1, 12}, {"lm_head", 8192, 768, 50257, 0, 1}, {"square", 4096, 4096, 4096, 0, 0},
    };
    const size_t ns = sizeof shapes / sizeof shapes[0];
    if (small)
        for (size_t i = 0; i < ns; i++) {
            shapes[i].N /= 16;
            shapes[i].C = shapes[i].C / 8 + 3;   // + 3: exercise the edges too
            shapes[i].OC = shapes[i].OC / 8 + 1;
            if (!strcmp(shapes[i].name, "square")) shapes[i].N = shapes[i].C = shapes[i].OC = 259;
        }

    bench B = {be, reps, profile, 0x243F6A8885A308D3ull, 0, 0};
    B.peak = measure_peak(&B, small);
    printf("%-10s %-10s %6s %6s %6s  %12s %17s %5s\n", "shape", "op", "N", "C", "OC", "time", "rate", "peak");
    for (size_t i = 0; i < ns; i++) run_shape(&B, &shapes[i], only);
    if (only < 0) {
        // one training step = every layer GEMM 12 times (forward + two backward) plus the lm_head
        double tokens = shapes[0].N;
        printf("GPT-2 step (B*T = %.0f): matmuls %.1f ms -> at most %.0f tokens/s if they were all of the step\n", tokens,
               B.step_ms, tokens / (B.step_ms * 1e-3));
    }
    be->free(be);
    return 0;
}
