// prepare_jsonl.c — `wgtrain prepare` of instruction and chat data: JSONL files whose records are
// {"text"}, {"prompt", "completion"} or {"messages"}, tokenized as the Hugging Face stack would
// tokenize them for supervised fine-tuning, into flagged shards (shard.h: one byte a token, the
// loss mask and the example starts) that the trainer packs into rows of isolated examples.
// The rules are in docs/instruction-data.md.
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "core/clock.h"
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "core/runlock.h"
#include "data/chat_encode.h"
#include "data/hf_tokenizer.h"
#include "data/hf_tokenizer_kind.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/text_tokenizer.h"

// 16 GiB (all of a 32-bit address space in the browser build): a file is read whole
#define JSONL_MAX_FILE_BYTES ((size_t)(SIZE_MAX < (1ull << 34) ? SIZE_MAX : (1ull << 34)))

// One tokenized example: its ids and, per id, whether it is trained (as a target).
typedef struct { uint32_t *ids; uint8_t *mask; size_t n; } example;

typedef struct {
    example *v;
    size_t n, cap;
    size_t rows, long_truncated, long_dropped, nothing_trained;
    size_t tokens, trained;
    size_t kinds[3];  // records of each form: text, prompt/completion, messages
} example_set;

static void set_add(example_set *s, example e) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        WGT_ASSERT(s->v, "out of host memory");
    }
    s->v[s->n++] = e;
}

// The string member `key` of a record, or NULL; a member that is there but not a string fails.
static wgt_status str_member(const cJSON *o, const char *key, const char **out, const char *where) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    if (!x) return WGT_OK;
    if (!cJSON_IsString(x))
        return wgt_fail(WGT_ERR_FORMAT, "%s: \"%s\" must be a string", where, key);
    *out = x->valuestring;
    return WGT_OK;
}

// ids of text with the post-processor's special tokens (add_special_tokens=True), less a trailing
// end-of-text it may add (the caller adds its own at the end).
static wgt_status encode_special(const hf_tokenizer *hf, const char *text, uint32_t eos, int strip_eos, uint32_t **ids,
                                 size_t *n) {
    WGT_TRY(hf_tokenizer_encode(hf, (const uint8_t *)text, strlen(text), 1, ids, n));
    if (strip_eos && *n && (*ids)[*n - 1] == eos) (*n)--;
    return WGT_OK;
}

