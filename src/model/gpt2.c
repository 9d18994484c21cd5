// gpt2.c — the GPT-2 family on the model interface: its tensor table (Hugging Face GPT-2
// names, Conv1D weights), the named views a block reads (L->ln1_w, L->qkv_w, ...), its
// activations, and the forward and backward passes as flat lists of backend op calls that
// both backends run. The token embedding is also the lm_head (weight tying). Everything that
// does not depend on the architecture (layout, init, IO, loss, optimizer) is in model.c.
#include <stddef.h>
#include <stdio.h>
#include "model/model_impl.h"
#include "core/token_id.h"

// ------------------------------------------------------------------ parameters

typedef struct {          // one block's tensors (parameters, or their gradients)
    wgt_view ln1_w, ln1_b;          // [C], [C]
    wgt_view qkv_w, qkv_b;          // [3C, C], [3C]
    wgt_view attproj_w, attproj_b;  // [C, C], [C]
    wgt_view ln2_w, ln2_b;          // [C], [C]
    wgt_view fc_w, fc_b;            // [F, C], [F]
    wgt_view fcproj_w, fcproj_b;    // [C, F], [C]
} block_params;

typedef struct {
    wgt_view wte;           // [V, C]: token embedding and lm_head
    wgt_view wpe;           // [maxT, C]
    wgt_view lnf_w, lnf_b;  // [C], [C]
} top_params;

enum {
    D = MODEL_T_DECAY,
    HT = MODEL_T_HF_TRANSPOSED,
    X = MODEL_T_MAY_EXCEED_BINDING,
    E = MODEL_T_EMBEDDING,
};
#define TOP(f) offsetof(top_params, f)
#define BLK(f) offsetof(block_params, f)
// In layout order: matrices and embeddings are decayed, vectors not. The ops split every tensor
// that exceeds one storage binding (wte: the embedding kernels in windows of vocabulary rows, the
// tied lm_head GEMMs in chunks).
static const model_tensor_desc tensors[] = {
    {"wte.weight", 0, {DIM_V, DIM_C}, D | E | X, MODEL_INIT_NORMAL, TOP(wte)},
    {"wpe.weight", 0, {DIM_MAXT, DIM_C}, D | E | X, MODEL_INIT_NORMAL, TOP(wpe)},
    {"h.%d.ln_1.weight", 1, {DIM_C}, X, MODEL_INIT_ONES, BLK(ln1_w)},
    {"h.%d.ln_1.bias", 1, {DIM_C}, X, MODEL_INIT_ZEROS, BLK(ln1_b)},
    {"h.%d.attn.c_attn.weight", 1, {DIM_3C, DIM_C}, D | HT | X, MODEL_INIT_NORMAL, BLK(qkv_w)},
    {"h.%d.attn.c_attn.bias", 1, {DIM_3C}, X, MODEL_INIT_ZEROS, BLK(qkv_b)},
    {"h.%d.attn.c_proj.weight", 1, {DIM_C, DIM_C}, D | HT | X, MODEL_INIT_RESIDUAL, BLK(attproj_w)},
    {"h.%d.attn.c_proj.bias", 1, {DIM_C}, X, MODEL_INIT_ZEROS, BLK(attproj_b)},
    {"h.%d.ln_2.weight", 1, {DIM_C}, X, MODEL_INIT_ONES, BLK(ln2_w)},
    {"h.%d.ln_2.bias", 1, {DIM_C}, X, MODEL_INIT_ZEROS, BLK(ln2_b)},
    {"h.%d.mlp.c_fc.weight", 1, {DIM_F, DIM_C}, D | HT | X, MODEL_INIT_NORMAL, BLK(fc_w)},
    {"h.%d.mlp.c_fc.bias", 1, {DIM_F}, X, MODEL_INIT_ZEROS, BLK(fc_b)},
    {"h.%d.mlp.c_proj.weight", 1, {DIM_C, DIM_F}, D | HT | X, MODEL_INIT_RESIDUAL, BLK(fcproj_w)},
    {"h.%d.mlp.c_proj.bias", 1, {DIM_C}, X, MODEL_INIT_ZEROS, BLK(fcproj_b)},
    {"ln_f.weight", 0, {DIM_C}, X, MODEL_INIT_ONES, TOP(lnf_w)},
    {"ln_f.bias", 0, {DIM_C}, X, MODEL_INIT_ZEROS, TOP(lnf_b)},
};

