// cli_generate.c — generation shared by `wgtrain sample` and `wgtrain chat` (cli_generate.h):
// the flags, the stop ids, opening a model for decoding, and the pick / stream / stop loop over a
// model_decoder.
#include "cli/cli_generate.h"
#include "model/lora.h"
#include "train/run_tokenizer.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/cli.h"
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "core/token_id.h"
#include "data/hf_tokenizer_kind.h"
#include "train/hf_init.h"
#include "train/trainer.h"

const char gen_usage_text[] =
    "  --max-tokens N      the most tokens to generate (default %ld)\n"
    "  --temperature X     0 picks the likeliest token every time (greedy); higher is more random (default %g)\n"
    "  --top-k K           sample among the K likeliest tokens only; 0 = no limit (default 0)\n"
    "  --top-p P           sample among the likeliest tokens holding mass P (nucleus; default %g)\n"
    "  --min-p P           drop tokens less likely than P times the likeliest one; 0 = off (default 0)\n"
    "  --repetition-penalty R  divide the logits of tokens already in the text by R (multiply the negative\n"
    "                      ones), as Hugging Face generate; 1 = off (default 1)\n"
    "  --seed S            random seed; the same seed, options and model give the same text (default 1)\n"
    "  --stop TEXT         end the reply before TEXT (up to 16 of them)\n"
    "  --stop-token ID     end the reply at token ID (up to 16); the tokenizer's end-of-text and end-of-turn\n"
    "                      tokens always end it, unless --ignore-eos\n"
    "  --ignore-eos        keep generating past the tokenizer's end-of-text and end-of-turn tokens\n";

void gen_opts_default(gen_opts *o, double temperature, double top_p, long max_tokens) {
    memset(o, 0, sizeof *o);
    o->temperature = temperature;
    o->top_p = top_p;
    o->rep_penalty = 1;
    o->seed = 1;
    o->max_tokens = max_tokens;
}

int gen_opts_parse(gen_opts *o, const char *a, const char *v, wgt_status *st) {
    *st = WGT_OK;
    if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
    else if (!strcmp(a, "--max-tokens")) *st = cli_parse_long(a, v, 0, 100000000L, &o->max_tokens);
    else if (!strcmp(a, "--top-k")) *st = cli_parse_long(a, v, 0, TOKEN_MAX_VOCAB, &o->top_k);
    else if (!strcmp(a, "--seed")) *st = cli_parse_long(a, v, 0, (long)(LONG_MAX < 9007199254740991LL ? LONG_MAX : 9007199254740991LL), &o->seed);
    else if (!strcmp(a, "--temperature")) *st = cli_parse_double_range(a, v, 0, 1e6, 0, &o->temperature);
    else if (!strcmp(a, "--top-p")) {
        *st = cli_parse_double_range(a, v, 0, 1, 0, &o->top_p);
        if (*st == WGT_OK && !(o->top_p > 0)) *st = wgt_fail(WGT_ERR_ARG, "--top-p must be in (0, 1], got %s", v);
    } else if (!strcmp(a, "--min-p")) *st = cli_parse_double_range(a, v, 0, 1, 0, &o->min_p);
    else if (!strcmp(a, "--repetition-penalty")) {
        *st = cli_parse_double_range(a, v, 0, 1e6, 0, &o->rep_penalty);
        if (*st == WGT_OK && !(o->rep_penalty > 0))
            *st = wgt_fail(WGT_ERR_ARG, "--repetition-penalty must be above 0 (1 = off), got %s", v);
    } else if (!strcmp(a, "--stop")) {
        if (o->n_stops >= GEN_MAX_STOPS) *st = wgt_fail(WGT_ERR_ARG, "--stop: at most %d stop strings", GEN_MAX_STOPS);
        else if (!v[0]) *st = wgt_fail(WGT_ERR_ARG, "--stop needs a non-empty text");
        else o->stops[o->n_stops++] = v;
    } else if (!strcmp(a, "--stop-token")) {
        long id = 0;
        *st = cli_parse_long(a, v, 0, TOKEN_MAX_VOCAB - 1, &id);
        if (*st == WGT_OK && o->n_stop_ids >= GEN_MAX_STOPS)
            *st = wgt_fail(WGT_ERR_ARG, "--stop-token: at most %d stop tokens", GEN_MAX_STOPS);
        else if (*st == WGT_OK) o->stop_ids[o->n_stop_ids++] = (int32_t)id;
    } else return 0;
    return 1;
}

