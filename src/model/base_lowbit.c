// base_lowbit.c — a LoRA model's frozen base with its projection weights packed in f16, bf16 or
// nf4 (base_lowbit.h; docs/memory.md#low-precision-frozen-bases): the span, the buffers, the
// views, quantising on the way in and decoding on the way out, and the GEMMs on packed weights.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend/lowbit.h"
#include "model/base_lowbit.h"
#include "model/nf4.h"

static const char *const prec_names[] = {"f32", "f16", "bf16", "nf4"};
const char *model_base_prec_name(model_base_prec p) {
    return p >= MODEL_BASE_F32 && p <= MODEL_BASE_NF4 ? prec_names[p] : "?";
}
wgt_status model_base_prec_parse(const char *s, const char *flag, model_base_prec *out) {
    for (int i = 0; i < 4; i++)
        if (s && !strcmp(s, prec_names[i])) {
            *out = (model_base_prec)i;
            return WGT_OK;
        }
    return wgt_fail(WGT_ERR_ARG, "%s must be f32, f16, bf16 or nf4, got '%s'", flag, s ? s : "");
}

static size_t align_up(size_t n) { return (n + WGT_VIEW_ALIGN - 1) / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN; }

// The tensors that are packed: every per-layer projection weight (as LoRA's all-linear).
static int packable(const model_tensor_desc *d) {
    return d->per_layer && d->shape[1] != DIM_NONE && (d->flags & MODEL_T_DECAY) && !(d->flags & MODEL_T_EMBEDDING);
}
static int in_span(const model_packed *k, const model_param_info *p) { return k && p->off >= k->p0 && p->off < k->p1; }

wgt_status base_lowbit_plan(wgt_model *m, model_base_prec prec) {
    m->packed = NULL;
    if (prec == MODEL_BASE_F32) return WGT_OK;
    WGT_ASSERT(prec >= MODEL_BASE_F16 && prec <= MODEL_BASE_NF4, "base_lowbit_plan: unknown base precision");
    const char *name = model_base_prec_name(prec);
    const uint32_t fmt = prec == MODEL_BASE_F16 ? WGT_LOWBIT_F16 : prec == MODEL_BASE_BF16 ? WGT_LOWBIT_BF16 : WGT_LOWBIT_NF4;
    size_t p0 = SIZE_MAX, p1 = 0;
    for (int i = 0; i < m->np; i++) {
        const model_param_info *p = &m->t[i].info;
        if (!packable(m->t[i].desc)) continue;
        if (p->off < p0) p0 = p->off;
        if (p->off + p->n > p1) p1 = p->off + p->n;
    }
    if (p1 == 0) return wgt_fail(WGT_ERR_CONFIG, "--base-precision %s: this %s model has no projection weights to store "
                                 "packed; use --base-precision f32", name, m->arch->name);
    const size_t cut = align_up(p1) - p0, g = fmt == WGT_LOWBIT_NF4 ? NF4_BLOCK : 2;
    for (int i = 0; i < m->np; i++) {
        const model_param_info *p = &m->t[i].info;
        const int pk = packable(m->t[i].desc);
        if (!pk && p->off < p0 + cut && p->off + p->n > p0)
            return wgt_fail(WGT_ERR_CONFIG, "--base-precision %s: the %s family places tensor %s among its projection "
                            "weights, which this build cannot pack around; use --base-precision f32", name,
                            m->arch->name, p->name);
        if (pk && ((p->off - p0) % g || p->n % g))
            return wgt_fail(WGT_ERR_CONFIG, "--base-precision %s: tensor %s (%zu x %zu) does not start and end on a "
                            "multiple of %zu values (%s); use %s", name, p->name, p->shape[0], p->shape[1], g,
                            fmt == WGT_LOWBIT_NF4 ? "nf4's block of 64" : "two halves a word",
                            fmt == WGT_LOWBIT_NF4 ? "--base-precision bf16" : "--base-precision f32");
    }
    model_packed *k = wgt_calloc(1, sizeof *k);
    k->prec = prec;
    k->fmt = fmt;
    k->p0 = p0;
    k->p1 = p1;
    k->cut = cut;
    m->packed = k;
    return WGT_OK;
}

