// test_kernels_attention.c — causal multi-head attention in WGSL (05_attention.wgsl forward,
// 10_backward_attention.wgsl backward, every variant) against the C reference.
// Shapes: tiny (B=2, T=5, HS=4), T not a multiple of any tile (67, 70, 100), HS = 64 with NH = 2,
// T = 256, HS = 128, HS not a multiple of 4, T at the split-short limit; grouped-query heads
// (NH = 8, NKV = 2 and NH = 4, NKV = 1) through every variant, whose results must also repeat
// bit for bit (dK, dV summed over a group in a fixed order); inputs scaled so that the
// scores reach about ±20 in some rows (peaky softmax) and stay near 0 in others; and q, k, v at
// ±80 (scores in the thousands) for finiteness. Besides the device's defaults, a few other tile
// settings (through the context's settings, parsed as from the environment) reach the code paths that the
// defaults of a 32 KiB device do not: 4 rows a thread and no subgroups in the forward, 4 lanes a
// row; 2-key score micro-tiles, 4 keys a thread in the products (vec4 reads of P and dS), query
// tiles taller than key tiles, 2 rows a thread in the fused dQ product. Dropout on the
// probabilities (p > 0) through every variant against the reference, and its masks read off the
// outputs (check_masks) and compared with the hash bit for bit.
//
// Every distinct head size and setting compiles its own pipelines, which costs the software
// rasterizer about a second each: the cases below are chosen to keep their number near 40.
//
// The mask (docs/kernels.md#attention-mask): packed examples (doc_start) of lengths that leave
// whole tiles masked (so the skipping paths run) and single-token examples, a sliding window
// alone and with examples, through every variant; g_doc / g_window set the mask of run_case.
//
// The backward gets the same inputs on both backends (out and lse of the C forward), so that
// its comparison measures the backward alone. WGTRAIN_TEST_VERBOSE=1 prints, for every
// comparison, the worst error as a fraction of its tolerance.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend_pair.h"
#include "backend/dropout.h"
#include "testlib.h"
#include "backend/webgpu/wg_ops.h"
#include "core/clock.h"

static int verbose = 0;
static const char *variant_name[] = {"auto", "streaming", "split-dKdV", "split-short", "fused", "rows", "reg", "reg-ds"};

// which backward variants a case runs (RUN_ROWS: the row kernels of 17_attention_rows.wgsl, what
// runs where no tile fits the head size)
enum { RUN_STREAM = 1 << 1, RUN_SPLIT = 1 << 2, RUN_SHORT = 1 << 3, RUN_FUSED = 1 << 4, RUN_ROWS = 1 << 5,
       RUN_REG = 1 << 6, RUN_REGDS = 1 << 7, RUN_AUTO = 1 << 0, RUN_REGS = RUN_REG | RUN_REGDS };
// 1: run_case's forward is the row kernel whatever the head size (wg_attention_rows_forward)
static int rows_forward = 0;



