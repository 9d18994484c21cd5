// fuzz_metrics.c — mutation fuzzer for metrics_log_rewind (metrics.jsonl on --resume): a log
// written by metrics_log_write, mutated as text, rewound to a random step. What is kept must be
// complete rows, each a JSON object with an integer step in 1..max_step, one per history entry.
#include <math.h>
#include "fuzzlib.h"
#include "core/json_strict.h"
#include "train/metrics.h"

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    const char *p = fz_path("metrics.jsonl");
    metrics_log ml = {0};
    if (metrics_log_open(&ml, p) != WGT_OK) return 2;
    for (long s = 1; s <= 12; s++) {
        metrics_row r = {s, 5.0 / (double)s, s % 4 ? NAN : 4.0 / (double)s, 1e-3, 0.5, 1234.5, 0.1 * (double)s, s == 7, NAN, s >= 7, NULL};
        if (metrics_log_write(&ml, &r) != WGT_OK) return 2;
    }
    metrics_log_close(&ml);
    fz_buf seed = {0}, b = {0}, out = {0};
    if (!fz_read(p, &seed)) return 2;
    for (long it = 0; it < iters; it++) {
        fz_set(&b, seed.p, seed.n);
        fz_mutate(&b, 1);
        fz_write(p, &b);
        long max_step = (long)fz_below(14);
        metrics_history h = {0};
        if (metrics_log_rewind(p, max_step, &h) != WGT_OK) {
            metrics_history_free(&h);
            continue;
        }
        accepted++;
        FZ_CHECK(fz_read(p, &out), "rewound file missing");
        size_t rows = 0, start = 0;
        for (size_t i = 0; i < out.n; i++) {
            if (out.p[i] != '\n') continue;
            cJSON *o = NULL;
            int64_t step = 0;
            FZ_CHECK(json_parse_strict(&o, (const char *)out.p + start, i + 1 - start, 0, "row") == WGT_OK &&
                     json_int_in(cJSON_GetObjectItemCaseSensitive(o, "step"), 1, max_step, &step),
                     "kept a row that is not valid: %.*s", (int)(i - start), out.p + start);
            cJSON_Delete(o);
            rows++;
            start = i + 1;
        }
        FZ_CHECK(start == out.n, "the rewound file ends with half a row");
        for (size_t i = 0; i < h.n; i++) FZ_CHECK(h.step[i] >= 1 && h.step[i] <= (double)max_step, "history step %g", h.step[i]);
        FZ_CHECK(h.n <= rows, "history has %zu rows, the file %zu", h.n, rows);
        metrics_history_free(&h);
    }
    free(seed.p);
    free(b.p);
    free(out.p);
    return fz_finish("fuzz_metrics", iters, accepted);
}