void base_lowbit_alloc(wgt_model *m) {
    model_packed *k = m->packed;
    if (!k) {
        model_alloc(m, &m->base, m->n_base, "frozen_base", 1);
        return;
    }
    const size_t L = k->p1 - k->p0, rest = m->n_base - k->cut;
    model_alloc(m, &m->base, rest ? rest : 1, "frozen_base", 1);
    model_alloc(m, &k->words, (size_t)wgt_lowbit_words(k->fmt, L), "frozen_base_packed", 1);
    if (k->fmt == WGT_LOWBIT_NF4) model_alloc(m, &k->absmax, (size_t)wgt_lowbit_blocks(k->fmt, L), "frozen_base_absmax", 1);
    model_alloc(m, &k->marker, WGT_VIEW_ALIGN, "frozen_base_marker", 0);
}

void base_lowbit_free(wgt_model *m) {
    free(m->packed);
    m->packed = NULL;
}

// The view of base tensor p that the family binds: in the f32 base (the span cut out), or the
// marker at the table offset for a packed one.
static wgt_view base_view(const wgt_model *m, const model_param_info *p) {
    const model_packed *k = m->packed;
    if (!k) return model_subview(m->base, p->off, p->n);
    if (in_span(k, p)) return model_view(k->marker.buf, p->off, p->n);  // never bound: the GEMM helpers translate it
    return model_subview(m->base, p->off < k->p0 ? p->off : p->off - k->cut, p->n);
}

void base_lowbit_bind(wgt_model *m) {
    const model_arch *a = m->arch;
    for (int i = 0; i < m->np; i++) {
        const model_tensor *t = &m->t[i];
        char *base = t->layer < 0 ? m->pg : (char *)m->pl + (size_t)t->layer * a->layer_size;
        *(wgt_view *)(base + t->desc->field) = base_view(m, &t->info);
    }
}

wgt_status base_tensor_put(wgt_model *m, const model_param_info *p, const float *src) {
    const model_packed *k = m->packed;
    if (!in_span(k, p)) return m->be->upload(m->be, base_view(m, p), src, p->n);
    const size_t e = p->off - k->p0, n = p->n;
    wgt_status st;
    if (k->fmt != WGT_LOWBIT_NF4) {  // e and n even (base_lowbit_plan)
        uint16_t *h = wgt_malloc(n * sizeof *h);
        for (size_t i = 0; i < n; i++) h[i] = k->fmt == WGT_LOWBIT_F16 ? wgt_f32_to_f16(src[i]) : wgt_f32_to_bf16(src[i]);
        st = m->be->upload(m->be, model_subview(k->words, e / 2, n / 2), h, n / 2);
        free(h);
        return st;
    }
    uint8_t *codes = wgt_malloc(n / 2);  // n a multiple of 64: n/2 bytes are n/8 whole words
    float *am = wgt_malloc(n / NF4_BLOCK * sizeof *am);
    st = nf4_quantize(codes, am, src, n);
    if (st != WGT_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", wgt_last_error());
        st = wgt_fail(st, "tensor %s: %s (--base-precision nf4; use bf16 or f32 for these weights)", p->name, why);
    }
    if (st == WGT_OK) st = m->be->upload(m->be, model_subview(k->words, e / 8, n / 8), codes, n / 8);
    if (st == WGT_OK) st = m->be->upload(m->be, model_subview(k->absmax, e / NF4_BLOCK, n / NF4_BLOCK), am, n / NF4_BLOCK);
    free(codes);
    free(am);
    return st;
}

