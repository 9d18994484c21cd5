// testlib.h — the few assertions our C tests need: each CHECK counts a pass or a failure, SKIP
// counts a case the machine cannot run (said on stderr, never silent), and test_finish() prints
// the closing "N passed, N failed, N skipped" line and returns the exit code.
// Written by hand: a header of about 110 lines is simpler than packaging a framework for C11 +
// OpenMP.
#ifndef WGT_TESTLIB_H
#define WGT_TESTLIB_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"

// The whole file at path, NUL-terminated, its length in *n; NULL (and *n = 0) when it cannot be
// opened.
static inline uint8_t *test_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) { *n = 0; return NULL; }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)(len > 0 ? len : 0) + 1);
    *n = fread(b, 1, (size_t)(len > 0 ? len : 0), f);
    b[*n] = 0;
    fclose(f);
    return b;
}

// Writes n bytes to path; a test that cannot write its own fixture stops (exit 2).
static inline void test_spit(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(2); }
    if (n && fwrite(p, 1, n, f) != n) { perror(path); exit(2); }
    fclose(f);
}

// A setup step that failed (not a checked result): its name and the library's message, exit 1.
static inline void die(const char *what) {
    fprintf(stderr, "%s: %s\n", what, wgt_last_error());
    exit(1);
}

static int t_pass_ = 0, t_fail_ = 0, t_skip_ = 0;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (cond) t_pass_++;                                                    \
        else {                                                                  \
            t_fail_++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
        }                                                                       \
    } while (0)

// A case that this machine or device cannot run: counted as a skip and said on stderr with the
// reason (printf-style), so that a run that tested less than it could shows it in its totals.
#define SKIP(...)                                                               \
    do {                                                                        \
        t_skip_++;                                                              \
        fprintf(stderr, "SKIP %s:%d: ", __FILE__, __LINE__);                    \
        fprintf(stderr, __VA_ARGS__);                                           \
        fprintf(stderr, "\n");                                                  \
    } while (0)

// Compares two float arrays with |a-b| <= atol + rtol*|ref|; NaN must match NaN and an
// infinity must match the same infinity. Reports the worst element on failure.
__attribute__((unused)) static int check_close_(const char *what, const float *got, const float *ref, size_t n,
                        double atol, double rtol, const char *file, int line) {
    size_t bad = 0, worst = 0;
    double worst_excess = -1;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        int ok;
        if (isnan(r) || isnan(g)) ok = isnan(r) && isnan(g);
        else if (isinf(r) || isinf(g)) ok = g == r;
        else ok = fabs(g - r) <= atol + rtol * fabs(r);
        if (!ok) {
            double ex = (isnan(g) || isnan(r) || isinf(g) || isinf(r)) ? INFINITY
                        : fabs(g - r) - (atol + rtol * fabs(r));
            if (ex > worst_excess) { worst_excess = ex; worst = i; }
            bad++;
        }
    }
    if (bad == 0) { t_pass_++; return 1; }
    t_fail_++;
    fprintf(stderr, "FAIL %s:%d: %s: %zu of %zu elements differ; worst [%zu] got %.9g ref %.9g (atol %g rtol %g)\n",
            file, line, what, bad, n, worst, got[worst], ref[worst], atol, rtol);
    return 0;
}
#define CHECK_CLOSE(what, got, ref, n, atol, rtol) check_close_(what, got, ref, n, atol, rtol, __FILE__, __LINE__)

// CHECK_CLOSE that also prints, when WGTRAIN_TEST_VERBOSE is set (and not "0"), the worst
// |got - ref| / (atol + rtol |ref|) over the finite elements (below 1 passes): how much of each
// tolerance a check actually uses.
__attribute__((unused)) static int check_close_report_(const char *what, const float *got, const float *ref, size_t n,
                                                       double atol, double rtol, const char *file, int line) {
    const char *v = getenv("WGTRAIN_TEST_VERBOSE");
    if (v && strcmp(v, "0")) {
        double worst = 0;
        for (size_t i = 0; i < n; i++)
            if (isfinite(ref[i]) && isfinite(got[i])) {
                double r = fabs((double)got[i] - ref[i]) / (atol + rtol * fabs(ref[i]));
                if (r > worst) worst = r;
            }
        fprintf(stderr, "  %-72s worst error %.3g of tolerance\n", what, worst);
    }
    return check_close_(what, got, ref, n, atol, rtol, file, line);
}
#define CHECK_CLOSE_REPORT(what, got, ref, n, atol, rtol) \
    check_close_report_(what, got, ref, n, atol, rtol, __FILE__, __LINE__)

static int test_finish(void) {
    printf("%d passed, %d failed, %d skipped\n", t_pass_, t_fail_, t_skip_);
    return t_fail_ ? 1 : 0;
}
#endif
