// dataset.c — data directory reading and batch cutting for the trainer (see dataset.h).
// Shards are memory-mapped, so a corpus larger than RAM trains too.
#include "train/dataset.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "data/prepare.h"
#include "data/shard.h"
#include "data/text_tokenizer.h"
#include "train/rng.h"

typedef struct {
    char *path;
    shard *s;
    const uint16_t *t;
    size_t n;
} shard_ref;

typedef struct {
    shard_ref *v;
    size_t n, total;
} shard_set;

struct dataset {
    char *tok_path;
    text_tokenizer *tok;
    int vocab;
    double entropy;
    int have_entropy;
    shard_set train, val;
};

static char *path_join(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *s = wgt_malloc(len);
    snprintf(s, len, "%s/%s", dir, name);
    return s;
}

static void shard_set_free(shard_set *ss) {
    for (size_t i = 0; i < ss->n; i++) {
        shard_close(ss->v[i].s);
        free(ss->v[i].path);
    }
    free(ss->v);
    memset(ss, 0, sizeof *ss);
}

static wgt_status shard_set_add(shard_set *ss, const char *path) {
    shard *s;
    WGT_TRY(shard_open(&s, path));
    ss->v = realloc(ss->v, (ss->n + 1) * sizeof *ss->v);
    WGT_ASSERT(ss->v, "out of host memory");
    ss->v[ss->n++] = (shard_ref){wgt_strdup(path), s, shard_tokens(s), shard_count(s)};
    ss->total += shard_count(s);
    return WGT_OK;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0, k;
    char *s = wgt_malloc(cap);
    while ((k = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n <= 1) {
            cap *= 2;
            s = realloc(s, cap);
            WGT_ASSERT(s, "out of host memory");
        }
    }
    fclose(f);
    s[n] = 0;
    return s;
}

// Adds the shards named by a JSON array of file names relative to dir.
static wgt_status add_listed(shard_set *ss, const char *dir, const cJSON *arr, const char *meta_path, const char *key) {
    if (!cJSON_IsArray(arr))
        return wgt_fail(WGT_ERR_FORMAT, "%s lacks the list \"%s\"; re-run `wgtrain prepare`", meta_path, key);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        if (!cJSON_IsString(it)) return wgt_fail(WGT_ERR_FORMAT, "%s: \"%s\" must list file names", meta_path, key);
        char *p = path_join(dir, it->valuestring);
        wgt_status st = shard_set_add(ss, p);
        free(p);
        WGT_TRY(st);
    }
    return WGT_OK;
}

static wgt_status add_glob(shard_set *ss, const char *dir, const char *pattern) {
    char *pat = path_join(dir, pattern);
    glob_t g;
    int r = glob(pat, 0, NULL, &g);
    free(pat);
    if (r == GLOB_NOMATCH) return WGT_OK;
    if (r != 0) return wgt_fail(WGT_ERR_IO, "cannot list the shards in %s (glob error %d)", dir, r);
    wgt_status st = WGT_OK;
    for (size_t i = 0; i < g.gl_pathc && st == WGT_OK; i++) st = shard_set_add(ss, g.gl_pathv[i]);
    globfree(&g);
    return st;
}

static wgt_status open_meta(dataset *ds, const char *dir, const char *meta_path) {
    char *text = read_text(meta_path);
    if (!text) return wgt_fail(WGT_ERR_IO, "cannot read %s: %s", meta_path, strerror(errno));
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return wgt_fail(WGT_ERR_FORMAT, "%s is not valid JSON; re-run `wgtrain prepare`", meta_path);
    wgt_status st = WGT_OK;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(root, "vocab_size");
    const cJSON *ent = cJSON_GetObjectItemCaseSensitive(root, "unigram_entropy_nats");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "wgtrain-data"))
        st = wgt_fail(WGT_ERR_FORMAT, "%s is not a wgtrain data description (\"format\" is not \"wgtrain-data\"); "
                      "re-run `wgtrain prepare`", meta_path);
    if (st == WGT_OK) st = add_listed(&ds->train, dir, cJSON_GetObjectItemCaseSensitive(root, "train_shards"), meta_path, "train_shards");
    if (st == WGT_OK) st = add_listed(&ds->val, dir, cJSON_GetObjectItemCaseSensitive(root, "val_shards"), meta_path, "val_shards");
    if (st == WGT_OK && cJSON_IsString(tk)) {
        ds->tok_path = path_join(dir, tk->valuestring);
        if (!file_exists(ds->tok_path))
            st = wgt_fail(WGT_ERR_IO, "%s names the tokenizer %s, which is missing; re-run `wgtrain prepare`", meta_path,
                          ds->tok_path);
    }
    if (st == WGT_OK && cJSON_IsNumber(vs)) ds->vocab = (int)vs->valuedouble;
    if (st == WGT_OK && cJSON_IsNumber(ent)) {
        ds->entropy = ent->valuedouble;
        ds->have_entropy = 1;
    }
    cJSON_Delete(root);
    return st;
}

