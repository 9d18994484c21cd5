// metrics.h — RUN_DIR/metrics.jsonl: one JSON object per update ("step", "loss", "lr",
// "grad_norm", "tokens_per_s", "time_s", "val_loss" when it was measured, "loss_scale" with
// loss scaling, "skips" once an update was skipped or with loss scaling, "resumed_with" on the
// first row after a --resume that changed settings: {"lr": 0.001, ...}), appended as
// training goes so any tool can follow a run; plus the in-memory history the loss plot draws.
#ifndef WGT_METRICS_H
#define WGT_METRICS_H
#include <stdio.h>
#include "core/error.h"

typedef struct {
    long step;
    double loss, val_loss;  // val_loss: NAN when not measured at this step
    double lr, grad_norm, tokens_per_s, time_s;
    int skipped;            // the update was skipped (non-finite loss or gradient)
    double loss_scale;      // the loss scale the update's gradients carried; NAN: no loss scaling
    long skips;             // updates skipped so far, this one included
    const char *resumed_with;  // the first row after a --resume that changed settings: them, as a JSON object
} metrics_row;

// History for the plot: every finite train loss, the validation measurements, the learning
// rate and gradient norm of every update, and the steps whose update was skipped.
typedef struct {
    double *step, *loss;
    size_t n, cap;
    double *vstep, *vloss;
    size_t nv, capv;
    double *ostep, *lr, *gnorm;  // gnorm NAN where it was not finite
    size_t no, capo;
    double *sstep;
    size_t ns, caps;
} metrics_history;

void metrics_history_add(metrics_history *h, const metrics_row *r);
void metrics_history_free(metrics_history *h);

typedef struct {
    FILE *f;
    char path[4096];
} metrics_log;

// Opens for appending (creating the file). Rows are flushed line by line.
wgt_status metrics_log_open(metrics_log *ml, const char *path);
wgt_status metrics_log_write(metrics_log *ml, const metrics_row *r);
void metrics_log_close(metrics_log *ml);

// For --resume: keeps the complete rows with step <= max_step (a crash may have left rows of
// updates the checkpoint does not include, or half a line), rewriting the file atomically,
// and loads them into h. A missing file is an empty history.
wgt_status metrics_log_rewind(const char *path, long max_step, metrics_history *h);
#endif
