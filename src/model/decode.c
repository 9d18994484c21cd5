// decode.c — generation with a key/value cache (decode.h): the forward of the model's families
// for new tokens only, as backend op calls that both backends run, reading the parameters of a
// wgt_model through its parameter table (by Hugging Face name) so that the families' own files
// stay as they are. Per layer and new token row:
//   gpt2   x = wte[tok] + wpe[p];  qkv = c_attn(layernorm(x));  append k, v;  attend;
//          res2 = x + c_proj(att);  x = res2 + mlp(layernorm(res2))
//   llama  x = embed[tok];  qkv = q|k|v_proj(rmsnorm(x)) (+ biases);  append rope(k), v;
//          attend with rope(q);  res2 = x + o_proj(att);  x = res2 + down(silu(gate) * up)
//          (qwen3: qkv = qk_norm(q|k|v_proj(...)), RMSNorm over each q and k head, before RoPE)
//   gemma3 x = embed[tok] * sqrt(C);  qkv = qk_norm(q|k|v_proj(rmsnorm(x)));  append rope_l(k), v;
//          attend with rope_l(q) (sliding layers: the last `window` keys, local RoPE base; full
//          layers: every key, global base);  res2 = x + rmsnorm(o_proj(att));
//          x = res2 + rmsnorm(down(gelu_tanh(gate) * up))   (every norm's weight held as 1 + w)
// then the final norm and the lm_head on the last row of each sequence only.
#include "model/decode.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/ops.h"  // cpu_rope_inv_freq, cpu_rope_tables: the host helpers for the tables
#include "model/model_impl.h"

typedef enum { DEC_GPT2, DEC_LLAMA, DEC_GEMMA3 } dec_family;

typedef struct {
    wgt_view ln1_w, ln1_b, qkv_w, qkv_b, o_w, o_b, ln2_w, ln2_b;
    wgt_view fc_w, fc_b, proj_w, proj_b;  // gpt2: c_fc, mlp.c_proj
    wgt_view gate_w, up_w, down_w;        // llama, gemma3
    wgt_view q_nw, k_nw;                  // qwen3, gemma3: per-head q / k norms [HS]
    wgt_view ln3_w, ln4_w;                // gemma3: pre_feedforward_layernorm, post_feedforward_layernorm
    int sliding;                          // gemma3: a sliding-window layer (local RoPE base)
    wgt_view kc, vc;                      // [batch, cap, KV] this layer's caches
} dec_layer;

struct model_decoder {
    wgt_model *m;
    wgt_backend *be;
    dec_family fam;
    int batch, cap, rows;  // rows: the activations' capacity (prefill chunk or batch)
    uint32_t C, F, NH, NKV, HS, QC, KV, QKV, V, L;  // QC = NH·HS (not C for qwen3 / gemma3 head sizes)
    float eps;
    int qk_norm;  // per-head q / k norms (qwen3, gemma3)
    wgt_view wte, wpe, lnf_w, lnf_b, lm_head;
    dec_layer *lay;
    wgt_view cos, sin;      // [cap, HS] (llama, gemma3's full layers)
    wgt_view cos_l, sin_l;  // [cap, HS] gemma3's sliding layers (rope_local_theta)
    wgt_view tokens, pos, x, ln, mean, rstd, qkv, qkv_pre, rstd_qk, att, tmp, res2, f1, f2, f3, last, lnl, logits;
    wgt_buf **bufs;
    int nbufs, cap_bufs;
    int *len;        // [batch] tokens cached per sequence
    uint32_t *hpos;  // host copy of the positions uploaded with each call
};

static wgt_status dalloc(model_decoder *d, wgt_view *v, size_t n, const char *label, int may_exceed) {
    if (!may_exceed && n > d->be->max_binding_elems)
        return wgt_fail(WGT_ERR_CONFIG, "decoding: '%s' needs %.1f MiB, above the device's %.1f MiB storage binding limit; "
                        "use fewer sequences or a shorter context", label, n * 4 / 1048576.0,
                        d->be->max_binding_elems * 4 / 1048576.0);
    wgt_buf *b = NULL;
    WGT_TRY(d->be->buf_alloc(d->be, &b, n, label));
    WGT_ASSERT(d->nbufs < d->cap_bufs, "decoding: more buffers than decoder_build counted");
    d->bufs[d->nbufs++] = b;
    *v = model_view(b, 0, n);
    return WGT_OK;
}

