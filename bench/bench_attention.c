// bench_attention.c — speed of causal multi-head attention on one WebGPU device: the forward
// (05_attention.wgsl) and each backward variant (10_backward_attention.wgsl: streaming,
// split-dKdV, split-short where T allows it, and the automatic choice) at the GPT-2 124M
// training shape B = 8, T = 1024, NH = 12, HS = 64. Also checks, at that full size, the GPU
// results of two heads against a double-precision host computation, so that the tile sizes and
// unrolled loops of a real GPU (which the software-GPU tests cannot reach) are verified too.
//
// Timing: a warm-up call and a sync (pipeline creation, first touch), then --reps calls in one
// submit, wall-clock around the closing sync (ms per call); with --profile also GPU timestamps.
// FLOPs: causal pairs P = T(T+1)/2 per (b, h); forward 4·HS·P (QKᵀ, PV), backward 10·HS·P (the
// usual 2.5× of the forward: S recomputed, dP, dV, dK, dQ) for every variant, so that the rates
// compare time; split-dKdV really does 14·HS·P (S and dP twice).
//
// Usage: bench_attention [--adapter auto|gpu|cpu|NAME] [--small] [--reps N] [--profile]
//                        [--B N] [--T N] [--NH N] [--HS N]
// --small: B = 1, T = 256, NH = 2 (HS 64), for a smoke test on the software GPU.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend/backend.h"
#include "backend/webgpu/wg_ops.h"

// from src/backend/webgpu/wg_ops_attention.c
int wg_attention_backward_with(wgt_backend *be, int variant, wgt_view dqkv, wgt_view dout, wgt_view qkv,
                               wgt_view out, wgt_view lse, uint32_t B, uint32_t T, uint32_t C, uint32_t NH);
int wg_attention_backward_auto_variant(wgt_backend *be, uint32_t B, uint32_t T, uint32_t C, uint32_t NH);

static const char *const variant_name[] = {"auto", "streaming", "split-dKdV", "split-short"};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "bench_attention: %s: %s\n", what, wgt_last_error());
    exit(1);
}

