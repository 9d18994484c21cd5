// cmd_prepare.c — `wgtrain prepare`: text files in, a data directory out (a BPE tokenizer trained
// on the corpus, GPT-2's, or an existing one such as a Hugging Face model's; train/val token
// shards, meta.json). The work is prepare_corpus's; this file is the flags.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/cli.h"
#include "data/prepare.h"

static void usage(void) {
    printf("usage: wgtrain prepare --input PATH... --out DATA_DIR [--vocab N] [--tokenizer bpe|gpt2|PATH]\n"
           "                       [--val-fraction F] [--chat-template FILE] [--max-tokens N] [--long truncate|drop]\n"
           "  --input PATH...    text files, directories (walked recursively) or quoted glob patterns;\n"
           "                     several may follow one --input, and --input may be repeated\n"
           "  --out DATA_DIR     where tokenizer.bin, train_*.bin, val_*.bin and meta.json go\n"
           "  --vocab N          vocabulary size incl. 256 byte tokens and end-of-text, 257..65535\n"
           "                     (default 16384)\n"
           "  --tokenizer KIND   bpe: train a new BPE tokenizer on the corpus (default); gpt2: use\n"
           "                     GPT-2's (50257 tokens, no --vocab; its encoder.json and vocab.bpe\n"
           "                     go in DATA_DIR instead of tokenizer.bin)\n"
           "  --tokenizer PATH   an existing tokenizer: a Hugging Face model directory (tokenizer.json and\n"
           "                     tokenizer_config.json, copied into DATA_DIR; documents end with its EOS\n"
           "                     id), a tokenizer file, or a data directory's tokenizer\n"
           "  --val-fraction F   share of the documents kept for validation (default 0.1)\n"
           "Instruction and chat data: inputs named *.jsonl, one record a line, {\"text\": ...},\n"
           "{\"prompt\": ..., \"completion\": ...} or {\"messages\": [{\"role\", \"content\"}, ...]}, with\n"
           "--tokenizer a Hugging Face model directory; only completions and assistant turns are trained\n"
           "(docs/instruction-data.md):\n"
           "  --chat-template FILE  a Jinja2 chat template instead of the tokenizer_config.json's\n"
           "  --max-tokens N     examples longer than N tokens are truncated or dropped (default 0: no limit)\n"
           "  --long MODE        truncate (default) or drop them\n"
           "Prints a summary of the corpus, including the unigram entropy of its tokens: the loss of a\n"
           "model that ignores context, to compare the training loss with.\n");
}

static const char *const prepare_flags[] = {"--input=", "--out=", "--vocab=", "--tokenizer=", "--val-fraction=",
                                            "--chat-template=", "--max-tokens=", "--long=", "--help", "-h", NULL};

static int is_jsonl(const char *p) {
    size_t l = strlen(p);
    return l >= 6 && !strcmp(p + l - 6, ".jsonl");
}

