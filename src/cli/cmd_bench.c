// cmd_bench.c — `wgtrain bench`: training throughput of a model config on random tokens
// (tokens/s over timed steps after warm-up) and, with --profile on WebGPU, a per-kernel GPU time
// table from timestamp queries. Its presets are the benchmark anchors of
// docs/architecture.md#reference-points (tiny = the 2-core CPU anchor, gpt2-124m = the H200
// anchor; seeds = the reference model of the original kernel documents: 12 layers, d_model 768,
// d_ff 3072, T 512, vocab 16384), kept apart from `train`'s presets on purpose.
//
// The steps are timed twice in one run: with the old synchronous readback (the loss downloaded
// after every micro-batch and the gradient norm after the update, each a wait for the GPU) and
// with the asynchronous one the trainer uses (a step's results read while the next step runs).
// Each prints the wall time per step, the GPU busy time per step (timestamps on every compute
// pass, where the device has them) and their difference, the time the GPU sat idle between and
// inside steps, with the submits, uniform bytes and waits per step.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli/cli.h"
#include "core/token_id.h"
#include "model/model.h"
#include "core/clock.h"


static void usage(void) {
    printf("usage: wgtrain bench [--preset tiny|small|gpt2-124m|seeds|llama-tiny|llama-124m] [--arch NAME]\n"
           "                     [--layers L --heads NH --kv-heads NKV --d-model C --d-ff F] [--vocab V] [--batch B]\n"
           "                     [--seq T] [--grad-accum K] [--steps N] [--warmup W]\n"
           "                     [--device cpu|webgpu|auto] [--adapter A] [--readback both|sync|async] [--profile]\n"
           "                     [--precision f32|f16] [--max-batch]\n"
           "  Times full training steps (forward, loss, backward, AdamW) on random tokens and prints tokens/s\n"
           "  and the bytes of the buffers allocated on the device (live after the steps, and the peak).\n"
           "  --readback: time the old synchronous readback (sync), the asynchronous one (async) or both\n"
           "  (default); on webgpu each gets wall time, GPU busy time and GPU idle time per step.\n"
           "  --profile (webgpu) also prints the GPU time of every kernel, from timestamp queries.\n"
           "  --precision f16 runs mixed precision (f32 master weights, f16 GEMM operands and saved activations).\n"
           "  --max-batch finds the largest --batch (up to 4096) whose model and one training step fit the device,\n"
           "  then times that batch.\n");
}

typedef struct { const char *name, *arch; int L, NH, C, F, V, T, B, NKV, tie; } preset;
static const preset presets[] = {
    {"tiny", "gpt2", 4, 4, 128, 512, 512, 128, 8, 0, 0},
    {"small", "gpt2", 6, 6, 384, 1536, 16384, 256, 8, 0, 0},
    {"gpt2-124m", "gpt2", 12, 12, 768, 3072, 50257, 1024, 8, 0, 0},
    {"seeds", "gpt2", 12, 12, 768, 3072, 16384, 512, 8, 0, 0},
    {"llama-tiny", "llama", 4, 4, 128, 352, 512, 128, 8, 2, 1},
    {"llama-124m", "llama", 12, 12, 768, 2048, 50257, 1024, 8, 4, 1},
};

static const char *const bench_flags[] = {"--preset=", "--device=", "--backend=", "--adapter=", "--arch=", "--layers=",
                                          "--heads=", "--kv-heads=", "--d-model=", "--d-ff=", "--vocab=", "--batch=",
                                          "--seq=", "--steps=", "--warmup=", "--grad-accum=", "--readback=", "--profile",
                                          "--precision=", "--max-batch", "--help", NULL};

static void random_batch(int32_t *tok, int32_t *tgt, size_t BT, int V) {
    uint64_t s = 42;
    for (size_t i = 0; i < BT; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)V);
    }
    for (size_t i = 0; i < BT; i++) tgt[i] = (i + 1 < BT) ? tok[i + 1] : tok[0];
}

typedef struct {
    wgt_model *m;
    wgt_backend *be;
    const int32_t *tok, *tgt;
    size_t BT;
    int K;
} bench_run;

typedef struct {
    double wall_ms, gpu_ms;  // per step; gpu_ms < 0: not measured
    double passes;           // compute passes per step (timed)
    double sub, uni, up, waits;  // per step
    double loss;             // mean loss of the last step
} bench_result;

