// lora.c — LoRA adapters on the frozen base of any family (lora.h): which projections they sit on
// (by the Hugging Face names of the parameter table), their place in the training state, their
// initialisation, the extra GEMMs that the model's GEMM helpers run beside the frozen one, the
// merge, the base's fingerprint and PEFT's adapter format. Per adapter of W [out, in] on input x
// [N, in] (rows out0.. of a packed weight such as LLaMA's q | k | v):
//   forward   u = drop(x) A^T [N, r];  y = u B^T [N, out];  out[:, out0..] += s y
//   backward  g = s dout[:, out0..];  du = g B [N, r];  dx += drop^T(du A);
//             dB += g^T u;  dA += du^T drop(x)
// The adapter GEMMs are r wide, so beside the frozen GEMM they cost about 2 r / in of it.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "backend/dropout.h"
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "model/base_lowbit.h"
#include "model/lora.h"
#include "model/model_impl.h"

// The projections adapters may target, by the suffix of their Hugging Face weight names.
enum { K_Q = 1, K_K = 2, K_V = 4, K_QKV = 8, K_O = 16, K_GATE = 32, K_UP = 64, K_DOWN = 128 };
static const struct {
    const char *suffix;  // after the layer's prefix, matched at a '.' boundary
    const char *name;    // --lora-targets
    unsigned kind;
} kinds[] = {
    {"self_attn.q_proj.weight", "q", K_Q},       {"self_attn.k_proj.weight", "k", K_K},
    {"self_attn.v_proj.weight", "v", K_V},       {"self_attn.o_proj.weight", "o", K_O},
    {"mlp.gate_proj.weight", "gate", K_GATE},    {"mlp.up_proj.weight", "up", K_UP},
    {"mlp.down_proj.weight", "down", K_DOWN},    {"attn.c_attn.weight", "qkv", K_QKV},
    {"attn.c_proj.weight", "o", K_O},            {"mlp.c_fc.weight", "up", K_UP},
    {"mlp.c_proj.weight", "down", K_DOWN},
};
#define N_KINDS (int)(sizeof kinds / sizeof kinds[0])
static const char *const kind_names[] = {"q", "k", "v", "qkv", "o", "gate", "up", "down"};

static int ends_with_module(const char *name, const char *suffix) {
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && !strcmp(name + n - k, suffix) && name[n - k - 1] == '.';
}
// The kind of a tensor name (0: none), for a per-layer GEMM weight.
static unsigned kind_of(const char *name) {
    for (int i = 0; i < N_KINDS; i++)
        if (ends_with_module(name, kinds[i].suffix)) return kinds[i].kind;
    return 0;
}
static int is_linear(const model_tensor_desc *d) {
    return d->per_layer && d->shape[1] != DIM_NONE && (d->flags & MODEL_T_DECAY) && !(d->flags & MODEL_T_EMBEDDING);
}
// The kinds family a has (its per-layer GEMM weights that match a suffix).
static unsigned family_kinds(const model_arch *a) {
    unsigned k = 0;
    for (int i = 0; i < a->n_tensors; i++)
        if (is_linear(&a->tensors[i])) k |= kind_of(a->tensors[i].hf_name);
    return k;
}
static void kinds_list(unsigned mask, char *buf, size_t n) {
    buf[0] = 0;
    for (int b = 0; b < 8; b++)
        if (mask & (1u << b)) snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", buf[0] ? "," : "", kind_names[b]);
}

static wgt_status targets_parse(const char *targets, const model_arch *a, const char *flag, unsigned *mask) {
    const unsigned have = family_kinds(a);
    char list[128];
    kinds_list(have, list, sizeof list);
    *mask = 0;
    if (!targets[0] || !strcmp(targets, "all-linear")) {
        *mask = have;
        return WGT_OK;
    }
    char buf[LORA_TARGETS_MAX];
    if (strlen(targets) >= sizeof buf)
        return wgt_fail(WGT_ERR_ARG, "%s is too long (at most %d characters)", flag, LORA_TARGETS_MAX - 1);
    snprintf(buf, sizeof buf, "%s", targets);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned k = 0;
        for (int b = 0; b < 8; b++)
            if (!strcmp(tok, kind_names[b])) k = 1u << b;
        if (!k || !(have & k))
            return wgt_fail(WGT_ERR_ARG, "%s: '%s' is not a projection of a %s model; it has %s (or all-linear)%s", flag,
                            tok, a->name, list,
                            (k & (K_Q | K_K | K_V)) && (have & K_QKV) ? ": its q, k and v are one matrix, qkv" : "");
        *mask |= k;
    }
    if (!*mask) return wgt_fail(WGT_ERR_ARG, "%s names no projection; give some of %s, or all-linear", flag, list);
    return WGT_OK;
}