// The parameter named fmt (with the layer for a per-layer name), or no view when the model has
// no such tensor (an absent bias, a tied lm_head).
static wgt_view pview(const wgt_model *m, const char *fmt, int layer) {
    char name[64];
    snprintf(name, sizeof name, fmt, layer);
    for (int i = 0; i < m->np; i++)
        if (!strcmp(m->t[i].info.name, name))  // (under LoRA the table addresses the frozen base)
            return model_subview(model_base_frozen(m) ? m->base : m->params, m->t[i].info.off, m->t[i].info.n);
    return model_no_view();
}
static wgt_status need(wgt_view v, const char *fmt, int layer) {
    if (v.buf) return WGT_OK;
    char name[64];
    snprintf(name, sizeof name, fmt, layer);
    return wgt_fail(WGT_ERR_FORMAT, "decoding: the model has no tensor %s", name);
}
// Two tensors stored one after the other, as one view (LLaMA's packed q | k | v).
static wgt_view joined(wgt_view a, wgt_view b) {
    WGT_ASSERT(a.buf == b.buf && b.off == a.off + a.n, "decoding: the q, k and v projections are not packed");
    return model_view(a.buf, a.off, a.n + b.n);
}

// The activations' rows: a prefill runs in chunks of up to 512 tokens (tests lower it with
// WGTRAIN_TEST_DECODE_CHUNK to cover the chunking on small models), a step takes one per sequence.
static void rows_of(const model_config *c, int batch, int max_len, int *rows) {
    int chunk = max_len < 512 ? max_len : 512;
    const char *tc = getenv("WGTRAIN_TEST_DECODE_CHUNK");
    if (tc) {  // a whole number in [1, chunk); any other text leaves the chunk as it is
        char *end;
        long v = strtol(tc, &end, 10);
        if (end != tc && !*end && v >= 1 && v < chunk) chunk = (int)v;
    }
    *rows = chunk > batch ? chunk : batch;
}

void model_decoder_bytes(const model_config *c, int batch, int max_len, uint64_t *cache, uint64_t *acts) {
    const uint64_t HS = (uint64_t)model_head_size(c), NKV = c->n_kv_heads ? (uint64_t)c->n_kv_heads : (uint64_t)c->n_head;
    const uint64_t KV = NKV * HS, C = (uint64_t)c->d_model, F = (uint64_t)c->d_ff, QC = (uint64_t)c->n_head * HS,
                   QKV = QC + 2 * KV;
    const int gpt = !strcmp(c->arch, "gpt2"), gemma = !strcmp(c->arch, "gemma3_text"), qkn = gemma || c->qk_norm;
    int rows;
    rows_of(c, batch, max_len, &rows);
    *cache = 2ull * (uint64_t)c->n_layer * (uint64_t)batch * (uint64_t)max_len * KV * 4;
    // per row: x, ln, tmp, res2 (C), att (QC), qkv (+ qkv_pre and the head norms' rstd with qk norms),
    // f1, f2 (and f3 but GPT-2's), mean, rstd, token; per sequence: last, lnl, logits, position;
    // the RoPE tables (none in GPT-2, two kinds in Gemma-3): what decoder_build allocates
    *acts = ((uint64_t)rows * (4 * C + QC + QKV + (gpt ? 2 : 3) * F + 3 + (qkn ? QKV + (uint64_t)c->n_head + NKV : 0)) +
             (uint64_t)batch * (2 * C + (uint64_t)c->vocab + 1) + (gpt ? 0ull : gemma ? 4ull : 2ull) * (uint64_t)max_len * HS) * 4;
}

// The RoPE tables [cap, HS] of base theta (with the config's scaling for LLaMA), as the families' own.
static wgt_status rope_upload(model_decoder *d, wgt_view *cos, wgt_view *sin, double theta, int scaling) {
    const model_config *c = &d->m->c;
    const size_t n = (size_t)d->cap * d->HS;
    WGT_TRY(dalloc(d, cos, n, "dec_rope_cos", 0));
    WGT_TRY(dalloc(d, sin, n, "dec_rope_sin", 0));
    float *ct = wgt_malloc(n * sizeof(float)), *sn = wgt_malloc(n * sizeof(float));
    double *inv = wgt_malloc(d->HS / 2 * sizeof(double));
    cpu_rope_inv_freq(inv, d->HS, theta, scaling, c->rope_factor, c->rope_low_freq, c->rope_high_freq, c->rope_orig_max_pos);
    cpu_rope_tables(ct, sn, (uint32_t)d->cap, d->HS, inv);
    wgt_status st = d->be->upload(d->be, *cos, ct, n);
    if (st == WGT_OK) st = d->be->upload(d->be, *sin, sn, n);
    free(ct);
    free(sn);
    free(inv);
    return st;
}

