// hf_tokenizer.c — Hugging Face tokenizer.json (BPE model) loaded and run as the Rust
// `tokenizers` library runs it: added tokens split out of the raw text, normaliser, pre-tokeniser,
// BPE merges by rank, post-processor, and the decoders back to text. Libraries used:
//  - cJSON (through json_strict): the JSON parser the project already depends on.
//  - PCRE2 (UTF + UCP): Unicode classes and look-ahead for the Split patterns, a Debian library
//    with the same matching semantics as Oniguruma (which `tokenizers` uses) for these patterns.
//  - utf8proc: Unicode normalisation (NFC/NFD/NFKC/NFKD) and general categories, a small,
//    well-kept Debian library.
// Written here: the hash tables, the added-token trie and the merge loop, each a few dozen lines
// tied to how `tokenizers` orders its work (no library does exactly that).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/hf_tokenizer.h"
#include <errno.h>
#include <pcre2.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>
#include "core/fileutil.h"
#include "core/json_strict.h"

// ---------------------------------------------------------------- growable byte buffer

typedef struct {
    uint8_t *p;
    size_t n, cap;
} sbuf;

static void sb_reserve(sbuf *b, size_t extra) {
    WGT_ASSERT(extra <= SIZE_MAX / 2 - b->n, "buffer size overflow");
    if (b->n + extra <= b->cap) return;
    size_t c = b->cap ? b->cap : 64;
    while (c < b->n + extra) c *= 2;
    b->p = realloc(b->p, c);
    WGT_ASSERT(b->p, "out of host memory");
    b->cap = c;
}
static void sb_add(sbuf *b, const void *p, size_t n) {
    sb_reserve(b, n + 1);
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void sb_byte(sbuf *b, uint8_t c) { sb_add(b, &c, 1); }
static void sb_cp(sbuf *b, uint32_t cp) {
    uint8_t u[4];
    utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)cp, u);
    sb_add(b, u, (size_t)k);
}

// Generic growable array.
#define VEC_PUSH(arr, n, cap, val)                                                    \
    do {                                                                              \
        if ((n) == (cap)) {                                                           \
            (cap) = (cap) ? (cap) * 2 : 16;                                           \
            (arr) = realloc((arr), (cap) * sizeof *(arr));                            \
            WGT_ASSERT((arr), "out of host memory");                                  \
        }                                                                             \
        (arr)[(n)++] = (val);                                                         \
    } while (0)

// ---------------------------------------------------------------- UTF-8

// Length of the valid UTF-8 sequence at s[0..n), or 0 if none starts there (RFC 3629: no
// overlongs, no surrogates, nothing above U+10FFFF).
static size_t utf8_valid_len(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    size_t k;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) k = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, v = c & 0x07, min = 0x10000;
    else return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return k;
}

// Decodes the character at s (known valid); returns its length.
static size_t utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
    size_t k = utf8_valid_len(s, n, cp);
    WGT_ASSERT(k > 0, "invalid UTF-8 inside the tokenizer's own strings");
    return k;
}

// Length of the last character of s[0..n) (n > 0, valid UTF-8).
static size_t utf8_last_len(const uint8_t *s, size_t n) {
    size_t k = 1;
    while (k < n && k < 4 && (s[n - k] & 0xC0) == 0x80) k++;
    return k;
}

static int utf8_check(const uint8_t *s, size_t n, size_t *bad) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_valid_len(s + i, n - i, &cp);
        if (!k) { *bad = i; return 0; }
        i += k;
    }
    return 1;
}

// Rust's char::is_whitespace: the Unicode White_Space property.
static int cp_is_white(uint32_t c) {
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
// Rust's char::is_numeric: general categories Nd, Nl, No.
static int cp_is_numeric(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}
// A word character as the regex \w of `tokenizers`' single_word check: letters, marks, decimal
// digits, connector punctuation, letter numbers, ZWNJ/ZWJ.
static int cp_is_word(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ME) || k == UTF8PROC_CATEGORY_ND ||
           k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_PC || c == 0x200C || c == 0x200D;
}

// ---------------------------------------------------------------- hash tables

static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}
static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

// Strings (offset/length into a pool) to ids, open addressing.
typedef struct {
    uint32_t *slot;  // index into entries + 1, 0 = empty
    size_t mask;
    uint32_t *off, *len, *id;
    uint64_t *hash;  // per entry
    size_t n, cap;
    sbuf pool;
} strmap;

static void strmap_init(strmap *m, size_t expect) {
    size_t c = 16;
    while (c < expect * 2 + 16) c *= 2;
    m->slot = wgt_calloc(c, sizeof *m->slot);
    m->mask = c - 1;
}
static void strmap_free(strmap *m) {
    free(m->slot);
    free(m->off);
    free(m->len);
    free(m->id);
    free(m->hash);
    free(m->pool.p);
}
static int64_t strmap_get(const strmap *m, const uint8_t *s, size_t n) {
    if (!m->slot) return -1;
    uint64_t h = hash_bytes(s, n);
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        uint32_t e = m->slot[i];
        if (!e) return -1;
        e--;
        if (m->hash[e] == h && m->len[e] == n && !memcmp(m->pool.p + m->off[e], s, n)) return m->id[e];
    }
}
// Inserts (or, if present, returns 0 leaving the map as it is); 1 on insertion.
static int strmap_put(strmap *m, const uint8_t *s, size_t n, uint32_t id) {
    if ((m->n + 1) * 2 > m->mask + 1) {
        size_t c = (m->mask + 1) * 2;
        uint32_t *ns = wgt_calloc(c, sizeof *ns);
        for (size_t e = 0; e < m->n; e++) {
            size_t i = m->hash[e] & (c - 1);
            while (ns[i]) i = (i + 1) & (c - 1);
            ns[i] = (uint32_t)e + 1;
        }
        free(m->slot);
        m->slot = ns;
        m->mask = c - 1;
    }
    uint64_t h = hash_bytes(s, n);
    size_t i = h & m->mask;
    for (;; i = (i + 1) & m->mask) {
        uint32_t e = m->slot[i];
        if (!e) break;
        e--;
        if (m->hash[e] == h && m->len[e] == n && !memcmp(m->pool.p + m->off[e], s, n)) return 0;
    }
    WGT_ASSERT(m->pool.n + n < UINT32_MAX && m->n < UINT32_MAX - 1, "tokenizer strings over 4 GB");
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 1024;
        m->off = realloc(m->off, m->cap * sizeof *m->off);
        m->len = realloc(m->len, m->cap * sizeof *m->len);
        m->id = realloc(m->id, m->cap * sizeof *m->id);
        m->hash = realloc(m->hash, m->cap * sizeof *m->hash);
        WGT_ASSERT(m->off && m->len && m->id && m->hash, "out of host memory");
    }
    m->off[m->n] = (uint32_t)m->pool.n;
    m->len[m->n] = (uint32_t)n;
    m->id[m->n] = id;
    m->hash[m->n] = h;
    sb_add(&m->pool, s, n);
    m->slot[i] = (uint32_t)++m->n;
    return 1;
}

// Merge pairs (left id, right id) to (rank, new id), open addressing; a pair given twice keeps
// its last rank (as a Rust HashMap collected from the list does).
typedef struct {
    uint64_t key;  // (a << 32 | b) + 1, 0 = empty
    uint32_t rank, id;
} merge_slot;
typedef struct {
    merge_slot *s;
    size_t mask, n;
} mergemap;

static void mergemap_init(mergemap *m, size_t expect) {
    size_t c = 16;
    while (c < expect * 2 + 16) c *= 2;
    m->s = wgt_calloc(c, sizeof *m->s);
    m->mask = c - 1;
}
static void mergemap_put(mergemap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id) {
    uint64_t k = ((uint64_t)a << 32 | b) + 1;
    size_t i = hash_u64(k) & m->mask;
    while (m->s[i].key && m->s[i].key != k) i = (i + 1) & m->mask;
    if (!m->s[i].key) m->n++;
    m->s[i] = (merge_slot){k, rank, id};
    WGT_ASSERT(m->n * 2 <= m->mask + 1, "merge table sized too small");
}
static const merge_slot *mergemap_get(const mergemap *m, uint32_t a, uint32_t b) {
    if (!m->s) return NULL;
    uint64_t k = ((uint64_t)a << 32 | b) + 1;
    for (size_t i = hash_u64(k) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->s[i].key) return NULL;
        if (m->s[i].key == k) return &m->s[i];
    }
}

// ---------------------------------------------------------------- added-token trie

// A byte trie for leftmost-longest matching of the added tokens (what the aho-corasick crate's
// LeftmostLongest gives `tokenizers`): edges in a hash of (node, byte), each node's pattern.
typedef struct {
    uint64_t *ekey;  // (node << 8 | byte) + 1, 0 = empty
    uint32_t *echild;
    size_t emask, en;
    int32_t *term;  // per node: added-token index, or -1
    size_t nn, ncap;
} trie;

static void trie_init(trie *t) {
    t->emask = 255;
    t->ekey = wgt_calloc(256, sizeof *t->ekey);
    t->echild = wgt_calloc(256, sizeof *t->echild);
    t->ncap = 16;
    t->term = wgt_malloc(t->ncap * sizeof *t->term);
    t->term[0] = -1;
    t->nn = 1;
}
static void trie_free(trie *t) {
    free(t->ekey);
    free(t->echild);
    free(t->term);
}
static int64_t trie_child(const trie *t, uint32_t node, uint8_t c) {
    uint64_t k = ((uint64_t)node << 8 | c) + 1;
    for (size_t i = hash_u64(k) & t->emask;; i = (i + 1) & t->emask) {
        if (!t->ekey[i]) return -1;
        if (t->ekey[i] == k) return t->echild[i];
    }
}
static void trie_edge_put(uint64_t *keys, uint32_t *child, size_t mask, uint64_t k, uint32_t v) {
    size_t i = hash_u64(k) & mask;
    while (keys[i]) i = (i + 1) & mask;
    keys[i] = k;
    child[i] = v;
}
static void trie_add(trie *t, const uint8_t *s, size_t n, int32_t pattern) {
    uint32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t c = trie_child(t, node, s[i]);
        if (c < 0) {
            if ((t->en + 1) * 2 > t->emask + 1) {
                size_t cap = (t->emask + 1) * 2;
                uint64_t *nk = wgt_calloc(cap, sizeof *nk);
                uint32_t *nc = wgt_calloc(cap, sizeof *nc);
                for (size_t j = 0; j <= t->emask; j++)
                    if (t->ekey[j]) trie_edge_put(nk, nc, cap - 1, t->ekey[j], t->echild[j]);
                free(t->ekey);
                free(t->echild);
                t->ekey = nk;
                t->echild = nc;
                t->emask = cap - 1;
            }
            if (t->nn == t->ncap) {
                t->ncap *= 2;
                t->term = realloc(t->term, t->ncap * sizeof *t->term);
                WGT_ASSERT(t->term, "out of host memory");
            }
            t->term[t->nn] = -1;
            c = (int64_t)t->nn++;
            trie_edge_put(t->ekey, t->echild, t->emask, ((uint64_t)node << 8 | s[i]) + 1, (uint32_t)c);
            t->en++;
        }
        node = (uint32_t)c;
    }
    if (t->term[node] < 0) t->term[node] = pattern;  // the same text twice: the first one matches
}
// The longest pattern starting at s[0..n): its index, its length in *len; -1 if none.
static int32_t trie_longest(const trie *t, const uint8_t *s, size_t n, size_t *len) {
    uint32_t node = 0;
    int32_t best = -1;
    for (size_t i = 0; i < n; i++) {
        int64_t c = trie_child(t, node, s[i]);
        if (c < 0) break;
        node = (uint32_t)c;
        if (t->term[node] >= 0) best = t->term[node], *len = i + 1;
    }
    return best;
}

// ---------------------------------------------------------------- the tokenizer

