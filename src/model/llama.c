// llama.c — the LLaMA family on the model interface, in Hugging Face LlamaForCausalLM's names
// and layout (every linear [out, in]): RMSNorm, rotary position embedding (HF's rotate-half,
// plain or scaled), grouped-query causal attention, SwiGLU MLP, an lm_head of its own or tied to
// the token embedding. Mistral, Qwen2 and Qwen3 are the same computation with other Hugging Face
// configs (a variant table below): Qwen2 has biases on the q, k and v projections, LLaMA's
// attention_bias puts them on q, k, v and o, Mistral has a sliding window (passed as the attention's
// window: query t sees keys t - window + 1 .. t), Qwen3
// normalises each q and k head (RMSNorm with q_norm / k_norm, qk_norm_forward) between the
// projection and RoPE. The head size HS is head_dim where a config sets it (Qwen3), else C / NH;
// the q projection is then Q = NH x HS wide (C when head_dim is unset).
// Per block, with x the residual stream:
//   h = x + o_proj(attention(rope(q|k|v_proj(rmsnorm(x)))))
//   out = h + down_proj(silu(gate_proj(rmsnorm(h))) * up_proj(rmsnorm(h)))
// and logits = lm_head(rmsnorm(x_L)). The q, k and v projections are stored packed
// (MODEL_T_PACKED) so that they form one [Q + 2 KV, C] matrix: one matmul writes the q | k | v
// rows that the RoPE and attention ops take. There is no position embedding: the token lookup
// is embedding_forward with an all-zero position table (x + 0 = x exactly in IEEE arithmetic),
// whose gradient embedding_backward writes into a scratch nobody reads.
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/token_id.h"
#include "backend/cpu/ops.h"  // cpu_rope_tables: the host helper that fills the cos / sin tables
#include "model/model_impl.h"

// ------------------------------------------------------------------ config

#define HS_OF(c) model_head_size(c)
#define RMS_EPS_MAX 0.5            // rms_eps: 1e-30 .. this (flags, config JSON, Hugging Face, checks alike)
#define ROPE_FACTOR_MAX 1e6       // rope_scaling.factor: 1 .. this
#define ROPE_FREQ_FACTOR_MAX 1e6  // low_freq_factor, high_freq_factor: above 0 .. this

// (the fields from rope_scaling on came later: a run config without them reads them as 0)
static const model_config_field config_fields[] = {
    {"n_kv_heads", offsetof(model_config, n_kv_heads), MODEL_CF_INT, 4096, 0},
    {"rope_theta", offsetof(model_config, rope_theta), MODEL_CF_DOUBLE, 1e12, 0},
    {"rms_eps", offsetof(model_config, rms_eps), MODEL_CF_DOUBLE, RMS_EPS_MAX, 0},
    {"tie_embeddings", offsetof(model_config, tie_embeddings), MODEL_CF_INT, 1, 0},
    {"rope_scaling", offsetof(model_config, rope_scaling), MODEL_CF_INT, 2, 1},
    {"rope_factor", offsetof(model_config, rope_factor), MODEL_CF_DOUBLE, ROPE_FACTOR_MAX, 1},
    {"rope_low_freq", offsetof(model_config, rope_low_freq), MODEL_CF_DOUBLE, ROPE_FREQ_FACTOR_MAX, 1},
    {"rope_high_freq", offsetof(model_config, rope_high_freq), MODEL_CF_DOUBLE, ROPE_FREQ_FACTOR_MAX, 1},
    {"rope_orig_max_pos", offsetof(model_config, rope_orig_max_pos), MODEL_CF_INT, 1 << 24, 1},
    {"qkv_bias", offsetof(model_config, qkv_bias), MODEL_CF_INT, 1, 1},
    {"o_bias", offsetof(model_config, o_bias), MODEL_CF_INT, 1, 1},
    {"sliding_window", offsetof(model_config, sliding_window), MODEL_CF_INT, 1 << 24, 1},
    {"head_dim", offsetof(model_config, head_dim), MODEL_CF_INT, 4096, 1},
    {"qk_norm", offsetof(model_config, qk_norm), MODEL_CF_INT, 1, 1},
};

// ---- the families that share this computation, each with its Hugging Face config's own fields
typedef enum { SW_NONE, SW_MISTRAL, SW_QWEN2 } sliding_kind;
typedef struct {
    const char *name;       // wgtrain family = Hugging Face model_type
    const char *hf_class;   // its architectures[0]
    int qkv_bias, o_bias;   // -1: from "attention_bias" (LLaMA, both); else fixed
    sliding_kind sliding;   // how its config gives a sliding window
    int max_pos_default;    // the config class's defaults of max_position_embeddings and rms_norm_eps
    double eps_default;
    int head_dim_default;   // of head_dim (0: hidden_size / num_attention_heads)
    int qk_norm;            // 1: RMSNorm over each q and k head before RoPE (q_norm, k_norm)
} variant;
static const variant variants[] = {
    {"llama", "LlamaForCausalLM", -1, -1, SW_NONE, 2048, 1e-6, 0, 0},
    {"mistral", "MistralForCausalLM", 0, 0, SW_MISTRAL, 4096 * 32, 1e-6, 0, 0},
    {"qwen2", "Qwen2ForCausalLM", 1, 0, SW_QWEN2, 32768, 1e-6, 0, 0},
    {"qwen3", "Qwen3ForCausalLM", -1, -1, SW_QWEN2, 32768, 1e-6, 128, 1},
};
static const variant *variant_of(const model_config *c) {
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        if (!strcmp(variants[i].name, c->arch)) return &variants[i];
    WGT_ASSERT(0, "llama.c: a config of another family");
    return NULL;
}

// The rope types of Hugging Face's rope_scaling this build computes (cpu_rope_inv_freq), by
// their rope_type names; WGT_ROPE_* is the index.
static const char *const rope_type_names[] = {"default", "linear", "llama3"};