void gen_sampler_init(sampler *sp, const gen_opts *o, int vocab) {
    sampler_init(sp, vocab, o->temperature, (int)o->top_k, o->top_p, (uint64_t)o->seed);
    sampler_set_min_p(sp, o->min_p);
    sampler_set_repetition_penalty(sp, o->rep_penalty);
}

static void add_id(int32_t *ids, int *n, int64_t id) {
    if (id < 0 || id > INT32_MAX || *n >= 2 * GEN_MAX_STOPS) return;
    for (int i = 0; i < *n; i++)
        if (ids[i] == (int32_t)id) return;
    ids[(*n)++] = (int32_t)id;
}

wgt_status gen_stop_ids(const gen_opts *o, const text_tokenizer *tok, const char *model_dir, int32_t *ids, int *n) {
    *n = 0;
    for (int i = 0; i < o->n_stop_ids; i++) add_id(ids, n, o->stop_ids[i]);
    if (o->ignore_eos || !tok) return WGT_OK;
    add_id(ids, n, text_tokenizer_eot(tok));
    if (!strcmp(text_tokenizer_kind_name(tok), HF_KIND_NAME)) {
        const hf_tokenizer *hf = hf_kind_tokenizer(text_tokenizer_impl(tok));
        static const char *const turn_ends[] = {"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|eom_id|>"};
        for (size_t i = 0; i < sizeof turn_ends / sizeof turn_ends[0]; i++) {
            int64_t id = hf_tokenizer_token_id(hf, turn_ends[i]);
            if (id >= 0 && hf_tokenizer_is_special(hf, (uint32_t)id)) add_id(ids, n, id);
        }
    }
    // generation_config.json's eos_token_id: one id or a list (Llama 3's instruct models list
    // <|end_of_text|>, <|eom_id|> and <|eot_id|>)
    char path[4200];
    struct stat sb;
    if (!model_dir || (size_t)snprintf(path, sizeof path, "%s/generation_config.json", model_dir) >= sizeof path ||
        stat(path, &sb) != 0)
        return WGT_OK;
    char *text = NULL;
    size_t tn = 0;
    cJSON *gc = NULL;
    WGT_TRY(file_read_all(path, "generation config", "remove or fix the file", 1u << 20, &text, &tn));
    wgt_status st = json_parse_strict(&gc, text, tn, 0, path);
    free(text);
    WGT_TRY(st);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(gc, "eos_token_id"), *it;
    const int V = text_tokenizer_vocab_size(tok);
    if (cJSON_IsNumber(e)) {
        if (e->valuedouble >= 0 && e->valuedouble < V) add_id(ids, n, (int64_t)e->valuedouble);
    } else if (cJSON_IsArray(e)) {
        cJSON_ArrayForEach(it, e) if (cJSON_IsNumber(it) && it->valuedouble >= 0 && it->valuedouble < V)
            add_id(ids, n, (int64_t)it->valuedouble);
    }
    cJSON_Delete(gc);
    return WGT_OK;
}

static int dir_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