// One record to an example (ids + mask). Appends eos after a text or a completion that does not
// end with it, as TRL's SFT preprocessing does.
static wgt_status record_encode(const cJSON *o, const hf_tokenizer *hf, chat_encoder **enc, const text_tokenizer *tt,
                                const char *spec, const char *chat_template, uint32_t eos, const char *where,
                                example *ex, int *kind) {
    memset(ex, 0, sizeof *ex);
    const char *text, *prompt, *completion;
    WGT_TRY(str_member(o, "text", &text, where));
    WGT_TRY(str_member(o, "prompt", &prompt, where));
    WGT_TRY(str_member(o, "completion", &completion, where));
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(o, "messages");
    int forms = (text != NULL) + (prompt != NULL || completion != NULL) + (messages != NULL);
    if (forms != 1)
        return wgt_fail(WGT_ERR_FORMAT, "%s: a record must have exactly one of \"text\", \"prompt\" + \"completion\" or "
                        "\"messages\"%s", where, forms ? " (it has several)" : "");
    if (text) {
        if (!*text) return wgt_fail(WGT_ERR_FORMAT, "%s: \"text\" is empty", where);
        *kind = 0;
        WGT_TRY(encode_special(hf, text, eos, 1, &ex->ids, &ex->n));
        ex->ids = realloc(ex->ids, (ex->n + 1) * sizeof *ex->ids);
        WGT_ASSERT(ex->ids, "out of host memory");
        if (!ex->n || ex->ids[ex->n - 1] != eos) ex->ids[ex->n++] = eos;
        ex->mask = wgt_malloc(ex->n);
        memset(ex->mask, 1, ex->n);
        return WGT_OK;
    }
    if (prompt || completion) {
        if (!prompt || !completion)
            return wgt_fail(WGT_ERR_FORMAT, "%s: a record with \"%s\" needs \"%s\" too", where,
                            prompt ? "prompt" : "completion", prompt ? "completion" : "prompt");
        if (!*completion) return wgt_fail(WGT_ERR_FORMAT, "%s: \"completion\" is empty", where);
        *kind = 1;
        // as TRL's SFT preprocessing: the ids of prompt + completion, the first len(ids of the
        // prompt) of them not trained (so the boundary is tokenized as the joined text is)
        size_t lp = strlen(prompt), lc = strlen(completion);
        char *joined = wgt_malloc(lp + lc + 1);
        memcpy(joined, prompt, lp);
        memcpy(joined + lp, completion, lc + 1);
        uint32_t *p = NULL;
        size_t np = 0;
        wgt_status st = encode_special(hf, prompt, eos, 1, &p, &np);
        if (st == WGT_OK) st = encode_special(hf, joined, eos, 1, &ex->ids, &ex->n);
        free(joined);
        free(p);
        if (st != WGT_OK) return st;
        if (np > ex->n) np = ex->n;
        ex->ids = realloc(ex->ids, (ex->n + 1) * sizeof *ex->ids);
        WGT_ASSERT(ex->ids, "out of host memory");
        ex->mask = wgt_malloc(ex->n + 1);
        memset(ex->mask, 0, np);
        memset(ex->mask + np, 1, ex->n - np);
        if (!ex->n || ex->ids[ex->n - 1] != eos) ex->ids[ex->n] = eos, ex->mask[ex->n] = 1, ex->n++;
        return WGT_OK;
    }
    if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0)
        return wgt_fail(WGT_ERR_FORMAT, "%s: \"messages\" must be a non-empty array of {\"role\", \"content\"}", where);
    const cJSON *m;
    cJSON_ArrayForEach(m, messages) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(r) || !r->valuestring[0])
            return wgt_fail(WGT_ERR_FORMAT, "%s: each message must be an object with a non-empty string \"role\"", where);
    }
    *kind = 2;
    if (!*enc) {
        wgt_status st = chat_encoder_init(enc, tt, spec, chat_template);
        if (st != WGT_OK) {
            char *why = wgt_strdup(wgt_last_error());
            st = wgt_fail(st, "%s: a \"messages\" record needs the chat template: %s", where, why);
            free(why);
            return st;
        }
    }
    wgt_status st = chat_encoder_encode(*enc, messages, 0, &ex->ids, &ex->n, &ex->mask);
    if (st != WGT_OK) {
        char *why = wgt_strdup(wgt_last_error());
        st = wgt_fail(st, "%s: %s", where, why);
        free(why);
    }
    return st;
}

