// cmd_sample.c — `wgtrain sample`: text from a run's checkpoint, streamed token by token.
// The model is built for one sequence of max_seq tokens and the whole window is recomputed
// for every new token: no key/value cache, which is simple and fast enough for small models.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "core/token_id.h"
#include "data/text_tokenizer.h"
#include "train/run_tokenizer.h"
#include "train/sampler.h"
#include "train/trainer.h"

static void usage(void) {
    printf("usage: wgtrain sample --run RUN_DIR [--prompt TEXT] [--tokens N] [--temperature X] [--top-k K]\n"
           "                      [--top-p P] [--seed S] [--ids] [--device auto|cpu|webgpu] [--adapter A]\n"
           "  --prompt TEXT       text to continue (default: empty, i.e. the start of a document)\n"
           "  --ids               the prompt and the output are token ids (decimal, separated by whitespace),\n"
           "                      not text: for runs on data without a tokenizer (llm.c's shards)\n"
           "  --tokens N          tokens to generate (default 200)\n"
           "  --temperature X     0 picks the likeliest token every time; higher is more random (default 0.8)\n"
           "  --top-k K           sample among the K likeliest tokens only; 0 = no limit (default 0)\n"
           "  --top-p P           sample among the likeliest tokens holding mass P (nucleus; default 0.95)\n"
           "  --seed S            random seed; the same seed gives the same text (default 1)\n"
           "The prompt is printed, then the continuation as it is generated.\n");
}

static const char *const sample_flags[] = {"--run=", "--prompt=", "--device=", "--adapter=", "--tokens=", "--top-k=",
                                           "--seed=", "--temperature=", "--top-p=", "--ids", "--help", "-h", NULL};

// --ids: the prompt's whitespace-separated decimal ids, each < V.
static wgt_status parse_prompt_ids(const char *s, int V, uint32_t **ids, size_t *n_ids) {
    size_t cap = strlen(s) / 2 + 1, k = 0;
    uint32_t *v = wgt_malloc(cap * sizeof *v);
    for (const char *p = s; *p;) {
        while (*p == ' ' || (*p >= 9 && *p <= 13)) p++;
        if (!*p) break;
        uint64_t x = 0;
        const char *b = p;
        while (*p >= '0' && *p <= '9') {
            x = x * 10 + (uint64_t)(*p - '0');
            if (x > 0xFFFFFFFFull) x = 0xFFFFFFFFull;
            p++;
        }
        if (p == b || (*p && !(*p == ' ' || (*p >= 9 && *p <= 13)))) {
            free(v);
            return wgt_fail(WGT_ERR_ARG, "--prompt with --ids: item #%zu (at character %zu) is not a token id; ids are "
                            "decimal numbers separated by whitespace", k + 1, (size_t)(b - s));
        }
        if (x >= (uint64_t)V) {
            free(v);
            return wgt_fail(WGT_ERR_ARG, "--prompt with --ids: id %llu%s (item #%zu) is beyond the model's vocabulary "
                            "(ids 0..%d)", (unsigned long long)x, x == 0xFFFFFFFFull ? "+" : "", k + 1, V - 1);
        }
        v[k++] = (uint32_t)x;
    }
    *ids = v;
    *n_ids = k;
    return WGT_OK;
}