wgt_status gen_model_open(gen_model *g, const char *run, const char *hf_dir, const char *device, const char *adapter,
                          int need_tokenizer) {
    memset(g, 0, sizeof *g);
    if (!run == !hf_dir) return wgt_fail(WGT_ERR_ARG, "give one of --run RUN_DIR or --model HF_DIR (see --help)");
    const char *dir = run ? run : hf_dir;
    if (!dir_exists(dir)) return wgt_fail(WGT_ERR_IO, "%s %s: no such directory", run ? "--run" : "--model", dir);
    snprintf(g->model_dir, sizeof g->model_dir, "%s", dir);
    wgt_status st = WGT_OK;
    if (run) {
        checkpoint ck;
        WGT_TRY(run_checkpoint_read(&ck, run));
        // the run's copy of the tokenizer, else the data directory's: the one whose fingerprint the
        // run recorded (a replaced tokenizer.bin is refused)
        st = run_tokenizer_open(&g->tok, &ck, run);
        if (st != WGT_OK && !need_tokenizer) {  // (token ids need none: the caller decides, with the reason)
            snprintf(g->tok_error, sizeof g->tok_error, "%s", wgt_last_error());
            g->tok = NULL;
            st = WGT_OK;
        }
        if (st == WGT_OK && !g->tok && need_tokenizer)
            st = wgt_fail(WGT_ERR_IO, "no tokenizer: neither %s nor its data directory %s has one; generating text needs "
                          "the tokenizer the training data was made with", run, ck.cfg.data_dir);
        if (st == WGT_OK && g->tok && text_tokenizer_vocab_size(g->tok) != ck.cfg.model.vocab)
            st = wgt_fail(WGT_ERR_FORMAT, "the tokenizer %s has %d tokens but the model has %d: it is not this run's "
                          "tokenizer", text_tokenizer_source(g->tok), text_tokenizer_vocab_size(g->tok), ck.cfg.model.vocab);
        if (st == WGT_OK) st = cli_backend_open(&g->be, device, adapter, 0);
        // one token of activations (the decoder has its own, for the cache's length), and no
        // gradients or optimizer state: the parameters alone
        if (st == WGT_OK) st = run_model_open_inference(&g->m, g->be, &ck, 1, 1, run, MODEL_PREC_F32);
        // a LoRA run: the adapters merged into the base (base + s B A), which the decoder reads
        if (st == WGT_OK && model_lora_on(g->m)) st = model_lora_merge(g->m);
        checkpoint_free(&ck);
    } else {
        model_config c;
        char weights[4096];
        memset(&c, 0, sizeof c);
        st = hf_init_resolve(hf_dir, NULL, 0, &c, weights, sizeof weights);
        if (st == WGT_OK) st = model_check_safetensors(&c, weights);
        if (st == WGT_OK) st = text_tokenizer_open_dir(&g->tok, hf_dir);
        if (st == WGT_OK && !g->tok && need_tokenizer)
            st = wgt_fail(WGT_ERR_IO, "--model %s has no tokenizer.json", hf_dir);
        if (st == WGT_OK && g->tok && text_tokenizer_vocab_size(g->tok) > c.vocab)
            st = wgt_fail(WGT_ERR_FORMAT, "--model %s: its tokenizer has %d tokens but the model only %d", hf_dir,
                          text_tokenizer_vocab_size(g->tok), c.vocab);
        if (st == WGT_OK) st = cli_backend_open(&g->be, device, adapter, 0);
        model_opts mo = {MODEL_PREC_F32, NULL, MODEL_RECOMPUTE_NONE, 1};  // inference-only: the parameters alone
        if (st == WGT_OK) st = model_init_opts(&g->m, g->be, &c, 1, 1, &mo);
        if (st == WGT_OK) st = model_load_safetensors(g->m, weights);
    }
    if (st != WGT_OK) gen_model_close(g);
    return st;
}

void gen_model_close(gen_model *g) {
    model_free(g->m);
    if (g->be) g->be->free(g->be);
    text_tokenizer_free(g->tok);
    memset(g, 0, sizeof *g);
}

void gen_seq_push(gen_seq *s, int32_t id) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        int32_t *p = wgt_malloc(s->cap * sizeof *p);
        if (s->n) memcpy(p, s->ids, s->n * sizeof *p);
        free(s->ids);
        s->ids = p;
    }
    s->ids[s->n++] = id;
}
void gen_seq_free(gen_seq *s) {
    free(s->ids);
    memset(s, 0, sizeof *s);
}

