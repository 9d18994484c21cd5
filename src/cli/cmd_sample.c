// cmd_sample.c — `wgtrain sample`: text from a run's checkpoint or a Hugging Face model directory,
// streamed token by token. The prompt is prefilled into a key/value cache (model/decode.h) and each
// new token costs one row; the sampling options and stop conditions are cli_generate.h's.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/cli_generate.h"
#include "core/fileutil.h"
#include "core/token_id.h"
#include "data/text_tokenizer.h"
#include "train/run_tokenizer.h"
#include "train/sampler.h"
#include "train/trainer.h"

static void usage(void) {
    printf("usage: wgtrain sample --run RUN_DIR | --model HF_DIR [--prompt TEXT] [--max-tokens N] [options]\n"
           "  --run RUN_DIR       a run directory (its checkpoint and tokenizer)\n"
           "  --model HF_DIR      a Hugging Face model directory (config.json, model.safetensors, tokenizer.json)\n"
           "  --prompt TEXT       text to continue (default: empty, i.e. the start of a document)\n"
           "  --prompts FILE      one prompt a line (at most 64), generated together as a batch; each prompt and\n"
           "                      its continuation are printed when all are done, separated by lines \"---\"\n"
           "  --ids               the prompt and the output are token ids (decimal, separated by whitespace),\n"
           "                      not text: for runs on data without a tokenizer (llm.c's shards)\n"
           "  --tokens N          the same as --max-tokens\n"
           "  --device D          auto, cpu or webgpu (default auto); --adapter A picks a WebGPU adapter\n");
    printf(gen_usage_text, 200L, 0.8, 0.95);
    printf("The prompt is printed, then the continuation as it is generated. Generation keeps a key/value cache\n"
           "(docs/generation.md); past the model's maximum sequence length it continues on the last tokens.\n");
}

static const char *const sample_flags[] = {"--run=", "--model=", "--prompt=", "--prompts=", "--device=", "--adapter=", "--tokens=",
                                           GEN_FLAG_LIST, "--ids", "--help", "-h", NULL};

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

#define SAMPLE_MAX_BATCH 64

