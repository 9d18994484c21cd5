// gemma3.c — Gemma-3's text model (Hugging Face Gemma3ForCausalLM, model_type "gemma3_text":
// Gemma-3 270M and 1B) on the model interface. What differs from LLaMA (llama.c):
//   - the token embedding is multiplied by sqrt(hidden) (as f32) before the first block;
//   - every RMSNorm multiplies by 1 + w; the weights are held as 1 + w (MODEL_T_HF_PLUS_ONE:
//     files hold w, loading adds 1 in f32 as transformers' forward does), so the plain ops serve;
//   - four norms a block: input_layernorm before attention, post_attention_layernorm on the
//     attention's output before its residual add, pre_feedforward_layernorm before the MLP,
//     post_feedforward_layernorm on the MLP's output before its add;
//   - q_norm / k_norm over each head (qk_norm_forward), head_dim independent of hidden / heads
//     (256 in the released models; the attention runs its row kernels where no tile fits);
//   - the MLP is GeGLU with the tanh GeLU: down(gelu(gate(x)) * up(x));
//   - layers alternate sliding-window and full attention (every sliding_pattern-th layer is
//     full), each kind with its own RoPE base (rope_local_theta, rope_theta); a sliding layer
//     passes sliding_window as the attention's window (query t sees keys t - window + 1 .. t).
// Attention scores are scaled by query_pre_attn_scalar^-0.5, which the released configs set to
// head_dim (the attention's own scale); another value is refused by name, as are logit
// soft-capping and RoPE scaling (none in the 270M and 1B configs).
// Per block, with x the residual stream:
//   h = x + post_attention_norm(o_proj(attention(rope(qk_norm(q|k|v_proj(input_norm(x)))))))
//   out = h + post_ffn_norm(down_proj(gelu(gate_proj(pre_ffn_norm(h))) * up_proj(pre_ffn_norm(h))))
// and logits = lm_head(norm(x_L)), lm_head tied to the embedding unless the config says not.
// --recompute attention / block share and recompute the activations as llama.c does
// (docs/memory.md).
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/token_id.h"
#include "backend/cpu/ops.h"  // cpu_rope_inv_freq, cpu_rope_tables
#include "model/model_impl.h"

#define HS_OF(c) model_head_size(c)
#define RMS_EPS_MAX 0.5

// ------------------------------------------------------------------ config

static const model_config_field config_fields[] = {
    {"n_kv_heads", offsetof(model_config, n_kv_heads), MODEL_CF_INT, 4096, 0},
    {"rope_theta", offsetof(model_config, rope_theta), MODEL_CF_DOUBLE, 1e12, 0},
    {"rms_eps", offsetof(model_config, rms_eps), MODEL_CF_DOUBLE, RMS_EPS_MAX, 0},
    {"tie_embeddings", offsetof(model_config, tie_embeddings), MODEL_CF_INT, 1, 0},
    {"head_dim", offsetof(model_config, head_dim), MODEL_CF_INT, 4096, 0},
    {"sliding_window", offsetof(model_config, sliding_window), MODEL_CF_INT, 1 << 24, 0},
    {"rope_local_theta", offsetof(model_config, rope_local_theta), MODEL_CF_DOUBLE, 1e12, 0},
    {"sliding_pattern", offsetof(model_config, sliding_pattern), MODEL_CF_INT, 256, 0},
};

// Layer l has sliding-window attention (else full).
static int is_sliding(const model_config *c, int l) { return c->sliding_pattern > 1 && (l + 1) % c->sliding_pattern; }

static wgt_status config_check(const model_config *c) {
    if (c->n_kv_heads < 1 || c->n_head % c->n_kv_heads)
        return wgt_fail(WGT_ERR_CONFIG, "n_kv_heads (%d) must divide n_head (%d)", c->n_kv_heads, c->n_head);
    if (HS_OF(c) % 2)
        return wgt_fail(WGT_ERR_CONFIG, "head size %d is odd; RoPE rotates pairs of dimensions", HS_OF(c));
    if (c->head_dim && c->n_head * c->head_dim == c->d_model)
        return wgt_fail(WGT_ERR_CONFIG, "head_dim %d equals d_model/n_head; leave it 0", c->head_dim);
    if (!(c->rope_theta > 0) || !(c->rope_local_theta > 0))
        return wgt_fail(WGT_ERR_CONFIG, "rope_theta and rope_local_theta must be above 0, got %g and %g", c->rope_theta,
                        c->rope_local_theta);
    if (!(c->rms_eps >= 1e-30 && c->rms_eps <= RMS_EPS_MAX))
        return wgt_fail(WGT_ERR_CONFIG, "rms_eps must be in [1e-30, %g], got %g", RMS_EPS_MAX, c->rms_eps);
    if (c->tie_embeddings != 0 && c->tie_embeddings != 1)
        return wgt_fail(WGT_ERR_CONFIG, "tie_embeddings must be 0 or 1, got %d", c->tie_embeddings);
    if (c->sliding_pattern < 1)
        return wgt_fail(WGT_ERR_CONFIG, "sliding_pattern must be at least 1 (1: every layer full attention), got %d",
                        c->sliding_pattern);
    if (c->sliding_window < 1)
        return wgt_fail(WGT_ERR_CONFIG, "sliding_window must be at least 1, got %d", c->sliding_window);
    return WGT_OK;
}

