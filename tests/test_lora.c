// test_lora.c — LoRA adapters (model/lora.h) on the C reference and on WebGPU: their gradients
// against finite differences of the model's own loss (LLaMA with its packed q | k | v, each with
// its own adapter, and GPT-2 with its one c_attn matrix; with and without adapter dropout), the
// frozen base (no update touches it), a new adapter's zero effect, the merged weights computing
// what base + adapters computed, the targets' refusals, and WebGPU's loss and adapter gradients
// against the C reference's.
//
// Finite differences as test_model_fd.c (whose comment derives the tolerances): directional
// derivatives with the 5-point stencil, h = 0.005, |D - g.d| <= 2e-4 + 3e-3 |g|, over the adapter
// state only (the base has no gradient). Adapters are O(1) random (B too, else A's gradient is 0).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testlib.h"
#include "backend_pair.h"
#include "model/lora.h"

#define FD_H 0.005
#define FD_ATOL 2e-4
#define FD_RTOL_G 3e-3

static uint64_t rs = 0x2468ace013579bdfull;
static double urand(void) {
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void) { return sqrt(-2.0 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }
static const model_config LLAMA = {.arch = "llama", .n_layer = 2, .n_head = 4, .d_model = 16, .d_ff = 24, .vocab = 13,
                                   .max_seq = 8, .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5};
static const model_config GPT2 = {.arch = "gpt2", .n_layer = 2, .n_head = 2, .d_model = 8, .d_ff = 16, .vocab = 11,
                                  .max_seq = 6};
enum { B_ = 2, T_ = 5 };

typedef struct {
    wgt_model *m;
    size_t n;          // adapter state elements
    float *s0;         // the state the derivatives are taken at
    double *g;
    int32_t tok[B_ * T_], tgt[B_ * T_];
    model_loss_opts lo;
    float inv_norm;
} ctx;

// Base weights of larger scale than the 0.02 initialisation (so every path carries signal):
// matrices N(0, 1/fan_in)·2, embeddings N(0, 0.5), the rest as initialised.
static void set_base(wgt_model *m) {
    for (int i = 0; i < model_param_count(m); i++) {
        const model_param_info *p = model_param(m, i);
        if (p->ndim != 2) continue;
        float *x = malloc(p->n * 4);
        double sd = (p->flags & MODEL_T_EMBEDDING) ? 0.5 : 2.0 / sqrt((double)p->shape[1]);
        for (size_t k = 0; k < p->n; k++) x[k] = (float)(sd * nrand());
        if (model_param_set(m, i, x) != WGT_OK) die("param_set");
        free(x);
    }
}

static void set_state(ctx *c, const float *s) {
    float *z = calloc(c->n, 4);
    if (model_state_upload(c->m, s, z, z) != WGT_OK) die("state_upload");
    free(z);
}

static double loss_at(ctx *c) {
    if (model_forward(c->m, c->tok, c->tgt, c->lo, c->inv_norm) != WGT_OK) die("forward");
    double s;
    if (model_loss_sum(c->m, &s) != WGT_OK) die("loss_sum");
    return s * c->inv_norm;
}

static double grads(ctx *c) {
    model_zero_grad(c->m);
    double L = loss_at(c);
    model_backward(c->m);
    float *g = malloc(c->n * 4);
    if (model_grads_download(c->m, g, 0, c->n) != WGT_OK) die("grads_download");
    for (size_t k = 0; k < c->n; k++) c->g[k] = g[k];
    free(g);
    return L;
}

static double fd_dir(ctx *c, const double *d) {
    const double steps[4] = {2, 1, -1, -2};
    double f[4];
    float *s = malloc(c->n * 4);
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < c->n; i++) s[i] = (float)(c->s0[i] + steps[k] * FD_H * d[i]);
        set_state(c, s);
        f[k] = loss_at(c);
    }
    set_state(c, c->s0);
    free(s);
    return (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * FD_H);
}

static wgt_model *open_lora(wgt_backend *be, const model_config *cfg, int r, double alpha, double drop,
                            const char *targets, int rslora) {
    model_lora_opts lo = {r, alpha, drop, rslora, "", MODEL_BASE_F32};
    snprintf(lo.targets, sizeof lo.targets, "%s", targets);
    wgt_model *m;
    if (model_init_lora(&m, be, cfg, B_, T_, MODEL_PREC_F32, &lo) != WGT_OK) die("model_init_lora");
    if (model_init_random(m, 3) != WGT_OK) die("init_random");
    return m;
}

