// bench_kernels.c — bandwidth of the activation and loss kernels, of matmul_at's dbias column sum,
// of LayerNorm and the residual addition at GPT-2's width and of the backend's fill
// (docs/kernels.md) on one WebGPU device, as a fraction
// of a device-to-device copy measured in the same run (docs/architecture.md#performance-principles: report speed against a ceiling
// measured alongside, not against a datasheet).
//
// The ceiling is copy_vec4 (kernels/15_copy.wgsl): a WGSL kernel that copies one vec4 a thread,
// through the same compiler and dispatch path as the kernels it rates. The API's buffer copy
// (copyBufferToBuffer) is kept as a second row: on the H200 it ran at ~800 GB/s, far below what
// kernels reach, so it is no ceiling.
//
// Each kernel is memory-bound, so its figure of merit is bytes moved (the minimum each must
// read and write) per second. Timing: a warm-up call and a sync, then --reps calls recorded
// into one submit. By default every dispatch is timed by GPU timestamp queries
// (wg_profile_report), which removes submit and wait overheads: that is the primary figure,
// "of copy" = GB/s against copy_vec4's GB/s of the same size class. Wall-clock around the closing
// sync is shown too (buffer copies carry no timestamps: wall-clock only).
//
// Usage: bench_kernels [--adapter auto|gpu|software|NAME] [--small] [--reps N] [--wall]
// --small divides every size by 64 so that the software GPU finishes in seconds; --wall turns
// the timestamps off (wall-clock only; --profile, the former switch, is accepted).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend/backend.h"
#include "backend/webgpu/wg_ops.h"
#include "backend/webgpu/wg_runtime.h"
#include "core/clock.h"
#include "bench_common.h"


static wgt_buf *alloc_rand(wgt_backend *be, size_t n, float scale, const char *label) {
    float *h = host_rand(n, n, scale);  // any smooth spread of values will do
    wgt_buf *b = dev_from(be, h, n, label);
    free(h);
    return b;
}

typedef enum { B_WCOPY_EW, B_WCOPY_CE, B_COPY_EW, B_COPY_CE, B_GELU, B_SWIGLU, B_GELU_BWD, B_SWIGLU_BWD, B_CE, B_SUM, B_SUM_BIG, B_DBIAS_C,
               B_DBIAS_F, B_LN_FWD, B_LN_BWD, B_RESIDUAL, B_FILL } bench_id;
#define LN_C 768  // LayerNorm's width in the rows below: GPT-2 124M's

typedef struct {
    wgt_backend *be;
    size_t n, R, V, n_sum_big;
    wgt_buf *a, *b, *c, *d, *e;       // element-wise operands [n]
    wgt_buf *logits, *copy_dst, *targets, *losses, *out, *big;
    wgt_buf *stats;  // LayerNorm's mean [R] and rstd [R]
} bench_ctx;

// dst[0, n) = src[0, n) through copy_vec4 (n a multiple of 4), in windows that fit one binding
static void wgsl_copy(wgt_backend *be, wgt_view dst, wgt_view src, size_t n) {
    wg_ctx *ctx = wg_of(be);
    WGPUComputePipeline pipe = wg_pipeline(ctx, "15_copy.wgsl", "copy_vec4", NULL);
    uint64_t chunk = wg_binding_chunk(be);  // a multiple of 64, so of 4
    for (size_t o = 0; o < n; o += chunk) {
        size_t k = n - o < chunk ? n - o : (size_t)chunk;
        struct { uint32_t n4, src_off4, dst_off4, p0; } p = {(uint32_t)(k / 4), 0, 0, 0};
        wg_bind b[2] = {wg_b(wgt_view_at(src, o), k), wg_b(wgt_view_at(dst, o), k)};
        wg_dispatch(ctx, "copy_vec4", pipe, b, 2, &p, sizeof p, wg_groups(k / 4, 256));
    }
}

