// main.c — the `wgtrain` command: dispatches to one subcommand per file (cmd_*.c).
#include <stdio.h>
#include <string.h>
#include "backend/cpu/blas_core.h"
#include "cli/cli.h"

typedef struct { const char *name; int (*fn)(int, char **); const char *help; } command;

static const command commands[] = {
    {"info", cmd_info, "show the WebGPU adapter, its features and limits"},
    {"op", cmd_op, "run one kernel on .npy inputs (cpu or webgpu backend)"},
    {"grad", cmd_grad, "loss and gradients of a GPT-2 safetensors checkpoint on one batch"},
    {"prepare", cmd_prepare, "text files -> tokenizer + train/val token shards (a data directory)"},
    {"train", cmd_train, "train a GPT-2 model on a data directory (checkpoints, metrics, loss plot)"},
    {"sample", cmd_sample, "generate text from a trained run"},
    {"chat", cmd_chat, "talk to a chat model (a run or a Hugging Face directory)"},
    {"eval", cmd_eval, "validation loss and perplexity of a trained run"},
    {"plan", cmd_plan, "the device memory a `train` with the same flags would allocate, by kind, before allocating any"},
    {"bench", cmd_bench, "training throughput (tokens/s) and a per-kernel GPU time table"},
    {"export", cmd_export, "a run's model as a Hugging Face model directory (config.json, model.safetensors, tokenizer)"},
    {"presets", cmd_presets, "every preset of `train` with its sizes, steps, lr, warmup, batch and seq"},
    {"tune", cmd_tune, "time the GEMM tiles on this GPU and cache the fastest (train and bench do it once by themselves)"},
    {"tokenize", cmd_tokenize, "text on stdin -> token ids (GPT-2's or a run's tokenizer); --decode: ids -> text"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: wgtrain COMMAND [options]   (wgtrain COMMAND --help for its options; --flag value or --flag=value)\n"
               "       wgtrain --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    cpu_blas_core_fix(argv);  // before anything else: it may re-execute the program
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
        printf("wgtrain %s (built for Dawn from npm %s)\n", WGTRAIN_VERSION, WGTRAIN_DAWN_PACKAGE);
        return 0;
    }
    const char *names[sizeof commands / sizeof commands[0] + 1];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
        names[i] = commands[i].name;
    }
    names[sizeof commands / sizeof commands[0]] = NULL;
    char hint[128];
    cli_suggest(argv[1], names, hint, sizeof hint);
    if (hint[0]) fprintf(stderr, "wgtrain: unknown command '%s'; did you mean %s?\n", argv[1], hint);
    else fprintf(stderr, "wgtrain: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