enum { NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD, NORM_PREPEND, NORM_REPLACE };
enum { PRE_SPLIT, PRE_BYTELEVEL, PRE_DIGITS, PRE_METASPACE };
enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER };
enum { BEH_REMOVED, BEH_ISOLATED, BEH_PREVIOUS, BEH_NEXT, BEH_CONTIGUOUS };
enum { POST_TEMPLATE, POST_CLS_SEP, POST_NOOP };
enum { DEC_BYTELEVEL, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP, DEC_METASPACE };

typedef struct {
    int kind;
    char *a, *b;      // Prepend: a; Replace: a = pattern text (when not a regex), b = content
    size_t alen, blen;
    pcre2_code *re;   // Replace/Split with a Regex pattern
    int behavior, invert, flag;  // Split; ByteLevel: flag = add_prefix_space, flag2 = use_regex
    int flag2;
    uint32_t ch;      // Strip: the character; Metaspace: the replacement (a/alen: its UTF-8)
    size_t start, stop;
} step;

typedef struct {
    char *content;
    size_t len;
    uint32_t id;
    int special, lstrip, rstrip, single_word, normalized;
} added_token;

struct hf_tokenizer {
    // model
    strmap vocab;                 // token -> id
    uint32_t *tok_off, *tok_len;  // id -> token (in vocab.pool), len UINT32_MAX = none
    uint32_t model_size;          // max model id + 1
    mergemap merges;
    int64_t unk_id;               // -1: none
    char *unk_token;
    char *prefix, *suffix;        // continuing_subword_prefix, end_of_word_suffix (NULL = none)
    int fuse_unk, byte_fallback, ignore_merges;
    int64_t byte_ids[256];        // <0xNN> ids for byte_fallback, -1 if absent
    // added tokens
    added_token *added;
    size_t n_added;
    strmap added_map;             // content -> index into added
    int32_t *added_by_id;         // id -> index into added, -1
    uint32_t size;                // max id + 1 over everything
    trie raw_trie, norm_trie;
    int has_raw, has_norm;
    // pipeline
    step *norm, *pre, *post, *dec;
    size_t n_norm, n_pre, n_post, n_dec;
    int has_decoder;
    uint32_t *tmpl_pre, *tmpl_post;  // template's ids before / after the sequence
    size_t n_tmpl_pre, n_tmpl_post;
    pcre2_code *bytelevel_re;        // GPT-2's pattern for ByteLevel(use_regex)
    uint32_t byte_char[256];         // byte-level alphabet
    int16_t char_byte[324];          // its inverse for code points < 324
    // filled by the stream parser, used by load_model
    int vocab_seen, merges_seen;
    uint32_t vocab_max;
    sbuf mpool;                      // merges as written: decoded strings
    uint32_t *mrec;                  // per merge: off, len, off2, len2 (len2 = UINT32_MAX: "a b" form)
    size_t n_mrec, cap_mrec;
};

static wgt_status bad(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static wgt_status bad(const char *what, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wgt_fail(WGT_ERR_FORMAT, "%s: %s", what, msg);
}
static wgt_status unsupported(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static wgt_status unsupported(const char *what, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wgt_fail(WGT_ERR_CONFIG, "%s: %s is not supported by this implementation (docs/hf-tokenizers.md lists what is)",
                    what, msg);
}

static void step_free(step *s) {
    free(s->a);
    free(s->b);
    if (s->re) pcre2_code_free(s->re);
}

void hf_tokenizer_free(hf_tokenizer *t) {
    if (!t) return;
    strmap_free(&t->vocab);
    free(t->tok_off);
    free(t->tok_len);
    free(t->merges.s);
    free(t->unk_token);
    free(t->prefix);
    free(t->suffix);
    for (size_t i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    strmap_free(&t->added_map);
    free(t->added_by_id);
    if (t->raw_trie.term) trie_free(&t->raw_trie);
    if (t->norm_trie.term) trie_free(&t->norm_trie);
    step *lists[4] = {t->norm, t->pre, t->post, t->dec};
    size_t ns[4] = {t->n_norm, t->n_pre, t->n_post, t->n_dec};
    for (int l = 0; l < 4; l++) {
        for (size_t i = 0; i < ns[l]; i++) step_free(&lists[l][i]);
        free(lists[l]);
    }
    free(t->tmpl_pre);
    free(t->tmpl_post);
    if (t->bytelevel_re) pcre2_code_free(t->bytelevel_re);
    free(t->mpool.p);
    free(t->mrec);
    free(t);
}

// ---------------------------------------------------------------- regex

// White_Space, the meaning of \s in Oniguruma (and Rust); PCRE2's \s with UCP adds U+180E.
#define WS_CLASS "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

// Compiles a pattern of tokenizer.json for PCRE2, with \s (and \S outside a class) spelled as
// the White_Space class so that PCRE2 agrees with Oniguruma on U+180E.
static wgt_status regex_compile(pcre2_code **out, const char *pat, size_t n, const char *what) {
    sbuf b = {0};
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char d = pat[i + 1];
            if (d == 's') sb_add(&b, in_class ? WS_CLASS : "[" WS_CLASS "]", strlen(in_class ? WS_CLASS : "[" WS_CLASS "]"));
            else if (d == 'S' && !in_class) sb_add(&b, "[^" WS_CLASS "]", strlen("[^" WS_CLASS "]"));
            else sb_add(&b, pat + i, 2);
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            sb_byte(&b, (uint8_t)c);
            // a ']' right after '[' or '[^' is literal
            if (i + 1 < n && pat[i + 1] == '^') sb_byte(&b, '^'), i++;
            if (i + 1 < n && pat[i + 1] == ']') sb_byte(&b, ']'), i++;
            continue;
        }
        if (c == '[' && in_class && i + 1 < n && pat[i + 1] == ':') {  // POSIX class inside a class
            const char *e = memchr(pat + i + 2, ']', n - i - 2);
            size_t l = e ? (size_t)(e - (pat + i)) + 1 : n - i;
            sb_add(&b, pat + i, l);
            i += l - 1;
            continue;
        }
        if (c == ']' && in_class) in_class = 0;
        sb_byte(&b, (uint8_t)c);
    }
    int err;
    PCRE2_SIZE off;
    *out = pcre2_compile(b.p ? b.p : (PCRE2_SPTR) "", b.n, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    free(b.p);
    if (!*out) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return bad(what, "the regex pattern \"%.*s\" does not compile: %s", (int)(n > 120 ? 120 : n), pat, (char *)msg);
    }
    pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE);  // without JIT the interpreter runs it
    return WGT_OK;
}

typedef struct {
    size_t *v;  // start, end pairs
    size_t n, cap;
} spans;

static void spans_push(spans *s, size_t a, size_t b) {
    VEC_PUSH(s->v, s->n, s->cap, a);
    VEC_PUSH(s->v, s->n, s->cap, b);
}

// All non-overlapping matches of re (or of the literal pat[0..plen) when re is NULL) in s,
// left to right. A literal that is empty matches nothing (as in `tokenizers`).
static wgt_status find_all(spans *out, const pcre2_code *re, const char *pat, size_t plen, const uint8_t *s, size_t n) {
    out->n = 0;
    if (!re) {
        if (!plen) return WGT_OK;
        for (size_t i = 0; i + plen <= n;) {
            const uint8_t *h = memmem(s + i, n - i, pat, plen);
            if (!h) break;
            size_t a = (size_t)(h - s);
            spans_push(out, a, a + plen);
            i = a + plen;
        }
        return WGT_OK;
    }
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    WGT_ASSERT(md, "out of host memory for PCRE2 match data");
    size_t at = 0;
    wgt_status st = WGT_OK;
    while (at <= n) {
        int rc = pcre2_match(re, s, n, at, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            st = wgt_fail(WGT_ERR_CONFIG, "regex matching failed at byte %zu: PCRE2 error %d (%s)", at, rc, (char *)msg);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], b = ov[1];
        if (b < a) b = a;  // \K tricks: never a negative span
        if (a == b) {
            // An empty match: kept as a zero-width split point and the search moves one char on.
            if (a >= n) break;
            uint32_t cp;
            at = a + utf8_next(s + a, n - a, &cp);
            continue;
        }
        spans_push(out, a, b);
        at = b;
    }
    pcre2_match_data_free(md);
    return st;
}

// ---------------------------------------------------------------- pieces

typedef struct {
    size_t off, len;  // in the arena
    int64_t id;       // an added token's id, or -1 for text still to tokenize
    int origin;       // the piece starts at offset 0 of the original text
} piece;

typedef struct {
    piece *v;
    size_t n, cap;
} pieces;

static void pieces_push(pieces *p, size_t off, size_t len, int64_t id, int origin) {
    piece x = {off, len, id, origin};
    VEC_PUSH(p->v, p->n, p->cap, x);
}

// `tokenizers`' split of one piece by a list of matches with a delimiter behaviour; empty pieces
// are dropped.
static void split_piece(pieces *out, const piece *pc, const spans *m, int behavior, int invert) {
    // segments: (start, end, is_match) covering the piece
    size_t nseg = 0, cap = 0;
    size_t *seg = NULL;
    size_t prev = 0;
#define SEG(a, b, f) do { VEC_PUSH(seg, nseg, cap, (a)); VEC_PUSH(seg, nseg, cap, (b)); VEC_PUSH(seg, nseg, cap, (size_t)(f)); } while (0)
    if (pc->len == 0) SEG(0, 0, 0);
    for (size_t i = 0; i < m->n; i += 2) {
        if (prev != m->v[i]) SEG(prev, m->v[i], invert);
        SEG(m->v[i], m->v[i + 1], !invert);
        prev = m->v[i + 1];
    }
    if (pc->len && prev != pc->len) SEG(prev, pc->len, invert);
#undef SEG
    size_t k = nseg / 3;
    // result pieces (start, end) with a "remove" flag
    size_t *r = wgt_malloc((k + 1) * 3 * sizeof *r);
    size_t nr = 0;
    int prev_match = 0;
    if (behavior == BEH_NEXT) {
        for (size_t j = k; j-- > 0;) {
            size_t a = seg[3 * j], b = seg[3 * j + 1];
            int im = (int)seg[3 * j + 2];
            if (im && !prev_match && nr) r[3 * (nr - 1)] = a;
            else r[3 * nr] = a, r[3 * nr + 1] = b, r[3 * nr + 2] = 0, nr++;
            prev_match = im;
        }
        for (size_t j = 0; j < nr / 2; j++)
            for (int q = 0; q < 3; q++) {
                size_t x = r[3 * j + q];
                r[3 * j + q] = r[3 * (nr - 1 - j) + q];
                r[3 * (nr - 1 - j) + q] = x;
            }
    } else {
        for (size_t j = 0; j < k; j++) {
            size_t a = seg[3 * j], b = seg[3 * j + 1];
            int im = (int)seg[3 * j + 2];
            if (behavior == BEH_REMOVED) r[3 * nr] = a, r[3 * nr + 1] = b, r[3 * nr + 2] = (size_t)im, nr++;
            else if (behavior == BEH_ISOLATED) r[3 * nr] = a, r[3 * nr + 1] = b, r[3 * nr + 2] = 0, nr++;
            else if (behavior == BEH_PREVIOUS) {
                if (im && !prev_match && nr) r[3 * (nr - 1) + 1] = b;
                else r[3 * nr] = a, r[3 * nr + 1] = b, r[3 * nr + 2] = 0, nr++;
            } else {  // contiguous
                if (im == prev_match && nr) r[3 * (nr - 1) + 1] = b;
                else r[3 * nr] = a, r[3 * nr + 1] = b, r[3 * nr + 2] = 0, nr++;
            }
            prev_match = im;
        }
    }
    for (size_t j = 0; j < nr; j++) {
        size_t a = r[3 * j], b = r[3 * j + 1];
        if (r[3 * j + 2] || a == b) continue;
        pieces_push(out, pc->off + a, b - a, -1, pc->origin && a == 0);
    }
    free(r);
    free(seg);
}