// Hugging Face GPT-2 files also hold the causal-mask buffers and, from GPT2LMHeadModel, the
// tied lm_head (which must be an exact copy of wte).
static const model_hf_name hf_ignored[] = {
    {"lm_head.weight", 0, "wte.weight"},
    {"h.%d.attn.bias", 1, NULL},
    {"h.%d.attn.masked_bias", 1, NULL},
};

static top_params *P(wgt_model *m) { return m->pg; }
static top_params *G(wgt_model *m) { return m->gg; }
static block_params *PL(wgt_model *m, int l) { return (block_params *)m->pl + l; }
static block_params *GL(wgt_model *m, int l) { return (block_params *)m->gl + l; }

// ------------------------------------------------------------------ activations

typedef struct {  // (model_block_acts_share: the input, the attention's through lse, the rest)
    wgt_view res;                      // [B,T,C] the block's input: the residual stream
    wgt_view ln1, ln1_mean, ln1_rstd;  // [B,T,C], [B,T], [B,T]
    wgt_view qkv;                      // [B,T,3C]
    wgt_view atty, lse;                // [B,T,C], [B,NH,T]
    wgt_view res2;                     // [B,T,C] res + attention branch
    wgt_view ln2, ln2_mean, ln2_rstd;  // [B,T,C], [B,T], [B,T]
    wgt_view pre_gelu, fch;            // [B,T,F] before / after the GELU
} block_acts;

// In the f16 model the GEMM inputs kept for the backward (ln1, atty, ln2, pre_gelu, fch, lnf) and
// the attention's input qkv are f16 (model_alloc_act); their producers write through the f32
// scratches x_c, x_f, x_q.
typedef struct {
    wgt_view res_final;                // [B,T,C] the last block's output
    wgt_view lnf, lnf_mean, lnf_rstd;  // [B,T,C], [B,T], [B,T]
    wgt_view x_c, x_f, x_q;            // f16 model only: [B,T,C], [B,T,F], [B,T,3C] f32 scratch
    wgt_view scratch_c;                // [B,T,C] a branch's output before its residual add
    wgt_view dres, dtmp;               // [B,T,C] backward: the residual gradient, a branch's input gradient
    wgt_view dqkv;                     // [B,T,3C]
    wgt_view df1, df2;                 // [B,T,F]
    block_acts h[];                    // per layer
} acts;

static acts *A(wgt_model *m) { return m->acts; }