static wgt_status decoder_build(model_decoder *d, int batch, int max_len) {
    wgt_model *m = d->m;
    const model_config *c = &m->c;
    if (!strcmp(c->arch, "gpt2")) d->fam = DEC_GPT2;
    else if (!strcmp(c->arch, "llama") || !strcmp(c->arch, "mistral") || !strcmp(c->arch, "qwen2") ||
             !strcmp(c->arch, "qwen3"))
        d->fam = DEC_LLAMA;
    else if (!strcmp(c->arch, "gemma3_text")) d->fam = DEC_GEMMA3;
    else
        return wgt_fail(WGT_ERR_CONFIG, "cached decoding does not cover the %s family yet (it covers gpt2, llama, "
                        "mistral, qwen2, qwen3 and gemma3_text)", c->arch);
    if (m->prec != MODEL_PREC_F32)
        return wgt_fail(WGT_ERR_CONFIG, "cached decoding reads an f32 model; open the model with f32 precision");
    if (batch < 1 || batch > 4096) return wgt_fail(WGT_ERR_ARG, "decoding: the batch must be 1..4096, got %d", batch);
    if (max_len < 1 || max_len > c->max_seq)
        return wgt_fail(WGT_ERR_ARG, "decoding: the context must be 1..%d tokens (the model's maximum sequence length), "
                        "got %d", c->max_seq, max_len);
    d->batch = batch;
    d->cap = max_len;
    rows_of(c, batch, max_len, &d->rows);
    d->C = (uint32_t)c->d_model, d->F = (uint32_t)c->d_ff, d->NH = (uint32_t)c->n_head, d->V = (uint32_t)c->vocab;
    d->L = (uint32_t)c->n_layer;
    d->NKV = d->fam == DEC_GPT2 ? d->NH : (uint32_t)c->n_kv_heads;
    d->HS = (uint32_t)model_head_size(c), d->QC = d->NH * d->HS, d->KV = d->NKV * d->HS, d->QKV = d->QC + 2 * d->KV;
    d->eps = (float)c->rms_eps;
    d->qk_norm = d->fam == DEC_GEMMA3 || (d->fam == DEC_LLAMA && c->qk_norm);
    if (d->HS > 256) return wgt_fail(WGT_ERR_CONFIG, "decoding: head size %u is above 256", d->HS);
    // parameters
    d->lay = wgt_calloc((size_t)c->n_layer, sizeof *d->lay);
    if (d->fam == DEC_GPT2) {
        d->wte = pview(m, "wte.weight", 0), d->wpe = pview(m, "wpe.weight", 0);
        d->lnf_w = pview(m, "ln_f.weight", 0), d->lnf_b = pview(m, "ln_f.bias", 0);
        d->lm_head = d->wte;
        WGT_TRY(need(d->wte, "wte.weight", 0));
        WGT_TRY(need(d->wpe, "wpe.weight", 0));
        for (int l = 0; l < c->n_layer; l++) {
            dec_layer *y = &d->lay[l];
            y->ln1_w = pview(m, "h.%d.ln_1.weight", l), y->ln1_b = pview(m, "h.%d.ln_1.bias", l);
            y->qkv_w = pview(m, "h.%d.attn.c_attn.weight", l), y->qkv_b = pview(m, "h.%d.attn.c_attn.bias", l);
            y->o_w = pview(m, "h.%d.attn.c_proj.weight", l), y->o_b = pview(m, "h.%d.attn.c_proj.bias", l);
            y->ln2_w = pview(m, "h.%d.ln_2.weight", l), y->ln2_b = pview(m, "h.%d.ln_2.bias", l);
            y->fc_w = pview(m, "h.%d.mlp.c_fc.weight", l), y->fc_b = pview(m, "h.%d.mlp.c_fc.bias", l);
            y->proj_w = pview(m, "h.%d.mlp.c_proj.weight", l), y->proj_b = pview(m, "h.%d.mlp.c_proj.bias", l);
            WGT_TRY(need(y->qkv_w, "h.%d.attn.c_attn.weight", l));
        }
    } else {
        d->wte = pview(m, "model.embed_tokens.weight", 0);
        d->lnf_w = pview(m, "model.norm.weight", 0);
        d->lm_head = c->tie_embeddings ? d->wte : pview(m, "lm_head.weight", 0);
        WGT_TRY(need(d->wte, "model.embed_tokens.weight", 0));
        WGT_TRY(need(d->lm_head, "lm_head.weight", 0));
        for (int l = 0; l < c->n_layer; l++) {
            dec_layer *y = &d->lay[l];
            const char *q = "model.layers.%d.self_attn.q_proj.weight";
            wgt_view qw = pview(m, q, l), kw = pview(m, "model.layers.%d.self_attn.k_proj.weight", l),
                     vw = pview(m, "model.layers.%d.self_attn.v_proj.weight", l);
            WGT_TRY(need(qw, q, l));
            y->qkv_w = joined(joined(qw, kw), vw);
            if (c->qkv_bias)
                y->qkv_b = joined(joined(pview(m, "model.layers.%d.self_attn.q_proj.bias", l),
                                         pview(m, "model.layers.%d.self_attn.k_proj.bias", l)),
                                  pview(m, "model.layers.%d.self_attn.v_proj.bias", l));
            y->o_w = pview(m, "model.layers.%d.self_attn.o_proj.weight", l);
            y->o_b = pview(m, "model.layers.%d.self_attn.o_proj.bias", l);  // none without o_bias
            y->ln1_w = pview(m, "model.layers.%d.input_layernorm.weight", l);
            y->ln2_w = pview(m, "model.layers.%d.post_attention_layernorm.weight", l);
            y->gate_w = pview(m, "model.layers.%d.mlp.gate_proj.weight", l);
            y->up_w = pview(m, "model.layers.%d.mlp.up_proj.weight", l);
            y->down_w = pview(m, "model.layers.%d.mlp.down_proj.weight", l);
            if (d->qk_norm) {
                y->q_nw = pview(m, "model.layers.%d.self_attn.q_norm.weight", l);
                y->k_nw = pview(m, "model.layers.%d.self_attn.k_norm.weight", l);
                WGT_TRY(need(y->q_nw, "model.layers.%d.self_attn.q_norm.weight", l));
                WGT_TRY(need(y->k_nw, "model.layers.%d.self_attn.k_norm.weight", l));
            }
            if (d->fam == DEC_GEMMA3) {
                y->ln3_w = pview(m, "model.layers.%d.pre_feedforward_layernorm.weight", l);
                y->ln4_w = pview(m, "model.layers.%d.post_feedforward_layernorm.weight", l);
                WGT_TRY(need(y->ln3_w, "model.layers.%d.pre_feedforward_layernorm.weight", l));
                WGT_TRY(need(y->ln4_w, "model.layers.%d.post_feedforward_layernorm.weight", l));
                // as gemma3.c: every sliding_pattern-th layer (counting from 1) is full attention
                y->sliding = c->sliding_pattern > 1 && (l + 1) % c->sliding_pattern;
            }
        }
    }
    // buffers: 2 per layer, 22 others at most
    d->cap_bufs = 2 * c->n_layer + 22;
    d->bufs = wgt_calloc((size_t)d->cap_bufs, sizeof *d->bufs);
    const size_t R = (size_t)d->rows, B = (size_t)batch, ncache = B * (size_t)max_len * d->KV;
    for (int l = 0; l < c->n_layer; l++) {
        WGT_TRY(dalloc(d, &d->lay[l].kc, ncache, "kv_cache_k", 0));
        WGT_TRY(dalloc(d, &d->lay[l].vc, ncache, "kv_cache_v", 0));
    }
    WGT_TRY(dalloc(d, &d->tokens, R, "dec_tokens", 0));
    WGT_TRY(dalloc(d, &d->pos, B, "dec_pos", 0));
    WGT_TRY(dalloc(d, &d->x, R * d->C, "dec_x", 0));
    WGT_TRY(dalloc(d, &d->ln, R * d->C, "dec_ln", 0));
    WGT_TRY(dalloc(d, &d->mean, R, "dec_mean", 0));
    WGT_TRY(dalloc(d, &d->rstd, R, "dec_rstd", 0));
    WGT_TRY(dalloc(d, &d->qkv, R * d->QKV, "dec_qkv", 0));
    if (d->qk_norm) {
        WGT_TRY(dalloc(d, &d->qkv_pre, R * d->QKV, "dec_qkv_pre", 0));
        WGT_TRY(dalloc(d, &d->rstd_qk, R * (d->NH + d->NKV), "dec_rstd_qk", 0));
    }
    WGT_TRY(dalloc(d, &d->att, R * d->QC, "dec_att", 0));
    WGT_TRY(dalloc(d, &d->tmp, R * d->C, "dec_tmp", 0));
    WGT_TRY(dalloc(d, &d->res2, R * d->C, "dec_res2", 0));
    WGT_TRY(dalloc(d, &d->f1, R * d->F, "dec_f1", 0));
    WGT_TRY(dalloc(d, &d->f2, R * d->F, "dec_f2", 0));
    if (d->fam != DEC_GPT2) WGT_TRY(dalloc(d, &d->f3, R * d->F, "dec_f3", 0));
    WGT_TRY(dalloc(d, &d->last, B * d->C, "dec_last", 0));
    WGT_TRY(dalloc(d, &d->lnl, B * d->C, "dec_lnl", 0));
    WGT_TRY(dalloc(d, &d->logits, B * d->V, "dec_logits", 1));  // the lm_head matmul splits it
    if (d->fam == DEC_LLAMA) {
        WGT_TRY(rope_upload(d, &d->cos, &d->sin, c->rope_theta, c->rope_scaling));
    } else if (d->fam == DEC_GEMMA3) {  // default RoPE of each base, as gemma3.c
        WGT_TRY(rope_upload(d, &d->cos, &d->sin, c->rope_theta, WGT_ROPE_DEFAULT));
        WGT_TRY(rope_upload(d, &d->cos_l, &d->sin_l, c->rope_local_theta, WGT_ROPE_DEFAULT));
    }
    d->len = wgt_calloc(B, sizeof *d->len);
    d->hpos = wgt_calloc(B, sizeof *d->hpos);
    return d->be->sync(d->be);
}

