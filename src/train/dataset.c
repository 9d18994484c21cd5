// dataset.c — data directory reading and batch cutting for the trainer (see dataset.h).
// Shards are kept open and read window by window (pread), so a corpus larger than RAM trains
// too, and a shard changed underneath us is a clear error rather than SIGBUS from a mapping.
#include "train/dataset.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/fileutil.h"
#include "data/data_meta.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/text_tokenizer.h"
#include "core/token_id.h"
#include "train/rng.h"

typedef struct {
    char *path;
    shard *s;
    size_t n;
    uint32_t max_id;  // largest token id in the shard
    size_t *starts;   // flagged shards: the positions where examples begin (starts[0] = 0)
    size_t n_starts;
} shard_ref;

typedef struct {
    shard_ref *v;
    size_t n, total;
} shard_set;

struct dataset {
    text_tokenizer *tok;
    int vocab;
    int eot;       // meta.json's; -1 without meta.json
    int id_limit;  // batches refuse ids >= this: the model's vocabulary once dataset_check_vocab passed
    char tok_hash[17];  // "" without a tokenizer
    double entropy;
    int have_entropy;
    shard_set train, val;
    int packed;    // flagged shards: rows are packed examples (dataset_train_batch_part)
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
        free(ss->v[i].starts);
    }
    free(ss->v);
    memset(ss, 0, sizeof *ss);
}

// Opens and reads the shard once (CRC, largest id, and unigram counts when counts != NULL).
static wgt_status shard_set_add(shard_set *ss, const char *path, uint32_t *crc, uint64_t **counts, size_t *n_counts) {
    shard *s;
    WGT_TRY(shard_open(&s, path));
    uint32_t mx, c;
    wgt_status st = shard_scan(s, &c, &mx, counts, n_counts);
    if (st != WGT_OK) {
        shard_close(s);
        return st;
    }
    if (crc) *crc = c;
    shard_ref *nv = realloc(ss->v, (ss->n + 1) * sizeof *ss->v);
    WGT_ASSERT(nv, "out of host memory");
    ss->v = nv;
    ss->v[ss->n++] = (shard_ref){wgt_strdup(path), s, shard_count(s), mx, NULL, 0};
    if (shard_has_flags(s)) {
        // the example starts, from the flags; the first token must begin one
        shard_ref *r = &ss->v[ss->n - 1];
        enum { CHUNK = 1 << 18 };
        uint8_t *f = wgt_malloc(CHUNK);
        size_t cap = 0;
        wgt_status st = WGT_OK;
        for (size_t off = 0; off < r->n && st == WGT_OK; off += CHUNK) {
            size_t k = r->n - off < CHUNK ? r->n - off : CHUNK;
            st = shard_read_flags(s, off, k, f);
            for (size_t i = 0; i < k && st == WGT_OK; i++)
                if (f[i] & SHARD_FLAG_START) {
                    if (r->n_starts == cap) {
                        cap = cap ? 2 * cap : 1024;
                        r->starts = realloc(r->starts, cap * sizeof *r->starts);
                        WGT_ASSERT(r->starts, "out of host memory");
                    }
                    r->starts[r->n_starts++] = off + i;
                }
        }
        free(f);
        if (st == WGT_OK && r->n && (!r->n_starts || r->starts[0] != 0))
            st = wgt_fail(WGT_ERR_FORMAT, "%s: its first token does not begin an example (flags without a start): the "
                          "shard is corrupted; re-run `wgtrain prepare`", path);
        WGT_TRY(st);
    }
    ss->total += shard_count(s);
    return WGT_OK;
}

