// test_data.c — the data side: BPE tokenizer (round trips on arbitrary bytes, agreement with
// a naive trainer, file format and its corruption checks), token shards (round trip and every
// refusal) and corpus preparation (files written, split, errors for bad inputs).
#include "core/fileutil.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/text_tokenizer.h"
#include "data/tokenizer.h"
#include "train/dataset.h"
#include "testlib.h"
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static char tmpdir[256];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }
static void rm_rf(const char *p) { nftw(p, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

// A path inside the test's temporary directory, valid until tpath_free_all() at exit.
static char *tpaths[256];
static int n_tpaths = 0;
static char *tpath(const char *name) {
    if (n_tpaths == 256) { fprintf(stderr, "tpath: raise the limit\n"); exit(2); }
    char *s = malloc(strlen(tmpdir) + strlen(name) + 2);
    sprintf(s, "%s/%s", tmpdir, name);
    return tpaths[n_tpaths++] = s;
}
static void tpath_free_all(void) {
    while (n_tpaths) free(tpaths[--n_tpaths]);
}

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

// English-like text: words from a small Zipf-ish vocabulary, sentences, paragraphs.
static char *make_text(size_t n_words, size_t *len) {
    static const char *words[] = {"the", "of", "and", "to", "a", "in", "that", "is", "was", "he", "for", "it",
                                  "with", "as", "his", "on", "be", "at", "by", "I", "this", "had", "not", "are",
                                  "but", "from", "or", "have", "an", "they", "which", "one", "you", "were",
                                  "training", "tokenizer", "model", "gradient", "shader", "buffer", "42", "1964"};
    size_t nw = sizeof words / sizeof *words, cap = n_words * 12 + 16, k = 0;
    char *s = malloc(cap);
    for (size_t i = 0; i < n_words; i++) {
        uint32_t r = rnd() % 1000;
        size_t w = (size_t)((r * r / 1000) * nw / 1000);  // skewed towards the first words
        const char *word = words[w];
        if (i % 12 == 0 && i) k += (size_t)sprintf(s + k, i % 60 == 0 ? ".\n\n" : ". ");
        else if (i) s[k++] = ' ';
        k += (size_t)sprintf(s + k, "%s", word);
        if (rnd() % 17 == 0) s[k++] = ',';
    }
    s[k++] = '.';
    s[k++] = '\n';
    s[k] = 0;
    *len = k;
    return s;
}

static int round_trip(const tokenizer *tok, const uint8_t *b, size_t n) {
    uint32_t *ids;
    size_t ni;
    if (tokenizer_encode(tok, b, n, &ids, &ni) != WGT_OK) return 0;
    int ok = 1;
    for (size_t i = 0; i < ni; i++) ok &= ids[i] < (uint32_t)tokenizer_vocab_size(tok) - 1;  // never the end-of-text id
    uint8_t *d;
    size_t nd;
    if (tokenizer_decode(tok, ids, ni, &d, &nd) != WGT_OK) ok = 0;
    else ok &= nd == n && (n == 0 || !memcmp(d, b, n));
    free(ids);
    if (ok) free(d);
    return ok;
}

// ------------------------------------------------------------------ naive reference BPE
// Recounts every pair after every merge: slow but obviously right. Words are " xyz" chunks of
// a text made only of " " + lowercase words, where our pre-tokenizer's rules are trivial.
#define REF_IDS 512
typedef struct { int sym[64]; int len; long count; } ref_word;

static int ref_train(const char *text, int n_merges, int merges[][2], uint8_t tokbytes[][64], int toklen[]) {
    ref_word *w = calloc(4096, sizeof *w);
    int nw = 0;
    for (const char *p = text; *p;) {
        const char *e = p + 1;
        while (*e && *e != ' ') e++;
        int len = (int)(e - p), f = -1;
        for (int i = 0; i < nw && f < 0; i++) {
            if (w[i].len != len) continue;
            int same = 1;
            for (int k = 0; k < len; k++) same &= w[i].sym[k] == (uint8_t)p[k];
            if (same) f = i;
        }
        if (f < 0) {
            f = nw++;
            w[f].len = len;
            for (int k = 0; k < len; k++) w[f].sym[k] = (uint8_t)p[k];
        }
        w[f].count++;
        p = e;
    }
    for (int i = 0; i < 256; i++) { tokbytes[i][0] = (uint8_t)i; toklen[i] = 1; }
    static long cnt[REF_IDS * REF_IDS];
    int m = 0;
    for (; m < n_merges; m++) {
        memset(cnt, 0, sizeof cnt);
        for (int i = 0; i < nw; i++)
            for (int k = 0; k + 1 < w[i].len; k++) cnt[w[i].sym[k] * REF_IDS + w[i].sym[k + 1]] += w[i].count;
        long best = 0;
        int ba = 0, bb = 0;
        for (int a = 0; a < REF_IDS; a++)  // ascending (a, b): the first maximum is the tie winner
            for (int b = 0; b < REF_IDS; b++)
                if (cnt[a * REF_IDS + b] > best) { best = cnt[a * REF_IDS + b]; ba = a; bb = b; }
        if (best < 2) break;
        int x = 256 + m;
        merges[m][0] = ba;
        merges[m][1] = bb;
        memcpy(tokbytes[x], tokbytes[ba], (size_t)toklen[ba]);
        memcpy(tokbytes[x] + toklen[ba], tokbytes[bb], (size_t)toklen[bb]);
        toklen[x] = toklen[ba] + toklen[bb];
        for (int i = 0; i < nw; i++) {
            int o = 0;
            for (int r = 0; r < w[i].len;) {
                if (r + 1 < w[i].len && w[i].sym[r] == ba && w[i].sym[r + 1] == bb) { w[i].sym[o++] = x; r += 2; }
                else w[i].sym[o++] = w[i].sym[r++];
            }
            w[i].len = o;
        }
    }
    free(w);
    return m;
}

static void test_tokenizer_reference(void) {
    // Small alphabets: many ties and overlapping pairs ("aaaa"), the hard cases for the
    // incremental counts. Several seeds and alphabet sizes.
    enum { MERGES = REF_IDS - 257 };
    static int merges[MERGES][2];
    static uint8_t tb[REF_IDS][64];
    static int tl[REF_IDS];
    for (int trial = 0; trial < 3; trial++) {
        char *text = malloc(40000);
        size_t k = 0;
        int alpha = 2 + trial;
        for (int i = 0; i < 3000; i++) {
            text[k++] = ' ';
            int len = 1 + (int)(rnd() % 7);
            for (int j = 0; j < len; j++) text[k++] = (char)('a' + rnd() % alpha);
        }
        text[k] = 0;
        int m = ref_train(text, MERGES, merges, tb, tl);
        tokenizer *tok;
        CHECK(tokenizer_train(&tok, (const uint8_t *)text, k, 257 + MERGES) == WGT_OK, "%s", wgt_last_error());
        CHECK(tokenizer_vocab_size(tok) == 257 + m, "vocab %d, reference reached %d merges", tokenizer_vocab_size(tok), m);
        int same = 1;
        for (int i = 0; i < m && i + 257 < tokenizer_vocab_size(tok); i++) {
            size_t len;
            const uint8_t *p = tokenizer_token_bytes(tok, 256 + i, &len);
            if (!p || (int)len != tl[256 + i] || memcmp(p, tb[256 + i], len)) {
                same = 0;
                fprintf(stderr, "merge %d differs: ours '%.*s', reference '%.*s'\n", i, (int)len, p, tl[256 + i],
                        tb[256 + i]);
                break;
            }
        }
        CHECK(same, "trial %d: %d merges agree with the naive reference trainer", trial, m);
        CHECK(round_trip(tok, (const uint8_t *)text, k), "round trip of the training text");
        tokenizer_free(tok);
        free(text);
    }
}

static void test_tokenizer(void) {
    tokenizer *tok = NULL;
    // Vocabulary bounds.
    CHECK(tokenizer_train(&tok, (const uint8_t *)"abc", 3, 100) == WGT_ERR_ARG && !tok, "vocab 100 refused");
    CHECK(contains(wgt_last_error(), "257"), "message names the minimum: %s", wgt_last_error());
    CHECK(tokenizer_train(&tok, (const uint8_t *)"abc", 3, 256) == WGT_ERR_ARG, "vocab 256 refused (no room for end-of-text)");
    CHECK(tokenizer_train(&tok, (const uint8_t *)"abc", 3, 65536) == WGT_ERR_ARG, "vocab 65536 refused");

    // Training on English-like text.
    size_t n;
    char *text = make_text(60000, &n);
    clock_t c0 = clock();
    CHECK(tokenizer_train(&tok, (const uint8_t *)text, n, 1000) == WGT_OK, "%s", wgt_last_error());
    double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    CHECK(secs < 5, "training 1000 tokens on %zu bytes took %.2f s", n, secs);
    int vocab = tokenizer_vocab_size(tok);
    CHECK(vocab <= 1000 && vocab > 257 + 50, "vocab %d", vocab);
    CHECK(tokenizer_eot(tok) == vocab - 1, "end-of-text is the last id");
    size_t len;
    const uint8_t *eb = tokenizer_token_bytes(tok, vocab - 1, &len);
    CHECK(eb && len == 13 && !memcmp(eb, "<|endoftext|>", 13), "end-of-text bytes");
    CHECK(tokenizer_token_bytes(tok, vocab, &len) == NULL && tokenizer_token_bytes(tok, -1, &len) == NULL,
          "out-of-range ids have no bytes");
    for (int i = 0; i < 256; i++) {
        const uint8_t *b = tokenizer_token_bytes(tok, i, &len);
        if (!(b && len == 1 && b[0] == i)) { CHECK(0, "byte token %d", i); break; }
    }
    uint32_t *ids;
    size_t ni;
    tokenizer_encode(tok, (const uint8_t *)" the", 4, &ids, &ni);
    CHECK(ni == 1, "\" the\" is one token (got %zu)", ni);
    free(ids);
    tokenizer_encode(tok, (const uint8_t *)text, n, &ids, &ni);
    CHECK(ni * 3 < n, "compression: %zu bytes -> %zu tokens", n, ni);
    free(ids);
    CHECK(round_trip(tok, (const uint8_t *)text, n), "round trip of English-like text");
    CHECK(round_trip(tok, (const uint8_t *)"", 0), "round trip of empty input");

    // Arbitrary bytes: NULs, invalid UTF-8, long runs that hit the chunk length cap.
    int all_ok = 1;
    uint8_t *buf = malloc(5000);
    for (int trial = 0; trial < 300 && all_ok; trial++) {
        size_t m = rnd() % 5000;
        int mode = trial % 4;
        for (size_t i = 0; i < m; i++) {
            uint32_t r = rnd();
            if (mode == 0) buf[i] = (uint8_t)r;                                   // uniform bytes
            else if (mode == 1) buf[i] = (uint8_t)" ethaon\0\xff\xc3\n'"[r % 13]; // text-ish + NUL + bad UTF-8
            else if (mode == 2) buf[i] = (uint8_t)(r % 7 ? 'a' : (r & 1 ? ' ' : 0x80)); // long runs
            else buf[i] = (uint8_t)text[r % n];
        }
        all_ok = round_trip(tok, buf, m);
    }
    CHECK(all_ok, "round trip of random byte strings");
    memset(buf, ' ', 1000);
    CHECK(round_trip(tok, buf, 1000), "1000 spaces");
    memset(buf, 0, 1000);
    CHECK(round_trip(tok, buf, 1000), "1000 NULs");
    const char *utf8 = "na\xc3\xafve caf\xc3\xa9 \xe2\x82\xac 5 \xf0\x9f\x98\x80 \xc3 \xa9\xff\xfe 'll 're it's";
    CHECK(round_trip(tok, (const uint8_t *)utf8, strlen(utf8)), "UTF-8 and broken UTF-8");

    // Decode: ids beyond the vocabulary are refused, the end-of-text id reads as its text.
    uint32_t bad[3] = {65, (uint32_t)vocab, 66};
    uint8_t *out;
    size_t no;
    CHECK(tokenizer_decode(tok, bad, 3, &out, &no) == WGT_ERR_ARG, "id >= vocab refused");
    char want[64];
    snprintf(want, sizeof want, "token id %d at position 1", vocab);
    CHECK(contains(wgt_last_error(), want), "message names the id: %s", wgt_last_error());
    uint32_t eot_ids[3] = {72, (uint32_t)(vocab - 1), 105};
    CHECK(tokenizer_decode(tok, eot_ids, 3, &out, &no) == WGT_OK && no == 15 && !memcmp(out, "H<|endoftext|>i", 15),
          "end-of-text decodes to its text");
    free(out);

    // Save / load.
    CHECK(tokenizer_save(tok, tpath("tok.bin")) == WGT_OK, "%s", wgt_last_error());
    tokenizer *t2 = NULL;
    CHECK(tokenizer_load(&t2, tpath("tok.bin")) == WGT_OK, "%s", wgt_last_error());
    if (t2) {
        int same = tokenizer_vocab_size(t2) == vocab;
        for (int i = 0; i < vocab && same; i++) {
            size_t l1, l2;
            const uint8_t *a = tokenizer_token_bytes(tok, i, &l1), *b = tokenizer_token_bytes(t2, i, &l2);
            same = l1 == l2 && !memcmp(a, b, l1);
        }
        CHECK(same, "loaded tokenizer has the same tokens");
        uint32_t *i1, *i2;
        size_t n1, n2;
        tokenizer_encode(tok, (const uint8_t *)text, n, &i1, &n1);
        tokenizer_encode(t2, (const uint8_t *)text, n, &i2, &n2);
        CHECK(n1 == n2 && !memcmp(i1, i2, n1 * 2), "loaded tokenizer encodes identically");
        free(i1);
        free(i2);
        tokenizer_free(t2);
    }
    size_t fl;
    uint8_t *file = test_slurp(tpath("tok.bin"), &fl);
    CHECK(file && fl == 32 + (size_t)(vocab - 257) * 4 + 4, "file size %zu", fl);
    struct { const char *what; size_t cut; int flip; const char *msg; } bad_files[] = {
        {"truncated", fl - 9, -1, "truncated"},
        {"truncated header", 20, -1, "truncated"},
        {"empty", 0, -1, "not a wgtrain tokenizer"},
        {"flipped merge byte", fl, 40, "checksum"},
        {"flipped checksum", fl, (int)fl - 1, "checksum"},
        {"bad magic", fl, 0, "not a wgtrain tokenizer"},
        {"bad version", fl, 8, "version"},
        {"bad vocab", fl, 12, "inconsistent header"},
    };
    for (size_t i = 0; i < sizeof bad_files / sizeof *bad_files; i++) {
        uint8_t *copy = malloc(fl);
        memcpy(copy, file, fl);
        if (bad_files[i].flip >= 0) copy[bad_files[i].flip] ^= 0x5A;
        test_spit(tpath("bad.bin"), copy, bad_files[i].cut);
        t2 = NULL;
        wgt_status st = tokenizer_load(&t2, tpath("bad.bin"));
        CHECK(st == WGT_ERR_FORMAT && !t2 && contains(wgt_last_error(), bad_files[i].msg), "%s: status %d, '%s'",
              bad_files[i].what, st, wgt_last_error());
        free(copy);
    }
    // A well-formed file (valid checksum) whose merge refers to a token not defined yet.
    uint8_t *copy = malloc(fl);
    memcpy(copy, file, fl);
    copy[32] = 0xFF;  // merge 0's left id -> 0x??FF, with the high byte raised below
    copy[33] = 0x7F;
    uint32_t crc = (uint32_t)crc32(0L, copy, (uInt)(fl - 4));
    for (int b = 0; b < 4; b++) copy[fl - 4 + b] = (uint8_t)(crc >> (8 * b));
    test_spit(tpath("bad.bin"), copy, fl);
    CHECK(tokenizer_load(&t2, tpath("bad.bin")) == WGT_ERR_FORMAT && contains(wgt_last_error(), "not yet defined"),
          "merge using a later token refused: %s", wgt_last_error());
    free(copy);
    free(file);
    CHECK(tokenizer_load(&t2, tpath("missing.bin")) == WGT_ERR_IO && contains(wgt_last_error(), "missing.bin"),
          "missing file: %s", wgt_last_error());
    free(buf);
    tokenizer_free(tok);

    // A corpus too small for the vocabulary stops early, and still round-trips.
    CHECK(tokenizer_train(&tok, (const uint8_t *)"hello hello world", 17, 5000) == WGT_OK, "%s", wgt_last_error());
    CHECK(tokenizer_vocab_size(tok) > 257 && tokenizer_vocab_size(tok) < 270, "early stop: vocab %d",
          tokenizer_vocab_size(tok));
    tokenizer_encode(tok, (const uint8_t *)"hello", 5, &ids, &ni);
    CHECK(ni == 1, "\"hello\" (seen twice) merged into one token (%zu)", ni);
    free(ids);
    CHECK(round_trip(tok, (const uint8_t *)"hello world, hello!", 19), "round trip after early stop");
    tokenizer_free(tok);
    free(text);
}

// ------------------------------------------------------------------ shards

static int count_tmp_files(void) {
    int k = 0;
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    while (d && (e = readdir(d))) k += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return k;
}

// One format: vocab <= 65536 writes llm.c's 16-bit shards, a larger one its 32-bit shards.
static void test_shard_format(int vocab) {
    const int bytes = vocab <= 65536 ? 2 : 4;
    size_t n = 12345;
    uint32_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (uint32_t)(rnd() % (uint64_t)vocab);
    t[5] = (uint32_t)vocab - 1;  // the largest id the format must hold
    const char *p = tpath("s.bin");
    CHECK(shard_write(p, t, n, vocab) == WGT_OK, "vocab %d: %s", vocab, wgt_last_error());
    CHECK(count_tmp_files() == 0, "no temporary file left behind");
    uint32_t *r = NULL;
    size_t rn = 0;
    CHECK(shard_read_all(p, &r, &rn) == WGT_OK && rn == n && !memcmp(r, t, n * sizeof *t), "vocab %d: round trip", vocab);
    free(r);
    shard *s = NULL;
    CHECK(shard_open(&s, p) == WGT_OK && shard_count(s) == n && shard_bytes_per_token(s) == bytes, "shard_open");
    if (s) {
        uint32_t part[100];
        CHECK(shard_read(s, 1000, 100, part) == WGT_OK && !memcmp(part, t + 1000, sizeof part), "shard_read");
        CHECK(shard_read(s, n - 1, 1, part) == WGT_OK && part[0] == t[n - 1], "shard_read of the last token");
        uint32_t crc = 0, mx = 0, want_max = 0;
        for (size_t i = 0; i < n; i++) want_max = t[i] > want_max ? t[i] : want_max;
        uint64_t *counts = NULL;
        size_t n_counts = 0;
        CHECK(shard_scan(s, &crc, &mx, &counts, &n_counts) == WGT_OK && crc == shard_file_crc(t, n, vocab) &&
              mx == want_max && n_counts == (size_t)want_max + 1, "shard_scan: crc %08x max %u counts %zu", crc, mx,
              n_counts);
        uint64_t sum = 0;
        for (size_t i = 0; i < n_counts; i++) sum += counts[i];
        CHECK(sum == n && counts[t[5]] >= 1, "counts sum %llu", (unsigned long long)sum);
        free(counts);
        shard_close(s);
    }
    size_t fl;
    uint8_t *file = test_slurp(p, &fl);
    CHECK(fl == 1024 + (size_t)bytes * n, "file size %zu", fl);
    CHECK(crc32_z(0, file, fl) == shard_file_crc(t, n, vocab), "shard_file_crc is the file's CRC");
    int32_t h[4];
    memcpy(h, file, sizeof h);
    CHECK(h[0] == (bytes == 2 ? 20240520 : 20240801) && h[1] == (bytes == 2 ? 1 : 7) && h[2] == (int32_t)n && h[3] == 0,
          "llm.c header %d %d %d", h[0], h[1], h[2]);
    uint32_t first;
    memcpy(&first, file + 1024, 4);
    CHECK(bytes == 2 ? (first & 0xFFFF) == t[0] : first == t[0], "the first token as stored");

    struct { const char *what; size_t len; int at; int32_t val; const char *msg; } bad[] = {
        {"truncated", fl - 1, -1, 0, "truncated"},
        {"truncated to half", 1024 + n, -1, 0, "truncated"},
        {"shorter than the header", 100, -1, 0, "truncated"},
        {"bad magic", fl, 0, 12345, "magic"},
        {"version 3", fl, 1, 3, "version 3"},  // 2 and 8 are the flagged versions (test_flagged)
        {"the other format's version", fl, 1, bytes == 2 ? 7 : 1, "version"},
        {"negative count", fl, 2, -5, "negative"},
        // the other format's magic: the size no longer matches the count
        {"the other format's magic", fl, 0, bytes == 2 ? 20240801 : 20240520, "version"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint8_t *c = malloc(fl);
        memcpy(c, file, fl);
        if (bad[i].at >= 0) memcpy(c + 4 * bad[i].at, &bad[i].val, 4);
        test_spit(tpath("bad.bin"), c, bad[i].len);
        r = NULL;
        wgt_status st = shard_read_all(tpath("bad.bin"), &r, &rn);
        CHECK(st == WGT_ERR_FORMAT && !r && contains(wgt_last_error(), bad[i].msg) &&
              contains(wgt_last_error(), "bad.bin"), "%s: status %d '%s'", bad[i].what, st, wgt_last_error());
        free(c);
    }
    uint8_t *c = malloc(fl + 2);
    memcpy(c, file, fl);
    c[fl] = c[fl + 1] = 0;
    test_spit(tpath("bad.bin"), c, fl + 2);
    CHECK(shard_read_all(tpath("bad.bin"), &r, &rn) == WGT_ERR_FORMAT && contains(wgt_last_error(), "after"),
          "trailing bytes refused: %s", wgt_last_error());
    free(c);
    free(file);
    CHECK(shard_read_all(tpath("nope.bin"), &r, &rn) == WGT_ERR_IO && contains(wgt_last_error(), "nope.bin"),
          "missing shard: %s", wgt_last_error());

    // An empty shard is valid.
    CHECK(shard_write(tpath("e.bin"), NULL, 0, vocab) == WGT_OK && shard_read_all(tpath("e.bin"), &r, &rn) == WGT_OK &&
          rn == 0, "empty shard");
    free(r);

    // An id >= vocab is refused by the writer (nothing written) and by the check, naming it and its position.
    unlink(tpath("v.bin"));
    t[777] = (uint32_t)vocab;
    t[900] = (uint32_t)vocab + 5;
    CHECK(shard_write(tpath("v.bin"), t, n, vocab) == WGT_ERR_FORMAT && access(tpath("v.bin"), F_OK) != 0,
          "shard_write refuses an id beyond the vocabulary");
    char want[64];
    snprintf(want, sizeof want, "token id %d at position 777", vocab);
    CHECK(shard_check_vocab(t, n, vocab, p) == WGT_ERR_FORMAT && contains(wgt_last_error(), want) &&
          contains(wgt_last_error(), "s.bin"), "message: %s", wgt_last_error());
    free(t);
}

static void test_shard(void) {
    test_shard_format(4000);
    test_shard_format(65536);   // the largest vocabulary of the 16-bit format: id 65535 fits
    test_shard_format(70000);   // 32-bit
    test_shard_format(262144);  // Gemma 3's vocabulary size
    CHECK(shard_token_bytes(65536) == 2 && shard_token_bytes(65537) == 4, "the format boundary");
    CHECK(shard_write(tpath("x.bin"), NULL, 0, 0) == WGT_ERR_ARG && shard_write(tpath("x.bin"), NULL, 0, (1 << 24) + 1) ==
          WGT_ERR_ARG, "vocabulary sizes out of range refused");

    // A 32-bit shard holding an id no vocabulary reaches (written by another tool, or corrupted):
    // refused when scanned, naming the file, the position and the byte offset.
    uint32_t v7[6] = {1, 2, 70000, 0xFFFFFFFFu, 5, 6};
    CHECK(shard_write(tpath("big.bin"), v7, 6, 70001) != WGT_OK, "the writer refuses 0xFFFFFFFF for vocab 70001");
    v7[3] = 3;
    CHECK(shard_write(tpath("big.bin"), v7, 6, 70001) == WGT_OK, "%s", wgt_last_error());
    size_t fl;
    uint8_t *file = test_slurp(tpath("big.bin"), &fl);
    uint32_t huge = 0xFFFFFFFFu;
    memcpy(file + 1024 + 3 * 4, &huge, 4);
    test_spit(tpath("big.bin"), file, fl);
    free(file);
    shard *s = NULL;
    uint32_t mx = 0;
    CHECK(shard_open(&s, tpath("big.bin")) == WGT_OK, "header valid");
    CHECK(s && shard_scan(s, NULL, &mx, NULL, NULL) == WGT_ERR_FORMAT && contains(wgt_last_error(), "big.bin") &&
          contains(wgt_last_error(), "4294967295 at position 3 (byte offset 1036)"), "scan: %s", wgt_last_error());
    shard_close(s);

    // Entropy: uniform over 4 ids is log 4; a constant sequence is 0; ids beyond 65535 count too.
    uint32_t u[8] = {1, 2, 3, 4, 4, 3, 2, 1};
    CHECK(fabs(shard_unigram_entropy(u, 8, 5) - log(4.0)) < 1e-12, "entropy %f", shard_unigram_entropy(u, 8, 5));
    uint32_t z[3] = {9, 9, 9};
    CHECK(shard_unigram_entropy(z, 3, 10) == 0.0 && shard_unigram_entropy(z, 0, 10) == 0.0, "zero entropy");
    uint32_t w[4] = {70000, 262143, 70000, 262143};
    CHECK(fabs(shard_unigram_entropy(w, 4, 262144) - log(2.0)) < 1e-12, "entropy of high ids");
}

// ------------------------------------------------------------------ prepare

static int read_shard_text(const tokenizer *tok, const char *path, char **text, size_t *n) {
    uint32_t *t;
    size_t nt;
    if (shard_read_all(path, &t, &nt) != WGT_OK) return 0;
    int ok = shard_check_vocab(t, nt, tokenizer_vocab_size(tok), path) == WGT_OK;
    ok &= nt > 0 && t[0] == (uint32_t)tokenizer_eot(tok);
    uint8_t *b;
    ok &= tokenizer_decode(tok, t, nt, &b, n) == WGT_OK;
    free(t);
    *text = ok ? (char *)b : NULL;
    return ok;
}

static void test_prepare(void) {
    // A corpus directory: three text files (one in a subdirectory), a Brown-tagged file, a
    // hidden file that must be skipped, and a file holding two <|endoftext|>-separated documents.
    char *dir = tpath("corpus");
    mkdir(dir, 0777);
    mkdir(tpath("corpus/sub"), 0777);
    size_t n1, n2, n3;
    char *a = make_text(3000, &n1), *b = make_text(3000, &n2), *c = make_text(3000, &n3);
    test_spit(tpath("corpus/a.txt"), a, n1);
    test_spit(tpath("corpus/sub/c.txt"), c, n3);
    test_spit(tpath("corpus/b.txt"), b, n2);
    test_spit(tpath("corpus/.hidden"), "SECRET-HIDDEN-TEXT", 18);
    const char *brown = "\n\n\tThe/at jury/nn said/vbd ``/`` no/at evidence/nn ''/'' ./.\n"
                        "It/pps urged/vbd (/( again/rb )/) ,/, Jr./np ./.\n\n\n"
                        "Merger/nn-hl proposed/vbn-hl\nHowever/wrb ,/, it/pps was/bedz n't/* over/rb !/.\n";
    test_spit(tpath("corpus/d_brown"), brown, strlen(brown));
    const char *multi = "first story here.\n<|endoftext|>\n  second story there.\n<|endoftext|>\n\n";
    test_spit(tpath("corpus/e_multi.txt"), multi, strlen(multi));

    const char *out = tpath("out/nested");
    const char *inputs[] = {dir};
    wgt_status st = prepare_corpus(inputs, 1, out, 400, 0.25, 0);
    CHECK(st == WGT_OK, "prepare: %s", wgt_last_error());
    tokenizer *tok = NULL;
    CHECK(tokenizer_load(&tok, tpath("out/nested/tokenizer.bin")) == WGT_OK, "%s", wgt_last_error());
    if (!tok) return;
    // The corpus has ~40 distinct words, so it runs out of pairs a little before 400.
    int vocab = tokenizer_vocab_size(tok);
    CHECK(vocab > 350 && vocab <= 400, "vocab %d", vocab);
    char *tr = NULL, *va = NULL;
    size_t ntr = 0, nva = 0;
    CHECK(read_shard_text(tok, tpath("out/nested/train_000.bin"), &tr, &ntr), "train shard: %s", wgt_last_error());
    CHECK(read_shard_text(tok, tpath("out/nested/val_000.bin"), &va, &nva), "val shard: %s", wgt_last_error());
    if (tr && va) {
        // Documents in sorted path order: a.txt, b.txt, d_brown, e_multi.txt (2 docs), sub/c.txt.
        // 6 documents, 25% -> the last 2 (e_multi's second story and sub/c.txt) are validation.
        const char *E = "<|endoftext|>";
        size_t cap = n1 + n2 + n3 + 1000;
        char *want_tr = malloc(cap), *want_va = malloc(cap);
        snprintf(want_tr, cap, "%s%s%s%s%sThe jury said \"no evidence\"."
                 " It urged (again), Jr.\n\nMerger proposed\n\nHowever, it was n't over!\n%sfirst story here.",
                 E, a, E, b, E, E);
        snprintf(want_va, cap, "%ssecond story there.%s%s", E, E, c);
        CHECK(ntr == strlen(want_tr) && !strcmp(tr, want_tr), "train text (%zu bytes, want %zu)", ntr, strlen(want_tr));
        if (strcmp(tr, want_tr)) {
            size_t i = 0;
            while (tr[i] == want_tr[i]) i++;
            fprintf(stderr, "differs at %zu: got [%.80s] want [%.80s]\n", i, tr + (i > 20 ? i - 20 : 0),
                    want_tr + (i > 20 ? i - 20 : 0));
        }
        CHECK(nva == strlen(want_va) && !strcmp(va, want_va), "val text (%zu bytes, want %zu)", nva, strlen(want_va));
        CHECK(!contains(tr, "SECRET") && !contains(va, "SECRET"), "hidden file skipped");
        free(want_tr);
        free(want_va);
    }
    free(tr);
    free(va);
    size_t ml;
    char *meta = (char *)test_slurp(tpath("out/nested/meta.json"), &ml);
    CHECK(meta && contains(meta, "\"requested_vocab_size\": 400") && contains(meta, "\"unigram_entropy_nats\": ") &&
          contains(meta, "\"documents\": 6") && contains(meta, "\"val_documents\": 2") &&
          contains(meta, "\"format\": \"brown\"") && contains(meta, "train_000.bin"), "meta.json: %s", meta);
    free(meta);
    CHECK(count_tmp_files() == 0, "no temporary files");

    // Determinism: a second run writes identical files.
    size_t l1, l2;
    uint8_t *s1 = test_slurp(tpath("out/nested/train_000.bin"), &l1);
    const char *inputs2[] = {tpath("corpus/*.txt"), tpath("corpus/sub"), tpath("corpus/d_brown"), tpath("corpus/a.txt")};
    CHECK(prepare_corpus(inputs2, 4, tpath("out2"), 400, 0.25, 0) == WGT_OK, "globs: %s", wgt_last_error());
    CHECK(prepare_corpus(inputs, 1, out, 400, 0.25, 0) == WGT_OK, "rerun: %s", wgt_last_error());
    uint8_t *s2 = test_slurp(tpath("out/nested/train_000.bin"), &l2);
    CHECK(s1 && s2 && l1 == l2 && !memcmp(s1, s2, l1), "deterministic output");
    free(s1);
    free(s2);
    meta = (char *)test_slurp(tpath("out2/meta.json"), &ml);
    // a.txt b.txt e_multi.txt (glob) + sub/c.txt + d_brown; a.txt again is a duplicate.
    CHECK(meta && contains(meta, "\"documents\": 6") && !contains(meta, "a.txt\", \"format\": \"text\", \"bytes\": 0"),
          "glob inputs, duplicate dropped: %s", meta);
    free(meta);
    tokenizer_free(tok);

    // A Brown corpus directory: its non-tagged files (README...) are skipped.
    mkdir(tpath("brown"), 0777);
    test_spit(tpath("brown/ca01"), brown, strlen(brown));
    test_spit(tpath("brown/ca02"), brown, strlen(brown));
    test_spit(tpath("brown/ca03"), brown, strlen(brown));
    test_spit(tpath("brown/README"), "BROWN CORPUS readme text\n", 25);
    const char *bin[] = {tpath("brown")};
    CHECK(prepare_corpus(bin, 1, tpath("bout"), 300, 0.1, 0) == WGT_OK, "brown dir: %s", wgt_last_error());
    meta = (char *)test_slurp(tpath("bout/meta.json"), &ml);
    CHECK(meta && contains(meta, "\"documents\": 3") && !contains(meta, "README"), "README skipped: %s", meta);
    free(meta);

    // One document: val gets the tail of its tokens.
    const char *one[] = {tpath("corpus/a.txt")};
    CHECK(prepare_corpus(one, 1, tpath("one"), 500, 0.1, 0) == WGT_OK, "single doc: %s", wgt_last_error());
    uint32_t *t;
    size_t nt, nv;
    CHECK(shard_read_all(tpath("one/val_000.bin"), &t, &nv) == WGT_OK && nv > 1, "val nonempty");
    free(t);
    CHECK(shard_read_all(tpath("one/train_000.bin"), &t, &nt) == WGT_OK && nt > 5 * nv, "train %zu val %zu", nt, nv);
    free(t);

    // Errors.
    mkdir(tpath("empty"), 0777);
    test_spit(tpath("empty/x.txt"), "", 0);
    const char *e1[] = {tpath("empty")};
    CHECK(prepare_corpus(e1, 1, tpath("eout"), 300, 0.1, 0) != WGT_OK && contains(wgt_last_error(), "empty"),
          "empty corpus: %s", wgt_last_error());
    mkdir(tpath("nofiles"), 0777);
    const char *e2[] = {tpath("nofiles")};
    CHECK(prepare_corpus(e2, 1, tpath("eout"), 300, 0.1, 0) != WGT_OK && contains(wgt_last_error(), "no files"),
          "directory without files: %s", wgt_last_error());
    const char *e3[] = {dir, tpath("does_not_exist.txt")};
    CHECK(prepare_corpus(e3, 2, tpath("eout"), 300, 0.1, 0) == WGT_ERR_IO &&
          contains(wgt_last_error(), "does_not_exist.txt"), "missing input: %s", wgt_last_error());
    const char *e4[] = {tpath("corpus/*.nomatch")};
    CHECK(prepare_corpus(e4, 1, tpath("eout"), 300, 0.1, 0) == WGT_ERR_IO && contains(wgt_last_error(), "matches no"),
          "glob without match: %s", wgt_last_error());
    CHECK(prepare_corpus(inputs, 1, tpath("eout"), 200, 0.1, 0) == WGT_ERR_ARG && contains(wgt_last_error(), "257"),
          "vocab < 257: %s", wgt_last_error());
    CHECK(prepare_corpus(inputs, 1, tpath("eout"), 70000, 0.1, 0) == WGT_ERR_ARG, "vocab > 65535");
    CHECK(prepare_corpus(inputs, 1, tpath("eout"), 300, 0.0, 0) == WGT_ERR_ARG, "val fraction 0");
    test_spit(tpath("afile"), "x", 1);
    CHECK(prepare_corpus(inputs, 1, tpath("afile/sub"), 300, 0.1, 0) == WGT_ERR_IO, "output under a file: %s",
          wgt_last_error());
    free(a);
    free(b);
    free(c);
}

// tests/fixtures/legacy16: a data directory prepare wrote when ids were uint16. It must open
// (dataset_open: the one meta.json reader, the tokenizer registry, 16-bit shards as uint32 ids),
// and prepare must still write the same bytes for the same corpus.
#define LEGACY "tests/fixtures/legacy16"
static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    uint8_t *x = test_slurp(a, &na), *y = test_slurp(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}
// meta.json without its "sources" line (the corpus path as given differs)
static char *meta_without_sources(const char *path) {
    size_t n = 0;
    char *t = (char *)test_slurp(path, &n);
    if (!t) return NULL;
    char *o = malloc(n + 1), *w = o;
    for (char *line = t; line < t + n;) {
        char *e = memchr(line, '\n', (size_t)(t + n - line));
        size_t len = e ? (size_t)(e - line) + 1 : (size_t)(t + n - line);
        if (!memmem(line, len, "\"path\":", 7)) {
            memcpy(w, line, len);
            w += len;
        }
        line += len;
    }
    *w = 0;
    free(t);
    return o;
}
static void test_legacy16(void) {
    dataset *ds = NULL;
    CHECK(dataset_open(&ds, LEGACY "/data") == WGT_OK, "the legacy data directory opens: %s", wgt_last_error());
    if (ds) {
        CHECK(dataset_vocab(ds) > 257 && dataset_tokenizer(ds) &&
                  !strcmp(text_tokenizer_kind_name(dataset_tokenizer(ds)), TEXT_TOK_BPE_NAME),
              "vocabulary %d of wgtrain's BPE", dataset_vocab(ds));
        CHECK(dataset_check_vocab(ds, dataset_vocab(ds)) == WGT_OK && dataset_check_seq(ds, 8) == WGT_OK, "%s",
              wgt_last_error());
        // the first validation window is the first 9 tokens of val_000.bin, read as uint16
        int32_t in[8], tg[8];
        size_t valid = 0;
        size_t fl = 0;
        uint8_t *raw = test_slurp(LEGACY "/data/val_000.bin", &fl);
        CHECK(raw && fl > 1024 + 18 && dataset_val_batch(ds, 0, 1, 8, in, tg, NULL, &valid) == WGT_OK && valid == 8,
              "a validation batch: %s", wgt_last_error());
        int same = raw != NULL;
        for (int t = 0; raw && t < 8; t++) {
            uint16_t a, b;
            memcpy(&a, raw + 1024 + 2 * t, 2);
            memcpy(&b, raw + 1024 + 2 * (t + 1), 2);
            same &= in[t] == a && tg[t] == b;
        }
        CHECK(same, "the batch holds the file's uint16 tokens");
        free(raw);
        dataset_free(ds);
    }
    const char *in[] = {LEGACY "/corpus.txt"};
    CHECK(prepare_corpus(in, 1, tpath("legacy"), 300, 0.1, 0) == WGT_OK, "prepare: %s", wgt_last_error());
    const char *files[] = {"tokenizer.bin", "train_000.bin", "val_000.bin"};
    char a[256], b[4096];
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, LEGACY "/data/%s", files[i]);
        snprintf(b, sizeof b, "%s/%s", tpath("legacy"), files[i]);
        CHECK(same_file(a, b), "prepare writes %s as before, byte for byte", files[i]);
    }
    snprintf(b, sizeof b, "%s/meta.json", tpath("legacy"));
    char *ma = meta_without_sources(LEGACY "/data/meta.json"), *mb = meta_without_sources(b);
    CHECK(ma && mb && !strcmp(ma, mb), "meta.json as before (but the corpus path):\n%s\n---\n%s", ma, mb);
    free(ma);
    free(mb);
}

// The Hugging Face kind (hf_tokenizer_kind.c) on real tokenizers: the end-of-text id of the
// config, a stream of token_bytes spelling the text (Llama-2's with the space its normaliser
// prepends: a stream keeps it, decode strips it), a renamed tokenizer.json found by its first bytes.
static void test_hf_kind(void) {
    static const char text[] = "Hello world! \xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac 12345\n\ttabs";
    const struct { const char *dir, *lead; int vocab, eot; } m[] = {
        {"third_party/hf-tokenizers/qwen3", "", 151669, 151645},
        {"third_party/hf-tokenizers/llama2", " ", 32000, 2},
    };
    for (int k = 0; k < 2; k++) {
        text_tokenizer *t = NULL;
        CHECK(text_tokenizer_open(&t, m[k].dir) == WGT_OK && t, "%s opens: %s", m[k].dir, wgt_last_error());
        if (!t) continue;
        CHECK(!strcmp(text_tokenizer_kind_name(t), "hf"), "%s is the hf kind", m[k].dir);
        CHECK(text_tokenizer_vocab_size(t) == m[k].vocab && text_tokenizer_eot(t) == m[k].eot, "%s: vocab %d, eot %d",
              m[k].dir, text_tokenizer_vocab_size(t), text_tokenizer_eot(t));
        uint32_t *ids = NULL;
        size_t n = 0, nb = 0, len = 0;
        uint8_t *dec = NULL;
        CHECK(text_tokenizer_encode(t, (const uint8_t *)text, strlen(text), 0, &ids, &n) == WGT_OK, "encode");
        char stream[512] = "";
        size_t w = 0;
        for (size_t i = 0; i < n && w < 400; i++) {
            const uint8_t *b = text_tokenizer_token_bytes(t, (int)ids[i], &len);
            if (b && w + len < 400) memcpy(stream + w, b, len), w += len;
        }
        stream[w] = 0;
        char want[512];
        snprintf(want, sizeof want, "%s%s", m[k].lead, text);
        CHECK(!strcmp(stream, want), "%s: the tokens' bytes spell the text: \"%s\"", m[k].dir, stream);
        CHECK(text_tokenizer_decode(t, ids, n, &dec, &nb) == WGT_OK && nb == strlen(text) && !memcmp(dec, text, nb),
              "%s: decode gives the text back", m[k].dir);
        CHECK(!text_tokenizer_token_bytes(t, -1, &len) && !text_tokenizer_token_bytes(t, m[k].vocab, &len),
              "%s: token_bytes of ids out of range is NULL", m[k].dir);
        free(ids);
        free(dec);
        text_tokenizer_free(t);
    }
    // a renamed tokenizer.json: found by its first bytes, no config beside it
    char *src = NULL, *dst = tpath("renamed_tok.dat");
    size_t sn = 0;
    CHECK(file_read_all("third_party/hf-tokenizers/llama2/tokenizer.json", "t", "", 64u << 20, &src, &sn) == WGT_OK, "read");
    CHECK(atomic_write_file(dst, src, sn) == WGT_OK, "write");
    text_tokenizer *t = NULL;
    CHECK(text_tokenizer_open(&t, dst) == WGT_OK && t && !strcmp(text_tokenizer_kind_name(t), "hf"),
          "a renamed tokenizer.json opens as the hf kind: %s", wgt_last_error());
    // without tokenizer_config.json the post-processor decides, and Llama-2's adds only BOS
    if (t) CHECK(text_tokenizer_eot(t) == -1, "without a config, Llama-2 has no end-of-text: %d", text_tokenizer_eot(t));
    text_tokenizer_free(t);
    free(src);
}

// Shards with loss flags: written and read back (tokens, flags, CRC-32 as computed in memory),
// a flag byte beyond the defined bits refused, a flagged shard cut short refused; a plain shard's
// flags read as all trained.
static void test_flagged(int vocab) {
    const size_t n = 1000;
    uint32_t *t = malloc(n * 4);
    uint8_t *f = malloc(n);
    for (size_t i = 0; i < n; i++) t[i] = (uint32_t)(i * 7919u % (uint32_t)vocab), f[i] = (uint8_t)(i % 4);
    f[0] = SHARD_FLAG_START;
    const char *p = tpath("flagged.bin");
    CHECK(shard_write_flags(p, t, f, n, vocab) == WGT_OK, "write flagged (vocab %d): %s", vocab, wgt_last_error());
    shard *s;
    CHECK(shard_open(&s, p) == WGT_OK && shard_has_flags(s) && shard_count(s) == n, "open flagged: %s", wgt_last_error());
    uint32_t *rt = malloc(n * 4), crc = 0, mx = 0;
    uint8_t *rf = malloc(n);
    CHECK(shard_read(s, 0, n, rt) == WGT_OK && !memcmp(rt, t, n * 4), "flagged tokens read back");
    CHECK(shard_read_flags(s, 3, n - 3, rf) == WGT_OK && !memcmp(rf, f + 3, n - 3), "flags read back");
    CHECK(shard_scan(s, &crc, &mx, NULL, NULL) == WGT_OK && crc == shard_file_crc_flags(t, f, n, vocab),
          "the CRC-32 covers the flags");
    shard_close(s);
    size_t fl;
    uint8_t *file = test_slurp(p, &fl);
    int32_t h[3];
    memcpy(h, file, 12);
    size_t bytes = vocab <= 65536 ? 2 : 4;
    CHECK(fl == 1024 + n * (bytes + 1) && h[1] == (bytes == 2 ? 2 : 8), "flagged layout: %zu bytes, version %d", fl, h[1]);
    file[fl - 5] = 0x10;  // an undefined flag bit
    test_spit(p, file, fl);
    CHECK(shard_open(&s, p) == WGT_OK, "open");
    CHECK(shard_scan(s, &crc, &mx, NULL, NULL) != WGT_OK && contains(wgt_last_error(), "flag byte 0x10"),
          "an undefined flag bit refused: %s", wgt_last_error());
    shard_close(s);
    test_spit(p, file, fl - 1);
    CHECK(shard_open(&s, p) != WGT_OK && contains(wgt_last_error(), "truncated"), "a flagged shard cut short: %s",
          wgt_last_error());
    uint8_t bad = 4;
    CHECK(shard_write_flags(p, t, &bad, 1, vocab) != WGT_OK, "writing an undefined flag refused");
    // a plain shard: every token trained, no example starts
    CHECK(shard_write(p, t, n, vocab) == WGT_OK && shard_open(&s, p) == WGT_OK && !shard_has_flags(s), "plain shard");
    CHECK(shard_read_flags(s, 0, n, rf) == WGT_OK && rf[0] == SHARD_FLAG_TRAIN && rf[n - 1] == SHARD_FLAG_TRAIN,
          "a plain shard's flags: all trained");
    shard_close(s);
    free(file), free(t), free(f), free(rt), free(rf);
}

// Packed rows (dataset_train_batch_part, dataset_val_batch) on flagged shards of a directory of
// llm.c-style names: examples A (5 tokens, 2 of prompt), B (3), C (12, longer than T + 1), T = 8.
static void test_packed_rows(void) {
    const int T = 8;
    char *dir = tpath("packed");
    mkdir(dir, 0777);
    // ids: A 100.., B 200.., C 300..; flags: start on each first token; trained: A from its third
    // token, B all but its first, C its odd positions
    uint32_t t[20];
    uint8_t f[20];
    for (int i = 0; i < 5; i++) t[i] = 100 + i, f[i] = (uint8_t)((i == 0 ? 2 : 0) | (i >= 2 ? 1 : 0));
    for (int i = 0; i < 3; i++) t[5 + i] = 200 + i, f[5 + i] = (uint8_t)(i == 0 ? 2 : 1);
    for (int i = 0; i < 12; i++) t[8 + i] = 300 + i, f[8 + i] = (uint8_t)((i == 0 ? 2 : 0) | (i % 2));
    CHECK(shard_write_flags(tpath("packed/x_train_000.bin"), t, f, 20, 1000) == WGT_OK, "train shard");
    // val: D (4), E (4), F (3): rows [D E] and [F]
    uint32_t v[11];
    uint8_t vf[11];
    for (int i = 0; i < 11; i++) v[i] = 400 + i, vf[i] = (uint8_t)((i == 0 || i == 4 || i == 8 ? 2 : 1));
    CHECK(shard_write_flags(tpath("packed/x_val_000.bin"), v, vf, 11, 1000) == WGT_OK, "val shard");
    dataset *ds;
    CHECK(dataset_open(&ds, dir) == WGT_OK, "open packed: %s", wgt_last_error());
    if (!ds) return;
    CHECK(dataset_packed(ds) && dataset_check_seq(ds, T) == WGT_OK, "packed, any seq");
    size_t nex = 0;
    CHECK(dataset_examples_longer(ds, T, &nex) == 1 && nex == 3, "one example of 3 longer than T + 1");
    int32_t in[8 * 16], tg[8 * 16];
    uint32_t doc[8 * 16];
    uint64_t rng = 7;
    CHECK(dataset_train_batch_part(ds, &rng, 16, 0, 16, T, in, tg, doc) == WGT_OK, "packed batch: %s", wgt_last_error());
    static const int32_t wa_in[8] = {100, 101, 102, 103, 104, 200, 201, 202};
    static const int32_t wa_tg[8] = {-1, 102, 103, 104, -1, 201, 202, -1};
    static const uint32_t wa_doc[8] = {0, 0, 0, 0, 0, 5, 5, 5};
    static const int32_t wb_in[8] = {200, 201, 202, 0, 0, 0, 0, 0};
    static const int32_t wb_tg[8] = {201, 202, -1, -1, -1, -1, -1, -1};
    static const uint32_t wb_doc[8] = {0, 0, 0, 3, 3, 3, 3, 3};
    static const int32_t wc_in[8] = {300, 301, 302, 303, 304, 305, 306, 307};
    static const int32_t wc_tg[8] = {301, -1, 303, -1, 305, -1, 307, -1};  // C's token 8 is not trained
    int seen[3] = {0, 0, 0};
    for (int r = 0; r < 16; r++) {
        const int32_t *ri = in + r * T, *rt = tg + r * T;
        const uint32_t *rd = doc + r * T;
        int k = ri[0] / 100 - 1;
        CHECK(k >= 0 && k < 3, "row %d starts an example (%d)", r, ri[0]);
        if (k < 0 || k > 2) continue;
        seen[k] = 1;
        const int32_t *wi = k == 0 ? wa_in : k == 1 ? wb_in : wc_in, *wt = k == 0 ? wa_tg : k == 1 ? wb_tg : wc_tg;
        static const uint32_t zero[8] = {0};
        const uint32_t *wd = k == 0 ? wa_doc : k == 1 ? wb_doc : zero;
        CHECK(!memcmp(ri, wi, sizeof wa_in) && !memcmp(rt, wt, sizeof wa_tg) && !memcmp(rd, wd, sizeof wa_doc),
              "row %d (example %c): inputs, targets (masked, none across examples) and doc_start", r, 'A' + k);
    }
    CHECK(seen[0] && seen[1] && seen[2], "16 draws start at each of the 3 examples");
    CHECK(dataset_val_windows(ds, T) == 2, "val: 2 packed rows");
    size_t valid = 0;
    CHECK(dataset_val_batch(ds, 0, 3, T, in, tg, doc, &valid) == WGT_OK && valid == 3 + 3 + 2,
          "val batch: %zu trained targets", valid);
    CHECK(in[0] == 400 && in[4] == 404 && doc[4] == 4 && tg[3] == -1 && tg[2] == 403 && in[T] == 408 && doc[T + 3] == 3 &&
          tg[T + 2] == -1 && tg[2 * T] == -1, "val rows [D E] and [F], the third padding");
    dataset_free(ds);
    // a plain shard beside flagged ones: refused
    CHECK(shard_write(tpath("packed/y_train_001.bin"), t, 20, 1000) == WGT_OK, "plain shard");
    CHECK(dataset_open(&ds, dir) != WGT_OK && contains(wgt_last_error(), "mixes"), "mixed shards refused: %s",
          wgt_last_error());
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/wgt_test_data_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    test_tokenizer();
    test_tokenizer_reference();
    test_shard();
    test_flagged(4000);
    test_flagged(70000);
    test_packed_rows();
    test_prepare();
    test_legacy16();
    test_hf_kind();
    rm_rf(tmpdir);
    tpath_free_all();
    return test_finish();
}
