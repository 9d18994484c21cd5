// cmd_train.c — `wgtrain train`: turns the command line into a run configuration and hands
// it to the trainer. Config flags come from train_config's table (shared with config.json and
// the checkpoint); only the session options (--out, --resume, --device...) live here.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "train/trainer.h"

static void usage(void) {
    printf("usage: wgtrain train --data DATA_DIR --out RUN_DIR [--preset NAME] [--steps N] [--batch B] [--seq T]\n"
           "                     [--lr X] [--seed S] [--device auto|cpu|webgpu] [--adapter A] [--resume] [options]\n"
           "Trains a model (--arch gpt2 or llama) on the shards of DATA_DIR (see `wgtrain prepare`). RUN_DIR receives config.json,\n"
           "metrics.jsonl, loss.svg, ckpt.bin (the full training state), model.safetensors (Hugging Face names) and\n"
           "the data's tokenizer (tokenizer.bin, or GPT-2's encoder.json + vocab.bpe); `wgtrain sample` and `wgtrain eval`\n"
           "read them.\n\n"
           "session options:\n"
           "  --out RUN_DIR            run directory (required)\n"
           "  --resume                 continue RUN_DIR from its checkpoint; a flag that contradicts the\n"
           "                           checkpoint is refused (--steps and the intervals may change)\n"
           "  --device D               auto (a GPU through WebGPU if there is one, else the CPU), cpu, webgpu\n"
           "  --adapter A              WebGPU adapter: index or name substring (see `wgtrain info`)\n"
           "  --stop-at N              stop after step N with a checkpoint, as if interrupted (Ctrl-C also\n"
           "                           stops at the end of the current step and writes a checkpoint)\n\n"
           "run configuration (defaults from the preset):\n");
    train_config_print_flags(stdout);
    printf("\npresets: tiny (4 layers, d_model 128, seq 64, batch 8, 600 steps: a few minutes on a 2-core CPU),\n"
           "         small (6 layers, d_model 384, seq 256, batch 16), gpt2-124m (12 layers, d_model 768, seq 1024):\n"
           "         GPT-2; llama-tiny (tiny's sizes: 4 heads, 2 KV heads, d_ff 352, tied lm_head; the default with\n"
           "         --arch llama), llama-124m (12 layers, d_model 768, 12 heads, 4 KV heads, d_ff 2048, seq 1024): LLaMA\n");
}

static wgt_status train_main(int argc, char **argv, int *exit_code) {
    train_config flags;
    memset(&flags, 0, sizeof flags);
    train_flags given;
    memset(&given, 0, sizeof given);
    trainer_opts o = {NULL, 0, 0};
    const char *device = "auto", *adapter = NULL;
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
        if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) o.run_dir = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--adapter")) adapter = v;
        else if (!strcmp(a, "--stop-at")) WGT_TRY(cli_parse_long(a, v, 1, 1000000000000L, &o.stop_at));
        else return wgt_fail(WGT_ERR_ARG, "unknown option '%s' (see --help)", a);
    }
    if (strcmp(device, "auto") && strcmp(device, "cpu") && strcmp(device, "webgpu"))
        return wgt_fail(WGT_ERR_ARG, "unknown device '%s'; use --device auto, cpu or webgpu", device);
    if (!o.run_dir) return wgt_fail(WGT_ERR_ARG, "no run directory; pass --out RUN_DIR (see --help)");
    trainer *t;
    WGT_TRY(trainer_init(&t, &flags, &given, &o));
    wgt_backend *be = NULL;
    wgt_status st = cli_backend_open(&be, device, adapter, 0);
    int interrupted = 0;
    if (st == WGT_OK) st = trainer_run(t, be, &interrupted);
    trainer_free(t);
    if (be) be->free(be);
    if (interrupted) *exit_code = 130;  // the shell's code for "stopped by Ctrl-C"
    return st;
}

int cmd_train(int argc, char **argv) {
    int code = 0;
    wgt_status st = train_main(argc, argv, &code);
    return st == WGT_OK ? code : cli_fail("train", st);
}