// Adds the shards meta.json lists, checking each against its token count and CRC-32.
static wgt_status add_listed(shard_set *ss, const char *dir, const data_meta_shard *list, size_t n,
                             const char *meta_path) {
    for (size_t i = 0; i < n; i++) {
        char *p = path_join(dir, list[i].file);
        uint32_t got_crc = 0;
        wgt_status st = shard_set_add(ss, p, &got_crc, NULL, NULL);
        if (st == WGT_OK && ss->v[ss->n - 1].n != (size_t)list[i].tokens)
            st = wgt_fail(WGT_ERR_FORMAT, "%s holds %zu tokens but %s records %lld: the directory is inconsistent (a "
                          "`prepare` interrupted or files copied from elsewhere?); re-run `wgtrain prepare`", p,
                          ss->v[ss->n - 1].n, meta_path, (long long)list[i].tokens);
        if (st == WGT_OK && got_crc != list[i].crc32)
            st = wgt_fail(WGT_ERR_FORMAT, "%s fails its checksum: CRC-32 %08x, but %s records %08x: the shard was "
                          "changed or damaged after `prepare` wrote it; re-run `wgtrain prepare`", p, got_crc, meta_path,
                          list[i].crc32);
        free(p);
        WGT_TRY(st);
    }
    return WGT_OK;
}

static wgt_status add_glob(shard_set *ss, const char *dir, const char *pattern, uint64_t **counts, size_t *n_counts) {
    char *pat = path_join(dir, pattern);
    glob_t g;
    int r = glob(pat, 0, NULL, &g);
    free(pat);
    if (r == GLOB_NOMATCH) return WGT_OK;
    if (r != 0) return wgt_fail(WGT_ERR_IO, "cannot list the shards in %s (glob error %d)", dir, r);
    wgt_status st = WGT_OK;
    for (size_t i = 0; i < g.gl_pathc && st == WGT_OK; i++) st = shard_set_add(ss, g.gl_pathv[i], NULL, counts, n_counts);
    globfree(&g);
    return st;
}

// A directory `wgtrain prepare` wrote: meta.json (read by data_meta_read), its shards and the
// tokenizer it names.
static wgt_status open_meta(dataset *ds, const char *dir, const char *meta_path, uint64_t *tok_fp) {
    data_meta m;
    WGT_TRY(data_meta_read(&m, meta_path));
    ds->vocab = m.vocab;
    ds->eot = m.eot;
    ds->entropy = m.entropy;
    ds->have_entropy = 1;
    *tok_fp = m.tok_fp;
    wgt_status st = add_listed(&ds->train, dir, m.train, m.n_train, meta_path);
    if (st == WGT_OK) st = add_listed(&ds->val, dir, m.val, m.n_val, meta_path);
    if (st == WGT_OK && (ds->train.total != (size_t)m.train_tokens || ds->val.total != (size_t)m.val_tokens))
        st = wgt_fail(WGT_ERR_FORMAT, "%s records %lld train and %lld val tokens but its shards hold %zu and %zu; re-run "
                      "`wgtrain prepare`", meta_path, (long long)m.train_tokens, (long long)m.val_tokens,
                      ds->train.total, ds->val.total);
    if (st == WGT_OK) st = text_tokenizer_open_meta(&ds->tok, dir, &m, meta_path);
    data_meta_free(&m);
    return st;
}