static wgt_status prepare_main(int argc, char **argv) {
    WGT_TRY(cli_args_split(&argc, &argv, prepare_flags));
    const char **inputs = wgt_calloc((size_t)argc, sizeof *inputs);
    int n_inputs = 0;
    const char *out = NULL;
    long vocab = 16384;
    int vocab_given = 0;
    prepare_tokenizer kind = PREPARE_TOKENIZER_TRAIN;
    struct stat sb;
    const char *tok_spec = NULL;  // an existing tokenizer's file or directory
    double val_fraction = 0.1;
    prepare_jsonl_opts jo = {NULL, 0, 0};
    long max_tokens = 0;
    int jsonl_flags = 0;
    wgt_status st = WGT_OK;
    for (int i = 1; i < argc && st == WGT_OK; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            free(inputs);
            exit(0);
        }
        if (!strcmp(a, "--input")) {
            int k = 0;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) inputs[n_inputs++] = argv[++i], k++;
            if (!k) st = wgt_fail(WGT_ERR_ARG, "--input needs at least one path (a file, a directory or a glob pattern)");
            continue;
        }
        if (!cli_flag_known(a, prepare_flags)) {
            st = cli_unknown_flag("prepare", a, prepare_flags);
            break;
        }
        if (i + 1 >= argc) {
            st = wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
            break;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--vocab")) st = cli_parse_long(a, v, -1000000000L, 1000000000L, &vocab), vocab_given = 1;
        else if (!strcmp(a, "--tokenizer")) {
            tok_spec = NULL;
            if (!strcmp(v, "gpt2")) kind = PREPARE_TOKENIZER_GPT2;
            else if (!strcmp(v, "bpe")) kind = PREPARE_TOKENIZER_TRAIN;
            else if (stat(v, &sb) == 0) tok_spec = v, kind = PREPARE_TOKENIZER_TRAIN;
            else st = wgt_fail(WGT_ERR_ARG, "unknown --tokenizer '%s' (no such file or directory); use bpe (train one on the "
                               "corpus), gpt2, or an existing tokenizer's file or directory", v);
        }
        else if (!strcmp(a, "--val-fraction")) st = cli_parse_double(a, v, &val_fraction);
        else if (!strcmp(a, "--chat-template")) jo.chat_template = v, jsonl_flags = 1;
        else if (!strcmp(a, "--max-tokens")) st = cli_parse_long(a, v, 0, 1L << 30, &max_tokens), jsonl_flags = 1;
        else if (!strcmp(a, "--long")) {
            jsonl_flags = 1;
            if (!strcmp(v, "drop")) jo.drop_long = 1;
            else if (!strcmp(v, "truncate")) jo.drop_long = 0;
            else st = wgt_fail(WGT_ERR_ARG, "--long '%s': use truncate or drop", v);
        }
        else st = cli_unknown_flag("prepare", a, prepare_flags);
    }
    if (st == WGT_OK && !n_inputs) st = wgt_fail(WGT_ERR_ARG, "no input given; pass --input with text files, directories or glob patterns (see --help)");
    if (st == WGT_OK && !out) st = wgt_fail(WGT_ERR_ARG, "no output directory given; pass --out DATA_DIR");
    if (st == WGT_OK && kind == PREPARE_TOKENIZER_GPT2 && vocab_given)
        st = wgt_fail(WGT_ERR_ARG, "--vocab does not go with --tokenizer gpt2: GPT-2's vocabulary is fixed (50257 tokens)");
    if (st == WGT_OK && tok_spec && vocab_given)
        st = wgt_fail(WGT_ERR_ARG, "--vocab does not go with --tokenizer %s: an existing tokenizer's vocabulary is fixed", tok_spec);
    int n_jsonl = 0;
    for (int i = 0; i < n_inputs; i++) n_jsonl += is_jsonl(inputs[i]);
    if (st == WGT_OK && n_jsonl && n_jsonl != n_inputs)
        st = wgt_fail(WGT_ERR_ARG, "--input mixes JSONL files (*.jsonl) with other inputs; prepare instruction data and "
                      "plain text into separate directories");
    if (st == WGT_OK && !n_jsonl && jsonl_flags)
        st = wgt_fail(WGT_ERR_ARG, "--chat-template, --max-tokens and --long are for JSONL inputs (*.jsonl)");
    if (st == WGT_OK && n_jsonl && !tok_spec)
        st = wgt_fail(WGT_ERR_ARG, "JSONL inputs need the model's tokenizer: pass --tokenizer HF_DIR (a directory with "
                      "tokenizer.json and tokenizer_config.json)");
    jo.max_tokens = (int)max_tokens;
    if (st == WGT_OK && n_jsonl) {
        st = prepare_jsonl(inputs, n_inputs, out, tok_spec, &jo, val_fraction, 1);
        free(inputs);
        return st;
    }
    if (st == WGT_OK && tok_spec) st = prepare_corpus_spec(inputs, n_inputs, out, tok_spec, val_fraction, 1);
    else if (st == WGT_OK) st = prepare_corpus_with(inputs, n_inputs, out, kind, (int)vocab, val_fraction, 1);
    free(inputs);
    return st;
}

int cmd_prepare(int argc, char **argv) {
    wgt_status st = prepare_main(argc, argv);
    return st == WGT_OK ? 0 : cli_fail("prepare", st);
}
