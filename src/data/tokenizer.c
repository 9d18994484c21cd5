// tokenizer.c — byte-level BPE (see tokenizer.h and docs/tokenizer-format.md).
//
// Text is first cut into chunks (a word with an optional leading space, a run of digits or of
// punctuation, a run of whitespace); merges never cross a chunk boundary. Training counts each
// distinct chunk once with its frequency as a weight, then merges the most frequent adjacent
// pair again and again. Pair counts are updated incrementally: each pair keeps the list of
// chunks it occurs in, so a merge touches only those chunks, and a lazy max-heap finds the next
// best pair. That is what makes a 16K vocabulary on megabytes of text take seconds, not hours.
#include "data/tokenizer.h"
#include "core/fileutil.h"
#include "data/text_tokenizer.h"
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <zlib.h>

// Longest chunk (bytes): bounds the work of encoding one chunk and the length of any token.
// Part of pre-tokenizer version 1: changing it changes the tokenization.
#define MAX_CHUNK 256
#define PRETOKENIZER_VERSION 1
#define FILE_VERSION 1
#define FILE_HEADER 32
static const char FILE_MAGIC[8] = {'W', 'G', 'T', '-', 'B', 'P', 'E', '\n'};
#define NO_ID 0xFFFFu
#define EMPTY_KEY 0xFFFFFFFFu  // no pair of ids below 65535 packs to this

struct tokenizer {
    int vocab;             // 256 + n_merges + 1
    int n_merges;
    uint16_t *merges;      // 2 per merge: left, right; merge i makes token 256 + i
    uint32_t *tok_off;     // token id -> offset of its bytes in pool
    uint16_t *tok_len;
    uint8_t *pool;
    uint32_t *map_keys;    // (left << 16 | right) -> merged id, open addressing
    uint16_t *map_vals;
    uint32_t map_mask;
};

// ------------------------------------------------------------------ hashing

static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001B3ull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    for (size_t k = 0; i + k < n; k++) w |= (uint64_t)p[i + k] << (8 * k);
    return mix64(h ^ w);
}

static inline uint32_t pair_key(uint32_t a, uint32_t b) { return a << 16 | b; }
static inline uint64_t hash_key(uint32_t k) { return mix64(k + 0x9E3779B97F4A7C15ull); }

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

// ------------------------------------------------------------------ pre-tokenizer (version 1)

enum { C_LETTER, C_DIGIT, C_SPACE, C_OTHER };

// Bytes >= 0x80 count as letters so that a UTF-8 word (or any invalid high byte) stays in one
// chunk with the ASCII letters around it.
static inline int byte_class(uint8_t c) {
    if ((uint8_t)((c | 32) - 'a') < 26 || c >= 0x80) return C_LETTER;
    if ((uint8_t)(c - '0') < 10) return C_DIGIT;
    if (c == ' ' || (c >= 9 && c <= 13)) return C_SPACE;
    return C_OTHER;
}