wgt_status dataset_open(dataset **out, const char *dir) {
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return wgt_fail(WGT_ERR_IO, "data directory %s not found; create it with `wgtrain prepare --input TEXT... --out %s`",
                        dir, dir);
    dataset *ds = wgt_calloc(1, sizeof *ds);
    ds->eot = -1;
    char *meta = path_join(dir, PREPARE_META_FILE);
    wgt_status st;
    uint64_t meta_fp = 0;
    int with_meta = lstat(meta, &sb) == 0;
    if (with_meta) {
        st = open_meta(ds, dir, meta, &meta_fp);
    } else if (text_tokenizer_dir_has(dir)) {
        // prepare removes meta.json first and writes it last: a tokenizer without it means a
        // prepare that did not finish, and the shards may belong to another tokenizer
        st = wgt_fail(WGT_ERR_FORMAT, "%s has a %s but no %s: a `wgtrain prepare` into it did not finish (it failed or was "
                      "interrupted), so its shards may not match the tokenizer; run `wgtrain prepare --out %s` again", dir,
                      "tokenizer", PREPARE_META_FILE, dir);
    } else {
        // llm.c's data scripts: NAME_train*.bin / NAME_val*.bin, no tokenizer of ours; the
        // counts grow to the largest id the shards hold
        uint64_t *counts = NULL;
        size_t n_counts = 0;
        st = add_glob(&ds->train, dir, "*train*.bin", &counts, &n_counts);
        if (st == WGT_OK) st = add_glob(&ds->val, dir, "*val*.bin", NULL, NULL);
        ds->entropy = shard_counts_entropy(counts, n_counts, ds->train.total);
        ds->have_entropy = 1;
        free(counts);
        if (st == WGT_OK && !ds->train.n)
            st = wgt_fail(WGT_ERR_IO, "%s has no %s and no *train*.bin shards; prepare it with `wgtrain prepare --input "
                          "TEXT... --out %s`", dir, PREPARE_META_FILE, dir);
    }
    // the tokenizer decides the vocabulary; meta.json must agree on its size, end-of-text and
    // fingerprint
    if (st == WGT_OK && ds->tok) {
        int v = text_tokenizer_vocab_size(ds->tok), e = text_tokenizer_eot(ds->tok);
        uint64_t fp = text_tokenizer_fingerprint(ds->tok);
        if (ds->vocab != v)
            st = wgt_fail(WGT_ERR_FORMAT, "%s says the vocabulary has %d tokens but %s has %d; re-run `wgtrain "
                          "prepare`", meta, ds->vocab, text_tokenizer_source(ds->tok), v);
        else if (ds->eot != e)
            st = wgt_fail(WGT_ERR_FORMAT, "%s says the end-of-text id is %d but %s's is %d; re-run `wgtrain prepare`",
                          meta, ds->eot, text_tokenizer_source(ds->tok), e);
        else if (fp != meta_fp)
            st = wgt_fail(WGT_ERR_FORMAT, "%s is not the tokenizer %s describes (fingerprint %016" PRIx64 ", recorded "
                          "%016" PRIx64 "): the directory is inconsistent; re-run `wgtrain prepare`",
                          text_tokenizer_source(ds->tok), meta, fp, meta_fp);
        snprintf(ds->tok_hash, sizeof ds->tok_hash, "%016" PRIx64, fp);
    }
    free(meta);
    if (st == WGT_OK && !ds->train.n)
        st = wgt_fail(WGT_ERR_FORMAT, "%s lists no training shard; re-run `wgtrain prepare`", dir);
    // flagged shards (instruction data) and plain ones are not mixed: rows are packed examples or
    // windows of a stream, one or the other
    if (st == WGT_OK) {
        size_t flagged = 0, all = ds->train.n + ds->val.n;
        for (size_t i = 0; i < ds->train.n; i++) flagged += ds->train.v[i].starts != NULL || (shard_has_flags(ds->train.v[i].s));
        for (size_t i = 0; i < ds->val.n; i++) flagged += shard_has_flags(ds->val.v[i].s) != 0;
        if (flagged && flagged != all)
            st = wgt_fail(WGT_ERR_FORMAT, "%s mixes shards with loss flags (instruction data) and plain ones; prepare them "
                          "into separate directories", dir);
        ds->packed = flagged != 0;
    }
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
    text_tokenizer_free(ds->tok);
    free(ds);
}