static wgt_status init(wgt_model *m) {
    const model_config *c = &m->c;
    const size_t BT = (size_t)m->B * m->T, C = c->d_model, F = c->d_ff, NH = c->n_head;
    acts *a = wgt_calloc(1, sizeof *a + (size_t)c->n_layer * sizeof a->h[0]);
    m->acts = a;
    for (int l = 0; l < c->n_layer; l++) {
        block_acts *h = &a->h[l];
        model_alloc(m, &h->res, BT * C, "res", 0);
        const model_acts_own own = model_block_acts_share(m, l, h, &a->h[0], offsetof(block_acts, res2), sizeof *h);
        if (own == MODEL_ACTS_INPUT) continue;  // block recompute: the rest are block 0's
        model_alloc(m, &h->res2, BT * C, "res2", 0);
        if (own == MODEL_ACTS_ALL) {  // (attention recompute: the attention's are block 0's)
            model_alloc_act(m, &h->ln1, BT * C, "ln1");
            model_alloc(m, &h->ln1_mean, BT, "ln1_mean", 0);
            model_alloc(m, &h->ln1_rstd, BT, "ln1_rstd", 0);
            model_alloc_act(m, &h->qkv, BT * 3 * C, "qkv");
            model_alloc_act(m, &h->atty, BT * C, "atty");
            model_alloc(m, &h->lse, (size_t)m->B * NH * m->T, "lse", 0);
        }
        model_alloc_act(m, &h->ln2, BT * C, "ln2");
        model_alloc(m, &h->ln2_mean, BT, "ln2_mean", 0);
        model_alloc(m, &h->ln2_rstd, BT, "ln2_rstd", 0);
        model_alloc_act(m, &h->pre_gelu, BT * F, "pre_gelu");
        model_alloc_act(m, &h->fch, BT * F, "fch");
    }
    model_alloc(m, &a->res_final, BT * C, "res_final", 0);
    model_alloc_act(m, &a->lnf, BT * C, "lnf");
    if (model_f16(m)) {
        model_alloc(m, &a->x_c, BT * C, "x_c", 0);
        model_alloc(m, &a->x_f, BT * F, "x_f", 0);
        model_alloc(m, &a->x_q, BT * 3 * C, "x_q", 0);
    }
    model_alloc(m, &a->lnf_mean, BT, "lnf_mean", 0);
    model_alloc(m, &a->lnf_rstd, BT, "lnf_rstd", 0);
    model_alloc(m, &a->scratch_c, BT * C, "scratch_c", 0);
    model_alloc(m, &a->dres, BT * C, "dres", 0);
    model_alloc(m, &a->dtmp, BT * C, "dtmp", 0);
    model_alloc(m, &a->dqkv, BT * 3 * C, "dqkv", 0);
    model_alloc(m, &a->df1, BT * F, "df1", 0);
    model_alloc(m, &a->df2, BT * F, "df2", 0);
    return m->alloc_st;
}

// ------------------------------------------------------------------ forward

// The attention of block l up to its output: ln1, qkv, atty, lse (what --recompute attention
// recomputes in the backward).
static void attn_forward(wgt_model *m, int l) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, NH = m->c.n_head, BT = B * T;
    const block_params *p = PL(m, l);
    acts *a = A(m);
    const block_acts *h = &a->h[l];
    const size_t nc = (size_t)BT * C;
    // (f16: each saved GEMM input is written into x_c / x_f, then rounded into its f16 tensor)
    wgt_view ln1 = model_act_out(m, h->ln1, a->x_c);
    be->layernorm_forward(be, ln1, h->ln1_mean, h->ln1_rstd, h->res, p->ln1_w, p->ln1_b, BT, C);     // ln1 [B,T,C]
    model_act_keep(m, h->ln1, ln1, nc);
    wgt_view qkv = model_act_out(m, h->qkv, a->x_q);
    model_matmul(m, qkv, h->ln1, p->qkv_w, p->qkv_b, BT, C, 3 * C);                                   // qkv [B,T,3C]
    model_act_keep(m, h->qkv, qkv, 3 * nc);
    qkv = model_act_f32(m, h->qkv, a->x_q, 3 * nc);  // (f16: attention reads the rounded qkv, as its backward)
    wgt_view atty = model_act_out(m, h->atty, a->x_c);
    be->attention_forward(be, atty, h->lse, qkv, m->doc_view, B, T, NH, NH, C / NH, m->drop_p,
                          model_dropout_seed(m, l, 0), 0);                                     // atty [B,T,C], lse [B,NH,T]
    model_act_keep(m, h->atty, atty, nc);
}