static wgt_status config_check(const model_config *c) {
    if (c->n_kv_heads < 1 || c->n_head % c->n_kv_heads)
        return wgt_fail(WGT_ERR_CONFIG, "n_kv_heads (%d) must divide n_head (%d): each key/value head serves an equal "
                        "group of query heads", c->n_kv_heads, c->n_head);
    if (HS_OF(c) % 2)
        return wgt_fail(WGT_ERR_CONFIG, "head size %s = %d is odd; RoPE rotates pairs of dimensions, so it must be even",
                        c->head_dim ? "head_dim" : "d_model/n_head", HS_OF(c));
    if (c->head_dim && c->n_head * c->head_dim == c->d_model)
        return wgt_fail(WGT_ERR_CONFIG, "head_dim %d equals d_model/n_head; leave it 0", c->head_dim);
    if (!(c->rope_theta > 0)) return wgt_fail(WGT_ERR_CONFIG, "rope_theta must be above 0, got %g", c->rope_theta);
    if (!(c->rms_eps >= 1e-30 && c->rms_eps <= RMS_EPS_MAX))
        return wgt_fail(WGT_ERR_CONFIG, "rms_eps must be in [1e-30, %g], got %g", RMS_EPS_MAX, c->rms_eps);
    if (c->tie_embeddings != 0 && c->tie_embeddings != 1)
        return wgt_fail(WGT_ERR_CONFIG, "tie_embeddings must be 0 or 1, got %d", c->tie_embeddings);
    // the biases and the window this family has
    const variant *v = variant_of(c);
    if ((c->qkv_bias != 0 && c->qkv_bias != 1) || (c->o_bias != 0 && c->o_bias != 1))
        return wgt_fail(WGT_ERR_CONFIG, "qkv_bias and o_bias must be 0 or 1, got %d and %d", c->qkv_bias, c->o_bias);
    if (v->qkv_bias < 0 && c->qkv_bias != c->o_bias)
        return wgt_fail(WGT_ERR_CONFIG, "a %s model has biases on all of q, k, v and o (attention_bias) or on none; got "
                        "qkv_bias %d, o_bias %d", v->name, c->qkv_bias, c->o_bias);
    if (v->qkv_bias >= 0 && (c->qkv_bias != v->qkv_bias || c->o_bias != v->o_bias))
        return wgt_fail(WGT_ERR_CONFIG, "a %s model has qkv_bias %d and o_bias %d, got %d and %d", v->name, v->qkv_bias,
                        v->o_bias, c->qkv_bias, c->o_bias);
    if (c->qk_norm != v->qk_norm)
        return wgt_fail(WGT_ERR_CONFIG, "qk_norm must be %d in a %s model, got %d", v->qk_norm, v->name, c->qk_norm);
    if (c->sliding_window < 0 || (v->sliding != SW_MISTRAL && c->sliding_window))
        return wgt_fail(WGT_ERR_CONFIG, "sliding_window %d: a %s model has %s", c->sliding_window, v->name,
                        v->sliding != SW_MISTRAL ? "none (leave it 0)" : "a window of at least 1 or none (0)");
    // RoPE scaling: each type's factors set, the others 0
    const int rs = c->rope_scaling;
    if (rs < WGT_ROPE_DEFAULT || rs > WGT_ROPE_LLAMA3)
        return wgt_fail(WGT_ERR_CONFIG, "rope_scaling must be 0 (none), 1 (linear) or 2 (llama3), got %d", rs);
    if (rs != WGT_ROPE_DEFAULT && !(c->rope_factor >= 1 && c->rope_factor <= ROPE_FACTOR_MAX))
        return wgt_fail(WGT_ERR_CONFIG, "rope_factor must be in [1, %g] for %s RoPE scaling, got %g", ROPE_FACTOR_MAX,
                        rope_type_names[rs], c->rope_factor);
    if (rs == WGT_ROPE_DEFAULT && c->rope_factor != 0)
        return wgt_fail(WGT_ERR_CONFIG, "rope_factor is %g but rope_scaling is 0 (none)", c->rope_factor);
    if (rs == WGT_ROPE_LLAMA3) {
        if (!(c->rope_low_freq > 0 && c->rope_high_freq > c->rope_low_freq && c->rope_high_freq <= ROPE_FREQ_FACTOR_MAX))
            return wgt_fail(WGT_ERR_CONFIG, "llama3 RoPE scaling needs 0 < low_freq_factor < high_freq_factor <= %g, "
                            "got %g and %g", ROPE_FREQ_FACTOR_MAX, c->rope_low_freq, c->rope_high_freq);
        if (c->rope_orig_max_pos < 1)
            return wgt_fail(WGT_ERR_CONFIG, "llama3 RoPE scaling needs original_max_position_embeddings >= 1, got %d",
                            c->rope_orig_max_pos);
    } else if (c->rope_low_freq != 0 || c->rope_high_freq != 0 || c->rope_orig_max_pos != 0) {
        return wgt_fail(WGT_ERR_CONFIG, "rope_low_freq, rope_high_freq and rope_orig_max_pos are llama3 RoPE scaling's; "
                        "rope_scaling is %d (%s)", rs, rope_type_names[rs]);
    }
    return WGT_OK;
}

// The model's RoPE inverse frequencies, one per rotated pair (HS/2 of them).
static void rope_inv_freq(const model_config *c, double *f) {
    cpu_rope_inv_freq(f, (uint32_t)HS_OF(c), c->rope_theta, c->rope_scaling, c->rope_factor, c->rope_low_freq,
                      c->rope_high_freq, c->rope_orig_max_pos);
}

static void defaults(model_config *c) {
    const variant *v = variant_of(c);
    if (v->qkv_bias > 0) c->qkv_bias = 1;
    if (v->o_bias > 0) c->o_bias = 1;
    c->qk_norm = v->qk_norm;
    if (!c->n_kv_heads) c->n_kv_heads = c->n_head;
    if (!c->rope_theta) c->rope_theta = 10000.0;
    if (!c->rms_eps) c->rms_eps = 1e-5;
}

// ------------------------------------------------------------------ parameters

typedef struct {            // one block's tensors (parameters, or their gradients)
    wgt_view q_w, k_w, v_w; // [Q, C], [KV, C], [KV, C]: packed, one [Q + 2 KV, C] matrix (qkv_of);
                            // Q = NH x HS (= C unless head_dim is set), KV = NKV x HS
    wgt_view o_w;           // [C, Q]
    wgt_view gate_w, up_w;  // [F, C], [F, C]
    wgt_view down_w;        // [C, F]
    wgt_view ln1_w, ln2_w;  // [C] input_layernorm, [C] post_attention_layernorm
    wgt_view q_b, k_b, v_b; // [Q], [KV], [KV]: packed, one [Q + 2 KV] bias (qkv_bias; else empty)
    wgt_view o_b;           // [C] (o_bias; else empty)
    wgt_view q_nw, k_nw;    // [HS], [HS] q_norm, k_norm (qk_norm; else empty)
} block_params;