// --prompts FILE: the prompts of the file's non-empty lines decoded as one batch. A row that
// ends (a stop, its token budget, a full context) is kept out of the work from then on: its
// cache is emptied and it is fed a placeholder while rows after it still run.
static wgt_status sample_batch(gen_model *g, const gen_opts *o, const int32_t *stop_ids, int n_stop, const char *path,
                               int as_ids) {
    const int T = model_cfg(g->m)->max_seq, V = model_cfg(g->m)->vocab;
    char *data = NULL;
    size_t n = 0;
    WGT_TRY(file_read_all(path, "prompts file", "give a text file with one prompt a line", 16u << 20, &data, &n));
    char *lines[SAMPLE_MAX_BATCH];
    int np = 0;
    wgt_status st = WGT_OK;
    for (char *p = data, *e; p < data + n && st == WGT_OK; p = e + 1) {
        e = memchr(p, '\n', (size_t)(data + n - p));
        if (!e) e = data + n;
        *e = 0;
        if (!*p) continue;
        if (np == SAMPLE_MAX_BATCH)
            st = wgt_fail(WGT_ERR_ARG, "--prompts %s: more than %d prompts; split the file", path, SAMPLE_MAX_BATCH);
        else lines[np++] = p;
    }
    if (st == WGT_OK && np == 0) st = wgt_fail(WGT_ERR_ARG, "--prompts %s has no prompt (one a line)", path);
    gen_seq *seq = wgt_calloc((size_t)(np ? np : 1), sizeof *seq);
    size_t *first = wgt_calloc((size_t)(np ? np : 1), sizeof *first), *cut = wgt_calloc((size_t)(np ? np : 1), sizeof *cut);
    int *done = wgt_calloc((size_t)(np ? np : 1), sizeof *done);
    for (int b = 0; b < np && st == WGT_OK; b++) {
        uint32_t *ids = NULL;
        size_t k = 0;
        st = as_ids ? parse_prompt_ids(lines[b], V, &ids, &k)
                    : text_tokenizer_encode(g->tok, (const uint8_t *)lines[b], strlen(lines[b]), 0, &ids, &k);
        for (size_t i = 0; st == WGT_OK && i < k; i++)
            if (ids[i] >= (uint32_t)V)
                st = wgt_fail(WGT_ERR_FORMAT, "prompt %d: token #%zu has id %" PRIu32 ", beyond the model's vocabulary of "
                              "%d", b + 1, i + 1, ids[i], V);
        for (size_t i = 0; st == WGT_OK && i < k; i++) gen_seq_push(&seq[b], (int32_t)ids[i]);
        free(ids);
        first[b] = seq[b].n;
        if (st == WGT_OK && seq[b].n == 0) st = wgt_fail(WGT_ERR_ARG, "prompt %d has no tokens", b + 1);
    }
    model_decoder *d = NULL;
    float *lg = wgt_malloc((size_t)(np ? np : 1) * V * sizeof *lg);
    int32_t tok[SAMPLE_MAX_BATCH];
    if (st == WGT_OK) st = model_decoder_init(&d, g->m, np, T);
    for (int b = 0; b < np && st == WGT_OK; b++) {
        const size_t w = seq[b].n < (size_t)T ? seq[b].n : (size_t)T;  // a long prompt: its last T tokens
        st = model_decoder_prefill(d, b, seq[b].ids + seq[b].n - w, (int)w, lg + (size_t)b * V);
    }
    sampler sp;
    gen_sampler_init(&sp, o, V);
    uint8_t *text = NULL;
    size_t nt = 0;
    for (long k = 0; st == WGT_OK; k++) {
        int nb = 0;
        for (int b = 0; b < np && st == WGT_OK; b++) {
            tok[b] = 0;
            if (!done[b] && k >= o->max_tokens) done[b] = 1;
            if (!done[b]) {
                const int next = sampler_pick_seen(&sp, lg + (size_t)b * V, seq[b].ids, seq[b].n);
                for (int i = 0; i < n_stop; i++) done[b] |= stop_ids[i] == next;
                if (!done[b]) {
                    gen_seq_push(&seq[b], next);
                    tok[b] = next;
                    if (o->n_stops && !as_ids) {  // a stop text ends the row before it
                        free(text);
                        text = NULL;
                        st = text_tokenizer_decode(g->tok, (const uint32_t *)seq[b].ids + first[b], seq[b].n - first[b],
                                                   &text, &nt);
                        for (int s2 = 0; st == WGT_OK && s2 < o->n_stops; s2++) {
                            const size_t ls = strlen(o->stops[s2]);
                            for (size_t i = 0; i + ls <= nt; i++)
                                if (!memcmp(text + i, o->stops[s2], ls)) {
                                    cut[b] = done[b] = 1;
                                    break;
                                }
                        }
                    }
                    if (!done[b] && (k + 1 >= o->max_tokens || model_decoder_len(d, b) >= T)) done[b] = 1;
                }
            }
            if (done[b]) model_decoder_truncate(d, b, 0), tok[b] = 0;
            else nb = b + 1;
        }
        if (st != WGT_OK || nb == 0) break;
        st = model_decoder_step(d, nb, tok, lg);
    }
    for (int b = 0; b < np && st == WGT_OK; b++) {
        if (as_ids) {
            for (size_t i = 0; i < seq[b].n; i++) printf("%s%d", i ? " " : "", seq[b].ids[i]);
            putchar('\n');
            continue;
        }
        free(text);
        text = NULL;
        st = text_tokenizer_decode(g->tok, (const uint32_t *)seq[b].ids + first[b], seq[b].n - first[b], &text, &nt);
        if (st != WGT_OK) break;
        size_t upto = nt;
        for (int s2 = 0; cut[b] && s2 < o->n_stops; s2++) {  // before the first stop text
            const size_t ls = strlen(o->stops[s2]);
            for (size_t i = 0; i + ls <= upto; i++)
                if (!memcmp(text + i, o->stops[s2], ls)) {
                    upto = i;
                    break;
                }
        }
        printf("%s%s", b ? "---\n" : "", lines[b]);
        fwrite(text, 1, upto, stdout);
        putchar('\n');
    }
    fflush(stdout);
    free(text);
    sampler_free(&sp);
    model_decoder_free(d);
    for (int b = 0; b < np; b++) gen_seq_free(&seq[b]);
    free(seq);
    free(first);
    free(cut);
    free(done);
    free(lg);
    free(data);
    return st;
}

