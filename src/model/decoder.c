// decoder.c — the pre-norm decoder of the LLaMA-style families (decoder.h): their activations,
// forward and backward as flat lists of backend op calls over a block's weights by role
// (decoder_weights, which the family fills from its own tensor structs), and the config checks
// and Hugging Face keys that these families have alike.
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include "core/token_id.h"
#include "backend/cpu/ops.h"  // cpu_rope_inv_freq, cpu_rope_tables: the host helpers of the RoPE tables
#include "model/decoder.h"

#define HS_OF(c) model_head_size(c)

// ------------------------------------------------------------------ activations

typedef struct {
    wgt_view res;               // [B,T,C] the block's input: the residual stream
    // the attention's (what --recompute attention shares between blocks), through lse
    wgt_view ln1, rstd1;        // [B,T,C], [B,T] the norm before the attention
    wgt_view qkv_pre, rstd_qk;  // qk_norm only: [B,T,Q+2KV] the projection (f32), [B,T,NH+NKV] its head norms
    wgt_view qkv;               // [B,T,Q+2KV] q | k | v, q and k normed (qk_norm) and rotated (what attention saw)
    wgt_view atty, lse;         // [B,T,Q], [B,NH,T]
    // the rest
    wgt_view ao, rstd_ao;       // sandwich only: [B,T,C] o_proj's output (f32), [B,T] its norm
    wgt_view res2;              // [B,T,C] res + attention branch
    wgt_view ln2, rstd2;        // [B,T,C], [B,T] the norm before the MLP
    wgt_view gate, up, hid;     // [B,T,F] gate_proj, up_proj, act(gate) * up
    wgt_view mo, rstd_mo;       // sandwich only: [B,T,C] down_proj's output (f32), [B,T] its norm
} block_acts;

typedef struct {
    const decoder_family *f;
    wgt_view res_final;      // [B,T,C] the last block's output
    wgt_view lnf, rstdf;     // [B,T,C], [B,T] model.norm
    wgt_view x_c, x_f, x_q;  // f16 model only: [B,T,max(C,Q)], [B,T,F], [B,T,Q+2KV] f32 scratch through
                             // which the producers of the f16 tensors (ln1, qkv, atty, ln2, hid,
                             // lnf) write
    wgt_view scratch_c;      // [B,T,C] a branch's output before its residual add; in the backward
                             // the up_proj part of d(ln2)
    wgt_view dres, dtmp;     // [B,T,C], [B,T,max(C,Q)] backward: the residual gradient, a branch's input gradient
    wgt_view dbr;            // sandwich only: [B,T,C] a branch's gradient before its output norm
    wgt_view dqkv, dqkv_pre; // [B,T,Q+2KV]; qk_norm only: [B,T,Q+2KV] the gradient before the head norms
    wgt_view dhid, dgate, dup;  // [B,T,F]
    wgt_view zero_pos;       // [T,C] zeros: the position table embedding_forward adds
    wgt_view dpos;           // [T,C] embedding_backward's gradient of it, never read
    wgt_view cos, sin;       // [T,HS] RoPE tables for positions 0..T-1 (rope_theta)
    wgt_view cos_l, sin_l;   // [T,HS] those of the sliding layers (rope_local_theta; decoder_family.sliding)
    block_acts h[];          // per layer
} acts;

static acts *A(const wgt_model *m) { return m->acts; }
static const decoder_top *TOP(const wgt_model *m, int grad) { return grad ? m->gg : m->pg; }
// The lm_head: its own matrix, or the token embedding.
static wgt_view lm_head_of(const wgt_model *m, const decoder_top *t) {
    return m->c.tie_embeddings ? t->embed : t->lm_head;
}
static int has_qk_norm(const wgt_model *m) { return A(m)->f->qk_norm || m->c.qk_norm; }
// Layer l's RoPE tables and attention window.
static int is_local(const wgt_model *m, int l) { return A(m)->f->sliding && A(m)->f->sliding(&m->c, l); }
static uint32_t window_of(const wgt_model *m, int l) {
    return !A(m)->f->sliding || is_local(m, l) ? (uint32_t)m->c.sliding_window : 0;
}

