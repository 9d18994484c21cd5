// gpt2.c — GPT-2 on the backend interface. Memory is laid out once at init: parameters,
// gradients and the two AdamW moments are each one buffer with every tensor at a 256-byte
// aligned offset (matrices first, so weight decay is one contiguous range), activations are
// one buffer per tensor. The forward and backward below are flat lists of op calls.
#include "model/gpt2.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/safetensors.h"

#define MAX_PARAMS 1024

typedef struct {
    char name[64];     // Hugging Face name
    int ndim;
    size_t shape[2];   // internal shape (matrices [out, in])
    int hf_transposed; // stored [in, out] in HF files (Conv1D)
    int decay;         // AdamW weight decay applies (matrices and embeddings)
    size_t off, n;
} ptensor;

typedef struct {
    wgt_buf *res, *res2, *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *lse, *ln2, *ln2_mean, *ln2_rstd, *pre_gelu, *fch;
} layer_acts;

struct gpt2 {
    wgt_backend *be;
    gpt2_config c;
    int B, T;
    ptensor p[MAX_PARAMS];
    int np;
    size_t n_elems;       // total incl. alignment padding
    size_t decay_end;     // params [0, decay_end) are decayed
    int layer_base;       // index of h.0's first tensor
    wgt_buf *params, *grads, *m1, *v1;
    layer_acts *la;
    wgt_buf *res_final, *lnf, *lnf_mean, *lnf_rstd, *logits, *losses, *loss_sum, *tokens, *targets;
    wgt_buf *scratch_c, *dres, *dtmp, *dqkv, *df1, *df2, *norm_sq, *scale;
    int have_forward;
};

#define V(b) wgt_buf_view(m->be, (b))
static wgt_view PV(gpt2 *m, wgt_buf *b, int i) { return wgt_view_of(b, m->p[i].off, m->p[i].n); }
#define LP(l, k) (m->layer_base + (l) * P_LAYER_COUNT + (k))
#define NOBIAS wgt_view_none()

const gpt2_config *gpt2_cfg(const gpt2 *m) { return &m->c; }

wgt_status gpt2_config_check(const gpt2_config *c) {
    if (c->n_layer < 1 || c->n_layer > 256) return wgt_fail(WGT_ERR_CONFIG, "n_layer must be 1..256, got %d", c->n_layer);
    if (c->n_head < 1) return wgt_fail(WGT_ERR_CONFIG, "n_head must be at least 1, got %d", c->n_head);
    if (c->d_model < 1 || c->d_model % c->n_head)
        return wgt_fail(WGT_ERR_CONFIG, "d_model (%d) must be a positive multiple of n_head (%d)", c->d_model, c->n_head);
    if (c->d_model / c->n_head > 128)
        return wgt_fail(WGT_ERR_CONFIG, "head size d_model/n_head = %d is above the supported 128; use more heads",
                        c->d_model / c->n_head);
    if (c->d_ff < 1) return wgt_fail(WGT_ERR_CONFIG, "d_ff must be at least 1, got %d", c->d_ff);
    if (c->vocab < 1 || c->vocab > 65536)
        return wgt_fail(WGT_ERR_CONFIG, "vocab must be 1..65536 (tokens are stored as uint16), got %d", c->vocab);
    if (c->max_seq < 1) return wgt_fail(WGT_ERR_CONFIG, "max_seq must be at least 1, got %d", c->max_seq);
    return WGT_OK;
}