wgt_status model_lora_targets_check(const char *targets, const char *arch, const char *flag) {
    const model_arch *a = model_arch_find(arch);
    if (!a) return wgt_fail(WGT_ERR_CONFIG, "unknown model family '%s'", arch);
    unsigned mask;
    return targets_parse(targets, a, flag, &mask);
}

// ------------------------------------------------------------------ plan and memory

struct model_lora {
    model_lora_opts o;
    float scale;
    int train;               // the forward in progress is a training one (dropout applies)
    int merged;              // model_lora_merge ran: the adapters are part of the base
    int n;
    model_lora_adapter *ad;
    size_t max_in, max_out;  // of the adapters' weights
    wgt_view marker;         // the frozen GEMM weights' gradient views point into this buffer
    wgt_view sink;           // the other frozen tensors' gradients (norms, biases): never read
    wgt_view xd, dx;         // [N, max_in] the dropped input, an input gradient
    wgt_view u, du;          // [N, r]
    wgt_view y;              // [N, max_out] an adapter's output / its part of dout
    wgt_view x32;            // --precision f16: [N, widest GEMM input] a frozen GEMM's f16 input widened
};

static size_t align_up(size_t n) { return (n + WGT_VIEW_ALIGN - 1) / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN; }

wgt_status lora_plan(wgt_model *m, const model_lora_opts *lo, model_lora **out) {
    *out = NULL;
    if (!lo || lo->r == 0) return WGT_OK;
    if (lo->r < 1 || lo->r > LORA_R_MAX)
        return wgt_fail(WGT_ERR_ARG, "--lora %d: the rank must be 1..%d", lo->r, LORA_R_MAX);
    if (!(lo->alpha > 0 && lo->alpha <= 1e6))
        return wgt_fail(WGT_ERR_ARG, "--lora-alpha %g must be above 0 and at most 1e6", lo->alpha);
    if (!(lo->dropout >= 0 && lo->dropout <= 0.9))
        return wgt_fail(WGT_ERR_ARG, "--lora-dropout %g must be in [0, 0.9]", lo->dropout);
    if (lo->rslora != 0 && lo->rslora != 1) return wgt_fail(WGT_ERR_ARG, "--lora-rslora must be 0 or 1");
    unsigned mask;
    WGT_TRY(targets_parse(lo->targets, m->arch, "--lora-targets", &mask));
    model_lora *l = wgt_calloc(1, sizeof *l);
    l->o = *lo;
    l->scale = (float)(lo->rslora ? lo->alpha / sqrt((double)lo->r) : lo->alpha / lo->r);
    l->ad = wgt_calloc((size_t)m->np, sizeof *l->ad);
    const size_t r = (size_t)lo->r;
    size_t end = 0;
    for (int i = 0; i < m->np; i++) {
        const model_tensor *t = &m->t[i];
        if (!is_linear(t->desc) || !(kind_of(t->info.name) & mask)) continue;
        model_lora_adapter *a = &l->ad[l->n++];
        size_t len = strlen(t->info.name) - strlen(".weight");
        snprintf(a->module, sizeof a->module, "%.*s", (int)len, t->info.name);
        a->tensor = i;
        a->out = t->info.shape[0];
        a->in = t->info.shape[1];
        // r x in and out x r: each below the model's own tensors, whose sizes were checked
        a->a_off = align_up(end);
        a->b_off = align_up(a->a_off + r * a->in);
        end = a->b_off + a->out * r;
        if (a->in > l->max_in) l->max_in = a->in;
        if (a->out > l->max_out) l->max_out = a->out;
    }
    WGT_ASSERT(l->n > 0, "lora_plan: the targets matched no tensor of a family that has them");
    m->n_base = m->n_elems;
    m->base_decay_end = m->decay_end;
    m->n_elems = align_up(end);
    m->decay_end = m->n_elems;  // the adapters are matrices: all weight-decayed, as PEFT's under AdamW
    *out = l;
    return WGT_OK;
}