// Every record of one JSONL file into s. A blank line or a record that is not a valid one fails
// naming the file and line.
static wgt_status read_jsonl(const char *path, const hf_tokenizer *hf, chat_encoder **enc, const text_tokenizer *tt,
                             const char *spec, const prepare_jsonl_opts *o, uint32_t eos, example_set *s) {
    char *data = NULL;
    size_t n = 0;
    WGT_TRY(file_read_all(path, "JSONL file", "pass JSON Lines files (one JSON object a line)", JSONL_MAX_FILE_BYTES,
                          &data, &n));
    wgt_status st = WGT_OK;
    size_t line = 0, pos = 0;
    while (pos < n && st == WGT_OK) {
        size_t end = pos;
        while (end < n && data[end] != '\n') end++;
        line++;
        size_t len = end - pos;
        if (len && data[pos + len - 1] == '\r') len--;  // CRLF files
        char where[512];
        snprintf(where, sizeof where, "%s line %zu", path, line);
        size_t k = 0;
        while (k < len && (data[pos + k] == ' ' || data[pos + k] == '\t')) k++;
        if (k == len) {
            st = wgt_fail(WGT_ERR_FORMAT, "%s is empty: each line of a JSONL file must hold one record; remove the blank "
                          "line", where);
            break;
        }
        cJSON *obj = NULL;
        st = json_parse_strict(&obj, data + pos, len, 0, where);
        if (st == WGT_OK && !cJSON_IsObject(obj))
            st = wgt_fail(WGT_ERR_FORMAT, "%s: a record must be a JSON object ({\"text\": ...}, {\"prompt\": ..., "
                          "\"completion\": ...} or {\"messages\": [...]})", where);
        example ex = {0};
        int kind = 0;
        if (st == WGT_OK) st = record_encode(obj, hf, enc, tt, spec, o->chat_template, eos, where, &ex, &kind);
        cJSON_Delete(obj);
        if (st != WGT_OK) break;
        s->rows++;
        s->kinds[kind]++;
        if (ex.n) ex.mask[0] = 0;  // an example's first token has nothing before it to predict it from
        if (o->max_tokens > 0 && ex.n > (size_t)o->max_tokens) {
            if (o->drop_long) {
                s->long_dropped++;
                free(ex.ids), free(ex.mask);
                pos = end + 1;
                continue;
            }
            s->long_truncated++;
            ex.n = (size_t)o->max_tokens;
        }
        size_t trained = 0;
        for (size_t i = 0; i < ex.n; i++) trained += ex.mask[i];
        if (!trained) {  // e.g. a conversation without an assistant turn, or one cut before it
            s->nothing_trained++;
            free(ex.ids), free(ex.mask);
        } else {
            s->tokens += ex.n;
            s->trained += trained;
            set_add(s, ex);
        }
        pos = end + 1;
    }
    free(data);
    return st;
}

// Examples [a, b) of s as one token array and its flags.
static void flatten(const example_set *s, size_t a, size_t b, uint32_t **toks, uint8_t **flags, size_t *n) {
    size_t total = 0;
    for (size_t i = a; i < b; i++) total += s->v[i].n;
    *toks = wgt_malloc((total ? total : 1) * sizeof **toks);
    *flags = wgt_malloc(total ? total : 1);
    size_t k = 0;
    for (size_t i = a; i < b; i++) {
        memcpy(*toks + k, s->v[i].ids, s->v[i].n * sizeof **toks);
        for (size_t j = 0; j < s->v[i].n; j++)
            (*flags)[k + j] = (uint8_t)((s->v[i].mask[j] ? SHARD_FLAG_TRAIN : 0) | (j == 0 ? SHARD_FLAG_START : 0));
        k += s->v[i].n;
    }
    *n = total;
}

// A JSON string literal of s (malloc'd).
static char *json_quote(const char *s) {
    cJSON *x = cJSON_CreateString(s);
    WGT_ASSERT(x, "out of host memory");
    char *q = cJSON_PrintUnformatted(x);
    cJSON_Delete(x);
    WGT_ASSERT(q, "out of host memory");
    return q;
}

// Writes the one shard of a split and its meta.json list entry into list.
static wgt_status write_split(const char *dir, const char *name, const uint32_t *toks, const uint8_t *flags, size_t n,
                              int vocab, FILE *list) {
    if (n > SHARD_MAX_TOKENS)
        return wgt_fail(WGT_ERR_ARG, "%zu %s tokens exceed one shard's limit of %u; prepare the data in parts", n, name,
                        SHARD_MAX_TOKENS);
    char file[64];
    snprintf(file, sizeof file, "%s_000000.bin", name);
    size_t l = strlen(dir) + strlen(file) + 2;
    char *path = wgt_malloc(l);
    snprintf(path, l, "%s/%s", dir, file);
    wgt_status st = shard_write_flags(path, toks, flags, n, vocab);
    free(path);
    if (st == WGT_OK)
        fprintf(list, "[{\"file\": \"%s\", \"tokens\": %zu, \"crc32\": \"%08x\"}]", file, n,
                shard_file_crc_flags(toks, flags, n, vocab));
    return st;
}

