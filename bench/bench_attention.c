// bench_attention.c — speed of causal multi-head attention on one WebGPU device: the forward
// (05_attention.wgsl) and each backward variant (10_backward_attention.wgsl: streaming,
// split-dKdV, fused, split-short where T allows it, and the automatic choice) at the GPT-2 124M
// training shape B = 8, T = 1024, NH = 12, HS = 64. Every run also checks, at that full size,
// the GPU results of two heads against a double-precision host computation, so that the tile
// sizes and unrolled loops of a real GPU (which the software-GPU tests cannot reach) are
// verified too.
//
// --sweep times every sensible setting of the tunables (wg_ops_attention.c: forward nl, tr, bc,
// sg; backward tiles of the dK/dV, dQ and fused kernels, their score micro-tiles and ncp), each
// checked like the rest, and prints a table, the best settings and the line to put first in
// attn_defaults (or the environment variables that try it without a rebuild).
//
// Timing: a warm-up call and a sync (pipeline creation, scratch growth, first touch), then
// --reps calls in one submit, wall-clock around the closing sync (ms per call); with --profile
// the GPU timestamps of the same dispatches. FLOPs: causal pairs P = T(T+1)/2 per (b, h);
// forward 4·HS·P (QKᵀ, PV), backward 10·HS·P (S recomputed, dP, dV, dK, dQ) for every variant,
// so that the rates compare time; split-dKdV really does 14·HS·P (S and dP twice).
//
// Usage: bench_attention [--adapter auto|gpu|software|NAME] [--small] [--reps N] [--profile] [--sweep]
//                        [--sweep-reg] [--budget SECONDS] [--B N] [--T N] [--NH N] [--NKV N] [--HS N] [--dropout P]
// --NKV: kv heads (grouped-query attention; must divide NH; default NH).
// --dropout: dropout probability on the attention probabilities (default 0; seed 1234), which the
// check's reference applies too.
// --sweep-reg times the register-resident kernels' layouts (v=reg: forward nl lanes a row, tr
// rows a thread, bc keys a tile, wg threads; backward rkv= and rq= lanes x rows x streamed rows,
// rt threads; then the best with the next tile prefetched, pf=1, and the forward's best with its
// probabilities through workgroup memory, pw=1) the same way, and prints the row to put first in
// attn_defaults for them.
// --budget: the sweep skips the settings it has not reached after this many seconds (default 60;
// the most promising ones come first).
// --small: B = 1, T = 256, NH = 2 (HS 64), for a smoke test on the software GPU.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend/backend.h"
#include "backend/dropout.h"
#include "backend/webgpu/wg_ops.h"
#include "core/clock.h"
#include "bench_common.h"

static const char *const variant_name[] = {"auto", "streaming", "split-dKdV", "split-short", "fused", "rows", "reg",
                                            "reg-ds"};

// The WGTRAIN_ATTN_FWD_CFG / WGTRAIN_ATTN_BWD_CFG texts the context started with (from the
// environment): what set_cfg(..., NULL) restores.
static char env_cfg[2][256];

static void env_cfg_save(wgt_backend *be) {
    const wg_settings *s = wg_ctx_settings(wg_of(be));
    snprintf(env_cfg[0], sizeof env_cfg[0], "%s", s->attn_fwd);
    snprintf(env_cfg[1], sizeof env_cfg[1], "%s", s->attn_bwd);
}

// Sets the forward (bwd = 0) or backward setting of the context; NULL restores the environment's.
static void set_cfg(wgt_backend *be, int bwd, const char *cfg) {
    if (wg_settings_set(wg_ctx_settings(wg_of(be)), bwd ? "WGTRAIN_ATTN_BWD_CFG" : "WGTRAIN_ATTN_FWD_CFG",
                        cfg ? cfg : env_cfg[bwd]) != WGT_OK)
        die("an attention setting");
}


// Reference of one query head (b, h) in double: out and lse rows, dq rows, and dk, dv rows of its
// kv head (each [T, HS]), summed over the query heads of that kv head's group.
typedef struct { double *out, *lse, *dq, *dk, *dv; } head_ref;

typedef struct {
    uint32_t B, T, C, NH, NKV, HS, W;  // C = NH·HS (out), W = (NH + 2·NKV)·HS (qkv)
    float *qkv, *dout;
    wgt_backend *be;
    wgt_buf *d_qkv, *d_dout, *d_out, *d_lse, *d_dqkv;
    float *host, *host_l;
    uint32_t chk_b[2], chk_h[2];
    head_ref refs[2];
    int reps, profile;
    float drop;     // attention dropout p, with seed
    uint32_t seed;
    double fl_fwd, fl_bwd;
    double budget, end;  // sweep: seconds in all, and when they run out
    double deadline;     // settings after this time are skipped (the current section's share)
    int skipped;
} bench;