// x = block input h[l].res; out = next block's input (or res_final):
//   res2 = x + attproj(attention(qkv(ln1(x))));  out = res2 + fcproj(gelu(fc(ln2(res2))))
static void block_forward(wgt_model *m, int l) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, F = m->c.d_ff, BT = B * T;
    const block_params *p = PL(m, l);
    acts *a = A(m);
    const block_acts *h = &a->h[l];
    wgt_view out = l + 1 < m->c.n_layer ? a->h[l + 1].res : a->res_final;
    const size_t nc = (size_t)BT * C, nf = (size_t)BT * F;
    attn_forward(m, l);
    model_matmul(m, a->scratch_c, h->atty, p->attproj_w, p->attproj_b, BT, C, C);                // attproj [B,T,C]
    model_branch_dropout(m, a->scratch_c, l, 1);
    be->residual_forward(be, h->res2, h->res, a->scratch_c, nc);                                    // res2 [B,T,C]
    wgt_view ln2 = model_act_out(m, h->ln2, a->x_c);
    be->layernorm_forward(be, ln2, h->ln2_mean, h->ln2_rstd, h->res2, p->ln2_w, p->ln2_b, BT, C);   // ln2 [B,T,C]
    model_act_keep(m, h->ln2, ln2, nc);
    wgt_view pre = model_act_out(m, h->pre_gelu, a->x_f), fch = model_act_out(m, h->fch, a->x_f);
    model_matmul(m, pre, h->ln2, p->fc_w, p->fc_b, BT, C, F);                                   // pre_gelu [B,T,F]
    model_act_keep(m, h->pre_gelu, pre, nf);
    be->gelu_forward(be, fch, pre, nf);  // (f16: both are the scratch x_f, so in place)               fch [B,T,F]
    model_act_keep(m, h->fch, fch, nf);
    model_matmul(m, a->scratch_c, h->fch, p->fcproj_w, p->fcproj_b, BT, F, C);                    // fcproj [B,T,C]
    model_branch_dropout(m, a->scratch_c, l, 2);
    be->residual_forward(be, out, h->res2, a->scratch_c, (size_t)BT * C);                            // out [B,T,C]
}

static void forward(wgt_model *m) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, BT = B * T;
    const top_params *p = P(m);
    acts *a = A(m);
    be->embedding_forward(be, a->h[0].res, m->tokens, p->wte, p->wpe, B, T, C, m->c.vocab);           // [B,T,C]
    for (int l = 0; l < m->c.n_layer; l++) block_forward(m, l);
    wgt_view lnf = model_act_out(m, a->lnf, a->x_c);
    be->layernorm_forward(be, lnf, a->lnf_mean, a->lnf_rstd, a->res_final, p->lnf_w, p->lnf_b, BT, C);   // lnf [B,T,C]
    model_act_keep(m, a->lnf, lnf, (size_t)BT * C);
    model_head_forward(m, a->lnf, p->wte);                                                            // logits [B,T,V]
}

// ------------------------------------------------------------------ backward

// a->dres holds d(out) on entry and d(x) on return; parameter gradients accumulate.
static void block_backward(wgt_model *m, int l) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, F = m->c.d_ff, NH = m->c.n_head, BT = B * T;
    const block_params *p = PL(m, l), *g = GL(m, l);
    acts *a = A(m);
    const block_acts *h = &a->h[l];
    // MLP: out = res2 + fcproj(gelu(fc(ln2(res2))))
    wgt_view dmlp = model_branch_dropout_grad(m, a->scratch_c, a->dres, l, 2);                    // dfcproj [B,T,C]
    model_matmul_t(m, a->df1, dmlp, p->fcproj_w, BT, F, C);                                         // dfch [B,T,F]
    model_matmul_at(m, g->fcproj_w, g->fcproj_b, dmlp, h->fch, BT, F, C);
    wgt_view pre = model_act_f32(m, h->pre_gelu, a->x_f, (size_t)BT * F);  // (f16: widened into x_f)
    be->ffn_gelu_backward(be, a->df2, a->df1, pre, (size_t)BT * F);                              // dpre_gelu [B,T,F]
    model_matmul_t(m, a->dtmp, a->df2, p->fc_w, BT, C, F);                                          // dln2 [B,T,C]
    model_matmul_at(m, g->fc_w, g->fc_b, a->df2, h->ln2, BT, C, F);
    be->layernorm_backward(be, a->dres, g->ln2_w, g->ln2_b, a->dtmp, h->res2, p->ln2_w, h->ln2_mean, h->ln2_rstd, BT,
                           C);                                                                      // dres2 [B,T,C]
    // attention: res2 = x + attproj(attention(qkv(ln1(x))))
    wgt_view dattn = model_branch_dropout_grad(m, a->scratch_c, a->dres, l, 1);                  // dattproj [B,T,C]
    model_matmul_t(m, a->dtmp, dattn, p->attproj_w, BT, C, C);                                     // datty [B,T,C]
    model_matmul_at(m, g->attproj_w, g->attproj_b, dattn, h->atty, BT, C, C);
    wgt_view atty = model_act_f32(m, h->atty, a->x_c, (size_t)BT * C);  // (f16: the rounded out, widened)
    wgt_view qkv = model_act_f32(m, h->qkv, a->x_q, (size_t)BT * 3 * C);
    be->attention_backward(be, a->dqkv, a->dtmp, qkv, atty, h->lse, m->doc_view, B, T, NH, NH, C / NH, m->drop_p,
                           model_dropout_seed(m, l, 0), 0);                                             // dqkv [B,T,3C]
    model_matmul_t(m, a->dtmp, a->dqkv, p->qkv_w, BT, C, 3 * C);                                    // dln1 [B,T,C]
    model_matmul_at(m, g->qkv_w, g->qkv_b, a->dqkv, h->ln1, BT, C, 3 * C);
    be->layernorm_backward(be, a->dres, g->ln1_w, g->ln1_b, a->dtmp, h->res, p->ln1_w, h->ln1_mean, h->ln1_rstd, BT,
                           C);                                                                         // dx [B,T,C]
}

