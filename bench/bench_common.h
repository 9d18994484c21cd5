// bench_common.h — the small helpers every benchmark in bench/ shares: fatal errors, random
// host data, device buffers filled from it.
#ifndef WGT_BENCH_COMMON_H
#define WGT_BENCH_COMMON_H
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "backend/backend.h"
#include "cli/cli.h"

// A benchmark has no recovery path: report the last error with the program's name and stop.
static inline void die(const char *what) {
    fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, wgt_last_error());
    exit(1);
}

// n values uniform in [-scale, scale), the same for the same seed (xorshift).
static inline float *host_rand(size_t n, uint64_t seed, float scale) {
    float *h = malloc(n * 4 + 4);
    if (!h) { fprintf(stderr, "%s: out of host memory\n", program_invocation_short_name); exit(1); }
    uint64_t s = 0x9e3779b97f4a7c15ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        h[i] = ((float)(s >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
    }
    return h;
}

// A device buffer of n elements, uploaded from h when h is not NULL.
static inline wgt_buf *dev_from(wgt_backend *be, const float *h, size_t n, const char *label) {
    wgt_buf *b;
    if (be->buf_alloc(be, &b, n, label) != WGT_OK) die("allocation");
    wgt_view v = wgt_view_of(b, 0, b->n_elems);
    if (h && be->upload(be, v, h, n) != WGT_OK) die("upload");
    return b;
}

static inline wgt_view V0(wgt_buf *b) { wgt_view v = wgt_view_of(b, 0, b->n_elems); return v; }

// A flag's value through the command's own parsers (src/cli/cli_common.c): a whole number in
// [lo, hi], or a finite number in [lo, hi). Anything else is a usage error: the parser's message
// (naming the flag and its range) and exit status 2.
static inline void arg_fail(void) {
    fprintf(stderr, "%s: %s\n", program_invocation_short_name, wgt_last_error());
    exit(2);
}
static inline long arg_whole(const char *flag, const char *text, long lo, long hi) {
    long v;
    if (cli_parse_long(flag, text, lo, hi, &v) != WGT_OK) arg_fail();
    return v;
}
static inline double arg_real(const char *flag, const char *text, double lo, double hi) {
    double v;
    if (cli_parse_double_range(flag, text, lo, hi, 1, &v) != WGT_OK) arg_fail();
    return v;
}
#endif