static head_ref head_reference(const bench *pr, uint32_t b, uint32_t h) {
    uint32_t T = pr->T, HS = pr->HS, C = pr->C, GQ = pr->NH / pr->NKV, g = h / GQ;
    size_t W = pr->W, KC = C + (size_t)g * HS, VC = C + ((size_t)pr->NKV + g) * HS;
    head_ref r;
    r.out = calloc((size_t)T * HS, sizeof(double));
    r.lse = calloc(T, sizeof(double));
    r.dq = calloc((size_t)T * HS, sizeof(double));
    r.dk = calloc((size_t)T * HS, sizeof(double));
    r.dv = calloc((size_t)T * HS, sizeof(double));
    double *p = malloc((size_t)T * sizeof(double)), *dp = malloc((size_t)T * sizeof(double));
    double *o = malloc((size_t)HS * sizeof(double));
    double scale = 1.0 / sqrt((double)HS);
    double *m = malloc((size_t)T * sizeof(double));  // a row's dropout multipliers
    uint32_t thr = wgt_dropout_threshold(pr->drop);
    float dscale = wgt_dropout_scale(pr->drop);
    const float *base = pr->qkv + (size_t)b * T * W;
    const float *gbase = pr->dout + (size_t)b * T * C;
    for (uint32_t hh = g * GQ; hh < (g + 1) * GQ; hh++) {  // the group's query heads
        int own = hh == h;
        for (uint32_t i = 0; i < T; i++) {
            const float *q = base + i * W + hh * HS, *gr = gbase + (size_t)i * C + hh * HS;
            double mx = -INFINITY;
            for (uint32_t j = 0; j <= i; j++) {
                const float *k = base + j * W + KC;
                double s = 0;
                for (uint32_t d = 0; d < HS; d++) s += (double)q[d] * k[d];
                p[j] = s * scale;
                mx = fmax(mx, p[j]);
            }
            double sum = 0;
            for (uint32_t j = 0; j <= i; j++) sum += exp(p[j] - mx);
            double lse = mx + log(sum);
            if (own) r.lse[i] = lse;
            double D = 0;
            for (uint32_t d = 0; d < HS; d++) o[d] = 0;
            uint32_t rkey = wgt_dropout_key(pr->seed, ((uint32_t)b * pr->NH + hh) * T + i, WGT_DROPOUT_ATTN);
            for (uint32_t j = 0; j <= i; j++) {
                m[j] = thr ? wgt_dropout_mult(wgt_dropout_bits(rkey, j), thr, dscale) : 1.0;
                p[j] = exp(p[j] - lse);
                const float *v = base + j * W + VC;
                double d_p = 0;
                for (uint32_t d = 0; d < HS; d++) {
                    o[d] += p[j] * m[j] * v[d];
                    d_p += (double)gr[d] * v[d];
                }
                dp[j] = d_p * m[j];
            }
            for (uint32_t d = 0; d < HS; d++) {
                D += (double)gr[d] * o[d];
                if (own) r.out[(size_t)i * HS + d] = o[d];
            }
            for (uint32_t j = 0; j <= i; j++) {
                double ds = p[j] * (dp[j] - D);
                const float *k = base + j * W + KC;
                for (uint32_t d = 0; d < HS; d++) {
                    if (own) r.dq[(size_t)i * HS + d] += ds * k[d] * scale;
                    r.dk[(size_t)j * HS + d] += ds * q[d] * scale;
                    r.dv[(size_t)j * HS + d] += p[j] * m[j] * gr[d];
                }
            }
        }
    }
    free(m);
    free(p);
    free(dp);
    free(o);
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
            e = fmax(e, isfinite(g) ? fabs(g - r) : INFINITY);
            m = fmax(m, fabs(r));
        }
    return e / m;
}

// One forward (v < 0) or backward of variant v; returns the variant that ran.
static int run_once(bench *bn, int v) {
    wgt_backend *be = bn->be;
    if (v < 0) {
        be->attention_forward(be, V0(bn->d_out), V0(bn->d_lse), V0(bn->d_qkv), wgt_view_none(), bn->B, bn->T, bn->NH,
                              bn->NKV, bn->HS, bn->drop, bn->seed, 0);
        return v;
    }
    return wg_attention_backward_with(be, v, V0(bn->d_dqkv), V0(bn->d_dout), V0(bn->d_qkv), V0(bn->d_out),
                                      V0(bn->d_lse), wgt_view_none(), bn->B, bn->T, bn->NH, bn->NKV, bn->HS, bn->drop,
                                      bn->seed, 0);
}