static void backward(wgt_model *m) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, BT = B * T, V = m->c.vocab;
    const top_params *p = P(m), *g = G(m);
    acts *a = A(m);
    model_head_backward(m, a->dtmp, a->lnf, p->wte, g->wte);                                        // dlnf [B,T,C], dwte
    be->fill_zero(be, a->dres, (size_t)BT * C);
    be->layernorm_backward(be, a->dres, g->lnf_w, g->lnf_b, a->dtmp, a->res_final, p->lnf_w, a->lnf_mean, a->lnf_rstd,
                           BT, C);                                                                  // dres [B,T,C]
    model_blocks_backward(m, block_forward, attn_forward, block_backward);
    if (!model_base_frozen(m))  // (LoRA: the embeddings are frozen)
        be->embedding_backward(be, g->wte, g->wpe, a->dres, m->tokens, B, T, C, V);                 // dwte, dwpe
}

// ------------------------------------------------------------------ config from a file

static wgt_status config_from_safetensors(model_config *c, const st_file *f, const char *path, int n_head) {
    const model_arch *a = &model_arch_gpt2;
    const st_tensor *wte = model_st_find(a, f, "wte.weight"), *wpe = model_st_find(a, f, "wpe.weight"),
                    *fc = model_st_find(a, f, "h.0.mlp.c_fc.weight");
    if (!wte || !wpe || !fc || wte->ndim != 2 || wpe->ndim != 2 || fc->ndim != 2)
        return wgt_fail(WGT_ERR_FORMAT, "'%s' is not a GPT-2 checkpoint: it lacks 2-D wte.weight, wpe.weight or "
                        "h.0.mlp.c_fc.weight (Hugging Face GPT-2 names)", path);
    c->vocab = (int)wte->shape[0];
    c->d_model = (int)wte->shape[1];
    c->max_seq = (int)wpe->shape[0];
    c->d_ff = (int)fc->shape[1];  // Conv1D: [in, out]
    c->n_head = n_head;
    char nm[64];
    for (int l = 0;; l++) {
        snprintf(nm, sizeof nm, "h.%d.ln_1.weight", l);
        if (!model_st_find(a, f, nm)) break;
        c->n_layer = l + 1;
    }
    if ((size_t)c->d_model != wpe->shape[1])
        return wgt_fail(WGT_ERR_FORMAT, "'%s': wpe.weight has width %zu but wte.weight has %d", path, wpe->shape[1],
                        c->d_model);
    return WGT_OK;
}

// ------------------------------------------------------------------ Hugging Face config.json