// End of the chunk that starts at i (i < n). Rules, in order:
//   an English contraction 's 't 'm 'd 're 've 'll;
//   an optional single space + a run of letters, or of digits, or of other bytes;
//   a run of whitespace, leaving its last byte for the next chunk when that byte is a space
//   followed by a non-space (so " word" stays one chunk, as GPT-2 does).
// No chunk is longer than MAX_CHUNK bytes.
static size_t chunk_end(const uint8_t *t, size_t n, size_t i) {
    size_t lim = n - i > MAX_CHUNK ? i + MAX_CHUNK : n;
    uint8_t c = t[i];
    if (c == '\'' && i + 1 < lim) {
        uint8_t d = t[i + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (i + 2 < lim) {
            uint8_t e = t[i + 2];
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return i + 3;
        }
    }
    size_t j = i;
    int k = byte_class(c);
    if (c == ' ' && i + 1 < lim && byte_class(t[i + 1]) != C_SPACE) {
        j = i + 1;
        k = byte_class(t[j]);
    }
    if (k != C_SPACE) {
        j++;
        while (j < lim && byte_class(t[j]) == k) j++;
        return j;
    }
    while (j < lim && byte_class(t[j]) == C_SPACE) j++;
    if (j < n && j - i >= 2 && t[j - 1] == ' ' && byte_class(t[j]) != C_SPACE) return j - 1;
    return j;
}

// ------------------------------------------------------------------ building a tokenizer

static uint16_t merge_lookup(const tokenizer *tok, uint32_t a, uint32_t b) {
    uint32_t key = pair_key(a, b);
    for (uint32_t s = (uint32_t)hash_key(key) & tok->map_mask;; s = (s + 1) & tok->map_mask) {
        if (tok->map_keys[s] == key) return tok->map_vals[s];
        if (tok->map_keys[s] == EMPTY_KEY) return NO_ID;
    }
}

// Builds the token table and merge map from a merge list (which it takes over). `src` names
// the origin for messages: a tokenizer file, or NULL when the merges come from training.
static wgt_status tok_build(tokenizer **out, uint16_t *merges, int n_merges, const char *src) {
    *out = NULL;
    tokenizer *tok = wgt_calloc(1, sizeof *tok);
    tok->n_merges = n_merges;
    tok->vocab = 256 + n_merges + 1;
    tok->merges = merges;
    tok->tok_off = wgt_malloc((size_t)tok->vocab * sizeof *tok->tok_off);
    tok->tok_len = wgt_malloc((size_t)tok->vocab * sizeof *tok->tok_len);
    size_t map_cap = pow2_at_least((size_t)n_merges * 2 + 1);
    tok->map_mask = (uint32_t)(map_cap - 1);
    tok->map_keys = wgt_malloc(map_cap * sizeof *tok->map_keys);
    tok->map_vals = wgt_malloc(map_cap * sizeof *tok->map_vals);
    memset(tok->map_keys, 0xFF, map_cap * sizeof *tok->map_keys);
    const char *who = src ? src : "trained tokenizer";

    size_t pool_len = 256 + sizeof TOKENIZER_EOT_TEXT;
    for (int i = 0; i < 256; i++) tok->tok_len[i] = 1;
    for (int i = 0; i < n_merges; i++) {
        uint32_t a = merges[2 * i], b = merges[2 * i + 1], id = 256 + (uint32_t)i;
        if (a >= id || b >= id) {
            tokenizer_free(tok);
            return wgt_fail(WGT_ERR_FORMAT, "%s: merge %d (%u, %u) uses a token not yet defined (ids must be < %u); "
                            "the file is corrupted: re-create it with `wgtrain prepare`", who, i, a, b, id);
        }
        size_t len = (size_t)tok->tok_len[a] + tok->tok_len[b];
        if (len > MAX_CHUNK) {
            tokenizer_free(tok);
            return wgt_fail(WGT_ERR_FORMAT, "%s: merge %d makes a token of %zu bytes, more than the %d a chunk can "
                            "have; the file is corrupted: re-create it with `wgtrain prepare`", who, i, len, MAX_CHUNK);
        }
        tok->tok_len[id] = (uint16_t)len;
        pool_len += len;
        uint32_t key = pair_key(a, b), s = (uint32_t)hash_key(key) & tok->map_mask;
        while (tok->map_keys[s] != EMPTY_KEY && tok->map_keys[s] != key) s = (s + 1) & tok->map_mask;
        if (tok->map_keys[s] == key) {
            unsigned first = tok->map_vals[s] - 256u;  // read before the tokenizer is freed
            tokenizer_free(tok);
            return wgt_fail(WGT_ERR_FORMAT, "%s: merge %d repeats the pair (%u, %u) of merge %u; the file is "
                            "corrupted: re-create it with `wgtrain prepare`", who, i, a, b, first);
        }
        tok->map_keys[s] = key;
        tok->map_vals[s] = (uint16_t)id;
    }
    tok->pool = wgt_malloc(pool_len);
    size_t off = 0;
    for (int i = 0; i < 256; i++) {
        tok->tok_off[i] = (uint32_t)off;
        tok->pool[off++] = (uint8_t)i;
    }
    for (int i = 0; i < n_merges; i++) {
        int a = merges[2 * i], b = merges[2 * i + 1], id = 256 + i;
        tok->tok_off[id] = (uint32_t)off;
        memcpy(tok->pool + off, tok->pool + tok->tok_off[a], tok->tok_len[a]);
        memcpy(tok->pool + off + tok->tok_len[a], tok->pool + tok->tok_off[b], tok->tok_len[b]);
        off += tok->tok_len[id];
    }
    int eot = tok->vocab - 1;
    tok->tok_off[eot] = (uint32_t)off;
    tok->tok_len[eot] = (uint16_t)strlen(TOKENIZER_EOT_TEXT);
    memcpy(tok->pool + off, TOKENIZER_EOT_TEXT, tok->tok_len[eot]);
    *out = tok;
    return WGT_OK;
}

void tokenizer_free(tokenizer *tok) {
    if (!tok) return;
    free(tok->merges);
    free(tok->tok_off);
    free(tok->tok_len);
    free(tok->pool);
    free(tok->map_keys);
    free(tok->map_vals);
    free(tok);
}

int tokenizer_vocab_size(const tokenizer *tok) { return tok->vocab; }
int tokenizer_eot(const tokenizer *tok) { return tok->vocab - 1; }

const uint8_t *tokenizer_token_bytes(const tokenizer *tok, int id, size_t *len) {
    if (id < 0 || id >= tok->vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = tok->tok_len[id];
    return tok->pool + tok->tok_off[id];
}

// ------------------------------------------------------------------ training

typedef struct {
    int64_t count;
    int32_t *where;    // words the pair occurs in (or once did: entries may be stale)
    int32_t n_where, cap_where;
    uint32_t key;
    uint32_t touched;  // merge number that last raised this pair's count
} pair_stat;

typedef struct {
    int64_t count;
    uint32_t key;
    int32_t idx;
} heap_item;

typedef struct {
    // distinct chunks ("words") as symbol sequences
    int32_t *sym;
    size_t *wstart;
    int32_t *wlen;
    int64_t *wcount;
    int32_t n_words;
    // pair statistics, indexed through an open-addressing map
    pair_stat *pairs;
    int32_t n_pairs, cap_pairs;
    uint32_t *pmap_keys;
    int32_t *pmap_idx;
    size_t pmap_cap;
    // lazy max-heap of (count, key)
    heap_item *heap;
    size_t n_heap, cap_heap;
    int32_t *touched;
    size_t n_touched, cap_touched;
} bpe_trainer;

static void pmap_grow(bpe_trainer *t) {
    size_t cap = t->pmap_cap * 2;
    uint32_t *keys = wgt_malloc(cap * sizeof *keys);
    int32_t *idx = wgt_malloc(cap * sizeof *idx);
    memset(keys, 0xFF, cap * sizeof *keys);
    for (int32_t i = 0; i < t->n_pairs; i++) {
        size_t s = hash_key(t->pairs[i].key) & (cap - 1);
        while (keys[s] != EMPTY_KEY) s = (s + 1) & (cap - 1);
        keys[s] = t->pairs[i].key;
        idx[s] = i;
    }
    free(t->pmap_keys);
    free(t->pmap_idx);
    t->pmap_keys = keys;
    t->pmap_idx = idx;
    t->pmap_cap = cap;
}

static int32_t pair_get(bpe_trainer *t, uint32_t key) {
    size_t mask = t->pmap_cap - 1, s = hash_key(key) & mask;
    for (;; s = (s + 1) & mask) {
        if (t->pmap_keys[s] == key) return t->pmap_idx[s];
        if (t->pmap_keys[s] == EMPTY_KEY) break;
    }
    if (t->n_pairs == t->cap_pairs) {
        t->cap_pairs = t->cap_pairs ? t->cap_pairs * 2 : 1024;
        t->pairs = realloc(t->pairs, (size_t)t->cap_pairs * sizeof *t->pairs);
        WGT_ASSERT(t->pairs, "out of host memory growing the BPE pair table");
    }
    int32_t i = t->n_pairs++;
    memset(&t->pairs[i], 0, sizeof t->pairs[i]);
    t->pairs[i].key = key;
    t->pairs[i].touched = UINT32_MAX;
    t->pmap_keys[s] = key;
    t->pmap_idx[s] = i;
    if ((size_t)t->n_pairs * 2 > t->pmap_cap) pmap_grow(t);
    return i;
}

static void where_add(pair_stat *p, int32_t w) {
    if (p->n_where && p->where[p->n_where - 1] == w) return;  // words are visited in order
    if (p->n_where == p->cap_where) {
        p->cap_where = p->cap_where ? p->cap_where * 2 : 4;
        p->where = realloc(p->where, (size_t)p->cap_where * sizeof *p->where);
        WGT_ASSERT(p->where, "out of host memory growing a BPE pair list");
    }
    p->where[p->n_where++] = w;
}

// Heap order: higher count first; equal counts by smaller pair key, so training is deterministic.
static inline int heap_before(const heap_item *x, const heap_item *y) {
    return x->count > y->count || (x->count == y->count && x->key < y->key);
}

static void heap_push(bpe_trainer *t, int64_t count, int32_t idx) {
    if (t->n_heap == t->cap_heap) {
        t->cap_heap = t->cap_heap ? t->cap_heap * 2 : 1024;
        t->heap = realloc(t->heap, t->cap_heap * sizeof *t->heap);
        WGT_ASSERT(t->heap, "out of host memory growing the BPE heap");
    }
    heap_item it = {count, t->pairs[idx].key, idx};
    size_t i = t->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_before(&it, &t->heap[p])) break;
        t->heap[i] = t->heap[p];
        i = p;
    }
    t->heap[i] = it;
}