// The first occurrence of any stop string in t[0..n) (n when none).
static size_t find_stop(const gen_opts *o, const char *t, size_t n) {
    size_t best = n;
    for (int k = 0; k < o->n_stops; k++) {
        size_t ls = strlen(o->stops[k]);
        for (size_t i = 0; i + ls <= n && i < best; i++)
            if (!memcmp(t + i, o->stops[k], ls)) {
                best = i;
                break;
            }
    }
    return best;
}
// The longest tail of t[0..n) that begins some stop string (held back: it may become one).
static size_t stop_prefix_tail(const gen_opts *o, const char *t, size_t n) {
    size_t hold = 0;
    for (int k = 0; k < o->n_stops; k++) {
        size_t ls = strlen(o->stops[k]);
        for (size_t m = ls - 1; m > hold; m--)
            if (m <= n && !memcmp(t + n - m, o->stops[k], m)) {
                hold = m;
                break;
            }
    }
    return hold;
}

wgt_status gen_run(model_decoder *d, sampler *sp, const text_tokenizer *tok, const gen_opts *o, const int32_t *stop_ids,
                   int n_stop_ids, float *logits, gen_seq *seq, FILE *out, int as_ids,
                   volatile sig_atomic_t *interrupt, char **reply, size_t *n_reply, const char **why) {
    const size_t first = seq->n;  // the reply's first id
    uint8_t *text = NULL;
    size_t n_text = 0, printed = 0, end = (size_t)-1;
    wgt_status st = WGT_OK;
    *why = "length";
    for (long k = 0; k < o->max_tokens; k++) {
        if (interrupt && *interrupt) {
            *why = "interrupt";
            break;
        }
        const int next = sampler_pick_seen(sp, logits, seq->ids, seq->n);
        int is_stop = 0;
        for (int i = 0; i < n_stop_ids; i++) is_stop |= stop_ids[i] == next;
        if (is_stop) {
            *why = "stop";
            break;
        }
        gen_seq_push(seq, next);
        if (as_ids || !tok) {
            fprintf(out, "%s%d", seq->n - 1 > first || o->ids_space ? " " : "", next);
            fflush(out);
        } else {
            // the whole reply decoded again: a tokenizer's decoder may join tokens (byte
            // fallback, a leading space), so a token's text is the difference of two decodes
            free(text);
            text = NULL;
            st = text_tokenizer_decode(tok, (const uint32_t *)(seq->ids + first), seq->n - first, &text, &n_text);
            if (st != WGT_OK) break;
            end = find_stop(o, (const char *)text, n_text);
            size_t upto = end < n_text ? end : n_text - stop_prefix_tail(o, (const char *)text, n_text);
            if (upto > printed) {
                fwrite(text + printed, 1, upto - printed, out);
                fflush(out);
                printed = upto;
            }
            if (end < n_text) {
                *why = "stop";
                break;
            }
        }
        if (k + 1 == o->max_tokens) break;
        const int32_t nx = next;
        const int cap = model_decoder_max_len(d);
        if (model_decoder_len(d, 0) >= cap && o->slide) {  // the last cap tokens, from position 0
            model_decoder_truncate(d, 0, 0);
            st = model_decoder_prefill(d, 0, seq->ids + seq->n - (size_t)cap, cap, logits);
            if (st != WGT_OK) break;
            continue;
        }
        if (model_decoder_len(d, 0) >= cap) {
            *why = "context";
            break;
        }
        st = model_decoder_step(d, 1, &nx, logits);
        if (st != WGT_OK) break;
    }
    if (st == WGT_OK && text && end >= n_text && printed < n_text) {  // what was held back, at the end
        fwrite(text + printed, 1, n_text - printed, out);
        fflush(out);
    }
    if (reply) {
        size_t n = text ? (end < n_text ? end : n_text) : 0;
        *reply = wgt_malloc(n + 1);
        if (n) memcpy(*reply, text, n);
        (*reply)[n] = 0;
        if (n_reply) *n_reply = n;
    }
    free(text);
    return st;
}