// Fills cos, sin [T, HS] on the device: RoPE base theta with the config's scaling (none in the
// families with local layers, whose configs refuse it).
static wgt_status upload_rope(wgt_model *m, wgt_view cos, wgt_view sin, double theta) {
    const model_config *c = &m->c;
    const size_t T = m->T, HS = HS_OF(c);
    float *ct = wgt_malloc(T * HS * sizeof(float)), *st_ = wgt_malloc(T * HS * sizeof(float));
    double *inv_freq = wgt_malloc(HS / 2 * sizeof(double));
    cpu_rope_inv_freq(inv_freq, (uint32_t)HS, theta, c->rope_scaling, c->rope_factor, c->rope_low_freq,
                      c->rope_high_freq, c->rope_orig_max_pos);
    cpu_rope_tables(ct, st_, (uint32_t)T, (uint32_t)HS, inv_freq);
    free(inv_freq);
    wgt_status st = m->be->upload(m->be, cos, ct, T * HS);
    if (st == WGT_OK) st = m->be->upload(m->be, sin, st_, T * HS);
    free(ct);
    free(st_);
    return st;
}

wgt_status decoder_init(wgt_model *m, const decoder_family *f) {
    const model_config *c = &m->c;
    const size_t BT = (size_t)m->B * m->T, C = c->d_model, F = c->d_ff, NH = c->n_head, HS = HS_OF(c),
                 QC = NH * HS, QKV = QC + 2 * (size_t)c->n_kv_heads * HS, T = m->T, CQ = C > QC ? C : QC;
    acts *a = wgt_calloc(1, sizeof *a + (size_t)c->n_layer * sizeof a->h[0]);
    m->acts = a;
    a->f = f;
    const int qkn = has_qk_norm(m);
    for (int l = 0; l < c->n_layer; l++) {
        block_acts *h = &a->h[l];
        model_alloc(m, &h->res, BT * C, "res", 0);
        const model_acts_own own = model_block_acts_share(m, l, h, &a->h[0], offsetof(block_acts, ao), sizeof *h);
        if (own == MODEL_ACTS_INPUT) continue;  // block recompute: the rest are block 0's
        if (own == MODEL_ACTS_ALL) {  // (attention recompute: the attention's are block 0's)
            model_alloc_act(m, &h->ln1, BT * C, "ln1");
            model_alloc(m, &h->rstd1, BT, "rstd1", 0);
            if (qkn) {
                model_alloc(m, &h->qkv_pre, BT * QKV, "qkv_pre", 0);
                model_alloc(m, &h->rstd_qk, BT * (NH + c->n_kv_heads), "rstd_qk", 0);
            }
            model_alloc_act(m, &h->qkv, BT * QKV, "qkv");
            model_alloc_act(m, &h->atty, BT * QC, "atty");
            model_alloc(m, &h->lse, (size_t)m->B * NH * T, "lse", 0);
        }
        if (f->sandwich) {
            model_alloc(m, &h->ao, BT * C, "attn_out", 0);
            model_alloc(m, &h->rstd_ao, BT, "rstd_pa", 0);
        }
        model_alloc(m, &h->res2, BT * C, "res2", 0);
        model_alloc_act(m, &h->ln2, BT * C, "ln2");
        model_alloc(m, &h->rstd2, BT, "rstd2", 0);
        model_alloc(m, &h->gate, BT * F, "gate", 0);
        model_alloc(m, &h->up, BT * F, "up", 0);
        model_alloc_act(m, &h->hid, BT * F, f->geglu ? "geglu" : "swiglu");
        if (f->sandwich) {
            model_alloc(m, &h->mo, BT * C, "mlp_out", 0);
            model_alloc(m, &h->rstd_mo, BT, "rstd_pff", 0);
        }
    }
    model_alloc(m, &a->res_final, BT * C, "res_final", 0);
    model_alloc_act(m, &a->lnf, BT * C, "lnf");
    if (model_f16(m)) {
        model_alloc(m, &a->x_c, BT * CQ, "x_c", 0);
        model_alloc(m, &a->x_f, BT * F, "x_f", 0);
        model_alloc(m, &a->x_q, BT * QKV, "x_q", 0);
    }
    model_alloc(m, &a->rstdf, BT, "rstdf", 0);
    model_alloc(m, &a->scratch_c, BT * C, "scratch_c", 0);
    model_alloc(m, &a->dres, BT * C, "dres", 0);
    model_alloc(m, &a->dtmp, BT * CQ, "dtmp", 0);
    if (f->sandwich) model_alloc(m, &a->dbr, BT * C, "dbranch", 0);
    model_alloc(m, &a->dqkv, BT * QKV, "dqkv", 0);
    if (qkn) model_alloc(m, &a->dqkv_pre, BT * QKV, "dqkv_pre", 0);
    model_alloc(m, &a->dhid, BT * F, "dhid", 0);
    model_alloc(m, &a->dgate, BT * F, "dgate", 0);
    model_alloc(m, &a->dup, BT * F, "dup", 0);
    model_alloc(m, &a->zero_pos, T * C, "zero_pos", 0);  // zero-filled by the allocation, never written
    model_alloc(m, &a->dpos, T * C, "dpos", 0);
    model_alloc(m, &a->cos, T * HS, "rope_cos", 0);
    model_alloc(m, &a->sin, T * HS, "rope_sin", 0);
    if (f->sliding) {
        model_alloc(m, &a->cos_l, T * HS, "rope_cos_local", 0);
        model_alloc(m, &a->sin_l, T * HS, "rope_sin_local", 0);
    }
    if (m->alloc_st != WGT_OK) return m->alloc_st;
    // the RoPE tables, once per model
    WGT_TRY(upload_rope(m, a->cos, a->sin, c->rope_theta));
    return f->sliding ? upload_rope(m, a->cos_l, a->sin_l, c->rope_local_theta) : WGT_OK;
}

