// plot.c — the loss chart as hand-written SVG (see plot.h).
#include "train/plot.h"
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "core/fileutil.h"

#define W 820.0
#define H 700.0
#define ML 70.0   // margins: room for tick labels on the left and below
#define MR 24.0
#define MAX_POINTS 1500  // more train points than pixels only bloat the file: average them
// Values are drawn within +-PLOT_MAX (larger ones at the edge) and a log scale within
// [LOG_MIN, LOG_MAX]: any double from a metrics file (5e-324, 1.7e308) then gives finite pixel
// positions and a tick step that advances, and no axis draws more than MAX_TICKS ticks.
#define PLOT_MAX 1e15
#define LOG_MIN 1e-30
#define LOG_MAX 1e30
#define MAX_TICKS 64

// The three panels, top to bottom: loss, learning rate, gradient norm (pixel rows).
#define LOSS_TOP 44.0
#define LOSS_BOTTOM 420.0
#define LR_TOP 448.0
#define LR_BOTTOM 538.0
#define GN_TOP 566.0
#define GN_BOTTOM 656.0

typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        WGT_ASSERT(k >= 0, "vsnprintf failed");
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        b->cap = (b->cap + (size_t)k + 1) * 2;
        b->p = realloc(b->p, b->cap);
        WGT_ASSERT(b->p, "out of host memory");
    }
}

static void xml_text(sbuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '<') sb_printf(b, "&lt;");
        else if (*s == '>') sb_printf(b, "&gt;");
        else if (*s == '&') sb_printf(b, "&amp;");
        else sb_printf(b, "%c", *s);
    }
}

