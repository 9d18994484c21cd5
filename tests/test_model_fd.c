// test_model_fd.c — whole-model gradients of the C reference GPT-2 and LLaMA (cpu backend) against
// finite differences of its own loss. test_cpu_grad.c checks every backward op alone; this test
// checks what those checks cannot see: the GPT-2 schedule in src/model/ (which buffer feeds
// which op, residual gradient accumulation, weight tying of wte as the lm_head, the loss options
// and the normalisation by the number of valid targets). A wrong wiring gives a gradient that is
// right for some other function, and only a derivative of the real loss catches that.
//
// Method: directional derivatives. The forward is float32, so per-coordinate differences of tiny
// gradient entries would drown in rounding; instead, for a direction d (unit L2 norm) we compare
//     D(h) = [-L(p+2hd) + 8 L(p+hd) - 8 L(p-hd) + L(p-2hd)] / 12h       (5-point stencil)
// with g·d (g from model_backward, dot product in double). Directions, per parameter tensor: the
// normalised gradient of that tensor (checks its magnitude: g·ĝ = |g|) and two random Gaussian
// directions (check its orientation); plus two directions over all tensors at once.
// L is the loss the gradient is of: inv_norm · Σ row losses (model_loss_sum), inv_norm = 1/valid.
//
// Tolerances, measured on this model. The loss sum comes back as a float32 and carries the
// float32 rounding of the forward: ~1.3e-7 of noise on L (~2.5). The stencil divides it by h and
// multiplies by ~1.5, so with h = 0.005 its noise floor is ~4e-5 (the largest |D - g.d| we see
// on tensors with small gradients). Its truncation error, h^4/30 * L^(5), matters because
// O(1) parameters make L strongly curved: along the gradient of the embeddings it reaches
// 6e-4 * |g| (h = 0.01 gives 8.6e-3 absolute there, h = 0.003 lets the noise grow to 5e-5;
// 0.005 balances the two). The analytical g.d carries the float32 backward's ~1e-6 relative.
// So we check
//     |D - g.d| <= 2e-4 + 3e-3 * |g|_tensor
// (|g|_tensor: the norm of that tensor's gradient, or of all of them for whole-model
// directions), 5x the measured worst case of each term. For the smallest tensor gradient here
// (|g| ~ 0.03) that is ~1 % of |g|, while a bug (a missing term, a wrong index, a factor of
// two, a dropped residual branch) typically moves g.d by 10-100 % of |g|. Parameters are O(1)
// rather than GPT-2's 0.02 initialisation so that every tensor's gradient is well above the
// noise floor; each case prints the range of its per-tensor |g| and its worst ratio to the
// tolerance.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "testlib.h"
#include "model/model.h"

#define FD_H 0.005
#define FD_ATOL 2e-4
#define FD_RTOL_G 3e-3