wgt_status lora_alloc(wgt_model *m) {
    model_lora *l = m->lora;
    const size_t N = (size_t)m->B * m->T, r = (size_t)l->o.r;
    base_lowbit_alloc(m);  // f32, or the projections packed (--base-precision)
    model_alloc(m, &l->marker, WGT_VIEW_ALIGN, "frozen_grad_marker", 0);
    const size_t ns = m->n_base - m->base_decay_end;
    model_alloc(m, &l->sink, ns ? ns : 1, "frozen_grad_sink", 1);
    model_alloc(m, &l->xd, N * l->max_in, "lora_x", 0);
    model_alloc(m, &l->dx, N * l->max_in, "lora_dx", 0);
    model_alloc(m, &l->u, N * r, "lora_u", 0);
    model_alloc(m, &l->du, N * r, "lora_du", 0);
    model_alloc(m, &l->y, N * l->max_out, "lora_y", 0);
    if (m->prec == MODEL_PREC_F16) {  // the widest input of a frozen GEMM (a matrix's second dimension)
        size_t wide = 1;
        for (int i = 0; i < m->np; i++)
            if (m->t[i].info.ndim == 2 && m->t[i].info.shape[1] > wide) wide = m->t[i].info.shape[1];
        model_alloc(m, &l->x32, N * wide, "lora_x32", 0);
    }
    return m->alloc_st;
}

wgt_view lora_grad_view(const wgt_model *m, const model_param_info *p) {
    const model_lora *l = m->lora;
    if (p->off < m->base_decay_end) return model_view(l->marker.buf, p->off, p->n);  // never bound: see lora_matmul_at
    return model_subview(l->sink, p->off - m->base_decay_end, p->n);
}

void lora_free(model_lora *l) {
    if (!l) return;
    free(l->ad);
    free(l);
}

int model_lora_on(const wgt_model *m) { return m->lora != NULL; }
float model_lora_scale(const wgt_model *m) { return m->lora ? m->lora->scale : 0.0f; }
const model_lora_opts *model_lora_options(const wgt_model *m) { return m->lora ? &m->lora->o : NULL; }
int model_lora_count(const wgt_model *m) { return m->lora ? m->lora->n : 0; }
const model_lora_adapter *model_lora_at(const wgt_model *m, int i) {
    WGT_ASSERT(m->lora && i >= 0 && i < m->lora->n, "model_lora_at: index out of range");
    return &m->lora->ad[i];
}
void model_lora_set_training(wgt_model *m, int on) {
    if (m->lora) m->lora->train = on != 0;
}
int lora_training(const wgt_model *m) { return m->lora ? m->lora->train : 0; }
void lora_zero_sink(wgt_model *m) {
    if (m->lora) m->be->fill_zero(m->be, m->lora->sink, m->lora->sink.n);
}

// ------------------------------------------------------------------ initialisation