wgt_status dataset_open(dataset **out, const char *dir) {
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return wgt_fail(WGT_ERR_IO, "data directory %s not found; create it with `wgtrain prepare --input TEXT... --out %s`",
                        dir, dir);
    dataset *ds = wgt_calloc(1, sizeof *ds);
    char *meta = path_join(dir, PREPARE_META_FILE);
    wgt_status st;
    if (file_exists(meta)) {
        st = open_meta(ds, dir, meta);
    } else {
        // llm.c's data scripts: NAME_train*.bin / NAME_val*.bin, no tokenizer of ours
        st = add_glob(&ds->train, dir, "*train*.bin");
        if (st == WGT_OK) st = add_glob(&ds->val, dir, "*val*.bin");
        char *tp = path_join(dir, PREPARE_TOKENIZER_FILE);
        if (file_exists(tp)) ds->tok_path = tp;
        else free(tp);
        if (st == WGT_OK && !ds->train.n)
            st = wgt_fail(WGT_ERR_IO, "%s has no %s and no *train*.bin shards; prepare it with `wgtrain prepare --input "
                          "TEXT... --out %s`", dir, PREPARE_META_FILE, dir);
    }
    free(meta);
    // the tokenizer decides the vocabulary (meta.json only repeats it)
    if (st == WGT_OK) st = text_tokenizer_open_dir(&ds->tok, dir);
    if (st == WGT_OK && ds->tok) {
        int v = text_tokenizer_vocab_size(ds->tok);
        if (ds->vocab && ds->vocab != v)
            st = wgt_fail(WGT_ERR_FORMAT, "%s/%s says the vocabulary has %d tokens but %s has %d; re-run `wgtrain "
                          "prepare`", dir, PREPARE_META_FILE, ds->vocab, text_tokenizer_source(ds->tok), v);
        ds->vocab = v;
    }
    if (st == WGT_OK && !ds->train.n)
        st = wgt_fail(WGT_ERR_FORMAT, "%s lists no training shard; re-run `wgtrain prepare`", dir);
    if (st != WGT_OK) {
        dataset_free(ds);
        return st;
    }
    *out = ds;
    return WGT_OK;
}

void dataset_free(dataset *ds) {
    if (!ds) return;
    shard_set_free(&ds->train);
    shard_set_free(&ds->val);
    free(ds->tok_path);
    text_tokenizer_free(ds->tok);
    free(ds);
}

wgt_status dataset_use_val_shard(dataset *ds, const char *path) {
    shard_set ss = {0};
    wgt_status st = shard_set_add(&ss, path);
    if (st != WGT_OK) return st;
    shard_set_free(&ds->val);
    ds->val = ss;
    return WGT_OK;
}

int dataset_vocab(const dataset *ds) { return ds->vocab; }
const char *dataset_tokenizer_path(const dataset *ds) { return ds->tok_path; }
const text_tokenizer *dataset_tokenizer(const dataset *ds) { return ds->tok; }
size_t dataset_train_tokens(const dataset *ds) { return ds->train.total; }
size_t dataset_val_tokens(const dataset *ds) { return ds->val.total; }