// ---------------------------------------------------------------- normalisation

static wgt_status normalize(const hf_tokenizer *t, const uint8_t *s, size_t n, sbuf *out) {
    sbuf cur = {0}, nxt = {0};
    sb_add(&cur, s, n);
    spans m = {0};
    wgt_status st = WGT_OK;
    for (size_t i = 0; i < t->n_norm && st == WGT_OK; i++) {
        const step *p = &t->norm[i];
        nxt.n = 0;
        switch (p->kind) {
        case NORM_NFC: case NORM_NFD: case NORM_NFKC: case NORM_NFKD: {
            if (!cur.n) continue;
            int opt = UTF8PROC_STABLE | (p->kind == NORM_NFC || p->kind == NORM_NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
                      (p->kind == NORM_NFKC || p->kind == NORM_NFKD ? UTF8PROC_COMPAT : 0);
            utf8proc_uint8_t *d = NULL;
            utf8proc_ssize_t k = utf8proc_map(cur.p, (utf8proc_ssize_t)cur.n, &d, (utf8proc_option_t)opt);
            if (k < 0) {
                st = wgt_fail(WGT_ERR_ARG, "Unicode normalisation failed: %s", utf8proc_errmsg(k));
                break;
            }
            sb_add(&nxt, d, (size_t)k);
            free(d);
            break;
        }
        case NORM_PREPEND:
            if (!cur.n) continue;
            sb_add(&nxt, p->a, p->alen);
            sb_add(&nxt, cur.p, cur.n);
            break;
        case NORM_REPLACE: {
            st = find_all(&m, p->re, p->a, p->alen, cur.p, cur.n);
            size_t prev = 0;
            for (size_t j = 0; j < m.n; j += 2) {
                sb_add(&nxt, cur.p + prev, m.v[j] - prev);
                sb_add(&nxt, p->b, p->blen);
                prev = m.v[j + 1];
            }
            sb_add(&nxt, cur.p + prev, cur.n - prev);
            break;
        }
        default: WGT_ASSERT(0, "unknown normaliser step");
        }
        sbuf x = cur;
        cur = nxt;
        nxt = x;
    }
    free(nxt.p);
    free(m.v);
    if (st != WGT_OK) {
        free(cur.p);
        return st;
    }
    sb_add(out, cur.p, cur.n);
    free(cur.p);
    return WGT_OK;
}

// ---------------------------------------------------------------- added tokens in the text

static size_t space_leftmost_at_end(const uint8_t *s, size_t n) {
    size_t i = n;
    while (i > 0) {
        size_t k = utf8_last_len(s, i);
        uint32_t cp;
        utf8_next(s + i - k, k, &cp);
        if (!cp_is_white(cp)) break;
        i -= k;
    }
    return i;
}
static size_t space_rightmost_at_start(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = utf8_next(s + i, n - i, &cp);
        if (!cp_is_white(cp)) break;
        i += k;
    }
    return i;
}

// Splits arena[pc] at the added tokens of trie tr (`tokenizers`' find_matches with the lstrip,
// rstrip and single_word rules), appending the results to out.
static void split_added(const hf_tokenizer *t, const trie *tr, const sbuf *ar, const piece *pc, pieces *out) {
    const uint8_t *s = ar->p + pc->off;
    size_t n = pc->len, start_offset = 0;
    for (size_t i = 0; i < n;) {
        size_t len = 0;
        int32_t k = trie_longest(tr, s + i, n - i, &len);
        if (k < 0) {
            i++;
            continue;
        }
        const added_token *a = &t->added[k];
        size_t start = i, stop = i + len;
        i = stop;
        if (a->single_word) {
            uint32_t cp;
            int start_space = start == 0 || !(utf8_next(s + start - utf8_last_len(s, start), 4, &cp), cp_is_word(cp));
            int stop_space = stop == n || !(utf8_next(s + stop, n - stop, &cp), cp_is_word(cp));
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = space_leftmost_at_end(s, start);
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) stop += space_rightmost_at_start(s + stop, n - stop);
        if (start_offset < start) pieces_push(out, pc->off + start_offset, start - start_offset, -1, pc->origin && start_offset == 0);
        pieces_push(out, pc->off + start, stop - start, a->id, pc->origin && start == 0);
        start_offset = stop;
        if (i < stop) i = stop;
    }
    if (start_offset < n) pieces_push(out, pc->off + start_offset, n - start_offset, -1, pc->origin && start_offset == 0);
}

// ---------------------------------------------------------------- pre-tokenisation

static void bytelevel_map(const hf_tokenizer *t, sbuf *ar, size_t off, size_t len) {
    for (size_t i = 0; i < len; i++) sb_cp(ar, t->byte_char[ar->p[off + i]]);
}

static wgt_status pretokenize(const hf_tokenizer *t, sbuf *ar, pieces *ps) {
    pieces nx = {0};
    spans m = {0};
    wgt_status st = WGT_OK;
    for (size_t si = 0; si < t->n_pre && st == WGT_OK; si++) {
        const step *p = &t->pre[si];
        nx.n = 0;
        for (size_t i = 0; i < ps->n && st == WGT_OK; i++) {
            piece pc = ps->v[i];
            if (pc.id >= 0) {
                VEC_PUSH(nx.v, nx.n, nx.cap, pc);
                continue;
            }
            if (p->kind == PRE_SPLIT) {
                st = find_all(&m, p->re, p->a, p->alen, ar->p + pc.off, pc.len);
                if (st == WGT_OK) split_piece(&nx, &pc, &m, p->behavior, p->invert);
            } else if (p->kind == PRE_DIGITS) {
                m.n = 0;
                const uint8_t *s = ar->p + pc.off;
                for (size_t j = 0; j < pc.len;) {
                    uint32_t cp;
                    size_t k = utf8_next(s + j, pc.len - j, &cp);
                    if (cp_is_numeric(cp)) spans_push(&m, j, j + k);
                    j += k;
                }
                split_piece(&nx, &pc, &m, p->flag ? BEH_ISOLATED : BEH_CONTIGUOUS, 0);
            } else if (p->kind == PRE_METASPACE) {
                // spaces become the replacement; the replacement goes in front per the scheme;
                // then (split) a cut before each replacement
                size_t off = ar->n;
                const uint8_t *s0 = ar->p + pc.off;
                int starts = pc.len >= p->alen && !memcmp(s0, p->a, p->alen);
                if (pc.len && s0[0] == ' ') starts = 1;
                if (!starts && (p->behavior == PREPEND_ALWAYS || (p->behavior == PREPEND_FIRST && pc.origin)))
                    sb_add(ar, p->a, p->alen);
                for (size_t j = 0; j < pc.len; j++) {
                    uint8_t c = ar->p[pc.off + j];
                    if (c == ' ') sb_add(ar, p->a, p->alen);
                    else sb_byte(ar, c);
                }
                pc.off = off;
                pc.len = ar->n - off;
                if (p->flag) {
                    st = find_all(&m, NULL, p->a, p->alen, ar->p + pc.off, pc.len);
                    if (st == WGT_OK) split_piece(&nx, &pc, &m, BEH_NEXT, 0);
                } else if (pc.len) VEC_PUSH(nx.v, nx.n, nx.cap, pc);
            } else {  // ByteLevel
                if (p->flag && !(pc.len && ar->p[pc.off] == ' ')) {
                    size_t off = ar->n;
                    sb_reserve(ar, pc.len + 2);  // the copy below reads the arena it grows
                    sb_byte(ar, ' ');
                    sb_add(ar, ar->p + pc.off, pc.len);
                    pc.off = off;
                    pc.len++;
                }
                size_t first = nx.n;
                if (p->flag2) {
                    st = find_all(&m, t->bytelevel_re, NULL, 0, ar->p + pc.off, pc.len);
                    if (st == WGT_OK) split_piece(&nx, &pc, &m, BEH_ISOLATED, 0);
                } else if (pc.len) VEC_PUSH(nx.v, nx.n, nx.cap, pc);
                for (size_t j = first; j < nx.n; j++) {
                    size_t off = ar->n;
                    bytelevel_map(t, ar, nx.v[j].off, nx.v[j].len);
                    nx.v[j].off = off;
                    nx.v[j].len = ar->n - off;
                }
            }
        }
        pieces x = *ps;
        *ps = nx;
        nx = x;
    }
    free(nx.v);
    free(m.v);
    return st;
}

// ---------------------------------------------------------------- BPE

typedef struct {
    uint32_t id, len;
    int64_t prev, next;
} symbol;
typedef struct {
    uint32_t rank, id;
    size_t pos;
} qitem;

static int q_less(const qitem *a, const qitem *b) { return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos; }
static void q_push(qitem **q, size_t *n, size_t *cap, qitem x) {
    VEC_PUSH(*q, *n, *cap, x);
    size_t i = *n - 1;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!q_less(&(*q)[i], &(*q)[p])) break;
        qitem tmp = (*q)[i];
        (*q)[i] = (*q)[p];
        (*q)[p] = tmp;
        i = p;
    }
}
static qitem q_pop(qitem *q, size_t *n) {
    qitem top = q[0];
    q[0] = q[--*n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && q_less(&q[l], &q[m])) m = l;
        if (r < *n && q_less(&q[r], &q[m])) m = r;
        if (m == i) break;
        qitem tmp = q[i];
        q[i] = q[m];
        q[m] = tmp;
        i = m;
    }
    return top;
}

typedef struct {
    uint32_t *v;
    size_t n, cap;
} idvec;

static void sym_add(symbol **sy, size_t *n, size_t *cap, uint32_t id, uint32_t len) {
    symbol s = {id, len, (int64_t)*n - 1, -1};
    if (*n) (*sy)[*n - 1].next = (int64_t)*n;
    VEC_PUSH(*sy, *n, *cap, s);
}

static wgt_status bpe_word(const hf_tokenizer *t, const uint8_t *w, size_t n, idvec *out) {
    if (!n) return WGT_OK;
    if (t->ignore_merges) {
        int64_t id = strmap_get(&t->vocab, w, n);
        if (id >= 0) {
            VEC_PUSH(out->v, out->n, out->cap, (uint32_t)id);
            return WGT_OK;
        }
    }
    symbol *sy = NULL;
    size_t ns = 0, cs = 0;
    sbuf tmp = {0};
    int have_unk = 0;
    uint32_t unk_len = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_next(w + i, n - i, &cp);
        tmp.n = 0;
        if (i > 0 && t->prefix) sb_add(&tmp, t->prefix, strlen(t->prefix));
        sb_add(&tmp, w + i, k);
        if (i + k == n && t->suffix) sb_add(&tmp, t->suffix, strlen(t->suffix));
        int64_t id = strmap_get(&t->vocab, tmp.p, tmp.n);
        if (id >= 0) {
            if (have_unk) sym_add(&sy, &ns, &cs, (uint32_t)t->unk_id, unk_len), have_unk = 0;
            sym_add(&sy, &ns, &cs, (uint32_t)id, (uint32_t)k);
        } else {
            int done = 0;
            if (t->byte_fallback) {
                done = 1;
                for (size_t j = 0; j < tmp.n && done; j++) done = t->byte_ids[tmp.p[j]] >= 0;
                // the pending unknown is not flushed before byte tokens (as in `tokenizers`)
                if (done)
                    for (size_t j = 0; j < tmp.n; j++) sym_add(&sy, &ns, &cs, (uint32_t)t->byte_ids[tmp.p[j]], 1);
            }
            if (!done && t->unk_token) {
                if (t->unk_id < 0) {
                    free(sy);
                    free(tmp.p);
                    return wgt_fail(WGT_ERR_FORMAT, "the text needs the unknown token \"%s\", which is not in the "
                                    "tokenizer's vocabulary", t->unk_token);
                }
                if (have_unk && t->fuse_unk) unk_len += (uint32_t)k;
                else {
                    if (have_unk) sym_add(&sy, &ns, &cs, (uint32_t)t->unk_id, unk_len);
                    have_unk = 1;
                    unk_len = (uint32_t)k;
                }
            }
        }
        i += k;
    }
    if (have_unk) sym_add(&sy, &ns, &cs, (uint32_t)t->unk_id, unk_len);
    free(tmp.p);
    // merge by rank, lowest first, leftmost among equals
    qitem *q = NULL;
    size_t nq = 0, cq = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
        const merge_slot *m = mergemap_get(&t->merges, sy[i].id, sy[i + 1].id);
        if (m) q_push(&q, &nq, &cq, (qitem){m->rank, m->id, i});
    }
    while (nq) {
        qitem top = q_pop(q, &nq);
        symbol *cur = &sy[top.pos];
        if (cur->len == 0 || cur->next < 0) continue;
        size_t nx = (size_t)cur->next;
        symbol right = sy[nx];
        const merge_slot *m = mergemap_get(&t->merges, cur->id, right.id);
        if (!m || m->id != top.id) continue;
        cur->id = top.id;
        cur->len += right.len;
        cur->next = right.next;
        sy[nx].len = 0;
        if (right.next >= 0 && (size_t)right.next < ns) sy[right.next].prev = (int64_t)top.pos;
        if (cur->prev >= 0) {
            const merge_slot *pm = mergemap_get(&t->merges, sy[cur->prev].id, cur->id);
            if (pm) q_push(&q, &nq, &cq, (qitem){pm->rank, pm->id, (size_t)cur->prev});
        }
        if (cur->next >= 0 && (size_t)cur->next < ns) {
            const merge_slot *nm = mergemap_get(&t->merges, cur->id, sy[cur->next].id);
            if (nm) q_push(&q, &nq, &cq, (qitem){nm->rank, nm->id, top.pos});
        }
    }
    for (size_t i = 0; i < ns; i++)
        if (sy[i].len) VEC_PUSH(out->v, out->n, out->cap, sy[i].id);
    free(q);
    free(sy);
    return WGT_OK;
}