wgt_status dataset_use_val_shard(dataset *ds, const char *path) {
    shard_set ss = {0};
    wgt_status st = shard_set_add(&ss, path, NULL, NULL, NULL);
    if (st == WGT_OK && (ss.v[0].starts != NULL || shard_has_flags(ss.v[0].s)) != (ds->packed != 0))
        st = wgt_fail(WGT_ERR_FORMAT, "%s %s loss flags but the training data %s: score a shard prepared like the "
                      "training data", path, ds->packed ? "has no" : "has", ds->packed ? "has them" : "has none");
    if (st != WGT_OK) {
        shard_set_free(&ss);
        return st;
    }
    shard_set_free(&ds->val);
    ds->val = ss;
    return WGT_OK;
}

int dataset_vocab(const dataset *ds) { return ds->vocab; }
int dataset_packed(const dataset *ds) { return ds->packed; }
const text_tokenizer *dataset_tokenizer(const dataset *ds) { return ds->tok; }
const char *dataset_tokenizer_hash(const dataset *ds) { return ds->tok_hash; }
size_t dataset_train_tokens(const dataset *ds) { return ds->train.total; }
size_t dataset_val_tokens(const dataset *ds) { return ds->val.total; }
double dataset_unigram_entropy(dataset *ds) { return ds->entropy; }

wgt_status dataset_check_tokenizer(const dataset *ds, const char *run_hash, const char *data_dir, const char *what) {
    if (!run_hash || !run_hash[0]) return WGT_OK;
    if (!ds->tok_hash[0])
        return wgt_fail(WGT_ERR_CONFIG, "the data in %s has no tokenizer, but %s was trained with one (fingerprint %s): it "
                        "is not the data %s was trained on; pass the right --data", data_dir, what, run_hash, what);
    if (strcmp(ds->tok_hash, run_hash))
        return wgt_fail(WGT_ERR_CONFIG, "the data in %s was tokenized by another tokenizer (fingerprint %s) than %s's "
                        "(%s): its token ids mean other text; pass the data directory %s was trained on, or one prepared "
                        "with its tokenizer", data_dir, ds->tok_hash, what, run_hash, what);
    return WGT_OK;
}

// Names the first token >= vocab in a shard whose largest id says there is one.
static wgt_status find_bad_token(const shard_ref *r, int vocab) {
    enum { CHUNK = 1 << 16 };
    uint32_t *buf = wgt_malloc(CHUNK * sizeof *buf);
    wgt_status st = WGT_OK;
    for (size_t off = 0; off < r->n && st == WGT_OK; off += CHUNK) {
        size_t k = r->n - off < CHUNK ? r->n - off : CHUNK;
        st = shard_read(r->s, off, k, buf);
        if (st != WGT_OK) break;
        for (size_t i = 0; i < k; i++)
            if (buf[i] >= (uint32_t)vocab) {
                st = wgt_fail(WGT_ERR_FORMAT, "%s: token id %" PRIu32 " at position %zu (byte offset %llu) is >= the "
                              "vocabulary size %d: the data was tokenized with a different tokenizer; re-run `wgtrain "
                              "prepare` or use the matching data directory", r->path, buf[i], off + i,
                              (unsigned long long)(SHARD_HEADER_INTS * 4 + (uint64_t)(off + i) *
                                                   (uint64_t)shard_bytes_per_token(r->s)),
                              vocab);
                break;
            }
    }
    free(buf);
    return st;
}

wgt_status dataset_check_vocab(dataset *ds, int vocab) {
    const shard_set *sets[2] = {&ds->train, &ds->val};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sets[k]->n; i++)
            if (sets[k]->v[i].max_id >= (uint32_t)vocab) {
                WGT_TRY(find_bad_token(&sets[k]->v[i], vocab));
                return wgt_fail(WGT_ERR_FORMAT, "%s changed while open: its largest token id is %" PRIu32 ", beyond the vocabulary "
                                "%d", sets[k]->v[i].path, sets[k]->v[i].max_id, vocab);
            }
    ds->id_limit = vocab;
    return WGT_OK;
}

