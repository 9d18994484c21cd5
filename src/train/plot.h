// plot.h — RUN_DIR/loss.svg: the train loss (raw and smoothed), the validation loss and the
// data's unigram entropy (the loss of a model that ignores context) on one chart. Written by
// hand as SVG so a run directory can be looked at in any browser, with no plotting library.
#ifndef WGT_PLOT_H
#define WGT_PLOT_H
#include "core/error.h"
#include "train/metrics.h"

// entropy: NAN to leave the reference line out. Written atomically.
wgt_status plot_loss_svg(const char *path, const metrics_history *h, double entropy, const char *title);
#endif