static float *host_rand(size_t n, uint64_t seed, float scale) {
    float *h = malloc(n * 4 + 4);
    if (!h) { fprintf(stderr, "bench_attention: out of host memory\n"); exit(1); }
    uint64_t s = 0x9e3779b97f4a7c15ull ^ seed;
    for (size_t i = 0; i < n; i++) {  // xorshift, uniform in [-scale, scale)
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        h[i] = ((float)(s >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
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

static double gpu_total_ms(wgt_backend *be) {
    FILE *null = fopen("/dev/null", "w");
    double ms = wg_profile_report(wg_of(be), null ? null : stderr);
    if (null) fclose(null);
    return ms;
}

typedef struct {
    uint32_t B, T, C, NH, HS;
    float *qkv, *dout;
} problem;

// Reference of one head (b, h) in double: out and lse rows, dq, dk, dv rows (each [T, HS]).
typedef struct { double *out, *lse, *dq, *dk, *dv; } head_ref;

static head_ref head_reference(const problem *pr, uint32_t b, uint32_t h) {
    uint32_t T = pr->T, HS = pr->HS, C = pr->C;
    size_t C3 = 3 * (size_t)C;
    head_ref r;
    r.out = calloc((size_t)T * HS, sizeof(double));
    r.lse = calloc(T, sizeof(double));
    r.dq = calloc((size_t)T * HS, sizeof(double));
    r.dk = calloc((size_t)T * HS, sizeof(double));
    r.dv = calloc((size_t)T * HS, sizeof(double));
    double *p = malloc((size_t)T * sizeof(double)), *dp = malloc((size_t)T * sizeof(double));
    double scale = 1.0 / sqrt((double)HS);
    const float *base = pr->qkv + (size_t)b * T * C3;
    const float *gbase = pr->dout + (size_t)b * T * C;
    for (uint32_t i = 0; i < T; i++) {
        const float *q = base + i * C3 + h * HS, *g = gbase + (size_t)i * C + h * HS;
        double mx = -INFINITY;
        for (uint32_t j = 0; j <= i; j++) {
            const float *k = base + j * C3 + C + h * HS;
            double s = 0;
            for (uint32_t d = 0; d < HS; d++) s += (double)q[d] * k[d];
            p[j] = s * scale;
            mx = fmax(mx, p[j]);
        }
        double sum = 0;
        for (uint32_t j = 0; j <= i; j++) sum += exp(p[j] - mx);
        r.lse[i] = mx + log(sum);
        double D = 0;
        for (uint32_t j = 0; j <= i; j++) {
            p[j] = exp(p[j] - r.lse[i]);
            const float *v = base + j * C3 + 2 * (size_t)C + h * HS;
            double d_p = 0;
            for (uint32_t d = 0; d < HS; d++) {
                r.out[(size_t)i * HS + d] += p[j] * v[d];
                d_p += (double)g[d] * v[d];
            }
            dp[j] = d_p;
        }
        for (uint32_t d = 0; d < HS; d++) D += (double)g[d] * r.out[(size_t)i * HS + d];
        for (uint32_t j = 0; j <= i; j++) {
            double ds = p[j] * (dp[j] - D);
            const float *k = base + j * C3 + C + h * HS;
            for (uint32_t d = 0; d < HS; d++) {
                r.dq[(size_t)i * HS + d] += ds * k[d] * scale;
                r.dk[(size_t)j * HS + d] += ds * q[d] * scale;
                r.dv[(size_t)j * HS + d] += p[j] * g[d];
            }
        }
    }
    free(p);
    free(dp);
    return r;
}

static void head_ref_free(head_ref *r) { free(r->out); free(r->lse); free(r->dq); free(r->dk); free(r->dv); }

// largest |got - ref| over a head's [T, HS] block of a row-major array with row stride `stride`,
// relative to the block's largest |ref|
static double head_err(const float *got, size_t stride, size_t col0, const double *ref, uint32_t T, uint32_t HS,
                       size_t row0) {
    double e = 0, m = 1e-30;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t d = 0; d < HS; d++) {
            double r = ref[(size_t)t * HS + d], g = got[(row0 + t) * stride + col0 + d];
            e = fmax(e, fabs(g - r));
            m = fmax(m, fabs(r));
        }
    return e / m;
}

int main(int argc, char **argv) {
    const char *adapter = "gpu";
    int small = 0, reps = -1, profile = 0;
    long over[4] = {-1, -1, -1, -1};  // B, T, NH, HS
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--small")) small = 1;
        else if (!strcmp(a, "--profile")) profile = 1;
        else if (!strcmp(a, "--adapter") && i + 1 < argc) adapter = argv[++i];
        else if (!strcmp(a, "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(a, "--B") && i + 1 < argc) over[0] = atol(argv[++i]);
        else if (!strcmp(a, "--T") && i + 1 < argc) over[1] = atol(argv[++i]);
        else if (!strcmp(a, "--NH") && i + 1 < argc) over[2] = atol(argv[++i]);
        else if (!strcmp(a, "--HS") && i + 1 < argc) over[3] = atol(argv[++i]);
        else {
            printf("usage: bench_attention [--adapter auto|gpu|cpu|NAME] [--small] [--reps N] [--profile]\n"
                   "                       [--B N] [--T N] [--NH N] [--HS N]\n");
            return strcmp(a, "--help") ? 2 : 0;
        }
    }
    problem pr = {8, 1024, 0, 12, 64, NULL, NULL};
    if (small) { pr.B = 1; pr.T = 256; pr.NH = 2; }
    if (over[0] > 0) pr.B = (uint32_t)over[0];
    if (over[1] > 0) pr.T = (uint32_t)over[1];
    if (over[2] > 0) pr.NH = (uint32_t)over[2];
    if (over[3] > 0) pr.HS = (uint32_t)over[3];
    if (pr.HS > 128) { fprintf(stderr, "bench_attention: HS above 128 is not supported by the kernels\n"); return 2; }
    pr.C = pr.NH * pr.HS;
    if (reps < 1) reps = small ? 2 : 10;

    wgt_backend *be;
    if (backend_webgpu_init_ex(&be, adapter, profile) != WGT_OK) die("webgpu backend");
    const wg_device_info *info = wg_ctx_info(wg_of(be));
    uint32_t B = pr.B, T = pr.T, C = pr.C, NH = pr.NH, HS = pr.HS;
    size_t bt = (size_t)B * T, n3 = bt * 3 * C, nl = (size_t)B * NH * T;
    printf("attention on %s: B=%u T=%u NH=%u HS=%u (C=%u), %d calls per timing, workgroup memory %u bytes\n", info->name,
           B, T, NH, HS, C, reps, info->limits.maxComputeWorkgroupStorageSize);

    // q and k in ±1.5 give scores of a few units (a realistic, not uniform, softmax)
    pr.qkv = host_rand(n3, 1, 1.5f);
    pr.dout = host_rand(bt * C, 2, 1.0f);
    wgt_buf *qkv = dev_from(be, pr.qkv, n3, "qkv"), *dout = dev_from(be, pr.dout, bt * C, "dout");
    wgt_buf *out = dev_from(be, NULL, bt * C, "out"), *lse = dev_from(be, NULL, nl, "lse");
    wgt_buf *dqkv = dev_from(be, NULL, n3, "dqkv");

    double pairs = (double)B * NH * ((double)T * (T + 1) / 2);
    double fl_fwd = 4.0 * HS * pairs, fl_bwd = 10.0 * HS * pairs;

    // two heads checked at full size: the first and the last (b, h)
    uint32_t chk_b[2] = {0, B - 1}, chk_h[2] = {0, NH - 1};
    head_ref refs[2];
    double t_ref = now_s();
    for (int k = 0; k < 2; k++) refs[k] = head_reference(&pr, chk_b[k], chk_h[k]);
    t_ref = now_s() - t_ref;
    float *host = malloc(n3 * 4 + 4), *host_l = malloc(nl * 4 + 4);

    printf("%-28s %10s %9s %10s %9s  %s\n", "op", "ms/call", "GFLOP/s", "gpu ms", "GFLOP/s", "max error / max |ref|");
    double ms_fwd = 0, ms_auto = 0;
    for (int which = -1; which <= 3; which++) {  // -1 forward, then variants 1, 2, 3 and 0 (auto) last
        int v = which < 0 ? -1 : (which + 1) % 4;
        char label[64];
        if (v < 0) snprintf(label, sizeof label, "forward");
        else if (v == 0)
            snprintf(label, sizeof label, "backward auto (%s)",
                     variant_name[wg_attention_backward_auto_variant(be, B, T, C, NH)]);
        else snprintf(label, sizeof label, "backward %s", variant_name[v]);
        int ran = v;  // warm-up call: pipeline creation, bind groups, first touch
        if (v < 0) be->attention_forward(be, V0(out), V0(lse), V0(qkv), B, T, C, NH);
        else ran = wg_attention_backward_with(be, v, V0(dqkv), V0(dout), V0(qkv), V0(out), V0(lse), B, T, C, NH);
        if (be->sync(be) != WGT_OK) die("device");
        if (v > 0 && ran != v) {
            printf("%-28s %10s  (T = %u is above its limit on this device)\n", label, "n/a", T);
            continue;
        }
        double g0 = profile ? gpu_total_ms(be) : 0;
        double t0 = now_s();
        for (int r = 0; r < reps; r++) {
            if (v < 0) be->attention_forward(be, V0(out), V0(lse), V0(qkv), B, T, C, NH);
            else wg_attention_backward_with(be, v, V0(dqkv), V0(dout), V0(qkv), V0(out), V0(lse), B, T, C, NH);
        }
        if (be->sync(be) != WGT_OK) die("device");
        double ms = (now_s() - t0) * 1e3 / reps;
        double gms = profile ? (gpu_total_ms(be) - g0) / reps : 0;
        double fl = v < 0 ? fl_fwd : fl_bwd;
        if (v < 0) ms_fwd = profile ? gms : ms;
        if (v == 0) ms_auto = profile ? gms : ms;

        // check two heads against the host reference
        double err = 0;
        if (v < 0) {
            if (be->download(be, host, V0(out), bt * C) != WGT_OK || be->download(be, host_l, V0(lse), nl) != WGT_OK)
                die("download");
            for (int k = 0; k < 2; k++) {
                err = fmax(err, head_err(host, C, chk_h[k] * HS, refs[k].out, T, HS, (size_t)chk_b[k] * T));
                size_t l0 = ((size_t)chk_b[k] * NH + chk_h[k]) * T;
                for (uint32_t t = 0; t < T; t++) err = fmax(err, fabs(host_l[l0 + t] - refs[k].lse[t]) / fmax(1, fabs(refs[k].lse[t])));
            }
        } else {
            if (be->download(be, host, V0(dqkv), n3) != WGT_OK) die("download");
            for (int k = 0; k < 2; k++) {
                size_t row0 = (size_t)chk_b[k] * T, c0 = chk_h[k] * HS;
                err = fmax(err, head_err(host, 3 * (size_t)C, c0, refs[k].dq, T, HS, row0));
                err = fmax(err, head_err(host, 3 * (size_t)C, C + c0, refs[k].dk, T, HS, row0));
                err = fmax(err, head_err(host, 3 * (size_t)C, 2 * (size_t)C + c0, refs[k].dv, T, HS, row0));
            }
        }
        // f32 sums of up to T terms against double: anything near 1e-5 is rounding, 1e-2 a bug
        const char *verdict = err < 1e-3 ? "ok" : "MISMATCH";
        if (profile)
            printf("%-28s %10.3f %9.1f %10.3f %9.1f  %.2e %s\n", label, ms, fl / ms / 1e6, gms, fl / gms / 1e6, err, verdict);
        else
            printf("%-28s %10.3f %9.1f %10s %9s  %.2e %s\n", label, ms, fl / ms / 1e6, "-", "-", err, verdict);
    }
    printf("per GPT-2 step (12 layers, forward + automatic backward): %.2f ms%s\n", 12 * (ms_fwd + ms_auto),
           profile ? " of GPU time" : " wall-clock");
    printf("(host reference of the two checked heads took %.1f s)\n", t_ref);
    for (int k = 0; k < 2; k++) head_ref_free(&refs[k]);
    free(host); free(host_l); free(pr.qkv); free(pr.dout);
    be->buf_free(be, qkv); be->buf_free(be, dout); be->buf_free(be, out); be->buf_free(be, lse); be->buf_free(be, dqkv);
    be->free(be);
    return 0;
}