size_t dataset_examples_longer(const dataset *ds, int T, size_t *n_examples) {
    size_t longer = 0, n = 0;
    for (size_t i = 0; ds->packed && i < ds->train.n; i++) {
        const shard_ref *r = &ds->train.v[i];
        for (size_t e = 0; e < r->n_starts; e++) {
            size_t end = e + 1 < r->n_starts ? r->starts[e + 1] : r->n;
            longer += end - r->starts[e] > (size_t)T + 1;
        }
        n += r->n_starts;
    }
    if (n_examples) *n_examples = n;
    return longer;
}

wgt_status dataset_check_seq(const dataset *ds, int T) {
    if (ds->packed) {  // rows are packed examples: any T works once there is an example
        size_t n = 0;
        dataset_examples_longer(ds, T, &n);
        if (T < 1 || !n) return wgt_fail(WGT_ERR_CONFIG, "the training data holds no example; prepare more data");
        if (!ds->val.total) return wgt_fail(WGT_ERR_CONFIG, "the validation data holds no example; prepare more data");
        return WGT_OK;
    }
    size_t longest = 0;
    const char *name = "";
    for (size_t i = 0; i < ds->train.n; i++)
        if (ds->train.v[i].n >= longest) {
            longest = ds->train.v[i].n;
            name = ds->train.v[i].path;
        }
    if (T < 1 || longest < (size_t)T + 1)
        return wgt_fail(WGT_ERR_CONFIG, "the training data is too short for --seq %d: its longest shard, %s, has %zu "
                        "tokens but one training window needs %d (seq + 1); use a smaller --seq or prepare more text",
                        T, name, longest, T + 1);
    if (ds->val.total < 2)
        return wgt_fail(WGT_ERR_CONFIG, "the validation data has %zu token(s); at least 2 are needed for one target; "
                        "prepare more text or a larger validation fraction", ds->val.total);
    return WGT_OK;
}

// Tokens [off, off + n) of shard r, just read into w: a shard rewritten in place since it was
// opened could hold ids beyond the vocabulary, and no such id may reach a kernel.
static wgt_status window_check(const dataset *ds, const shard_ref *r, size_t off, const uint32_t *w, size_t n) {
    uint32_t lim = (uint32_t)(ds->id_limit ? ds->id_limit : ds->vocab ? ds->vocab : TOKEN_MAX_VOCAB);
    for (size_t i = 0; i < n; i++)
        if (w[i] >= lim)
            return wgt_fail(WGT_ERR_FORMAT, "%s: token id %" PRIu32 " at position %zu (byte offset %llu) is >= the "
                            "vocabulary size %" PRIu32 ": the shard changed after it was opened, or the data is not for "
                            "this model; re-run `wgtrain prepare`", r->path, w[i], off + i,
                            (unsigned long long)(SHARD_HEADER_INTS * 4 + (uint64_t)(off + i) *
                                                 (uint64_t)shard_bytes_per_token(r->s)), lim);
    return WGT_OK;
}

wgt_status dataset_train_batch(const dataset *ds, uint64_t *rng, int B, int T, int32_t *inputs, int32_t *targets) {
    return dataset_train_batch_part(ds, rng, B, 0, B, T, inputs, targets, NULL);
}