typedef struct {
    wgt_view embed;    // [V, C]: the token embedding (and the lm_head when tied)
    wgt_view norm_w;   // [C]
    wgt_view lm_head;  // [V, C]; empty when tied
} top_params;

enum {
    D = MODEL_T_DECAY,
    X = MODEL_T_MAY_EXCEED_BINDING,
    E = MODEL_T_EMBEDDING,
    PK = MODEL_T_PACKED,
};
#define TOP(f) offsetof(top_params, f)
#define BLK(f) offsetof(block_params, f)
// In the order of LlamaForCausalLM's state dict. Matrices and the embedding are decayed, norm
// weights not; everything is N(0, 0.02) (initializer_range) but the norm weights, which are 1.
// Every op that touches a tensor here splits it where it exceeds one storage binding (the
// embedding kernels into windows of vocabulary rows, the lm_head GEMMs into chunks) but the
// per-head norm weights, which are HS long.
static const model_tensor_desc tensors[] = {
    {"model.embed_tokens.weight", 0, {DIM_V, DIM_C}, D | E | X, MODEL_INIT_NORMAL, TOP(embed)},
    {"model.layers.%d.self_attn.q_proj.weight", 1, {DIM_Q, DIM_C}, D | X, MODEL_INIT_NORMAL, BLK(q_w)},
    {"model.layers.%d.self_attn.k_proj.weight", 1, {DIM_KV, DIM_C}, D | X | PK, MODEL_INIT_NORMAL, BLK(k_w)},
    {"model.layers.%d.self_attn.v_proj.weight", 1, {DIM_KV, DIM_C}, D | X | PK, MODEL_INIT_NORMAL, BLK(v_w)},
    {"model.layers.%d.self_attn.o_proj.weight", 1, {DIM_C, DIM_Q}, D | X, MODEL_INIT_NORMAL, BLK(o_w)},
    {"model.layers.%d.mlp.gate_proj.weight", 1, {DIM_F, DIM_C}, D | X, MODEL_INIT_NORMAL, BLK(gate_w)},
    {"model.layers.%d.mlp.up_proj.weight", 1, {DIM_F, DIM_C}, D | X, MODEL_INIT_NORMAL, BLK(up_w)},
    {"model.layers.%d.mlp.down_proj.weight", 1, {DIM_C, DIM_F}, D | X, MODEL_INIT_NORMAL, BLK(down_w)},
    {"model.layers.%d.input_layernorm.weight", 1, {DIM_C}, X, MODEL_INIT_ONES, BLK(ln1_w)},
    {"model.layers.%d.post_attention_layernorm.weight", 1, {DIM_C}, X, MODEL_INIT_ONES, BLK(ln2_w)},
    // biases (absent unless the config has them), not decayed, 0 at init as in transformers
    {"model.layers.%d.self_attn.q_proj.bias", 1, {DIM_Q}, X, MODEL_INIT_ZEROS, BLK(q_b)},
    {"model.layers.%d.self_attn.k_proj.bias", 1, {DIM_KV}, X | PK, MODEL_INIT_ZEROS, BLK(k_b)},
    {"model.layers.%d.self_attn.v_proj.bias", 1, {DIM_KV}, X | PK, MODEL_INIT_ZEROS, BLK(v_b)},
    {"model.layers.%d.self_attn.o_proj.bias", 1, {DIM_C}, X, MODEL_INIT_ZEROS, BLK(o_b)},
    // Qwen3's per-head norms (absent unless qk_norm): 1 at init; qk_norm_forward binds them whole
    {"model.layers.%d.self_attn.q_norm.weight", 1, {DIM_HS}, 0, MODEL_INIT_ONES, BLK(q_nw)},
    {"model.layers.%d.self_attn.k_norm.weight", 1, {DIM_HS}, 0, MODEL_INIT_ONES, BLK(k_nw)},
    {"model.norm.weight", 0, {DIM_C}, X, MODEL_INIT_ONES, TOP(norm_w)},
    {"lm_head.weight", 0, {DIM_V, DIM_C}, D | X, MODEL_INIT_NORMAL, TOP(lm_head)},  // absent when tied
};

// A tied config has no lm_head.weight; a file may still hold one that is an exact copy of the
// embedding (what a tied model's state dict holds).
static int is_lm_head(const model_tensor_desc *d) { return !d->per_layer && d->field == TOP(lm_head); }
static const char *tensor_absent(const model_config *c, const model_tensor_desc *d) {
    if (is_lm_head(d) && c->tie_embeddings)
        return "it ties lm_head to the token embedding (tie_embeddings 1; tie_word_embeddings true in a Hugging Face "
               "config.json)";
    if (d->per_layer && (d->field == BLK(q_b) || d->field == BLK(k_b) || d->field == BLK(v_b)) && !c->qkv_bias)
        return "its q, k and v projections have no bias (qkv_bias 0; attention_bias false in a LLaMA config.json)";
    if (d->per_layer && d->field == BLK(o_b) && !c->o_bias)
        return "its o projection has no bias (o_bias 0; attention_bias false in a LLaMA config.json)";
    if (d->per_layer && (d->field == BLK(q_nw) || d->field == BLK(k_nw)) && !c->qk_norm)
        return "it has no per-head q and k norms (qk_norm 0: only Qwen3 has them)";
    return NULL;
}
static int absent_copy_of(const model_config *c, const model_tensor_desc *d) {
    for (int i = 0; is_lm_head(d) && i < (int)(sizeof tensors / sizeof tensors[0]); i++)
        if (!tensors[i].per_layer && tensors[i].field == TOP(embed)) return i;
    return -1;
}

// Older Hugging Face LLaMA files also hold each layer's rotary inverse frequencies (a buffer).
static const model_hf_name hf_ignored[] = {
    {"model.layers.%d.self_attn.rotary_emb.inv_freq", 1, NULL},
};

static top_params *P(wgt_model *m) { return m->pg; }
static top_params *G(wgt_model *m) { return m->gg; }
static block_params *PL(wgt_model *m, int l) { return (block_params *)m->pl + l; }
static block_params *GL(wgt_model *m, int l) { return (block_params *)m->gl + l; }

