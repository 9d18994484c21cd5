// cmd_train.c — `wgtrain train`: turns the command line into a run configuration and hands
// it to the trainer. Config flags come from train_config's table (shared with config.json and
// the checkpoint); only the session options (--out, --resume, --device...) live here.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "train/train_dist.h"
#include "train/trainer.h"

static void usage(void) {
    printf("usage: wgtrain train --data DATA_DIR --out RUN_DIR [--preset NAME] [--config FILE.json] [--steps N] [--batch B]\n"
           "                     [--seq T] [--lr X] [--seed S] [--device auto|cpu|webgpu] [--adapter A] [--resume] [options]\n"
           "Trains a model (--arch gpt2 or llama) on the shards of DATA_DIR (see `wgtrain prepare`). RUN_DIR receives config.json,\n"
           "metrics.jsonl, loss.svg, ckpt.bin (the full training state), model.safetensors (Hugging Face names) and\n"
           "the data's tokenizer (tokenizer.bin, or GPT-2's encoder.json + vocab.bpe); `wgtrain sample` and `wgtrain eval`\n"
           "read them. Every option may be written --flag value or --flag=value.\n\n"
           "session options:\n"
           "  --out RUN_DIR            run directory (required)\n"
           "  --config FILE.json       settings from a file: a run's config.json repeats that run, or any subset\n"
           "                           of its keys ({\"train\": {\"steps\": 100}}) or of the flags' names without\n"
           "                           dashes ({\"steps\": 100, \"val-every\": 10}); flags given here override it\n"
           "  --resume                 continue RUN_DIR from its checkpoint; a flag that contradicts the\n"
           "                           checkpoint is refused (--steps and the intervals may change)\n"
           "  --device D               auto (a GPU through WebGPU if there is one, else the CPU), cpu, webgpu\n"
           "  --adapter A              WebGPU adapter: auto, gpu, software or part of a name (`wgtrain info`)\n"
           "  --stop-at N              stop after step N with a checkpoint, as if interrupted (Ctrl-C also\n"
           "                           stops at the end of the current step and writes a checkpoint; a second\n"
           "                           Ctrl-C quits at once, keeping the last checkpoint written)\n\n"
           "run configuration (defaults from the preset):\n");
    train_config_print_flags(stdout);
    printf("\npresets (`wgtrain presets` prints this table): tiny is the default, llama-tiny with --arch llama\n");
    cli_print_presets(stdout);
}

// The session options, then every flag of train_config's table (built once).
static const char *const *train_known_flags(void) {
    static const char *known[128];
    static char names[64][40];
    if (known[0]) return known;
    static const char *const session[] = {"--out=", "--config=", "--device=", "--adapter=", "--stop-at=", "--resume",
                                          "--help", "-h"};
    int n = 0;
    for (size_t k = 0; k < sizeof session / sizeof session[0]; k++) known[n++] = session[k];
    const char *flags[64];
    int nf = train_config_flag_names(flags, 64);
    for (int k = 0; k < nf && n < 127; k++) {
        snprintf(names[k], sizeof names[k], "%s=", flags[k]);  // every config flag takes a value
        known[n++] = names[k];
    }
    known[n] = NULL;
    return known;
}

static wgt_status train_main(int argc, char **argv, int *exit_code, int *reached_checks) {
    const char *const *known = train_known_flags();
    WGT_TRY(cli_args_split(&argc, &argv, known));
    train_config flags;
    memset(&flags, 0, sizeof flags);
    train_flags given;
    memset(&given, 0, sizeof given);
    trainer_opts o = {NULL, 0, 0};
    const char *device = "auto", *adapter = NULL, *config = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        wgt_status st = WGT_OK;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (!strcmp(a, "--resume")) {
            o.resume = 1;
            continue;
        }
        if (train_config_parse_flag(&flags, &given, argc, argv, &i, &st)) {
            WGT_TRY(st);
            continue;
        }
        if (!cli_flag_known(a, known)) return cli_unknown_flag("train", a, known);
        if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) o.run_dir = v;
        else if (!strcmp(a, "--config")) config = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--adapter")) adapter = v;
        else if (!strcmp(a, "--stop-at")) WGT_TRY(cli_parse_long(a, v, 1, (long)(LONG_MAX < 1000000000000LL ? LONG_MAX : 1000000000000LL), &o.stop_at));
        else return cli_unknown_flag("train", a, known);
    }
    if (config) {
        // the file's settings, then the command line's on top
        train_config file;
        train_flags file_given;
        WGT_TRY(train_config_read_file(&file, &file_given, config));
        train_config_apply_flags(&file, &flags, &given);
        for (size_t k = 0; k < sizeof given.given; k++) file_given.given[k] |= given.given[k];
        flags = file;
        given = file_given;
    }
    if (strcmp(device, "auto") && strcmp(device, "cpu") && strcmp(device, "webgpu"))
        return wgt_fail(WGT_ERR_ARG, "unknown device '%s'; use --device auto, cpu or webgpu", device);
    if (!o.run_dir) return wgt_fail(WGT_ERR_ARG, "no run directory; pass --out RUN_DIR (see --help)");
    trainer *t;
    // under mpirun: every rank stops together when any fails to start (dist_check_all)
    *reached_checks = 1;
    WGT_TRY(dist_check_all(trainer_init(&t, &flags, &given, &o)));
    wgt_backend *be = NULL;
    train_dist_pick_gpu(device, adapter);  // under mpirun: this rank's GPU among the host's
    // WGTRAIN_PROFILE=1 (webgpu): each kernel's GPU time over the updates after the first, printed at
    // the end (docs/architecture.md, Profiling); timestamp queries slow the run a little
    const char *prof = getenv("WGTRAIN_PROFILE");
    wgt_status st = dist_check_all(cli_backend_open(&be, device, adapter, prof && !strcmp(prof, "1")));
    // a GPU without measured tiles is tuned once (docs/tuning.md); every rank reaches the check
    if (st == WGT_OK) st = dist_check_all(be->tune_auto ? be->tune_auto(be) : WGT_OK);
    int interrupted = 0;
    if (st == WGT_OK) st = trainer_run(t, be, &interrupted);
    trainer_free(t);
    if (be) be->free(be);
    if (interrupted) *exit_code = 130;  // the shell's code for "stopped by Ctrl-C"
    return st;
}

int cmd_train(int argc, char **argv) {
    int code = 0;
    // under mpirun this process is one rank of a data-parallel run (docs/distributed.md)
    wgt_status st = dist_init();
    int reached_checks = 0;
    if (st == WGT_OK) st = train_main(argc, argv, &code, &reached_checks);
    // a bad flag: the other ranks wait in their first start-up check
    if (st != WGT_OK && !reached_checks) st = dist_check_all(st);
    // a failing rank ends the whole job, naming itself
    if (st != WGT_OK) return dist_fail("train", st);
    dist_finalize();
    return code;
}