// One training step; sync = 1 reads the loss after each micro-batch and the norm after the
// update, blocking each time (what the trainer did before the asynchronous readback).
static wgt_status bench_step(bench_run *r, long i, int sync, double *loss_sum) {
    model_loss_opts lo = {0.0f, 0.0f, 0.0f, 0, 0};
    model_zero_grad(r->m);
    for (int k = 0; k < r->K; k++) {
        lo.accumulate_loss = k > 0;
        WGT_TRY(model_forward(r->m, r->tok, r->tgt, lo, 1.0f / (float)(r->BT * (size_t)r->K)));
        model_backward(r->m);
        if (sync) WGT_TRY(model_loss_sum(r->m, loss_sum));
    }
    // a learning rate that changes every step, as a schedule's does (its uniform slots change)
    model_update(r->m, 1e-4f * (1.0f + 1e-3f * (float)i), 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f);
    if (sync) {
        float norm;
        return model_grad_norm(r->m, &norm);
    }
    WGT_TRY(model_result_begin(r->m, (int)(i % WGT_READBACK_SLOTS)));
    if (i > 0) {  // the previous step's results, while this one runs
        int ready;
        model_step_result res;
        WGT_TRY(model_result_end(r->m, (int)((i - 1) % WGT_READBACK_SLOTS), 1, &ready, &res));
        *loss_sum = res.loss_sum;
    }
    return WGT_OK;
}

static wgt_status bench_mode(bench_run *r, int sync, long warmup, long steps, bench_result *out) {
    double loss_sum = 0;
    wgt_backend *be = r->be;
    long i = 0;
    for (; i < warmup; i++) WGT_TRY(bench_step(r, i, sync, &loss_sum));
    if (!sync && i > 0) {  // drain the warm-up's last readback
        int ready;
        model_step_result res;
        WGT_TRY(model_result_end(r->m, (int)((i - 1) % WGT_READBACK_SLOTS), 1, &ready, &res));
    }
    WGT_TRY(be->sync(be));
    wgt_backend_stats s0 = {0}, s1 = {0};
    int timed = be->gpu_timer_start != NULL;
    if (timed) WGT_TRY(be->gpu_timer_start(be));
    if (be->get_stats) be->get_stats(be, &s0);
    double t0 = wgt_now_s();
    for (long j = 0; j < steps; j++) WGT_TRY(bench_step(r, j, sync, &loss_sum));
    if (!sync) {
        int ready;
        model_step_result res;
        WGT_TRY(model_result_end(r->m, (int)((steps - 1) % WGT_READBACK_SLOTS), 1, &ready, &res));
        loss_sum = res.loss_sum;
    }
    double wall = wgt_now_s() - t0;
    if (be->get_stats) be->get_stats(be, &s1);
    out->gpu_ms = -1;
    if (timed) {
        double busy;
        long passes;
        WGT_TRY(be->gpu_timer_stop(be, &busy, &passes));
        if (passes >= 0) out->gpu_ms = busy / (double)steps, out->passes = (double)passes / (double)steps;
        else printf("bench: more compute passes than the timer holds (2048); lower --steps for GPU busy times\n");
    }
    out->wall_ms = 1e3 * wall / (double)steps;
    out->sub = (double)(s1.submits - s0.submits) / (double)steps;
    out->uni = (double)(s1.uniform_bytes - s0.uniform_bytes) / (double)steps;
    out->up = (double)(s1.upload_bytes - s0.upload_bytes) / (double)steps;
    out->waits = (double)(s1.waits - s0.waits) / (double)steps;
    out->loss = loss_sum / (double)(r->BT * (size_t)r->K);
    return WGT_OK;
}