static uint64_t rng_next(uint64_t *s) {  // splitmix64
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

wgt_status lora_init_adapters(wgt_model *m, uint64_t seed) {
    const model_lora *l = m->lora;
    float *h = wgt_calloc(m->n_elems, sizeof *h);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (int i = 0; i < l->n; i++) {
        const model_lora_adapter *a = &l->ad[i];
        // PEFT: kaiming_uniform_(A, a=sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain sqrt(3 / in) = 1/sqrt(in)
        const double bound = 1.0 / sqrt((double)a->in);
        for (size_t k = 0; k < (size_t)l->o.r * a->in; k++) {
            double u01 = (rng_next(&s) >> 11) / 9007199254740992.0;
            h[a->a_off + k] = (float)((2.0 * u01 - 1.0) * bound);
        }
    }
    wgt_status st = m->be->upload(m->be, m->params, h, m->n_elems);
    free(h);
    return st;
}

// ------------------------------------------------------------------ the GEMM hooks

static wgt_view A_of(const wgt_model *m, const model_lora_adapter *a) {
    return model_subview(m->params, a->a_off, (size_t)m->lora->o.r * a->in);
}
static wgt_view B_of(const wgt_model *m, const model_lora_adapter *a) {
    return model_subview(m->params, a->b_off, a->out * (size_t)m->lora->o.r);
}
static wgt_view dA_of(const wgt_model *m, const model_lora_adapter *a) {
    return model_subview(m->grads, a->a_off, (size_t)m->lora->o.r * a->in);
}
static wgt_view dB_of(const wgt_model *m, const model_lora_adapter *a) {
    return model_subview(m->grads, a->b_off, a->out * (size_t)m->lora->o.r);
}

// Calls fn for each adapter whose weight lies in view w (of the base, or of the gradient marker)
// with the row its weight starts at in w.
typedef void (*adapter_fn)(wgt_model *m, const model_lora_adapter *a, int idx, uint32_t row0, void *ctx);
static int each_adapter(wgt_model *m, wgt_view w, uint32_t C, adapter_fn fn, void *ctx) {
    model_lora *l = m->lora;
    if (!l || l->merged) return 0;
    for (int i = 0; i < l->n; i++) {
        const model_param_info *p = &m->t[l->ad[i].tensor].info;
        if (p->off < w.off || p->off + p->n > w.off + w.n) continue;
        WGT_ASSERT(p->shape[1] == C && (p->off - w.off) % C == 0, "an adapter's weight is not whole rows of its GEMM");
        fn(m, &l->ad[i], i, (uint32_t)((p->off - w.off) / C), ctx);
    }
    return 1;
}

typedef struct {
    wgt_view out, inp;  // out / dinp / dout, inp
    uint32_t N, C, OC;
} gemm_args;

// drop(inp) for adapter idx: inp itself without dropout
static wgt_view dropped(wgt_model *m, wgt_view inp, size_t n, int idx) {
    model_lora *l = m->lora;
    if (!l->train || l->o.dropout <= 0) return inp;
    wgt_view x = model_subview(l->xd, 0, n);
    m->be->dropout_forward(m->be, x, inp, n, (float)l->o.dropout, wgt_dropout_key(m->drop_seed, (uint32_t)idx, 3u), 0);
    return x;
}

static void fwd_one(wgt_model *m, const model_lora_adapter *a, int idx, uint32_t row0, void *ctx) {
    const gemm_args *g = ctx;
    model_lora *l = m->lora;
    wgt_backend *be = m->be;
    const uint32_t r = (uint32_t)l->o.r, O = (uint32_t)a->out;
    wgt_view x = dropped(m, g->inp, (size_t)g->N * g->C, idx);
    wgt_view u = model_subview(l->u, 0, (size_t)g->N * r), y = model_subview(l->y, 0, (size_t)g->N * O);
    be->matmul(be, u, x, A_of(m, a), model_no_view(), g->N, g->C, r);                // u = x A^T [N, r]
    be->matmul(be, y, u, B_of(m, a), model_no_view(), g->N, r, O);                   // y = u B^T [N, out]
    be->add_cols(be, g->out, y, g->N, g->OC, O, O, row0, 0, l->scale, 1);          // out[:, row0..] += s y
}

wgt_view lora_widen(wgt_model *m, wgt_view inp, size_t n) {
    wgt_view x = model_subview(m->lora->x32, 0, n);
    m->be->cast_f32(m->be, x, inp, n);
    return x;
}

void lora_matmul(wgt_model *m, wgt_view out, wgt_view inp, wgt_view w, uint32_t N, uint32_t C, uint32_t OC) {
    if (!m->lora || (w.buf != m->base.buf && !base_lowbit_is(m, w))) return;
    gemm_args g = {out, inp, N, C, OC};
    each_adapter(m, w, C, fwd_one, &g);
}

// g = s dout[:, row0..] into l->y, du = g B into l->du
static void grad_out(wgt_model *m, const model_lora_adapter *a, uint32_t row0, const gemm_args *g) {
    model_lora *l = m->lora;
    const uint32_t r = (uint32_t)l->o.r, O = (uint32_t)a->out;
    wgt_view y = model_subview(l->y, 0, (size_t)g->N * O), du = model_subview(l->du, 0, (size_t)g->N * r);
    m->be->add_cols(m->be, y, g->out, g->N, O, g->OC, O, 0, row0, l->scale, 0);
    m->be->matmul_t(m->be, du, y, B_of(m, a), g->N, r, O);
}

static void bwd_inp_one(wgt_model *m, const model_lora_adapter *a, int idx, uint32_t row0, void *ctx) {
    const gemm_args *g = ctx;  // out: dout; inp: dinp
    model_lora *l = m->lora;
    wgt_backend *be = m->be;
    const size_t n = (size_t)g->N * g->C;
    grad_out(m, a, row0, g);
    wgt_view dx = model_subview(l->dx, 0, n);
    be->matmul_t(be, dx, model_subview(l->du, 0, (size_t)g->N * l->o.r), A_of(m, a), g->N, g->C, (uint32_t)l->o.r);
    if (l->train && l->o.dropout > 0)
        be->dropout_backward(be, dx, dx, n, (float)l->o.dropout, wgt_dropout_key(m->drop_seed, (uint32_t)idx, 3u), 0);
    be->add_inplace(be, g->inp, dx, n);
}

void lora_matmul_t(wgt_model *m, wgt_view dinp, wgt_view dout, wgt_view w, uint32_t N, uint32_t C, uint32_t OC) {
    if (!m->lora || (w.buf != m->base.buf && !base_lowbit_is(m, w))) return;
    gemm_args g = {dout, dinp, N, C, OC};
    each_adapter(m, w, C, bwd_inp_one, &g);
}

static void bwd_w_one(wgt_model *m, const model_lora_adapter *a, int idx, uint32_t row0, void *ctx) {
    const gemm_args *g = ctx;  // out: dout; inp: the GEMM's input
    model_lora *l = m->lora;
    wgt_backend *be = m->be;
    const uint32_t r = (uint32_t)l->o.r, O = (uint32_t)a->out;
    wgt_view x = dropped(m, g->inp, (size_t)g->N * g->C, idx);
    wgt_view u = model_subview(l->u, 0, (size_t)g->N * r);
    be->matmul(be, u, x, A_of(m, a), model_no_view(), g->N, g->C, r);               // u = x A^T
    grad_out(m, a, row0, g);                                                         // y = g, du = g B
    be->matmul_at(be, dB_of(m, a), model_no_view(), model_subview(l->y, 0, (size_t)g->N * O), u, g->N, r, O);
    be->matmul_at(be, dA_of(m, a), model_no_view(), model_subview(l->du, 0, (size_t)g->N * r), x, g->N, g->C, r);
}

int lora_grad_frozen(const wgt_model *m, wgt_view dw) { return m->lora && dw.buf == m->lora->marker.buf; }

int lora_matmul_at(wgt_model *m, wgt_view dw, wgt_view dout, wgt_view inp, uint32_t N, uint32_t C, uint32_t OC) {
    if (!m->lora || dw.buf != m->lora->marker.buf) return 0;
    gemm_args g = {dout, inp, N, C, OC};
    if (!m->lora->merged) each_adapter(m, dw, C, bwd_w_one, &g);
    return 1;
}

// ------------------------------------------------------------------ fingerprint, merge, PEFT

wgt_status model_lora_base_fingerprint(wgt_model *m, char hex[17]) {
    uint64_t h = 0xcbf29ce484222325ull;
    size_t big = 1;
    for (int i = 0; i < m->np; i++) if (m->t[i].info.n > big) big = m->t[i].info.n;
    float *buf = wgt_malloc(big * sizeof *buf);
    wgt_status st = WGT_OK;
    for (int i = 0; i < m->np && st == WGT_OK; i++) {
        st = model_param_get(m, i, buf, 0);
        const unsigned char *b = (const unsigned char *)buf;
        for (size_t k = 0; st == WGT_OK && k < m->t[i].info.n * 4; k++) h = (h ^ b[k]) * 0x100000001b3ull;
    }
    free(buf);
    snprintf(hex, 17, "%016llx", (unsigned long long)h);
    return st;
}

wgt_status model_lora_merge(wgt_model *m) {
    model_lora *l = m->lora;
    if (!l || l->merged) return WGT_OK;
    WGT_TRY(base_lowbit_unpack(m));  // a packed base: the merged weights are f32
    float *st_h = wgt_malloc(m->n_elems * sizeof *st_h);
    wgt_status st = m->be->download(m->be, st_h, m->params, m->n_elems);
    const size_t r = (size_t)l->o.r;
    for (int i = 0; i < l->n && st == WGT_OK; i++) {
        const model_lora_adapter *a = &l->ad[i];
        float *w = wgt_malloc(a->out * a->in * sizeof *w);
        st = model_param_get(m, a->tensor, w, 0);
        const float *A = st_h + a->a_off, *B = st_h + a->b_off;
        for (size_t o = 0; st == WGT_OK && o < a->out; o++)
            for (size_t c = 0; c < a->in; c++) {
                double s = 0;
                for (size_t k = 0; k < r; k++) s += (double)B[o * r + k] * A[k * a->in + c];
                w[o * a->in + c] = (float)((double)w[o * a->in + c] + (double)l->scale * s);
            }
        if (st == WGT_OK) st = model_param_set(m, a->tensor, w);
        free(w);
    }
    free(st_h);
    if (st == WGT_OK) l->merged = 1;
    return st;
}

// The adapters (or their gradients) under PEFT's names into the safetensors file `path`.
static wgt_status save_adapters(wgt_model *m, const char *path, int grads) {
    model_lora *l = m->lora;
    float *h = wgt_malloc(m->n_elems * sizeof *h);
    wgt_status st = m->be->download(m->be, h, grads ? m->grads : m->params, m->n_elems);
    const char *prefix = m->arch->hf_prefix ? m->arch->hf_prefix : "";
    if (st == WGT_OK) {
        st_writer *w = st_writer_new();
        char (*names)[224] = wgt_calloc((size_t)l->n * 2, sizeof *names);
        for (int i = 0; i < l->n; i++) {
            const model_lora_adapter *a = &l->ad[i];
            size_t sa[2] = {(size_t)l->o.r, a->in}, sb[2] = {a->out, (size_t)l->o.r};
            snprintf(names[2 * i], sizeof names[0], "base_model.model.%s%s.lora_A.weight", prefix, a->module);
            snprintf(names[2 * i + 1], sizeof names[0], "base_model.model.%s%s.lora_B.weight", prefix, a->module);
            st_writer_add(w, names[2 * i], 2, sa, h + a->a_off);
            st_writer_add(w, names[2 * i + 1], 2, sb, h + a->b_off);
        }
        st_writer_set_metadata(w, "format", "pt");
        st = st_writer_finish(w, path);
        free(names);
    }
    free(h);
    return st;
}

wgt_status model_lora_save_grads(wgt_model *m, const char *path) {
    if (!m->lora) return wgt_fail(WGT_ERR_ARG, "the model has no LoRA adapters");
    return save_adapters(m, path, 1);
}

wgt_status model_lora_save_peft(wgt_model *m, const char *dir, const char *base) {
    model_lora *l = m->lora;
    if (!l) return wgt_fail(WGT_ERR_ARG, "the model has no LoRA adapters to save");
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir) >= sizeof path)
        return wgt_fail(WGT_ERR_ARG, "export path too long: %s", dir);
    WGT_TRY(save_adapters(m, path, 0));
    wgt_status st;
    // adapter_config.json: target_modules as the modules' last two name parts, which PEFT matches
    // as suffixes ("self_attn.q_proj", "attn.c_proj" but not "mlp.c_proj")
    cJSON *o = cJSON_CreateObject(), *tm = cJSON_CreateArray();
    WGT_ASSERT(o && tm, "cJSON_CreateObject failed (out of memory)");
    for (int i = 0; i < l->n; i++) {
        const char *mod = l->ad[i].module, *dot2 = NULL, *dot1 = strrchr(mod, '.');
        for (const char *p = mod; dot1 && p < dot1; p++) if (*p == '.') dot2 = p;
        const char *key = dot2 ? dot2 + 1 : mod;
        int dup = 0;
        for (int k = 0; k < cJSON_GetArraySize(tm); k++) dup |= !strcmp(cJSON_GetArrayItem(tm, k)->valuestring, key);
        if (!dup) cJSON_AddItemToArray(tm, cJSON_CreateString(key));
    }
    cJSON_AddStringToObject(o, "peft_type", "LORA");
    cJSON_AddStringToObject(o, "task_type", "CAUSAL_LM");
    cJSON_AddStringToObject(o, "base_model_name_or_path", base ? base : "");
    model_hf_add_number(o, "r", l->o.r);
    model_hf_add_number(o, "lora_alpha", l->o.alpha);
    model_hf_add_number(o, "lora_dropout", l->o.dropout);
    cJSON_AddBoolToObject(o, "use_rslora", l->o.rslora);
    cJSON_AddItemToObject(o, "target_modules", tm);
    cJSON_AddStringToObject(o, "bias", "none");
    // GPT-2's Conv1D weights are stored [in, out]: PEFT needs to know to merge them
    int transposed = 0;
    for (int i = 0; i < l->n; i++) transposed |= !!(m->t[l->ad[i].tensor].info.flags & MODEL_T_HF_TRANSPOSED);
    cJSON_AddBoolToObject(o, "fan_in_fan_out", transposed);
    cJSON_AddBoolToObject(o, "init_lora_weights", 1);
    cJSON_AddNullToObject(o, "modules_to_save");
    cJSON_AddBoolToObject(o, "inference_mode", 1);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    WGT_ASSERT(text, "cJSON_Print failed (out of memory)");
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    st = atomic_write_file(path, text, strlen(text));
    free(text);
    return st;
}