// Gemma3TextConfig's defaults where a field is still 0
static void defaults(model_config *c) {
    if (!c->n_kv_heads) c->n_kv_heads = c->n_head;
    if (!c->rope_theta) c->rope_theta = 1e6;
    if (!c->rope_local_theta) c->rope_local_theta = 1e4;
    if (!c->rms_eps) c->rms_eps = 1e-6;
    if (!c->sliding_pattern) c->sliding_pattern = 6;
    if (!c->sliding_window) c->sliding_window = 4096;
}

// ------------------------------------------------------------------ parameters

typedef struct {
    wgt_view q_w, k_w, v_w;  // [Q, C], [KV, C], [KV, C]: packed, one [Q + 2 KV, C] matrix
    wgt_view o_w;            // [C, Q]
    wgt_view q_nw, k_nw;     // [HS] q_norm, k_norm (1 + w)
    wgt_view gate_w, up_w;   // [F, C]
    wgt_view down_w;         // [C, F]
    wgt_view ln_in, ln_pa;   // [C] input_layernorm, post_attention_layernorm (1 + w)
    wgt_view ln_pf, ln_pff;  // [C] pre_feedforward_layernorm, post_feedforward_layernorm (1 + w)
} block_params;

typedef struct {
    wgt_view embed;    // [V, C] (and the lm_head when tied)
    wgt_view norm_w;   // [C] (1 + w)
    wgt_view lm_head;  // [V, C]; empty when tied
} top_params;

enum {
    D = MODEL_T_DECAY,
    X = MODEL_T_MAY_EXCEED_BINDING,
    E = MODEL_T_EMBEDDING,
    PK = MODEL_T_PACKED,
    P1 = MODEL_T_HF_PLUS_ONE,
};
#define TOP(f) offsetof(top_params, f)
#define BLK(f) offsetof(block_params, f)
// Gemma3ForCausalLM's state dict. Matrices and the embedding N(0, 0.02), decayed; norm weights
// w = 0 at init (held as 1 + w = 1), not decayed.
static const model_tensor_desc tensors[] = {
    {"model.embed_tokens.weight", 0, {DIM_V, DIM_C}, D | E | X, MODEL_INIT_NORMAL, TOP(embed)},
    {"model.layers.%d.self_attn.q_proj.weight", 1, {DIM_Q, DIM_C}, D | X, MODEL_INIT_NORMAL, BLK(q_w)},
    {"model.layers.%d.self_attn.k_proj.weight", 1, {DIM_KV, DIM_C}, D | X | PK, MODEL_INIT_NORMAL, BLK(k_w)},
    {"model.layers.%d.self_attn.v_proj.weight", 1, {DIM_KV, DIM_C}, D | X | PK, MODEL_INIT_NORMAL, BLK(v_w)},
    {"model.layers.%d.self_attn.o_proj.weight", 1, {DIM_C, DIM_Q}, D | X, MODEL_INIT_NORMAL, BLK(o_w)},
    {"model.layers.%d.self_attn.q_norm.weight", 1, {DIM_HS}, P1, MODEL_INIT_ONES, BLK(q_nw)},
    {"model.layers.%d.self_attn.k_norm.weight", 1, {DIM_HS}, P1, MODEL_INIT_ONES, BLK(k_nw)},
    {"model.layers.%d.mlp.gate_proj.weight", 1, {DIM_F, DIM_C}, D | X, MODEL_INIT_NORMAL, BLK(gate_w)},
    {"model.layers.%d.mlp.up_proj.weight", 1, {DIM_F, DIM_C}, D | X, MODEL_INIT_NORMAL, BLK(up_w)},
    {"model.layers.%d.mlp.down_proj.weight", 1, {DIM_C, DIM_F}, D | X, MODEL_INIT_NORMAL, BLK(down_w)},
    {"model.layers.%d.input_layernorm.weight", 1, {DIM_C}, P1, MODEL_INIT_ONES, BLK(ln_in)},
    {"model.layers.%d.post_attention_layernorm.weight", 1, {DIM_C}, P1, MODEL_INIT_ONES, BLK(ln_pa)},
    {"model.layers.%d.pre_feedforward_layernorm.weight", 1, {DIM_C}, P1, MODEL_INIT_ONES, BLK(ln_pf)},
    {"model.layers.%d.post_feedforward_layernorm.weight", 1, {DIM_C}, P1, MODEL_INIT_ONES, BLK(ln_pff)},
    {"model.norm.weight", 0, {DIM_C}, P1, MODEL_INIT_ONES, TOP(norm_w)},
    {"lm_head.weight", 0, {DIM_V, DIM_C}, D | X, MODEL_INIT_NORMAL, TOP(lm_head)},  // absent when tied
};

static int is_lm_head(const model_tensor_desc *d) { return !d->per_layer && d->field == TOP(lm_head); }
static const char *tensor_absent(const model_config *c, const model_tensor_desc *d) {
    if (is_lm_head(d) && c->tie_embeddings)
        return "it ties lm_head to the token embedding (tie_word_embeddings true in its config.json)";
    return NULL;
}
static int absent_copy_of(const model_config *c, const model_tensor_desc *d) {
    for (int i = 0; is_lm_head(d) && i < (int)(sizeof tensors / sizeof tensors[0]); i++)
        if (!tensors[i].per_layer && tensors[i].field == TOP(embed)) return i;
    return -1;
}