// ---------------------------------------------------------------- encode

wgt_status hf_tokenizer_encode(const hf_tokenizer *t, const uint8_t *bytes, size_t n, int add_special, uint32_t **ids,
                               size_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    size_t badpos;
    if (!utf8_check(bytes, n, &badpos))
        return wgt_fail(WGT_ERR_ARG, "the text is not valid UTF-8 (at byte offset %zu); Hugging Face tokenizers take "
                        "Unicode text only", badpos);
    sbuf ar = {0};
    sb_add(&ar, bytes, n);
    pieces a = {0}, b = {0};
    piece whole = {0, n, -1, 1};
    // 1. added tokens matched in the raw text
    if (t->has_raw) split_added(t, &t->raw_trie, &ar, &whole, &a);
    else if (n) VEC_PUSH(a.v, a.n, a.cap, whole);
    // 2. each remaining piece normalised, then the normalised added tokens split out of it
    wgt_status st = WGT_OK;
    for (size_t i = 0; i < a.n && st == WGT_OK; i++) {
        piece pc = a.v[i];
        if (pc.id >= 0) {
            VEC_PUSH(b.v, b.n, b.cap, pc);
            continue;
        }
        if (t->n_norm) {
            sbuf nb = {0};
            st = normalize(t, ar.p + pc.off, pc.len, &nb);
            pc.off = ar.n;
            pc.len = nb.n;
            sb_add(&ar, nb.p, nb.n);
            free(nb.p);
        }
        if (st != WGT_OK || !pc.len) continue;
        if (t->has_norm) split_added(t, &t->norm_trie, &ar, &pc, &b);
        else VEC_PUSH(b.v, b.n, b.cap, pc);
    }
    // 3. pre-tokeniser, 4. model
    if (st == WGT_OK) st = pretokenize(t, &ar, &b);
    idvec out = {0};
    if (add_special)
        for (size_t i = 0; i < t->n_tmpl_pre; i++) VEC_PUSH(out.v, out.n, out.cap, t->tmpl_pre[i]);
    for (size_t i = 0; i < b.n && st == WGT_OK; i++) {
        if (b.v[i].id >= 0) VEC_PUSH(out.v, out.n, out.cap, (uint32_t)b.v[i].id);
        else st = bpe_word(t, ar.p + b.v[i].off, b.v[i].len, &out);
    }
    // 5. post-processor
    if (add_special)
        for (size_t i = 0; i < t->n_tmpl_post; i++) VEC_PUSH(out.v, out.n, out.cap, t->tmpl_post[i]);
    free(ar.p);
    free(a.v);
    free(b.v);
    if (st != WGT_OK) {
        free(out.v);
        return st;
    }
    if (!out.v) out.v = wgt_malloc(sizeof *out.v);
    *ids = out.v;
    *n_ids = out.n;
    return WGT_OK;
}

// ---------------------------------------------------------------- decode

// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
static void utf8_lossy(sbuf *out, const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_valid_len(s + i, n - i, &cp);
        if (k) {
            sb_add(out, s + i, k);
            i += k;
            continue;
        }
        // the longest prefix of a valid sequence (the "maximal subpart")
        uint8_t c = s[i];
        size_t need = 0;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        size_t j = 1;
        if (need && i + 1 < n && s[i + 1] >= lo && s[i + 1] <= hi) {
            j = 2;
            while (j <= need && i + j < n && (s[i + j] & 0xC0) == 0x80) j++;
        }
        sb_add(out, "\xEF\xBF\xBD", 3);
        i += j;
    }
}

typedef struct {
    size_t *off, *len;
    size_t n, cap;
} toklist;

static void tl_push(toklist *l, size_t off, size_t len) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->off = realloc(l->off, l->cap * sizeof *l->off);
        l->len = realloc(l->len, l->cap * sizeof *l->len);
        WGT_ASSERT(l->off && l->len, "out of host memory");
    }
    l->off[l->n] = off;
    l->len[l->n++] = len;
}

static int parse_byte_token(const uint8_t *s, size_t n, uint8_t *byte) {
    // "<0xNN>" as Rust's u8::from_str_radix(&tok[3..5], 16) reads it (a leading '+' allowed)
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return 0;
    unsigned v = 0;
    size_t j = 3;
    if (s[3] == '+') j = 4;
    if (j == 5) return 0;
    for (; j < 5; j++) {
        int c = s[j], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return 0;
        v = v * 16 + (unsigned)d;
    }
    *byte = (uint8_t)v;
    return 1;
}

wgt_status hf_tokenizer_decode(const hf_tokenizer *t, const uint32_t *ids, size_t n, uint8_t **bytes, size_t *n_bytes) {
    *bytes = NULL;
    *n_bytes = 0;
    sbuf ar = {0};
    sb_reserve(&ar, 64);  // never a NULL arena, even for no ids or empty tokens
    toklist cur = {0}, nx = {0};
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if (id < t->size && t->added_by_id[id] >= 0) {
            const added_token *a = &t->added[t->added_by_id[id]];
            tl_push(&cur, ar.n, a->len);
            sb_add(&ar, a->content, a->len);
        } else if (id < t->model_size && t->tok_len[id] != UINT32_MAX) {
            tl_push(&cur, ar.n, t->tok_len[id]);
            sb_add(&ar, t->vocab.pool.p + t->tok_off[id], t->tok_len[id]);
        } else {
            free(ar.p);
            free(cur.off);
            free(cur.len);
            return wgt_fail(WGT_ERR_ARG, "id %u (position %zu) names no token of this tokenizer (ids 0..%u)", id, i,
                            t->size ? t->size - 1 : 0);
        }
    }
    if (!t->has_decoder) {  // tokens joined by spaces
        sbuf o = {0};
        for (size_t i = 0; i < cur.n; i++) {
            if (i) sb_byte(&o, ' ');
            sb_add(&o, ar.p + cur.off[i], cur.len[i]);
        }
        free(ar.p);
        ar = o;
        cur.n = 1;
        cur.off[0] = 0;
        cur.len[0] = o.n;
    }
    for (size_t d = 0; d < t->n_dec && t->has_decoder; d++) {
        const step *p = &t->dec[d];
        nx.n = 0;
        switch (p->kind) {
        case DEC_BYTELEVEL: {
            sbuf raw = {0};
            for (size_t i = 0; i < cur.n; i++) {
                const uint8_t *s = ar.p + cur.off[i];
                size_t l = cur.len[i], before = raw.n;
                int ok = 1;
                for (size_t j = 0; j < l && ok;) {
                    uint32_t cp;
                    j += utf8_next(s + j, l - j, &cp);
                    if (cp < 324 && t->char_byte[cp] >= 0) sb_byte(&raw, (uint8_t)t->char_byte[cp]);
                    else ok = 0;
                }
                if (!ok) {
                    raw.n = before;
                    sb_add(&raw, s, l);
                }
            }
            size_t off = ar.n;
            utf8_lossy(&ar, raw.p, raw.n);
            free(raw.p);
            tl_push(&nx, off, ar.n - off);
            break;
        }
        case DEC_REPLACE: {
            spans m = {0};
            for (size_t i = 0; i < cur.n; i++) {
                size_t off = ar.n, prev = 0;
                // the token is copied first: find_all reads it while the arena grows
                uint8_t *tok = wgt_malloc(cur.len[i] + 1);
                memcpy(tok, ar.p + cur.off[i], cur.len[i]);
                wgt_status st = find_all(&m, p->re, p->a, p->alen, tok, cur.len[i]);
                WGT_ASSERT(st == WGT_OK, "decoder regex failed on the tokenizer's own tokens");
                for (size_t j = 0; j < m.n; j += 2) {
                    sb_add(&ar, tok + prev, m.v[j] - prev);
                    sb_add(&ar, p->b, p->blen);
                    prev = m.v[j + 1];
                }
                sb_add(&ar, tok + prev, cur.len[i] - prev);
                free(tok);
                tl_push(&nx, off, ar.n - off);
            }
            free(m.v);
            break;
        }
        case DEC_BYTEFALLBACK: {
            sbuf pend = {0};
            for (size_t i = 0; i <= cur.n; i++) {
                uint8_t byte;
                if (i < cur.n && parse_byte_token(ar.p + cur.off[i], cur.len[i], &byte)) {
                    sb_byte(&pend, byte);
                    continue;
                }
                if (pend.n) {
                    size_t bad_at;
                    if (utf8_check(pend.p, pend.n, &bad_at)) {
                        size_t off = ar.n;
                        sb_add(&ar, pend.p, pend.n);
                        tl_push(&nx, off, pend.n);
                    } else
                        for (size_t j = 0; j < pend.n; j++) {
                            size_t off = ar.n;
                            sb_add(&ar, "\xEF\xBF\xBD", 3);
                            tl_push(&nx, off, 3);
                        }
                    pend.n = 0;
                }
                if (i < cur.n) tl_push(&nx, cur.off[i], cur.len[i]);
            }
            free(pend.p);
            break;
        }
        case DEC_FUSE: {
            size_t off = ar.n;
            for (size_t i = 0; i < cur.n; i++) {
                size_t o = cur.off[i], l = cur.len[i];
                sb_reserve(&ar, l + 1);
                memmove(ar.p + ar.n, ar.p + o, l);
                ar.n += l;
            }
            tl_push(&nx, off, ar.n - off);
            break;
        }
        case DEC_STRIP: {
            for (size_t i = 0; i < cur.n; i++) {
                const uint8_t *s = ar.p + cur.off[i];
                size_t l = cur.len[i], a = 0, e = l;
                for (size_t k = 0; k < p->start && a < l; k++) {
                    uint32_t cp;
                    size_t q = utf8_next(s + a, l - a, &cp);
                    if (cp != p->ch) break;
                    a += q;
                }
                for (size_t k = 0; k < p->stop && e > a; k++) {
                    size_t q = utf8_last_len(s, e);
                    uint32_t cp;
                    utf8_next(s + e - q, q, &cp);
                    if (cp != p->ch) break;
                    e -= q;
                }
                tl_push(&nx, cur.off[i] + a, e - a);
            }
            break;
        }
        case DEC_METASPACE: {
            // the replacement becomes a space, except in the first token unless the scheme is never
            for (size_t i = 0; i < cur.n; i++) {
                size_t off = ar.n, l = cur.len[i];
                uint8_t *tok = wgt_malloc(l + 1);
                memcpy(tok, ar.p + cur.off[i], l);
                for (size_t j = 0; j < l;) {
                    uint32_t cp;
                    size_t q = utf8_next(tok + j, l - j, &cp);
                    if (cp == p->ch) {
                        if (!(i == 0 && p->behavior != PREPEND_NEVER)) sb_byte(&ar, ' ');
                    } else sb_add(&ar, tok + j, q);
                    j += q;
                }
                free(tok);
                tl_push(&nx, off, ar.n - off);
            }
            break;
        }
        default: WGT_ASSERT(0, "unknown decoder step");
        }
        toklist x = cur;
        cur = nx;
        nx = x;
    }
    sbuf o = {0};
    for (size_t i = 0; i < cur.n; i++) sb_add(&o, ar.p + cur.off[i], cur.len[i]);
    free(ar.p);
    free(cur.off);
    free(cur.len);
    free(nx.off);
    free(nx.len);
    if (!o.p) o.p = wgt_malloc(1);
    *bytes = o.p;
    *n_bytes = o.n;
    return WGT_OK;
}