// the embedding's scale (embed_scaled), as transformers computes it: sqrt(hidden) rounded to f32
static float embed_scale(const model_config *c) { return (float)sqrt((double)c->d_model); }

// ------------------------------------------------------------------ forward

// The attention of block l up to its output: ln1, qkv (normed, rotated), atty, lse (what
// --recompute attention recomputes in the backward).
static void attn_forward(wgt_model *m, int l) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, NH = m->c.n_head, NKV = m->c.n_kv_heads, HS = HS_OF(&m->c),
                   QC = NH * HS, QKV = QC + 2 * NKV * HS, BT = B * T;
    const float eps = (float)m->c.rms_eps;
    acts *a = A(m);
    const decoder_weights p = a->f->weights(m, l, 0);
    const block_acts *h = &a->h[l];
    const int loc = is_local(m, l);
    const size_t nc = (size_t)BT * C, nq = (size_t)BT * QKV;
    // (f16: each saved GEMM input is written into x_c / x_f, then rounded into its f16 tensor)
    wgt_view ln1 = model_act_out(m, h->ln1, a->x_c);
    be->rmsnorm_forward(be, ln1, h->rstd1, h->res, p.ln1_w, BT, C, eps);                          // ln1 [B,T,C]
    model_act_keep(m, h->ln1, ln1, nc);
    wgt_view qkv = model_act_out(m, h->qkv, a->x_q);
    if (has_qk_norm(m)) {  // RMSNorm over each q and k head (q_norm, k_norm) before RoPE
        model_matmul(m, h->qkv_pre, h->ln1, p.qkv_w, p.qkv_b, BT, C, QKV);                        // [B,T,Q+2KV]
        be->qk_norm_forward(be, qkv, h->rstd_qk, h->qkv_pre, p.q_nw, p.k_nw, B, T, NH, NKV, HS, eps, 0.0f);
    } else {
        model_matmul(m, qkv, h->ln1, p.qkv_w, p.qkv_b, BT, C, QKV);                               // qkv [B,T,Q+2KV]
    }
    be->rope_forward(be, qkv, loc ? a->cos_l : a->cos, loc ? a->sin_l : a->sin, m->doc_view, B, T, NH, NKV,
                     HS);                                                                          // q, k rotated
    model_act_keep(m, h->qkv, qkv, nq);
    qkv = model_act_f32(m, h->qkv, a->x_q, nq);  // (f16: attention reads the rounded qkv, as its backward)
    wgt_view atty = model_act_out(m, h->atty, a->x_c);
    be->attention_forward(be, atty, h->lse, qkv, m->doc_view, B, T, NH, NKV, HS, m->drop_p,
                          model_dropout_seed(m, l, 0), window_of(m, l));            // atty [B,T,Q], lse [B,NH,T]
    model_act_keep(m, h->atty, atty, (size_t)BT * QC);
}