// ---- reading PEFT's format

// Whether PEFT target `t` names module kind k (PEFT matches a target as the module's whole name
// or a suffix after a '.').
static int target_names(const char *t, const char *suffix) {
    char mod[64];
    snprintf(mod, sizeof mod, "%.*s", (int)(strlen(suffix) - strlen(".weight")), suffix);
    size_t n = strlen(mod), k = strlen(t);
    return !strcmp(mod, t) || (n > k && !strcmp(mod + n - k, t) && mod[n - k - 1] == '.');
}

wgt_status model_lora_peft_config(const char *dir, const char *arch, model_lora_opts *o) {
    memset(o, 0, sizeof *o);
    const model_arch *a = model_arch_find(arch);
    if (!a) return wgt_fail(WGT_ERR_CONFIG, "unknown model family '%s'", arch);
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/adapter_config.json", dir) >= sizeof path)
        return wgt_fail(WGT_ERR_ARG, "path too long: %s", dir);
    char *text;
    size_t n;
    WGT_TRY(file_read_all(path, "a PEFT adapter config", "a PEFT adapter directory holds adapter_config.json and "
                          "adapter_model.safetensors", 1 << 20, &text, &n));
    cJSON *root;
    wgt_status st = json_parse_strict(&root, text, n, 0, path);
    free(text);
    WGT_TRY(st);
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "peft_type"),
                *r = cJSON_GetObjectItemCaseSensitive(root, "r"),
                *al = cJSON_GetObjectItemCaseSensitive(root, "lora_alpha"),
                *dr = cJSON_GetObjectItemCaseSensitive(root, "lora_dropout"),
                *rs = cJSON_GetObjectItemCaseSensitive(root, "use_rslora"),
                *tm = cJSON_GetObjectItemCaseSensitive(root, "target_modules"),
                *bias = cJSON_GetObjectItemCaseSensitive(root, "bias");
    int64_t rv;
    if (!cJSON_IsString(pt) || strcmp(pt->valuestring, "LORA"))
        st = wgt_fail(WGT_ERR_FORMAT, "%s: peft_type is not \"LORA\"", path);
    else if (!json_int_in(r, 1, LORA_R_MAX, &rv))
        st = wgt_fail(WGT_ERR_FORMAT, "%s: r must be an integer in 1..%d", path, LORA_R_MAX);
    else if (!cJSON_IsNumber(al) || !(al->valuedouble > 0 && al->valuedouble <= 1e6))
        st = wgt_fail(WGT_ERR_FORMAT, "%s: lora_alpha must be a number in (0, 1e6]", path);
    else if (dr && !cJSON_IsNull(dr) && !(cJSON_IsNumber(dr) && dr->valuedouble >= 0 && dr->valuedouble <= 0.9))
        st = wgt_fail(WGT_ERR_FORMAT, "%s: lora_dropout must be a number in [0, 0.9]", path);
    else if (rs && !cJSON_IsBool(rs) && !cJSON_IsNull(rs))
        st = wgt_fail(WGT_ERR_FORMAT, "%s: use_rslora must be true or false", path);
    else if (bias && !(cJSON_IsString(bias) && !strcmp(bias->valuestring, "none")))
        st = wgt_fail(WGT_ERR_FORMAT, "%s: bias must be \"none\" (this build trains no biases beside the adapters)", path);
    // settings that change which modules or how: refused rather than read wrongly
    const char *unsupported[] = {"modules_to_save", "layers_to_transform", "rank_pattern", "alpha_pattern", "use_dora",
                                 "layer_replication", NULL};
    for (int i = 0; unsupported[i] && st == WGT_OK; i++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, unsupported[i]);
        int empty = !it || cJSON_IsNull(it) || cJSON_IsFalse(it) || ((cJSON_IsObject(it) || cJSON_IsArray(it)) &&
                                                                     !cJSON_GetArraySize(it));
        if (!empty) st = wgt_fail(WGT_ERR_FORMAT, "%s: %s is set; this build reads plain LoRA adapters only", path,
                                  unsupported[i]);
    }
    unsigned mask = 0;
    if (st == WGT_OK && cJSON_IsString(tm) && !strcmp(tm->valuestring, "all-linear")) {
        mask = family_kinds(a);
    } else if (st == WGT_OK && cJSON_IsArray(tm) && cJSON_GetArraySize(tm) > 0) {
        const cJSON *it;
        cJSON_ArrayForEach(it, tm) {
            unsigned k = 0;
            for (int i = 0; cJSON_IsString(it) && i < N_KINDS; i++)
                if (target_names(it->valuestring, kinds[i].suffix)) k |= kinds[i].kind;
            k &= family_kinds(a);
            if (!k) {
                st = wgt_fail(WGT_ERR_FORMAT, "%s: target_modules names %s, which is no projection of a %s model", path,
                              cJSON_IsString(it) ? it->valuestring : "a non-string", arch);
                break;
            }
            mask |= k;
        }
    } else if (st == WGT_OK) {
        st = wgt_fail(WGT_ERR_FORMAT, "%s: target_modules must be a non-empty list of module names or \"all-linear\"",
                      path);
    }
    if (st == WGT_OK) {
        o->r = (int)rv;
        o->alpha = al->valuedouble;
        o->dropout = cJSON_IsNumber(dr) ? dr->valuedouble : 0;
        o->rslora = cJSON_IsTrue(rs);
        kinds_list(mask, o->targets, sizeof o->targets);
    }
    cJSON_Delete(root);
    return st;
}