// The packed q | k | v projection of a block (parameters or gradients): one [C + 2 KV, C] matrix.
static wgt_view qkv_of(const block_params *b) {
    WGT_ASSERT(b->k_w.buf == b->q_w.buf && b->k_w.off == b->q_w.off + b->q_w.n && b->v_w.off == b->k_w.off + b->k_w.n,
               "the q, k and v projections are not packed");
    return model_view(b->q_w.buf, b->q_w.off, b->q_w.n + b->k_w.n + b->v_w.n);
}
// The packed q | k | v bias, or no view (qkv_bias 0).
static wgt_view qkv_bias_of(const wgt_model *m, const block_params *b) {
    if (!m->c.qkv_bias) return model_no_view();
    WGT_ASSERT(b->k_b.buf == b->q_b.buf && b->k_b.off == b->q_b.off + b->q_b.n && b->v_b.off == b->k_b.off + b->k_b.n,
               "the q, k and v biases are not packed");
    return model_view(b->q_b.buf, b->q_b.off, b->q_b.n + b->k_b.n + b->v_b.n);
}
static wgt_view o_bias_of(const wgt_model *m, const block_params *b) { return m->c.o_bias ? b->o_b : model_no_view(); }
// The lm_head: its own matrix, or the token embedding.
static wgt_view lm_head_of(const wgt_model *m, const top_params *t) { return m->c.tie_embeddings ? t->embed : t->lm_head; }

// ------------------------------------------------------------------ activations

typedef struct {
    wgt_view res;           // [B,T,C] the block's input: the residual stream
    wgt_view ln1, rstd1;    // [B,T,C], [B,T] input_layernorm
    wgt_view qkv_pre, rstd_qk;  // qk_norm only: [B,T,Q+2KV] the projection (f32), [B,T,NH+NKV] its head norms
    wgt_view qkv;           // [B,T,Q+2KV] q | k | v, q and k normed (qk_norm) and rotated (what attention saw)
    wgt_view atty, lse;     // [B,T,Q], [B,NH,T]
    wgt_view res2;          // [B,T,C] res + attention branch
    wgt_view ln2, rstd2;    // [B,T,C], [B,T] post_attention_layernorm
    wgt_view gate, up, hid; // [B,T,F] gate_proj, up_proj, silu(gate) * up
} block_acts;

typedef struct {
    wgt_view res_final;      // [B,T,C] the last block's output
    wgt_view lnf, rstdf;     // [B,T,C], [B,T] model.norm
    wgt_view x_c, x_f, x_q;  // f16 model only: [B,T,max(C,Q)], [B,T,F], [B,T,Q+2KV] f32 scratch through
                             // which the producers of the f16 tensors (ln1, qkv, atty, ln2, hid,
                             // lnf) write
    wgt_view scratch_c;      // [B,T,C] a branch's output before its residual add; in the backward
                             // the up_proj part of d(ln2)
    wgt_view dres, dtmp;     // [B,T,C], [B,T,max(C,Q)] backward: the residual gradient, a branch's input gradient
    wgt_view dqkv, dqkv_pre; // [B,T,Q+2KV]; qk_norm only: [B,T,Q+2KV] the gradient before the head norms
    wgt_view dhid, dgate, dup;  // [B,T,F]
    wgt_view zero_pos;       // [T,C] zeros: the position table embedding_forward adds
    wgt_view dpos;           // [T,C] embedding_backward's gradient of it, never read
    wgt_view cos, sin;       // [T,HS] RoPE tables for positions 0..T-1
    block_acts h[];          // per layer
} acts;

static acts *A(wgt_model *m) { return m->acts; }

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
            h->ln1 = a->h[0].ln1, h->rstd1 = a->h[0].rstd1, h->qkv = a->h[0].qkv;
            h->qkv_pre = a->h[0].qkv_pre, h->rstd_qk = a->h[0].rstd_qk;
            h->atty = a->h[0].atty, h->lse = a->h[0].lse;
        } else {
            model_alloc_act(m, &h->ln1, BT * C, "ln1");
            model_alloc(m, &h->rstd1, BT, "rstd1", 0);
            if (c->qk_norm) {
                model_alloc(m, &h->qkv_pre, BT * QKV, "qkv_pre", 0);
                model_alloc(m, &h->rstd_qk, BT * (NH + c->n_kv_heads), "rstd_qk", 0);
            }
            model_alloc_act(m, &h->qkv, BT * QKV, "qkv");
            model_alloc_act(m, &h->atty, BT * QC, "atty");
            model_alloc(m, &h->lse, (size_t)m->B * NH * T, "lse", 0);
        }
        model_alloc(m, &h->res2, BT * C, "res2", 0);
        model_alloc_act(m, &h->ln2, BT * C, "ln2");
        model_alloc(m, &h->rstd2, BT, "rstd2", 0);
        model_alloc(m, &h->gate, BT * F, "gate", 0);
        model_alloc(m, &h->up, BT * F, "up", 0);
        model_alloc_act(m, &h->hid, BT * F, "swiglu");
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
    model_alloc(m, &a->dqkv, BT * QKV, "dqkv", 0);
    if (c->qk_norm) model_alloc(m, &a->dqkv_pre, BT * QKV, "dqkv_pre", 0);
    model_alloc(m, &a->dhid, BT * F, "dhid", 0);
    model_alloc(m, &a->dgate, BT * F, "dgate", 0);
    model_alloc(m, &a->dup, BT * F, "dup", 0);
    model_alloc(m, &a->zero_pos, T * C, "zero_pos", 0);  // zero-filled by the allocation, never written
    model_alloc(m, &a->dpos, T * C, "dpos", 0);
    model_alloc(m, &a->cos, T * HS, "rope_cos", 0);
    model_alloc(m, &a->sin, T * HS, "rope_sin", 0);
    if (m->alloc_st != WGT_OK) return m->alloc_st;
    // the RoPE tables, once per model
    float *ct = wgt_malloc(T * HS * sizeof(float)), *st_ = wgt_malloc(T * HS * sizeof(float));
    double *inv_freq = wgt_malloc(HS / 2 * sizeof(double));
    rope_inv_freq(c, inv_freq);
    cpu_rope_tables(ct, st_, (uint32_t)T, (uint32_t)HS, inv_freq);
    free(inv_freq);
    wgt_status st = m->be->upload(m->be, a->cos, ct, T * HS);
    if (st == WGT_OK) st = m->be->upload(m->be, a->sin, st_, T * HS);
    free(ct);
    free(st_);
    return st;
}

// ------------------------------------------------------------------ forward