// x = block input h[l].res; out = next block's input (or res_final)
static void block_forward(wgt_model *m, int l) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, F = m->c.d_ff, QC = m->c.n_head * HS_OF(&m->c), BT = B * T;
    const float eps = (float)m->c.rms_eps;
    acts *a = A(m);
    const decoder_weights p = a->f->weights(m, l, 0);
    const block_acts *h = &a->h[l];
    const wgt_view none = model_no_view();
    const int sandwich = a->f->sandwich;
    wgt_view out = l + 1 < m->c.n_layer ? a->h[l + 1].res : a->res_final;
    const size_t nc = (size_t)BT * C, nf = (size_t)BT * F;
    attn_forward(m, l);
    model_matmul(m, sandwich ? h->ao : a->scratch_c, h->atty, p.o_w, p.o_b, BT, QC, C);           // o_proj [B,T,C]
    if (sandwich) be->rmsnorm_forward(be, a->scratch_c, h->rstd_ao, h->ao, p.attn_out_w, BT, C, eps);  // its norm
    model_branch_dropout(m, a->scratch_c, l, 1);
    be->residual_forward(be, h->res2, h->res, a->scratch_c, nc);                                    // res2 [B,T,C]
    wgt_view ln2 = model_act_out(m, h->ln2, a->x_c);
    be->rmsnorm_forward(be, ln2, h->rstd2, h->res2, p.ln2_w, BT, C, eps);                          // ln2 [B,T,C]
    model_act_keep(m, h->ln2, ln2, nc);
    model_matmul(m, h->gate, h->ln2, p.gate_w, none, BT, C, F);                                    // gate [B,T,F]
    model_matmul(m, h->up, h->ln2, p.up_w, none, BT, C, F);                                          // up [B,T,F]
    wgt_view hid = model_act_out(m, h->hid, a->x_f);
    if (a->f->geglu) be->geglu_combine(be, hid, h->gate, h->up, nf);                               // hid [B,T,F]
    else be->swiglu_combine(be, hid, h->gate, h->up, nf);
    model_act_keep(m, h->hid, hid, nf);
    model_matmul(m, sandwich ? h->mo : a->scratch_c, h->hid, p.down_w, none, BT, F, C);          // down_proj [B,T,C]
    if (sandwich) be->rmsnorm_forward(be, a->scratch_c, h->rstd_mo, h->mo, p.mlp_out_w, BT, C, eps);  // its norm
    model_branch_dropout(m, a->scratch_c, l, 2);
    be->residual_forward(be, out, h->res2, a->scratch_c, nc);                                        // out [B,T,C]
}