static heap_item heap_pop(bpe_trainer *t) {
    heap_item top = t->heap[0], last = t->heap[--t->n_heap];
    size_t i = 0, n = t->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(&t->heap[c + 1], &t->heap[c])) c++;
        if (!heap_before(&t->heap[c], &last)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n) t->heap[i] = last;
    return top;
}

static inline void pair_add(bpe_trainer *t, uint32_t a, uint32_t b, int64_t w, int32_t word, uint32_t merge_no) {
    int32_t i = pair_get(t, pair_key(a, b));
    pair_stat *p = &t->pairs[i];
    p->count += w;
    where_add(p, word);
    if (p->touched != merge_no) {
        p->touched = merge_no;
        if (t->n_touched == t->cap_touched) {
            t->cap_touched = t->cap_touched ? t->cap_touched * 2 : 1024;
            t->touched = realloc(t->touched, t->cap_touched * sizeof *t->touched);
            WGT_ASSERT(t->touched, "out of host memory");
        }
        t->touched[t->n_touched++] = i;
    }
}

static inline void pair_sub(bpe_trainer *t, uint32_t a, uint32_t b, int64_t w) {
    int32_t i = pair_get(t, pair_key(a, b));
    t->pairs[i].count -= w;
    WGT_ASSERT(t->pairs[i].count >= 0, "BPE pair count went negative");
}