wgt_status prepare_jsonl(const char **inputs, int n_inputs, const char *out_dir, const char *spec,
                         const prepare_jsonl_opts *o, double val_fraction, int verbose) {
    if (!spec || !*spec)
        return wgt_fail(WGT_ERR_ARG, "JSONL data needs the model's tokenizer: pass --tokenizer with a Hugging Face model "
                        "directory (tokenizer.json and tokenizer_config.json)");
    if (!(val_fraction > 0.0 && val_fraction < 1.0))
        return wgt_fail(WGT_ERR_ARG, "validation fraction %g is out of range: it must be above 0 and below 1; 0.1 is usual",
                        val_fraction);
    if (o->max_tokens < 0 || o->max_tokens == 1)
        return wgt_fail(WGT_ERR_ARG, "--max-tokens %d is out of range: 0 (no limit) or at least 2", o->max_tokens);
    if (n_inputs <= 0 || !out_dir || !*out_dir)
        return wgt_fail(WGT_ERR_ARG, "pass --input with JSONL files and --out DATA_DIR");
    const double t0 = wgt_now_s();
    text_tokenizer *tt = NULL;
    chat_encoder *enc = NULL;
    example_set s = {0};
    run_lock lock = {0};
    uint32_t *tr = NULL, *va = NULL;
    uint8_t *trf = NULL, *vaf = NULL;
    char *meta = NULL, *path = NULL;
    size_t meta_n = 0;
    FILE *mf = NULL;
    wgt_status st = text_tokenizer_open(&tt, spec);
    if (st == WGT_OK && strcmp(text_tokenizer_kind_name(tt), HF_KIND_NAME))
        st = wgt_fail(WGT_ERR_ARG, "JSONL data is tokenized as Hugging Face's stack does it, which needs a Hugging Face "
                      "tokenizer (tokenizer.json and tokenizer_config.json); %s is a %s tokenizer", spec,
                      text_tokenizer_kind_name(tt));
    if (st != WGT_OK) goto done;
    const int vocab = text_tokenizer_vocab_size(tt);
    const int eos = text_tokenizer_eot(tt);
    if (eos < 0 || eos >= vocab) {
        st = wgt_fail(WGT_ERR_FORMAT, "the tokenizer %s names no end-of-sequence token (eos_token in "
                      "tokenizer_config.json), which ends texts and completions; give it one", text_tokenizer_source(tt));
        goto done;
    }
    const hf_tokenizer *hf = hf_kind_tokenizer(text_tokenizer_impl(tt));
    for (int i = 0; i < n_inputs && st == WGT_OK; i++)
        st = read_jsonl(inputs[i], hf, &enc, tt, spec, o, (uint32_t)eos, &s);
    if (st != WGT_OK) goto done;
    if (s.n < 2) {
        st = wgt_fail(WGT_ERR_ARG, "the JSONL data has %zu example(s) with something to train (%zu record(s), %zu with no "
                      "trained token, %zu dropped as too long); at least 2 are needed (train and validation)", s.n, s.rows,
                      s.nothing_trained, s.long_dropped);
        goto done;
    }
    size_t nv = (size_t)llround(val_fraction * (double)s.n);
    if (nv < 1) nv = 1;
    if (nv > s.n - 1) nv = s.n - 1;
    size_t n_tr, n_va;
    flatten(&s, 0, s.n - nv, &tr, &trf, &n_tr);
    flatten(&s, s.n - nv, s.n, &va, &vaf, &n_va);

    // the directory: lock, stale meta.json away, shards and tokenizer, meta.json last
    st = dir_make(out_dir);
    if (st == WGT_OK) st = run_lock_acquire(&lock, out_dir, "prepare");
    if (st != WGT_OK) goto done;
    size_t pl = strlen(out_dir) + strlen(PREPARE_META_FILE) + 2;
    path = wgt_malloc(pl);
    snprintf(path, pl, "%s/%s", out_dir, PREPARE_META_FILE);
    st = file_check_replaceable(path);
    if (st == WGT_OK && unlink(path) != 0 && errno != ENOENT)
        st = wgt_fail(WGT_ERR_IO, "cannot remove the old %s: %s", path, strerror(errno));
    if (st == WGT_OK) st = text_tokenizer_save_dir(tt, out_dir);
    if (st != WGT_OK) goto done;
    mf = open_memstream(&meta, &meta_n);
    WGT_ASSERT(mf, "out of host memory");
    double entropy = shard_unigram_entropy(tr, n_tr, vocab);
    char *tok_json = text_tokenizer_meta_json(tt);
    fprintf(mf, "{\n  \"format\": \"wgtrain-data\",\n  \"version\": %d,\n  %s", PREPARE_META_VERSION, tok_json);
    free(tok_json);
    fprintf(mf, ",\n  \"tokenizer_fnv1a64\": \"%016" PRIx64 "\"", text_tokenizer_fingerprint(tt));
    fprintf(mf, ",\n  \"vocab_size\": %d,\n  \"requested_vocab_size\": %d,\n  \"eot_token\": %d,\n", vocab, vocab, eos);
    fprintf(mf, "  \"train_shards\": ");
    st = write_split(out_dir, "train", tr, trf, n_tr, vocab, mf);
    fprintf(mf, ",\n  \"val_shards\": ");
    if (st == WGT_OK) st = write_split(out_dir, "val", va, vaf, n_va, vocab, mf);
    if (st != WGT_OK) goto done;
    fprintf(mf, ",\n  \"train_tokens\": %zu,\n  \"val_tokens\": %zu,\n", n_tr, n_va);
    fprintf(mf, "  \"loss_flags\": true,\n  \"examples\": %zu,\n  \"train_examples\": %zu,\n  \"val_examples\": %zu,\n",
            s.n, s.n - nv, nv);
    fprintf(mf, "  \"records\": %zu,\n  \"records_text\": %zu,\n  \"records_prompt_completion\": %zu,\n"
            "  \"records_messages\": %zu,\n  \"skipped_nothing_trained\": %zu,\n  \"long_truncated\": %zu,\n"
            "  \"long_dropped\": %zu,\n  \"max_tokens\": %d,\n", s.rows, s.kinds[0], s.kinds[1], s.kinds[2],
            s.nothing_trained, s.long_truncated, s.long_dropped, o->max_tokens);
    fprintf(mf, "  \"trained_tokens\": %zu,\n  \"val_fraction\": %.17g,\n  \"unigram_entropy_nats\": %.6f,\n"
            "  \"sources\": [", s.trained, val_fraction, entropy);
    for (int i = 0; i < n_inputs; i++) {
        char *q = json_quote(inputs[i]);
        fprintf(mf, "%s\n    {\"path\": %s, \"format\": \"jsonl\"}", i ? "," : "", q);
        free(q);
    }
    fprintf(mf, "\n  ]\n}\n");
    fclose(mf);
    mf = NULL;
    st = atomic_write_file(path, meta, meta_n);
    if (st == WGT_OK && verbose) {
        printf("prepare: %zu record(s) from %d JSONL file(s): %zu text, %zu prompt/completion, %zu messages\n", s.rows,
               n_inputs, s.kinds[0], s.kinds[1], s.kinds[2]);
        printf("prepare: %zu example(s) kept (%zu train, %zu val), %zu tokens of which %zu trained (%.1f%%)\n", s.n,
               s.n - nv, nv, s.tokens, s.trained, 100.0 * (double)s.trained / (double)(s.tokens ? s.tokens : 1));
        printf("prepare: skipped %zu with nothing to train; longer than --max-tokens %d: %zu truncated, %zu dropped\n",
               s.nothing_trained, o->max_tokens, s.long_truncated, s.long_dropped);
        printf("prepare: wrote %s with the %s tokenizer (%d tokens, end-of-sequence %d) in %.1f s\n", out_dir,
               text_tokenizer_kind_name(tt), vocab, eos, wgt_now_s() - t0);
    }

done:
    if (mf) fclose(mf);
    free(meta);
    free(path);
    free(tr), free(trf), free(va), free(vaf);
    for (size_t i = 0; i < s.n; i++) free(s.v[i].ids), free(s.v[i].mask);
    free(s.v);
    chat_encoder_free(enc);
    text_tokenizer_free(tt);
    run_lock_release(&lock);
    return st;
}
