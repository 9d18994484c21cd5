// cmd_eval.c — `wgtrain eval`: the validation loss and perplexity of a run's checkpoint, on
// its data's validation shards, another data directory's, or one shard file.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include <unistd.h>
#include "core/clock.h"
#include "train/trainer.h"

static void usage(void) {
    printf("usage: wgtrain eval --run RUN_DIR [--data DATA_DIR] [--shard PATH] [--batches N] [--device auto|cpu|webgpu]\n"
           "                    [--adapter A] [--progress S] [--precision f32|f16]\n"
           "  --run RUN_DIR     a run directory written by `wgtrain train` (its ckpt.bin is evaluated)\n"
           "  --data DATA_DIR   whose validation shards to use (default: the run's own data directory)\n"
           "  --shard PATH      evaluate this one token shard instead\n"
           "  --batches N       N batches of the run's batch x seq size, spread over the set (default: all)\n"
           "  --progress S      a progress line on stderr every S seconds (redrawn in place on a terminal;\n"
           "                    default 2; 0: none)\n"
           "  --precision P     f32 (default) or f16: the forward in mixed precision (f16 GEMM operands)\n"
           "Prints `loss X` (mean cross-entropy in nats/token, without label smoothing or z-loss) and\n"
           "`perplexity Y` (exp of the loss).\n");
}

static const char *const eval_flags[] = {"--run=", "--data=", "--shard=", "--batches=", "--device=", "--adapter=",
                                         "--progress=", "--precision=", "--help", "-h", NULL};

// Progress on stderr: one line redrawn in place on a terminal, else a plain line at most every
// --progress seconds, so a long evaluation is never silent.
typedef struct {
    double every, t0, last;
    int tty, shown;
    size_t tokens_per_batch, total_tokens;
} eval_progress;

static void fmt_tokens(char *buf, size_t n, double v) {
    if (v >= 1e6) snprintf(buf, n, "%.1fM", v / 1e6);
    else if (v >= 1e3) snprintf(buf, n, "%.1fK", v / 1e3);
    else snprintf(buf, n, "%.0f", v);
}

static void on_progress(void *ctx, size_t done, size_t total, size_t targets) {
    eval_progress *p = ctx;
    double now = wgt_now_s();
    if (p->every <= 0 || done == total || now - p->last < (p->tty ? p->every / 4 : p->every)) return;
    p->last = now;
    char a[32], b[32], eta[32] = "";
    fmt_tokens(a, sizeof a, (double)targets);
    fmt_tokens(b, sizeof b, (double)p->total_tokens);
    double left = (now - p->t0) * (double)(total - done) / (double)done;
    snprintf(eta, sizeof eta, ", %.0f s left", left);
    fprintf(stderr, "%seval: %.0f%% (%s of about %s tokens, batch %zu of %zu%s)%s", p->tty ? "\r\033[K" : "",
            100.0 * (double)done / (double)total, a, b, done, total, eta, p->tty ? "" : "\n");
    fflush(stderr);
    p->shown = 1;
}

static wgt_status eval_main(int argc, char **argv) {
    WGT_TRY(cli_args_split(&argc, &argv, eval_flags));
    const char *run = NULL, *data = NULL, *shard_path = NULL, *device = "auto", *adapter = NULL;
    long batches = 0;
    double progress_s = 2;
    model_precision prec = MODEL_PREC_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (!cli_flag_known(a, eval_flags)) return cli_unknown_flag("eval", a, eval_flags);
        if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--run")) run = v;
        else if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--shard")) shard_path = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--adapter")) adapter = v;
        else if (!strcmp(a, "--batches")) WGT_TRY(cli_parse_long(a, v, 1, 1000000000L, &batches));
        else if (!strcmp(a, "--progress")) WGT_TRY(cli_parse_double_range(a, v, 0, 1e6, 0, &progress_s));
        else if (!strcmp(a, "--precision")) WGT_TRY(model_precision_parse(v, "--precision", &prec));
        else return cli_unknown_flag("eval", a, eval_flags);
    }
    if (!run) return wgt_fail(WGT_ERR_ARG, "no run directory; pass --run RUN_DIR (see --help)");
    if (strcmp(device, "auto") && strcmp(device, "cpu") && strcmp(device, "webgpu"))
        return wgt_fail(WGT_ERR_ARG, "unknown device '%s'; use --device auto, cpu or webgpu", device);
    checkpoint ck;
    WGT_TRY(run_checkpoint_read(&ck, run));
    const train_config *c = &ck.cfg;
    dataset *ds = NULL;
    wgt_status st = dataset_open(&ds, data ? data : c->data_dir);
    if (st == WGT_OK) st = dataset_check_tokenizer(ds, c->tokenizer_hash, data ? data : c->data_dir, "the run");
    if (st == WGT_OK && shard_path) st = dataset_use_val_shard(ds, shard_path);
    if (st == WGT_OK && dataset_vocab(ds) && dataset_vocab(ds) != c->model.vocab)
        st = wgt_fail(WGT_ERR_CONFIG, "the data in %s has a %d-token vocabulary but the model has %d; evaluate on data "
                      "prepared with the run's tokenizer", data ? data : c->data_dir, dataset_vocab(ds), c->model.vocab);
    if (st == WGT_OK) st = dataset_check_vocab(ds, c->model.vocab);
    if (st == WGT_OK && dataset_val_tokens(ds) < 2)
        st = wgt_fail(WGT_ERR_CONFIG, "the validation data has %zu token(s); at least 2 are needed", dataset_val_tokens(ds));
    wgt_backend *be = NULL;
    wgt_model *m = NULL;
    if (st == WGT_OK) st = cli_backend_open(&be, device, adapter, 0);
    if (st == WGT_OK) st = run_model_open(&m, be, &ck, c->batch, c->seq, run, prec);
    double loss = 0;
    size_t targets = 0;
    if (st == WGT_OK) {
        printf("eval: %s at step %llu on %s (device %s, %s)\n", run, (unsigned long long)ck.pr.step,
               shard_path ? shard_path : (data ? data : c->data_dir), be->name, model_precision_name(prec));
        size_t nb = train_eval_batches(ds, c->batch, c->seq, batches), vt = dataset_val_tokens(ds);
        eval_progress p = {progress_s, wgt_now_s(), wgt_now_s(), isatty(STDERR_FILENO), 0, (size_t)c->batch * c->seq, 0};
        p.total_tokens = nb * p.tokens_per_batch < vt ? nb * p.tokens_per_batch : vt;
        printf("eval: %zu batch%s of %d x %d tokens (%s of the %zu val tokens)\n", nb, nb == 1 ? "" : "es", c->batch,
               c->seq, batches > 0 && (size_t)batches < train_eval_batches(ds, c->batch, c->seq, 0) ? "a subset" : "all",
               vt);
        st = train_evaluate_progress(m, ds, c->batch, c->seq, batches, &loss, &targets, on_progress, &p);
        if (p.shown && p.tty) fprintf(stderr, "\r\033[K");
    }
    if (st == WGT_OK) {
        printf("tokens %zu\nloss %.6f\nperplexity %.6g\n", targets, loss, exp(loss));
        printf("unigram entropy of the train tokens: %.4f (a model that ignores context)\n", dataset_unigram_entropy(ds));
    }
    model_free(m);
    if (be) be->free(be);
    dataset_free(ds);
    checkpoint_free(&ck);
    return st;
}

int cmd_eval(int argc, char **argv) {
    wgt_status st = eval_main(argc, argv);
    return st == WGT_OK ? 0 : cli_fail("eval", st);
}
