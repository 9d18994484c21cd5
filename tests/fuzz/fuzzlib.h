// fuzzlib.h — what the mutation fuzzers in tests/fuzz/ share: a deterministic RNG, a mutator
// (bit flips, interesting bytes and integers, chunk deletion / insertion / duplication,
// truncation, and for text formats number and key splices), file helpers and the summary line.
// Plain C with no fuzzing framework: each driver builds a valid seed file with wgtrain's own
// writer, mutates it N times, feeds every variant to the reader and checks what the reader
// accepted. Run under AddressSanitizer + UndefinedBehaviorSanitizer (make fuzz), any memory
// error or undefined behaviour aborts the driver; a broken invariant is counted as a failure.
#ifndef WGT_FUZZLIB_H
#define WGT_FUZZLIB_H
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t fz_state = 0x9E3779B97F4A7C15ull;
static uint64_t fz_next(void) {
    uint64_t z = (fz_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static size_t fz_below(size_t n) { return n ? (size_t)(fz_next() % n) : 0; }

typedef struct {
    uint8_t *p;
    size_t n, cap;
} fz_buf;

static void fz_reserve(fz_buf *b, size_t n) {
    if (n <= b->cap) return;
    b->cap = n * 2 + 64;
    b->p = realloc(b->p, b->cap);
    if (!b->p) { fprintf(stderr, "fuzz: out of memory\n"); exit(2); }
}
static void fz_set(fz_buf *b, const void *p, size_t n) {
    fz_reserve(b, n + 1);
    if (n) memcpy(b->p, p, n);
    b->n = n;
}
static void fz_insert(fz_buf *b, size_t at, const void *p, size_t n) {
    fz_reserve(b, b->n + n + 1);
    memmove(b->p + at + n, b->p + at, b->n - at);
    memcpy(b->p + at, p, n);
    b->n += n;
}
static void fz_erase(fz_buf *b, size_t at, size_t n) {
    if (at >= b->n) return;
    if (n > b->n - at) n = b->n - at;
    memmove(b->p + at, b->p + at + n, b->n - at - n);
    b->n -= n;
}

static const char *const fz_tokens[] = {
    "0", "1", "-1", "2", "4", "7", "255", "256", "65535", "65536", "2147483647", "2147483648", "4294967295",
    "4294967296", "9007199254740991", "9007199254740993", "18446744073709551615", "1e300", "-1e300", "1e-400",
    "0.5", "2.5", "1e3", "01", "-0", "NaN", "Infinity", "null", "true", "false", "\"\"", "\"x\"", "[]", "{}",
    "[1,2]", "\"\\u0000\"", "\"\\ud800\"", "\xff", "\xc3\x28", "(", ")", "()", "(3)", "(3,)", "(-1,)", "True",
    "False", "'<f4'", "'<i4'", "'<f8'", "'descr'", "'shape'", "'fortran_order'", "\"F32\"", "\"F16\"", "\"dtype\"",
    "\"shape\"", "\"data_offsets\"", "\"__metadata__\"", "\"step\"", "\"version\"", ",", ":", "{", "}", "[", "]",
    "\"", "'", " ", "\n", "\\", "\x00"};
#define FZ_NTOKENS (sizeof fz_tokens / sizeof fz_tokens[0])

static void fz_put_int(fz_buf *b, size_t at, int width) {
    static const uint64_t interesting[] = {0, 1, 2, 3, 4, 7, 8, 16, 64, 255, 256, 1023, 1024, 65535, 65536,
                                           0x7fffffff, 0x80000000, 0xffffffff, 0x100000000ull, 0x7fffffffffffffffull,
                                           0x8000000000000000ull, 0xffffffffffffffffull, 20240520, 1000000000000ull};
    uint64_t v = interesting[fz_below(sizeof interesting / sizeof interesting[0])];
    if (fz_next() & 1) v += (uint64_t)(int64_t)(int)(fz_below(5)) - 2;
    if (at + (size_t)width > b->n) return;
    for (int i = 0; i < width; i++) b->p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

// Applies 1..4 random mutations (mostly one, so that many inputs stay close to valid and reach
// the deeper checks); text != 0 adds token splices (JSON / .npy headers).
static void fz_mutate(fz_buf *b, int text) {
    int k = fz_below(3) ? 1 : 2 + (int)fz_below(3);
    for (int m = 0; m < k; m++) {
        size_t at = fz_below(b->n + 1);
        switch (fz_below(text ? 12 : 9)) {
        case 0: if (b->n) b->p[fz_below(b->n)] ^= (uint8_t)(1u << fz_below(8)); break;
        case 1: if (b->n) b->p[fz_below(b->n)] = (uint8_t)fz_next(); break;
        case 2: if (b->n) fz_put_int(b, fz_below(b->n), (int[]){1, 2, 4, 8}[fz_below(4)]); break;
        case 3: fz_erase(b, at, 1 + fz_below(16)); break;
        case 4: {
            uint8_t r[16];
            size_t n = 1 + fz_below(sizeof r);
            for (size_t i = 0; i < n; i++) r[i] = (uint8_t)fz_next();
            fz_insert(b, at, r, n);
            break;
        }
        case 5: {  // duplicate a chunk elsewhere
            if (!b->n) break;
            size_t from = fz_below(b->n), n = 1 + fz_below(64);
            if (n > b->n - from) n = b->n - from;
            uint8_t *tmp = malloc(n);
            memcpy(tmp, b->p + from, n);
            fz_insert(b, at, tmp, n);
            free(tmp);
            break;
        }
        case 6: b->n = fz_below(b->n + 1); break;  // truncate
        case 7: if (b->n) fz_put_int(b, fz_below(b->n < 64 ? b->n : 64), (int[]){4, 8}[fz_below(2)]); break;  // header ints
        case 8: { uint8_t z[8] = {0}; fz_insert(b, at, z, 1 + fz_below(8)); break; }
        default: {  // text: splice a token, replacing a short run or a number
            const char *t = fz_tokens[fz_below(FZ_NTOKENS)];
            size_t tl = t[0] ? strlen(t) : 1;
            if (at < b->n && fz_next() % 3) {
                size_t e = at;
                if (b->p[at] >= '0' && b->p[at] <= '9') while (e < b->n && ((b->p[e] >= '0' && b->p[e] <= '9') || b->p[e] == '.')) e++;
                else e = at + fz_below(4);
                fz_erase(b, at, e - at);
            }
            fz_insert(b, at, t, tl);
            break;
        }
        }
    }
}

__attribute__((unused)) static void fz_write(const char *path, const fz_buf *b) {
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(2); }
    if (b->n && fwrite(b->p, 1, b->n, f) != b->n) { perror(path); exit(2); }
    fclose(f);
}

__attribute__((unused)) static int fz_read(const char *path, fz_buf *b) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    b->n = 0;
    uint8_t chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) {
        fz_reserve(b, b->n + k + 1);
        memcpy(b->p + b->n, chunk, k);
        b->n += k;
    }
    fclose(f);
    return 1;
}