// The largest error of the two checked heads relative to their largest value. Only the rows of
// the two checked batch elements are downloaded (a quarter of dqkv at the GPT-2 shape).
static double check(bench *bn, int v) {
    wgt_backend *be = bn->be;
    uint32_t T = bn->T, HS = bn->HS, C = bn->C, NH = bn->NH;
    double err = 0;
    for (int k = 0; k < 2; k++) {
        size_t b = bn->chk_b[k], c0 = bn->chk_h[k] * HS;
        if (v < 0) {
            wgt_view vo = wgt_view_of(bn->d_out, b * T * C, (size_t)T * C), vl = wgt_view_of(bn->d_lse, b * NH * T, (size_t)NH * T);
            if (be->download(be, bn->host, vo, (size_t)T * C) != WGT_OK ||
                be->download(be, bn->host_l, vl, (size_t)NH * T) != WGT_OK)
                die("download");
            err = fmax(err, head_err(bn->host, C, c0, bn->refs[k].out, T, HS, 0));
            for (uint32_t t = 0; t < T; t++) {
                double g = bn->host_l[(size_t)bn->chk_h[k] * T + t], r = bn->refs[k].lse[t];
                err = fmax(err, isfinite(g) ? fabs(g - r) / fmax(1, fabs(r)) : INFINITY);
            }
        } else {
            size_t s = bn->W, g0 = (size_t)(bn->chk_h[k] / (NH / bn->NKV)) * HS;  // the kv head's columns
            wgt_view vd = wgt_view_of(bn->d_dqkv, b * T * s, T * s);
            if (be->download(be, bn->host, vd, T * s) != WGT_OK) die("download");
            err = fmax(err, head_err(bn->host, s, c0, bn->refs[k].dq, T, HS, 0));
            err = fmax(err, head_err(bn->host, s, C + g0, bn->refs[k].dk, T, HS, 0));
            err = fmax(err, head_err(bn->host, s, C + (size_t)bn->NKV * HS + g0, bn->refs[k].dv, T, HS, 0));
        }
    }
    return err;
}

// Times forward (v < 0) or backward variant v under the current settings: ms per call (GPU time
// with --profile), *err the check; *ran the variant that ran. The warm-up call also fills out and
// lse (the forward) so that the backward reads consistent inputs.
static double timed(bench *bn, int v, double *err, int *ran) {
    wgt_backend *be = bn->be;
    // Warm-up for at least 0.3 s: on the H200 the first calls after a pipeline is created ran
    // several times slower (a backward's first timing in a fresh process 2.4-3.1 ms against 1.3
    // later; the sweep, which timed each setting right after creating it, 4-6x its settings' time
    // in a plain run).
    double w0 = wgt_now_s();
    int r = run_once(bn, v);
    if (be->sync(be) != WGT_OK) die("device");
    while (wgt_now_s() - w0 < 0.3) {
        run_once(bn, v);
        if (be->sync(be) != WGT_OK) die("device");
    }
    if (ran) *ran = r;
    double g0 = bn->profile ? wg_profile_total_ms(wg_of(be)) : 0;
    double t0 = wgt_now_s();
    for (int i = 0; i < bn->reps; i++) run_once(bn, v);
    if (be->sync(be) != WGT_OK) die("device");
    double ms = (wgt_now_s() - t0) * 1e3 / bn->reps;
    if (bn->profile) ms = (wg_profile_total_ms(wg_of(be)) - g0) / bn->reps;
    *err = check(bn, v);
    return ms;
}

// f32 sums of up to T terms against double: anything near 1e-5 is rounding, 1e-2 a bug
static const char *verdict(double err) { return err < 1e-3 ? "ok" : "MISMATCH"; }

// ------------------------------------------------------------------ sweep
typedef struct { char cfg[256]; double ms, err; } result;

static void row(const char *kind, const char *cfg, double ms, double fl, double err) {
    printf("%-8s %-44s %9.3f %9.1f  %.2e %s\n", kind, cfg, ms, fl / ms / 1e6, err, verdict(err));
    fflush(stdout);
}

// Times the forward (kind "fwd") or one backward variant under setting cfg; keeps the best ok one.
static void try_cfg(bench *bn, const char *kind, int v, const char *cfg, result *best) {
    int ok = v < 0 ? wg_attention_fwd_cfg_ok(bn->be, bn->HS, cfg) : wg_attention_bwd_cfg_ok(bn->be, bn->HS, cfg);
    if (!ok) return;
    if (wgt_now_s() > bn->deadline) { bn->skipped++; return; }
    set_cfg(bn->be, v >= 0, cfg);
    double err;
    int ran;
    double ms = timed(bn, v, &err, &ran);
    if (v > 0 && ran != v) { set_cfg(bn->be, 1, NULL); return; }  // fused fell back (auto, v = 0, runs what it picks)
    row(kind, cfg, ms, v < 0 ? bn->fl_fwd : bn->fl_bwd, err);
    if (err < 1e-3 && (best->ms <= 0 || ms < best->ms)) {
        snprintf(best->cfg, sizeof best->cfg, "%s", cfg);
        best->ms = ms;
        best->err = err;
    }
    set_cfg(bn->be, v >= 0, NULL);
}

// Starts a sweep section that may use `share` of the time left.
static void section(bench *bn, double share) {
    double t = wgt_now_s();
    bn->deadline = t + share * (bn->end > t ? bn->end - t : 0);
}

// Score micro-tiles worth trying for a BQ×BK tile: every RQSxRKS with RQS, RKS <= 4 and at least
// 4 scores a thread (fewer: 2 or more loads an FMA pair, never competitive) that gives a
// 128-thread grid. The wrapper rejects the rest; tiles with none are skipped.
static int micro_list(uint32_t bq, uint32_t bk, char out[][16]) {
    int n = 0;
    for (uint32_t rks = 1; rks <= 4; rks *= 2) {
        if (bk % rks) continue;
        uint32_t nxs = bk / rks;
        if (!nxs || 128 % nxs) continue;
        uint32_t nys = 128 / nxs;
        if (bq % nys || bq / nys > 4 || (bq / nys) * rks < 4) continue;
        snprintf(out[n++], 16, "/%ux%u", bq / nys, rks);
    }
    return n;
}