// ---------------------------------------------------------------- accessors

uint32_t hf_tokenizer_vocab_size(const hf_tokenizer *t) { return t->size; }
int64_t hf_tokenizer_token_id(const hf_tokenizer *t, const char *token) {
    size_t n = strlen(token);
    int64_t k = strmap_get(&t->added_map, (const uint8_t *)token, n);
    if (k >= 0) return t->added[k].id;
    return strmap_get(&t->vocab, (const uint8_t *)token, n);
}
int hf_tokenizer_is_special(const hf_tokenizer *t, uint32_t id) {
    return id < t->size && t->added_by_id[id] >= 0 && t->added[t->added_by_id[id]].special;
}
int64_t hf_tokenizer_bos_id(const hf_tokenizer *t) { return t->n_tmpl_pre ? (int64_t)t->tmpl_pre[t->n_tmpl_pre - 1] : -1; }
int64_t hf_tokenizer_eos_id(const hf_tokenizer *t) { return t->n_tmpl_post ? (int64_t)t->tmpl_post[0] : -1; }


// ---------------------------------------------------------------- loading

static const cJSON *jget(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static int jnull(const cJSON *v) { return !v || cJSON_IsNull(v); }

// Refuses a key of obj not in allowed (NULL-terminated): a field this implementation would ignore.
static wgt_status check_keys(const cJSON *obj, const char *what, const char *comp, const char *const *allowed) {
    for (const cJSON *c = obj->child; c; c = c->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++) ok = !strcmp(*a, c->string);
        if (!ok) return unsupported(what, "the field \"%s\" of %s", c->string, comp);
    }
    return WGT_OK;
}

static wgt_status get_bool(const cJSON *o, const char *k, int dflt, int *out, const char *what, const char *comp) {
    const cJSON *v = jget(o, k);
    if (!v) { *out = dflt; return WGT_OK; }
    if (!cJSON_IsBool(v)) return bad(what, "%s: \"%s\" must be true or false", comp, k);
    *out = cJSON_IsTrue(v);
    return WGT_OK;
}

static wgt_status get_str(const cJSON *o, const char *k, int optional, char **out, size_t *len, const char *what, const char *comp) {
    const cJSON *v = jget(o, k);
    *out = NULL;
    if (len) *len = 0;
    if (jnull(v) && optional) return WGT_OK;
    if (!cJSON_IsString(v)) return bad(what, "%s: \"%s\" must be a string", comp, k);
    *out = wgt_strdup(v->valuestring);
    if (len) *len = strlen(v->valuestring);
    return WGT_OK;
}

static const char *type_of(const cJSON *o) {
    const cJSON *ty = jget(o, "type");
    return cJSON_IsString(ty) ? ty->valuestring : NULL;
}

// A pattern object {"String": s} or {"Regex": r} into step s (a/alen or re).
static wgt_status get_pattern(const cJSON *o, step *s, const char *what, const char *comp) {
    const cJSON *p = jget(o, "pattern");
    if (!cJSON_IsObject(p) || !p->child || p->child->next || !cJSON_IsString(p->child))
        return bad(what, "%s: \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}", comp);
    const char *v = p->child->valuestring;
    if (!strcmp(p->child->string, "String")) {
        s->a = wgt_strdup(v);
        s->alen = strlen(v);
        return WGT_OK;
    }
    if (!strcmp(p->child->string, "Regex")) return regex_compile(&s->re, v, strlen(v), what);
    return unsupported(what, "the pattern kind \"%s\" of %s", p->child->string, comp);
}

static step *push_step(step **v, size_t *n) {
    WGT_ASSERT(*n < 1024, "too many steps");
    *v = realloc(*v, (*n + 1) * sizeof **v);
    WGT_ASSERT(*v, "out of host memory");
    step *s = &(*v)[(*n)++];
    memset(s, 0, sizeof *s);
    return s;
}

static wgt_status load_normalizer(hf_tokenizer *t, const cJSON *o, const char *what, int depth) {
    if (!cJSON_IsObject(o)) return bad(what, "\"normalizer\" must be an object or null");
    const char *ty = type_of(o);
    if (!ty) return bad(what, "a normalizer has no \"type\"");
    if (depth > 8) return bad(what, "normalizers nested more than 8 deep");
    if (!strcmp(ty, "Sequence")) {
        WGT_TRY(check_keys(o, what, "the normalizer Sequence", (const char *const[]){"type", "normalizers", NULL}));
        const cJSON *l = jget(o, "normalizers");
        if (!cJSON_IsArray(l)) return bad(what, "normalizer Sequence: \"normalizers\" must be an array");
        for (const cJSON *c = l->child; c; c = c->next) WGT_TRY(load_normalizer(t, c, what, depth + 1));
        return WGT_OK;
    }
    static const char *const nf[] = {"NFC", "NFD", "NFKC", "NFKD"};
    for (int k = 0; k < 4; k++)
        if (!strcmp(ty, nf[k])) {
            WGT_TRY(check_keys(o, what, ty, (const char *const[]){"type", NULL}));
            push_step(&t->norm, &t->n_norm)->kind = NORM_NFC + k;
            return WGT_OK;
        }
    if (!strcmp(ty, "Prepend")) {
        WGT_TRY(check_keys(o, what, "the normalizer Prepend", (const char *const[]){"type", "prepend", NULL}));
        step *s = push_step(&t->norm, &t->n_norm);
        s->kind = NORM_PREPEND;
        return get_str(o, "prepend", 0, &s->a, &s->alen, what, "normalizer Prepend");
    }
    if (!strcmp(ty, "Replace")) {
        WGT_TRY(check_keys(o, what, "the normalizer Replace", (const char *const[]){"type", "pattern", "content", NULL}));
        step *s = push_step(&t->norm, &t->n_norm);
        s->kind = NORM_REPLACE;
        WGT_TRY(get_pattern(o, s, what, "normalizer Replace"));
        return get_str(o, "content", 0, &s->b, &s->blen, what, "normalizer Replace");
    }
    return unsupported(what, "the normalizer \"%s\"", ty);
}

// Metaspace's replacement (one character) and prepend scheme, with the older add_prefix_space.
static wgt_status load_metaspace(const cJSON *o, step *s, const char *what, const char *comp) {
    const cJSON *r = jget(o, "replacement");
    uint32_t cp;
    size_t l = cJSON_IsString(r) ? strlen(r->valuestring) : 0;
    if (!l || utf8_valid_len((const uint8_t *)r->valuestring, l, &cp) != l || cp == ' ')
        return bad(what, "%s: \"replacement\" must be one character other than a space", comp);
    s->a = wgt_strdup(r->valuestring);
    s->alen = l;
    s->ch = cp;
    const cJSON *ps = jget(o, "prepend_scheme"), *aps = jget(o, "add_prefix_space");
    s->behavior = PREPEND_ALWAYS;
    if (!jnull(ps)) {
        if (!cJSON_IsString(ps)) return bad(what, "%s: \"prepend_scheme\" must be a string", comp);
        if (!strcmp(ps->valuestring, "always")) s->behavior = PREPEND_ALWAYS;
        else if (!strcmp(ps->valuestring, "first")) s->behavior = PREPEND_FIRST;
        else if (!strcmp(ps->valuestring, "never")) s->behavior = PREPEND_NEVER;
        else return unsupported(what, "the prepend_scheme \"%s\" of %s", ps->valuestring, comp);
    }
    if (!jnull(aps)) {
        if (!cJSON_IsBool(aps)) return bad(what, "%s: \"add_prefix_space\" must be true or false", comp);
        if (cJSON_IsFalse(aps)) {
            if (!jnull(ps) && s->behavior != PREPEND_NEVER)
                return bad(what, "%s: add_prefix_space false contradicts prepend_scheme \"%s\"", comp, ps->valuestring);
            s->behavior = PREPEND_NEVER;
        }
    }
    return WGT_OK;
}

static wgt_status load_pretokenizer(hf_tokenizer *t, const cJSON *o, const char *what, int depth) {
    if (!cJSON_IsObject(o)) return bad(what, "\"pre_tokenizer\" must be an object or null");
    const char *ty = type_of(o);
    if (!ty) return bad(what, "a pre-tokenizer has no \"type\"");
    if (depth > 8) return bad(what, "pre-tokenizers nested more than 8 deep");
    if (!strcmp(ty, "Sequence")) {
        WGT_TRY(check_keys(o, what, "the pre-tokenizer Sequence", (const char *const[]){"type", "pretokenizers", NULL}));
        const cJSON *l = jget(o, "pretokenizers");
        if (!cJSON_IsArray(l)) return bad(what, "pre-tokenizer Sequence: \"pretokenizers\" must be an array");
        for (const cJSON *c = l->child; c; c = c->next) WGT_TRY(load_pretokenizer(t, c, what, depth + 1));
        return WGT_OK;
    }
    if (!strcmp(ty, "Split")) {
        WGT_TRY(check_keys(o, what, "the pre-tokenizer Split", (const char *const[]){"type", "pattern", "behavior", "invert", NULL}));
        step *s = push_step(&t->pre, &t->n_pre);
        s->kind = PRE_SPLIT;
        WGT_TRY(get_pattern(o, s, what, "pre-tokenizer Split"));
        WGT_TRY(get_bool(o, "invert", 0, &s->invert, what, "pre-tokenizer Split"));
        const cJSON *b = jget(o, "behavior");
        static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
        if (!cJSON_IsString(b)) return bad(what, "pre-tokenizer Split: \"behavior\" must be a string");
        for (int k = 0; k < 5; k++)
            if (!strcmp(b->valuestring, names[k])) {
                s->behavior = k;
                return WGT_OK;
            }
        return unsupported(what, "the Split behavior \"%s\"", b->valuestring);
    }
    if (!strcmp(ty, "ByteLevel")) {
        WGT_TRY(check_keys(o, what, "the pre-tokenizer ByteLevel",
                           (const char *const[]){"type", "add_prefix_space", "trim_offsets", "use_regex", NULL}));
        step *s = push_step(&t->pre, &t->n_pre);
        s->kind = PRE_BYTELEVEL;
        int trim;
        WGT_TRY(get_bool(o, "trim_offsets", 1, &trim, what, "pre-tokenizer ByteLevel"));
        WGT_TRY(get_bool(o, "add_prefix_space", 1, &s->flag, what, "pre-tokenizer ByteLevel"));
        WGT_TRY(get_bool(o, "use_regex", 1, &s->flag2, what, "pre-tokenizer ByteLevel"));
        if (s->flag2 && !t->bytelevel_re) {
            static const char gpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
            WGT_TRY(regex_compile(&t->bytelevel_re, gpt2, strlen(gpt2), what));
        }
        return WGT_OK;
    }
    if (!strcmp(ty, "Digits")) {
        WGT_TRY(check_keys(o, what, "the pre-tokenizer Digits", (const char *const[]){"type", "individual_digits", NULL}));
        step *s = push_step(&t->pre, &t->n_pre);
        s->kind = PRE_DIGITS;
        return get_bool(o, "individual_digits", 0, &s->flag, what, "pre-tokenizer Digits");
    }
    if (!strcmp(ty, "Metaspace")) {
        WGT_TRY(check_keys(o, what, "the pre-tokenizer Metaspace",
                           (const char *const[]){"type", "replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep", NULL}));
        step *s = push_step(&t->pre, &t->n_pre);
        s->kind = PRE_METASPACE;
        WGT_TRY(load_metaspace(o, s, what, "pre-tokenizer Metaspace"));
        return get_bool(o, "split", 1, &s->flag, what, "pre-tokenizer Metaspace");
    }
    return unsupported(what, "the pre-tokenizer \"%s\"", ty);
}