typedef struct { uint64_t hash; size_t off; uint32_t len; int64_t count; } chunk_slot;

static int chunk_cmp_off(const void *x, const void *y) {
    size_t a = ((const chunk_slot *)x)->off, b = ((const chunk_slot *)y)->off;
    return (a > b) - (a < b);
}

// Counts distinct chunks of `text`; fills t's word arrays.
static void count_chunks(bpe_trainer *t, const uint8_t *text, size_t n) {
    typedef chunk_slot slot;
    size_t cap = pow2_at_least(n / 16 + 1024), used = 0;
    slot *tab = wgt_calloc(cap, sizeof *tab);
    for (size_t i = 0; i < n;) {
        size_t e = chunk_end(text, n, i);
        uint32_t len = (uint32_t)(e - i);
        if (len >= 2) {  // a one-byte chunk has no pair to merge
            uint64_t h = hash_bytes(text + i, len);
            size_t s = h & (cap - 1);
            while (tab[s].len && !(tab[s].hash == h && tab[s].len == len && !memcmp(text + tab[s].off, text + i, len)))
                s = (s + 1) & (cap - 1);
            if (tab[s].len) tab[s].count++;
            else {
                tab[s] = (slot){h, i, len, 1};
                if (++used * 2 > cap) {
                    size_t ncap = cap * 2;
                    slot *nt = wgt_calloc(ncap, sizeof *nt);
                    for (size_t k = 0; k < cap; k++)
                        if (tab[k].len) {
                            size_t q = tab[k].hash & (ncap - 1);
                            while (nt[q].len) q = (q + 1) & (ncap - 1);
                            nt[q] = tab[k];
                        }
                    free(tab);
                    tab = nt;
                    cap = ncap;
                }
            }
        }
        i = e;
    }
    // Order words by first occurrence so that training does not depend on hash layout.
    slot *list = wgt_malloc((used ? used : 1) * sizeof *list);
    size_t k = 0, total = 0;
    for (size_t s = 0; s < cap; s++)
        if (tab[s].len) {
            list[k++] = tab[s];
            total += tab[s].len;
        }
    free(tab);
    qsort(list, used, sizeof *list, chunk_cmp_off);
    WGT_ASSERT(used < INT32_MAX, "more than 2^31 distinct chunks");
    t->n_words = (int32_t)used;
    t->sym = wgt_malloc((total ? total : 1) * sizeof *t->sym);
    t->wstart = wgt_malloc((used ? used : 1) * sizeof *t->wstart);
    t->wlen = wgt_malloc((used ? used : 1) * sizeof *t->wlen);
    t->wcount = wgt_malloc((used ? used : 1) * sizeof *t->wcount);
    size_t o = 0;
    for (size_t w = 0; w < used; w++) {
        t->wstart[w] = o;
        t->wlen[w] = (int32_t)list[w].len;
        t->wcount[w] = list[w].count;
        for (uint32_t b = 0; b < list[w].len; b++) t->sym[o++] = text[list[w].off + b];
    }
    free(list);
}