// x = block input h[l].res; out = next block's input (or res_final):
//   res2 = x + o_proj(attention(rope(qkv(rmsnorm(x)))))
//   out = res2 + down_proj(silu(gate_proj(rmsnorm(res2))) * up_proj(rmsnorm(res2)))
// The attention of block l up to its output: ln1, qkv (rotated), atty, lse (what --recompute
// attention recomputes in the backward).
static void attn_forward(wgt_model *m, int l) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, NH = m->c.n_head, NKV = m->c.n_kv_heads, HS = HS_OF(&m->c),
                   QC = NH * HS, QKV = QC + 2 * NKV * HS, BT = B * T;
    const float eps = (float)m->c.rms_eps;
    const block_params *p = PL(m, l);
    acts *a = A(m);
    const block_acts *h = &a->h[l];
    const size_t nc = (size_t)BT * C;
    // (f16: each saved GEMM input is written into x_c / x_f, then rounded into its f16 tensor)
    wgt_view ln1 = model_act_out(m, h->ln1, a->x_c);
    be->rmsnorm_forward(be, ln1, h->rstd1, h->res, p->ln1_w, BT, C, eps);                     // ln1 [B,T,C]
    model_act_keep(m, h->ln1, ln1, nc);
    const size_t nq = (size_t)BT * QKV;
    wgt_view qkv = model_act_out(m, h->qkv, a->x_q);
    if (m->c.qk_norm) {  // Qwen3: RMSNorm over each q and k head (q_norm, k_norm) before RoPE
        model_matmul(m, h->qkv_pre, h->ln1, qkv_of(p), qkv_bias_of(m, p), BT, C, QKV);       // [B,T,Q+2KV]
        be->qk_norm_forward(be, qkv, h->rstd_qk, h->qkv_pre, p->q_nw, p->k_nw, B, T, NH, NKV, HS, eps, 0.0f);
    } else {
        model_matmul(m, qkv, h->ln1, qkv_of(p), qkv_bias_of(m, p), BT, C, QKV);              // qkv [B,T,Q+2KV]
    }
    be->rope_forward(be, qkv, a->cos, a->sin, m->doc_view, B, T, NH, NKV, HS);                             // q, k rotated
    model_act_keep(m, h->qkv, qkv, nq);
    qkv = model_act_f32(m, h->qkv, a->x_q, nq);  // (f16: attention reads the rounded qkv, as its backward)
    wgt_view atty = model_act_out(m, h->atty, a->x_c);
    be->attention_forward(be, atty, h->lse, qkv, m->doc_view, B, T, NH, NKV, HS, m->drop_p,
                          model_dropout_seed(m, l, 0), (uint32_t)m->c.sliding_window);        // atty [B,T,Q], lse [B,NH,T]
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
    model_matmul(m, a->scratch_c, h->atty, p->o_w, o_bias_of(m, p), BT, QC, C);               // o_proj [B,T,C]
    model_branch_dropout(m, a->scratch_c, l, 1);
    be->residual_forward(be, h->res2, h->res, a->scratch_c, nc);                                // res2 [B,T,C]
    wgt_view ln2 = model_act_out(m, h->ln2, a->x_c);
    be->rmsnorm_forward(be, ln2, h->rstd2, h->res2, p->ln2_w, BT, C, eps);                      // ln2 [B,T,C]
    model_act_keep(m, h->ln2, ln2, nc);
    model_matmul(m, h->gate, h->ln2, p->gate_w, none, BT, C, F);                               // gate [B,T,F]
    model_matmul(m, h->up, h->ln2, p->up_w, none, BT, C, F);                                     // up [B,T,F]
    wgt_view hid = model_act_out(m, h->hid, a->x_f);
    be->swiglu_combine(be, hid, h->gate, h->up, nf);                                             // hid [B,T,F]
    model_act_keep(m, h->hid, hid, nf);
    model_matmul(m, a->scratch_c, h->hid, p->down_w, none, BT, F, C);                        // down_proj [B,T,C]
    model_branch_dropout(m, a->scratch_c, l, 2);
    be->residual_forward(be, out, h->res2, a->scratch_c, (size_t)BT * C);                        // out [B,T,C]
}

static void forward(wgt_model *m) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, BT = B * T, V = m->c.vocab;
    const top_params *p = P(m);
    acts *a = A(m);
    be->embedding_forward(be, a->h[0].res, m->tokens, p->embed, a->zero_pos, B, T, C, V);               // [B,T,C]
    for (int l = 0; l < m->c.n_layer; l++) block_forward(m, l);
    wgt_view lnf = model_act_out(m, a->lnf, a->x_c);
    be->rmsnorm_forward(be, lnf, a->rstdf, a->res_final, p->norm_w, BT, C, (float)m->c.rms_eps);        // [B,T,C]
    model_act_keep(m, a->lnf, lnf, (size_t)BT * C);
    model_head_forward(m, a->lnf, lm_head_of(m, p));                                               // logits [B,T,V]
}

// ------------------------------------------------------------------ backward