wgt_status base_tensor_get(wgt_model *m, const model_param_info *p, float *dst) {
    const model_packed *k = m->packed;
    if (!in_span(k, p)) return m->be->download(m->be, dst, base_view(m, p), p->n);
    const size_t e = p->off - k->p0, n = p->n, nw = (size_t)wgt_lowbit_words(k->fmt, n);
    const size_t nb = (size_t)wgt_lowbit_blocks(k->fmt, n);
    uint32_t *w = wgt_malloc(nw * sizeof *w);
    float *am = wgt_malloc((nb ? nb : 1) * sizeof *am);
    wgt_status st = m->be->download(m->be, w, model_subview(k->words, k->fmt == WGT_LOWBIT_NF4 ? e / 8 : e / 2, nw), nw);
    if (st == WGT_OK && nb) st = m->be->download(m->be, am, model_subview(k->absmax, e / NF4_BLOCK, nb), nb);
    for (size_t i = 0; st == WGT_OK && i < n; i++) dst[i] = wgt_lowbit_get(k->fmt, w, am, i);
    free(w);
    free(am);
    return st;
}

// The packed words (and absmax) of weight view w [OC, C], which starts at a tensor of the span.
static void packed_of(const wgt_model *m, wgt_view w, uint32_t C, uint32_t OC, wgt_view *wv, wgt_view *av,
                      uint32_t *WW, uint32_t *NB) {
    const model_packed *k = m->packed;
    const uint64_t n = (uint64_t)C * OC;
    WGT_ASSERT(w.off >= k->p0 && w.off + n <= k->p1 && w.n >= n, "a packed weight's GEMM reaches outside the packed span");
    const size_t e = w.off - k->p0;
    WGT_ASSERT(e % (k->fmt == WGT_LOWBIT_NF4 ? NF4_BLOCK : 2) == 0, "a packed weight's GEMM starts inside a word or block");
    const uint64_t words = wgt_lowbit_words(k->fmt, n), blocks = wgt_lowbit_blocks(k->fmt, n);
    WGT_ASSERT(words <= UINT32_MAX && blocks <= UINT32_MAX, "a packed weight above 2^32 words");
    *wv = model_subview(k->words, k->fmt == WGT_LOWBIT_NF4 ? e / 8 : e / 2, (size_t)words);
    *av = blocks ? model_subview(k->absmax, e / NF4_BLOCK, (size_t)blocks) : model_no_view();
    *WW = (uint32_t)words;
    *NB = (uint32_t)blocks;
}

void base_lowbit_matmul(wgt_model *m, wgt_view out, wgt_view inp, wgt_view w, wgt_view bias, uint32_t N, uint32_t C,
                        uint32_t OC) {
    wgt_view wv, av;
    uint32_t WW, NB;
    packed_of(m, w, C, OC, &wv, &av, &WW, &NB);
    m->be->matmul_lowbit(m->be, out, inp, wv, av, bias, N, C, OC, m->packed->fmt, WW, NB);
}

void base_lowbit_matmul_t(wgt_model *m, wgt_view dinp, wgt_view dout, wgt_view w, uint32_t N, uint32_t C, uint32_t OC) {
    wgt_view wv, av;
    uint32_t WW, NB;
    packed_of(m, w, C, OC, &wv, &av, &WW, &NB);
    m->be->matmul_t_lowbit(m->be, dinp, dout, wv, av, N, C, OC, m->packed->fmt, WW, NB);
}

wgt_status base_lowbit_unpack(wgt_model *m) {
    if (!m->packed) return WGT_OK;
    wgt_view full;
    model_alloc(m, &full, m->n_base, "frozen_base", 1);
    if (m->alloc_st != WGT_OK) return m->alloc_st;
    size_t big = 1;
    for (int i = 0; i < m->np; i++)
        if (m->t[i].info.n > big) big = m->t[i].info.n;
    float *buf = wgt_malloc(big * sizeof *buf);
    wgt_status st = WGT_OK;
    for (int i = 0; i < m->np && st == WGT_OK; i++) {
        const model_param_info *p = &m->t[i].info;
        st = base_tensor_get(m, p, buf);
        if (st == WGT_OK) st = m->be->upload(m->be, model_subview(full, p->off, p->n), buf, p->n);
    }
    free(buf);
    if (st != WGT_OK) return st;
    m->base = full;  // (the packed buffers stay allocated until model_free)
    base_lowbit_free(m);
    base_lowbit_bind(m);
    return m->be->sync(m->be);
}