static void bpe_trainer_free(bpe_trainer *t) {
    free(t->sym);
    free(t->wstart);
    free(t->wlen);
    free(t->wcount);
    for (int32_t i = 0; i < t->n_pairs; i++) free(t->pairs[i].where);
    free(t->pairs);
    free(t->pmap_keys);
    free(t->pmap_idx);
    free(t->heap);
    free(t->touched);
}

// Replaces every (a, b) in word w by x, moving the neighbouring pairs' counts over.
static void merge_in_word(bpe_trainer *t, int32_t w, uint32_t a, uint32_t b, uint32_t x, uint32_t merge_no) {
    int32_t *s = t->sym + t->wstart[w];
    int32_t len = t->wlen[w], o = 0;
    int64_t c = t->wcount[w];
    for (int32_t r = 0; r < len;) {
        if (r + 1 < len && (uint32_t)s[r] == a && (uint32_t)s[r + 1] == b) {
            // s[o-1] is already rewritten, so a run like "a b a b" yields (x, x), not (x, a).
            if (o > 0) {
                pair_sub(t, (uint32_t)s[o - 1], a, c);
                pair_add(t, (uint32_t)s[o - 1], x, c, w, merge_no);
            }
            if (r + 2 < len) {
                pair_sub(t, b, (uint32_t)s[r + 2], c);
                pair_add(t, x, (uint32_t)s[r + 2], c, w, merge_no);
            }
            s[o++] = (int32_t)x;
            r += 2;
        } else {
            s[o++] = s[r++];
        }
    }
    t->wlen[w] = o;
}

wgt_status tokenizer_train(tokenizer **out, const uint8_t *text, size_t n, int vocab_size) {
    *out = NULL;
    if (vocab_size < TOKENIZER_MIN_VOCAB || vocab_size > TOKENIZER_MAX_VOCAB)
        return wgt_fail(WGT_ERR_ARG, "vocabulary size %d is out of range: it must be at least %d (256 byte tokens + "
                        "the end-of-text token) and at most %d (token ids are stored as uint16); try 4096 or 16384",
                        vocab_size, TOKENIZER_MIN_VOCAB, TOKENIZER_MAX_VOCAB);
    int target = vocab_size - TOKENIZER_MIN_VOCAB;
    bpe_trainer t = {0};
    t.pmap_cap = 1 << 16;
    t.pmap_keys = wgt_malloc(t.pmap_cap * sizeof *t.pmap_keys);
    t.pmap_idx = wgt_malloc(t.pmap_cap * sizeof *t.pmap_idx);
    memset(t.pmap_keys, 0xFF, t.pmap_cap * sizeof *t.pmap_keys);
    count_chunks(&t, text, n);

    for (int32_t w = 0; w < t.n_words; w++) {
        const int32_t *s = t.sym + t.wstart[w];
        for (int32_t i = 0; i + 1 < t.wlen[w]; i++) pair_add(&t, (uint32_t)s[i], (uint32_t)s[i + 1], t.wcount[w], w, 0);
    }
    for (size_t i = 0; i < t.n_touched; i++) heap_push(&t, t.pairs[t.touched[i]].count, t.touched[i]);
    t.n_touched = 0;

    uint16_t *merges = wgt_malloc(((size_t)target + 1) * 2 * sizeof *merges);
    int m = 0;
    while (m < target) {
        heap_item best = {0, 0, -1};
        while (t.n_heap) {
            heap_item it = heap_pop(&t);
            int64_t cur = t.pairs[it.idx].count;
            if (cur == it.count) {
                best = it;
                break;
            }
            // Counts only fall after a pair's first push, so a stale entry is always too high.
            if (cur > 0) heap_push(&t, cur, it.idx);
        }
        // A pair seen once would only memorise the corpus; stop and report the smaller vocab.
        if (best.idx < 0 || best.count < 2) break;
        uint32_t a = best.key >> 16, b = best.key & 0xFFFF, x = 256 + (uint32_t)m;
        merges[2 * m] = (uint16_t)a;
        merges[2 * m + 1] = (uint16_t)b;
        m++;
        // The where list of (a, b) cannot grow during its own merge (new pairs all contain x).
        int32_t *where = t.pairs[best.idx].where;
        int32_t n_where = t.pairs[best.idx].n_where;
        for (int32_t k = 0; k < n_where; k++) {
            int32_t w = where[k];
            int64_t c = t.wcount[w];
            int32_t before = t.wlen[w];
            merge_in_word(&t, w, a, b, x, (uint32_t)m);
            t.pairs[best.idx].count -= c * (before - t.wlen[w]);
        }
        WGT_ASSERT(t.pairs[best.idx].count == 0, "BPE merged pair still has a count after its merge");
        free(t.pairs[best.idx].where);
        t.pairs[best.idx].where = NULL;
        t.pairs[best.idx].n_where = t.pairs[best.idx].cap_where = 0;
        for (size_t i = 0; i < t.n_touched; i++) {
            int32_t pi = t.touched[i];
            if (t.pairs[pi].count > 0) heap_push(&t, t.pairs[pi].count, pi);
        }
        t.n_touched = 0;
    }
    bpe_trainer_free(&t);
    return tok_build(out, merges, m, NULL);
}