static void ids_prepend(uint32_t **v, size_t *n, const uint32_t *x, size_t k) {
    uint32_t *nv = wgt_malloc((*n + k + 1) * sizeof *nv);
    if (k) memcpy(nv, x, k * sizeof *nv);
    if (*n) memcpy(nv + k, *v, *n * sizeof *nv);
    free(*v);
    *v = nv;
    *n += k;
}
static void ids_append(uint32_t **v, size_t *n, const uint32_t *x, size_t k) {
    *v = realloc(*v, (*n + k + 1) * sizeof **v);
    WGT_ASSERT(*v, "out of host memory");
    if (k) memcpy(*v + *n, x, k * sizeof **v);
    *n += k;
}

static wgt_status load_postprocessor(hf_tokenizer *t, const cJSON *o, const char *what, int depth) {
    if (!cJSON_IsObject(o)) return bad(what, "\"post_processor\" must be an object or null");
    const char *ty = type_of(o);
    if (!ty) return bad(what, "a post-processor has no \"type\"");
    if (depth > 8) return bad(what, "post-processors nested more than 8 deep");
    if (!strcmp(ty, "Sequence")) {
        WGT_TRY(check_keys(o, what, "the post-processor Sequence", (const char *const[]){"type", "processors", NULL}));
        const cJSON *l = jget(o, "processors");
        if (!cJSON_IsArray(l)) return bad(what, "post-processor Sequence: \"processors\" must be an array");
        for (const cJSON *c = l->child; c; c = c->next) WGT_TRY(load_postprocessor(t, c, what, depth + 1));
        return WGT_OK;
    }
    if (!strcmp(ty, "ByteLevel")) {
        // trims offsets only: no effect on ids
        return check_keys(o, what, "the post-processor ByteLevel",
                          (const char *const[]){"type", "add_prefix_space", "trim_offsets", "use_regex", NULL});
    }
    if (!strcmp(ty, "RobertaProcessing") || !strcmp(ty, "BertProcessing")) {
        WGT_TRY(check_keys(o, what, ty, (const char *const[]){"type", "sep", "cls", "trim_offsets", "add_prefix_space", NULL}));
        uint32_t id[2];
        const char *k2[2] = {"cls", "sep"};
        for (int k = 0; k < 2; k++) {
            const cJSON *p = jget(o, k2[k]);
            int64_t v;
            if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || !cJSON_IsString(p->child) ||
                !json_int_in(p->child->next, 0, HF_MAX_ID, &v))
                return bad(what, "%s: \"%s\" must be [token, id] with an id in 0..%u", ty, k2[k], HF_MAX_ID);
            id[k] = (uint32_t)v;
        }
        ids_prepend(&t->tmpl_pre, &t->n_tmpl_pre, &id[0], 1);
        ids_append(&t->tmpl_post, &t->n_tmpl_post, &id[1], 1);
        return WGT_OK;
    }
    if (!strcmp(ty, "TemplateProcessing")) {
        WGT_TRY(check_keys(o, what, "the post-processor TemplateProcessing",
                           (const char *const[]){"type", "single", "pair", "special_tokens", NULL}));
        const cJSON *single = jget(o, "single"), *sp = jget(o, "special_tokens");
        if (!cJSON_IsArray(single) || !cJSON_IsObject(sp))
            return bad(what, "TemplateProcessing: \"single\" must be an array and \"special_tokens\" an object");
        uint32_t *pre = NULL, *post = NULL;
        size_t npre = 0, npost = 0;
        int seen_a = 0;
        wgt_status st = WGT_OK;
        for (const cJSON *it = single->child; it && st == WGT_OK; it = it->next) {
            const cJSON *s = jget(it, "SpecialToken"), *q = jget(it, "Sequence");
            if (cJSON_IsObject(q) && !s && cJSON_GetArraySize(it) == 1) {
                const cJSON *id = jget(q, "id");
                if (!cJSON_IsString(id) || strcmp(id->valuestring, "A") || seen_a)
                    st = bad(what, "TemplateProcessing: \"single\" must hold the sequence \"A\" once");
                seen_a = 1;
                continue;
            }
            if (!cJSON_IsObject(s) || q || cJSON_GetArraySize(it) != 1) {
                st = bad(what, "TemplateProcessing: each item of \"single\" must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
                break;
            }
            const cJSON *name = jget(s, "id");
            const cJSON *def = cJSON_IsString(name) ? jget(sp, name->valuestring) : NULL;
            const cJSON *ids = def ? jget(def, "ids") : NULL;
            if (!cJSON_IsArray(ids)) {
                st = bad(what, "TemplateProcessing: the special token \"%s\" is not defined in \"special_tokens\" with its \"ids\"",
                         cJSON_IsString(name) ? name->valuestring : "?");
                break;
            }
            for (const cJSON *x = ids->child; x; x = x->next) {
                int64_t v;
                if (!json_int_in(x, 0, HF_MAX_ID, &v)) {
                    st = bad(what, "TemplateProcessing: an id of \"%s\" is not an integer in 0..%u", name->valuestring, HF_MAX_ID);
                    break;
                }
                uint32_t u = (uint32_t)v;
                if (seen_a) ids_append(&post, &npost, &u, 1);
                else ids_append(&pre, &npre, &u, 1);
            }
        }
        if (st == WGT_OK && !seen_a) st = bad(what, "TemplateProcessing: \"single\" has no sequence \"A\"");
        if (st == WGT_OK) {
            ids_prepend(&t->tmpl_pre, &t->n_tmpl_pre, pre, npre);
            ids_append(&t->tmpl_post, &t->n_tmpl_post, post, npost);
        }
        free(pre);
        free(post);
        return st;
    }
    return unsupported(what, "the post-processor \"%s\"", ty);
}

static wgt_status load_decoder(hf_tokenizer *t, const cJSON *o, const char *what, int depth) {
    if (!cJSON_IsObject(o)) return bad(what, "\"decoder\" must be an object or null");
    const char *ty = type_of(o);
    if (!ty) return bad(what, "a decoder has no \"type\"");
    if (depth > 8) return bad(what, "decoders nested more than 8 deep");
    if (!strcmp(ty, "Sequence")) {
        WGT_TRY(check_keys(o, what, "the decoder Sequence", (const char *const[]){"type", "decoders", NULL}));
        const cJSON *l = jget(o, "decoders");
        if (!cJSON_IsArray(l)) return bad(what, "decoder Sequence: \"decoders\" must be an array");
        for (const cJSON *c = l->child; c; c = c->next) WGT_TRY(load_decoder(t, c, what, depth + 1));
        return WGT_OK;
    }
    if (!strcmp(ty, "ByteLevel")) {
        WGT_TRY(check_keys(o, what, "the decoder ByteLevel",
                           (const char *const[]){"type", "add_prefix_space", "trim_offsets", "use_regex", NULL}));
        push_step(&t->dec, &t->n_dec)->kind = DEC_BYTELEVEL;
        return WGT_OK;
    }
    if (!strcmp(ty, "ByteFallback") || !strcmp(ty, "Fuse")) {
        WGT_TRY(check_keys(o, what, ty, (const char *const[]){"type", NULL}));
        push_step(&t->dec, &t->n_dec)->kind = ty[0] == 'B' ? DEC_BYTEFALLBACK : DEC_FUSE;
        return WGT_OK;
    }
    if (!strcmp(ty, "Replace")) {
        WGT_TRY(check_keys(o, what, "the decoder Replace", (const char *const[]){"type", "pattern", "content", NULL}));
        step *s = push_step(&t->dec, &t->n_dec);
        s->kind = DEC_REPLACE;
        WGT_TRY(get_pattern(o, s, what, "decoder Replace"));
        return get_str(o, "content", 0, &s->b, &s->blen, what, "decoder Replace");
    }
    if (!strcmp(ty, "Strip")) {
        WGT_TRY(check_keys(o, what, "the decoder Strip", (const char *const[]){"type", "content", "start", "stop", NULL}));
        step *s = push_step(&t->dec, &t->n_dec);
        s->kind = DEC_STRIP;
        const cJSON *c = jget(o, "content");
        uint32_t cp;
        size_t l = cJSON_IsString(c) ? strlen(c->valuestring) : 0;
        if (!l || utf8_valid_len((const uint8_t *)c->valuestring, l, &cp) != l)
            return bad(what, "decoder Strip: \"content\" must be one character");
        s->ch = cp;
        int64_t a, b;
        if (!json_int_in(jget(o, "start"), 0, 1 << 20, &a) || !json_int_in(jget(o, "stop"), 0, 1 << 20, &b))
            return bad(what, "decoder Strip: \"start\" and \"stop\" must be integers in 0..%d", 1 << 20);
        s->start = (size_t)a;
        s->stop = (size_t)b;
        return WGT_OK;
    }
    if (!strcmp(ty, "Metaspace")) {
        WGT_TRY(check_keys(o, what, "the decoder Metaspace",
                           (const char *const[]){"type", "replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep", NULL}));
        step *s = push_step(&t->dec, &t->n_dec);
        s->kind = DEC_METASPACE;
        return load_metaspace(o, s, what, "decoder Metaspace");
    }
    return unsupported(what, "the decoder \"%s\"", ty);
}