static void run_once(bench_ctx *x, bench_id id) {
    wgt_backend *be = x->be;
    size_t n = x->n;
    switch (id) {
    case B_WCOPY_EW: wgsl_copy(be, V0(x->b), V0(x->a), n); break;
    case B_WCOPY_CE: wgsl_copy(be, V0(x->copy_dst), V0(x->logits), x->R * x->V); break;
    case B_COPY_EW: be->copy(be, V0(x->b), V0(x->a), n); break;
    case B_COPY_CE: be->copy(be, V0(x->copy_dst), V0(x->logits), x->R * x->V); break;
    case B_GELU: be->gelu_inplace(be, V0(x->a), n); break;
    case B_SWIGLU: be->swiglu_combine(be, V0(x->c), V0(x->a), V0(x->b), n); break;
    case B_GELU_BWD: be->ffn_gelu_backward(be, V0(x->c), V0(x->a), V0(x->b), n); break;
    case B_SWIGLU_BWD: be->ffn_swiglu_backward(be, V0(x->d), V0(x->e), V0(x->a), V0(x->b), V0(x->c), n); break;
    case B_CE:
        be->cross_entropy(be, V0(x->logits), V0(x->losses), V0(x->targets), wgt_view_none(), (uint32_t)x->R, (uint32_t)x->V, 0.0f,
                          1e-4f, 1.0f / (float)x->R);
        break;
    case B_SUM: be->sum_losses(be, V0(x->out), V0(x->losses), (uint32_t)x->R, 0); break;
    case B_SUM_BIG: be->sum_losses(be, V0(x->out), V0(x->big), (uint32_t)x->n_sum_big, 0); break;
    // matmul_at's dbias alone: the column sums of dout [R, 768] (attproj, fcproj) and [R, 3072] (fc)
    case B_DBIAS_C: wg_matmul_at_dbias(be, wgt_view_of(x->d, 0, 768), V0(x->a), (uint32_t)x->R, 768); break;
    case B_DBIAS_F: wg_matmul_at_dbias(be, wgt_view_of(x->d, 0, 3072), V0(x->a), (uint32_t)x->R, 3072); break;
    // LayerNorm of x [R, 768] (a; out b); its backward: dinp (d) += ..., dweight and dbias (e) += ...,
    // from dout (c) and the forward's mean and rstd; weight and bias are the first 1536 of c
    case B_LN_FWD:
        be->layernorm_forward(be, V0(x->b), wgt_view_of(x->stats, 0, x->R), wgt_view_of(x->stats, x->R, x->R), V0(x->a),
                              wgt_view_of(x->c, 0, LN_C), wgt_view_of(x->c, LN_C, LN_C), (uint32_t)x->R, LN_C);
        break;
    case B_LN_BWD:
        be->layernorm_backward(be, V0(x->d), wgt_view_of(x->e, 0, LN_C), wgt_view_of(x->e, LN_C, LN_C), V0(x->c), V0(x->a),
                               wgt_view_of(x->c, 0, LN_C), wgt_view_of(x->stats, 0, x->R),
                               wgt_view_of(x->stats, x->R, x->R), (uint32_t)x->R, LN_C);
        break;
    // the residual stream's addition at GPT-2's width: d = a + b over [R, 768]
    case B_RESIDUAL:
        be->residual_forward(be, wgt_view_of(x->d, 0, x->R * LN_C), wgt_view_of(x->a, 0, x->R * LN_C),
                             wgt_view_of(x->b, 0, x->R * LN_C), x->R * LN_C);
        break;
    case B_FILL: be->fill_zero(be, V0(x->e), n); break;
    }
}

typedef struct { double wall_ms, gpu_ms; } timing;

static timing time_it(bench_ctx *x, bench_id id, int reps, int profile) {
    wgt_backend *be = x->be;
    run_once(x, id);  // warm-up: pipeline creation, bind groups, first-touch of memory
    if (be->sync(be) != WGT_OK) die("warm-up");
    double gpu0 = profile ? wg_profile_total_ms(wg_of(be)) : 0;
    double t0 = wgt_now_s();
    for (int r = 0; r < reps; r++) run_once(x, id);
    if (be->sync(be) != WGT_OK) die("timed run");
    timing t = {(wgt_now_s() - t0) * 1e3 / reps, NAN};
    if (profile && id != B_COPY_EW && id != B_COPY_CE)  // buffer copies carry no timestamps
        t.gpu_ms = (wg_profile_total_ms(wg_of(be)) - gpu0) / reps;
    return t;
}