// Whether a model of batch B (and one training step of it) fits the device. A trial that does
// not fit may leave the device unusable (a failed allocation can lose it), so after a failure
// the backend is opened anew (*bep; NULL when that fails too).
static int batch_fits(wgt_backend **bep, const char *device, const char *adapter, const model_config *cfg, int B,
                      int T, model_precision prec) {
    wgt_backend *be = *bep;
    wgt_model *m = NULL;
    size_t BT = (size_t)B * T;
    int32_t *tok = wgt_malloc(BT * 4), *tgt = wgt_malloc(BT * 4);
    random_batch(tok, tgt, BT, cfg->vocab);
    double loss;
    wgt_status st = model_init_prec(&m, be, cfg, B, T, prec);
    if (st == WGT_OK) st = model_init_random(m, 1);
    bench_run r = {m, be, tok, tgt, BT, 1};
    if (st == WGT_OK) st = bench_step(&r, 0, 1, &loss);
    if (st == WGT_OK) st = be->sync(be);
    model_free(m);
    free(tok);
    free(tgt);
    if (st != WGT_OK) {
        printf("bench: batch %d does not fit: %s\n", B, wgt_last_error());
        be->free(be);
        *bep = NULL;
        if (cli_backend_open(bep, device, adapter, 0) != WGT_OK) *bep = NULL;
    }
    return st == WGT_OK;
}