static wgt_status load_model(hf_tokenizer *t, const cJSON *m, const char *what) {
    if (!cJSON_IsObject(m)) return bad(what, "\"model\" must be an object");
    const char *ty = type_of(m);
    if (!ty) return unsupported(what, "a model without \"type\"");
    if (strcmp(ty, "BPE")) return unsupported(what, "the model \"%s\" (only BPE is)", ty);
    WGT_TRY(check_keys(m, what, "the BPE model",
                       (const char *const[]){"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                                             "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges", NULL}));
    const cJSON *d = jget(m, "dropout");
    if (!jnull(d) && !(cJSON_IsNumber(d) && d->valuedouble == 0.0)) return unsupported(what, "BPE dropout");
    WGT_TRY(get_str(m, "unk_token", 1, &t->unk_token, NULL, what, "the BPE model"));
    WGT_TRY(get_str(m, "continuing_subword_prefix", 1, &t->prefix, NULL, what, "the BPE model"));
    WGT_TRY(get_str(m, "end_of_word_suffix", 1, &t->suffix, NULL, what, "the BPE model"));
    WGT_TRY(get_bool(m, "fuse_unk", 0, &t->fuse_unk, what, "the BPE model"));
    WGT_TRY(get_bool(m, "byte_fallback", 0, &t->byte_fallback, what, "the BPE model"));
    WGT_TRY(get_bool(m, "ignore_merges", 0, &t->ignore_merges, what, "the BPE model"));
    if (!t->vocab_seen) return bad(what, "the BPE model has no \"vocab\"");
    size_t nv = t->vocab.n;
    uint32_t maxid = t->vocab_max;
    t->model_size = nv ? maxid + 1 : 0;
    t->tok_off = wgt_malloc(((size_t)t->model_size + 1) * sizeof *t->tok_off);
    t->tok_len = wgt_malloc(((size_t)t->model_size + 1) * sizeof *t->tok_len);
    for (size_t i = 0; i < t->model_size; i++) t->tok_len[i] = UINT32_MAX;
    for (size_t e = 0; e < t->vocab.n; e++) {
        uint32_t id = t->vocab.id[e];
        if (t->tok_len[id] != UINT32_MAX)
            return bad(what, "the vocabulary gives the id %u to two tokens (\"%.60s\" and \"%.60s\")", id,
                       (const char *)t->vocab.pool.p + t->tok_off[id], (const char *)t->vocab.pool.p + t->vocab.off[e]);
        t->tok_off[id] = t->vocab.off[e];
        t->tok_len[id] = t->vocab.len[e];
    }
    t->unk_id = t->unk_token ? strmap_get(&t->vocab, (const uint8_t *)t->unk_token, strlen(t->unk_token)) : -1;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_ids[b] = strmap_get(&t->vocab, (const uint8_t *)name, 6);
    }
    if (!t->merges_seen) return WGT_OK;
    size_t nm = t->n_mrec / 4;
    mergemap_init(&t->merges, nm);
    size_t plen = t->prefix ? strlen(t->prefix) : 0;
    sbuf tmp = {0};
    uint32_t rank = 0;
    wgt_status st = WGT_OK;
    for (size_t r = 0; r < nm && st == WGT_OK; r++, rank++) {
        const uint32_t *rec = t->mrec + 4 * r;
        const char *a = (const char *)t->mpool.p + rec[0], *b;
        size_t la = rec[1], lb;
        char *owned = NULL;
        if (rec[3] == UINT32_MAX) {
            const char *sp = memchr(a, ' ', la);
            if (!sp) {
                st = bad(what, "merge #%u \"%.*s\" is not two tokens separated by a space", rank, (int)(la > 80 ? 80 : la), a);
                break;
            }
            b = sp + 1;
            lb = la - (size_t)(b - a);
            la = (size_t)(sp - a);
        } else {
            b = (const char *)t->mpool.p + rec[2];
            lb = rec[3];
        }
        int64_t ia = strmap_get(&t->vocab, (const uint8_t *)a, la), ib = strmap_get(&t->vocab, (const uint8_t *)b, lb);
        if (ia < 0 || ib < 0) {
            st = bad(what, "merge #%u: the token \"%.*s\" is not in the vocabulary", rank, (int)(ia < 0 ? (la > 80 ? 80 : la) : (lb > 80 ? 80 : lb)),
                     ia < 0 ? a : b);
        } else if (lb < plen) {
            st = bad(what, "merge #%u: the right token \"%.80s\" is shorter than the continuing-subword prefix", rank, b);
        } else {
            tmp.n = 0;
            sb_add(&tmp, a, la);
            sb_add(&tmp, b + plen, lb - plen);
            int64_t nid = strmap_get(&t->vocab, tmp.p, tmp.n);
            if (nid < 0) st = bad(what, "merge #%u: the merged token \"%.*s\" is not in the vocabulary", rank, (int)(tmp.n > 80 ? 80 : tmp.n), (const char *)tmp.p);
            else mergemap_put(&t->merges, (uint32_t)ia, (uint32_t)ib, rank, (uint32_t)nid);
        }
        free(owned);
    }
    free(tmp.p);
    return st;
}

static wgt_status load_added(hf_tokenizer *t, const cJSON *l, const char *what) {
    if (jnull(l)) return WGT_OK;
    if (!cJSON_IsArray(l)) return bad(what, "\"added_tokens\" must be an array");
    size_t n = 0;
    for (const cJSON *c = l->child; c; c = c->next) n++;
    if (n > (size_t)HF_MAX_ID + 1) return bad(what, "%zu added tokens, more than %u", n, HF_MAX_ID + 1);
    t->added = wgt_calloc(n + 1, sizeof *t->added);
    strmap_init(&t->added_map, n);
    uint32_t vocab_len = (uint32_t)t->vocab.n;
    int64_t max_added = -1;
    for (const cJSON *c = l->child; c; c = c->next) {
        if (!cJSON_IsObject(c)) return bad(what, "added token #%zu is not an object", t->n_added);
        WGT_TRY(check_keys(c, what, "an added token",
                           (const char *const[]){"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special", NULL}));
        added_token *a = &t->added[t->n_added];
        int64_t id;
        const cJSON *ct = jget(c, "content");
        if (!cJSON_IsString(ct) || !ct->valuestring[0]) return bad(what, "added token #%zu has no \"content\" string", t->n_added);
        if (!json_int_in(jget(c, "id"), 0, HF_MAX_ID, &id))
            return bad(what, "the added token \"%.80s\" has no integer \"id\" in 0..%u", ct->valuestring, HF_MAX_ID);
        a->content = wgt_strdup(ct->valuestring);
        a->len = strlen(a->content);
        t->n_added++;
        WGT_TRY(get_bool(c, "special", 0, &a->special, what, "an added token"));
        WGT_TRY(get_bool(c, "single_word", 0, &a->single_word, what, "an added token"));
        WGT_TRY(get_bool(c, "lstrip", 0, &a->lstrip, what, "an added token"));
        WGT_TRY(get_bool(c, "rstrip", 0, &a->rstrip, what, "an added token"));
        WGT_TRY(get_bool(c, "normalized", !a->special, &a->normalized, what, "an added token"));
        // the id `tokenizers` gives it: the vocabulary's, else one past the last added one
        int64_t want = strmap_get(&t->vocab, (const uint8_t *)a->content, a->len);
        if (want < 0)
            want = max_added < 0 ? vocab_len : ((uint64_t)max_added >= vocab_len || !vocab_len ? max_added + 1 : vocab_len);
        if (want != id)
            return bad(what, "the added token \"%.80s\" has the id %lld but Hugging Face tokenizers would give it %lld (the id "
                       "of the same text in the vocabulary, or the next one after the vocabulary and the added tokens before it)",
                       a->content, (long long)id, (long long)want);
        if (!strmap_put(&t->added_map, (const uint8_t *)a->content, a->len, (uint32_t)(t->n_added - 1)))
            return bad(what, "the added token \"%.80s\" is listed twice", a->content);
        a->id = (uint32_t)id;
        if (id > max_added) max_added = id;
    }
    return WGT_OK;
}


// ---------------------------------------------------------------- the file, streamed

// tokenizer.json is read in one pass: the model's "vocab" and "merges" (nearly all of the file:
// 262k tokens and 514k merges for Gemma-3) go straight into the hash tables and a string pool,
// every other value is handed, as its own text, to the strict JSON parser. Building a cJSON tree
// of the whole file costs seconds in allocations; this costs a fraction of one. The scanner
// checks what RFC 8259 asks of the parts it reads itself (UTF-8, escapes, no lone surrogates,
// no NUL); json_parse_strict checks the rest.
typedef struct {
    const uint8_t *p;
    size_t n, i;
    const char *what;
} jscan;

static wgt_status js_err(jscan *js, const char *msg) {
    return wgt_fail(WGT_ERR_FORMAT, "%s is not valid JSON: %s at byte %zu", js->what, msg, js->i);
}
static void js_ws(jscan *js) {
    while (js->i < js->n && (js->p[js->i] == ' ' || js->p[js->i] == '\t' || js->p[js->i] == '\n' || js->p[js->i] == '\r')) js->i++;
}
static int js_peek(jscan *js) {
    js_ws(js);
    return js->i < js->n ? js->p[js->i] : -1;
}
static wgt_status js_expect(jscan *js, char c) {
    if (js_peek(js) != c) {
        char m[32];
        snprintf(m, sizeof m, "expected '%c'", c);
        return js_err(js, m);
    }
    js->i++;
    return WGT_OK;
}
static int hex4(const uint8_t *p, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        int c = p[k], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return 0;
        *v = *v * 16 + (uint32_t)d;
    }
    return 1;
}
// A string at the cursor, decoded onto the end of out.
static wgt_status js_string(jscan *js, sbuf *out) {
    if (js_peek(js) != '"') return js_err(js, "expected a string");
    js->i++;
    for (;;) {
        if (js->i >= js->n) return js_err(js, "unterminated string");
        uint8_t c = js->p[js->i];
        if (c == '"') {
            js->i++;
            return WGT_OK;
        }
        if (c < 0x20) return js_err(js, "raw control character in a string");
        if (c == '\\') {
            if (js->i + 1 >= js->n) return js_err(js, "unterminated string");
            uint8_t e = js->p[js->i + 1];
            if (e != 'u') {
                uint8_t d;
                switch (e) {
                case '"': d = '"'; break;
                case '\\': d = '\\'; break;
                case '/': d = '/'; break;
                case 'b': d = '\b'; break;
                case 'f': d = '\f'; break;
                case 'n': d = '\n'; break;
                case 'r': d = '\r'; break;
                case 't': d = '\t'; break;
                default: return js_err(js, "bad escape in a string");
                }
                sb_byte(out, d);
                js->i += 2;
                continue;
            }
            uint32_t v, lo;
            if (js->i + 6 > js->n || !hex4(js->p + js->i + 2, &v)) return js_err(js, "bad \\u escape");
            js->i += 6;
            if (v >= 0xDC00 && v <= 0xDFFF) return js_err(js, "lone low surrogate");
            if (v >= 0xD800 && v <= 0xDBFF) {
                if (js->i + 6 > js->n || js->p[js->i] != '\\' || js->p[js->i + 1] != 'u' || !hex4(js->p + js->i + 2, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return js_err(js, "lone high surrogate");
                js->i += 6;
                v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (!v) return js_err(js, "\\u0000 in a string");
            sb_cp(out, v);
            continue;
        }
        uint32_t cp;
        size_t k = utf8_valid_len(js->p + js->i, js->n - js->i, &cp);
        if (!k) return js_err(js, "invalid UTF-8");
        sb_add(out, js->p + js->i, k);
        js->i += k;
    }
}
// Skips any value (its text is checked later by json_parse_strict).
static wgt_status js_skip(jscan *js) {
    int depth = 0;
    js_ws(js);
    size_t start = js->i;
    for (;;) {
        if (js->i >= js->n) return js_err(js, "unexpected end");
        uint8_t c = js->p[js->i];
        if (c == '"') {
            js->i++;
            while (js->i < js->n && js->p[js->i] != '"') js->i += js->p[js->i] == '\\' ? 2 : 1;
            if (js->i >= js->n) return js_err(js, "unterminated string");
            js->i++;
        } else if (c == '{' || c == '[') {
            if (++depth > JSON_MAX_DEPTH) return js_err(js, "nested too deeply");
            js->i++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) break;
            depth--;
            js->i++;
        } else if (c == ',' && depth == 0) break;
        else js->i++;
        if (depth == 0 && js->i > start && (c == '"' || c == '}' || c == ']')) break;
    }
    if (js->i == start) return js_err(js, "missing value");
    return WGT_OK;
}
// Parses the skipped value at [start, js->i) and adds it to obj under key.
static wgt_status js_capture(jscan *js, cJSON *obj, const char *key) {
    js_ws(js);
    size_t start = js->i;
    WGT_TRY(js_skip(js));
    if (cJSON_GetObjectItemCaseSensitive(obj, key)) return wgt_fail(WGT_ERR_FORMAT, "%s has the key \"%s\" twice in one object", js->what, key);
    cJSON *v;
    WGT_TRY(json_parse_strict(&v, (const char *)js->p + start, js->i - start, 0, js->what));
    cJSON_AddItemToObject(obj, key, v);
    return WGT_OK;
}

static wgt_status js_vocab(jscan *js, hf_tokenizer *t) {
    if (t->vocab_seen) return wgt_fail(WGT_ERR_FORMAT, "%s has the key \"vocab\" twice in one object", js->what);
    t->vocab_seen = 1;
    if (js_peek(js) != '{') return bad(js->what, "the BPE model's \"vocab\" must be an object of token: id");
    js->i++;
    strmap_init(&t->vocab, 1 << 16);
    sbuf key = {0};
    wgt_status st = WGT_OK;
    if (js_peek(js) == '}') js->i++;
    else
        for (;;) {
            key.n = 0;
            if ((st = js_string(js, &key)) != WGT_OK || (st = js_expect(js, ':')) != WGT_OK) break;
            js_ws(js);
            uint64_t v = 0;
            size_t d0 = js->i;
            while (js->i < js->n && js->p[js->i] >= '0' && js->p[js->i] <= '9' && v <= HF_MAX_ID) v = v * 10 + (js->p[js->i++] - '0');
            int c = js->i < js->n ? js->p[js->i] : -1;
            if (js->i == d0 || v > HF_MAX_ID || (js->i - d0 > 1 && js->p[d0] == '0') || c == '.' || c == 'e' || c == 'E' ||
                (c >= '0' && c <= '9')) {
                st = bad(js->what, "the vocabulary entry \"%.*s\" has no integer id in 0..%u", (int)(key.n > 80 ? 80 : key.n),
                         (const char *)key.p, HF_MAX_ID);
                break;
            }
            if (t->vocab.n > HF_MAX_ID) {
                st = bad(js->what, "the vocabulary has more than %u entries", HF_MAX_ID + 1);
                break;
            }
            if (!strmap_put(&t->vocab, key.p, key.n, (uint32_t)v)) {
                st = wgt_fail(WGT_ERR_FORMAT, "%s has the key \"%.*s\" twice in one object (the vocabulary)", js->what,
                              (int)(key.n > 80 ? 80 : key.n), (const char *)key.p);
                break;
            }
            if (v > t->vocab_max) t->vocab_max = (uint32_t)v;
            int n = js_peek(js);
            js->i++;
            if (n == '}') break;
            if (n != ',') {
                js->i--;
                st = js_err(js, "expected ',' or '}'");
                break;
            }
        }
    free(key.p);
    return st;
}

static wgt_status js_merges(jscan *js, hf_tokenizer *t) {
    if (t->merges_seen) return wgt_fail(WGT_ERR_FORMAT, "%s has the key \"merges\" twice in one object", js->what);
    t->merges_seen = 1;
    int c = js_peek(js);
    if (c == 'n' && js->i + 4 <= js->n && !memcmp(js->p + js->i, "null", 4)) {
        js->i += 4;
        t->merges_seen = 0;
        return WGT_OK;
    }
    if (c != '[') return bad(js->what, "the BPE model's \"merges\" must be an array");
    js->i++;
    if (js_peek(js) == ']') {
        js->i++;
        return WGT_OK;
    }
    for (size_t k = 0;; k++) {
        if (k >= (1u << 26)) return bad(js->what, "more than %u merges", 1u << 26);
        WGT_ASSERT(t->mpool.n < UINT32_MAX / 2, "merges over 2 GB");
        uint32_t rec[4];
        rec[0] = (uint32_t)t->mpool.n;
        c = js_peek(js);
        if (c == '"') {
            WGT_TRY(js_string(js, &t->mpool));
            rec[1] = (uint32_t)(t->mpool.n - rec[0]);
            rec[2] = 0;
            rec[3] = UINT32_MAX;
        } else if (c == '[') {
            js->i++;
            if (js_peek(js) != '"') return bad(js->what, "merge #%zu is neither \"a b\" nor [\"a\", \"b\"]", k);
            WGT_TRY(js_string(js, &t->mpool));
            rec[1] = (uint32_t)(t->mpool.n - rec[0]);
            if (js_peek(js) != ',') return bad(js->what, "merge #%zu is neither \"a b\" nor [\"a\", \"b\"]", k);
            js->i++;
            rec[2] = (uint32_t)t->mpool.n;
            if (js_peek(js) != '"') return bad(js->what, "merge #%zu is neither \"a b\" nor [\"a\", \"b\"]", k);
            WGT_TRY(js_string(js, &t->mpool));
            rec[3] = (uint32_t)(t->mpool.n - rec[2]);
            if (js_peek(js) != ']') return bad(js->what, "merge #%zu is neither \"a b\" nor [\"a\", \"b\"]", k);
            js->i++;
        } else
            return bad(js->what, "merge #%zu is neither \"a b\" nor [\"a\", \"b\"]", k);
        for (int q = 0; q < 4; q++) VEC_PUSH(t->mrec, t->n_mrec, t->cap_mrec, rec[q]);
        c = js_peek(js);
        js->i++;
        if (c == ']') return WGT_OK;
        if (c != ',') {
            js->i--;
            return js_err(js, "expected ',' or ']'");
        }
    }
}

// An object at the cursor, each member captured into a new cJSON object, except those the
// model's vocab / merges readers take (when model is set).
static wgt_status js_object(jscan *js, hf_tokenizer *t, int model, cJSON **out) {
    *out = cJSON_CreateObject();
    WGT_ASSERT(*out, "out of host memory");
    if (js_peek(js) != '{') return js_err(js, "expected an object");
    js->i++;
    if (js_peek(js) == '}') {
        js->i++;
        return WGT_OK;
    }
    sbuf key = {0};
    wgt_status st = WGT_OK;
    for (;;) {
        key.n = 0;
        if ((st = js_string(js, &key)) != WGT_OK || (st = js_expect(js, ':')) != WGT_OK) break;
        sb_byte(&key, 0);
        const char *k = (const char *)key.p;
        if (model && !strcmp(k, "vocab") && js_peek(js) == '{') st = js_vocab(js, t);
        else if (model && !strcmp(k, "merges")) st = js_merges(js, t);
        else if (!model && !strcmp(k, "model") && js_peek(js) == '{') {
            if (cJSON_GetObjectItemCaseSensitive(*out, "model")) st = wgt_fail(WGT_ERR_FORMAT, "%s has the key \"model\" twice", js->what);
            cJSON *m = NULL;
            if (st == WGT_OK) st = js_object(js, t, 1, &m);
            if (m) cJSON_AddItemToObject(*out, "model", m);
        } else st = js_capture(js, *out, k);
        if (st != WGT_OK) break;
        int c = js_peek(js);
        js->i++;
        if (c == '}') break;
        if (c != ',') {
            js->i--;
            st = js_err(js, "expected ',' or '}'");
            break;
        }
    }
    free(key.p);
    return st;
}

wgt_status hf_tokenizer_load_text(hf_tokenizer **out, const char *text, size_t n, const char *what) {
    *out = NULL;
    hf_tokenizer *t = wgt_calloc(1, sizeof *t);
    t->unk_id = -1;
    jscan js = {(const uint8_t *)text, n, 0, what};
    cJSON *root = NULL;
    wgt_status st = WGT_OK;
    if (js_peek(&js) != '{') st = bad(what, "the top level must be a JSON object");
    if (st == WGT_OK) st = js_object(&js, t, 0, &root);
    if (st == WGT_OK && js_peek(&js) != -1) st = js_err(&js, "data after the JSON value");
    if (st == WGT_OK)
        st = check_keys(root, what, "tokenizer.json",
                        (const char *const[]){"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                                              "model", "post_processor", "decoder", NULL});
    if (st == WGT_OK && !jnull(jget(root, "truncation"))) st = unsupported(what, "truncation (set \"truncation\": null)");
    if (st == WGT_OK && !jnull(jget(root, "padding"))) st = unsupported(what, "padding (set \"padding\": null)");
    if (st == WGT_OK && !cJSON_IsObject(jget(root, "model"))) st = bad(what, "there is no \"model\" object");
    if (st == WGT_OK) st = load_model(t, jget(root, "model"), what);
    if (st == WGT_OK && !jnull(jget(root, "normalizer"))) st = load_normalizer(t, jget(root, "normalizer"), what, 0);
    if (st == WGT_OK && !jnull(jget(root, "pre_tokenizer"))) st = load_pretokenizer(t, jget(root, "pre_tokenizer"), what, 0);
    if (st == WGT_OK && !jnull(jget(root, "post_processor"))) st = load_postprocessor(t, jget(root, "post_processor"), what, 0);
    if (st == WGT_OK && !jnull(jget(root, "decoder"))) {
        t->has_decoder = 1;
        st = load_decoder(t, jget(root, "decoder"), what, 0);
    }
    if (st == WGT_OK) st = load_added(t, jget(root, "added_tokens"), what);
    cJSON_Delete(root);
    if (st == WGT_OK) {
        // sizes and the id -> added token table
        t->size = t->model_size;
        for (size_t i = 0; i < t->n_added; i++)
            if (t->added[i].id + 1 > t->size) t->size = t->added[i].id + 1;
        t->added_by_id = wgt_malloc(((size_t)t->size + 1) * sizeof *t->added_by_id);
        for (size_t i = 0; i < t->size; i++) t->added_by_id[i] = -1;
        for (size_t i = 0; i < t->n_added; i++) t->added_by_id[t->added[i].id] = (int32_t)i;
        // the tries: contents as written, or normalised for the "normalized" ones
        trie_init(&t->raw_trie);
        trie_init(&t->norm_trie);
        for (size_t i = 0; i < t->n_added && st == WGT_OK; i++) {
            added_token *a = &t->added[i];
            if (!a->normalized || !t->n_norm) {
                // a normalized token with no normaliser is matched in the same (unchanged) text
                trie_add(a->normalized ? &t->norm_trie : &t->raw_trie, (const uint8_t *)a->content, a->len, (int32_t)i);
                *(a->normalized ? &t->has_norm : &t->has_raw) = 1;
                continue;
            }
            sbuf nb = {0};
            st = normalize(t, (const uint8_t *)a->content, a->len, &nb);
            if (st == WGT_OK && nb.n) {
                trie_add(&t->norm_trie, nb.p, nb.n, (int32_t)i);
                t->has_norm = 1;
            }
            free(nb.p);
        }
        for (int b = 0, k = 0; b < 256; b++) {
            int self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
            t->byte_char[b] = self ? (uint32_t)b : (uint32_t)(256 + k++);
        }
        for (int c = 0; c < 324; c++) t->char_byte[c] = -1;
        for (int b = 0; b < 256; b++) t->char_byte[t->byte_char[b]] = (int16_t)b;
        for (size_t i = 0; i < t->n_tmpl_pre + t->n_tmpl_post; i++) {
            uint32_t id = i < t->n_tmpl_pre ? t->tmpl_pre[i] : t->tmpl_post[i - t->n_tmpl_pre];
            if (id >= t->size || (t->added_by_id[id] < 0 && (id >= t->model_size || t->tok_len[id] == UINT32_MAX)))
                st = bad(what, "the post-processor adds the id %u, which names no token", id);
        }
    }
    if (st != WGT_OK) {
        hf_tokenizer_free(t);
        return st;
    }
    *out = t;
    return WGT_OK;
}

wgt_status hf_tokenizer_load(hf_tokenizer **out, const char *path) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return wgt_fail(WGT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char *file = NULL;
    if (S_ISDIR(sb.st_mode)) {
        size_t l = strlen(path) + strlen(HF_TOKENIZER_FILE) + 2;
        file = wgt_malloc(l);
        snprintf(file, l, "%s/%s", path, HF_TOKENIZER_FILE);
    } else file = wgt_strdup(path);
    char *text = NULL;
    size_t n = 0;
    wgt_status st = file_read_all(file, "the tokenizer file", "pass a Hugging Face tokenizer.json or the directory holding it",
                                  HF_MAX_FILE_BYTES, &text, &n);
    if (st == WGT_OK) st = hf_tokenizer_load_text(out, text, n, file);
    free(text);
    free(file);
    return st;
}