static top_params *P(wgt_model *m) { return m->pg; }
static top_params *G(wgt_model *m) { return m->gg; }
static block_params *PL(wgt_model *m, int l) { return (block_params *)m->pl + l; }
static block_params *GL(wgt_model *m, int l) { return (block_params *)m->gl + l; }

static wgt_view qkv_of(const block_params *b) {
    WGT_ASSERT(b->k_w.buf == b->q_w.buf && b->k_w.off == b->q_w.off + b->q_w.n && b->v_w.off == b->k_w.off + b->k_w.n,
               "the q, k and v projections are not packed");
    return model_view(b->q_w.buf, b->q_w.off, b->q_w.n + b->k_w.n + b->v_w.n);
}
static wgt_view lm_head_of(const wgt_model *m, const top_params *t) { return m->c.tie_embeddings ? t->embed : t->lm_head; }

// ------------------------------------------------------------------ activations

typedef struct {
    wgt_view res;                // [B,T,C] the block's input
    wgt_view ln1, rstd1;         // [B,T,C], [B,T] input_layernorm
    wgt_view qkv_pre, rstd_qk;   // [B,T,Q+2KV] the projection (f32), [B,T,NH+NKV] its head norms
    wgt_view qkv;                // [B,T,Q+2KV] normed and rotated (what attention saw)
    wgt_view atty, lse;          // [B,T,Q], [B,NH,T]
    wgt_view ao, rstd_pa;        // [B,T,C] o_proj's output (f32), [B,T] its post_attention_layernorm
    wgt_view res2;               // [B,T,C]
    wgt_view ln2, rstd2;         // [B,T,C], [B,T] pre_feedforward_layernorm
    wgt_view gate, up, hid;      // [B,T,F]
    wgt_view mo, rstd_pff;       // [B,T,C] down_proj's output (f32), [B,T] its post_feedforward_layernorm
} block_acts;

typedef struct {
    wgt_view res_final, lnf, rstdf;
    wgt_view x_c, x_f, x_q;      // f16 model only: f32 scratch of the f16 tensors' producers
    wgt_view scratch_c;          // [B,T,C] a branch's output before its residual add
    wgt_view dres, dtmp, dbr;    // [B,T,C], [B,T,max(C,Q)], [B,T,C]: dbr a branch's pre-norm gradient
    wgt_view dqkv, dqkv_pre;     // [B,T,Q+2KV]
    wgt_view dhid, dgate, dup;   // [B,T,F]
    wgt_view zero_pos, dpos;     // [T,C] embedding_forward's zero positions, its ignored gradient
    wgt_view cos_g, sin_g;       // [T,HS] RoPE of the full-attention layers (rope_theta)
    wgt_view cos_l, sin_l;       // [T,HS] of the sliding layers (rope_local_theta)
    block_acts h[];
} acts;

static acts *A(wgt_model *m) { return m->acts; }

static wgt_status upload_rope(wgt_model *m, wgt_view cos, wgt_view sin, double theta) {
    const size_t T = m->T, HS = HS_OF(&m->c);
    float *ct = wgt_malloc(T * HS * sizeof(float)), *st_ = wgt_malloc(T * HS * sizeof(float));
    double *inv_freq = wgt_malloc(HS / 2 * sizeof(double));
    cpu_rope_inv_freq(inv_freq, (uint32_t)HS, theta, WGT_ROPE_DEFAULT, 0, 0, 0, 0);
    cpu_rope_tables(ct, st_, (uint32_t)T, (uint32_t)HS, inv_freq);
    free(inv_freq);
    wgt_status st = m->be->upload(m->be, cos, ct, T * HS);
    if (st == WGT_OK) st = m->be->upload(m->be, sin, st_, T * HS);
    free(ct);
    free(st_);
    return st;
}