// ------------------------------------------------------------------ encoding

// Encodes one chunk by applying merges lowest rank (= lowest id) first, as training did.
static int encode_chunk(const tokenizer *tok, const uint8_t *p, int len, uint16_t *s) {
    for (int i = 0; i < len; i++) s[i] = p[i];
    while (len > 1) {
        uint16_t best = NO_ID;
        uint16_t a = 0, b = 0;
        for (int i = 0; i + 1 < len; i++) {
            uint16_t id = merge_lookup(tok, s[i], s[i + 1]);
            if (id < best) {
                best = id;
                a = s[i];
                b = s[i + 1];
            }
        }
        if (best == NO_ID) break;
        int o = 0;
        for (int r = 0; r < len;) {
            if (r + 1 < len && s[r] == a && s[r + 1] == b) {
                s[o++] = best;
                r += 2;
            } else {
                s[o++] = s[r++];
            }
        }
        len = o;
    }
    return len;
}

wgt_status tokenizer_encode(const tokenizer *tok, const uint8_t *bytes, size_t n, uint32_t **ids, size_t *n_ids) {
    // Chunk cache: text repeats its words, so each distinct chunk is encoded once per call.
    typedef struct { uint64_t hash; size_t off; uint32_t len; uint32_t n_out; size_t out; } slot;
    size_t cap = pow2_at_least(n / 32 + 256), used = 0;
    const size_t max_used = (size_t)1 << 22;  // bounds memory on input with few repeats
    slot *tab = wgt_calloc(cap, sizeof *tab);
    size_t pool_cap = 1024, pool_n = 0;
    uint32_t *pool = wgt_malloc(pool_cap * sizeof *pool);
    size_t out_cap = n / 3 + 16, out_n = 0;
    uint32_t *outp = wgt_malloc(out_cap * sizeof *outp);
    uint16_t buf[MAX_CHUNK];  // this format's ids are below 65535 (TOKENIZER_MAX_VOCAB)

    for (size_t i = 0; i < n;) {
        size_t e = chunk_end(bytes, n, i);
        uint32_t len = (uint32_t)(e - i);
        if (out_n + len > out_cap) {
            out_cap = (out_cap + len) * 2;
            outp = realloc(outp, out_cap * sizeof *outp);
            WGT_ASSERT(outp, "out of host memory growing the encoder output");
        }
        if (len == 1) {
            outp[out_n++] = bytes[i];
            i = e;
            continue;
        }
        uint64_t h = hash_bytes(bytes + i, len);
        size_t s = h & (cap - 1);
        while (tab[s].len && !(tab[s].hash == h && tab[s].len == len && !memcmp(bytes + tab[s].off, bytes + i, len)))
            s = (s + 1) & (cap - 1);
        if (tab[s].len) {
            memcpy(outp + out_n, pool + tab[s].out, tab[s].n_out * sizeof *pool);
            out_n += tab[s].n_out;
        } else {
            int k = encode_chunk(tok, bytes + i, (int)len, buf);
            for (int q = 0; q < k; q++) outp[out_n + (size_t)q] = buf[q];
            out_n += (size_t)k;
            if (used < max_used) {
                if (pool_n + (size_t)k > pool_cap) {
                    pool_cap = (pool_cap + (size_t)k) * 2;
                    pool = realloc(pool, pool_cap * sizeof *pool);
                    WGT_ASSERT(pool, "out of host memory growing the encoder cache");
                }
                memcpy(pool + pool_n, outp + out_n - (size_t)k, (size_t)k * sizeof *pool);
                tab[s] = (slot){h, i, len, (uint32_t)k, pool_n};
                pool_n += (size_t)k;
                if (++used * 2 > cap) {
                    size_t ncap = cap * 2;
                    slot *nt = wgt_calloc(ncap, sizeof *nt);
                    for (size_t q = 0; q < cap; q++)
                        if (tab[q].len) {
                            size_t z = tab[q].hash & (ncap - 1);
                            while (nt[z].len) z = (z + 1) & (ncap - 1);
                            nt[z] = tab[q];
                        }
                    free(tab);
                    tab = nt;
                    cap = ncap;
                }
            }
        }
        i = e;
    }
    free(tab);
    free(pool);
    *ids = outp;
    *n_ids = out_n;
    return WGT_OK;
}