static ctx ctx_new(wgt_backend *be, const model_config *cfg, double drop, const char *targets) {
    ctx c;
    memset(&c, 0, sizeof c);
    rs = 0x2468ace013579bdfull;  // the same base and data on every backend
    c.m = open_lora(be, cfg, 3, 6.0, drop, targets, 0);
    set_base(c.m);
    c.n = model_state_elems(c.m);
    c.s0 = calloc(c.n, 4);
    c.g = calloc(c.n, sizeof(double));
    for (int i = 0; i < model_lora_count(c.m); i++) {  // O(1) adapters; the padding stays 0
        const model_lora_adapter *a = model_lora_at(c.m, i);
        for (size_t k = 0; k < 3 * a->in; k++) c.s0[a->a_off + k] = (float)(nrand() / sqrt((double)a->in));
        for (size_t k = 0; k < a->out * 3; k++) c.s0[a->b_off + k] = (float)(0.5 * nrand());
    }
    set_state(&c, c.s0);
    for (int i = 0; i < B_ * T_; i++) {
        c.tok[i] = (int32_t)(urand() * cfg->vocab);
        c.tgt[i] = (int32_t)(urand() * cfg->vocab);
    }
    c.inv_norm = 1.0f / (B_ * T_);
    c.lo = (model_loss_opts){0.0f, 0.0f, 0.0f, 4242u, 0};
    model_lora_set_training(c.m, 1);  // training forwards: the adapter dropout applies
    return c;
}
static void ctx_free(ctx *c) {
    free(c->s0);
    free(c->g);
    model_free(c->m);
}

// The worst |D - g.d| / tolerance over: each adapter's A and B along their gradient and along a
// random direction, and the whole state along a random direction.
static void fd_case(ctx *c, const char *name) {
    grads(c);
    double *d = calloc(c->n, sizeof *d), worst = 0;
    int checks = 0;
    for (int i = 0; i < model_lora_count(c->m); i++) {
        const model_lora_adapter *a = model_lora_at(c->m, i);
        for (int part = 0; part < 2; part++) {
            size_t off = part ? a->b_off : a->a_off, n = part ? a->out * 3 : 3 * a->in;
            double gn = 0;
            for (size_t k = 0; k < n; k++) gn += c->g[off + k] * c->g[off + k];
            gn = sqrt(gn);
            for (int kind = 0; kind < 2; kind++) {
                memset(d, 0, c->n * sizeof *d);
                double s = 0;
                for (size_t k = 0; k < n; k++) {
                    d[off + k] = kind == 0 ? c->g[off + k] : nrand();
                    s += d[off + k] * d[off + k];
                }
                if (!(s > 0)) continue;
                double gd = 0;
                for (size_t k = 0; k < n; k++) { d[off + k] /= sqrt(s); gd += d[off + k] * c->g[off + k]; }
                double D = fd_dir(c, d), tol = FD_ATOL + FD_RTOL_G * gn;
                CHECK(fabs(D - gd) <= tol, "%s: %s.lora_%c along %s: finite difference %.6g, gradient %.6g (tol %.2g)",
                      name, a->module, part ? 'B' : 'A', kind ? "a random direction" : "its gradient", D, gd, tol);
                if (fabs(D - gd) / tol > worst) worst = fabs(D - gd) / tol;
                checks++;
            }
            CHECK(gn > 1e-3, "%s: %s.lora_%c has a gradient of norm %g: the case checks nothing there", name, a->module,
                  part ? 'B' : 'A', gn);
        }
    }
    double s = 0, gn = 0, gd = 0;
    for (size_t k = 0; k < c->n; k++) { d[k] = nrand(); s += d[k] * d[k]; gn += c->g[k] * c->g[k]; }
    for (size_t k = 0; k < c->n; k++) { d[k] /= sqrt(s); gd += d[k] * c->g[k]; }
    double D = fd_dir(c, d), tol = FD_ATOL + FD_RTOL_G * sqrt(gn);
    CHECK(fabs(D - gd) <= tol, "%s: all adapters along a random direction: %.6g vs %.6g", name, D, gd);
    printf("%s: %d adapters, %d directional checks, worst at %.2f of the tolerance\n", name, model_lora_count(c->m),
           checks + 1, worst);
    free(d);
}