static char fz_dir[256];
static int fz_rm(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }
static void fz_setup(int argc, char **argv, long *iters) {
    const char *e = getenv("FUZZ_ITERS");
    *iters = argc > 1 ? atol(argv[1]) : e ? atol(e) : 2000;
    if (*iters < 1 || *iters > 100000000) *iters = 2000;
    const char *s = getenv("FUZZ_SEED");
    if (s) fz_state ^= strtoull(s, NULL, 10) * 0x2545F4914F6CDD1Dull;
    const char *t = getenv("TMPDIR");
    snprintf(fz_dir, sizeof fz_dir, "%s/wgt_fuzz_XXXXXX", t ? t : "/tmp");
    if (!mkdtemp(fz_dir)) { perror("mkdtemp"); exit(2); }
}
__attribute__((unused)) static const char *fz_path(const char *name) {
    static char b[8][512];
    static int k = 0;
    char *s = b[k++ % 8];
    snprintf(s, 512, "%s/%s", fz_dir, name);
    return s;
}

static long fz_fail = 0;
#define FZ_CHECK(cond, ...)                                                              \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            if (fz_fail++ < 10) {                                                        \
                fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
                fprintf(stderr, __VA_ARGS__);                                            \
                fprintf(stderr, "\n");                                                   \
            }                                                                            \
        }                                                                                \
    } while (0)

// Prints the counts and the "N passed, N failed" line run_all.sh reads; returns the exit code.
static int fz_finish(const char *name, long iters, long accepted) {
    nftw(fz_dir, fz_rm, 16, FTW_DEPTH | FTW_PHYS);
    printf("%s: %ld inputs, %ld accepted, %ld refused, %ld invariant failures\n", name, iters, accepted,
           iters - accepted, fz_fail);
    printf("%d passed, %d failed\n", fz_fail ? 0 : 1, fz_fail ? 1 : 0);
    return fz_fail ? 1 : 0;
}
#endif