static void sweep(bench *bn) {
    static const uint32_t sizes[] = {8, 16, 32, 64, 128};
    double t_start = wgt_now_s();
    char cfg[288], desc[256];
    bn->end = t_start + bn->budget;
    printf("\ndefaults: %s\n", wg_attention_describe(bn->be, bn->HS, desc, sizeof desc));
    printf("%-8s %-44s %9s %9s  %s\n", "kernel", "setting", "ms/call", "GFLOP/s", "max error / max |ref|");

    // forward: every (nl, tr, bc, sg) the wrapper accepts, likely winners first; sg=1 only where
    // subgroups are usable. Each section may use a share of the time left (the rest: later ones).
    static const uint32_t nls[] = {8, 16, 4}, trs[] = {2, 4, 1, 8}, bcs[] = {64, 32, 128, 16};
    result bf = {"", 0, 0};
    section(bn, 0.4);
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 4; c++)
            for (int d = 0; d < 4; d++)
                for (int sg = 1; sg >= 0; sg--) {
                    snprintf(cfg, sizeof cfg, "nl=%u,tr=%u,bc=%u,sg=%d", nls[a], trs[c], bcs[d], sg);
                    if (!wg_attention_fwd_cfg_ok(bn->be, bn->HS, cfg)) continue;
                    if (sg) {  // skip when the wrapper would run it without subgroups (a repeat)
                        set_cfg(bn->be, 0, cfg);
                        int eff = strstr(wg_attention_describe(bn->be, bn->HS, desc, sizeof desc), ",sg=1 ") != NULL;
                        set_cfg(bn->be, 0, NULL);
                        if (!eff) continue;
                    }
                    try_cfg(bn, "fwd", -1, cfg, &bf);
                }
    // out and lse of a correct forward for the backward runs
    set_cfg(bn->be, 0, NULL);
    run_once(bn, -1);
    double t_fwd = wgt_now_s() - t_start;

    // backward tiles BQ×BK with every score micro-tile, the largest tiles first (the likely
    // winners, timed before the budget runs out): fused (the default variant), then split-dKdV's
    // dK/dV tile with dQ at its default, then its dQ tile with the best dK/dV tile
    static char tiles[64][32];
    int nt = 0;
    for (uint32_t area = 128 * 128; area >= 64; area /= 2)
        for (int si = 0; si < 5; si++)
            for (int sj = 0; sj < 5; sj++) {
                if (sizes[si] * sizes[sj] != area) continue;
                char micro[8][16];
                int nm = micro_list(sizes[si], sizes[sj], micro);
                for (int m = 0; m < nm && nt < 64; m++)
                    snprintf(tiles[nt++], sizeof tiles[0], "%ux%u%s", sizes[si], sizes[sj], micro[m]);
            }
    result bk_split = {"", 0, 0}, bq_split = {"", 0, 0}, b_fused = {"", 0, 0}, b_stream = {"", 0, 0};
    section(bn, 0.35);
    for (int i = 0; i < nt; i++) {
        snprintf(cfg, sizeof cfg, "v=fused,kv=%.31s", tiles[i]);
        try_cfg(bn, "fused", 4, cfg, &b_fused);
    }
    section(bn, 0.5);
    for (int i = 0; i < nt; i++) {
        snprintf(cfg, sizeof cfg, "v=split,kv=%.31s", tiles[i]);
        try_cfg(bn, "split", 2, cfg, &bk_split);
    }
    const char *kvbest = bk_split.cfg[0] ? strstr(bk_split.cfg, "kv=") : NULL;
    section(bn, 0.7);
    for (int i = 0; i < nt; i++) {
        snprintf(cfg, sizeof cfg, "v=split,%.64s%sq=%.31s", kvbest ? kvbest : "", kvbest ? "," : "", tiles[i]);
        try_cfg(bn, "split", 2, cfg, &bq_split);
    }
    if (!bq_split.cfg[0]) bq_split = bk_split;
    section(bn, 1.0);
    // the column groups of the products, for the two best (the default's number is in their rows)
    result *bests[2] = {&bq_split, &b_fused};
    unsigned ncp0 = 0;
    const char *nd = strstr(wg_attention_describe(bn->be, bn->HS, desc, sizeof desc), "ncp=");
    if (nd) sscanf(nd, "ncp=%u", &ncp0);
    for (int k = 0; k < 2; k++) {
        if (!bests[k]->cfg[0]) continue;
        char base[224];
        snprintf(base, sizeof base, "%.200s", bests[k]->cfg);
        for (uint32_t ncp = 4; ncp <= 32; ncp *= 2) {
            if (ncp == ncp0) continue;
            snprintf(cfg, sizeof cfg, "%s,ncp=%u", base, ncp);
            try_cfg(bn, k ? "fused" : "split", k ? 4 : 2, cfg, bests[k]);
        }
    }
    // streaming (one workgroup per head: only for many heads; a few tiles for reference)
    static const char *const st_tiles[] = {"v=stream,st=16x16", "v=stream,st=32x32", "v=stream,st=16x64"};
    for (int i = 0; i < 3; i++) try_cfg(bn, "stream", 1, st_tiles[i], &b_stream);

    // summary
    printf("\nsweep took %.1f s (forward part %.1f s)\n", wgt_now_s() - t_start, t_fwd);
    if (bn->skipped)
        printf("%d settings skipped: the time budget ran out (raise it with --budget S)\n", bn->skipped);
    printf("best forward:          %-44s %9.3f ms\n", bf.cfg, bf.ms);
    printf("best split-dKdV:       %-44s %9.3f ms\n", bq_split.cfg, bq_split.ms);
    printf("best fused:            %-44s %9.3f ms\n", b_fused.cfg, b_fused.ms);
    printf("best streaming:        %-44s %9.3f ms\n", b_stream.cfg, b_stream.ms);
    if (!bf.cfg[0] || (!bq_split.cfg[0] && !b_fused.cfg[0])) {
        printf("no correct setting found: keep the defaults and look at the MISMATCH rows\n");
        return;
    }
    // the backward line: the faster of fused and split; the other kernels' tiles from the split sweep
    int fused_wins = b_fused.cfg[0] && (!bq_split.cfg[0] || b_fused.ms < bq_split.ms);
    const result *bb = fused_wins ? &b_fused : &bq_split;
    char line[256];
    const char *kv = fused_wins ? strstr(b_fused.cfg, "kv=") : strstr(bq_split.cfg, "kv=");
    const char *q = bq_split.cfg[0] ? strstr(bq_split.cfg, "q=") : NULL;
    const char *ncp = strstr(bb->cfg, "ncp=");
    char kvs[32] = "", qs[32] = "", ncps[16] = "";
    if (kv) sscanf(kv, "kv=%31[^,]", kvs);
    if (q) sscanf(q, "q=%31[^,]", qs);
    if (ncp) sscanf(ncp, "ncp=%15[^,]", ncps);
    char sts[32] = "";  // streaming's tile: the current default's (not swept at this shape)
    const char *st = strstr(wg_attention_describe(bn->be, bn->HS, desc, sizeof desc), "st=");
    if (st) sscanf(st, "st=%31[^,]", sts);
    snprintf(line, sizeof line, "v=%s%s%s%s%s%s%s%s%s", fused_wins ? "fused" : "split", kvs[0] ? ",kv=" : "", kvs,
             qs[0] ? ",q=" : "", qs, sts[0] ? ",st=" : "", sts, ncps[0] ? ",ncp=" : "", ncps);
    printf("\nper GPT-2 124M step (12 layers, forward + backward), best settings: %.2f ms%s\n", 12 * (bf.ms + bb->ms),
           bn->profile ? " of GPU time" : " wall-clock");
    printf("to try them:   WGTRAIN_ATTN_FWD_CFG=%s WGTRAIN_ATTN_BWD_CFG=%s\n", bf.cfg, line);
    printf("to adopt them: put this row first in attn_defaults (src/backend/webgpu/wg_ops_attention.c):\n"
           "    {\"%s\", \"%s\", 0, 0},\n", bf.cfg, line);
}