wgt_status model_decoder_init(model_decoder **out, wgt_model *m, int batch, int max_len) {
    *out = NULL;
    model_decoder *d = wgt_calloc(1, sizeof *d);
    d->m = m;
    d->be = m->be;
    wgt_status st = decoder_build(d, batch, max_len);
    if (st != WGT_OK) {
        model_decoder_free(d);
        return st;
    }
    *out = d;
    return WGT_OK;
}

void model_decoder_free(model_decoder *d) {
    if (!d) return;
    for (int i = 0; i < d->nbufs; i++) d->be->buf_free(d->be, d->bufs[i]);
    free(d->bufs);
    free(d->lay);
    free(d->len);
    free(d->hpos);
    free(d);
}

int model_decoder_batch(const model_decoder *d) { return d->batch; }
int model_decoder_max_len(const model_decoder *d) { return d->cap; }
int model_decoder_len(const model_decoder *d, int b) {
    WGT_ASSERT(b >= 0 && b < d->batch, "decoder: no such sequence");
    return d->len[b];
}
void model_decoder_truncate(model_decoder *d, int b, int len) {
    WGT_ASSERT(b >= 0 && b < d->batch && len >= 0 && len <= d->len[b], "decoder: truncation past the sequence");
    d->len[b] = len;
}