// GPT2Config: n_embd, n_head, n_layer, vocab_size; n_positions (or the older n_ctx; default
// 1024); n_inner (null: 4 n_embd). What this build computes in one way only must have that value.
static wgt_status config_from_hf(model_config *c, const cJSON *o, const char *what) {
    int n_ctx;
    WGT_TRY(model_hf_int(o, what, "n_embd", 1, 0, 1, 65536, &c->d_model));
    WGT_TRY(model_hf_int(o, what, "n_head", 1, 0, 1, 4096, &c->n_head));
    WGT_TRY(model_hf_int(o, what, "n_layer", 1, 0, 1, 256, &c->n_layer));
    WGT_TRY(model_hf_int(o, what, "vocab_size", 1, 0, 1, TOKEN_MAX_VOCAB, &c->vocab));
    WGT_TRY(model_hf_int(o, what, "n_ctx", 0, 1024, 1, 1 << 20, &n_ctx));
    WGT_TRY(model_hf_int(o, what, "n_positions", 0, n_ctx, 1, 1 << 20, &c->max_seq));
    WGT_TRY(model_hf_int(o, what, "n_inner", 0, 4 * c->d_model, 1, 262144, &c->d_ff));
    if (c->d_model % c->n_head)
        return wgt_fail(WGT_ERR_CONFIG, "%s: n_head (%d) does not divide n_embd (%d)", what, c->n_head, c->d_model);
    double eps;
    WGT_TRY(model_hf_double(o, what, "layer_norm_epsilon", 0, 1e-5, 0, 1, &eps));
    if (eps != 1e-5)
        return wgt_fail(WGT_ERR_CONFIG, "%s: layer_norm_epsilon is %g; this build's LayerNorm uses 1e-05", what, eps);
    WGT_TRY(model_hf_expect(o, what, "activation_function", "gelu_new|gelu_pytorch_tanh", 0,
                            "wgtrain's GELU is the tanh approximation"));
    WGT_TRY(model_hf_expect(o, what, "tie_word_embeddings", "true", 1, "GPT-2's lm_head is its token embedding here"));
    WGT_TRY(model_hf_expect(o, what, "scale_attn_weights", "true", 1, "attention scores are scaled by 1/sqrt(head size)"));
    WGT_TRY(model_hf_expect(o, what, "scale_attn_by_inverse_layer_idx", "false", 1, "not supported"));
    WGT_TRY(model_hf_expect(o, what, "add_cross_attention", "false", 1, "a decoder-only model has no cross-attention"));
    return WGT_OK;
}

static cJSON *config_to_hf(const model_config *c) {
    cJSON *o = model_hf_config_new("GPT2LMHeadModel", "gpt2");
    model_hf_add_number(o, "vocab_size", c->vocab);
    model_hf_add_number(o, "n_positions", c->max_seq);
    model_hf_add_number(o, "n_ctx", c->max_seq);
    model_hf_add_number(o, "n_embd", c->d_model);
    model_hf_add_number(o, "n_layer", c->n_layer);
    model_hf_add_number(o, "n_head", c->n_head);
    model_hf_add_number(o, "n_inner", c->d_ff);
    cJSON_AddStringToObject(o, "activation_function", "gelu_new");
    model_hf_add_number(o, "layer_norm_epsilon", 1e-5);
    model_hf_add_number(o, "initializer_range", 0.02);
    cJSON_AddBoolToObject(o, "scale_attn_weights", 1);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", 1);
    if (c->vocab == 50257) {  // GPT-2's own vocabulary: <|endoftext|> begins and ends texts
        model_hf_add_number(o, "bos_token_id", 50256);
        model_hf_add_number(o, "eos_token_id", 50256);
    }
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    return o;
}

const model_arch model_arch_gpt2 = {
    .name = "gpt2",
    .tensors = tensors,
    .n_tensors = sizeof tensors / sizeof tensors[0],
    .globals_size = sizeof(top_params),
    .layer_size = sizeof(block_params),
    .hf_prefix = "transformer.",
    .hf_ignored = hf_ignored,
    .n_hf_ignored = sizeof hf_ignored / sizeof hf_ignored[0],
    .config_from_safetensors = config_from_safetensors,
    .hf_model_type = "gpt2",
    .config_from_hf = config_from_hf,
    .config_to_hf = config_to_hf,
    .init = init,
    .forward = forward,
    .backward = backward,
};