// Base tensors as one host array.
static float *base_copy(wgt_model *m, size_t *n) {
    size_t t = 0;
    for (int i = 0; i < model_param_count(m); i++) t += model_param(m, i)->n;
    float *h = malloc(t * 4);
    size_t at = 0;
    for (int i = 0; i < model_param_count(m); i++) {
        if (model_param_get(m, i, h + at, 0) != WGT_OK) die("param_get");
        at += model_param(m, i)->n;
    }
    *n = t;
    return h;
}

static void test_cpu(wgt_backend *be) {
    // ---- gradients against finite differences
    ctx c = ctx_new(be, &LLAMA, 0.0, "all-linear");
    CHECK(model_lora_count(c.m) == 2 * 7, "llama all-linear: %d adapters, want 14", model_lora_count(c.m));
    fd_case(&c, "llama all-linear");
    // ---- the frozen base: an update moves the adapters and leaves every base value as it was
    size_t nb;
    float *b0 = base_copy(c.m, &nb);
    grads(&c);
    model_update(c.m, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f);
    float *s1 = malloc(c.n * 4), *m1 = malloc(c.n * 4), *v1 = malloc(c.n * 4);
    if (model_state_download(c.m, s1, m1, v1) != WGT_OK) die("state_download");
    size_t moved = 0;
    for (size_t k = 0; k < c.n; k++) moved += s1[k] != c.s0[k];
    CHECK(moved > c.n / 2, "an update moved only %zu of %zu adapter values", moved, c.n);
    float *b1 = base_copy(c.m, &nb);
    CHECK(!memcmp(b0, b1, nb * 4), "an update changed the frozen base");
    // ---- merged weights compute what base + adapters computed
    {
        float *l0 = malloc(sizeof(float) * B_ * T_ * LLAMA.vocab), *l1 = malloc(sizeof(float) * B_ * T_ * LLAMA.vocab);
        if (model_forward_logits(c.m, c.tok, l0) != WGT_OK) die("logits");
        if (model_lora_merge(c.m) != WGT_OK) die("merge");
        if (model_forward_logits(c.m, c.tok, l1) != WGT_OK) die("logits");
        // (W + sBA) x against W x + s B (A x): another association of sums of O(1) terms over
        // at most 24 inputs a layer through 2 layers; float32 rounding of each is ~1e-6
        CHECK_CLOSE("merged logits", l1, l0, (size_t)B_ * T_ * LLAMA.vocab, 1e-4, 1e-4);
        float *b2 = base_copy(c.m, &nb);
        CHECK(memcmp(b0, b2, nb * 4) != 0, "the merge left the base as it was");
        free(b2);
        free(l0);
        free(l1);
    }
    free(b0); free(b1); free(s1); free(m1); free(v1);
    ctx_free(&c);

    c = ctx_new(be, &LLAMA, 0.0, "q,v,down");
    CHECK(model_lora_count(c.m) == 2 * 3, "llama q,v,down: %d adapters, want 6", model_lora_count(c.m));
    fd_case(&c, "llama q,v,down");
    ctx_free(&c);
    // adapter dropout: a fixed seed fixes the masks, so the loss is smooth in the adapters
    c = ctx_new(be, &LLAMA, 0.3, "all-linear");
    double Ld = loss_at(&c);
    c.lo.dropout_seed = 99u;
    CHECK(loss_at(&c) != Ld, "another seed gave the same loss: the adapter dropout ignores the seed");
    c.lo.dropout_seed = 4242u;
    CHECK(loss_at(&c) == Ld, "the same seed gave another loss: the adapter dropout is not deterministic");
    fd_case(&c, "llama dropout 0.3");
    ctx_free(&c);
    c = ctx_new(be, &GPT2, 0.0, "all-linear");
    CHECK(model_lora_count(c.m) == 2 * 4, "gpt2 all-linear: %d adapters, want 8", model_lora_count(c.m));
    fd_case(&c, "gpt2 all-linear");
    ctx_free(&c);

    // ---- a new adapter (B = 0) leaves the model's logits exactly as the base's
    {
        rs = 77;
        wgt_model *base;
        if (model_init(&base, be, &LLAMA, B_, T_) != WGT_OK || model_init_random(base, 3) != WGT_OK) die("base");
        wgt_model *m = open_lora(be, &LLAMA, 4, 8, 0.0, "all-linear", 1);
        CHECK(fabsf(model_lora_scale(m) - 4.0f) < 1e-6f, "rslora scale %g, want 8/sqrt(4) = 4", model_lora_scale(m));
        int32_t tok[B_ * T_];
        for (int i = 0; i < B_ * T_; i++) tok[i] = i % LLAMA.vocab;
        size_t nv = (size_t)B_ * T_ * LLAMA.vocab;
        float *l0 = malloc(nv * 4), *l1 = malloc(nv * 4);
        if (model_forward_logits(base, tok, l0) != WGT_OK || model_forward_logits(m, tok, l1) != WGT_OK) die("logits");
        CHECK(!memcmp(l0, l1, nv * 4), "a new adapter (B = 0) changed the logits");
        // A Kaiming-uniform as PEFT: within +-1/sqrt(in), and spread over it
        float *s = malloc(model_state_elems(m) * 4), *z = malloc(model_state_elems(m) * 4);
        if (model_state_download(m, s, z, z) != WGT_OK) die("state_download");
        const model_lora_adapter *a = model_lora_at(m, 0);
        double mx = 0, bound = 1 / sqrt((double)a->in);
        for (size_t k = 0; k < 4 * a->in; k++) mx = fmax(mx, fabs(s[a->a_off + k]));
        CHECK(mx <= bound && mx > 0.8 * bound, "A's largest |value| %g against the bound %g", mx, bound);
        double bs = 0;
        for (size_t k = 0; k < a->out * 4; k++) bs += fabs(s[a->b_off + k]);
        CHECK(bs == 0, "B does not start at 0");
        free(s); free(z); free(l0); free(l1);
        model_free(m);
        model_free(base);
    }
    // ---- refusals naming the flag
    model_lora_opts bad = {4, 8, 0, 0, "q", MODEL_BASE_F32};
    wgt_model *m = NULL;
    CHECK(model_init_lora(&m, be, &GPT2, B_, T_, MODEL_PREC_F32, &bad) != WGT_OK && strstr(wgt_last_error(), "qkv"),
          "gpt2 with target q: %s", wgt_last_error());
    snprintf(bad.targets, sizeof bad.targets, "q,lm_head");
    CHECK(model_init_lora(&m, be, &LLAMA, B_, T_, MODEL_PREC_F32, &bad) != WGT_OK &&
          strstr(wgt_last_error(), "--lora-targets"), "target lm_head: %s", wgt_last_error());
    snprintf(bad.targets, sizeof bad.targets, "all-linear");
    bad.r = 0;
    CHECK(model_init_lora(&m, be, &LLAMA, B_, T_, MODEL_PREC_F32, &bad) == WGT_OK && !model_lora_on(m),
          "r 0 is a model without adapters");
    model_free(m);
    bad.r = -1;
    CHECK(model_init_lora(&m, be, &LLAMA, B_, T_, MODEL_PREC_F32, &bad) != WGT_OK && strstr(wgt_last_error(), "--lora"),
          "rank -1: %s", wgt_last_error());
    // (LoRA in mixed precision: test_lowbit.c)
}