static float max_abs(const float *x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

// qkv[B,T,W], W = C + 2·NKV·HS (C = NH·HS): q columns scaled by 0.3, 1 or 3.5 (row t mod 3), k by
// 2, so that |q·k|/sqrt(HS) spans near-uniform softmax rows and peaky ones (scores up to about
// ±20); v standard normal.
// The mask of run_case: g_doc 0 none, else examples of lengths 1 + (hash % g_doc) (g_doc > T:
// mostly long ones); g_window the sliding window (0: none).
static uint32_t g_doc = 0, g_window = 0;

// doc_start for B sequences of T (NULL when g_doc is 0): examples of random lengths, one of
// length 1 at the start of every sequence so that single-token rows occur.
static uint32_t *make_doc(uint32_t B, uint32_t T) {
    if (!g_doc) return NULL;
    uint32_t *d = malloc((size_t)B * T * 4);
    for (uint32_t b = 0; b < B; b++) {
        uint32_t start = 0, left = 1;
        for (uint32_t t = 0; t < T; t++) {
            if (!left) {
                start = t;
                left = 1 + trng_u32() % g_doc;
            }
            d[(size_t)b * T + t] = start;
            left--;
        }
    }
    return d;
}

static float *make_qkv(uint32_t B, uint32_t T, uint32_t C, uint32_t W, float extreme) {
    size_t n = (size_t)B * T * W;
    float *x = malloc(n * 4);
    static const float qs[3] = {0.3f, 1.0f, 3.5f};
    uint32_t kend = C + (W - C) / 2;
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (uint32_t c = 0; c < W; c++) {
            float v = extreme > 0 ? trng_uniform(-extreme, extreme) : trng_normal();
            if (extreme <= 0) v *= c < C ? qs[(r % T) % 3] : c < kend ? 2.0f : 1.0f;
            x[r * W + c] = v;
        }
    return x;
}

// One shape under the current settings: forward (out, lse) and the backward variants in `runs`
// (dqkv). `note` names the settings in the check labels. With grouped kv heads every variant runs
// twice and must give the same bits.
static void run_case(bpair *p, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, float extreme, int runs,
                     const char *note, float drop, uint32_t seed) {
    double t0 = wgt_now_s();
    char what[224], tag[160];
    uint32_t C = NH * HS, W = (NH + 2 * NKV) * HS;
    char dtag[96] = "";
    if (drop > 0) snprintf(dtag, sizeof dtag, " dropout %g seed %u", drop, seed);
    if (g_doc || g_window) {
        size_t l = strlen(dtag);
        snprintf(dtag + l, sizeof dtag - l, " docs<=%u window %u", g_doc, g_window);
    }
    snprintf(tag, sizeof tag, "B=%u T=%u NH=%u NKV=%u HS=%u%s%s%s%s", B, T, NH, NKV, HS, dtag,
             extreme > 0 ? " (±80)" : "", note ? " " : "", note ? note : "");
    size_t bt = (size_t)B * T, n3 = bt * W, nl = (size_t)B * NH * T;
    float *qkv = make_qkv(B, T, C, W, extreme);
    btensor tq = bt_new(p, n3, qkv), to = bt_new(p, bt * C, NULL), tl = bt_new(p, nl, NULL);
    uint32_t *doc = make_doc(B, T);
    btensor tdoc = bt_new(p, doc ? bt : 1, doc);
    wgt_view dc = doc ? bt_c(tdoc) : wgt_view_none(), dg = doc ? bt_g(tdoc) : wgt_view_none();
    const uint32_t win = g_window;

    p->cpu->attention_forward(p->cpu, bt_c(to), bt_c(tl), bt_c(tq), dc, B, T, NH, NKV, HS, drop, seed, win);
    if (rows_forward)
        wg_attention_rows_forward(p->gpu, bt_g(to), bt_g(tl), bt_g(tq), dg, B, T, NH, NKV, HS, drop, seed, win);
    else
        p->gpu->attention_forward(p->gpu, bt_g(to), bt_g(tl), bt_g(tq), dg, B, T, NH, NKV, HS, drop, seed, win);
    float *oc, *og, *lc, *lg;
    bt_get(p, to, &oc, &og);
    bt_get(p, tl, &lc, &lg);
    if (extreme > 0) {
        // scores in the thousands: one f32 ulp of a score moves P by ~1e-3, so only finiteness and
        // a loose match (out is a convex combination of v in ±80) are meaningful
        snprintf(what, sizeof what, "forward out finite, %s", tag);
        CHECK(all_finite(og, bt * C) && all_finite(lg, nl), "%s", what);
        snprintf(what, sizeof what, "forward out, %s", tag);
        CHECK_CLOSE_REPORT(what, og, oc, bt * C, 0.1, 0.0);
        snprintf(what, sizeof what, "forward lse, %s", tag);
        CHECK_CLOSE_REPORT(what, lg, lc, nl, 5e-3, 1e-4);
    } else {
        // out = Σ P·v with |v| <~ 4: f32 score and exp2 rounding (scores up to ~20 carry ~1e-6
        // relative error into P) against the reference's double sums
        snprintf(what, sizeof what, "forward out, %s", tag);
        CHECK_CLOSE_REPORT(what, og, oc, bt * C, 3e-5, 1e-4);
        // lse = max + log(sum): a few f32 ulps of a score of ~20
        snprintf(what, sizeof what, "forward lse, %s", tag);
        CHECK_CLOSE_REPORT(what, lg, lc, nl, 3e-5, 3e-6);
    }

    // backward on identical inputs: the reference's out and lse
    float *dout = trand_normal(bt * C, 1.0f);
    btensor tg = bt_new(p, bt * C, dout), td = bt_new(p, n3, NULL);
    p->gpu->upload(p->gpu, bt_g(to), oc, bt * C);
    p->gpu->upload(p->gpu, bt_g(tl), lc, nl);
    p->cpu->attention_backward(p->cpu, bt_c(td), bt_c(tg), bt_c(tq), bt_c(to), bt_c(tl), dc, B, T, NH, NKV, HS, drop, seed,
                               win);
    float *ref = malloc(n3 * 4), *got = malloc(n3 * 4), *again = malloc(n3 * 4), *poison = malloc(n3 * 4);
    CHECK(p->cpu->sync(p->cpu) == WGT_OK, "cpu sync");
    p->cpu->download(p->cpu, ref, bt_c(td), n3);
    for (size_t i = 0; i < n3; i++) poison[i] = NAN;  // every element must be overwritten
    float scale = max_abs(ref, n3);
    int auto_v = wg_attention_backward_auto_variant(p->gpu, B, T, NH, NKV, HS);
    for (int v = 0; v <= 7; v++) {
        if (!(runs & (1 << v))) continue;
        p->gpu->upload(p->gpu, bt_g(td), poison, n3);
        int ran = wg_attention_backward_with(p->gpu, v, bt_g(td), bt_g(tg), bt_g(tq), bt_g(to), bt_g(tl), dg, B, T, NH,
                                             NKV, HS, drop, seed, win);
        CHECK(v == 0 ? ran == auto_v : ran == v, "%s: variant %d ran as %d", tag, v, ran);
        CHECK(p->gpu->sync(p->gpu) == WGT_OK, "device error: %s", wgt_last_error());
        p->gpu->download(p->gpu, got, bt_g(td), n3);
        snprintf(what, sizeof what, "backward dqkv %s%s, %s", variant_name[ran], v == 0 ? " (auto)" : "", tag);
        if (NKV < NH) {  // the group sums run in a fixed order: a second run repeats every bit
            p->gpu->upload(p->gpu, bt_g(td), poison, n3);
            wg_attention_backward_with(p->gpu, v, bt_g(td), bt_g(tg), bt_g(tq), bt_g(to), bt_g(tl), dg, B, T, NH, NKV, HS,
                                       drop, seed, win);
            CHECK(p->gpu->sync(p->gpu) == WGT_OK, "device error: %s", wgt_last_error());
            p->gpu->download(p->gpu, again, bt_g(td), n3);
            CHECK(!memcmp(got, again, n3 * 4), "%s: a second run gave other bits", what);
        }
        if (extreme > 0) {
            CHECK(all_finite(got, n3), "%s: non-finite values", what);
        } else {
            // dS = P(dP - D) sums up to T terms of size ~|dP| in f32 (the reference in double),
            // and P carries the ~1e-6 relative score rounding; bounded relative to the tensor's
            // largest element, which is where the absolute error scales
            CHECK_CLOSE_REPORT(what, got, ref, n3, 2e-5 * scale + 1e-6, 2e-4);
        }
    }
    if (verbose) fprintf(stderr, "  %s: max |dqkv| %.3g, auto variant %s, %.2f s\n", tag, scale, variant_name[auto_v],
                         wgt_now_s() - t0);
    free(ref); free(got); free(again); free(poison); free(dout); free(qkv);
    free(oc); free(og); free(lc); free(lg);
    bt_free(p, &tq); bt_free(p, &to); bt_free(p, &tl); bt_free(p, &tg); bt_free(p, &td); bt_free(p, &tdoc);
    free(doc);
}

// Sets WGTRAIN_ATTN_FWD_CFG / WGTRAIN_ATTN_BWD_CFG of the context's settings (NULL: the default)
// through the parser that reads the environment.
static void set_attn(bpair *p, const char *fwd, const char *bwd) {
    wg_settings *s = wg_ctx_settings(wg_of(p->gpu));
    wgt_status st = wg_settings_set(s, "WGTRAIN_ATTN_FWD_CFG", fwd);
    if (st == WGT_OK) st = wg_settings_set(s, "WGTRAIN_ATTN_BWD_CFG", bwd);
    CHECK(st == WGT_OK, "attention settings '%s' / '%s': %s", fwd ? fwd : "", bwd ? bwd : "", wgt_last_error());
}

// run_case under forward / backward settings given as WGTRAIN_ATTN_FWD_CFG / WGTRAIN_ATTN_BWD_CFG
// text. All fit lavapipe (32 KiB of workgroup memory, subgroups of 8); a device that refuses one
// (the wrappers would run their defaults instead, so the case would not test what it names)
// counts the case as a skip, which the closing line and the suite's totals show.
static void run_with(bpair *p, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, int runs,
                     const char *fwd, const char *bwd, float drop, uint32_t seed) {
    char note[160], desc[256];
    int ok = (!fwd || wg_attention_fwd_cfg_ok(p->gpu, HS, fwd)) && (!bwd || wg_attention_bwd_cfg_ok(p->gpu, HS, bwd));
    if (!ok) {
        SKIP("this device refuses the attention settings '%s' / '%s' at HS=%u (B=%u T=%u NH=%u NKV=%u)",
             fwd ? fwd : "", bwd ? bwd : "", HS, B, T, NH, NKV);
        return;
    }
    set_attn(p, fwd, bwd);
    if (verbose) fprintf(stderr, "  settings: %s\n", wg_attention_describe(p->gpu, HS, desc, sizeof desc));
    snprintf(note, sizeof note, "[%s%s%s]", fwd ? fwd : "", fwd && bwd ? " " : "", bwd ? bwd : "");
    run_case(p, B, T, NH, NKV, HS, 0, runs, note, drop, seed);
    set_attn(p, NULL, NULL);
}

// The setting parsers: malformed text and settings beyond any device are refused (the wrappers
// then keep their defaults, which the cases above check). Malformed text is also refused by the
// settings parser (wg_ctx_init fails on it).
static void check_settings(bpair *p) {
    static const char *const bad_fwd[] = {"nl=3", "nl=8,tr=3", "bc=24", "tr=2,zz=1", "nl=", "nl=8;tr=2", "tr=8,bc=128",
                                          "v=fast", "v=reg,nl=3", "v=reg,wg=96", "v=reg,tr=8", "v=reg,bc=256",
                                          "v=reg,nl=1,tr=4,bc=128", "v=reg,pf=2", "v=reg,nl=8,tr=1,bc=4",
                                          "v=reg,pw=2", "nl=8,tr=1,bc=16,sg=0,pw=1"};
    static const char *const bad_bwd[] = {"kv=16", "kv=16x16/3x3", "v=bogus", "q=8x8", "kv=256x256", "ncp=3",
                                          "st=16x16,x=1", "kv=16x16/", "v=rows", "rkv=2x1", "rkv=3x1x16",
                                          "v=reg,rkv=2x1x256", "rt=100,rkv=2x1x16", "v=reg,rq=1x4x16", "pf=2", "v=reg,rkv=16x1x8",
                                          "dqb=0", "dqb=48", "dqb=4", "v=reg-ds,dqb=256", "dqk=0", "dqk=6",
                                          "dqk=68", "dqm=2", "dqm=16", "dqm=4,dqb=2"};
    for (size_t i = 0; i < sizeof bad_fwd / sizeof bad_fwd[0]; i++)
        CHECK(!wg_attention_fwd_cfg_ok(p->gpu, 64, bad_fwd[i]), "forward setting '%s' accepted", bad_fwd[i]);
    for (size_t i = 0; i < sizeof bad_bwd / sizeof bad_bwd[0]; i++)
        CHECK(!wg_attention_bwd_cfg_ok(p->gpu, 64, bad_bwd[i]), "backward setting '%s' accepted", bad_bwd[i]);
    CHECK(wg_attention_fwd_cfg_ok(p->gpu, 64, "nl=8,tr=1,bc=16,sg=0"), "a small forward setting refused");
    CHECK(wg_attention_bwd_cfg_ok(p->gpu, 64, "v=split,kv=16x16/1x2,q=16x16"), "a small backward setting refused");
    CHECK(wg_attention_fwd_cfg_ok(p->gpu, 64, "v=reg,nl=1,tr=1,bc=16,wg=64"), "a small register forward refused");
    CHECK(wg_attention_fwd_cfg_ok(p->gpu, 64, "v=reg,nl=1,tr=1,bc=16,wg=64,pw=1"), "pw=1 refused");
    CHECK(wg_attention_bwd_cfg_ok(p->gpu, 64, "v=reg,rkv=4x1x8,rq=4x1x8,rt=64"), "a small register backward refused");
    CHECK(wg_attention_bwd_cfg_ok(p->gpu, 64, "v=reg-ds,rkv=4x1x8,rq=4x1x8,rt=64,dqb=8,dqk=4"), "dqb=8,dqk=4 refused");
    wg_settings s;
    wg_settings_default(&s);
    static const char *const malformed_fwd[] = {"tr=2,zz=1", "nl=", "nl=8;tr=2", "nl"};
    static const char *const malformed_bwd[] = {"kv=16", "v=bogus", "st=16x16,x=1", "kv=16x16/", "rkv=2x1x", "rq=-2x1x8"};
    for (size_t i = 0; i < sizeof malformed_fwd / sizeof malformed_fwd[0]; i++)
        CHECK(wg_settings_set(&s, "WGTRAIN_ATTN_FWD_CFG", malformed_fwd[i]) == WGT_ERR_ARG && !s.attn_fwd[0],
              "malformed forward setting '%s' accepted by the settings", malformed_fwd[i]);
    for (size_t i = 0; i < sizeof malformed_bwd / sizeof malformed_bwd[0]; i++)
        CHECK(wg_settings_set(&s, "WGTRAIN_ATTN_BWD_CFG", malformed_bwd[i]) == WGT_ERR_ARG && !s.attn_bwd[0],
              "malformed backward setting '%s' accepted by the settings", malformed_bwd[i]);
}

// The dropout masks themselves, bit for bit: with q = 0 every score is 0, so P[t, j] = 1/(t + 1),
// and with v_j = e_j (HS >= T) out[t, j] = m[t, j]/(t + 1): the forward's mask, read off out. With
// dout_t = e_t, dV[j, t] = P[t, j]·m[t, j]: the mask each backward variant regenerated, read off
// dV. Both must be the reference's mask (backend/dropout.h) exactly; the fraction kept must be
// near 1 - p. NKV = NH, so that dV holds one head's mask.
static void check_masks(bpair *p, uint32_t B, uint32_t T, uint32_t NH, uint32_t HS, float drop, uint32_t seed,
                        int runs) {
    char what[160];
    uint32_t C = NH * HS, W = 3 * C;
    size_t bt = (size_t)B * T, n3 = bt * W, nl = (size_t)B * NH * T;
    float *qkv = calloc(n3, 4), *dout = calloc(bt * C, 4);
    for (size_t r = 0; r < bt; r++) {
        uint32_t t = (uint32_t)(r % T);
        for (uint32_t c = 0; c < C; c++) qkv[r * W + C + c] = trng_normal();  // k: anything
        for (uint32_t h = 0; h < NH; h++) {
            qkv[r * W + 2 * C + h * HS + t] = 1.0f;  // v_t = e_t
            dout[r * C + h * HS + t] = 1.0f;         // dout_t = e_t
        }
    }
    btensor tq = bt_new(p, n3, qkv), to = bt_new(p, bt * C, NULL), tl = bt_new(p, nl, NULL);
    btensor tg = bt_new(p, bt * C, dout), td = bt_new(p, n3, NULL);
    p->cpu->attention_forward(p->cpu, bt_c(to), bt_c(tl), bt_c(tq), wgt_view_none(), B, T, NH, NH, HS, drop, seed, 0);
    p->gpu->attention_forward(p->gpu, bt_g(to), bt_g(tl), bt_g(tq), wgt_view_none(), B, T, NH, NH, HS, drop, seed, 0);
    float *oc, *og, *lc, *lg;
    bt_get(p, to, &oc, &og);
    bt_get(p, tl, &lc, &lg);
    p->gpu->upload(p->gpu, bt_g(to), oc, bt * C);
    p->gpu->upload(p->gpu, bt_g(tl), lc, nl);
    uint32_t thr = wgt_dropout_threshold(drop);
    float dscale = wgt_dropout_scale(drop);
    // m[(b·NH + h)·T·T + t·T + j] of the reference, 0 or 1 (j <= t)
    unsigned char *m = calloc((size_t)B * NH * T * T, 1);
    size_t kept = 0, pairs = 0;
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t h = 0; h < NH; h++)
            for (uint32_t t = 0; t < T; t++) {
                uint32_t key = wgt_dropout_key(seed, (b * NH + h) * T + t, WGT_DROPOUT_ATTN);
                for (uint32_t j = 0; j <= t; j++) {
                    unsigned char k = wgt_dropout_bits(key, j) >= thr;
                    m[(((size_t)b * NH + h) * T + t) * T + j] = k;
                    kept += k;
                    pairs++;
                }
            }
    double frac = (double)kept / pairs, sd = sqrt(drop * (1 - drop) / pairs);
    snprintf(what, sizeof what, "masks B=%u T=%u NH=%u HS=%u p=%g: kept %.4f", B, T, NH, HS, drop, frac);
    CHECK(fabs(frac - (1 - drop)) < 5 * sd + 1e-9, "%s, want %.4f ± %.4f", what, 1 - drop, 5 * sd);
    // out[b, t, h·HS + j] = m·dscale/(t + 1) for j <= t, 0 above
    size_t bad_c = 0, bad_g = 0;
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t h = 0; h < NH; h++)
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t j = 0; j < T; j++) {
                    size_t o = ((size_t)b * T + t) * C + h * HS + j;
                    double want = j <= t ? m[(((size_t)b * NH + h) * T + t) * T + j] : 0;
                    bad_c += fabs(oc[o] * (t + 1) / dscale - want) > 1e-3;
                    bad_g += fabs(og[o] * (t + 1) / dscale - want) > 1e-3;
                }
    CHECK(bad_c == 0, "%s: %zu of the C forward's mask entries differ from the hash", what, bad_c);
    CHECK(bad_g == 0, "%s: %zu of the GPU forward's mask entries differ from the hash", what, bad_g);
    float *got = malloc(n3 * 4);
    for (int v = 0; v <= 7; v++) {
        if (!(runs & (1 << v))) continue;
        int ran = wg_attention_backward_with(p->gpu, v, bt_g(td), bt_g(tg), bt_g(tq), bt_g(to), bt_g(tl), wgt_view_none(),
                                             B, T, NH, NH, HS, drop, seed, 0);
        CHECK(v == 0 || ran == v, "%s: variant %d ran as %d", what, v, ran);
        CHECK(p->gpu->sync(p->gpu) == WGT_OK, "device error: %s", wgt_last_error());
        p->gpu->download(p->gpu, got, bt_g(td), n3);
        size_t bad = 0;
        // dV[b, j, h·HS + t] = m[t, j]·dscale·P[t, j], P = 1/(t + 1), for t >= j
        for (uint32_t b = 0; b < B; b++)
            for (uint32_t h = 0; h < NH; h++)
                for (uint32_t j = 0; j < T; j++)
                    for (uint32_t t = j; t < T; t++) {
                        double x = got[((size_t)b * T + j) * W + 2 * C + h * HS + t] * (t + 1) / dscale;
                        bad += fabs(x - m[(((size_t)b * NH + h) * T + t) * T + j]) > 1e-3;
                    }
        CHECK(bad == 0, "%s: %zu of the %s backward's mask entries differ from the hash", what, bad,
              variant_name[ran]);
    }
    free(got); free(m); free(qkv); free(dout); free(oc); free(og); free(lc); free(lg);
    bt_free(p, &tq); bt_free(p, &to); bt_free(p, &tl); bt_free(p, &tg); bt_free(p, &td);
}

