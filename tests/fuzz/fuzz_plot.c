// fuzz_plot.c — fuzzer for the loss plot (plot_loss_svg, src/train/plot.c) fed by metrics.jsonl:
// rows with values drawn from the extremes a file can hold (5e-324, +-1.7e308, NaN, infinities,
// huge steps) and random bit patterns are written as text, read back by metrics_log_rewind (as
// a resumed run does) and plotted. Every plot must finish (an alarm fails a loop that does not),
// stay small, and hold no non-finite coordinate.
#include <math.h>
#include <signal.h>
#include <unistd.h>
#include "fuzzlib.h"
#include "train/metrics.h"
#include "train/plot.h"

static void on_alarm(int sig) {
    static const char msg[] = "FAIL: plot_loss_svg did not finish within 30 s\n0 passed, 1 failed\n";
    ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)r, (void)sig;
    _exit(1);
}

static double pick(void) {
    static const double pool[] = {5e-324, -5e-324, 1.7976931348623157e308, -1.7976931348623157e308, 2.2250738585072014e-308,
                                  1e-300, 1e300, 0.0, -0.0, 1.0, 3.5, 1e15, 1e16, -1e16, 1e-30, 1e30};
    size_t k = fz_below(20);
    if (k < sizeof pool / sizeof pool[0]) return pool[k];
    uint64_t bits = fz_next();
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

// A number as JSON text (non-finite as null, as metrics_log_write does).
static void put(char *b, size_t n, size_t *k, const char *key, double v) {
    if (isfinite(v)) *k += (size_t)snprintf(b + *k, n - *k, ", \"%s\": %.17g", key, v);
    else *k += (size_t)snprintf(b + *k, n - *k, ", \"%s\": null", key);
}

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    signal(SIGALRM, on_alarm);
    const char *p = fz_path("metrics.jsonl"), *svg = fz_path("loss.svg");
    setvbuf(stderr, NULL, _IONBF, 0);
    fz_buf out = {0};
    for (long it = 0; it < iters; it++) {
        FILE *f = fopen(p, "w");
        if (!f) return 2;
        long rows = 1 + (long)fz_below(40);
        for (long s = 1; s <= rows; s++) {
            char line[512];
            size_t k = (size_t)snprintf(line, sizeof line, "{\"step\": %ld", fz_below(8) ? s : (long)fz_below(1000000));
            put(line, sizeof line, &k, "loss", fz_below(3) ? 3.0 - 0.01 * (double)s : pick());
            if (!fz_below(3)) put(line, sizeof line, &k, "val_loss", fz_below(2) ? 2.9 : pick());
            put(line, sizeof line, &k, "lr", fz_below(3) ? 1e-3 : pick());
            put(line, sizeof line, &k, "grad_norm", fz_below(3) ? 0.5 : pick());
            if (!fz_below(6)) k += (size_t)snprintf(line + k, sizeof line - k, ", \"skipped\": true");
            snprintf(line + k, sizeof line - k, "}\n");
            fputs(line, f);
        }
        fclose(f);
        if (!fz_below(4)) {  // now and then the text mutated too
            fz_buf txt = {0}, m = {0};
            if (fz_read(p, &txt)) {
                fz_set(&m, txt.p, txt.n);
                fz_mutate(&m, 1);
                fz_write(p, &m);
            }
            free(txt.p);
            free(m.p);
        }
        metrics_history h = {0};
        if (metrics_log_rewind(p, 1000000, &h) == WGT_OK) {
            accepted++;
            alarm(30);
            wgt_status st = plot_loss_svg(svg, &h, fz_below(2) ? 3.3 : pick(), "fuzz");
            alarm(0);
            FZ_CHECK(st == WGT_OK, "plot: %s", wgt_last_error());
            FZ_CHECK(fz_read(svg, &out), "the plot file is missing");
            FZ_CHECK(out.n < 2000000, "a plot of %zu bytes from %zu rows", out.n, h.n);
            fz_reserve(&out, out.n + 1);
            out.p[out.n] = 0;
            const char *bad = strstr((char *)out.p, "nan");
            if (!bad) bad = strstr((char *)out.p, "inf");
            FZ_CHECK(!bad, "a non-finite value in the plot: %.120s", bad ? bad - (bad - (char *)out.p > 60 ? 60 : bad - (char *)out.p) : "");
        }
        metrics_history_free(&h);
    }
    free(out.p);
    return fz_finish("fuzz_plot", iters, accepted);
}