// WebGPU against the C reference: the loss and every adapter gradient (with dropout, whose masks
// are hashed alike on both). Tolerance: float32 GEMMs and attention summed in other orders, ~1e-6
// relative per op through two layers; 1e-4 of the largest gradient bounds that with a margin.
static void test_gpu(const model_config *cfg, const char *name) {
    bpair P = bpair_open();
    ctx c = ctx_new(P.cpu, cfg, 0.2, "all-linear");
    ctx g = ctx_new(P.gpu, cfg, 0.2, "all-linear");
    double Lc = grads(&c), Lg = grads(&g);
    CHECK(fabs(Lc - Lg) <= 1e-5 * fabs(Lc), "%s: webgpu loss %.8g, cpu %.8g", name, Lg, Lc);
    double mx = 0, worst = 0;
    for (size_t k = 0; k < c.n; k++) mx = fmax(mx, fabs(c.g[k]));
    for (size_t k = 0; k < c.n; k++) worst = fmax(worst, fabs(c.g[k] - g.g[k]));
    CHECK(worst <= 1e-4 * mx, "%s: webgpu adapter gradients differ from the cpu's by %g (largest %g)", name, worst, mx);
    printf("%s: webgpu vs cpu: loss %.3g apart, gradients %.3g of the largest\n", name, fabs(Lc - Lg), worst / mx);
    ctx_free(&c);
    ctx_free(&g);
    bpair_close(&P);
}

int main(void) {
    wgt_backend *be;
    if (backend_cpu_init(&be) != WGT_OK) die("cpu backend");
    test_cpu(be);
    be->free(be);
    test_gpu(&LLAMA, "llama");
    test_gpu(&GPT2, "gpt2");
    return test_finish();
}