wgt_status tokenizer_decode(const tokenizer *tok, const uint32_t *ids, size_t n, uint8_t **bytes, size_t *n_bytes) {
    *bytes = NULL;
    *n_bytes = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= (uint32_t)tok->vocab)
            return wgt_fail(WGT_ERR_ARG, "cannot decode token id %" PRIu32 " at position %zu: the vocabulary has %d ids "
                            "(0..%d); the ids come from a different tokenizer or model", ids[i], i, tok->vocab,
                            tok->vocab - 1);
        total += tok->tok_len[ids[i]];
    }
    uint8_t *o = wgt_malloc(total + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(o + k, tok->pool + tok->tok_off[ids[i]], tok->tok_len[ids[i]]);
        k += tok->tok_len[ids[i]];
    }
    o[k] = 0;  // convenient for printing; not counted in n_bytes
    *bytes = o;
    *n_bytes = k;
    return WGT_OK;
}

// ------------------------------------------------------------------ file I/O

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// The file image of a tokenizer (malloc'd): what tokenizer_save writes and the fingerprint hashes.
static uint8_t *tok_serialize(const tokenizer *tok, size_t *len_out) {
    size_t len = FILE_HEADER + (size_t)tok->n_merges * 4 + 4;
    uint8_t *buf = wgt_calloc(len, 1);
    memcpy(buf, FILE_MAGIC, 8);
    put_u32(buf + 8, FILE_VERSION);
    put_u32(buf + 12, (uint32_t)tok->vocab);
    put_u32(buf + 16, (uint32_t)tok->n_merges);
    put_u32(buf + 20, (uint32_t)tok->vocab - 1);
    put_u32(buf + 24, PRETOKENIZER_VERSION);
    put_u32(buf + 28, 0);
    for (int i = 0; i < tok->n_merges; i++) {
        uint8_t *p = buf + FILE_HEADER + 4 * (size_t)i;
        p[0] = (uint8_t)tok->merges[2 * i];
        p[1] = (uint8_t)(tok->merges[2 * i] >> 8);
        p[2] = (uint8_t)tok->merges[2 * i + 1];
        p[3] = (uint8_t)(tok->merges[2 * i + 1] >> 8);
    }
    put_u32(buf + len - 4, (uint32_t)crc32(0L, buf, (uInt)(len - 4)));
    *len_out = len;
    return buf;
}

uint64_t tokenizer_fingerprint(const tokenizer *tok) {
    size_t len;
    uint8_t *buf = tok_serialize(tok, &len);
    uint64_t h = fnv1a64(FNV64_INIT, buf, len);
    free(buf);
    return h;
}

wgt_status tokenizer_save(const tokenizer *tok, const char *path) {
    size_t len;
    uint8_t *buf = tok_serialize(tok, &len);
    wgt_status st = atomic_write_file(path, buf, len);
    free(buf);
    return st;
}