static wgt_status bench_main(int argc, char **argv) {
    WGT_TRY(cli_args_split(&argc, &argv, bench_flags));
    const preset *p = &presets[0];
    long L = -1, NH = -1, NKV = -1, C = -1, F = -1, Vv = -1, B = -1, T = -1, steps = 10, warmup = 2, K = 1;
    const char *device = "auto", *adapter = NULL, *arch = NULL, *readback = "both";
    int profile = 0, max_batch = 0;
    model_precision prec = MODEL_PREC_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) { usage(); exit(0); }
        if (!strcmp(a, "--profile")) { profile = 1; continue; }
        if (!strcmp(a, "--max-batch")) { max_batch = 1; continue; }
        if (!cli_flag_known(a, bench_flags)) return cli_unknown_flag("bench", a, bench_flags);
        if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--preset")) {
            p = NULL;
            for (size_t k = 0; k < sizeof presets / sizeof presets[0]; k++) if (!strcmp(presets[k].name, v)) p = &presets[k];
            if (!p)
                return wgt_fail(WGT_ERR_ARG, "unknown preset '%s'; use tiny, small, gpt2-124m, seeds, llama-tiny or llama-124m", v);
        } else if (!strcmp(a, "--device") || !strcmp(a, "--backend")) device = v;
        else if (!strcmp(a, "--adapter")) adapter = v;
        else if (!strcmp(a, "--arch")) arch = v;
        else if (!strcmp(a, "--layers")) WGT_TRY(cli_parse_long(a, v, 1, 256, &L));
        else if (!strcmp(a, "--heads")) WGT_TRY(cli_parse_long(a, v, 1, 1024, &NH));
        else if (!strcmp(a, "--kv-heads")) WGT_TRY(cli_parse_long(a, v, 1, 1024, &NKV));
        else if (!strcmp(a, "--d-model")) WGT_TRY(cli_parse_long(a, v, 1, 65536, &C));
        else if (!strcmp(a, "--d-ff")) WGT_TRY(cli_parse_long(a, v, 1, 1 << 20, &F));
        else if (!strcmp(a, "--vocab")) WGT_TRY(cli_parse_long(a, v, 1, TOKEN_MAX_VOCAB, &Vv));
        else if (!strcmp(a, "--batch")) WGT_TRY(cli_parse_long(a, v, 1, 1 << 16, &B));
        else if (!strcmp(a, "--seq")) WGT_TRY(cli_parse_long(a, v, 1, 1 << 16, &T));
        else if (!strcmp(a, "--steps")) WGT_TRY(cli_parse_long(a, v, 1, 1000000, &steps));
        else if (!strcmp(a, "--warmup")) WGT_TRY(cli_parse_long(a, v, 0, 1000, &warmup));
        else if (!strcmp(a, "--grad-accum")) WGT_TRY(cli_parse_long(a, v, 1, 1024, &K));
        else if (!strcmp(a, "--readback")) {
            if (strcmp(v, "both") && strcmp(v, "sync") && strcmp(v, "async"))
                return wgt_fail(WGT_ERR_ARG, "--readback '%s': use both, sync or async", v);
            readback = v;
        }
        else if (!strcmp(a, "--precision")) WGT_TRY(model_precision_parse(v, "--precision", &prec));
        else return cli_unknown_flag("bench", a, bench_flags);
    }
    model_config cfg = {.n_layer = L > 0 ? L : p->L, .n_head = NH > 0 ? NH : p->NH, .d_model = C > 0 ? C : p->C,
                        .d_ff = F > 0 ? F : p->F, .vocab = Vv > 0 ? Vv : p->V, .max_seq = T > 0 ? T : p->T};
    if (strlen(arch ? arch : p->arch) >= sizeof cfg.arch) return wgt_fail(WGT_ERR_ARG, "--arch '%s' is too long", arch);
    snprintf(cfg.arch, sizeof cfg.arch, "%s", arch ? arch : p->arch);
    if (!strcmp(cfg.arch, p->arch)) {  // the preset's family: its settings (others: that family's defaults)
        cfg.n_kv_heads = p->NKV;
        cfg.tie_embeddings = p->tie;
    }
    if (NKV > 0) cfg.n_kv_heads = (int)NKV;
    model_config_defaults(&cfg);
    WGT_TRY(model_config_check(&cfg));
    int bB = B > 0 ? B : p->B, bT = cfg.max_seq;
    wgt_backend *be;
    WGT_TRY(cli_backend_open(&be, device, adapter, 0));
    wgt_status tst = be->tune_auto ? be->tune_auto(be) : WGT_OK;  // a GPU without measured tiles: once (docs/tuning.md)
    if (tst != WGT_OK) {
        be->free(be);
        return tst;
    }
    if (max_batch && strcmp(be->name, "webgpu")) {
        wgt_status e = wgt_fail(WGT_ERR_ARG, "--max-batch searches a GPU's memory; the %s backend allocates host memory, "
                                "which the system may overcommit: give --batch instead, or use --device webgpu", be->name);
        be->free(be);
        return e;
    }
    if (max_batch) {
        // doubling, then bisection between the last batch that fitted and the first that did not
        int lo_b = 0, hi_b = 0;
        for (int b = 1; b <= 4096; b *= 2) {
            if (!batch_fits(&be, device, adapter, &cfg, b, bT, prec)) { hi_b = b; break; }
            lo_b = b;
        }
        if (hi_b == 0) hi_b = 4097;
        while (be && lo_b > 0 && hi_b - lo_b > 1) {
            int mid = lo_b + (hi_b - lo_b) / 2;
            if (batch_fits(&be, device, adapter, &cfg, mid, bT, prec)) lo_b = mid;
            else hi_b = mid;
        }
        if (!be) return wgt_fail(WGT_ERR_DEVICE, "the device could not be opened again after a batch that did not fit");
        if (lo_b == 0) {
            be->free(be);
            return wgt_fail(WGT_ERR_MEMORY, "not even batch 1 at T=%d fits this device in %s", bT, model_precision_name(prec));
        }
        printf("bench: largest batch that fits at T=%d in %s: %d%s\n", bT, model_precision_name(prec), lo_b,
               lo_b == 4096 ? " (the search's upper end)" : "");
        bB = lo_b;
    }
    wgt_model *m = NULL;
    wgt_status st = model_init_prec(&m, be, &cfg, bB, bT, prec);
    if (st == WGT_OK) st = model_init_random(m, 1);
    size_t BT = (size_t)bB * bT;
    int32_t *tok = wgt_malloc(BT * 4), *tgt = wgt_malloc(BT * 4);
    random_batch(tok, tgt, BT, cfg.vocab);
    if (st == WGT_OK)
        printf("bench: %s backend%s%s%s, %s L=%d NH=%d%s%.0d C=%d F=%d V=%d, B=%d T=%d, %.1fM parameters, %s\n", be->name,
               be->device_name ? " (" : "", be->device_name ? be->device_name(be) : "", be->device_name ? ")" : "",
               cfg.arch, cfg.n_layer, cfg.n_head, cfg.n_kv_heads ? " NKV=" : "", cfg.n_kv_heads, cfg.d_model, cfg.d_ff,
               cfg.vocab, bB, bT, model_num_params(m) / 1e6, model_precision_name(prec));
    bench_run run = {m, be, tok, tgt, BT, (int)K};
    const char *modes[2] = {"sync", "async"};
    bench_result res[2];
    int have[2] = {0, 0};
    for (int md = 0; md < 2 && st == WGT_OK; md++) {
        if (strcmp(readback, "both") && strcmp(readback, modes[md])) continue;
        st = bench_mode(&run, md == 0, warmup, steps, &res[md]);
        have[md] = st == WGT_OK;
    }
    if (st == WGT_OK) {
        int last = have[1] ? 1 : 0;
        printf("loss %.4f after %ld steps\n", res[last].loss, warmup + steps);
        printf("\n%-8s %10s %12s %12s %7s %9s %12s %12s %8s\n", "readback", "step ms", "GPU busy ms", "GPU idle ms",
               "idle %", "submits", "uniform B", "upload B", "waits");
        for (int md = 0; md < 2; md++) {
            if (!have[md]) continue;
            const bench_result *b = &res[md];
            char busy[32] = "n/a", idle[32] = "n/a", pct[32] = "n/a";
            if (b->gpu_ms >= 0) {
                snprintf(busy, sizeof busy, "%.3f", b->gpu_ms);
                snprintf(idle, sizeof idle, "%.3f", b->wall_ms - b->gpu_ms);
                snprintf(pct, sizeof pct, "%.1f", 100 * (b->wall_ms - b->gpu_ms) / b->wall_ms);
            }
            if (be->get_stats)
                printf("%-8s %10.3f %12s %12s %7s %9.2f %12.0f %12.0f %8.2f\n", modes[md], b->wall_ms, busy, idle, pct,
                       b->sub, b->uni, b->up, b->waits);
            else
                printf("%-8s %10.3f %12s %12s %7s %9s %12s %12s %8s\n", modes[md], b->wall_ms, busy, idle, pct, "n/a",
                       "n/a", "n/a", "n/a");
        }
        printf("(per step; GPU idle = wall - GPU busy; busy is the sum of the compute passes' timestamps%s",
               be->gpu_timer_start ? "" : ", which this backend does not measure");
        for (int md = 0; md < 2; md++)
            if (have[md] && res[md].gpu_ms >= 0) printf("; %s: %.1f passes a step", modes[md], res[md].passes);
        printf(")\n\n");
        printf("step time %.2f ms, %.0f tokens/s\n", res[last].wall_ms, 1e3 * (double)(BT * (size_t)K) / res[last].wall_ms);
        if (be->bytes_allocated) {
            // the model's buffers and the backend's scratch; a max-batch search before leaves its
            // larger trials in the peak, so the peak is reported only without one
            uint64_t live, peak;
            be->bytes_allocated(be, &live, &peak);
            if (max_batch) printf("buffer bytes %llu (%.1f MiB) allocated\n", (unsigned long long)live, live / 1048576.0);
            else printf("buffer bytes %llu (%.1f MiB) allocated, peak %llu (%.1f MiB)\n", (unsigned long long)live,
                        live / 1048576.0, (unsigned long long)peak, peak / 1048576.0);
        }
    }
    if (st == WGT_OK && profile) {
        if (strcmp(be->name, "webgpu")) {
            printf("(--profile times GPU kernels; it applies to the webgpu device only)\n");
        } else {
            // a second backend with timestamp queries, so the timed run above is not perturbed
            model_free(m);
            m = NULL;
            be->free(be);
            st = backend_webgpu_init_ex(&be, adapter ? adapter : "auto", 1);
            if (st == WGT_OK && (!be->profile_reset || !be->profile_report))
                st = wgt_fail(WGT_ERR_DEVICE, "this backend offers no per-kernel profiling");
            if (st == WGT_OK) st = model_init_prec(&m, be, &cfg, bB, bT, prec);
            if (st == WGT_OK) st = model_init_random(m, 1);
            model_loss_opts lo = {0.0f, 0.0f, 0.0f, 0, 0};
            for (int i = 0; i < 2 && st == WGT_OK; i++) {
                if (i == 1) be->profile_reset(be);
                model_zero_grad(m);
                st = model_forward(m, tok, tgt, lo, 1.0f / (float)BT);
                if (st != WGT_OK) break;
                model_backward(m);
                model_update(m, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f);
                st = be->sync(be);
            }
            if (st == WGT_OK) {
                printf("\nper-kernel GPU time of one training step (timestamp queries):\n");
                be->profile_report(be, stdout);
            }
        }
    }
    free(tok);
    free(tgt);
    model_free(m);
    be->free(be);
    return st;
}

int cmd_bench(int argc, char **argv) {
    wgt_status st = bench_main(argc, argv);
    return st == WGT_OK ? 0 : cli_fail("bench", st);
}