int main(void) {
    verbose = getenv("WGTRAIN_TEST_VERBOSE") && atoi(getenv("WGTRAIN_TEST_VERBOSE"));
    double t0 = wgt_now_s();
    bpair p = bpair_open();
    set_attn(&p, NULL, NULL);  // the defaults unless a case sets them
    check_settings(&p);
    int longv = RUN_SPLIT | RUN_FUSED;
    // B, T, NH, NKV, HS
    run_case(&p, 2, 5, 2, 2, 4, 0, RUN_AUTO | RUN_FUSED, NULL, 0.0f, 0);      // tiny: HS = 4, one partial tile
    run_case(&p, 1, 67, 2, 2, 24, 0, longv, NULL, 0.0f, 0);  // T just past a tile multiple; HS = 24: vec4 rows
                                                             //   not a multiple of 8 (no swizzle)
    run_case(&p, 2, 100, 2, 2, 64, 0, longv | RUN_STREAM | RUN_AUTO, NULL, 0.0f, 0);  // HS = 64 with NH = 2
    run_case(&p, 1, 256, 2, 2, 64, 0, longv | RUN_STREAM, NULL, 0.0f, 0);     // T = 256
    run_case(&p, 1, 56, 2, 2, 64, 0, RUN_SHORT, NULL, 0.0f, 0);             // T at the split-short limit of 32 KiB
    run_case(&p, 1, 70, 1, 1, 128, 0, RUN_SPLIT | RUN_AUTO, NULL, 0.0f, 0);   // HS = 128: the small tiles; the defaults
    run_case(&p, 2, 40, 2, 2, 6, 0, RUN_SHORT | RUN_SPLIT, NULL, 0.0f, 0);  // HS = 6: not a multiple of 4 (scalar)
    run_case(&p, 1, 33, 2, 2, 4, 80.0f, RUN_AUTO, NULL, 0.0f, 0);             // ±80 inputs
    // grouped-query attention: every variant, T not a multiple of any tile
    run_case(&p, 2, 67, 8, 2, 8, 0, longv | RUN_STREAM, NULL, 0.0f, 0);       // 4 query heads a kv head
    run_case(&p, 1, 37, 8, 2, 8, 0, RUN_SHORT | RUN_AUTO, NULL, 0.0f, 0);
    run_case(&p, 2, 100, 4, 1, 16, 0, longv | RUN_STREAM | RUN_AUTO, NULL, 0.0f, 0);  // one kv head (multi-query)
    run_case(&p, 1, 45, 4, 1, 16, 0, RUN_SHORT, NULL, 0.0f, 0);
    run_case(&p, 1, 45, 4, 2, 6, 0, RUN_SHORT | RUN_SPLIT, NULL, 0.0f, 0);    // HS = 6 (scalar loads), 2 a group
    // the unrolled loops of real GPUs: compiling them costs the software rasterizer seconds even at
    // HS = 4, so one backward kernel (fused: both products) with short tiles, plain and grouped
    wg_ctx_settings(wg_of(p.gpu))->attn_unroll = 1;
    run_with(&p, 2, 70, 2, 2, 4, RUN_FUSED, NULL, "kv=8x16", 0.0f, 0);
    run_with(&p, 1, 70, 4, 1, 4, RUN_FUSED, NULL, "kv=8x16", 0.0f, 0);
    wg_ctx_settings(wg_of(p.gpu))->attn_unroll = WG_AUTO;
    // the H200 defaults (48 KiB at HS = 64) at HS = 32, where they fit 32 KiB: 64-key forward tiles
    // (P larger than the K tile), 16×64 / 64×16 backward tiles with 4 keys or queries a thread
    run_with(&p, 2, 100, 2, 2, 32, RUN_FUSED | RUN_SPLIT | RUN_STREAM, "nl=8,tr=2,bc=64,sg=1",
             "kv=16x64,q=64x16,st=32x32,ncp=16", 0.0f, 0);
    // other settings at HS = 64, T = 100 (partial tiles)
    run_with(&p, 2, 100, 2, 2, 64, RUN_FUSED, "nl=16,tr=2,bc=16,sg=0", "kv=16x32/2x2,ncp=32", 0.0f, 0);
    run_with(&p, 2, 100, 2, 2, 64, RUN_SPLIT, "nl=4,tr=1,bc=32,sg=1", "v=split,kv=32x16,q=16x32/1x4", 0.0f, 0);
    run_with(&p, 2, 100, 2, 2, 64, RUN_FUSED, NULL, "kv=32x16", 0.0f, 0);
    // the register-resident kernels (v=reg): the H200 rows' layouts at HS = 64 (4 lanes a row, 2
    // rows a thread) and at HS = 128 (8 lanes; dK/dV with 16-row tiles, which fit 32 KiB);
    // one lane a row with grouped heads and dropout (the next tile prefetched, pf=1: across the
    // group's heads); lanes past the head's columns (HS = 6, 4
    // lanes, 256 threads) with auto forced to reg; the mask (packed examples, a window); 8 lanes
    // (lavapipe's subgroup size); the unrolled form
    const char *reg64 = "v=reg,rkv=4x2x32,rq=4x2x32,rt=128";
    run_with(&p, 2, 100, 2, 2, 64, RUN_REGS, "v=reg,nl=4,tr=2,bc=32,wg=128", reg64, 0.0f, 0);
    run_with(&p, 1, 70, 2, 2, 128, RUN_REGS, "v=reg,nl=8,tr=2,bc=32,wg=128", "v=reg,rkv=8x2x16,rq=8x2x32", 0.0f, 0);
    run_with(&p, 2, 67, 8, 2, 8, RUN_REGS, "v=reg,nl=1,tr=4,bc=16,wg=64,pf=1", "v=reg,rkv=1x2x16,rq=2x1x8,rt=64,pf=1",
             0.5f, 4000000000u);
    run_with(&p, 1, 45, 4, 2, 6, RUN_REGS | RUN_AUTO, "v=reg,nl=4,tr=1,bc=8,wg=256", "v=reg,rkv=4x1x8,rq=8x1x16,rt=256",
             0.3f, 7);
    g_doc = 60;
    run_with(&p, 2, 130, 4, 1, 16, RUN_REGS, "v=reg,nl=2,tr=2,bc=16,pf=1", "v=reg,rkv=2x2x16,rq=4x2x16,pf=1", 0.0f, 0);
    g_doc = 40, g_window = 13;
    run_with(&p, 1, 100, 8, 2, 8, RUN_REGS, "v=reg,nl=8,tr=1,bc=16", "v=reg,rkv=8x1x8,rq=8x1x8", 0.2f, 5);
    // the probabilities through workgroup memory (pw=1): the mask, grouped heads and dropout; the
    // H200's HS = 64 layout with partial tiles; 5 vec4 a head row (no power-of-2 addressing)
    run_with(&p, 1, 100, 8, 2, 8, RUN_REGS, "v=reg,nl=8,tr=1,bc=16,pw=1", "v=reg,rkv=8x1x8,rq=8x1x8", 0.2f, 5);
    g_doc = 0, g_window = 0;
    run_with(&p, 2, 100, 2, 2, 64, RUN_REGS, "v=reg,nl=8,tr=4,bc=16,pw=1", reg64, 0.0f, 0);
    run_with(&p, 1, 90, 4, 2, 20, RUN_REGS, "v=reg,nl=4,tr=3,bc=8,pw=1", "v=reg,rkv=4x3x8,rq=4x3x8", 0.1f, 9);
    g_doc = 40, g_window = 13;
    g_doc = 0, g_window = 0;
    // head size 256, where no shared tile fits (the register layouts replace the row kernels,
    // auto included): grouped heads, a window and dropout
    g_window = 21;
    run_with(&p, 1, 40, 4, 2, 256, RUN_REGS | RUN_AUTO, "v=reg,nl=8,tr=1,bc=16", "v=reg,rkv=8x1x8,rq=8x1x16", 0.1f, 3);
    g_window = 0;
    wg_ctx_settings(wg_of(p.gpu))->attn_unroll = 1;
    run_with(&p, 2, 70, 2, 2, 4, RUN_REGS, "v=reg,nl=1,tr=1,bc=8,wg=64", "v=reg,rkv=1x1x8,rq=1x1x8,rt=64", 0.0f, 0);
    run_with(&p, 1, 40, 2, 2, 16, RUN_REGS, "v=reg,nl=2,tr=2,bc=8,wg=64", "v=reg,rkv=2x2x8,rq=2x1x8,rt=64", 0.0f, 0);
    run_with(&p, 1, 40, 2, 2, 16, RUN_REGS, "v=reg,nl=2,tr=2,bc=8,wg=64,pw=1", "v=reg,rkv=2x2x8,rq=2x1x8,rt=64", 0.0f,
             0);
    wg_ctx_settings(wg_of(p.gpu))->attn_unroll = WG_AUTO;
    // three rows a thread (6 exchange slots a streamed row in the dK/dV pass), a head of 5 vec4
    // (no power-of-2 addressing), grouped heads, dropout
    run_with(&p, 1, 90, 4, 2, 20, RUN_REGS, "v=reg,nl=4,tr=3,bc=8", "v=reg,rkv=4x3x8,rq=4x3x8", 0.1f, 9);
    // reg-ds's dQ tile with column threads past the head (HS = 24: 6 vec4 on 8 threads), T past
    // one 128-row block
    run_with(&p, 1, 150, 2, 2, 24, RUN_REGS, NULL, "v=reg,rkv=4x1x8,rq=4x1x8", 0.0f, 0);
    // its other blocks (dqb rows, dqk keys a tile): 32 rows and 8 keys at HS = 128 (64 threads)
    // under a window and packed examples with grouped heads, 64 rows and 32 keys at HS = 64 (T
    // past a block, the diagonal inside a tile), 8 rows and 4 keys at HS = 24 (16 threads)
    g_doc = 60, g_window = 37;
    run_with(&p, 1, 150, 4, 2, 128, RUN_REGS, NULL, "v=reg,rkv=8x2x16,rq=8x2x32,dqb=32,dqk=8", 0.0f, 0);
    run_with(&p, 1, 150, 4, 2, 128, RUN_REGS, NULL, "v=reg,rkv=8x2x16,rq=8x2x32,dqm=4,dqk=12", 0.0f, 0);
    g_doc = 0, g_window = 0;
    run_with(&p, 2, 100, 2, 2, 64, RUN_REGS, NULL, "v=reg,rkv=4x2x32,rq=4x2x32,dqb=64,dqk=32", 0.0f, 0);
    run_with(&p, 1, 150, 2, 2, 24, RUN_REGS, NULL, "v=reg,rkv=4x1x8,rq=4x1x8,dqb=8,dqk=4", 0.0f, 0);
    run_with(&p, 1, 150, 2, 2, 24, RUN_REGS, NULL, "v=reg,rkv=4x1x8,rq=4x1x8,dqm=8,dqb=16", 0.0f, 0);
    // dropout on the probabilities: every variant against the reference (which draws the same
    // masks), grouped heads, scalar loads, an unrolled kernel; then the masks bit for bit
    run_case(&p, 2, 100, 2, 2, 64, 0, longv | RUN_STREAM | RUN_AUTO, NULL, 0.1f, 42);
    run_case(&p, 2, 67, 8, 2, 8, 0, longv | RUN_STREAM, NULL, 0.5f, 4000000000u);
    run_case(&p, 1, 45, 4, 2, 16, 0, RUN_SHORT | RUN_AUTO, NULL, 0.3f, 7);
    run_case(&p, 2, 40, 2, 2, 6, 0, RUN_SHORT | RUN_SPLIT, NULL, 0.2f, 9);
    wg_ctx_settings(wg_of(p.gpu))->attn_unroll = 1;
    run_with(&p, 1, 70, 4, 1, 4, RUN_FUSED, NULL, "kv=8x16", 0.25f, 3);
    wg_ctx_settings(wg_of(p.gpu))->attn_unroll = WG_AUTO;
    check_masks(&p, 2, 40, 2, 64, 0.5f, 123, RUN_SHORT | RUN_SPLIT | RUN_FUSED | RUN_STREAM | RUN_ROWS);
    check_masks(&p, 1, 61, 2, 64, 0.2f, 0xdeadbeefu, RUN_SPLIT | RUN_FUSED | RUN_STREAM | RUN_REGS);
    // the mask: packed examples (long ones leave whole tiles masked; the 8x16 tiles skip several),
    // a sliding window, both; every variant, grouped heads, dropout on top
    g_doc = 60;
    run_case(&p, 2, 130, 2, 2, 16, 0, longv | RUN_STREAM, NULL, 0.0f, 0);
    run_with(&p, 2, 130, 4, 1, 16, longv | RUN_STREAM, "nl=8,tr=1,bc=16,sg=0", "kv=8x16,q=16x8,st=8x16", 0.0f, 0);
    g_doc = 9;
    run_case(&p, 1, 45, 4, 2, 16, 0, RUN_SHORT | RUN_FUSED, NULL, 0.2f, 11);
    g_doc = 0, g_window = 20;
    run_case(&p, 1, 50, 2, 2, 16, 0, RUN_SHORT, NULL, 0.0f, 0);
    g_doc = 40, g_window = 13;
    run_case(&p, 1, 100, 8, 2, 8, 0, longv | RUN_STREAM, NULL, 0.0f, 0);
    g_doc = 0, g_window = 0;
    // the row kernels (17_attention_rows.wgsl): forced at small heads (grouped, scalar HS, dropout,
    // T past one 256-row chunk), then head size 256, where no tile fits 32 KiB and auto runs them
    rows_forward = 1;
    run_case(&p, 2, 67, 8, 2, 8, 0, RUN_ROWS, "rows", 0.0f, 0);
    run_case(&p, 1, 45, 4, 2, 6, 0, RUN_ROWS, "rows", 0.3f, 7);
    run_case(&p, 1, 260, 2, 1, 16, 0, RUN_ROWS, "rows", 0.0f, 0);
    rows_forward = 0;
    run_case(&p, 1, 40, 4, 2, 256, 0, RUN_AUTO, NULL, 0.0f, 0);
    run_case(&p, 1, 33, 1, 1, 256, 80.0f, RUN_AUTO, NULL, 0.0f, 0);  // ±80 inputs at HS = 256
    // the row kernels with the mask: packed examples across a 256-row chunk (the dK/dV rows stop
    // where the queries' lo passes the key), a window shorter than a chunk (the forward and dQ
    // start at lo), both with a window longer than a chunk; then at head size 256 (auto: rows)
    rows_forward = 1;
    g_doc = 60;
    run_case(&p, 2, 300, 4, 2, 8, 0, RUN_ROWS, "rows", 0.2f, 5);
    g_doc = 0, g_window = 20;
    run_case(&p, 1, 290, 2, 1, 16, 0, RUN_ROWS, "rows", 0.0f, 0);
    g_doc = 400, g_window = 270;
    run_case(&p, 1, 600, 2, 1, 4, 0, RUN_ROWS, "rows", 0.0f, 0);
    rows_forward = 0;
    g_doc = 9, g_window = 0;
    run_case(&p, 1, 40, 4, 2, 256, 0, RUN_AUTO, NULL, 0.1f, 3);
    g_doc = 0, g_window = 7;
    run_case(&p, 1, 33, 2, 2, 256, 0, RUN_AUTO, NULL, 0.0f, 0);
    g_doc = 0, g_window = 0;
    bpair_close(&p);
    fprintf(stderr, "attention tests: %.1f s\n", wgt_now_s() - t0);
    return test_finish();
}