double dataset_unigram_entropy(dataset *ds) {
    if (ds->have_entropy) return ds->entropy;
    if (ds->train.n == 1) {
        ds->entropy = shard_unigram_entropy(ds->train.v[0].t, ds->train.v[0].n);
    } else {  // several shards: one distribution over all of them
        uint64_t *count = wgt_calloc(65536, sizeof *count);
        for (size_t i = 0; i < ds->train.n; i++)
            for (size_t k = 0; k < ds->train.v[i].n; k++) count[ds->train.v[i].t[k]]++;
        double h = 0, inv = ds->train.total ? 1.0 / (double)ds->train.total : 0;
        for (int v = 0; v < 65536; v++)
            if (count[v]) h -= (double)count[v] * inv * log((double)count[v] * inv);
        free(count);
        ds->entropy = h;
    }
    ds->have_entropy = 1;
    return ds->entropy;
}

wgt_status dataset_check_vocab(const dataset *ds, int vocab) {
    const shard_set *sets[2] = {&ds->train, &ds->val};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sets[k]->n; i++)
            WGT_TRY(shard_check_vocab(sets[k]->v[i].t, sets[k]->v[i].n, vocab, sets[k]->v[i].path));
    return WGT_OK;
}

wgt_status dataset_check_seq(const dataset *ds, int T) {
    size_t longest = 0;
    const char *name = "";
    for (size_t i = 0; i < ds->train.n; i++)
        if (ds->train.v[i].n >= longest) {
            longest = ds->train.v[i].n;
            name = ds->train.v[i].path;
        }
    if (longest < (size_t)T + 1)
        return wgt_fail(WGT_ERR_CONFIG, "the training data is too short for --seq %d: its longest shard, %s, has %zu "
                        "tokens but one training window needs %d (seq + 1); use a smaller --seq or prepare more text",
                        T, name, longest, T + 1);
    if (ds->val.total < 2)
        return wgt_fail(WGT_ERR_CONFIG, "the validation data has %zu token(s); at least 2 are needed for one target; "
                        "prepare more text or a larger validation fraction", ds->val.total);
    return WGT_OK;
}

void dataset_train_batch(const dataset *ds, uint64_t *rng, int B, int T, int32_t *inputs, int32_t *targets) {
    uint64_t starts = 0;  // window starts over all shards: a shard of n tokens has n - T of them
    for (size_t i = 0; i < ds->train.n; i++)
        if (ds->train.v[i].n > (size_t)T) starts += ds->train.v[i].n - (size_t)T;
    WGT_ASSERT(starts > 0, "dataset_check_seq must pass before batches are drawn");
    for (int b = 0; b < B; b++) {
        uint64_t r = rng_next_below(rng, starts);
        size_t i = 0;
        for (;; i++) {
            size_t k = ds->train.v[i].n > (size_t)T ? ds->train.v[i].n - (size_t)T : 0;
            if (r < k) break;
            r -= k;
        }
        const uint16_t *w = ds->train.v[i].t + r;
        for (int t = 0; t < T; t++) {
            inputs[(size_t)b * T + t] = w[t];
            targets[(size_t)b * T + t] = w[t + 1];
        }
    }
}

static size_t shard_windows(size_t n, int T) { return n < 2 ? 0 : (n - 1 + (size_t)T - 1) / (size_t)T; }

size_t dataset_val_windows(const dataset *ds, int T) {
    size_t w = 0;
    for (size_t i = 0; i < ds->val.n; i++) w += shard_windows(ds->val.v[i].n, T);
    return w;
}

size_t dataset_val_batch(const dataset *ds, size_t b, int B, int T, int32_t *inputs, int32_t *targets) {
    size_t valid = 0;
    for (int r = 0; r < B; r++) {
        int32_t *in = inputs + (size_t)r * T, *tg = targets + (size_t)r * T;
        for (int t = 0; t < T; t++) {
            in[t] = 0;  // padding: any valid id; its target is ignored and causal attention hides it
            tg[t] = -1;
        }
        size_t w = b * (size_t)B + (size_t)r, i = 0;
        for (; i < ds->val.n; i++) {
            size_t k = shard_windows(ds->val.v[i].n, T);
            if (w < k) break;
            w -= k;
        }
        if (i == ds->val.n) continue;  // past the last window
        const uint16_t *tok = ds->val.v[i].t;
        size_t n = ds->val.v[i].n, s = w * (size_t)T;
        for (int t = 0; t < T && s + (size_t)t < n; t++) {
            in[t] = tok[s + t];
            if (s + (size_t)t + 1 < n) {
                tg[t] = tok[s + t + 1];
                valid++;
            }
        }
    }
    return valid;
}