static void add_param(gpt2 *m, const char *name, size_t d0, size_t d1, int hf_t) {
    WGT_ASSERT(m->np < MAX_PARAMS, "too many parameter tensors");
    ptensor *t = &m->p[m->np++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = d1 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->n = d1 ? d0 * d1 : d0;
    t->hf_transposed = hf_t;
    t->decay = d1 != 0;
}

static void layout(gpt2 *m) {
    const gpt2_config *c = &m->c;
    size_t C = c->d_model, F = c->d_ff;
    add_param(m, "wte.weight", c->vocab, C, 0);
    add_param(m, "wpe.weight", c->max_seq, C, 0);
    m->layer_base = m->np;
    char nm[64];
    for (int l = 0; l < c->n_layer; l++) {
#define H(s) (snprintf(nm, sizeof nm, "h.%d.%s", l, s), nm)
        add_param(m, H("ln_1.weight"), C, 0, 0);
        add_param(m, H("ln_1.bias"), C, 0, 0);
        add_param(m, H("attn.c_attn.weight"), 3 * C, C, 1);
        add_param(m, H("attn.c_attn.bias"), 3 * C, 0, 0);
        add_param(m, H("attn.c_proj.weight"), C, C, 1);
        add_param(m, H("attn.c_proj.bias"), C, 0, 0);
        add_param(m, H("ln_2.weight"), C, 0, 0);
        add_param(m, H("ln_2.bias"), C, 0, 0);
        add_param(m, H("mlp.c_fc.weight"), F, C, 1);
        add_param(m, H("mlp.c_fc.bias"), F, 0, 0);
        add_param(m, H("mlp.c_proj.weight"), C, F, 1);
        add_param(m, H("mlp.c_proj.bias"), C, 0, 0);
#undef H
    }
    add_param(m, "ln_f.weight", C, 0, 0);
    add_param(m, "ln_f.bias", C, 0, 0);
    // offsets: decayed tensors first so AdamW runs as two contiguous ranges
    size_t off = 0;
    for (int pass = 1; pass >= 0; pass--) {
        for (int i = 0; i < m->np; i++) {
            if (m->p[i].decay != pass) continue;
            m->p[i].off = off;
            off += (m->p[i].n + WGT_VIEW_ALIGN - 1) / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
        }
        if (pass == 1) m->decay_end = off;
    }
    m->n_elems = off;
}

size_t gpt2_num_params(const gpt2 *m) {
    size_t n = 0;
    for (int i = 0; i < m->np; i++) n += m->p[i].n;
    return n;
}

static wgt_status alloc(gpt2 *m, wgt_buf **b, size_t n, const char *label) {
    if (n > m->be->max_binding_elems && strcmp(label, "params") && strcmp(label, "grads") && strcmp(label, "adam_m") &&
        strcmp(label, "adam_v") && strcmp(label, "logits"))
        return wgt_fail(WGT_ERR_CONFIG, "activation '%s' needs %.1f MiB, above the device's %.1f MiB storage binding "
                        "limit; use a smaller batch (--batch) or sequence length (--seq)", label, n * 4 / 1048576.0,
                        m->be->max_binding_elems * 4 / 1048576.0);
    return m->be->buf_alloc(m->be, b, n, label);
}

wgt_status gpt2_init(gpt2 **out, wgt_backend *be, const gpt2_config *cfg, int B, int T) {
    *out = NULL;
    WGT_TRY(gpt2_config_check(cfg));
    if (B < 1) return wgt_fail(WGT_ERR_CONFIG, "batch size must be at least 1, got %d", B);
    if (T < 1 || T > cfg->max_seq)
        return wgt_fail(WGT_ERR_CONFIG, "sequence length %d is outside 1..%d (the model's maximum sequence length)", T, cfg->max_seq);
    gpt2 *m = wgt_calloc(1, sizeof *m);
    m->be = be;
    m->c = *cfg;
    m->B = B;
    m->T = T;
    layout(m);
    // the embedding kernels bind wte whole; every other large tensor is split by its op
    if ((size_t)cfg->vocab * cfg->d_model > be->max_binding_elems) {
        free(m);
        return wgt_fail(WGT_ERR_CONFIG, "the token embedding (%d x %d) is larger than this device's storage binding limit "
                        "(%.0f MiB); use a smaller vocabulary or d_model on this device", cfg->vocab, cfg->d_model,
                        be->max_binding_elems * 4 / 1048576.0);
    }
    size_t BT = (size_t)B * T, C = cfg->d_model, F = cfg->d_ff, NH = cfg->n_head, Vv = cfg->vocab;
    wgt_status st = WGT_OK;
#define A(ptr, n, label) if (st == WGT_OK) st = alloc(m, &(ptr), (n), (label))
    A(m->params, m->n_elems, "params");
    A(m->grads, m->n_elems, "grads");
    A(m->m1, m->n_elems, "adam_m");
    A(m->v1, m->n_elems, "adam_v");
    m->la = wgt_calloc(cfg->n_layer, sizeof *m->la);
    for (int l = 0; l < cfg->n_layer; l++) {
        layer_acts *a = &m->la[l];
        A(a->res, BT * C, "res");
        A(a->res2, BT * C, "res2");
        A(a->ln1, BT * C, "ln1");
        A(a->ln1_mean, BT, "ln1_mean");
        A(a->ln1_rstd, BT, "ln1_rstd");
        A(a->qkv, BT * 3 * C, "qkv");
        A(a->atty, BT * C, "atty");
        A(a->lse, (size_t)B * NH * T, "lse");
        A(a->ln2, BT * C, "ln2");
        A(a->ln2_mean, BT, "ln2_mean");
        A(a->ln2_rstd, BT, "ln2_rstd");
        A(a->pre_gelu, BT * F, "pre_gelu");
        A(a->fch, BT * F, "fch");
    }
    A(m->res_final, BT * C, "res_final");
    A(m->lnf, BT * C, "lnf");
    A(m->lnf_mean, BT, "lnf_mean");
    A(m->lnf_rstd, BT, "lnf_rstd");
    A(m->logits, BT * Vv, "logits");
    A(m->losses, BT, "losses");
    A(m->loss_sum, 1, "loss_sum");
    A(m->tokens, BT, "tokens");
    A(m->targets, BT, "targets");
    A(m->scratch_c, BT * C, "scratch_c");
    A(m->dres, BT * C, "dres");
    A(m->dtmp, BT * C, "dtmp");
    A(m->dqkv, BT * 3 * C, "dqkv");
    A(m->df1, BT * F, "df1");
    A(m->df2, BT * F, "df2");
    A(m->norm_sq, 1, "norm_sq");
    A(m->scale, 2, "clip_scale");
#undef A
    if (st == WGT_OK) st = be->sync(be);
    if (st != WGT_OK) { gpt2_free(m); return st; }
    *out = m;
    return WGT_OK;
}

void gpt2_free(gpt2 *m) {
    if (!m) return;
    wgt_backend *be = m->be;
    wgt_buf **all[] = {&m->params, &m->grads, &m->m1, &m->v1, &m->res_final, &m->lnf, &m->lnf_mean, &m->lnf_rstd,
                       &m->logits, &m->losses, &m->loss_sum, &m->tokens, &m->targets, &m->scratch_c, &m->dres,
                       &m->dtmp, &m->dqkv, &m->df1, &m->df2, &m->norm_sq, &m->scale};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) if (*all[i]) be->buf_free(be, *all[i]);
    if (m->la) {
        for (int l = 0; l < m->c.n_layer; l++) {
            layer_acts *a = &m->la[l];
            wgt_buf *bs[] = {a->res, a->res2, a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv, a->atty, a->lse, a->ln2,
                             a->ln2_mean, a->ln2_rstd, a->pre_gelu, a->fch};
            for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) if (bs[i]) be->buf_free(be, bs[i]);
        }
        free(m->la);
    }
    free(m);
}