static wgt_status init(wgt_model *m) {
    const model_config *c = &m->c;
    const size_t BT = (size_t)m->B * m->T, C = c->d_model, F = c->d_ff, NH = c->n_head, HS = HS_OF(c),
                 QC = NH * HS, QKV = QC + 2 * (size_t)c->n_kv_heads * HS, T = m->T, CQ = C > QC ? C : QC;
    acts *a = wgt_calloc(1, sizeof *a + (size_t)c->n_layer * sizeof a->h[0]);
    m->acts = a;
    for (int l = 0; l < c->n_layer; l++) {
        block_acts *h = &a->h[l];
        model_alloc(m, &h->res, BT * C, "res", 0);
        if (l > 0 && m->recompute == MODEL_RECOMPUTE_BLOCK) {  // one set for all blocks but the inputs
            wgt_view res = h->res;
            *h = a->h[0];
            h->res = res;
            continue;
        }
        if (l > 0 && m->recompute == MODEL_RECOMPUTE_ATTENTION) {  // the attention's: one set
            h->ln1 = a->h[0].ln1, h->rstd1 = a->h[0].rstd1, h->qkv_pre = a->h[0].qkv_pre;
            h->rstd_qk = a->h[0].rstd_qk, h->qkv = a->h[0].qkv, h->atty = a->h[0].atty, h->lse = a->h[0].lse;
        } else {
            model_alloc_act(m, &h->ln1, BT * C, "ln1");
            model_alloc(m, &h->rstd1, BT, "rstd1", 0);
            model_alloc(m, &h->qkv_pre, BT * QKV, "qkv_pre", 0);
            model_alloc(m, &h->rstd_qk, BT * (NH + c->n_kv_heads), "rstd_qk", 0);
            model_alloc_act(m, &h->qkv, BT * QKV, "qkv");
            model_alloc_act(m, &h->atty, BT * QC, "atty");
            model_alloc(m, &h->lse, (size_t)m->B * NH * T, "lse", 0);
        }
        model_alloc(m, &h->ao, BT * C, "attn_out", 0);
        model_alloc(m, &h->rstd_pa, BT, "rstd_pa", 0);
        model_alloc(m, &h->res2, BT * C, "res2", 0);
        model_alloc_act(m, &h->ln2, BT * C, "ln2");
        model_alloc(m, &h->rstd2, BT, "rstd2", 0);
        model_alloc(m, &h->gate, BT * F, "gate", 0);
        model_alloc(m, &h->up, BT * F, "up", 0);
        model_alloc_act(m, &h->hid, BT * F, "geglu");
        model_alloc(m, &h->mo, BT * C, "mlp_out", 0);
        model_alloc(m, &h->rstd_pff, BT, "rstd_pff", 0);
    }
    model_alloc(m, &a->res_final, BT * C, "res_final", 0);
    model_alloc_act(m, &a->lnf, BT * C, "lnf");
    model_alloc(m, &a->rstdf, BT, "rstdf", 0);
    if (model_f16(m)) {
        model_alloc(m, &a->x_c, BT * CQ, "x_c", 0);
        model_alloc(m, &a->x_f, BT * F, "x_f", 0);
        model_alloc(m, &a->x_q, BT * QKV, "x_q", 0);
    }
    model_alloc(m, &a->scratch_c, BT * C, "scratch_c", 0);
    model_alloc(m, &a->dres, BT * C, "dres", 0);
    model_alloc(m, &a->dtmp, BT * CQ, "dtmp", 0);
    model_alloc(m, &a->dbr, BT * C, "dbranch", 0);
    model_alloc(m, &a->dqkv, BT * QKV, "dqkv", 0);
    model_alloc(m, &a->dqkv_pre, BT * QKV, "dqkv_pre", 0);
    model_alloc(m, &a->dhid, BT * F, "dhid", 0);
    model_alloc(m, &a->dgate, BT * F, "dgate", 0);
    model_alloc(m, &a->dup, BT * F, "dup", 0);
    model_alloc(m, &a->zero_pos, T * C, "zero_pos", 0);
    model_alloc(m, &a->dpos, T * C, "dpos", 0);
    model_alloc(m, &a->cos_g, T * HS, "rope_cos", 0);
    model_alloc(m, &a->sin_g, T * HS, "rope_sin", 0);
    model_alloc(m, &a->cos_l, T * HS, "rope_cos_local", 0);
    model_alloc(m, &a->sin_l, T * HS, "rope_sin_local", 0);
    if (m->alloc_st != WGT_OK) return m->alloc_st;
    WGT_TRY(upload_rope(m, a->cos_g, a->sin_g, c->rope_theta));
    return upload_rope(m, a->cos_l, a->sin_l, c->rope_local_theta);
}

// the embedding's scale, as transformers computes it: sqrt(hidden) rounded to f32
static float embed_scale(const model_config *c) { return (float)sqrt((double)c->d_model); }

// ------------------------------------------------------------------ forward

// The attention of block l up to its output: ln1, qkv_pre, rstd_qk, qkv (normed, rotated), atty,
// lse (what --recompute attention recomputes in the backward).
static void attn_forward(wgt_model *m, int l) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, NH = m->c.n_head, NKV = m->c.n_kv_heads, HS = HS_OF(&m->c),
                   QC = NH * HS, QKV = QC + 2 * NKV * HS, BT = B * T;
    const float eps = (float)m->c.rms_eps;
    const block_params *p = PL(m, l);
    acts *a = A(m);
    const block_acts *h = &a->h[l];
    const int sl = is_sliding(&m->c, l);
    const size_t nc = (size_t)BT * C, nq = (size_t)BT * QKV;
    wgt_view ln1 = model_act_out(m, h->ln1, a->x_c);
    be->rmsnorm_forward(be, ln1, h->rstd1, h->res, p->ln_in, BT, C, eps);                    // ln1 [B,T,C]
    model_act_keep(m, h->ln1, ln1, nc);
    model_matmul(m, h->qkv_pre, h->ln1, qkv_of(p), model_no_view(), BT, C, QKV);             // [B,T,Q+2KV]
    wgt_view qkv = model_act_out(m, h->qkv, a->x_q);
    be->qk_norm_forward(be, qkv, h->rstd_qk, h->qkv_pre, p->q_nw, p->k_nw, B, T, NH, NKV, HS, eps, 0.0f);
    be->rope_forward(be, qkv, sl ? a->cos_l : a->cos_g, sl ? a->sin_l : a->sin_g, m->doc_view, B, T, NH, NKV, HS);
    model_act_keep(m, h->qkv, qkv, nq);
    qkv = model_act_f32(m, h->qkv, a->x_q, nq);
    wgt_view atty = model_act_out(m, h->atty, a->x_c);
    be->attention_forward(be, atty, h->lse, qkv, m->doc_view, B, T, NH, NKV, HS, m->drop_p, model_dropout_seed(m, l, 0),
                          sl ? (uint32_t)m->c.sliding_window : 0);
    model_act_keep(m, h->atty, atty, (size_t)BT * QC);
}

