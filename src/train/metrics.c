// metrics.c — metrics.jsonl writing, rewinding on resume, and the plot's history.
#include "train/metrics.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/fileutil.h"
#include "core/json_strict.h"

// Makes room for element n in the k parallel arrays a[0..k-1] of capacity *cap.
static void grow(size_t n, size_t *cap, int k, double **a[]) {
    if (n < *cap) return;
    *cap = *cap ? *cap * 2 : 256;
    for (int i = 0; i < k; i++) {
        *a[i] = realloc(*a[i], *cap * sizeof **a[i]);
        WGT_ASSERT(*a[i], "out of host memory");
    }
}

void metrics_history_add(metrics_history *h, const metrics_row *r) {
    grow(h->no, &h->capo, 3, (double **[]){&h->ostep, &h->lr, &h->gnorm});
    h->ostep[h->no] = (double)r->step;
    h->lr[h->no] = r->lr;
    h->gnorm[h->no++] = isfinite(r->grad_norm) ? r->grad_norm : NAN;
    if (r->skipped) {
        grow(h->ns, &h->caps, 1, (double **[]){&h->sstep});
        h->sstep[h->ns++] = (double)r->step;
    }
    if (isfinite(r->loss)) {
        grow(h->n, &h->cap, 2, (double **[]){&h->step, &h->loss});
        h->step[h->n] = (double)r->step;
        h->loss[h->n++] = r->loss;
    }
    if (isfinite(r->val_loss)) {
        grow(h->nv, &h->capv, 2, (double **[]){&h->vstep, &h->vloss});
        h->vstep[h->nv] = (double)r->step;
        h->vloss[h->nv++] = r->val_loss;
    }
}

void metrics_history_free(metrics_history *h) {
    free(h->step);
    free(h->loss);
    free(h->vstep);
    free(h->vloss);
    free(h->ostep);
    free(h->lr);
    free(h->gnorm);
    free(h->sstep);
    memset(h, 0, sizeof *h);
}

wgt_status metrics_log_open(metrics_log *ml, const char *path) {
    snprintf(ml->path, sizeof ml->path, "%s", path);
    return file_open_append(path, &ml->f);
}

// JSON has no NaN or infinity: a non-finite value is written as null.
static int put_num(char *p, size_t n, const char *key, double v, const char *fmt) {
    if (!isfinite(v)) return snprintf(p, n, ", \"%s\": null", key);
    char num[64];
    snprintf(num, sizeof num, fmt, v);
    return snprintf(p, n, ", \"%s\": %s", key, num);
}

wgt_status metrics_log_write(metrics_log *ml, const metrics_row *r) {
    char line[2048];
    size_t k = (size_t)snprintf(line, sizeof line, "{\"step\": %ld", r->step);
    // %.9g keeps a float-derived loss exact, so runs can be compared bit for bit from the log
    k += (size_t)put_num(line + k, sizeof line - k, "loss", r->loss, "%.9g");
    if (!isnan(r->val_loss)) k += (size_t)put_num(line + k, sizeof line - k, "val_loss", r->val_loss, "%.9g");
    k += (size_t)put_num(line + k, sizeof line - k, "lr", r->lr, "%.6g");
    k += (size_t)put_num(line + k, sizeof line - k, "grad_norm", r->grad_norm, "%.6g");
    k += (size_t)put_num(line + k, sizeof line - k, "tokens_per_s", r->tokens_per_s, "%.1f");
    k += (size_t)put_num(line + k, sizeof line - k, "time_s", r->time_s, "%.3f");
    if (r->skipped) k += (size_t)snprintf(line + k, sizeof line - k, ", \"skipped\": true");
    if (!isnan(r->loss_scale)) k += (size_t)put_num(line + k, sizeof line - k, "loss_scale", r->loss_scale, "%.9g");
    if (!isnan(r->loss_scale) || r->skips > 0) k += (size_t)snprintf(line + k, sizeof line - k, ", \"skips\": %ld", r->skips);
    if (r->resumed_with && r->resumed_with[0] && strlen(r->resumed_with) < 1200)
        k += (size_t)snprintf(line + k, sizeof line - k, ", \"resumed_with\": %s", r->resumed_with);
    snprintf(line + k, sizeof line - k, "}\n");
    if (fputs(line, ml->f) == EOF || fflush(ml->f) != 0)
        return wgt_fail(WGT_ERR_IO, "cannot write %s: %s (disk full?)", ml->path, strerror(errno));
    return WGT_OK;
}

void metrics_log_close(metrics_log *ml) {
    if (ml->f) fclose(ml->f);
    ml->f = NULL;
}

static double num_or_nan(const cJSON *o, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(it) ? it->valuedouble : NAN;
}

wgt_status metrics_log_rewind(const char *path, long max_step, metrics_history *h) {
    struct stat sb;
    if (lstat(path, &sb) != 0 && errno == ENOENT) return WGT_OK;
    FILE *f;
    WGT_TRY(file_fopen_read(path, "metrics log", NULL, &f, NULL));
    atomic_file af;
    wgt_status st = atomic_file_open(&af, path);
    if (st != WGT_OK) {
        fclose(f);
        return st;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] != '\n') break;  // a half-written last line
        // a row that is not a JSON object with an integer step in 1..max_step is dropped
        cJSON *o = NULL;
        int64_t step;
        if (json_parse_strict(&o, line, (size_t)len, 0, path) == WGT_OK && cJSON_IsObject(o) &&
            json_int_in(cJSON_GetObjectItemCaseSensitive(o, "step"), 1, max_step, &step)) {
            atomic_file_write(&af, line, (size_t)len);
            const cJSON *sk = cJSON_GetObjectItemCaseSensitive(o, "skipped");
            metrics_row r = {(long)step, num_or_nan(o, "loss"), num_or_nan(o, "val_loss"), num_or_nan(o, "lr"),
                             num_or_nan(o, "grad_norm"), 0, 0, cJSON_IsTrue(sk), NAN, 0, NULL};
            metrics_history_add(h, &r);
        }
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    return atomic_file_commit(&af);
}
