// cmd_eval.c — `wgtrain eval`: the validation loss and perplexity of a run's checkpoint, on
// its data's validation shards, another data directory's, or one shard file.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "train/trainer.h"

static void usage(void) {
    printf("usage: wgtrain eval --run RUN_DIR [--data DATA_DIR] [--shard PATH] [--batches N] [--device auto|cpu|webgpu]\n"
           "                    [--adapter A]\n"
           "  --run RUN_DIR     a run directory written by `wgtrain train` (its ckpt.bin is evaluated)\n"
           "  --data DATA_DIR   whose validation shards to use (default: the run's own data directory)\n"
           "  --shard PATH      evaluate this one token shard instead\n"
           "  --batches N       N batches of the run's batch x seq size, spread over the set (default: all)\n"
           "Prints `loss X` (mean cross-entropy in nats/token, without label smoothing or z-loss) and\n"
           "`perplexity Y` (exp of the loss).\n");
}

static wgt_status eval_main(int argc, char **argv) {
    const char *run = NULL, *data = NULL, *shard_path = NULL, *device = "auto", *adapter = NULL;
    long batches = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--run")) run = v;
        else if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--shard")) shard_path = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--adapter")) adapter = v;
        else if (!strcmp(a, "--batches")) WGT_TRY(cli_parse_long(a, v, 1, 1000000000L, &batches));
        else return wgt_fail(WGT_ERR_ARG, "unknown option '%s' (see --help)", a);
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
    if (st == WGT_OK) st = run_model_open(&m, be, &ck, c->batch, c->seq, run);
    double loss = 0;
    size_t targets = 0;
    if (st == WGT_OK) {
        printf("eval: %s at step %llu on %s (device %s)\n", run, (unsigned long long)ck.pr.step,
               shard_path ? shard_path : (data ? data : c->data_dir), be->name);
        st = train_evaluate(m, ds, c->batch, c->seq, batches, &loss, &targets);
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