static void block_forward(wgt_model *m, int l) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, F = m->c.d_ff, QC = m->c.n_head * HS_OF(&m->c), BT = B * T;
    const float eps = (float)m->c.rms_eps;
    const block_params *p = PL(m, l);
    acts *a = A(m);
    const block_acts *h = &a->h[l];
    const wgt_view none = model_no_view();
    wgt_view out = l + 1 < m->c.n_layer ? a->h[l + 1].res : a->res_final;
    const size_t nc = (size_t)BT * C, nf = (size_t)BT * F;
    attn_forward(m, l);
    model_matmul(m, h->ao, h->atty, p->o_w, none, BT, QC, C);                                   // o_proj [B,T,C]
    be->rmsnorm_forward(be, a->scratch_c, h->rstd_pa, h->ao, p->ln_pa, BT, C, eps);           // post-attention norm
    model_branch_dropout(m, a->scratch_c, l, 1);
    be->residual_forward(be, h->res2, h->res, a->scratch_c, nc);                                // res2 [B,T,C]
    wgt_view ln2 = model_act_out(m, h->ln2, a->x_c);
    be->rmsnorm_forward(be, ln2, h->rstd2, h->res2, p->ln_pf, BT, C, eps);                     // pre-ffn norm
    model_act_keep(m, h->ln2, ln2, nc);
    model_matmul(m, h->gate, h->ln2, p->gate_w, none, BT, C, F);                               // gate [B,T,F]
    model_matmul(m, h->up, h->ln2, p->up_w, none, BT, C, F);                                     // up [B,T,F]
    wgt_view hid = model_act_out(m, h->hid, a->x_f);
    be->geglu_combine(be, hid, h->gate, h->up, nf);                                              // hid [B,T,F]
    model_act_keep(m, h->hid, hid, nf);
    model_matmul(m, h->mo, h->hid, p->down_w, none, BT, F, C);                                  // down_proj [B,T,C]
    be->rmsnorm_forward(be, a->scratch_c, h->rstd_pff, h->mo, p->ln_pff, BT, C, eps);          // post-ffn norm
    model_branch_dropout(m, a->scratch_c, l, 2);
    be->residual_forward(be, out, h->res2, a->scratch_c, nc);                                    // out [B,T,C]
}

static void forward(wgt_model *m) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, BT = B * T, V = m->c.vocab;
    const top_params *p = P(m);
    acts *a = A(m);
    be->embedding_forward(be, a->h[0].res, m->tokens, p->embed, a->zero_pos, B, T, C, V);            // [B,T,C]
    be->scale_inplace(be, a->h[0].res, (size_t)BT * C, embed_scale(&m->c));                          // * sqrt(C)
    for (int l = 0; l < m->c.n_layer; l++) block_forward(m, l);
    wgt_view lnf = model_act_out(m, a->lnf, a->x_c);
    be->rmsnorm_forward(be, lnf, a->rstdf, a->res_final, p->norm_w, BT, C, (float)m->c.rms_eps);
    model_act_keep(m, a->lnf, lnf, (size_t)BT * C);
    model_head_forward(m, a->lnf, lm_head_of(m, p));                                            // logits [B,T,V]
}

// ------------------------------------------------------------------ backward