// One packed row from example e of shard r: whole examples e, e+1, ... while they fit in T
// positions (the first one always, cut to T + 1 tokens when longer), then padding. An example at
// offset o of length n: inputs [o, o+n) its tokens, targets the next token of the same example
// where that token is trained (SHARD_FLAG_TRAIN), else ignored (-1); doc_start [o, o+n) = o.
// Padding: token 0, ignored targets, its own example. *next: the first example not packed.
static wgt_status pack_row(const dataset *ds, const shard_ref *r, size_t e, int T, int32_t *in, int32_t *tg,
                           uint32_t *doc, size_t *valid, size_t *next) {
    const size_t s0 = r->starts[e], span = r->n - s0 < (size_t)T + 1 ? r->n - s0 : (size_t)T + 1;
    uint32_t *w = wgt_malloc(span * sizeof *w);
    uint8_t *f = wgt_malloc(span);
    wgt_status st = shard_read(r->s, s0, span, w);
    if (st == WGT_OK) st = window_check(ds, r, s0, w, span);
    if (st == WGT_OK) st = shard_read_flags(r->s, s0, span, f);
    size_t o = 0, k = e, nv = 0;
    while (st == WGT_OK && k < r->n_starts && o < (size_t)T) {
        size_t a = r->starts[k] - s0, end = k + 1 < r->n_starts ? r->starts[k + 1] - s0 : r->n - s0, n = end - a;
        if (o + n > (size_t)T) {
            if (o) break;   // does not fit: the next row's
            n = (size_t)T;  // the first one, too long: its first T inputs, targets through token T
        }
        for (size_t i = 0; i < n; i++) {
            in[o + i] = (int32_t)w[a + i];
            int has_next = a + i + 1 < end && a + i + 1 < span;
            tg[o + i] = has_next && (f[a + i + 1] & SHARD_FLAG_TRAIN) ? (int32_t)w[a + i + 1] : -1;
            nv += tg[o + i] >= 0;
            if (doc) doc[o + i] = (uint32_t)o;
        }
        o += n;
        k++;
    }
    for (size_t i = o; st == WGT_OK && i < (size_t)T; i++) {
        in[i] = 0;
        tg[i] = -1;
        if (doc) doc[i] = (uint32_t)o;
    }
    free(w);
    free(f);
    if (valid) *valid = nv;
    if (next) *next = k;
    return st;
}

wgt_status dataset_train_batch_part(const dataset *ds, uint64_t *rng, int total, int first, int B, int T,
                                    int32_t *inputs, int32_t *targets, uint32_t *doc_start) {
    WGT_ASSERT(first >= 0 && B >= 0 && first <= total && B <= total - first, "batch part outside the batch");
    if (ds->packed) {  // rows of packed examples, each row starting at a uniformly drawn example
        uint64_t n_ex = 0;
        for (size_t i = 0; i < ds->train.n; i++) n_ex += ds->train.v[i].n_starts;
        WGT_ASSERT(n_ex > 0, "dataset_check_seq must pass before batches are drawn");
        wgt_status st = WGT_OK;
        for (int g = 0; g < total && st == WGT_OK; g++) {
            uint64_t r = rng_next_below(rng, n_ex);
            if (g < first || g >= first + B) continue;  // another rank's row: the draw only
            size_t i = 0;
            while (r >= ds->train.v[i].n_starts) r -= ds->train.v[i].n_starts, i++;
            size_t b = (size_t)(g - first);
            st = pack_row(ds, &ds->train.v[i], (size_t)r, T, inputs + b * T, targets + b * T,
                          doc_start ? doc_start + b * T : NULL, NULL, NULL);
        }
        return st;
    }
    uint64_t starts = 0;  // window starts over all shards: a shard of n tokens has n - T of them
    for (size_t i = 0; i < ds->train.n; i++)
        if (ds->train.v[i].n > (size_t)T) starts += ds->train.v[i].n - (size_t)T;
    WGT_ASSERT(starts > 0, "dataset_check_seq must pass before batches are drawn");
    uint32_t *w = wgt_malloc(((size_t)T + 1) * sizeof *w);
    wgt_status st = WGT_OK;
    for (int g = 0; g < total && st == WGT_OK; g++) {
        uint64_t r = rng_next_below(rng, starts);
        if (g < first || g >= first + B) continue;  // another rank's window: the draw only
        int b = g - first;
        size_t i = 0;
        for (;; i++) {
            size_t k = ds->train.v[i].n > (size_t)T ? ds->train.v[i].n - (size_t)T : 0;
            if (r < k) break;
            r -= k;
        }
        st = shard_read(ds->train.v[i].s, (size_t)r, (size_t)T + 1, w);
        if (st == WGT_OK) st = window_check(ds, &ds->train.v[i], (size_t)r, w, (size_t)T + 1);
        for (int t = 0; t < T && st == WGT_OK; t++) {
            inputs[(size_t)b * T + t] = w[t];
            targets[(size_t)b * T + t] = w[t + 1];
        }
    }
    free(w);
    return st;
}