// ------------------------------------------------------------------ init / IO
static uint64_t rng_next(uint64_t *s) {  // splitmix64
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_normal(uint64_t *s) {
    double u = ((rng_next(s) >> 11) + 0.5) / 9007199254740992.0, v = (rng_next(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

wgt_status gpt2_init_random(gpt2 *m, uint64_t seed) {
    float *h = wgt_calloc(m->n_elems, sizeof(float));
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    float proj_std = 0.02f / sqrtf(2.0f * m->c.n_layer);
    for (int i = 0; i < m->np; i++) {
        ptensor *t = &m->p[i];
        float *d = h + t->off;
        const char *nm = t->name;
        size_t len = strlen(nm);
        int is_norm_w = strstr(nm, "ln_") && !strcmp(nm + len - 6, "weight");
        if (is_norm_w) { for (size_t k = 0; k < t->n; k++) d[k] = 1.0f; continue; }
        if (t->ndim == 1) continue;  // biases start at zero
        float std = strstr(nm, "c_proj.weight") ? proj_std : 0.02f;
        for (size_t k = 0; k < t->n; k++) d[k] = std * rng_normal(&s);
    }
    wgt_view pv = V(m->params);
    wgt_status st = m->be->upload(m->be, pv, h, m->n_elems);
    free(h);
    if (st == WGT_OK) {
        m->be->fill_zero(m->be, V(m->m1), m->n_elems);
        m->be->fill_zero(m->be, V(m->v1), m->n_elems);
        m->be->fill_zero(m->be, V(m->grads), m->n_elems);
        st = m->be->sync(m->be);
    }
    return st;
}

static const char *strip_prefix(const char *n) { return strncmp(n, "transformer.", 12) ? n : n + 12; }

static const st_tensor *st_find_hf(const st_file *f, const char *name) {
    const st_tensor *t = st_find(f, name);
    if (t) return t;
    char buf[160];
    snprintf(buf, sizeof buf, "transformer.%s", name);
    return st_find(f, buf);
}

wgt_status gpt2_config_from_safetensors(gpt2_config *cfg, const char *path, int n_head) {
    st_file *f;
    WGT_TRY(st_open(&f, path));
    memset(cfg, 0, sizeof *cfg);
    const st_tensor *wte = st_find_hf(f, "wte.weight"), *wpe = st_find_hf(f, "wpe.weight"),
                    *fc = st_find_hf(f, "h.0.mlp.c_fc.weight");
    wgt_status st = WGT_OK;
    if (!wte || !wpe || !fc || wte->ndim != 2 || wpe->ndim != 2 || fc->ndim != 2)
        st = wgt_fail(WGT_ERR_FORMAT, "'%s' is not a GPT-2 checkpoint: it lacks 2-D wte.weight, wpe.weight or "
                      "h.0.mlp.c_fc.weight (Hugging Face GPT-2 names)", path);
    if (st == WGT_OK) {
        cfg->vocab = (int)wte->shape[0];
        cfg->d_model = (int)wte->shape[1];
        cfg->max_seq = (int)wpe->shape[0];
        cfg->d_ff = (int)fc->shape[1];
        cfg->n_head = n_head;
        char nm[64];
        for (int l = 0;; l++) {
            snprintf(nm, sizeof nm, "h.%d.ln_1.weight", l);
            if (!st_find_hf(f, nm)) break;
            cfg->n_layer = l + 1;
        }
        st = gpt2_config_check(cfg);
        if (st == WGT_OK && (size_t)cfg->d_model != wpe->shape[1])
            st = wgt_fail(WGT_ERR_FORMAT, "'%s': wpe.weight has width %zu but wte.weight has %d", path, wpe->shape[1], cfg->d_model);
    }
    st_close(f);
    return st;
}

wgt_status gpt2_load_safetensors(gpt2 *m, const char *path) {
    st_file *f;
    WGT_TRY(st_open(&f, path));
    wgt_status st = WGT_OK;
    float *tmp = NULL;
    size_t tmp_n = 0;
    for (int i = 0; i < m->np && st == WGT_OK; i++) {
        ptensor *p = &m->p[i];
        const st_tensor *t = st_find_hf(f, p->name);
        if (!t) { st = wgt_fail(WGT_ERR_FORMAT, "'%s' lacks tensor '%s' needed by this model config", path, p->name); break; }
        size_t e0 = p->hf_transposed ? p->shape[1] : p->shape[0], e1 = p->hf_transposed ? p->shape[0] : p->shape[1];
        int shape_ok = t->ndim == p->ndim && t->shape[0] == e0 && (p->ndim == 1 || t->shape[1] == e1);
        if (!shape_ok) {
            st = wgt_fail(WGT_ERR_FORMAT, "'%s': tensor '%s' has shape [%zu%s%zu] but the model expects [%zu%s%zu]", path,
                          p->name, t->shape[0], t->ndim > 1 ? ", " : "", t->ndim > 1 ? t->shape[1] : 0, e0,
                          p->ndim > 1 ? ", " : "", p->ndim > 1 ? e1 : 0);
            break;
        }
        const float *src = t->data;
        if (p->hf_transposed) {
            if (tmp_n < p->n) { free(tmp); tmp = wgt_malloc(p->n * 4); tmp_n = p->n; }
            size_t R = p->shape[0], Cc = p->shape[1];  // internal [R, Cc] = HF [Cc, R]^T
            for (size_t r = 0; r < R; r++)
                for (size_t c = 0; c < Cc; c++) tmp[r * Cc + c] = t->data[c * R + r];
            src = tmp;
        }
        st = m->be->upload(m->be, PV(m, m->params, i), src, p->n);
    }
    // anything else in the file must be a known non-parameter (the causal-mask buffers)
    for (int k = 0; k < st_count(f) && st == WGT_OK; k++) {
        const char *n = strip_prefix(st_at(f, k)->name);
        int known = 0;
        for (int i = 0; i < m->np && !known; i++) known = !strcmp(n, m->p[i].name);
        size_t len = strlen(n);
        if (!known && !(len > 9 && (!strcmp(n + len - 9, "attn.bias") || (len > 16 && !strcmp(n + len - 16, "attn.masked_bias")))) &&
            strcmp(n, "lm_head.weight"))
            st = wgt_fail(WGT_ERR_FORMAT, "'%s' has tensor '%s' that this GPT-2 config does not use (wrong --heads, or "
                          "not a GPT-2 checkpoint?)", path, st_at(f, k)->name);
    }
    free(tmp);
    st_close(f);
    if (st == WGT_OK) st = m->be->sync(m->be);
    return st;
}

wgt_status gpt2_save_safetensors(gpt2 *m, const char *path, int grads) {
    float *h = wgt_malloc(m->n_elems * 4);
    float *hf = wgt_malloc(m->n_elems * 4);
    wgt_status st = m->be->download(m->be, h, V(grads ? m->grads : m->params), m->n_elems);
    if (st != WGT_OK) { free(h); free(hf); return st; }
    st_writer *w = st_writer_new();
    for (int i = 0; i < m->np; i++) {
        ptensor *p = &m->p[i];
        float *d = hf + p->off;
        size_t shape[2];
        if (p->hf_transposed) {
            size_t R = p->shape[0], Cc = p->shape[1];
            for (size_t r = 0; r < R; r++)
                for (size_t c = 0; c < Cc; c++) d[c * R + r] = h[p->off + r * Cc + c];
            shape[0] = Cc;
            shape[1] = R;
        } else {
            memcpy(d, h + p->off, p->n * 4);
            shape[0] = p->shape[0];
            shape[1] = p->shape[1];
        }
        st_writer_add(w, p->name, p->ndim, shape, d);
    }
    st = st_writer_finish(w, path);
    free(h);
    free(hf);
    return st;
}

size_t gpt2_state_elems(const gpt2 *m) { return m->n_elems; }

wgt_status gpt2_state_download(gpt2 *m, float *params, float *m1, float *v1) {
    WGT_TRY(m->be->download(m->be, params, V(m->params), m->n_elems));
    WGT_TRY(m->be->download(m->be, m1, V(m->m1), m->n_elems));
    return m->be->download(m->be, v1, V(m->v1), m->n_elems);
}

wgt_status gpt2_state_upload(gpt2 *m, const float *params, const float *m1, const float *v1) {
    WGT_TRY(m->be->upload(m->be, V(m->params), params, m->n_elems));
    WGT_TRY(m->be->upload(m->be, V(m->m1), m1, m->n_elems));
    WGT_TRY(m->be->upload(m->be, V(m->v1), v1, m->n_elems));
    return m->be->sync(m->be);
}

int gpt2_param_count(const gpt2 *m) { return m->np; }
const char *gpt2_param_name(const gpt2 *m, int i) { return m->p[i].name; }
size_t gpt2_param_size(const gpt2 *m, int i) { return m->p[i].n; }
wgt_status gpt2_param_get(gpt2 *m, int i, float *dst, int grad) {
    return m->be->download(m->be, dst, PV(m, grad ? m->grads : m->params, i), m->p[i].n);
}
wgt_status gpt2_param_set(gpt2 *m, int i, const float *src) {
    WGT_TRY(m->be->upload(m->be, PV(m, m->params, i), src, m->p[i].n));
    return m->be->sync(m->be);
}

// ------------------------------------------------------------------ forward
static wgt_status upload_batch(gpt2 *m, const int32_t *tokens, const int32_t *targets) {
    size_t BT = (size_t)m->B * m->T;
    for (size_t i = 0; i < BT; i++)
        if (tokens[i] < 0 || tokens[i] >= m->c.vocab)
            return wgt_fail(WGT_ERR_FORMAT, "token id %d at position %zu is outside the vocabulary 0..%d; the data does "
                            "not belong to this model (check --data and the tokenizer)", tokens[i], i, m->c.vocab - 1);
    WGT_TRY(m->be->upload(m->be, V(m->tokens), tokens, BT));
    if (targets) {
        uint32_t *t = wgt_malloc(BT * 4);
        for (size_t i = 0; i < BT; i++) t[i] = (targets[i] < 0 || targets[i] >= m->c.vocab) ? UINT32_MAX : (uint32_t)targets[i];
        wgt_status st = m->be->upload(m->be, V(m->targets), t, BT);
        free(t);
        WGT_TRY(st);
    }
    return WGT_OK;
}

static void forward_body(gpt2 *m) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, F = m->c.d_ff, NH = m->c.n_head, L = m->c.n_layer;
    const uint32_t BT = B * T;
    be->embedding_forward(be, V(m->la[0].res), V(m->tokens), PV(m, m->params, 0), PV(m, m->params, 1), B, T, C,
                          m->c.vocab);  // [B,T,C]
    for (uint32_t l = 0; l < L; l++) {
        layer_acts *a = &m->la[l];
        wgt_view res_out = V(l + 1 < L ? m->la[l + 1].res : m->res_final);
        be->layernorm_forward(be, V(a->ln1), V(a->ln1_mean), V(a->ln1_rstd), V(a->res), PV(m, m->params, LP(l, P_LN1W)),
                              PV(m, m->params, LP(l, P_LN1B)), BT, C);                                  // ln1 [B,T,C]
        be->matmul(be, V(a->qkv), V(a->ln1), PV(m, m->params, LP(l, P_QKVW)), PV(m, m->params, LP(l, P_QKVB)), BT, C,
                   3 * C);                                                                             // qkv [B,T,3C]
        be->attention_forward(be, V(a->atty), V(a->lse), V(a->qkv), B, T, NH, NH, C / NH);             // atty [B,T,C], lse [B,NH,T]
        be->matmul(be, V(m->scratch_c), V(a->atty), PV(m, m->params, LP(l, P_ATTPROJW)),
                   PV(m, m->params, LP(l, P_ATTPROJB)), BT, C, C);                                      // attproj [B,T,C]
        be->residual_forward(be, V(a->res2), V(a->res), V(m->scratch_c), (size_t)BT * C);               // res2 [B,T,C]
        be->layernorm_forward(be, V(a->ln2), V(a->ln2_mean), V(a->ln2_rstd), V(a->res2), PV(m, m->params, LP(l, P_LN2W)),
                              PV(m, m->params, LP(l, P_LN2B)), BT, C);                                  // ln2 [B,T,C]
        be->matmul(be, V(a->pre_gelu), V(a->ln2), PV(m, m->params, LP(l, P_FCW)), PV(m, m->params, LP(l, P_FCB)), BT, C,
                   F);                                                                                 // pre_gelu [B,T,F]
        be->copy(be, V(a->fch), V(a->pre_gelu), (size_t)BT * F);
        be->gelu_inplace(be, V(a->fch), (size_t)BT * F);                                                // fch [B,T,F]
        be->matmul(be, V(m->scratch_c), V(a->fch), PV(m, m->params, LP(l, P_FCPROJW)),
                   PV(m, m->params, LP(l, P_FCPROJB)), BT, F, C);                                       // fcproj [B,T,C]
        be->residual_forward(be, res_out, V(a->res2), V(m->scratch_c), (size_t)BT * C);                 // res3 [B,T,C]
    }
    int nlast = m->np - 2;
    be->layernorm_forward(be, V(m->lnf), V(m->lnf_mean), V(m->lnf_rstd), V(m->res_final), PV(m, m->params, nlast),
                          PV(m, m->params, nlast + 1), BT, C);                                          // lnf [B,T,C]
    be->matmul(be, V(m->logits), V(m->lnf), PV(m, m->params, 0), NOBIAS, BT, C, m->c.vocab);           // logits [B,T,V]
}

wgt_status gpt2_forward(gpt2 *m, const int32_t *tokens, const int32_t *targets, gpt2_loss_opts lo, float inv_norm) {
    WGT_TRY(upload_batch(m, tokens, targets));
    forward_body(m);
    wgt_backend *be = m->be;
    const uint32_t BT = m->B * m->T;
    be->cross_entropy(be, V(m->logits), V(m->losses), V(m->targets), BT, m->c.vocab, lo.alpha, lo.beta, inv_norm);
    be->sum_losses(be, V(m->loss_sum), V(m->losses), BT);
    m->have_forward = 1;
    return WGT_OK;
}

wgt_status gpt2_forward_logits(gpt2 *m, const int32_t *tokens, float *logits) {
    WGT_TRY(upload_batch(m, tokens, NULL));
    forward_body(m);
    m->have_forward = 0;  // logits are not dlogits: no backward from here
    return m->be->download(m->be, logits, V(m->logits), (size_t)m->B * m->T * m->c.vocab);
}

wgt_status gpt2_loss_sum(gpt2 *m, double *sum) {
    float s;
    WGT_TRY(m->be->download(m->be, &s, V(m->loss_sum), 1));
    *sum = s;
    return WGT_OK;
}

// ------------------------------------------------------------------ backward
void gpt2_zero_grad(gpt2 *m) { m->be->fill_zero(m->be, V(m->grads), m->n_elems); }

void gpt2_backward(gpt2 *m) {
    WGT_ASSERT(m->have_forward, "gpt2_backward needs a gpt2_forward with targets first");
    m->have_forward = 0;
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, F = m->c.d_ff, NH = m->c.n_head, L = m->c.n_layer;
    const uint32_t BT = B * T, Vv = m->c.vocab;
    wgt_buf *G = m->grads, *P = m->params;
    // logits now hold dlogits [B,T,V]
    be->matmul_t(be, V(m->dtmp), V(m->logits), PV(m, P, 0), BT, C, Vv);                                 // dlnf [B,T,C]
    be->matmul_at(be, PV(m, G, 0), NOBIAS, V(m->logits), V(m->lnf), BT, C, Vv);                        // dwte += [V,C]
    be->fill_zero(be, V(m->dres), (size_t)BT * C);
    int nlast = m->np - 2;
    be->layernorm_backward(be, V(m->dres), PV(m, G, nlast), PV(m, G, nlast + 1), V(m->dtmp), V(m->res_final),
                           PV(m, P, nlast), V(m->lnf_mean), V(m->lnf_rstd), BT, C);                     // dres [B,T,C]
    for (int l = (int)L - 1; l >= 0; l--) {
        layer_acts *a = &m->la[l];
        // MLP: res3 = res2 + fcproj(gelu(fc(ln2(res2))))
        be->matmul_t(be, V(m->df1), V(m->dres), PV(m, P, LP(l, P_FCPROJW)), BT, F, C);                  // dfch [B,T,F]
        be->matmul_at(be, PV(m, G, LP(l, P_FCPROJW)), PV(m, G, LP(l, P_FCPROJB)), V(m->dres), V(a->fch), BT, F, C);
        be->ffn_gelu_backward(be, V(m->df2), V(m->df1), V(a->pre_gelu), (size_t)BT * F);                // dpre_gelu [B,T,F]
        be->matmul_t(be, V(m->dtmp), V(m->df2), PV(m, P, LP(l, P_FCW)), BT, C, F);                      // dln2 [B,T,C]
        be->matmul_at(be, PV(m, G, LP(l, P_FCW)), PV(m, G, LP(l, P_FCB)), V(m->df2), V(a->ln2), BT, C, F);
        be->layernorm_backward(be, V(m->dres), PV(m, G, LP(l, P_LN2W)), PV(m, G, LP(l, P_LN2B)), V(m->dtmp), V(a->res2),
                               PV(m, P, LP(l, P_LN2W)), V(a->ln2_mean), V(a->ln2_rstd), BT, C);         // dres2 [B,T,C]
        // attention: res2 = res + attproj(attn(qkv(ln1(res))))
        be->matmul_t(be, V(m->dtmp), V(m->dres), PV(m, P, LP(l, P_ATTPROJW)), BT, C, C);                // datty [B,T,C]
        be->matmul_at(be, PV(m, G, LP(l, P_ATTPROJW)), PV(m, G, LP(l, P_ATTPROJB)), V(m->dres), V(a->atty), BT, C, C);
        be->attention_backward(be, V(m->dqkv), V(m->dtmp), V(a->qkv), V(a->atty), V(a->lse), B, T, NH, NH, C / NH); // dqkv [B,T,3C]
        be->matmul_t(be, V(m->dtmp), V(m->dqkv), PV(m, P, LP(l, P_QKVW)), BT, C, 3 * C);                // dln1 [B,T,C]
        be->matmul_at(be, PV(m, G, LP(l, P_QKVW)), PV(m, G, LP(l, P_QKVB)), V(m->dqkv), V(a->ln1), BT, C, 3 * C);
        be->layernorm_backward(be, V(m->dres), PV(m, G, LP(l, P_LN1W)), PV(m, G, LP(l, P_LN1B)), V(m->dtmp), V(a->res),
                               PV(m, P, LP(l, P_LN1W)), V(a->ln1_mean), V(a->ln1_rstd), BT, C);         // dres [B,T,C]
    }
    be->embedding_backward(be, PV(m, G, 0), PV(m, G, 1), V(m->dres), V(m->tokens), B, T, C, Vv);       // dwte, dwpe
}

// ------------------------------------------------------------------ optimizer
// Runs fn over [lo, hi) of a whole-state buffer in chunks that fit one storage binding.
static size_t chunk_elems(gpt2 *m) {
    size_t c = m->be->max_binding_elems / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
    return c ? c : WGT_VIEW_ALIGN;
}

void gpt2_update(gpt2 *m, float lr, float beta1, float beta2, float eps, float weight_decay, float max_norm, int t) {
    wgt_backend *be = m->be;
    size_t ch = chunk_elems(m);
    for (size_t o = 0, n; o < m->n_elems; o += n) {
        n = m->n_elems - o < ch ? m->n_elems - o : ch;
        be->grad_norm_sq(be, V(m->norm_sq), wgt_view_at(V(m->grads), o), n, o > 0);
    }
    be->grad_clip_scale(be, V(m->scale), V(m->norm_sq), max_norm);
    for (int group = 0; group < 2; group++) {
        size_t lo = group ? m->decay_end : 0, hi = group ? m->n_elems : m->decay_end;
        for (size_t o = lo, n; o < hi; o += n) {
            n = hi - o < ch ? hi - o : ch;
            be->adamw(be, wgt_view_at(V(m->params), o), wgt_view_at(V(m->m1), o), wgt_view_at(V(m->v1), o),
                      wgt_view_at(V(m->grads), o), V(m->scale), n, lr, beta1, beta2, eps,
                      group ? 0.0f : weight_decay, (uint32_t)t);
        }
    }
}

wgt_status gpt2_grad_norm(gpt2 *m, float *norm) {
    float s[2];
    WGT_TRY(m->be->download(m->be, s, V(m->scale), 2));
    *norm = s[1];
    return WGT_OK;
}