void decoder_forward(wgt_model *m) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, BT = B * T, V = m->c.vocab;
    const decoder_top *p = TOP(m, 0);
    acts *a = A(m);
    be->embedding_forward(be, a->h[0].res, m->tokens, p->embed, a->zero_pos, B, T, C, V);               // [B,T,C]
    if (a->f->embed_scaled) be->scale_inplace(be, a->h[0].res, (size_t)BT * C, embed_scale(&m->c));  // * sqrt(C)
    for (int l = 0; l < m->c.n_layer; l++) block_forward(m, l);
    wgt_view lnf = model_act_out(m, a->lnf, a->x_c);
    be->rmsnorm_forward(be, lnf, a->rstdf, a->res_final, p->norm_w, BT, C, (float)m->c.rms_eps);        // [B,T,C]
    model_act_keep(m, a->lnf, lnf, (size_t)BT * C);
    model_head_forward(m, a->lnf, lm_head_of(m, p));                                               // logits [B,T,V]
}

// ------------------------------------------------------------------ backward

// A branch's gradient through the norm on its output (sandwich): d(norm(x)) -> dx in a->dbr
// [B,T,C], which it returns; the norm weight w's gradient gw accumulates.
static wgt_view out_norm_backward(wgt_model *m, wgt_view dout, wgt_view x, wgt_view w, wgt_view gw, wgt_view rstd) {
    wgt_backend *be = m->be;
    const uint32_t BT = (uint32_t)m->B * (uint32_t)m->T, C = m->c.d_model;
    acts *a = A(m);
    be->fill_zero(be, a->dbr, (size_t)BT * C);
    be->rmsnorm_backward(be, a->dbr, gw, dout, x, w, rstd, BT, C);
    return a->dbr;
}

// a->dres holds d(out) on entry and d(x) on return; parameter gradients accumulate.
static void block_backward(wgt_model *m, int l) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, F = m->c.d_ff, NH = m->c.n_head, NKV = m->c.n_kv_heads,
                   HS = HS_OF(&m->c), QC = NH * HS, QKV = QC + 2 * NKV * HS, BT = B * T;
    acts *a = A(m);
    const decoder_weights p = a->f->weights(m, l, 0), g = a->f->weights(m, l, 1);
    const block_acts *h = &a->h[l];
    const wgt_view none = model_no_view();
    const int loc = is_local(m, l), sandwich = a->f->sandwich;
    const size_t nc = (size_t)BT * C;
    // MLP: out = res2 + [mlp_out_norm](down_proj(act(gate) * up)), gate = gate_proj(ln2), up = up_proj(ln2)
    wgt_view dmlp = model_branch_dropout_grad(m, a->scratch_c, a->dres, l, 2);                   // ddown [B,T,C]
    if (sandwich) dmlp = out_norm_backward(m, dmlp, h->mo, p.mlp_out_w, g.mlp_out_w, h->rstd_mo);      // dmo [B,T,C]
    model_matmul_t(m, a->dhid, dmlp, p.down_w, BT, F, C);                                          // dhid [B,T,F]
    model_matmul_at(m, g.down_w, none, dmlp, h->hid, BT, F, C);
    if (a->f->geglu) be->ffn_geglu_backward(be, a->dgate, a->dup, a->dhid, h->gate, h->up, (size_t)BT * F);
    else be->ffn_swiglu_backward(be, a->dgate, a->dup, a->dhid, h->gate, h->up, (size_t)BT * F);  // dgate, dup [B,T,F]
    model_matmul_t(m, a->dtmp, a->dgate, p.gate_w, BT, C, F);
    model_matmul_t(m, a->scratch_c, a->dup, p.up_w, BT, C, F);
    be->add_inplace(be, a->dtmp, a->scratch_c, nc);                                                 // dln2 [B,T,C]
    model_matmul_at(m, g.gate_w, none, a->dgate, h->ln2, BT, C, F);
    model_matmul_at(m, g.up_w, none, a->dup, h->ln2, BT, C, F);
    be->rmsnorm_backward(be, a->dres, g.ln2_w, a->dtmp, h->res2, p.ln2_w, h->rstd2, BT, C);        // dres2 [B,T,C]
    // attention: res2 = x + [attn_out_norm](o_proj(attention(rope(qkv(ln1(x))))))
    wgt_view dattn = model_branch_dropout_grad(m, a->scratch_c, a->dres, l, 1);                  // do_proj [B,T,C]
    if (sandwich) dattn = out_norm_backward(m, dattn, h->ao, p.attn_out_w, g.attn_out_w, h->rstd_ao);  // dao [B,T,C]
    model_matmul_t(m, a->dtmp, dattn, p.o_w, BT, QC, C);                                          // datty [B,T,Q]
    model_matmul_at(m, g.o_w, g.o_b, dattn, h->atty, BT, QC, C);
    wgt_view atty = model_act_f32(m, h->atty, a->x_c, (size_t)BT * QC);  // (f16: the rounded out, widened)
    wgt_view qkv = model_act_f32(m, h->qkv, a->x_q, (size_t)BT * QKV);
    be->attention_backward(be, a->dqkv, a->dtmp, qkv, atty, h->lse, m->doc_view, B, T, NH, NKV, HS, m->drop_p,
                           model_dropout_seed(m, l, 0), window_of(m, l));                          // dqkv (rotated)
    be->rope_backward(be, a->dqkv, loc ? a->cos_l : a->cos, loc ? a->sin_l : a->sin, m->doc_view, B, T, NH, NKV,
                      HS);                                                                          // dqkv [B,T,Q+2KV]
    wgt_view dqkv = a->dqkv;
    if (has_qk_norm(m)) {  // through q_norm / k_norm: the projection's gradient
        be->qk_norm_backward(be, a->dqkv_pre, g.q_nw, g.k_nw, a->dqkv, h->qkv_pre, p.q_nw, p.k_nw, h->rstd_qk, B, T,
                             NH, NKV, HS, 0.0f);
        dqkv = a->dqkv_pre;
    }
    model_matmul_t(m, a->dtmp, dqkv, p.qkv_w, BT, C, QKV);                                        // dln1 [B,T,C]
    model_matmul_at(m, g.qkv_w, g.qkv_b, dqkv, h->ln1, BT, C, QKV);
    be->rmsnorm_backward(be, a->dres, g.ln1_w, a->dtmp, h->res, p.ln1_w, h->rstd1, BT, C);        // dx [B,T,C]
}