static uint64_t rs = 0x1234567887654321ull;
static double urand(void) {
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void) { return sqrt(-2.0 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

typedef struct {
    wgt_model *m;
    int np, B, T, V;
    size_t *n;        // elements per tensor
    float **p0;       // original parameters per tensor
    double **g;       // gradient per tensor (double copy)
    double *gnorm;    // |g| per tensor
    int32_t *tok, *tgt;
    model_loss_opts lo;
    float inv_norm;
} fdctx;

// O(1) parameters: matrices N(0, 1/fan_in)·2 (so activations stay O(1) through the layers),
// embeddings N(0, 0.5), biases N(0, 0.1), norm weights 1 + N(0, 0.1); the roles come from the
// parameter table (matrices are [out, in], so fan_in is shape[1]).
static void set_params(wgt_model *m) {
    for (int i = 0; i < model_param_count(m); i++) {
        const model_param_info *p = model_param(m, i);
        size_t n = p->n;
        float *x = malloc(n * 4);
        int is_norm_w = p->init == MODEL_INIT_ONES, is_emb = (p->flags & MODEL_T_EMBEDDING) != 0, is_w = p->ndim == 2;
        double fan_in = (double)p->shape[1];
        for (size_t k = 0; k < n; k++) {
            double r = nrand();
            if (is_norm_w) x[k] = (float)(1.0 + 0.1 * r);
            else if (is_emb) x[k] = (float)(0.5 * r);
            else if (is_w) x[k] = (float)(2.0 * r / sqrt(fan_in));
            else x[k] = (float)(0.1 * r);
        }
        if (model_param_set(m, i, x) != WGT_OK) die("param_set");
        free(x);
    }
}

static double loss_at(fdctx *c) {
    if (model_forward(c->m, c->tok, c->tgt, c->lo, c->inv_norm) != WGT_OK) die("forward");
    double s;
    if (model_loss_sum(c->m, &s) != WGT_OK) die("loss_sum");
    return s * c->inv_norm;
}

// Gradients of the current parameters into c->g.
static double compute_grads(fdctx *c) {
    model_zero_grad(c->m);
    double L = loss_at(c);
    model_backward(c->m);
    for (int i = 0; i < c->np; i++) {
        float *gf = malloc(c->n[i] * 4);
        if (model_param_get(c->m, i, gf, 1) != WGT_OK) die("param_get");
        double s = 0;
        for (size_t k = 0; k < c->n[i]; k++) { c->g[i][k] = gf[k]; s += (double)gf[k] * gf[k]; }
        c->gnorm[i] = sqrt(s);
        free(gf);
    }
    return L;
}

// Sets tensors lo..hi-1 to p0 + s·d (d laid out tensor after tensor).
static void set_shift(fdctx *c, int lo, int hi, double **d, double s) {
    for (int i = lo; i < hi; i++) {
        float *x = malloc(c->n[i] * 4);
        for (size_t k = 0; k < c->n[i]; k++) x[k] = (float)(c->p0[i][k] + s * d[i][k]);
        if (model_param_set(c->m, i, x) != WGT_OK) die("param_set");
        free(x);
    }
}

// The 5-point directional derivative over tensors lo..hi-1 along d (unit norm overall).
static double fd_dir(fdctx *c, int lo, int hi, double **d) {
    double h = FD_H, f[4];
    const double steps[4] = {2, 1, -1, -2};
    for (int k = 0; k < 4; k++) {
        set_shift(c, lo, hi, d, steps[k] * h);
        f[k] = loss_at(c);
    }
    set_shift(c, lo, hi, d, 0.0);
    return (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * h);
}

static fdctx ctx_new(wgt_backend *be, const model_config *cfg, int B, int T) {
    fdctx c;
    memset(&c, 0, sizeof c);
    if (model_init(&c.m, be, cfg, B, T) != WGT_OK) die("model_init");
    if (model_init_random(c.m, 7) != WGT_OK) die("model_init_random");
    set_params(c.m);
    c.np = model_param_count(c.m);
    c.B = B; c.T = T; c.V = cfg->vocab;
    c.n = calloc(c.np, sizeof *c.n);
    c.p0 = calloc(c.np, sizeof *c.p0);
    c.g = calloc(c.np, sizeof *c.g);
    c.gnorm = calloc(c.np, sizeof *c.gnorm);
    for (int i = 0; i < c.np; i++) {
        c.n[i] = model_param(c.m, i)->n;
        c.p0[i] = malloc(c.n[i] * 4);
        c.g[i] = calloc(c.n[i], sizeof(double));
        if (model_param_get(c.m, i, c.p0[i], 0) != WGT_OK) die("param_get");
    }
    c.tok = malloc(sizeof(int32_t) * B * T);
    c.tgt = malloc(sizeof(int32_t) * B * T);
    for (int i = 0; i < B * T; i++) {
        c.tok[i] = (int32_t)(urand() * cfg->vocab);
        c.tgt[i] = (int32_t)(urand() * cfg->vocab);
    }
    return c;
}

static void ctx_free(fdctx *c) {
    for (int i = 0; i < c->np; i++) { free(c->p0[i]); free(c->g[i]); }
    free(c->n); free(c->p0); free(c->g); free(c->gnorm); free(c->tok); free(c->tgt);
    model_free(c->m);
}

static int count_valid(const fdctx *c) {
    int v = 0;
    for (int i = 0; i < c->B * c->T; i++) v += c->tgt[i] >= 0 && c->tgt[i] < c->V;
    return v;
}

static double **dir_alloc(fdctx *c) {
    double **d = calloc(c->np, sizeof *d);
    for (int i = 0; i < c->np; i++) d[i] = calloc(c->n[i], sizeof(double));
    return d;
}
static void dir_free(fdctx *c, double **d) {
    for (int i = 0; i < c->np; i++) free(d[i]);
    free(d);
}
// Normalises d over tensors lo..hi-1 to unit norm.
static void dir_normalise(fdctx *c, double **d, int lo, int hi) {
    double s = 0;
    for (int i = lo; i < hi; i++) for (size_t k = 0; k < c->n[i]; k++) s += d[i][k] * d[i][k];
    s = sqrt(s);
    for (int i = lo; i < hi; i++) for (size_t k = 0; k < c->n[i]; k++) d[i][k] /= s;
}
static double dir_dot_g(fdctx *c, double **d, int lo, int hi) {
    double s = 0;
    for (int i = lo; i < hi; i++) for (size_t k = 0; k < c->n[i]; k++) s += d[i][k] * c->g[i][k];
    return s;
}

static double worst_ratio;  // largest |D - g·d| / tolerance seen, printed as the margin

static void check_dir(fdctx *c, const char *label, const char *what, int lo, int hi, double **d, double gscale) {
    double fd = fd_dir(c, lo, hi, d), an = dir_dot_g(c, d, lo, hi);
    double tol = FD_ATOL + FD_RTOL_G * gscale;
    double r = fabs(fd - an) / tol;
    if (r > worst_ratio) worst_ratio = r;
    CHECK(fabs(fd - an) <= tol, "%s: %s: finite difference %.8g vs g.d %.8g (|g| %.3g, tolerance %.3g)", label, what,
          fd, an, gscale, tol);
    if (getenv("WGT_FD_VERBOSE"))
        printf("  %-26s %-10s fd % .8e  g.d % .8e  diff %.2e  |g| %.2e\n", label, what, fd, an, fd - an, gscale);
}

// Runs the directional checks of one case: per tensor (ĝ and two random directions) and twice
// over the whole model. Expects c->g to hold the gradient at c->p0.
static void fd_case(fdctx *c, const char *case_name) {
    double gmin = INFINITY, gmax = 0;
    worst_ratio = 0;
    double **d = dir_alloc(c);
    char lab[160];
    for (int i = 0; i < c->np; i++) {
        snprintf(lab, sizeof lab, "%s %s", case_name, model_param(c->m, i)->name);
        if (c->gnorm[i] < gmin) gmin = c->gnorm[i];
        if (c->gnorm[i] > gmax) gmax = c->gnorm[i];
        CHECK(c->gnorm[i] > 0 && isfinite(c->gnorm[i]), "%s: gradient norm %g (every tensor should get a gradient)",
              lab, c->gnorm[i]);
        if (!(c->gnorm[i] > 0)) continue;
        for (size_t k = 0; k < c->n[i]; k++) d[i][k] = c->g[i][k];
        dir_normalise(c, d, i, i + 1);
        check_dir(c, lab, "grad-dir", i, i + 1, d, c->gnorm[i]);
        for (int r = 0; r < 2; r++) {
            for (size_t k = 0; k < c->n[i]; k++) d[i][k] = nrand();
            dir_normalise(c, d, i, i + 1);
            check_dir(c, lab, r ? "random-2" : "random-1", i, i + 1, d, c->gnorm[i]);
        }
    }
    double gall = 0;
    for (int i = 0; i < c->np; i++) gall += c->gnorm[i] * c->gnorm[i];
    gall = sqrt(gall);
    snprintf(lab, sizeof lab, "%s all tensors", case_name);
    for (int i = 0; i < c->np; i++) for (size_t k = 0; k < c->n[i]; k++) d[i][k] = c->g[i][k];
    dir_normalise(c, d, 0, c->np);
    check_dir(c, lab, "grad-dir", 0, c->np, d, gall);
    for (int i = 0; i < c->np; i++) for (size_t k = 0; k < c->n[i]; k++) d[i][k] = nrand();
    dir_normalise(c, d, 0, c->np);
    check_dir(c, lab, "random", 0, c->np, d, gall);
    dir_free(c, d);
    printf("%-14s per-tensor |g| %.2e..%.2e, worst |D - g.d| = %.2f of the tolerance\n", case_name, gmin, gmax,
           worst_ratio);
}

// The parameter table of a GPT-2 config: one tensor per kind and layer, in layout order,
// decayed tensors first in one range, every tensor aligned and disjoint.
static void check_table(wgt_model *m) {
    const model_config *c = model_cfg(m);
    const int np = model_param_count(m);
    CHECK(np == 2 + 12 * c->n_layer + 2, "%d tensors for %d layers", np, c->n_layer);
    size_t decay_end = 0, total = 0;
    for (int i = 0; i < np; i++) {
        const model_param_info *p = model_param(m, i);
        if (p->flags & MODEL_T_DECAY) decay_end += (p->n + WGT_VIEW_ALIGN - 1) / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
        total += (p->n + WGT_VIEW_ALIGN - 1) / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
    }
    CHECK(total == model_state_elems(m), "state of %zu elements, tensors need %zu", model_state_elems(m), total);
    int ok_range = 1, ok_align = 1, ok_overlap = 1;
    for (int i = 0; i < np; i++) {
        const model_param_info *p = model_param(m, i);
        int decayed = (p->flags & MODEL_T_DECAY) != 0;
        ok_range &= decayed ? p->off + p->n <= decay_end : p->off >= decay_end;
        ok_align &= p->off % WGT_VIEW_ALIGN == 0 && p->off + p->n <= total;
        if (i + 1 < np) {  // each range keeps table order
            const model_param_info *q = model_param(m, i + 1);
            if (((q->flags & MODEL_T_DECAY) != 0) == decayed) ok_overlap &= q->off >= p->off + p->n;
        }
    }
    CHECK(ok_range, "decayed tensors do not form one leading range of %zu elements", decay_end);
    CHECK(ok_align && ok_overlap, "tensor offsets unaligned (%d) or overlapping (%d)", ok_align, ok_overlap);
    const model_param_info *w = model_param(m, 0), *q = model_param(m, 2 + 12 * (c->n_layer - 1) + 2),
                           *lnf = model_param(m, np - 2);
    char want[64];
    snprintf(want, sizeof want, "h.%d.attn.c_attn.weight", c->n_layer - 1);
    CHECK(!strcmp(w->name, "wte.weight") && w->shape[0] == (size_t)c->vocab && w->shape[1] == (size_t)c->d_model &&
              (w->flags & MODEL_T_EMBEDDING) && (w->flags & MODEL_T_DECAY),
          "tensor 0 is %s [%zu, %zu]", w->name, w->shape[0], w->shape[1]);
    CHECK(!strcmp(q->name, want) && q->ndim == 2 && q->shape[0] == 3 * (size_t)c->d_model &&
              (q->flags & MODEL_T_HF_TRANSPOSED) && q->init == MODEL_INIT_NORMAL,
          "the last layer's qkv weight is %s", q->name);
    CHECK(!strcmp(lnf->name, "ln_f.weight") && lnf->init == MODEL_INIT_ONES && !(lnf->flags & MODEL_T_DECAY),
          "tensor np-2 is %s", lnf->name);
}

// 256 layers (the most a config allows; a fixed table of 1024 tensors once made 86 and more
// abort): the table, init, a training step and a safetensors round trip at a tiny width.
static void test_deep(wgt_backend *be) {
    const model_config deep = {.arch = "gpt2", .n_layer = 256, .n_head = 1, .d_model = 4, .d_ff = 8, .vocab = 7,
                               .max_seq = 3};
    wgt_model *m, *m2;
    wgt_status st = model_init(&m, be, &deep, 1, 3);
    CHECK(st == WGT_OK, "256 layers: model_init: %s", wgt_last_error());
    if (st != WGT_OK) return;
    check_table(m);
    CHECK(model_init_random(m, 3) == WGT_OK, "256 layers: init_random: %s", wgt_last_error());
    int32_t tok[3] = {1, 5, 6}, tgt[3] = {5, 6, 0};
    double s = NAN;
    float norm = NAN;
    model_zero_grad(m);
    CHECK(model_forward(m, tok, tgt, (model_loss_opts){0.0f, 0.0f, 0.0f, 0, 0}, 1.0f / 3) == WGT_OK, "forward: %s", wgt_last_error());
    model_backward(m);
    model_update(m, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f);
    CHECK(model_loss_sum(m, &s) == WGT_OK && model_grad_norm(m, &norm) == WGT_OK, "readback: %s", wgt_last_error());
    CHECK(isfinite(s) && fabs(s / 3 - log(7.0)) < 0.1 && isfinite(norm) && norm > 0,
          "256 layers: loss %g (log V = %g), gradient norm %g", s / 3, log(7.0), norm);
    // save in Hugging Face naming and load into a second model: the same parameters
    char path[512];
    snprintf(path, sizeof path, "%s/wgt_test_model_fd_%d.safetensors", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    CHECK(model_save_safetensors(m, path, 0) == WGT_OK, "save: %s", wgt_last_error());
    if (model_init(&m2, be, &deep, 1, 3) == WGT_OK) {
        CHECK(model_load_safetensors(m2, path) == WGT_OK, "load: %s", wgt_last_error());
        size_t n = model_state_elems(m);
        float *a = malloc(n * 4 * 3), *b = malloc(n * 4 * 3);
        model_state_download(m, a, a + n, a + 2 * n);
        model_state_download(m2, b, b + n, b + 2 * n);
        CHECK(!memcmp(a, b, n * 4), "parameters differ after a safetensors round trip");
        free(a);
        free(b);
        model_free(m2);
    }
    unlink(path);
    // one layer more than a config allows is refused by name, not an abort
    model_config over = deep;
    over.n_layer = 257;
    CHECK(model_init(&m2, be, &over, 1, 3) != WGT_OK && strstr(wgt_last_error(), "n_layer"), "257 layers: %s",
          wgt_last_error());
    model_free(m);
    printf("deep: 256 layers, %d tensors: init, step, safetensors round trip\n", 2 + 12 * 256 + 2);
}

static const model_config CFG = {
    .arch = "gpt2", .n_layer = 2, .n_head = 2, .d_model = 8, .d_ff = 16, .vocab = 11, .max_seq = 6};
enum { B_ = 2, T_ = 5 };

int main(void) {
    clock_t t0 = clock();
    wgt_backend *be;
    if (backend_cpu_init(&be) != WGT_OK) die("cpu backend");

    // ---- 0. the parameter table, and the deepest config
    test_deep(be);

    // ---- 1. plain cross entropy, every target valid
    fdctx c = ctx_new(be, &CFG, B_, T_);
    check_table(c.m);
    c.lo = (model_loss_opts){0.0f, 0.0f, 0.0f, 0, 0};
    c.inv_norm = 1.0f / (float)count_valid(&c);
    double L_plain = compute_grads(&c);
    printf("plain: loss %.6f (log V = %.6f)\n", L_plain, log((double)CFG.vocab));
    CHECK(isfinite(L_plain) && L_plain > 0.5 && L_plain < 20, "plain loss %g is implausible", L_plain);
    fd_case(&c, "plain");
    // keep the plain gradient to show that alpha/beta change it (the next case must see them)
    double **g_plain = dir_alloc(&c);
    for (int i = 0; i < c.np; i++) memcpy(g_plain[i], c.g[i], c.n[i] * sizeof(double));

    // ---- 1b. gradient accumulation: a second forward/backward without zero_grad adds the same
    // gradient again. atol 1e-7·|g|max + rtol 1e-5: the two sums differ only in the rounding of
    // one float addition per element (and BLAS's beta=1 path), ~1e-7 relative.
    {
        model_zero_grad(c.m);
        for (int rep = 0; rep < 2; rep++) { loss_at(&c); model_backward(c.m); }
        for (int i = 0; i < c.np; i++) {
            float *g2 = malloc(c.n[i] * 4), *ref = malloc(c.n[i] * 4);
            if (model_param_get(c.m, i, g2, 1) != WGT_OK) die("param_get");
            double mx = 0;
            for (size_t k = 0; k < c.n[i]; k++) { ref[k] = (float)(2 * c.g[i][k]); if (fabs(ref[k]) > mx) mx = fabs(ref[k]); }
            char what[160];
            snprintf(what, sizeof what, "accumulated gradient of %s", model_param(c.m, i)->name);
            CHECK_CLOSE(what, g2, ref, c.n[i], 1e-7 * mx, 1e-5);
            free(g2); free(ref);
        }
    }

    // ---- 1c. dropout on the attention probabilities and the residual branches: a fixed seed fixes
    // the masks, so the loss is a smooth function of the parameters and its gradient must match
    // finite differences like any other; the masks must change the loss (else the case sees nothing)
    c.lo = (model_loss_opts){0.0f, 0.0f, 0.1f, 12345u, 0};
    double L_drop = compute_grads(&c);
    printf("dropout 0.1: loss %.6f\n", L_drop);
    CHECK(fabs(L_drop - L_plain) > 1e-3, "dropout 0.1 changed the loss by only %g", L_drop - L_plain);
    fd_case(&c, "dropout");
    c.lo.dropout_seed = 777u;
    CHECK(fabs(loss_at(&c) - L_drop) > 1e-6, "another dropout seed gave the same loss: the masks ignore the seed");
    c.lo.dropout_seed = 12345u;
    CHECK(loss_at(&c) == L_drop, "the same dropout seed gave another loss: the masks are not deterministic");

    // ---- 2. label smoothing alpha and z-loss beta. beta = 0.05 instead of the default 1e-4 so
    // that the z-loss term moves the gradient far more than the tolerance (checked below).
    c.lo = (model_loss_opts){0.1f, 0.05f, 0.0f, 0, 0};
    double L_ab = compute_grads(&c);
    printf("alpha/beta: loss %.6f\n", L_ab);
    {
        double diff = 0, nrm = 0;
        for (int i = 0; i < c.np; i++)
            for (size_t k = 0; k < c.n[i]; k++) {
                diff += (c.g[i][k] - g_plain[i][k]) * (c.g[i][k] - g_plain[i][k]);
                nrm += g_plain[i][k] * g_plain[i][k];
            }
        CHECK(sqrt(diff) > 0.05 * sqrt(nrm), "alpha/beta changed the gradient by only %.3g of its norm: the case "
              "would not see a mistake in those terms", sqrt(diff / nrm));
        CHECK(fabs(L_ab - L_plain) > 1e-3, "alpha/beta changed the loss by only %g", L_ab - L_plain);
    }
    fd_case(&c, "alpha/beta");
    dir_free(&c, g_plain);

    // ---- 3. ignored targets (negative, = V, far above V) with the default beta = 1e-4;
    // inv_norm = 1/valid. Row 0's last target is ignored, which the invariance check below uses.
    c.lo = (model_loss_opts){0.0f, 1e-4f, 0.0f, 0, 0};
    c.tgt[T_ - 1] = -1;
    c.tgt[2] = CFG.vocab;
    c.tgt[T_ + 1] = 1000;
    c.tgt[T_ + 3] = -7;
    int valid = count_valid(&c);
    c.inv_norm = 1.0f / (float)valid;
    double L_ign = compute_grads(&c);
    printf("ignored: loss %.6f over %d valid targets of %d\n", L_ign, valid, B_ * T_);
    fd_case(&c, "ignored");
    // Nothing depends on row 0's last position except its own (ignored) target: attention is
    // causal. Changing that input token must leave the loss and every gradient unchanged. The
    // other rows' arithmetic is the same, so we allow only float noise (atol 1e-7·max, rtol 1e-6).
    {
        double **g_before = dir_alloc(&c);
        for (int i = 0; i < c.np; i++) memcpy(g_before[i], c.g[i], c.n[i] * sizeof(double));
        int32_t old = c.tok[T_ - 1];
        c.tok[T_ - 1] = (old + 5) % CFG.vocab;
        double L2 = compute_grads(&c);
        CHECK(fabs(L2 - L_ign) <= 1e-6 * fabs(L_ign), "loss changed from %.9g to %.9g when an input whose only "
              "target is ignored changed (causality or ignore handling is broken)", L_ign, L2);
        for (int i = 0; i < c.np; i++) {
            float *a = malloc(c.n[i] * 4), *b = malloc(c.n[i] * 4);
            double mx = 0;
            for (size_t k = 0; k < c.n[i]; k++) {
                a[k] = (float)c.g[i][k]; b[k] = (float)g_before[i][k];
                if (fabs(b[k]) > mx) mx = fabs(b[k]);
            }
            char what[160];
            snprintf(what, sizeof what, "gradient of %s after changing an ignored position's input",
                     model_param(c.m, i)->name);
            CHECK_CLOSE(what, a, b, c.n[i], 1e-7 * mx, 1e-6);
            free(a); free(b);
        }
        c.tok[T_ - 1] = old;
        dir_free(&c, g_before);
    }

    // ---- 4. every target ignored: loss 0 and all gradients exactly 0 (the host would refuse such
    // a batch, but the model must not produce NaN from it; inv_norm = 0 stands in for 1/0)
    for (int i = 0; i < B_ * T_; i++) c.tgt[i] = -1;
    c.inv_norm = 0.0f;
    double L_none = compute_grads(&c);
    CHECK(L_none == 0.0, "loss with every target ignored is %g, expected 0", L_none);
    {
        int all_zero = 1;
        for (int i = 0; i < c.np; i++) for (size_t k = 0; k < c.n[i]; k++) all_zero &= c.g[i][k] == 0.0;
        CHECK(all_zero, "gradients are not all zero when every target is ignored");
    }

    ctx_free(&c);

    // ---- 5. the LLaMA family (grouped-query attention, RoPE, RMSNorm, SwiGLU), untied and tied;
    // the same loss, so the same tolerances
    for (int tie = 0; tie <= 1; tie++) {
        const model_config ll = {.arch = "llama", .n_layer = 2, .n_head = 4, .d_model = 16, .d_ff = 24, .vocab = 11,
                                 .max_seq = 6, .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5,
                                 .tie_embeddings = tie};
        fdctx l = ctx_new(be, &ll, B_, T_);
        l.lo = (model_loss_opts){0.0f, 1e-4f, 0.0f, 0, 0};
        l.inv_norm = 1.0f / (float)count_valid(&l);
        double L_ll = compute_grads(&l);
        printf("llama tie=%d: loss %.6f over %d tensors\n", tie, L_ll, l.np);
        CHECK(isfinite(L_ll) && L_ll > 0.5 && L_ll < 20, "llama loss %g is implausible", L_ll);
        fd_case(&l, tie ? "llama-tied" : "llama");
        if (!tie) {  // dropout through the LLaMA block (its branches and grouped-query attention)
            l.lo = (model_loss_opts){0.0f, 1e-4f, 0.25f, 99u, 0};
            double L_d = compute_grads(&l);
            CHECK(fabs(L_d - L_ll) > 1e-3, "llama: dropout 0.25 changed the loss by only %g", L_d - L_ll);
            fd_case(&l, "llama-dropout");
        }
        ctx_free(&l);
    }
    // ---- 6. Qwen3: per-head q/k RMSNorm, head_dim (6) other than d_model / n_head (4): the q
    // projection 24 wide on a 16-wide model; the same loss, so the same tolerances
    {
        const model_config q3 = {.arch = "qwen3", .n_layer = 2, .n_head = 4, .d_model = 16, .d_ff = 24, .vocab = 11,
                                 .max_seq = 6, .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5,
                                 .tie_embeddings = 0, .head_dim = 6, .qk_norm = 1};
        fdctx q = ctx_new(be, &q3, B_, T_);
        q.lo = (model_loss_opts){0.0f, 1e-4f, 0.0f, 0, 0};
        q.inv_norm = 1.0f / (float)count_valid(&q);
        double L_q = compute_grads(&q);
        printf("qwen3: loss %.6f over %d tensors\n", L_q, q.np);
        CHECK(isfinite(L_q) && L_q > 0.5 && L_q < 20, "qwen3 loss %g is implausible", L_q);
        fd_case(&q, "qwen3");
        ctx_free(&q);
    }
    // ---- 7. Gemma-3: embedding scale, four (1 + w) norms a block, q/k norms, GeGLU, a sliding
    // (window 3 of T = 5) and a full layer with their RoPE bases, head_dim 6; tied
    {
        const model_config g3 = {.arch = "gemma3_text", .n_layer = 2, .n_head = 4, .d_model = 16, .d_ff = 24,
                                 .vocab = 11, .max_seq = 6, .n_kv_heads = 2, .rope_theta = 1e6, .rms_eps = 1e-6,
                                 .tie_embeddings = 1, .head_dim = 6, .sliding_window = 3, .rope_local_theta = 1e4,
                                 .sliding_pattern = 2};
        fdctx q = ctx_new(be, &g3, B_, T_);
        q.lo = (model_loss_opts){0.0f, 1e-4f, 0.0f, 0, 0};
        q.inv_norm = 1.0f / (float)count_valid(&q);
        double L_g = compute_grads(&q);
        printf("gemma3_text: loss %.6f over %d tensors\n", L_g, q.np);
        CHECK(isfinite(L_g) && L_g > 0.5 && L_g < 20, "gemma3_text loss %g is implausible", L_g);
        fd_case(&q, "gemma3_text");
        ctx_free(&q);
    }
    be->free(be);
    printf("time %.2f s (CPU)\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    return test_finish();
}