// A "nice" tick spacing (1, 2 or 5 times a power of ten) giving about `want` ticks over span
// (a span that is not a positive finite number gets 1).
static double nice_step(double span, int want) {
    if (!(span > 0) || !isfinite(span)) return 1;
    double raw = span / want, p = pow(10, floor(log10(raw))), f = raw / p;
    if (!(p > 0) || !isfinite(p)) return span / want;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

// A value as drawn: NAN when not finite (left out), else clamped to +-PLOT_MAX.
static double plot_value(double v) {
    if (!isfinite(v)) return NAN;
    return v > PLOT_MAX ? PLOT_MAX : v < -PLOT_MAX ? -PLOT_MAX : v;
}

// A copy of n values as drawn (plot_value); free() it.
static double *plot_values(const double *v, size_t n) {
    double *o = wgt_malloc((n + 1) * sizeof *o);
    for (size_t i = 0; i < n; i++) o[i] = plot_value(v[i]);
    return o;
}

// How many ticks of step `step` from a to b (at most MAX_TICKS; 0 when the step does not advance).
static int tick_count(double a, double b, double step) {
    if (!(step > 0) || !isfinite(a) || !isfinite(b) || b < a || a + step == a) return 0;
    double k = floor((b - a) / step + 0.5) + 1;
    return k > MAX_TICKS ? MAX_TICKS : (int)k;
}

// A panel: data ranges, its pixel rows, and whether y is drawn on a log scale.
typedef struct {
    double x0, x1, y0, y1;
    double top, bottom;
    int logy;
} frame;

static double ymap(const frame *f, double y) { return f->logy ? log10(y) : y; }
static double px(const frame *f, double x) { return ML + (x - f->x0) / (f->x1 - f->x0) * (W - ML - MR); }
static double py(const frame *f, double y) {
    return f->bottom - (ymap(f, y) - ymap(f, f->y0)) / (ymap(f, f->y1) - ymap(f, f->y0)) * (f->bottom - f->top);
}

// Grid, ticks, the frame and the y label of a panel; x labels only under the bottom panel.
static void axes(sbuf *b, const frame *f, double xs, double ys, const char *ylabel, int xlabels) {
    for (int i = 0, nt = tick_count(f->x0, f->x1, xs); i < nt; i++) {
        double x = f->x0 + i * xs;
        sb_printf(b, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#e5e5e5\"/>\n", px(f, x), f->top,
                  px(f, x), f->bottom);
        sb_printf(b, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"black\"/>\n", px(f, x), f->bottom,
                  px(f, x), f->bottom + 5);
        if (xlabels)
            sb_printf(b, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n", px(f, x), f->bottom + 19, x);
    }
    if (f->logy) {  // decades
        double d0 = ceil(log10(f->y0)), d1 = floor(log10(f->y1) + 1e-4);
        for (int i = 0, nt = tick_count(d0, d1, 1); i < nt; i++) {
            double y = pow(10, d0 + i);
            sb_printf(b, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n", ML, py(f, y), W - MR,
                      py(f, y));
            sb_printf(b, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ML - 8, py(f, y) + 4, y);
        }
    } else {
        for (int i = 0, nt = tick_count(f->y0, f->y1, ys); i < nt; i++) {
            double y = f->y0 + i * ys;
            sb_printf(b, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n", ML, py(f, y), W - MR,
                      py(f, y));
            sb_printf(b, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"black\"/>\n", ML - 5, py(f, y), ML,
                      py(f, y));
            sb_printf(b, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ML - 8, py(f, y) + 4,
                      fabs(y) < ys / 1e6 ? 0.0 : y);
        }
    }
    sb_printf(b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", ML, f->top,
              W - ML - MR, f->bottom - f->top);
    sb_printf(b, "<text transform=\"translate(18 %.0f) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
              (f->top + f->bottom) / 2, ylabel);
}

// A linear panel's y range and tick step from the finite values of y (at least a small span).
static double fit_linear(frame *f, const double *y, size_t n, int from_zero) {
    f->y0 = from_zero ? 0 : INFINITY, f->y1 = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(y[i])) f->y0 = fmin(f->y0, y[i]), f->y1 = fmax(f->y1, y[i]);
    if (!isfinite(f->y0) || !isfinite(f->y1)) f->y0 = 0, f->y1 = 1;
    if (f->y1 - f->y0 < 1e-12 * fmax(1, fabs(f->y1))) f->y1 = f->y0 + fmax(1e-12, fabs(f->y0));
    double ys = nice_step(f->y1 - f->y0, 3);
    f->y0 = floor(f->y0 / ys) * ys;
    f->y1 = ceil(f->y1 / ys) * ys;
    return ys;
}

// A curve through the points whose position is finite (on a log scale: y > 0), broken into
// separate lines where a point is left out.
static void polyline(sbuf *b, const frame *f, const double *x, const double *y, size_t n, const char *style) {
    int open = 0;
    for (size_t i = 0; i < n; i++) {
        double X = px(f, x[i]), Y = isfinite(y[i]) && (!f->logy || y[i] > 0) ? py(f, y[i]) : NAN;
        if (!isfinite(X) || !isfinite(Y)) {
            if (open) sb_printf(b, "\"/>\n");
            open = 0;
            continue;
        }
        if (!open) sb_printf(b, "<polyline fill=\"none\" %s points=\"", style);
        sb_printf(b, "%s%.1f,%.1f", open ? " " : "", X, Y);
        open = 1;
    }
    if (open) sb_printf(b, "\"/>\n");
}

wgt_status plot_loss_svg(const char *path, const metrics_history *h, double entropy, const char *title) {
    // downsampled raw train loss, and a centred moving average of it (the trend, without the
    // lag an exponential average would show against the validation points)
    size_t n = h->n, group = n > MAX_POINTS ? (n + MAX_POINTS - 1) / MAX_POINTS : 1, m = (n + group - 1) / group;
    double *sx = wgt_malloc((m + 1) * sizeof *sx), *sy = wgt_malloc((m + 1) * sizeof *sy);
    double *ey = wgt_malloc((m + 1) * sizeof *ey);
    entropy = plot_value(entropy);
    // every value as drawn: finite and within +-PLOT_MAX, or NAN (left out)
    double *vstep = plot_values(h->vstep, h->nv), *vloss = plot_values(h->vloss, h->nv);
    double *ostep = plot_values(h->ostep, h->no), *lr = plot_values(h->lr, h->no), *gnorm = plot_values(h->gnorm, h->no);
    for (size_t g = 0; g < m; g++) {
        double x = 0, y = 0;
        size_t lo = g * group, hi = lo + group < n ? lo + group : n, nx = 0, ny = 0;
        for (size_t i = lo; i < hi; i++) {
            double xi = plot_value(h->step[i]), yi = plot_value(h->loss[i]);
            if (isfinite(xi)) x += xi, nx++;
            if (isfinite(yi)) y += yi, ny++;
        }
        sx[g] = nx ? x / (double)nx : NAN;
        sy[g] = ny ? y / (double)ny : NAN;
    }
    size_t half = m / 40 > 2 ? m / 40 : 2;
    for (size_t g = 0; g < m; g++) {
        size_t lo = g > half ? g - half : 0, hi = g + half + 1 < m ? g + half + 1 : m;
        size_t w = g - lo < hi - 1 - g ? g - lo : hi - 1 - g;  // symmetric window near the ends
        double y = 0;
        size_t k = 0;
        for (size_t i = g - w; i <= g + w; i++)
            if (isfinite(sy[i])) y += sy[i], k++;
        ey[g] = k && isfinite(sy[g]) ? y / (double)k : NAN;
    }
    frame f = {0, 1, INFINITY, -INFINITY, LOSS_TOP, LOSS_BOTTOM, 0};
    for (size_t i = 0; i < m; i++) f.x1 = fmax(f.x1, sx[i]), f.y0 = fmin(f.y0, sy[i]), f.y1 = fmax(f.y1, sy[i]);
    for (size_t i = 0; i < h->nv; i++)
        f.x1 = fmax(f.x1, vstep[i]), f.y0 = fmin(f.y0, vloss[i]), f.y1 = fmax(f.y1, vloss[i]);
    if (isfinite(entropy)) f.y0 = fmin(f.y0, entropy), f.y1 = fmax(f.y1, entropy);
    if (!isfinite(f.y0) || !isfinite(f.y1)) f.y0 = 0, f.y1 = 1;
    if (f.y1 - f.y0 < 1e-3) f.y0 -= 0.5, f.y1 += 0.5;
    double xs, ys = nice_step(f.y1 - f.y0, 6);
    f.y0 = floor(f.y0 / ys) * ys;
    f.y1 = ceil(f.y1 / ys) * ys;

    sbuf b = {0};
    sb_printf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                  "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    sb_printf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" y=\"24\" font-size=\"15\" "
                  "text-anchor=\"middle\">", (ML + W - MR) / 2);
    xml_text(&b, title);
    sb_printf(&b, "</text>\n");
    for (size_t i = 0; i < h->no; i++) f.x1 = fmax(f.x1, ostep[i]);
    xs = nice_step(f.x1 - f.x0, 8);
    f.x1 = ceil(f.x1 / xs) * xs;
    axes(&b, &f, xs, ys, "loss (nats/token)", 0);
    sb_printf(&b, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step (optimizer updates)</text>\n", (ML + W - MR) / 2,
              H - 12);
    // curves
    if (isfinite(entropy)) {
        sb_printf(&b, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#777\" stroke-dasharray=\"6 4\"/>\n", ML,
                  py(&f, entropy), W - MR, py(&f, entropy));
        sb_printf(&b, "<text x=\"%.0f\" y=\"%.1f\" fill=\"#555\" text-anchor=\"end\">unigram entropy %.3f</text>\n",
                  W - MR - 6, py(&f, entropy) - 5, entropy);
    }
    polyline(&b, &f, sx, sy, m, "stroke=\"#9ecae1\" stroke-width=\"1\"");
    polyline(&b, &f, sx, ey, m, "stroke=\"#1f77b4\" stroke-width=\"2\"");
    polyline(&b, &f, vstep, vloss, h->nv, "stroke=\"#ff7f0e\" stroke-width=\"2\"");
    for (size_t i = 0; i < h->nv; i++)
        if (isfinite(px(&f, vstep[i])) && isfinite(py(&f, vloss[i])))
            sb_printf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#ff7f0e\"/>\n", px(&f, vstep[i]), py(&f, vloss[i]));
    // legend
    double lx = W - MR - 220, ly = LOSS_TOP + 14;
    sb_printf(&b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"210\" height=\"%d\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#ccc\"/>\n",
              lx - 8, ly - 12, h->nv ? 62 : 44);
    const char *names[] = {"train loss", "train loss (smoothed)", "validation loss"};
    const char *colors[] = {"#9ecae1", "#1f77b4", "#ff7f0e"};
    for (int i = 0; i < (h->nv ? 3 : 2); i++) {
        sb_printf(&b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"/>", lx, ly - 4 + 18 * i,
                  lx + 24, ly - 4 + 18 * i, colors[i]);
        sb_printf(&b, "<text x=\"%.0f\" y=\"%.0f\">%s", lx + 32, ly + 18 * i, names[i]);
        if (i == 0 && n) sb_printf(&b, " (last %.4g)", h->loss[n - 1]);
        if (i == 2 && h->nv) sb_printf(&b, " (last %.4g)", h->vloss[h->nv - 1]);
        sb_printf(&b, "</text>\n");
    }
    // skipped updates: red marks along the top of the loss panel
    for (size_t i = 0; i < h->ns; i++)
        if (isfinite(px(&f, plot_value(h->sstep[i]))))
            sb_printf(&b, "<path d=\"M%.1f %.0f l-4 -8 h8 z\" fill=\"#d62728\"/>\n", px(&f, plot_value(h->sstep[i])), LOSS_TOP + 9);
    if (h->ns)
        sb_printf(&b, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#d62728\">%zu skipped update%s (non-finite gradient)</text>\n",
                  ML + 8, LOSS_TOP + 24, h->ns, h->ns == 1 ? "" : "s");
    // learning rate, linear from 0
    frame fl = {f.x0, f.x1, 0, 1, LR_TOP, LR_BOTTOM, 0};
    double lys = fit_linear(&fl, lr, h->no, 1);
    axes(&b, &fl, xs, lys, "lr", 0);
    polyline(&b, &fl, ostep, lr, h->no, "stroke=\"#2ca02c\" stroke-width=\"1.5\"");
    // gradient norm (before clipping): log scale when it spans more than a decade
    frame fg = {f.x0, f.x1, 0, 1, GN_TOP, GN_BOTTOM, 0};
    double gmin = INFINITY, gmax = 0;
    for (size_t i = 0; i < h->no; i++)
        if (isfinite(gnorm[i]) && gnorm[i] > 0) gmin = fmin(gmin, gnorm[i]), gmax = fmax(gmax, gnorm[i]);
    double gys = 1;
    if (gmax > 0 && gmax / gmin > 10) {
        fg.logy = 1;
        fg.y0 = pow(10, floor(log10(fmax(gmin, LOG_MIN))));
        fg.y1 = pow(10, ceil(log10(fmin(gmax, LOG_MAX))));
        if (!(fg.y1 > fg.y0)) fg.y1 = fg.y0 * 10;
        // norms beyond the log range are drawn at its edge
        for (size_t i = 0; i < h->no; i++)
            if (isfinite(gnorm[i]) && gnorm[i] > 0) gnorm[i] = fmin(fmax(gnorm[i], fg.y0), fg.y1);
    } else {
        gys = fit_linear(&fg, gnorm, h->no, 1);
    }
    axes(&b, &fg, xs, gys, "grad norm", 1);
    // the polyline skips non-finite norms (and zeros on a log scale) by breaking into segments
    polyline(&b, &fg, ostep, gnorm, h->no, "stroke=\"#9467bd\" stroke-width=\"1.5\"");
    sb_printf(&b, "</svg>\n");
    free(sx);
    free(sy);
    free(ey);
    free(vstep), free(vloss), free(ostep), free(lr), free(gnorm);
    atomic_file af;
    wgt_status st = atomic_file_open(&af, path);
    if (st == WGT_OK) {
        atomic_file_write(&af, b.p, b.n);
        st = atomic_file_commit(&af);
    }
    free(b.p);
    return st;
}