void decoder_backward(wgt_model *m) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, BT = B * T, V = m->c.vocab;
    const decoder_top *p = TOP(m, 0), *g = TOP(m, 1);
    acts *a = A(m);
    model_head_backward(m, a->dtmp, a->lnf, lm_head_of(m, p), lm_head_of(m, g));                 // dlnf [B,T,C], dlm_head
    be->fill_zero(be, a->dres, (size_t)BT * C);
    be->rmsnorm_backward(be, a->dres, g->norm_w, a->dtmp, a->res_final, p->norm_w, a->rstdf, BT, C);  // [B,T,C]
    model_blocks_backward(m, block_forward, attn_forward, block_backward);
    if (model_base_frozen(m)) return;  // (LoRA: the embedding is frozen)
    if (a->f->embed_scaled) be->scale_inplace(be, a->dres, (size_t)BT * C, embed_scale(&m->c));  // through * sqrt(C)
    be->fill_zero(be, a->dpos, (size_t)T * C);  // keeps the ignored sum bounded
    be->embedding_backward(be, g->embed, a->dpos, a->dres, m->tokens, B, T, C, V);                    // dembed
}

// ------------------------------------------------------------------ config and files

wgt_status decoder_config_check(const model_config *c) {
    if (c->n_kv_heads < 1 || c->n_head % c->n_kv_heads)
        return wgt_fail(WGT_ERR_CONFIG, "n_kv_heads (%d) must divide n_head (%d): each key/value head serves an equal "
                        "group of query heads", c->n_kv_heads, c->n_head);
    if (HS_OF(c) % 2)
        return wgt_fail(WGT_ERR_CONFIG, "head size %s = %d is odd; RoPE rotates pairs of dimensions, so it must be even",
                        c->head_dim ? "head_dim" : "d_model/n_head", HS_OF(c));
    if (c->head_dim && c->n_head * c->head_dim == c->d_model)
        return wgt_fail(WGT_ERR_CONFIG, "head_dim %d equals d_model/n_head; leave it 0", c->head_dim);
    if (!(c->rms_eps >= 1e-30 && c->rms_eps <= DECODER_RMS_EPS_MAX))
        return wgt_fail(WGT_ERR_CONFIG, "rms_eps must be in [1e-30, %g], got %g", DECODER_RMS_EPS_MAX, c->rms_eps);
    if (c->tie_embeddings != 0 && c->tie_embeddings != 1)
        return wgt_fail(WGT_ERR_CONFIG, "tie_embeddings must be 0 or 1, got %d", c->tie_embeddings);
    return WGT_OK;
}