// a->dres holds d(out) on entry and d(x) on return
static void block_backward(wgt_model *m, int l) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, F = m->c.d_ff, NH = m->c.n_head, NKV = m->c.n_kv_heads,
                   HS = HS_OF(&m->c), QC = NH * HS, QKV = QC + 2 * NKV * HS, BT = B * T;
    const block_params *p = PL(m, l), *g = GL(m, l);
    acts *a = A(m);
    const block_acts *h = &a->h[l];
    const wgt_view none = model_no_view();
    const int sl = is_sliding(&m->c, l);
    const size_t nc = (size_t)BT * C;
    // MLP: out = res2 + post_ffn_norm(mo), mo = down_proj(geglu(gate, up))
    wgt_view dmlp = model_branch_dropout_grad(m, a->scratch_c, a->dres, l, 2);
    be->fill_zero(be, a->dbr, nc);
    be->rmsnorm_backward(be, a->dbr, g->ln_pff, dmlp, h->mo, p->ln_pff, h->rstd_pff, BT, C);        // dmo [B,T,C]
    model_matmul_t(m, a->dhid, a->dbr, p->down_w, BT, F, C);                                        // dhid [B,T,F]
    model_matmul_at(m, g->down_w, none, a->dbr, h->hid, BT, F, C);
    be->ffn_geglu_backward(be, a->dgate, a->dup, a->dhid, h->gate, h->up, (size_t)BT * F);
    model_matmul_t(m, a->dtmp, a->dgate, p->gate_w, BT, C, F);
    model_matmul_t(m, a->scratch_c, a->dup, p->up_w, BT, C, F);
    be->add_inplace(be, a->dtmp, a->scratch_c, nc);                                                  // dln2 [B,T,C]
    model_matmul_at(m, g->gate_w, none, a->dgate, h->ln2, BT, C, F);
    model_matmul_at(m, g->up_w, none, a->dup, h->ln2, BT, C, F);
    be->rmsnorm_backward(be, a->dres, g->ln_pf, a->dtmp, h->res2, p->ln_pf, h->rstd2, BT, C);         // dres2
    // attention: res2 = x + post_attention_norm(ao)
    wgt_view dattn = model_branch_dropout_grad(m, a->scratch_c, a->dres, l, 1);
    be->fill_zero(be, a->dbr, nc);
    be->rmsnorm_backward(be, a->dbr, g->ln_pa, dattn, h->ao, p->ln_pa, h->rstd_pa, BT, C);          // dao [B,T,C]
    model_matmul_t(m, a->dtmp, a->dbr, p->o_w, BT, QC, C);                                          // datty [B,T,Q]
    model_matmul_at(m, g->o_w, none, a->dbr, h->atty, BT, QC, C);
    wgt_view atty = model_act_f32(m, h->atty, a->x_c, (size_t)BT * QC);
    wgt_view qkv = model_act_f32(m, h->qkv, a->x_q, (size_t)BT * QKV);
    be->attention_backward(be, a->dqkv, a->dtmp, qkv, atty, h->lse, m->doc_view, B, T, NH, NKV, HS, m->drop_p,
                           model_dropout_seed(m, l, 0), sl ? (uint32_t)m->c.sliding_window : 0);
    be->rope_backward(be, a->dqkv, sl ? a->cos_l : a->cos_g, sl ? a->sin_l : a->sin_g, m->doc_view, B, T, NH, NKV, HS);
    be->qk_norm_backward(be, a->dqkv_pre, g->q_nw, g->k_nw, a->dqkv, h->qkv_pre, p->q_nw, p->k_nw, h->rstd_qk, B, T, NH,
                         NKV, HS, 0.0f);
    model_matmul_t(m, a->dtmp, a->dqkv_pre, qkv_of(p), BT, C, QKV);                                 // dln1 [B,T,C]
    model_matmul_at(m, qkv_of(g), none, a->dqkv_pre, h->ln1, BT, C, QKV);
    be->rmsnorm_backward(be, a->dres, g->ln_in, a->dtmp, h->res, p->ln_in, h->rstd1, BT, C);          // dx
}

static void backward(wgt_model *m) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, BT = B * T, V = m->c.vocab;
    const top_params *p = P(m), *g = G(m);
    acts *a = A(m);
    model_head_backward(m, a->dtmp, a->lnf, lm_head_of(m, p), lm_head_of(m, g));                 // dlnf [B,T,C], dlm_head
    be->fill_zero(be, a->dres, (size_t)BT * C);
    be->rmsnorm_backward(be, a->dres, g->norm_w, a->dtmp, a->res_final, p->norm_w, a->rstdf, BT, C);
    for (int l = m->c.n_layer - 1; l >= 0; l--) {
        // --recompute: the shared activations hold the last block's; the others are recomputed
        if (l + 1 < m->c.n_layer && m->recompute == MODEL_RECOMPUTE_BLOCK) block_forward(m, l);
        if (l + 1 < m->c.n_layer && m->recompute == MODEL_RECOMPUTE_ATTENTION) attn_forward(m, l);
        block_backward(m, l);
    }
    if (model_base_frozen(m)) return;  // (LoRA: the embedding is frozen)
    be->scale_inplace(be, a->dres, (size_t)BT * C, embed_scale(&m->c));                             // through * sqrt(C)
    be->fill_zero(be, a->dpos, (size_t)T * C);
    be->embedding_backward(be, g->embed, a->dpos, a->dres, m->tokens, B, T, C, V);
}

// ------------------------------------------------------------------ Hugging Face files

static wgt_status config_from_safetensors(model_config *c, const st_file *f, const char *path, int n_head) {
    return wgt_fail(WGT_ERR_ARG, "'%s': a Gemma-3 checkpoint does not record its heads, RoPE bases, window or norm "
                    "epsilon; pass its Hugging Face config.json with --config", path);
}

// One RoPE parameter object of transformers' newer "rope_parameters" ({"rope_type": "default",
// "rope_theta": ...}): only the default type is computed here.
static wgt_status rope_kind_from_hf(const cJSON *o, const char *what, const char *kind, double *theta) {
    if (!cJSON_IsObject(o)) return wgt_fail(WGT_ERR_CONFIG, "%s: rope_parameters.%s must be an object", what, kind);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "rope_type");
    if (t && !cJSON_IsNull(t) && (!cJSON_IsString(t) || strcmp(t->valuestring, "default")))
        return wgt_fail(WGT_ERR_CONFIG, "%s: rope_parameters.%s has rope_type %s; this build computes \"default\" RoPE for "
                        "gemma3_text", what, kind, cJSON_IsString(t) ? t->valuestring : "(not a string)");
    return model_hf_double(o, what, "rope_theta", 1, 0, 1e-30, 1e12, theta);
}