static size_t shard_windows(size_t n, int T) { return n < 2 ? 0 : (n - 1 + (size_t)T - 1) / (size_t)T; }

// Packed validation rows of shard r: the examples in order, each row as pack_row fills it from
// the first example the previous row left. Returns the number of rows; *first_out (when not
// NULL) gets the first example of row want_row.
static size_t val_rows(const shard_ref *r, int T, size_t want_row, size_t *first_out) {
    size_t rows = 0, e = 0;
    while (e < r->n_starts) {
        if (rows == want_row && first_out) *first_out = e;
        size_t o = 0, k = e;
        while (k < r->n_starts) {
            size_t end = k + 1 < r->n_starts ? r->starts[k + 1] : r->n, n = end - r->starts[k];
            if (o + n > (size_t)T && o) break;
            o += n;
            k++;
            if (o >= (size_t)T) break;
        }
        e = k;
        rows++;
    }
    return rows;
}

size_t dataset_val_windows(const dataset *ds, int T) {
    size_t w = 0;
    for (size_t i = 0; i < ds->val.n; i++)
        w += ds->packed ? val_rows(&ds->val.v[i], T, SIZE_MAX, NULL) : shard_windows(ds->val.v[i].n, T);
    return w;
}

wgt_status dataset_val_batch(const dataset *ds, size_t b, int B, int T, int32_t *inputs, int32_t *targets,
                             uint32_t *doc_start, size_t *valid_out) {
    size_t valid = 0;
    *valid_out = 0;
    if (ds->packed) {
        wgt_status st = WGT_OK;
        for (int r = 0; r < B && st == WGT_OK; r++) {
            int32_t *in = inputs + (size_t)r * T, *tg = targets + (size_t)r * T;
            uint32_t *dc = doc_start ? doc_start + (size_t)r * T : NULL;
            size_t w = b * (size_t)B + (size_t)r, i = 0, first = 0, k;
            for (; i < ds->val.n; i++) {
                k = val_rows(&ds->val.v[i], T, w, &first);
                if (w < k) break;
                w -= k;
            }
            if (i == ds->val.n) {  // past the last row: padding
                for (int t = 0; t < T; t++) in[t] = 0, tg[t] = -1;
                if (dc) memset(dc, 0, (size_t)T * sizeof *dc);
                continue;
            }
            size_t nv = 0;
            st = pack_row(ds, &ds->val.v[i], first, T, in, tg, dc, &nv, NULL);
            valid += nv;
        }
        if (st == WGT_OK) *valid_out = valid;
        return st;
    }
    if (doc_start)
        for (size_t i = 0; i < (size_t)B * T; i++) doc_start[i] = 0;
    uint32_t *tok = wgt_malloc(((size_t)T + 1) * sizeof *tok);
    wgt_status st = WGT_OK;
    for (int r = 0; r < B && st == WGT_OK; r++) {
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
        size_t n = ds->val.v[i].n, s = w * (size_t)T, m = n - s < (size_t)T + 1 ? n - s : (size_t)T + 1;
        st = shard_read(ds->val.v[i].s, s, m, tok);
        if (st == WGT_OK) st = window_check(ds, &ds->val.v[i], s, tok, m);
        if (st != WGT_OK) break;
        for (size_t t = 0; t < (size_t)T && t < m; t++) {
            in[t] = tok[t];
            if (t + 1 < m) {
                tg[t] = tok[t + 1];
                valid++;
            }
        }
    }
    free(tok);
    if (st == WGT_OK) *valid_out = valid;
    return st;
}
