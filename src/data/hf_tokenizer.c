// hf_tokenizer.c — a Hugging Face tokenizer.json (BPE model) run as the Rust `tokenizers`
// library runs it: added tokens split out of the raw text, normaliser, pre-tokeniser, BPE merges
// by rank, post-processor, and the decoders back to text (loading: hf_tokenizer_load.c).
// Libraries used:
//  - cJSON (through json_strict, in the loader): the JSON parser the project already depends on.
//  - PCRE2 (UTF + UCP): Unicode classes and look-ahead for the Split patterns, a Debian library
//    with the same matching semantics as Oniguruma (which `tokenizers` uses) for these patterns.
//  - utf8proc: Unicode normalisation (NFC/NFD/NFKC/NFKD) and general categories, a small,
//    well-kept Debian library.
// Written here: the hash tables, the added-token trie and the merge loop, each a few dozen lines
// tied to how `tokenizers` orders its work (no library does exactly that).
#include "data/hf_tokenizer_impl.h"

// ---------------------------------------------------------------- UTF-8

// Length of the valid UTF-8 sequence at s[0..n), or 0 if none starts there (RFC 3629: no
// overlongs, no surrogates, nothing above U+10FFFF).
size_t hf_utf8_valid_len(const uint8_t *s, size_t n, uint32_t *cp) {
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
    size_t k = hf_utf8_valid_len(s, n, cp);
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
        size_t k = hf_utf8_valid_len(s + i, n - i, &cp);
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

void hf_strmap_init(strmap *m, size_t expect) {
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
int64_t hf_strmap_get(const strmap *m, const uint8_t *s, size_t n) {
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
int hf_strmap_put(strmap *m, const uint8_t *s, size_t n, uint32_t id) {
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

void hf_mergemap_init(mergemap *m, size_t expect) {
    size_t c = 16;
    while (c < expect * 2 + 16) c *= 2;
    m->s = wgt_calloc(c, sizeof *m->s);
    m->mask = c - 1;
}
void hf_mergemap_put(mergemap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id) {
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

void hf_trie_init(trie *t) {
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
void hf_trie_add(trie *t, const uint8_t *s, size_t n, int32_t pattern) {
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
    step *lists[3] = {t->norm, t->pre, t->dec};
    size_t ns[3] = {t->n_norm, t->n_pre, t->n_dec};
    for (int l = 0; l < 3; l++) {
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
    size_t at = 0, last_end = SIZE_MAX;
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
        if (a == b && b == last_end) {
            // an empty match right where the last one ended is skipped and the search moves one
            // character on (as Oniguruma's iterator in `tokenizers`, and Rust's regex crate)
            if (at >= n) break;
            uint32_t cp;
            at += utf8_next(s + at, n - at, &cp);
            continue;
        }
        spans_push(out, a, b);  // an empty match is kept: a split point, or where Replace inserts
        last_end = b;
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

wgt_status hf_normalize(const hf_tokenizer *t, const uint8_t *s, size_t n, sbuf *out) {
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
        int64_t id = hf_strmap_get(&t->vocab, w, n);
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
        int64_t id = hf_strmap_get(&t->vocab, tmp.p, tmp.n);
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
            st = hf_normalize(t, ar.p + pc.off, pc.len, &nb);
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
        size_t k = hf_utf8_valid_len(s + i, n - i, &cp);
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
    int64_t k = hf_strmap_get(&t->added_map, (const uint8_t *)token, n);
    if (k >= 0) return t->added[k].id;
    return hf_strmap_get(&t->vocab, (const uint8_t *)token, n);
}
int hf_tokenizer_is_special(const hf_tokenizer *t, uint32_t id) {
    return id < t->size && t->added_by_id[id] >= 0 && t->added[t->added_by_id[id]].special;
}
int64_t hf_tokenizer_bos_id(const hf_tokenizer *t) { return t->n_tmpl_pre ? (int64_t)t->tmpl_pre[t->n_tmpl_pre - 1] : -1; }
int64_t hf_tokenizer_eos_id(const hf_tokenizer *t) { return t->n_tmpl_post ? (int64_t)t->tmpl_post[0] : -1; }