// The layer kinds: layer_types (a list of "sliding_attention" / "full_attention") or the older
// sliding_window_pattern (default 6: every sixth layer full). This build represents a period P
// (layer l full when (l + 1) % P == 0); another arrangement is refused.
static wgt_status layers_from_hf(model_config *c, const cJSON *o, const char *what) {
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(o, "layer_types");
    if (!lt || cJSON_IsNull(lt)) return model_hf_int(o, what, "sliding_window_pattern", 0, 6, 1, 256, &c->sliding_pattern);
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layer)
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"layer_types\" must be a list of num_hidden_layers (%d) strings", what,
                        c->n_layer);
    int first_full = 0;  // 1-based index of the first full layer (0: none)
    for (int l = 0; l < c->n_layer; l++) {
        const cJSON *e = cJSON_GetArrayItem(lt, l);
        int full = cJSON_IsString(e) && !strcmp(e->valuestring, "full_attention");
        if (!full && !(cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention")))
            return wgt_fail(WGT_ERR_CONFIG, "%s: layer_types[%d] must be \"sliding_attention\" or \"full_attention\"", what,
                            l);
        if (full && !first_full) first_full = l + 1;
    }
    c->sliding_pattern = first_full ? first_full : c->n_layer + 1;  // no full layer: a period past the last
    if (c->sliding_pattern > 256) c->sliding_pattern = 256;
    for (int l = 0; l < c->n_layer; l++) {
        const cJSON *e = cJSON_GetArrayItem(lt, l);
        int full = !strcmp(e->valuestring, "full_attention");
        if (full == is_sliding(c, l))
            return wgt_fail(WGT_ERR_CONFIG, "%s: layer_types does not follow one period (full attention at layers P, 2P, "
                            "... counting from 1, sliding elsewhere; here P would be %d): this build represents only "
                            "that arrangement", what, c->sliding_pattern);
    }
    return WGT_OK;
}

// Gemma3TextConfig: its defaults for absent keys (transformers' configuration_gemma3.py).
static wgt_status config_from_hf(model_config *c, const cJSON *o, const char *what) {
    WGT_TRY(model_hf_int(o, what, "hidden_size", 1, 0, 1, 65536, &c->d_model));
    WGT_TRY(model_hf_int(o, what, "intermediate_size", 1, 0, 1, 262144, &c->d_ff));
    WGT_TRY(model_hf_int(o, what, "num_attention_heads", 1, 0, 1, 4096, &c->n_head));
    WGT_TRY(model_hf_int(o, what, "num_hidden_layers", 1, 0, 1, 256, &c->n_layer));
    WGT_TRY(model_hf_int(o, what, "vocab_size", 1, 0, 1, TOKEN_MAX_VOCAB, &c->vocab));
    WGT_TRY(model_hf_int(o, what, "num_key_value_heads", 0, 4, 1, 4096, &c->n_kv_heads));
    WGT_TRY(model_hf_int(o, what, "max_position_embeddings", 0, 131072, 1, 1 << 20, &c->max_seq));
    WGT_TRY(model_hf_double(o, what, "rms_norm_eps", 0, 1e-6, 1e-30, RMS_EPS_MAX, &c->rms_eps));
    WGT_TRY(model_hf_bool(o, what, "tie_word_embeddings", 1, &c->tie_embeddings));
    int head_dim;
    WGT_TRY(model_hf_int(o, what, "head_dim", 0, 256, 1, 1 << 20, &head_dim));
    WGT_TRY(model_hf_expect(o, what, "hidden_activation", "gelu_pytorch_tanh", 0,
                            "the MLP is GeGLU with the tanh GeLU: gelu(gate) * up"));
    WGT_TRY(model_hf_expect(o, what, "attention_bias", "false", 1, "the projections have no bias here"));
    WGT_TRY(model_hf_expect(o, what, "final_logit_softcapping", "null", 1, "logit soft-capping is not computed here"));
    WGT_TRY(model_hf_expect(o, what, "attn_logit_softcapping", "null", 1, "score soft-capping is not computed here"));
    WGT_TRY(model_hf_expect(o, what, "use_bidirectional_attention", "false", 1, "the attention here is causal"));
    double qpas;
    WGT_TRY(model_hf_double(o, what, "query_pre_attn_scalar", 0, 256, 1e-30, 1e12, &qpas));
    if (qpas != head_dim)
        return wgt_fail(WGT_ERR_CONFIG, "%s: query_pre_attn_scalar is %g but head_dim is %d; this build scales scores by "
                        "head_dim^-0.5 (the released Gemma-3 configs have them equal)", what, qpas, head_dim);
    // RoPE: rope_theta / rope_local_base_freq (rope_scaling none), or rope_parameters per layer kind
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(o, "rope_scaling");
    if (rs && !cJSON_IsNull(rs))
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"rope_scaling\" must be null; this build computes default RoPE for "
                        "gemma3_text", what);
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(o, "rope_parameters");
    if (rp && !cJSON_IsNull(rp)) {
        const cJSON *full = cJSON_GetObjectItemCaseSensitive(rp, "full_attention");
        const cJSON *loc = cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention");
        if (!full || !loc)
            return wgt_fail(WGT_ERR_CONFIG, "%s: \"rope_parameters\" must hold \"full_attention\" and "
                            "\"sliding_attention\"", what);
        WGT_TRY(rope_kind_from_hf(full, what, "full_attention", &c->rope_theta));
        WGT_TRY(rope_kind_from_hf(loc, what, "sliding_attention", &c->rope_local_theta));
        // the older keys beside them must agree (which one transformers reads depends on its version)
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "rope_theta");
        const cJSON *lt = cJSON_GetObjectItemCaseSensitive(o, "rope_local_base_freq");
        if ((cJSON_IsNumber(t) && t->valuedouble != c->rope_theta) ||
            (cJSON_IsNumber(lt) && lt->valuedouble != c->rope_local_theta))
            return wgt_fail(WGT_ERR_CONFIG, "%s: rope_theta / rope_local_base_freq differ from rope_parameters' "
                            "full_attention / sliding_attention rope_theta; give one RoPE base of each kind", what);
    } else {
        WGT_TRY(model_hf_double(o, what, "rope_theta", 0, 1e6, 1e-30, 1e12, &c->rope_theta));
        WGT_TRY(model_hf_double(o, what, "rope_local_base_freq", 0, 1e4, 1e-30, 1e12, &c->rope_local_theta));
    }
    WGT_TRY(model_hf_int(o, what, "sliding_window", 0, 4096, 1, 1 << 24, &c->sliding_window));
    WGT_TRY(layers_from_hf(c, o, what));
    if (c->n_head % c->n_kv_heads)
        return wgt_fail(WGT_ERR_CONFIG, "%s: num_key_value_heads (%d) does not divide num_attention_heads (%d)", what,
                        c->n_kv_heads, c->n_head);
    c->head_dim = (int64_t)head_dim * c->n_head != c->d_model ? head_dim : 0;
    if (head_dim % 2)
        return wgt_fail(WGT_ERR_CONFIG, "%s: head_dim %d is odd; RoPE needs an even head size", what, head_dim);
    if (head_dim > MODEL_HEAD_SIZE_MAX)
        return wgt_fail(WGT_ERR_CONFIG, "%s: head_dim %d is above the supported %d", what, head_dim, MODEL_HEAD_SIZE_MAX);
    return WGT_OK;
}