// The forward of nb sequences x nt new tokens each (rows nb·nt of the activations), whose caches
// are kc/vc views of nb sequences and whose positions are pos (nb of them, uploaded).
static void forward_rows(model_decoder *d, uint32_t nb, uint32_t nt, size_t seq0) {
    wgt_backend *be = d->be;
    const uint32_t N = nb * nt, C = d->C, F = d->F, cap = (uint32_t)d->cap;
    const size_t nc = (size_t)N * C, nf = (size_t)N * F, per_seq = (size_t)cap * d->KV;
    const wgt_view pos = model_subview(d->pos, seq0, nb), tok = model_subview(d->tokens, 0, N);
    const wgt_view x = model_subview(d->x, 0, nc), ln = model_subview(d->ln, 0, nc),
                   tmp = model_subview(d->tmp, 0, nc), res2 = model_subview(d->res2, 0, nc),
                   qkv = model_subview(d->qkv, 0, (size_t)N * d->QKV), mean = model_subview(d->mean, 0, N),
                   rstd = model_subview(d->rstd, 0, N), f1 = model_subview(d->f1, 0, nf), f2 = model_subview(d->f2, 0, nf);
    const int gpt = d->fam == DEC_GPT2, gemma = d->fam == DEC_GEMMA3;
    const wgt_view none = model_no_view();
    be->decode_embedding(be, x, tok, d->wte, gpt ? d->wpe : none, pos, nb, nt, C, d->V, cap);
    if (gemma) be->scale_inplace(be, x, nc, (float)sqrt((double)C));  // as gemma3.c: sqrt(hidden) rounded to f32
    for (uint32_t l = 0; l < d->L; l++) {
        const dec_layer *y = &d->lay[l];
        const wgt_view kc = model_subview(y->kc, seq0 * per_seq, nb * per_seq),
                       vc = model_subview(y->vc, seq0 * per_seq, nb * per_seq);
        // gemma3's sliding layers: the local RoPE base and the window; its full layers none
        const wgt_view cosv = gpt ? none : y->sliding ? d->cos_l : d->cos, sinv = gpt ? none : y->sliding ? d->sin_l : d->sin;
        const uint32_t window = gpt || (gemma && !y->sliding) ? 0 : (uint32_t)d->m->c.sliding_window;
        if (gpt) be->layernorm_forward(be, ln, mean, rstd, x, y->ln1_w, y->ln1_b, N, C);
        else be->rmsnorm_forward(be, ln, rstd, x, y->ln1_w, N, C, d->eps);
        if (d->qk_norm) {  // RMSNorm over each q and k head before RoPE (v copied through)
            const wgt_view pre = model_subview(d->qkv_pre, 0, (size_t)N * d->QKV);
            be->matmul(be, pre, ln, y->qkv_w, y->qkv_b, N, C, d->QKV);
            be->qk_norm_forward(be, qkv, model_subview(d->rstd_qk, 0, (size_t)N * (d->NH + d->NKV)), pre, y->q_nw, y->k_nw,
                                nb, nt, d->NH, d->NKV, d->HS, d->eps, 0.0f);
        } else {
            be->matmul(be, qkv, ln, y->qkv_w, y->qkv_b, N, C, d->QKV);
        }
        const wgt_view attq = model_subview(d->att, 0, (size_t)N * d->QC);
        be->kv_cache_append(be, kc, vc, qkv, cosv, sinv, pos, nb, nt, d->NH, d->NKV, d->HS, cap);
        be->decode_attention(be, attq, qkv, kc, vc, cosv, sinv, pos, nb, nt, d->NH, d->NKV, d->HS, cap, window);
        be->matmul(be, tmp, attq, y->o_w, y->o_b, N, d->QC, C);
        if (gemma) {  // the post-attention norm on the branch before its residual add
            be->rmsnorm_forward(be, ln, rstd, tmp, y->ln2_w, N, C, d->eps);
            be->residual_forward(be, res2, x, ln, nc);
        } else {
            be->residual_forward(be, res2, x, tmp, nc);
        }
        if (gemma) {  // GeGLU with the tanh GeLU, then the post-feedforward norm
            const wgt_view f3 = model_subview(d->f3, 0, nf);
            be->rmsnorm_forward(be, ln, rstd, res2, y->ln3_w, N, C, d->eps);
            be->matmul(be, f1, ln, y->gate_w, none, N, C, F);
            be->matmul(be, f2, ln, y->up_w, none, N, C, F);
            be->geglu_combine(be, f3, f1, f2, nf);
            be->matmul(be, tmp, f3, y->down_w, none, N, F, C);
            be->rmsnorm_forward(be, ln, rstd, tmp, y->ln4_w, N, C, d->eps);
            be->residual_forward(be, x, res2, ln, nc);
            continue;
        }
        if (gpt) {
            be->layernorm_forward(be, ln, mean, rstd, res2, y->ln2_w, y->ln2_b, N, C);
            be->matmul(be, f1, ln, y->fc_w, y->fc_b, N, C, F);
            be->gelu_inplace(be, f1, nf);
            be->matmul(be, tmp, f1, y->proj_w, y->proj_b, N, F, C);
        } else {
            const wgt_view f3 = model_subview(d->f3, 0, nf);
            be->rmsnorm_forward(be, ln, rstd, res2, y->ln2_w, N, C, d->eps);
            be->matmul(be, f1, ln, y->gate_w, none, N, C, F);
            be->matmul(be, f2, ln, y->up_w, none, N, C, F);
            be->swiglu_combine(be, f3, f1, f2, nf);
            be->matmul(be, tmp, f3, y->down_w, none, N, F, C);
        }
        be->residual_forward(be, x, res2, tmp, nc);
    }
}

