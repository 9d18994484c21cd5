// cmd_bench.c — `wgtrain bench`: training throughput of a model config on random tokens
// (tokens/s over timed steps after warm-up) and, with --profile on WebGPU, a per-kernel GPU time
// table from timestamp queries. Its presets are the benchmark anchors of
// docs/architecture.md#reference-points (tiny = the 2-core CPU anchor, gpt2-124m = the H200
// anchor; seeds = the reference model of the original kernel documents: 12 layers, d_model 768,
// d_ff 3072, T 512, vocab 16384), kept apart from `train`'s presets on purpose.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli/cli.h"
#include "model/model.h"
#include "core/clock.h"


static void usage(void) {
    printf("usage: wgtrain bench [--preset tiny|small|gpt2-124m|seeds|llama-tiny|llama-124m] [--arch NAME]\n"
           "                     [--layers L --heads NH --kv-heads NKV --d-model C --d-ff F] [--vocab V] [--batch B]\n"
           "                     [--seq T] [--steps N] [--warmup W]\n"
           "                     [--device cpu|webgpu|auto] [--adapter A] [--profile] [--precision f32|f16]\n"
           "                     [--max-batch]\n"
           "  Times full training steps (forward, loss, backward, AdamW) on random tokens and prints tokens/s\n"
           "  and the bytes of the buffers allocated on the device (live after the steps, and the peak).\n"
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
                                          "--seq=", "--steps=", "--warmup=", "--profile", "--precision=", "--max-batch", "--help",
                                          NULL};

static void random_batch(int32_t *tok, int32_t *tgt, size_t BT, int V) {
    uint64_t s = 42;
    for (size_t i = 0; i < BT; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)V);
    }
    for (size_t i = 0; i < BT; i++) tgt[i] = (i + 1 < BT) ? tok[i + 1] : tok[0];
}

// One training step as the timed loop runs it; t is the 1-based update count.
static wgt_status bench_step(wgt_model *m, const int32_t *tok, const int32_t *tgt, size_t BT, int t, double *loss) {
    model_loss_opts lo = {0.0f, 0.0f, 0.0f, 0};
    model_zero_grad(m);
    WGT_TRY(model_forward(m, tok, tgt, lo, 1.0f / (float)BT));
    model_backward(m);
    model_update(m, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f, t);
    return model_loss_sum(m, loss);  // the one readback a training step makes
}

// Whether a model of batch B (and one training step of it) fits the device.
static int batch_fits(wgt_backend *be, const model_config *cfg, int B, int T, model_precision prec) {
    wgt_model *m = NULL;
    size_t BT = (size_t)B * T;
    int32_t *tok = wgt_malloc(BT * 4), *tgt = wgt_malloc(BT * 4);
    random_batch(tok, tgt, BT, cfg->vocab);
    double loss;
    wgt_status st = model_init_prec(&m, be, cfg, B, T, prec);
    if (st == WGT_OK) st = model_init_random(m, 1);
    if (st == WGT_OK) st = bench_step(m, tok, tgt, BT, 1, &loss);
    if (st == WGT_OK) st = be->sync(be);
    model_free(m);
    free(tok);
    free(tgt);
    if (st != WGT_OK) printf("bench: batch %d does not fit: %s\n", B, wgt_last_error());
    return st == WGT_OK;
}

static wgt_status bench_main(int argc, char **argv) {
    WGT_TRY(cli_args_split(&argc, &argv, bench_flags));
    const preset *p = &presets[0];
    long L = -1, NH = -1, NKV = -1, C = -1, F = -1, Vv = -1, B = -1, T = -1, steps = 10, warmup = 2;
    const char *device = "auto", *adapter = NULL, *arch = NULL;
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
        else if (!strcmp(a, "--vocab")) WGT_TRY(cli_parse_long(a, v, 1, 65536, &Vv));
        else if (!strcmp(a, "--batch")) WGT_TRY(cli_parse_long(a, v, 1, 1 << 16, &B));
        else if (!strcmp(a, "--seq")) WGT_TRY(cli_parse_long(a, v, 1, 1 << 16, &T));
        else if (!strcmp(a, "--steps")) WGT_TRY(cli_parse_long(a, v, 1, 1000000, &steps));
        else if (!strcmp(a, "--warmup")) WGT_TRY(cli_parse_long(a, v, 0, 1000, &warmup));
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
            if (!batch_fits(be, &cfg, b, bT, prec)) { hi_b = b; break; }
            lo_b = b;
        }
        if (hi_b == 0) hi_b = 4097;
        while (lo_b > 0 && hi_b - lo_b > 1) {
            int mid = lo_b + (hi_b - lo_b) / 2;
            if (batch_fits(be, &cfg, mid, bT, prec)) lo_b = mid;
            else hi_b = mid;
        }
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
    model_loss_opts lo = {0.0f, 0.0f, 0.0f, 0};
    double t0 = 0, loss = 0;
    for (long i = 0; i < warmup + steps && st == WGT_OK; i++) {
        if (i == warmup) { st = be->sync(be); t0 = wgt_now_s(); }
        st = bench_step(m, tok, tgt, BT, (int)i + 1, &loss);
    }
    double dt = wgt_now_s() - t0;
    if (st == WGT_OK) {
        printf("loss %.4f after %ld steps\n", loss / BT, warmup + steps);
        printf("step time %.2f ms, %.0f tokens/s\n", 1e3 * dt / steps, steps * BT / dt);
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
            for (int i = 0; i < 2 && st == WGT_OK; i++) {
                if (i == 1) be->profile_reset(be);
                model_zero_grad(m);
                st = model_forward(m, tok, tgt, lo, 1.0f / (float)BT);
                if (st != WGT_OK) break;
                model_backward(m);
                model_update(m, 1e-4f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f, i + 1);
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