// a->dres holds d(out) on entry and d(x) on return; parameter gradients accumulate.
static void block_backward(wgt_model *m, int l) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, F = m->c.d_ff, NH = m->c.n_head, NKV = m->c.n_kv_heads,
                   HS = HS_OF(&m->c), QC = NH * HS, QKV = QC + 2 * NKV * HS, BT = B * T;
    const block_params *p = PL(m, l), *g = GL(m, l);
    acts *a = A(m);
    const block_acts *h = &a->h[l];
    const wgt_view none = model_no_view();
    // MLP: out = res2 + down_proj(silu(gate) * up), gate = gate_proj(ln2), up = up_proj(ln2)
    wgt_view dmlp = model_branch_dropout_grad(m, a->scratch_c, a->dres, l, 2);                   // ddown [B,T,C]
    model_matmul_t(m, a->dhid, dmlp, p->down_w, BT, F, C);                                         // dhid [B,T,F]
    model_matmul_at(m, g->down_w, none, dmlp, h->hid, BT, F, C);
    be->ffn_swiglu_backward(be, a->dgate, a->dup, a->dhid, h->gate, h->up, (size_t)BT * F);  // dgate, dup [B,T,F]
    model_matmul_t(m, a->dtmp, a->dgate, p->gate_w, BT, C, F);
    model_matmul_t(m, a->scratch_c, a->dup, p->up_w, BT, C, F);
    be->add_inplace(be, a->dtmp, a->scratch_c, (size_t)BT * C);                                   // dln2 [B,T,C]
    model_matmul_at(m, g->gate_w, none, a->dgate, h->ln2, BT, C, F);
    model_matmul_at(m, g->up_w, none, a->dup, h->ln2, BT, C, F);
    be->rmsnorm_backward(be, a->dres, g->ln2_w, a->dtmp, h->res2, p->ln2_w, h->rstd2, BT, C);    // dres2 [B,T,C]
    // attention: res2 = x + o_proj(attention(rope(qkv(ln1(x)))))
    wgt_view dattn = model_branch_dropout_grad(m, a->scratch_c, a->dres, l, 1);                  // do_proj [B,T,C]
    model_matmul_t(m, a->dtmp, dattn, p->o_w, BT, QC, C);                                          // datty [B,T,Q]
    model_matmul_at(m, g->o_w, o_bias_of(m, g), dattn, h->atty, BT, QC, C);
    wgt_view atty = model_act_f32(m, h->atty, a->x_c, (size_t)BT * QC);  // (f16: the rounded out, widened)
    wgt_view qkv = model_act_f32(m, h->qkv, a->x_q, (size_t)BT * QKV);
    be->attention_backward(be, a->dqkv, a->dtmp, qkv, atty, h->lse, m->doc_view, B, T, NH, NKV, HS, m->drop_p,
                           model_dropout_seed(m, l, 0), (uint32_t)m->c.sliding_window);                // dqkv (rotated)
    be->rope_backward(be, a->dqkv, a->cos, a->sin, m->doc_view, B, T, NH, NKV, HS);                    // dqkv [B,T,Q+2KV]
    wgt_view dqkv = a->dqkv;
    if (m->c.qk_norm) {  // through q_norm / k_norm: the projection's gradient
        be->qk_norm_backward(be, a->dqkv_pre, g->q_nw, g->k_nw, a->dqkv, h->qkv_pre, p->q_nw, p->k_nw, h->rstd_qk, B, T,
                             NH, NKV, HS, 0.0f);
        dqkv = a->dqkv_pre;
    }
    model_matmul_t(m, a->dtmp, dqkv, qkv_of(p), BT, C, QKV);                                       // dln1 [B,T,C]
    model_matmul_at(m, qkv_of(g), qkv_bias_of(m, g), dqkv, h->ln1, BT, C, QKV);
    be->rmsnorm_backward(be, a->dres, g->ln1_w, a->dtmp, h->res, p->ln1_w, h->rstd1, BT, C);         // dx [B,T,C]
}

static void backward(wgt_model *m) {
    wgt_backend *be = m->be;
    const uint32_t B = m->B, T = m->T, C = m->c.d_model, BT = B * T, V = m->c.vocab;
    const top_params *p = P(m), *g = G(m);
    acts *a = A(m);
    model_head_backward(m, a->dtmp, a->lnf, lm_head_of(m, p), lm_head_of(m, g));                 // dlnf [B,T,C], dlm_head
    be->fill_zero(be, a->dres, (size_t)BT * C);
    be->rmsnorm_backward(be, a->dres, g->norm_w, a->dtmp, a->res_final, p->norm_w, a->rstdf, BT, C);  // [B,T,C]
    for (int l = m->c.n_layer - 1; l >= 0; l--) {
        // --recompute: the shared activations hold the last block's; the others are recomputed
        if (l + 1 < m->c.n_layer && m->recompute == MODEL_RECOMPUTE_BLOCK) block_forward(m, l);
        if (l + 1 < m->c.n_layer && m->recompute == MODEL_RECOMPUTE_ATTENTION) attn_forward(m, l);
        block_backward(m, l);
    }
    if (model_base_frozen(m)) return;  // (LoRA: the embedding is frozen)
    be->fill_zero(be, a->dpos, (size_t)T * C);  // keeps the ignored sum bounded
    be->embedding_backward(be, g->embed, a->dpos, a->dres, m->tokens, B, T, C, V);                    // dembed
}

// ------------------------------------------------------------------ Hugging Face files

// A LLaMA safetensors file shows the sizes but not rope_theta or rms_norm_eps (nor the number of
// heads): guessing them would give a model that computes something else.
static wgt_status config_from_safetensors(model_config *c, const st_file *f, const char *path, int n_head) {
    return wgt_fail(WGT_ERR_ARG, "'%s': a LLaMA checkpoint does not record its heads, RoPE base or RMSNorm epsilon; "
                    "pass its Hugging Face config.json with --config", path);
}

// One rope_scaling / rope_parameters object: its rope_type (or the older "type") must be one this
// build computes, and that type's factors are read (the rest of the object is ignored only where
// transformers ignores it too: rope_theta, handled by the caller).
static wgt_status rope_params_from_hf(model_config *c, const cJSON *rs, const char *what, const char *key) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!t && !strcmp(key, "rope_parameters")) return WGT_OK;  // rope_parameters without a type: the default
    if (!cJSON_IsString(t))
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" has no \"rope_type\" string", what, key);
    int type = -1;
    for (int i = 0; i < (int)(sizeof rope_type_names / sizeof rope_type_names[0]); i++)
        if (!strcmp(t->valuestring, rope_type_names[i])) type = i;
    if (type < 0)
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" has rope_type \"%s\"; this build computes \"default\", "
                        "\"linear\" and \"llama3\" RoPE", what, key, t->valuestring);
    c->rope_scaling = type;
    if (type == WGT_ROPE_DEFAULT) return WGT_OK;
    const cJSON *fac = cJSON_GetObjectItemCaseSensitive(rs, "factor");
    if (!cJSON_IsNumber(fac))
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" (rope_type \"%s\") lacks its \"factor\"", what, key,
                        t->valuestring);
    WGT_TRY(model_hf_double(rs, what, "factor", 1, 0, 1, ROPE_FACTOR_MAX, &c->rope_factor));
    if (type == WGT_ROPE_LLAMA3) {
        WGT_TRY(model_hf_double(rs, what, "low_freq_factor", 1, 0, 1e-30, ROPE_FREQ_FACTOR_MAX, &c->rope_low_freq));
        WGT_TRY(model_hf_double(rs, what, "high_freq_factor", 1, 0, 1e-30, ROPE_FREQ_FACTOR_MAX, &c->rope_high_freq));
        WGT_TRY(model_hf_int(rs, what, "original_max_position_embeddings", 1, 0, 1, 1 << 24, &c->rope_orig_max_pos));
        if (!(c->rope_high_freq > c->rope_low_freq))
            return wgt_fail(WGT_ERR_CONFIG, "%s: %s.high_freq_factor (%g) must be above low_freq_factor (%g)", what, key,
                            c->rope_high_freq, c->rope_low_freq);
    }
    return WGT_OK;
}