static wgt_status sample_main(int argc, char **argv) {
    WGT_TRY(cli_args_split(&argc, &argv, sample_flags));
    const char *run = NULL, *hf_dir = NULL, *prompt = "", *prompts_file = NULL, *device = "auto", *adapter = NULL;
    int as_ids = 0;
    gen_opts o;
    gen_opts_default(&o, 0.8, 0.95, 200);
    o.slide = 1;
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
        wgt_status st;
        if (!strcmp(a, "--ignore-eos") && gen_opts_parse(&o, a, NULL, &st)) continue;
        if (!cli_flag_known(a, sample_flags)) return cli_unknown_flag("sample", a, sample_flags);
        if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--tokens")) a = "--max-tokens";
        if (gen_opts_parse(&o, a, v, &st)) {
            WGT_TRY(st);
            continue;
        }
        if (!strcmp(a, "--run")) run = v;
        else if (!strcmp(a, "--model")) hf_dir = v;
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--prompts")) prompts_file = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--adapter")) adapter = v;
        else return cli_unknown_flag("sample", a, sample_flags);
    }
    if (!run && !hf_dir) return wgt_fail(WGT_ERR_ARG, "no run directory; pass --run RUN_DIR (or --model HF_DIR; see --help)");
    if (strcmp(device, "auto") && strcmp(device, "cpu") && strcmp(device, "webgpu"))
        return wgt_fail(WGT_ERR_ARG, "unknown device '%s'; use --device auto, cpu or webgpu", device);
    gen_model g;
    WGT_TRY(gen_model_open(&g, run, hf_dir, device, adapter, 0));
    const model_config *mc = model_cfg(g.m);
    const int T = mc->max_seq, V = mc->vocab;
    text_tokenizer *tok = g.tok;
    wgt_status st = WGT_OK;
    if (!tok && !as_ids && g.tok_error[0]) st = wgt_fail(WGT_ERR_FORMAT, "%s", g.tok_error);
    else if (!tok && !as_ids)
        st = wgt_fail(WGT_ERR_IO, "no tokenizer: neither %s nor its data directory has one (%s, or GPT-2's encoder.json "
                      "+ vocab.bpe; data made by other tools?); sampling text needs the tokenizer the training data was "
                      "made with (or pass --ids to give and get token ids)", g.model_dir, RUN_TOKENIZER_FILE);
    uint32_t *ids = NULL;
    size_t n_ids = 0;
    if (st == WGT_OK && as_ids) st = parse_prompt_ids(prompt, V, &ids, &n_ids);
    else if (st == WGT_OK) st = text_tokenizer_encode(tok, (const uint8_t *)prompt, strlen(prompt), 0, &ids, &n_ids);
    // no id beyond the model's vocabulary may reach its embedding
    for (size_t i = 0; st == WGT_OK && i < n_ids; i++)
        if (ids[i] >= (uint32_t)V)
            st = wgt_fail(WGT_ERR_FORMAT, "the prompt's token #%zu has id %" PRIu32 ", beyond the model's vocabulary of %d; "
                          "the tokenizer %s is not this run's", i + 1, ids[i], V, text_tokenizer_source(tok));
    int32_t stop_ids[2 * GEN_MAX_STOPS];
    int n_stop = 0;
    if (st == WGT_OK) st = gen_stop_ids(&o, tok, hf_dir, stop_ids, &n_stop);
    if (st == WGT_OK && prompts_file) {
        free(ids);
        st = sample_batch(&g, &o, stop_ids, n_stop, prompts_file, as_ids);
        gen_model_close(&g);
        return st;
    }
    model_decoder *d = NULL;
    if (st == WGT_OK) st = model_decoder_init(&d, g.m, 1, T);
    // the context: the prompt's tokens exactly (as transformers' generate and PyTorch would be
    // given them), or end-of-text alone for an empty prompt (documents start with it in the
    // training data), so that there is a first token to continue
    gen_seq seq = {0};
    if (n_ids == 0) gen_seq_push(&seq, tok ? text_tokenizer_eot(tok) : 0);  // no tokenizer: id 0 starts
    for (size_t i = 0; i < n_ids; i++) gen_seq_push(&seq, (int32_t)ids[i]);  // < V <= TOKEN_MAX_VOCAB: fits
    float *logits = wgt_malloc((size_t)V * sizeof *logits);
    // a prompt longer than the model's window: its last T tokens
    const size_t w = seq.n < (size_t)T ? seq.n : (size_t)T;
    if (st == WGT_OK) st = model_decoder_prefill(d, 0, seq.ids + seq.n - w, (int)w, logits);
    sampler sp;
    gen_sampler_init(&sp, &o, V);
    o.ids_space = n_ids > 0;
    if (st == WGT_OK) {
        if (as_ids)
            for (size_t i = 0; i < n_ids; i++) printf("%s%" PRIu32, i ? " " : "", ids[i]);
        else fwrite(prompt, 1, strlen(prompt), stdout);
        fflush(stdout);
        const char *why;
        st = gen_run(d, &sp, tok, &o, stop_ids, n_stop, logits, &seq, stdout, as_ids, NULL, NULL, NULL, &why);
    }
    if (st == WGT_OK) putchar('\n');
    sampler_free(&sp);
    free(logits);
    gen_seq_free(&seq);
    free(ids);
    model_decoder_free(d);
    gen_model_close(&g);
    return st;
}

int cmd_sample(int argc, char **argv) {
    wgt_status st = sample_main(argc, argv);
    return st == WGT_OK ? 0 : cli_fail("sample", st);
}