static cJSON *config_to_hf(const model_config *c) {
    cJSON *o = model_hf_config_new("Gemma3ForCausalLM", "gemma3_text");
    model_hf_add_number(o, "vocab_size", c->vocab);
    model_hf_add_number(o, "hidden_size", c->d_model);
    model_hf_add_number(o, "intermediate_size", c->d_ff);
    model_hf_add_number(o, "num_hidden_layers", c->n_layer);
    model_hf_add_number(o, "num_attention_heads", c->n_head);
    model_hf_add_number(o, "num_key_value_heads", c->n_kv_heads);
    model_hf_add_number(o, "head_dim", HS_OF(c));
    model_hf_add_number(o, "query_pre_attn_scalar", HS_OF(c));
    model_hf_add_number(o, "max_position_embeddings", c->max_seq);
    model_hf_add_number(o, "rms_norm_eps", c->rms_eps);
    model_hf_add_number(o, "rope_theta", c->rope_theta);
    model_hf_add_number(o, "rope_local_base_freq", c->rope_local_theta);
    cJSON_AddNullToObject(o, "rope_scaling");
    model_hf_add_number(o, "sliding_window", c->sliding_window);
    cJSON *lt = cJSON_AddArrayToObject(o, "layer_types");
    for (int l = 0; l < c->n_layer; l++)
        cJSON_AddItemToArray(lt, cJSON_CreateString(is_sliding(c, l) ? "sliding_attention" : "full_attention"));
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
    cJSON_AddStringToObject(o, "hidden_activation", "gelu_pytorch_tanh");
    cJSON_AddBoolToObject(o, "attention_bias", 0);
    cJSON_AddNullToObject(o, "final_logit_softcapping");
    cJSON_AddNullToObject(o, "attn_logit_softcapping");
    model_hf_add_number(o, "attention_dropout", 0);
    model_hf_add_number(o, "initializer_range", 0.02);
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    return o;
}

const model_arch model_arch_gemma3_text = {
    .name = "gemma3_text",
    .tensors = tensors,
    .n_tensors = sizeof tensors / sizeof tensors[0],
    .globals_size = sizeof(top_params),
    .layer_size = sizeof(block_params),
    .config_fields = config_fields,
    .n_config_fields = sizeof config_fields / sizeof config_fields[0],
    .hf_prefix = NULL,
    .hf_ignored = NULL,
    .n_hf_ignored = 0,
    .config_check = config_check,
    .tensor_absent = tensor_absent,
    .absent_copy_of = absent_copy_of,
    .config_from_safetensors = config_from_safetensors,
    .hf_model_type = "gemma3_text",
    .config_from_hf = config_from_hf,
    .config_to_hf = config_to_hf,
    .defaults = defaults,
    .init = init,
    .forward = forward,
    .backward = backward,
};