// The RoPE settings: rope_theta at the top level and/or in the newer "rope_parameters"; the
// scaling in "rope_scaling" (Llama 3.1's config.json) or "rope_parameters". Given twice, they
// must agree.
static wgt_status rope_from_hf(model_config *c, const cJSON *o, const char *what) {
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(o, "rope_parameters");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(o, "rope_scaling");
    double theta_default = 10000.0;
    if (rp && !cJSON_IsNull(rp) && !cJSON_IsObject(rp))
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"rope_parameters\" must be an object ({\"rope_type\": \"default\", "
                        "\"rope_theta\": ...}), got %s", what, cJSON_IsNumber(rp) ? "a number" : "another JSON value");
    if (rs && !cJSON_IsNull(rs) && !cJSON_IsObject(rs))
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"rope_scaling\" must be an object or null", what);
    model_config from_rp = *c;
    if (cJSON_IsObject(rp)) {
        WGT_TRY(rope_params_from_hf(&from_rp, rp, what, "rope_parameters"));
        WGT_TRY(model_hf_double(rp, what, "rope_theta", 0, theta_default, 1e-30, 1e12, &theta_default));
    }
    WGT_TRY(model_hf_double(o, what, "rope_theta", 0, theta_default, 1e-30, 1e12, &c->rope_theta));
    // both spellings given: they must agree (which one Hugging Face reads depends on its version)
    if (cJSON_IsObject(rp) && c->rope_theta != theta_default &&
        cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(rp, "rope_theta")))
        return wgt_fail(WGT_ERR_CONFIG, "%s: rope_theta is %g but rope_parameters.rope_theta is %g; give one RoPE base "
                        "(or the same in both)", what, c->rope_theta, theta_default);
    if (cJSON_IsObject(rs)) WGT_TRY(rope_params_from_hf(c, rs, what, "rope_scaling"));
    if (cJSON_IsObject(rp)) {
        if (cJSON_IsObject(rs) && (from_rp.rope_scaling != c->rope_scaling || from_rp.rope_factor != c->rope_factor ||
                                   from_rp.rope_low_freq != c->rope_low_freq ||
                                   from_rp.rope_high_freq != c->rope_high_freq ||
                                   from_rp.rope_orig_max_pos != c->rope_orig_max_pos))
            return wgt_fail(WGT_ERR_CONFIG, "%s: \"rope_scaling\" and \"rope_parameters\" describe different RoPE; "
                            "give one (or the same in both)", what);
        c->rope_scaling = from_rp.rope_scaling;
        c->rope_factor = from_rp.rope_factor;
        c->rope_low_freq = from_rp.rope_low_freq;
        c->rope_high_freq = from_rp.rope_high_freq;
        c->rope_orig_max_pos = from_rp.rope_orig_max_pos;
    }
    return WGT_OK;
}

// The window of a Mistral config.json (0: none): sliding_window, whose default when absent is
// 4096 and null is none. Qwen2Config's window (use_sliding_window true) covers only the layers
// from max_window_layers on, which this build does not represent: refused (the released Qwen2 and
// Qwen2.5 models have use_sliding_window false, and their sliding_window is then unused).
static wgt_status sliding_from_hf(model_config *c, const cJSON *o, const char *what, sliding_kind k) {
    c->sliding_window = 0;
    if (k == SW_QWEN2) {
        const cJSON *lt = cJSON_GetObjectItemCaseSensitive(o, "layer_types"), *e;
        if (lt && !cJSON_IsNull(lt) && !cJSON_IsArray(lt))
            return wgt_fail(WGT_ERR_CONFIG, "%s: \"layer_types\" must be a list of strings", what);
        const cJSON *list = cJSON_IsArray(lt) ? lt : NULL;
        cJSON_ArrayForEach(e, list) {
            if (!cJSON_IsString(e) || strcmp(e->valuestring, "full_attention"))
                return wgt_fail(WGT_ERR_CONFIG, "%s: \"layer_types\" has an entry other than \"full_attention\"; "
                                "sliding-window layers are not supported in this family", what);
        }
        return model_hf_expect(o, what, "use_sliding_window", "false", 1,
                               "a window on the layers from max_window_layers on is not supported");
    }
    if (k == SW_NONE) return WGT_OK;
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "sliding_window"))) return WGT_OK;
    return model_hf_int(o, what, "sliding_window", 0, 4096, 1, 1 << 24, &c->sliding_window);
}