// The register-resident kernels (v=reg): forward layouts, then the dK/dV layout with dQ at its
// default, then the dQ layout with the best dK/dV one, then the threads of both; likely winners
// first in each section. Layouts the wrapper refuses (registers, workgroup memory, subgroup
// size) are skipped without a run.
static void sweep_reg(bench *bn) {
    static const uint32_t lanes[] = {4, 2, 8, 1, 16}, rows[] = {2, 1, 4}, tiles[] = {32, 16, 64}, thr[] = {128, 256, 64};
    double t_start = wgt_now_s();
    char cfg[288], desc[256];
    bn->end = t_start + bn->budget;
    bn->skipped = 0;
    printf("\nregister-resident kernels (v=reg); defaults: %s\n", wg_attention_describe(bn->be, bn->HS, desc, sizeof desc));
    printf("%-8s %-44s %9s %9s  %s\n", "kernel", "setting", "ms/call", "GFLOP/s", "max error / max |ref|");
    result bf = {"", 0, 0}, bkv = {"", 0, 0}, bq = {"", 0, 0};
    section(bn, 0.35);
    for (int w = 0; w < 3; w++)
        for (int a = 0; a < 5; a++)
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 3; c++) {
                    snprintf(cfg, sizeof cfg, "v=reg,nl=%u,tr=%u,bc=%u,wg=%u", lanes[a], rows[r], tiles[c], thr[w]);
                    try_cfg(bn, "fwd-reg", -1, cfg, &bf);
                }
    set_cfg(bn->be, 0, NULL);
    run_once(bn, -1);  // out and lse of the default forward for the backward runs
    section(bn, 0.5);
    for (int a = 0; a < 5; a++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++) {
                snprintf(cfg, sizeof cfg, "v=reg,rkv=%ux%ux%u", lanes[a], rows[r], tiles[c]);
                try_cfg(bn, "bwd-reg", 6, cfg, &bkv);
            }
    char kv[64] = "";
    if (bkv.cfg[0]) sscanf(strstr(bkv.cfg, "rkv="), "rkv=%63[^,]", kv);
    section(bn, 0.8);
    for (int a = 0; a < 5; a++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++) {
                snprintf(cfg, sizeof cfg, "v=reg%s%s,rq=%ux%ux%u", kv[0] ? ",rkv=" : "", kv, lanes[a], rows[r], tiles[c]);
                try_cfg(bn, "bwd-reg", 6, cfg, &bq);
            }
    if (!bq.cfg[0]) bq = bkv;
    section(bn, 1.0);
    if (bq.cfg[0]) {
        char base[224];
        snprintf(base, sizeof base, "%.200s", bq.cfg);
        for (int w = 0; w < 3; w++) {
            snprintf(cfg, sizeof cfg, "%s,rt=%u", base, thr[w]);
            try_cfg(bn, "bwd-reg", 6, cfg, &bq);
        }
        snprintf(base, sizeof base, "%.200s", bq.cfg);  // the next tile prefetched into registers
        snprintf(cfg, sizeof cfg, "%s,pf=1", base);
        try_cfg(bn, "bwd-reg", 6, cfg, &bq);
    }
    if (bf.cfg[0]) {
        char base[224];
        snprintf(base, sizeof base, "%.200s", bf.cfg);
        snprintf(cfg, sizeof cfg, "%s,pf=1", base);
        try_cfg(bn, "fwd-reg", -1, cfg, &bf);
        snprintf(base, sizeof base, "%.200s", bf.cfg);  // the probabilities through workgroup memory
        snprintf(cfg, sizeof cfg, "%s,pw=1", base);
        try_cfg(bn, "fwd-reg", -1, cfg, &bf);
    }
    printf("\nsweep took %.1f s\n", wgt_now_s() - t_start);
    if (bn->skipped)
        printf("%d settings skipped: the time budget ran out (raise it with --budget S)\n", bn->skipped);
    printf("best forward (reg):    %-44s %9.3f ms\n", bf.cfg, bf.ms);
    printf("best backward (reg):   %-44s %9.3f ms\n", bq.cfg, bq.ms);
    if (!bf.cfg[0] || !bq.cfg[0]) {
        printf("no correct register-resident setting found on this device\n");
        return;
    }
    printf("\nper GPT-2 124M step (12 layers, forward + backward), best settings: %.2f ms%s\n", 12 * (bf.ms + bq.ms),
           bn->profile ? " of GPU time" : " wall-clock");
    printf("to try them:   WGTRAIN_ATTN_FWD_CFG=%s WGTRAIN_ATTN_BWD_CFG=%s\n", bf.cfg, bq.cfg);
    printf("to adopt them: put this row first in attn_defaults (src/backend/webgpu/wg_ops_attention.c; the\n"
           "               last fields: the least subgroup size of the devices it is meant for, the\n"
           "               largest head size):\n"
           "    {\"%s\", \"%s\", %u, %u},\n", bf.cfg, bq.cfg, wg_ctx_info(wg_of(bn->be))->subgroup_min, bn->HS);
}