// Final norm and lm_head of the n rows of src (d->last, or the step's rows of d->x); logits
// [n, V] to the host.
static wgt_status head_rows(model_decoder *d, wgt_view src, uint32_t n, float *logits) {
    wgt_backend *be = d->be;
    const size_t nc = (size_t)n * d->C;
    const wgt_view last = model_subview(src, 0, nc), lnl = model_subview(d->lnl, 0, nc),
                   mean = model_subview(d->mean, 0, n), rstd = model_subview(d->rstd, 0, n),
                   lg = model_subview(d->logits, 0, (size_t)n * d->V);
    if (d->fam == DEC_GPT2) be->layernorm_forward(be, lnl, mean, rstd, last, d->lnf_w, d->lnf_b, n, d->C);
    else be->rmsnorm_forward(be, lnl, rstd, last, d->lnf_w, n, d->C, d->eps);
    be->matmul(be, lg, lnl, d->lm_head, model_no_view(), n, d->C, d->V);
    return logits ? be->download(be, logits, lg, (size_t)n * d->V) : be->sync(be);
}

static wgt_status check_tokens(const model_decoder *d, const int32_t *tokens, int n) {
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= d->V)
            return wgt_fail(WGT_ERR_ARG, "decoding: token #%d has id %d, outside the model's vocabulary 0..%u", i + 1,
                            tokens[i], d->V - 1);
    return WGT_OK;
}