static int is_lm_head(const model_tensor_desc *d) {
    return !d->per_layer && d->field == offsetof(decoder_top, lm_head);
}
const char *decoder_lm_head_absent(const model_config *c, const model_tensor_desc *d) {
    if (is_lm_head(d) && c->tie_embeddings)
        return "it ties lm_head to the token embedding (tie_embeddings 1; tie_word_embeddings true in a Hugging Face "
               "config.json)";
    return NULL;
}
int decoder_lm_head_copy_of(const model_tensor_desc *tensors, int n, const model_tensor_desc *d) {
    for (int i = 0; is_lm_head(d) && i < n; i++)
        if (!tensors[i].per_layer && tensors[i].field == offsetof(decoder_top, embed)) return i;
    return -1;
}

wgt_status decoder_sizes_from_hf(model_config *c, const cJSON *o, const char *what, int kv_heads_default,
                                 int max_pos_default, double eps_default, int tie_default) {
    WGT_TRY(model_hf_int(o, what, "hidden_size", 1, 0, 1, 65536, &c->d_model));
    WGT_TRY(model_hf_int(o, what, "intermediate_size", 1, 0, 1, 262144, &c->d_ff));
    WGT_TRY(model_hf_int(o, what, "num_attention_heads", 1, 0, 1, 4096, &c->n_head));
    WGT_TRY(model_hf_int(o, what, "num_hidden_layers", 1, 0, 1, 256, &c->n_layer));
    WGT_TRY(model_hf_int(o, what, "vocab_size", 1, 0, 1, TOKEN_MAX_VOCAB, &c->vocab));
    WGT_TRY(model_hf_int(o, what, "num_key_value_heads", 0, kv_heads_default ? kv_heads_default : c->n_head, 1, 4096,
                         &c->n_kv_heads));
    WGT_TRY(model_hf_int(o, what, "max_position_embeddings", 0, max_pos_default, 1, 1 << 20, &c->max_seq));
    WGT_TRY(model_hf_double(o, what, "rms_norm_eps", 0, eps_default, 1e-30, DECODER_RMS_EPS_MAX, &c->rms_eps));
    return model_hf_bool(o, what, "tie_word_embeddings", tie_default, &c->tie_embeddings);
}

void decoder_sizes_to_hf(cJSON *o, const model_config *c) {
    const struct { const char *key; int v; } sizes[] = {
        {"vocab_size", c->vocab},          {"hidden_size", c->d_model},         {"intermediate_size", c->d_ff},
        {"num_hidden_layers", c->n_layer}, {"num_attention_heads", c->n_head},  {"num_key_value_heads", c->n_kv_heads},
        {"head_dim", HS_OF(c)},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) model_hf_add_number(o, sizes[i].key, sizes[i].v);
}

wgt_status decoder_config_from_safetensors(model_config *c, const st_file *f, const char *path, int n_head) {
    return wgt_fail(WGT_ERR_ARG, "'%s': a %s checkpoint does not record its heads, RoPE base, window or norm epsilon; "
                    "pass its Hugging Face config.json with --config", path, c->arch);
}