wgt_status tokenizer_load(tokenizer **out, const char *path) {
    *out = NULL;
    // The largest valid file is ~256 KiB; one byte more is read to detect trailing garbage.
    size_t max_len = FILE_HEADER + (size_t)TOKENIZER_MAX_VOCAB * 4 + 4 + 1;
    char *raw;
    size_t len;
    WGT_TRY(file_read_all(path, "tokenizer", "it is written by `wgtrain prepare` into the data directory", max_len, &raw,
                          &len));
    uint8_t *buf = (uint8_t *)raw;
    wgt_status st = WGT_OK;
    const char *fix = "re-create it with `wgtrain prepare`";
    if (len < 8 || memcmp(buf, FILE_MAGIC, 8) != 0) {
        st = wgt_fail(WGT_ERR_FORMAT, "%s is not a wgtrain tokenizer file (it does not start with \"WGT-BPE\"); "
                      "pass the tokenizer.bin of a data directory made by `wgtrain prepare`", path);
        goto done;
    }
    if (len < FILE_HEADER + 4) {
        st = wgt_fail(WGT_ERR_FORMAT, "tokenizer %s is truncated: %zu bytes, less than the %d-byte header and "
                      "checksum; %s", path, len, FILE_HEADER + 4, fix);
        goto done;
    }
    uint32_t version = get_u32(buf + 8), vocab = get_u32(buf + 12), n_merges = get_u32(buf + 16);
    uint32_t eot = get_u32(buf + 20), pretok = get_u32(buf + 24), reserved = get_u32(buf + 28);
    if (version != FILE_VERSION) {
        st = wgt_fail(WGT_ERR_FORMAT, "tokenizer %s has format version %u; this build reads version %d; %s",
                      path, version, FILE_VERSION, fix);
        goto done;
    }
    if (vocab < TOKENIZER_MIN_VOCAB || vocab > TOKENIZER_MAX_VOCAB || n_merges != vocab - TOKENIZER_MIN_VOCAB ||
        eot != vocab - 1 || reserved != 0) {
        st = wgt_fail(WGT_ERR_FORMAT, "tokenizer %s has an inconsistent header (vocab %u, merges %u, end-of-text "
                      "id %u, reserved %u; expected merges = vocab - 257, end-of-text = vocab - 1, reserved 0); "
                      "the file is corrupted: %s", path, vocab, n_merges, eot, reserved, fix);
        goto done;
    }
    if (pretok != PRETOKENIZER_VERSION) {
        st = wgt_fail(WGT_ERR_FORMAT, "tokenizer %s uses pre-tokenizer version %u; this build implements version "
                      "%d; %s", path, pretok, PRETOKENIZER_VERSION, fix);
        goto done;
    }
    size_t want = FILE_HEADER + (size_t)n_merges * 4 + 4;
    if (len < want) {
        st = wgt_fail(WGT_ERR_FORMAT, "tokenizer %s is truncated: %zu bytes, but %u merges need %zu; %s",
                      path, len, n_merges, want, fix);
        goto done;
    }
    if (len > want) {
        st = wgt_fail(WGT_ERR_FORMAT, "tokenizer %s has extra bytes after its %u merges (%zu bytes expected); "
                      "the file is corrupted: %s", path, n_merges, want, fix);
        goto done;
    }
    uint32_t crc = (uint32_t)crc32(0L, buf, (uInt)(want - 4));
    if (crc != get_u32(buf + want - 4)) {
        st = wgt_fail(WGT_ERR_FORMAT, "tokenizer %s fails its checksum (CRC-32 %08x, stored %08x): the file is "
                      "corrupted; %s", path, crc, get_u32(buf + want - 4), fix);
        goto done;
    }
    uint16_t *merges = wgt_malloc(((size_t)n_merges + 1) * 2 * sizeof *merges);
    for (uint32_t i = 0; i < n_merges; i++) {
        const uint8_t *p = buf + FILE_HEADER + 4 * (size_t)i;
        merges[2 * i] = (uint16_t)(p[0] | p[1] << 8);
        merges[2 * i + 1] = (uint16_t)(p[2] | p[3] << 8);
    }
    st = tok_build(out, merges, (int)n_merges, path);
done:
    free(buf);
    return st;
}

// ------------------------------------------------------------------ the tokenizer kind "wgtrain-bpe"

static wgt_status kind_open(void **impl, const char *const *paths) {
    tokenizer *tok;
    WGT_TRY(tokenizer_load(&tok, paths[0]));
    *impl = tok;
    return WGT_OK;
}
static wgt_status kind_save(const void *impl, const char *const *paths) { return tokenizer_save(impl, paths[0]); }
static int kind_sniff(const uint8_t *head, size_t n) { return n >= 8 && !memcmp(head, FILE_MAGIC, 8); }
static void kind_free(void *impl) { tokenizer_free(impl); }
static int kind_vocab(const void *impl) { return tokenizer_vocab_size(impl); }
static int kind_eot(const void *impl) { return tokenizer_eot(impl); }
static wgt_status kind_encode(const void *impl, const uint8_t *b, size_t n, uint32_t **ids, size_t *n_ids) {
    return tokenizer_encode(impl, b, n, ids, n_ids);
}
static wgt_status kind_decode(const void *impl, const uint32_t *ids, size_t n, uint8_t **b, size_t *nb) {
    return tokenizer_decode(impl, ids, n, b, nb);
}
static const uint8_t *kind_token_bytes(const void *impl, int id, size_t *len) {
    return tokenizer_token_bytes(impl, id, len);
}
static uint64_t kind_fingerprint(const void *impl) { return tokenizer_fingerprint(impl); }

const text_tok_kind text_tok_kind_bpe = {
    .name = TEXT_TOK_BPE_NAME,
    .files = {"tokenizer.bin", NULL},
    .open = kind_open,
    .save = kind_save,
    .sniff = kind_sniff,
    .free = kind_free,
    .vocab_size = kind_vocab,
    .eot = kind_eot,
    .encode = kind_encode,
    .decode = kind_decode,
    .token_bytes = kind_token_bytes,
    .fingerprint = kind_fingerprint,
};