wgt_status model_decoder_prefill(model_decoder *d, int b, const int32_t *tokens, int n, float *logits) {
    WGT_ASSERT(b >= 0 && b < d->batch && n >= 1, "decoder: bad prefill");
    if (n > d->cap - d->len[b])
        return wgt_fail(WGT_ERR_ARG, "the context is full: %d tokens cached and %d more do not fit in the %d the decoder "
                        "was made for (a longer context needs a larger --max-context, up to the model's %d)",
                        d->len[b], n, d->cap, d->m->c.max_seq);
    WGT_TRY(check_tokens(d, tokens, n));
    wgt_backend *be = d->be;
    for (int done = 0; done < n;) {
        const int nt = n - done < d->rows ? n - done : d->rows;
        WGT_TRY(be->upload(be, model_subview(d->tokens, 0, (size_t)nt), tokens + done, (size_t)nt));
        d->hpos[b] = (uint32_t)d->len[b];
        WGT_TRY(be->upload(be, model_subview(d->pos, (size_t)b, 1), &d->hpos[b], 1));
        forward_rows(d, 1, (uint32_t)nt, (size_t)b);
        d->len[b] += nt;
        done += nt;
        if (done == n) be->copy(be, model_subview(d->last, 0, d->C), model_subview(d->x, (size_t)(nt - 1) * d->C, d->C), d->C);
    }
    return head_rows(d, d->last, 1, logits);
}

wgt_status model_decoder_step(model_decoder *d, int nb, const int32_t *tokens, float *logits) {
    WGT_ASSERT(nb >= 1 && nb <= d->batch && nb <= d->rows, "decoder: bad step");
    for (int b = 0; b < nb; b++)
        if (d->len[b] >= d->cap)
            return wgt_fail(WGT_ERR_ARG, "the context is full: sequence %d has the %d tokens the decoder was made for (a "
                            "longer context needs a larger --max-context, up to the model's %d)", b + 1, d->cap,
                            d->m->c.max_seq);
    WGT_TRY(check_tokens(d, tokens, nb));
    wgt_backend *be = d->be;
    for (int b = 0; b < nb; b++) d->hpos[b] = (uint32_t)d->len[b];
    WGT_TRY(be->upload(be, model_subview(d->tokens, 0, (size_t)nb), tokens, (size_t)nb));
    WGT_TRY(be->upload(be, model_subview(d->pos, 0, (size_t)nb), d->hpos, (size_t)nb));
    forward_rows(d, (uint32_t)nb, 1, 0);
    for (int b = 0; b < nb; b++) d->len[b]++;
    return head_rows(d, d->x, (uint32_t)nb, logits);  // (the rows are x's first nb)
}
