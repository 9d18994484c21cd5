// hf_tokenizer_impl.h — what the two halves of the tokenizer.json module share: the growable
// buffer, the hash tables and trie (hf_tokenizer.c) and the tokenizer's layout, filled by the
// loader (hf_tokenizer_load.c) and run by the encoder / decoder (hf_tokenizer.c). Internal.
#ifndef WGT_HF_TOKENIZER_IMPL_H
#define WGT_HF_TOKENIZER_IMPL_H
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <string.h>
#include <utf8proc.h>
#include "data/hf_tokenizer.h"

// ---------------------------------------------------------------- growable byte buffer

typedef struct {
    uint8_t *p;
    size_t n, cap;
} sbuf;

static inline void sb_reserve(sbuf *b, size_t extra) {
    WGT_ASSERT(extra <= SIZE_MAX / 2 - b->n, "buffer size overflow");
    if (b->n + extra <= b->cap) return;
    size_t c = b->cap ? b->cap : 64;
    while (c < b->n + extra) c *= 2;
    b->p = realloc(b->p, c);
    WGT_ASSERT(b->p, "out of host memory");
    b->cap = c;
}
static inline void sb_add(sbuf *b, const void *p, size_t n) {
    sb_reserve(b, n + 1);
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}
static inline void sb_byte(sbuf *b, uint8_t c) { sb_add(b, &c, 1); }
static inline void sb_cp(sbuf *b, uint32_t cp) {
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

// Strings (offset/length into a pool) to ids, open addressing.
typedef struct {
    uint32_t *slot;  // index into entries + 1, 0 = empty
    size_t mask;
    uint32_t *off, *len, *id;
    uint64_t *hash;  // per entry
    size_t n, cap;
    sbuf pool;
} strmap;

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

// A byte trie for leftmost-longest matching of the added tokens (what the aho-corasick crate's
// LeftmostLongest gives `tokenizers`): edges in a hash of (node, byte), each node's pattern.
typedef struct {
    uint64_t *ekey;  // (node << 8 | byte) + 1, 0 = empty
    uint32_t *echild;
    size_t emask, en;
    int32_t *term;  // per node: added-token index, or -1
    size_t nn, ncap;
} trie;

// ---------------------------------------------------------------- the tokenizer

enum { NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD, NORM_PREPEND, NORM_REPLACE };
enum { PRE_SPLIT, PRE_BYTELEVEL, PRE_DIGITS, PRE_METASPACE };
enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER };
enum { BEH_REMOVED, BEH_ISOLATED, BEH_PREVIOUS, BEH_NEXT, BEH_CONTIGUOUS };
enum { DEC_BYTELEVEL, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP, DEC_METASPACE };

typedef struct {
    int kind;
    char *a, *b;      // Prepend: a; Replace: a = pattern text (when not a regex), b = content
    size_t alen, blen;
    pcre2_code *re;   // Replace/Split with a Regex pattern
    int behavior, invert;  // Split: BEH_*, invert; Metaspace: behavior = PREPEND_*
    int flag, flag2;       // ByteLevel: add_prefix_space, use_regex; Digits: individual_digits; Metaspace: split
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
    step *norm, *pre, *dec;  // the post-processor is kept as the ids it adds (tmpl_pre / tmpl_post)
    size_t n_norm, n_pre, n_dec;
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

// UTF-8 (hf_tokenizer.c): the length of the valid sequence at s[0..n), 0 if none.
size_t hf_utf8_valid_len(const uint8_t *s, size_t n, uint32_t *cp);
// Hash tables and trie (hf_tokenizer.c).
void hf_strmap_init(strmap *m, size_t expect);
int64_t hf_strmap_get(const strmap *m, const uint8_t *s, size_t n);
int hf_strmap_put(strmap *m, const uint8_t *s, size_t n, uint32_t id);
void hf_mergemap_init(mergemap *m, size_t expect);
void hf_mergemap_put(mergemap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id);
void hf_trie_init(trie *t);
void hf_trie_add(trie *t, const uint8_t *s, size_t n, int32_t pattern);
// The normaliser of t applied to s[0..n), appended to out (hf_tokenizer.c).
wgt_status hf_normalize(const hf_tokenizer *t, const uint8_t *s, size_t n, sbuf *out);
#endif