wgt_status model_lora_load_peft(wgt_model *m, const char *dir) {
    model_lora *l = m->lora;
    if (!l) return wgt_fail(WGT_ERR_ARG, "the model has no LoRA adapters to load %s into", dir);
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir) >= sizeof path)
        return wgt_fail(WGT_ERR_ARG, "path too long: %s", dir);
    st_file *f;
    WGT_TRY(st_open_header(&f, path));
    unsigned char *used = wgt_calloc((size_t)st_count(f) + 1, 1);
    float *h = wgt_calloc(m->n_elems, sizeof *h);
    const char *prefix = m->arch->hf_prefix ? m->arch->hf_prefix : "";
    wgt_status st = WGT_OK;
    for (int i = 0; i < l->n && st == WGT_OK; i++) {
        const model_lora_adapter *a = &l->ad[i];
        for (int part = 0; part < 2 && st == WGT_OK; part++) {
            char name[224];
            snprintf(name, sizeof name, "base_model.model.%s%s.lora_%c.weight", prefix, a->module, part ? 'B' : 'A');
            const st_tensor *t = st_find(f, name);
            size_t r0 = part ? a->out : (size_t)l->o.r, r1 = part ? (size_t)l->o.r : a->in;
            if (!t) {
                st = wgt_fail(WGT_ERR_FORMAT, "%s lacks %s (the adapter config targets that module)", path, name);
                break;
            }
            if (t->ndim != 2 || t->shape[0] != r0 || t->shape[1] != r1) {
                st = wgt_fail(WGT_ERR_FORMAT, "%s: %s must be [%zu, %zu] (r = %d), got %s%zu%s%zu]", path, name, r0, r1,
                              l->o.r, "[", t->shape[0], t->ndim == 2 ? ", " : " ...", t->ndim >= 2 ? t->shape[1] : 0);
                break;
            }
            st = st_tensor_read(f, t, h + (part ? a->b_off : a->a_off));
            for (int k = 0; k < st_count(f); k++) if (st_at(f, k) == t) used[k] = 1;
            for (size_t k = 0; st == WGT_OK && k < t->n; k++)
                if (!isfinite(h[(part ? a->b_off : a->a_off) + k]))
                    st = wgt_fail(WGT_ERR_FORMAT, "%s: %s holds a non-finite value at element %zu", path, name, k);
        }
    }
    for (int k = 0; k < st_count(f) && st == WGT_OK; k++)
        if (!used[k])
            st = wgt_fail(WGT_ERR_FORMAT, "%s holds %s, which no adapter of the config (r, target_modules) uses", path,
                          st_at(f, k)->name);
    if (st == WGT_OK) st = m->be->upload(m->be, m->params, h, m->n_elems);
    free(h);
    free(used);
    st_close(f);
    return st;
}

wgt_status model_lora_peft_base(const char *dir, char *base, size_t n) {
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/adapter_config.json", dir) >= sizeof path)
        return wgt_fail(WGT_ERR_ARG, "path too long: %s", dir);
    char *text;
    size_t len;
    WGT_TRY(file_read_all(path, "a PEFT adapter config", NULL, 1 << 20, &text, &len));
    cJSON *root;
    wgt_status st = json_parse_strict(&root, text, len, 0, path);
    free(text);
    WGT_TRY(st);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "base_model_name_or_path");
    if (!cJSON_IsString(b) || !b->valuestring[0] || strlen(b->valuestring) >= n)
        st = wgt_fail(WGT_ERR_FORMAT, "%s: base_model_name_or_path is not a path to the base model", path);
    else snprintf(base, n, "%s", b->valuestring);
    cJSON_Delete(root);
    return st;
}