int main(int argc, char **argv) {
    const char *adapter = "gpu";
    int small = 0, reps = 20, profile = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--adapter") && i + 1 < argc) adapter = argv[++i];
        else if (!strcmp(argv[i], "--small")) small = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = (int)arg_whole(argv[i], argv[i + 1], 1, 100000), i++;
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--wall")) profile = 0;
        else {
            printf("usage: bench_kernels [--adapter auto|gpu|software|NAME] [--small] [--reps N] [--wall]\n"
                   "  Bandwidth of the activation and loss kernels and of matmul_at's dbias as a fraction of a WGSL vec4\n"
                   "  copy on the same device.\n"
                   "  --adapter  WebGPU adapter (default gpu: a real GPU only; cpu = lavapipe)\n"
                   "  --small    every size / 64, for a smoke test on the software GPU\n"
                   "  --reps N   calls per timed submit (default 20)\n"
                   "  --wall     wall-clock only (default: GPU timestamps are the primary figure)\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    bench_ctx x;
    memset(&x, 0, sizeof x);
    if (backend_webgpu_init_ex(&x.be, adapter, profile) != WGT_OK) die("webgpu backend");
    wgt_backend *be = x.be;
    const wg_device_info *info = wg_ctx_info(wg_of(be));
    int div = small ? 64 : 1;
    x.n = (size_t)8 * 1024 * 3072 / div;  // B*T x d_ff of GPT-2 small at B=8, T=1024
    x.R = 8192 / div;
    x.V = 50257;
    x.n_sum_big = ((size_t)1 << 24) / div;
    printf("device: %s (%s, %s)\n", info->name, wg_backend_type_name(info->backend), wg_adapter_type_name(info->type));
    printf("sizes: element-wise n = %zu, cross_entropy R = %zu V = %zu, %d calls per submit, %s\n\n", x.n, x.R, x.V,
           reps, profile ? "GPU timestamps (primary) and wall-clock" : "wall-clock only");

    x.a = alloc_rand(be, x.n, 4.0f, "a");
    x.b = alloc_rand(be, x.n, 4.0f, "b");
    x.c = alloc_rand(be, x.n, 1.0f, "c");
    if (be->buf_alloc(be, &x.d, x.n, "d") != WGT_OK || be->buf_alloc(be, &x.e, x.n, "e") != WGT_OK) die("allocation");
    x.logits = alloc_rand(be, x.R * x.V, 3.0f, "logits");
    if (be->buf_alloc(be, &x.copy_dst, x.R * x.V, "copy_dst") != WGT_OK) die("allocation");
    x.big = alloc_rand(be, x.n_sum_big, 1.0f, "big");
    if (be->buf_alloc(be, &x.stats, 2 * x.R, "stats") != WGT_OK) die("allocation");
    if (be->buf_alloc(be, &x.losses, x.R, "losses") != WGT_OK || be->buf_alloc(be, &x.out, 1, "out") != WGT_OK ||
        be->buf_alloc(be, &x.targets, x.R, "targets") != WGT_OK)
        die("allocation");
    uint32_t *tg = malloc(x.R * 4);
    for (size_t r = 0; r < x.R; r++) tg[r] = (uint32_t)((r * 2654435761u) % x.V);
    if (be->upload(be, V0(x.targets), tg, x.R) != WGT_OK) die("upload");
    free(tg);

    const double f = 4.0;  // bytes per element
    // size class: 0 element-wise (and sum_losses), 1 logits (cross_entropy)
    struct { const char *name; bench_id id; double bytes; int cls; } rows[] = {
        {"copy_vec4 (element-wise size)", B_WCOPY_EW, 2 * f * x.n, 0},
        {"copy_vec4 (logits size)", B_WCOPY_CE, 2 * f * x.R * x.V, 1},
        {"buffer copy (element-wise size)", B_COPY_EW, 2 * f * x.n, 0},
        {"buffer copy (logits size)", B_COPY_CE, 2 * f * x.R * x.V, 1},
        {"gelu_inplace", B_GELU, 2 * f * x.n, 0},
        {"swiglu_combine", B_SWIGLU, 3 * f * x.n, 0},
        {"ffn_gelu_backward", B_GELU_BWD, 3 * f * x.n, 0},
        {"ffn_swiglu_backward", B_SWIGLU_BWD, 5 * f * x.n, 0},
        // the minimum: logits read once and dlogits written once (the kernel reads them twice)
        {"cross_entropy", B_CE, 2 * f * x.R * x.V + 2 * f * x.R, 1},
        {"sum_losses (n = R)", B_SUM, f * x.R + f, 0},
        {"sum_losses (n = 2^24/div)", B_SUM_BIG, f * x.n_sum_big + f, 0},
        // dout read once, dbias read and written
        {"matmul_at dbias (R x 768)", B_DBIAS_C, f * x.R * 768 + 2 * f * 768, 0},
        {"matmul_at dbias (R x 3072)", B_DBIAS_F, f * x.R * 3072 + 2 * f * 3072, 0},
        // x read, out written, mean and rstd written, weight and bias read
        {"layernorm_forward (R x 768)", B_LN_FWD, f * (2.0 * x.R * LN_C + 2.0 * x.R + 2 * LN_C), 0},
        // dout, inp, dinp read, dinp written, mean and rstd read, weight read, dweight and dbias read
        // and written (both of its kernels: dinp, then the parameter sums)
        {"layernorm_backward (R x 768)", B_LN_BWD, f * (4.0 * x.R * LN_C + 2.0 * x.R + 5 * LN_C), 0},
        {"residual_forward (R x 768)", B_RESIDUAL, 3 * f * x.R * LN_C, 0},
        {"fill_zero (element-wise size)", B_FILL, f * x.n, 0},  // written only
    };
    int nrows = sizeof rows / sizeof rows[0];
    // GB/s of copy_vec4 (GPU and wall-clock) and of the buffer copy (wall-clock), per size class
    double wcopy_gpu[2] = {0, 0}, wcopy_wall[2] = {0, 0}, bcopy_wall[2] = {0, 0};
    printf("%-32s %12s", "kernel", "bytes moved");
    if (profile) printf(" %9s %9s %8s", "gpu ms", "gpu GB/s", "of copy");
    printf(" %9s %9s %8s %9s\n", "wall ms", "GB/s", profile ? "(wall)" : "of copy", "of bufcpy");
    // one untimed pass over every row first: an idle GPU runs at low clocks for a while, which
    // would penalise whichever kernel happens to be measured first
    for (int i = 0; i < nrows; i++) time_it(&x, rows[i].id, reps, profile);
    for (int i = 0; i < nrows; i++) {
        timing t = time_it(&x, rows[i].id, reps, profile);
        const int k = rows[i].cls;
        double gbs = rows[i].bytes / (t.wall_ms * 1e-3) / 1e9;
        double ggbs = isnan(t.gpu_ms) ? NAN : rows[i].bytes / (t.gpu_ms * 1e-3) / 1e9;
        if (rows[i].id == B_WCOPY_EW || rows[i].id == B_WCOPY_CE) { wcopy_gpu[k] = ggbs; wcopy_wall[k] = gbs; }
        if (rows[i].id == B_COPY_EW || rows[i].id == B_COPY_CE) bcopy_wall[k] = gbs;
        printf("%-32s %12.0f", rows[i].name, rows[i].bytes);
        if (profile) {
            if (isnan(ggbs)) printf(" %9s %9s %8s", "-", "-", "-");
            else printf(" %9.3f %9.1f %7.1f%%", t.gpu_ms, ggbs, wcopy_gpu[k] > 0 ? 100 * ggbs / wcopy_gpu[k] : 0);
        }
        printf(" %9.3f %9.1f %7.1f%%", t.wall_ms, gbs, wcopy_wall[k] > 0 ? 100 * gbs / wcopy_wall[k] : 0);
        if (bcopy_wall[k] > 0) printf(" %8.1f%%\n", 100 * gbs / bcopy_wall[k]);
        else printf(" %9s\n", "-");
        fflush(stdout);
    }
    printf("\nbytes moved = the minimum each kernel must read + write. \"of copy\" = GB/s against copy_vec4 of the same\n"
           "size class (element-wise kernels, sum_losses, dbias, layernorm, residual and fill: the element-wise size;\n"
           "cross_entropy: the logits size),\n"
           "%s; \"of bufcpy\" = wall-clock GB/s against the API's buffer copy (no timestamps there).\n",
           profile ? "GPU timestamps first, then wall-clock" : "wall-clock");

    wgt_buf *all[] = {x.a, x.b, x.c, x.d, x.e, x.logits, x.copy_dst, x.targets, x.losses, x.out, x.big, x.stats};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) be->buf_free(be, all[i]);
    be->free(be);
    return 0;
}