// LlamaConfig / MistralConfig / Qwen2Config: hidden_size, intermediate_size,
// num_attention_heads, num_hidden_layers, vocab_size; num_key_value_heads (absent: = heads),
// max_position_embeddings and rms_norm_eps (each class's default), rope_theta (10000),
// tie_word_embeddings (false), and the family's biases and window: Hugging Face's defaults.
static wgt_status config_from_hf(model_config *c, const cJSON *o, const char *what) {
    const variant *v = variant_of(c);
    WGT_TRY(model_hf_int(o, what, "hidden_size", 1, 0, 1, 65536, &c->d_model));
    WGT_TRY(model_hf_int(o, what, "intermediate_size", 1, 0, 1, 262144, &c->d_ff));
    WGT_TRY(model_hf_int(o, what, "num_attention_heads", 1, 0, 1, 4096, &c->n_head));
    WGT_TRY(model_hf_int(o, what, "num_hidden_layers", 1, 0, 1, 256, &c->n_layer));
    WGT_TRY(model_hf_int(o, what, "vocab_size", 1, 0, 1, TOKEN_MAX_VOCAB, &c->vocab));
    WGT_TRY(model_hf_int(o, what, "num_key_value_heads", 0, c->n_head, 1, 4096, &c->n_kv_heads));
    WGT_TRY(model_hf_int(o, what, "max_position_embeddings", 0, v->max_pos_default, 1, 1 << 20, &c->max_seq));
    WGT_TRY(model_hf_double(o, what, "rms_norm_eps", 0, v->eps_default, 1e-30, RMS_EPS_MAX, &c->rms_eps));
    WGT_TRY(model_hf_bool(o, what, "tie_word_embeddings", 0, &c->tie_embeddings));
    WGT_TRY(rope_from_hf(c, o, what));
    WGT_TRY(model_hf_expect(o, what, "hidden_act", "silu", 0, "the MLP is SwiGLU: silu(gate) * up"));
    if (v->qkv_bias < 0) {  // LLaMA: attention_bias on q, k, v and o together
        int ab;
        WGT_TRY(model_hf_bool(o, what, "attention_bias", 0, &ab));
        c->qkv_bias = c->o_bias = ab;
    } else {
        c->qkv_bias = v->qkv_bias;
        c->o_bias = v->o_bias;
    }
    WGT_TRY(model_hf_expect(o, what, "mlp_bias", "false", 1, "the MLP projections have no bias here"));
    c->qk_norm = v->qk_norm;
    WGT_TRY(sliding_from_hf(c, o, what, v->sliding));
    // the sizes against each other, in Hugging Face's names. head_dim (absent: the config class's
    // default, hidden_size / num_attention_heads for most) is kept only where it differs from that
    int head_dim = v->head_dim_default;
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(o, "head_dim");
    if (hd && !cJSON_IsNull(hd)) WGT_TRY(model_hf_int(o, what, "head_dim", 1, 0, 1, 1 << 20, &head_dim));
    if (!head_dim && c->d_model % c->n_head)
        return wgt_fail(WGT_ERR_CONFIG, "%s: num_attention_heads (%d) does not divide hidden_size (%d) and there is no "
                        "head_dim", what, c->n_head, c->d_model);
    if (c->n_head % c->n_kv_heads)
        return wgt_fail(WGT_ERR_CONFIG, "%s: num_key_value_heads (%d) does not divide num_attention_heads (%d)", what,
                        c->n_kv_heads, c->n_head);
    c->head_dim = head_dim && (int64_t)head_dim * c->n_head != c->d_model ? head_dim : 0;
    const int hs = HS_OF(c);
    const char *hs_name = head_dim ? "head_dim" : "hidden_size / num_attention_heads";
    if (hs % 2)
        return wgt_fail(WGT_ERR_CONFIG, "%s: the head size %s = %d is odd; RoPE needs an even head size", what, hs_name,
                        hs);
    if (hs > MODEL_HEAD_SIZE_MAX)
        return wgt_fail(WGT_ERR_CONFIG, "%s: the head size %s = %d is above the supported %d", what, hs_name, hs,
                        MODEL_HEAD_SIZE_MAX);
    return WGT_OK;
}

static cJSON *config_to_hf(const model_config *c) {
    const variant *v = variant_of(c);
    cJSON *o = model_hf_config_new(v->hf_class, v->name);
    model_hf_add_number(o, "vocab_size", c->vocab);
    model_hf_add_number(o, "hidden_size", c->d_model);
    model_hf_add_number(o, "intermediate_size", c->d_ff);
    model_hf_add_number(o, "num_hidden_layers", c->n_layer);
    model_hf_add_number(o, "num_attention_heads", c->n_head);
    model_hf_add_number(o, "num_key_value_heads", c->n_kv_heads);
    model_hf_add_number(o, "head_dim", HS_OF(c));
    model_hf_add_number(o, "max_position_embeddings", c->max_seq);
    model_hf_add_number(o, "rms_norm_eps", c->rms_eps);
    model_hf_add_number(o, "rope_theta", c->rope_theta);
    if (c->rope_scaling == WGT_ROPE_DEFAULT) {
        cJSON_AddNullToObject(o, "rope_scaling");
    } else {  // as Llama 3.1's config.json writes it
        cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", rope_type_names[c->rope_scaling]);
        model_hf_add_number(rs, "factor", c->rope_factor);
        if (c->rope_scaling == WGT_ROPE_LLAMA3) {
            model_hf_add_number(rs, "low_freq_factor", c->rope_low_freq);
            model_hf_add_number(rs, "high_freq_factor", c->rope_high_freq);
            model_hf_add_number(rs, "original_max_position_embeddings", c->rope_orig_max_pos);
        }
    }
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    if (v->qkv_bias < 0) cJSON_AddBoolToObject(o, "attention_bias", c->qkv_bias);
    if (!strcmp(v->name, "llama")) {
        cJSON_AddBoolToObject(o, "mlp_bias", 0);
        model_hf_add_number(o, "pretraining_tp", 1);
    }
    if (v->sliding == SW_MISTRAL) {
        if (c->sliding_window) model_hf_add_number(o, "sliding_window", c->sliding_window);
        else cJSON_AddNullToObject(o, "sliding_window");
    }
    if (v->sliding == SW_QWEN2) {
        cJSON_AddBoolToObject(o, "use_sliding_window", 0);
        cJSON_AddNullToObject(o, "sliding_window");
        model_hf_add_number(o, "max_window_layers", c->n_layer);
    }
    model_hf_add_number(o, "attention_dropout", 0);
    model_hf_add_number(o, "initializer_range", 0.02);
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    return o;
}

#define LLAMA_ARCH(var, NAME)                                     \
    const model_arch var = {                                      \
        .name = NAME,                                             \
        .tensors = tensors,                                       \
        .n_tensors = sizeof tensors / sizeof tensors[0],          \
        .globals_size = sizeof(top_params),                       \
        .layer_size = sizeof(block_params),                       \
        .config_fields = config_fields,                           \
        .n_config_fields = sizeof config_fields / sizeof config_fields[0], \
        .hf_prefix = NULL,                                        \
        .hf_ignored = hf_ignored,                                 \
        .n_hf_ignored = sizeof hf_ignored / sizeof hf_ignored[0], \
        .config_check = config_check,                             \
        .tensor_absent = tensor_absent,                           \
        .absent_copy_of = absent_copy_of,                         \
        .config_from_safetensors = config_from_safetensors,       \
        .hf_model_type = NAME,                                    \
        .config_from_hf = config_from_hf,                         \
        .config_to_hf = config_to_hf,                             \
        .defaults = defaults,                                     \
        .init = init,                                             \
        .forward = forward,                                       \
        .backward = backward,                                     \
    }
// one descriptor per line of `variants`
LLAMA_ARCH(model_arch_llama, "llama");
LLAMA_ARCH(model_arch_mistral, "mistral");
LLAMA_ARCH(model_arch_qwen2, "qwen2");
LLAMA_ARCH(model_arch_qwen3, "qwen3");