static wgt_status sample_main(int argc, char **argv) {
    WGT_TRY(cli_args_split(&argc, &argv, sample_flags));
    const char *run = NULL, *prompt = "", *device = "auto", *adapter = NULL;
    long n_tokens = 200, top_k = 0, seed = 1;
    int as_ids = 0;
    double temperature = 0.8, top_p = 0.95;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (!strcmp(a, "--ids")) {
            as_ids = 1;
            continue;
        }
        if (!cli_flag_known(a, sample_flags)) return cli_unknown_flag("sample", a, sample_flags);
        if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--run")) run = v;
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--adapter")) adapter = v;
        else if (!strcmp(a, "--tokens")) WGT_TRY(cli_parse_long(a, v, 0, 100000000L, &n_tokens));
        else if (!strcmp(a, "--top-k")) WGT_TRY(cli_parse_long(a, v, 0, TOKEN_MAX_VOCAB, &top_k));
        else if (!strcmp(a, "--seed")) WGT_TRY(cli_parse_long(a, v, 0, 9007199254740991L, &seed));
        else if (!strcmp(a, "--temperature")) WGT_TRY(cli_parse_double(a, v, &temperature));
        else if (!strcmp(a, "--top-p")) WGT_TRY(cli_parse_double(a, v, &top_p));
        else return cli_unknown_flag("sample", a, sample_flags);
    }
    if (!run) return wgt_fail(WGT_ERR_ARG, "no run directory; pass --run RUN_DIR (see --help)");
    if (temperature < 0) return wgt_fail(WGT_ERR_ARG, "--temperature must be >= 0 (0: greedy), got %g", temperature);
    if (!(top_p > 0 && top_p <= 1)) return wgt_fail(WGT_ERR_ARG, "--top-p must be in (0, 1], got %g", top_p);
    if (strcmp(device, "auto") && strcmp(device, "cpu") && strcmp(device, "webgpu"))
        return wgt_fail(WGT_ERR_ARG, "unknown device '%s'; use --device auto, cpu or webgpu", device);

    checkpoint ck;
    WGT_TRY(run_checkpoint_read(&ck, run));
    const model_config *mc = &ck.cfg.model;
    const int T = mc->max_seq, V = mc->vocab;
    // the run's copy of the tokenizer (its own BPE or GPT-2's); older runs or moved files: the data directory's
    // (the one whose fingerprint the run recorded: a replaced tokenizer.bin is refused)
    text_tokenizer *tok = NULL;
    wgt_status st = run_tokenizer_open(&tok, &ck, run);
    if (st != WGT_OK && as_ids) st = WGT_OK;  // ids need no tokenizer; with none, id 0 starts an empty prompt
    if (st == WGT_OK && !tok && !as_ids)
        st = wgt_fail(WGT_ERR_IO, "no tokenizer: neither %s nor its data directory %s has one (%s, or GPT-2's encoder.json "
                      "+ vocab.bpe; data made by other tools?); sampling text needs the tokenizer the training data was made with "
                      "(or pass --ids to give and get token ids)",
                      run, ck.cfg.data_dir, RUN_TOKENIZER_FILE);
    if (st == WGT_OK && tok && text_tokenizer_vocab_size(tok) != V)
        st = wgt_fail(WGT_ERR_FORMAT, "the tokenizer %s has %d tokens but the model has %d: it is not this run's tokenizer",
                      text_tokenizer_source(tok), text_tokenizer_vocab_size(tok), V);
    uint32_t *ids = NULL;
    size_t n_ids = 0;
    if (st == WGT_OK && as_ids) st = parse_prompt_ids(prompt, V, &ids, &n_ids);
    else if (st == WGT_OK) st = text_tokenizer_encode(tok, (const uint8_t *)prompt, strlen(prompt), 0, &ids, &n_ids);
    // no id beyond the model's vocabulary may reach its embedding
    for (size_t i = 0; st == WGT_OK && i < n_ids; i++)
        if (ids[i] >= (uint32_t)V)
            st = wgt_fail(WGT_ERR_FORMAT, "the prompt's token #%zu has id %" PRIu32 ", beyond the model's vocabulary of %d; "
                          "the tokenizer %s is not this run's", i + 1, ids[i], V, text_tokenizer_source(tok));
    wgt_backend *be = NULL;
    wgt_model *m = NULL;
    if (st == WGT_OK) st = cli_backend_open(&be, device, adapter, 0);
    if (st == WGT_OK) st = run_model_open(&m, be, &ck, 1, T, run, MODEL_PREC_F32);
    checkpoint_free(&ck);
    if (st != WGT_OK) {
        model_free(m);
        if (be) be->free(be);
        text_tokenizer_free(tok);
        free(ids);
        return st;
    }
    // the context: the prompt's tokens exactly (as transformers' generate and PyTorch would be
    // given them), or end-of-text alone for an empty prompt (documents start with it in the
    // training data), so that there is a first token to continue
    size_t cap = 1 + n_ids + (size_t)n_tokens, len = 0;
    int32_t *ctx = wgt_malloc(cap * sizeof *ctx), *window = wgt_malloc((size_t)T * sizeof *window);
    if (n_ids == 0 && tok) ctx[len++] = text_tokenizer_eot(tok);
    else if (n_ids == 0) ctx[len++] = 0;  // no tokenizer, so no end-of-text id known: id 0 starts
    for (size_t i = 0; i < n_ids; i++) ctx[len++] = (int32_t)ids[i];  // < V <= TOKEN_MAX_VOCAB: fits
    float *logits = wgt_malloc((size_t)T * V * sizeof *logits);
    sampler sp;
    sampler_init(&sp, V, temperature, (int)top_k, top_p, (uint64_t)seed);
    if (as_ids)
        for (size_t i = 0; i < n_ids; i++) printf("%s%" PRIu32, i ? " " : "", ids[i]);
    else fwrite(prompt, 1, strlen(prompt), stdout);
    fflush(stdout);
    for (long k = 0; k < n_tokens && st == WGT_OK; k++) {
        // the last T tokens; positions after them are padding that causal attention never sees
        size_t w = len < (size_t)T ? len : (size_t)T;
        for (int i = 0; i < T; i++) window[i] = (size_t)i < w ? ctx[len - w + (size_t)i] : 0;
        st = model_forward_logits(m, window, logits);
        if (st != WGT_OK) break;
        int next = sampler_pick(&sp, logits + (w - 1) * (size_t)V);
        ctx[len++] = next;
        if (as_ids) {
            printf("%s%d", n_ids || k ? " " : "", next);
            fflush(stdout);
            continue;
        }
        size_t nb;
        const uint8_t *bytes = text_tokenizer_token_bytes(tok, next, &nb);
        if (next == text_tokenizer_eot(tok)) fputs("\n" TOKENIZER_EOT_TEXT "\n", stdout);
        else fwrite(bytes, 1, nb, stdout);
        fflush(stdout);
    }
    if (st == WGT_OK) putchar('\n');
    sampler_free(&sp);
    free(logits);
    free(window);
    free(ctx);
    free(ids);
    model_free(m);
    be->free(be);
    text_tokenizer_free(tok);
    return st;
}

int cmd_sample(int argc, char **argv) {
    wgt_status st = sample_main(argc, argv);
    return st == WGT_OK ? 0 : cli_fail("sample", st);
}