// --peer FILE: the peer's forward and forward+backward ms at this B, T, NH, HS
// (bench/torch_peer.py's "attention <B> <T> <NH> <HS> <fwd ms> <fwd+bwd ms> <backend>" lines).
// 0 when the file has no such line.
static int peer_attention(const char *path, const bench *bn, double *fwd, double *fb, char *backend, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "bench_attention: cannot read --peer %s\n", path); exit(2); }
    char line[512], be[64];
    unsigned b, t, nh, hs;
    double x, y;
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "attention %u %u %u %u %lf %lf %63s", &b, &t, &nh, &hs, &x, &y, be) == 7 && b == bn->B &&
            t == bn->T && nh == bn->NH && hs == bn->HS && bn->NKV == bn->NH && x > 0 && y > 0 && isfinite(x) && isfinite(y)) {
            *fwd = x, *fb = y, found = 1;
            snprintf(backend, cap, "%s", be);
        }
    fclose(f);
    return found;
}

int main(int argc, char **argv) {
    const char *adapter = "gpu", *peer_path = NULL, *try_bwd = NULL;
    int small = 0, reps = -1, profile = 0, do_sweep = 0, do_sweep_reg = 0;
    double budget = 60;
    long over[5] = {-1, -1, -1, -1, -1};  // B, T, NH, HS, NKV
    double drop = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--small")) small = 1;
        else if (!strcmp(a, "--profile")) profile = 1;
        else if (!strcmp(a, "--sweep")) do_sweep = 1;
        else if (!strcmp(a, "--sweep-reg")) do_sweep_reg = 1;
        else if (!strcmp(a, "--budget") && i + 1 < argc) budget = arg_real(a, argv[++i], 0, 86400);
        else if (!strcmp(a, "--adapter") && i + 1 < argc) adapter = argv[++i];
        else if (!strcmp(a, "--peer") && i + 1 < argc) peer_path = argv[++i];
        else if (!strcmp(a, "--try-bwd") && i + 1 < argc) try_bwd = argv[++i];
        else if (!strcmp(a, "--reps") && i + 1 < argc) reps = (int)arg_whole(a, argv[++i], 1, 100000);
        else if (!strcmp(a, "--B") && i + 1 < argc) over[0] = arg_whole(a, argv[++i], 1, 4096);
        else if (!strcmp(a, "--T") && i + 1 < argc) over[1] = arg_whole(a, argv[++i], 1, 131072);
        else if (!strcmp(a, "--NH") && i + 1 < argc) over[2] = arg_whole(a, argv[++i], 1, 1024);
        else if (!strcmp(a, "--HS") && i + 1 < argc) over[3] = arg_whole(a, argv[++i], 1, 256);  // the kernels' largest head
        else if (!strcmp(a, "--NKV") && i + 1 < argc) over[4] = arg_whole(a, argv[++i], 1, 1024);
        else if (!strcmp(a, "--dropout") && i + 1 < argc) drop = arg_real(a, argv[++i], 0, 1);
        else {
            printf("usage: bench_attention [--adapter auto|gpu|software|NAME] [--small] [--reps N] [--profile] [--sweep]\n"
                   "                       [--sweep-reg] [--budget SECONDS] [--B N] [--T N] [--NH N] [--NKV N] [--HS N]\n"
                   "                       [--dropout P] [--peer FILE] [--try-bwd 'CFG;CFG;...']\n"
                   "  --peer FILE  the peer's times at this size (bench/torch_peer.py's output): adds the ratio\n"
                   "  --sweep      every setting of the shared-tile kernels; --sweep-reg those of the register-\n"
                   "               resident kernels (v=reg); each prints the best and the attn_defaults row\n"
                   "  --try-bwd L  the forward and the automatic backward at the defaults, then the backward\n"
                   "               under each WGTRAIN_ATTN_BWD_CFG text of L (other variants not timed)\n");
            return strcmp(a, "--help") ? 2 : 0;
        }
    }
    bench bn;
    memset(&bn, 0, sizeof bn);
    bn.B = 8; bn.T = 1024; bn.NH = 12; bn.HS = 64;
    if (small) { bn.B = 1; bn.T = 256; bn.NH = 2; }
    if (over[0] > 0) bn.B = (uint32_t)over[0];
    if (over[1] > 0) bn.T = (uint32_t)over[1];
    if (over[2] > 0) bn.NH = (uint32_t)over[2];
    if (over[3] > 0) bn.HS = (uint32_t)over[3];
    bn.NKV = over[4] > 0 ? (uint32_t)over[4] : bn.NH;
    if (bn.NH % bn.NKV) { fprintf(stderr, "bench_attention: NKV must divide NH\n"); return 2; }
    bn.drop = (float)drop;
    bn.seed = 1234;
    bn.C = bn.NH * bn.HS;
    bn.W = (bn.NH + 2 * bn.NKV) * bn.HS;
    if (reps < 1) reps = small ? 2 : do_sweep || do_sweep_reg ? 5 : 10;
    bn.reps = reps;
    bn.profile = profile;
    bn.budget = budget;

    if (backend_webgpu_init_ex(&bn.be, adapter, profile) != WGT_OK) die("webgpu backend");
    wgt_backend *be = bn.be;
    env_cfg_save(be);
    const wg_device_info *info = wg_ctx_info(wg_of(be));
    uint32_t B = bn.B, T = bn.T, C = bn.C, NH = bn.NH, NKV = bn.NKV, HS = bn.HS;
    size_t bt = (size_t)B * T, n3 = bt * bn.W, nl = (size_t)B * NH * T;
    printf("attention on %s: B=%u T=%u NH=%u NKV=%u HS=%u (C=%u) dropout %g, %d calls per timing, workgroup memory %u "
           "bytes, subgroups %s (%u..%u)\n",
           info->name, B, T, NH, NKV, HS, C, bn.drop, reps, info->limits.maxComputeWorkgroupStorageSize,
           info->has_subgroups ? "yes" : "no", info->subgroup_min, info->subgroup_max);

    // q and k in ±1.5 give scores of a few units (a realistic, not uniform, softmax)
    bn.qkv = host_rand(n3, 1, 1.5f);
    bn.dout = host_rand(bt * C, 2, 1.0f);
    bn.d_qkv = dev_from(be, bn.qkv, n3, "qkv");
    bn.d_dout = dev_from(be, bn.dout, bt * C, "dout");
    bn.d_out = dev_from(be, NULL, bt * C, "out");
    bn.d_lse = dev_from(be, NULL, nl, "lse");
    bn.d_dqkv = dev_from(be, NULL, n3, "dqkv");
    double pairs = (double)B * NH * ((double)T * (T + 1) / 2);
    bn.fl_fwd = 4.0 * HS * pairs;
    bn.fl_bwd = 10.0 * HS * pairs;

    // two heads checked at full size: the first and the last (b, h)
    bn.chk_b[0] = 0; bn.chk_b[1] = B - 1; bn.chk_h[0] = 0; bn.chk_h[1] = NH - 1;
    double t_ref = wgt_now_s();
    for (int k = 0; k < 2; k++) bn.refs[k] = head_reference(&bn, bn.chk_b[k], bn.chk_h[k]);
    t_ref = wgt_now_s() - t_ref;
    bn.host = malloc(n3 * 4 + 4);
    bn.host_l = malloc(nl * 4 + 4);

    char desc[256];
    printf("settings: %s\n", wg_attention_describe(be, HS, desc, sizeof desc));
    printf("%-28s %10s %9s  %s\n", "op", profile ? "gpu ms" : "ms/call", "GFLOP/s", "max error / max |ref|");
    double ms_fwd = 0, ms_auto = 0;
    // the other forward kernel than the default's (shared-tile or register-resident), where one fits
    {
        int dflt_reg = strstr(desc, "fwd v=reg") != NULL;
        const char *other = dflt_reg ? "v=tile" : "v=reg";
        if (wg_attention_fwd_cfg_ok(be, HS, other)) {
            set_cfg(be, 0, other);
            double err;
            double ms = timed(&bn, -1, &err, NULL);
            char label[64];
            snprintf(label, sizeof label, "forward, %s", other);
            printf("%-28s %10.3f %9.1f  %.2e %s   (%s)\n", label, ms, bn.fl_fwd / ms / 1e6, err, verdict(err),
                   wg_attention_describe(be, HS, desc, sizeof desc));
            set_cfg(be, 0, NULL);
        }
    }
    // -1 forward (the default), then variants 1..4, 6 (reg), 7 (reg-ds) and 0 (auto) last
    static const int order[] = {-1, 1, 2, 3, 4, 6, 7, 0};
    for (size_t oi = 0; oi < sizeof order / sizeof order[0]; oi++) {
        int v = order[oi];
        if (try_bwd && v > 0) continue;
        char label[64];
        if (v < 0) snprintf(label, sizeof label, "forward");
        else if (v == 0)
            snprintf(label, sizeof label, "backward auto (%s)",
                     variant_name[wg_attention_backward_auto_variant(be, B, T, NH, NKV, HS)]);
        else snprintf(label, sizeof label, "backward %s", variant_name[v]);
        double err;
        int ran;
        double ms = timed(&bn, v, &err, &ran);
        if (v > 0 && ran != v) {
            printf("%-28s %10s  (does not fit this device at T = %u, HS = %u; %s ran)\n", label, "n/a", T, HS,
                   variant_name[ran]);
            continue;
        }
        if (v < 0) ms_fwd = ms;
        if (v == 0) ms_auto = ms;
        printf("%-28s %10.3f %9.1f  %.2e %s\n", label, ms, (v < 0 ? bn.fl_fwd : bn.fl_bwd) / ms / 1e6, err,
               verdict(err));
    }
    printf("per GPT-2 step (12 layers, forward + automatic backward): %.2f ms%s\n", 12 * (ms_fwd + ms_auto),
           profile ? " of GPU time" : " wall-clock");
    if (profile) {  // where the default forward and backward spend it, kernel by kernel
        wg_profile_reset(wg_of(be));
        for (int i = 0; i < bn.reps; i++) {
            run_once(&bn, -1);
            run_once(&bn, 0);
        }
        if (be->sync(be) != WGT_OK) die("device");
        printf("kernels of %d forward + automatic backward calls:\n", bn.reps);
        wg_profile_report(wg_of(be), stdout);
    }
    double pf, pfb;
    char pbe[64];
    if (peer_path && peer_attention(peer_path, &bn, &pf, &pfb, pbe, sizeof pbe))
        printf("peer (%s, wall-clock): forward %.3f ms, forward+backward %.3f ms; ours %.3f ms = %.2fx the peer's "
               "time (forward %.2fx)\n", pbe, pf, pfb, ms_fwd + ms_auto, (ms_fwd + ms_auto) / pfb, ms_fwd / pf);
    else if (peer_path) printf("peer: no line for B=%u T=%u NH=%u HS=%u\n", B, T, NH, HS);
    printf("(host reference of the two checked heads took %.1f s)\n", t_ref);
    if (do_sweep) sweep(&bn);
    if (do_sweep_reg) sweep_reg(&bn);
    if (try_bwd) {  // the backward under each given setting, checked as the sweeps' rows
        result best = {"", 0, 0};
        char list[1024];
        snprintf(list, sizeof list, "%s", try_bwd);
        bn.deadline = wgt_now_s() + 1e9;
        printf("\n%-8s %-44s %9s %9s  %s\n", "kernel", "setting", "ms/call", "GFLOP/s", "max error / max |ref|");
        for (char *save = NULL, *c = strtok_r(list, ";", &save); c; c = strtok_r(NULL, ";", &save)) {
            if (!wg_attention_bwd_cfg_ok(be, HS, c)) { printf("bwd      %-44s refused (does not fit)\n", c); continue; }
            try_cfg(&bn, "bwd", 0, c, &best);
        }
        if (best.ms > 0) printf("best backward: %s %.3f ms\n", best.cfg, best.ms);
    }
    for (int k = 0; k < 2; k++) head_ref_free(&bn.refs[k]);
    free(bn.host); free(bn.host_l); free(bn.qkv); free(bn.dout);
    be->buf_free(be, bn.d_qkv); be->buf_free(be, bn.d_dout); be->buf_free(be, bn.d_out); be->buf_free(be, bn.d_lse);
    be->buf_free(be, bn.d_dqkv);
    be->free(be);
    return 0;
}
