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
// The activations, forward and backward are the decoder that llama.c shares (decoder.c, with the
// options above); this file holds the tensors, the config and its Hugging Face form.
#include <stddef.h>
#include <string.h>
#include "model/decoder.h"


// ------------------------------------------------------------------ config

static const model_config_field config_fields[] = {
    DECODER_CONFIG_FIELDS,  // n_kv_heads, rope_theta (the full-attention layers'), rms_eps, tie_embeddings
    {"head_dim", offsetof(model_config, head_dim), MODEL_CF_INT, 4096, 0},
    {"sliding_window", offsetof(model_config, sliding_window), MODEL_CF_INT, 1 << 24, 0},
    {"rope_local_theta", offsetof(model_config, rope_local_theta), MODEL_CF_DOUBLE, 1e12, 0},
    {"sliding_pattern", offsetof(model_config, sliding_pattern), MODEL_CF_INT, 256, 0},
};

// Layer l has sliding-window attention (else full).
static int is_sliding(const model_config *c, int l) { return c->sliding_pattern > 1 && (l + 1) % c->sliding_pattern; }

static wgt_status config_check(const model_config *c) {
    WGT_TRY(decoder_config_check(c));
    if (!(c->rope_theta > 0) || !(c->rope_local_theta > 0))
        return wgt_fail(WGT_ERR_CONFIG, "rope_theta and rope_local_theta must be above 0, got %g and %g", c->rope_theta,
                        c->rope_local_theta);
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

enum { P1 = MODEL_T_HF_PLUS_ONE };
#define BLK(f) offsetof(block_params, f)
// Gemma3ForCausalLM's state dict (the DECODER_T_* rows: decoder.h). Matrices and the embedding
// N(0, 0.02), decayed; norm weights w = 0 at init (held as 1 + w = 1), not decayed.
static const model_tensor_desc tensors[] = {
    DECODER_T_EMBED,                    // model.embed_tokens.weight
    DECODER_T_ATTN_PROJ(block_params),  // model.layers.%d.self_attn.{q,k,v,o}_proj.weight
    {"model.layers.%d.self_attn.q_norm.weight", 1, {DIM_HS}, P1, MODEL_INIT_ONES, BLK(q_nw)},
    {"model.layers.%d.self_attn.k_norm.weight", 1, {DIM_HS}, P1, MODEL_INIT_ONES, BLK(k_nw)},
    DECODER_T_MLP(block_params),        // model.layers.%d.mlp.{gate,up,down}_proj.weight
    {"model.layers.%d.input_layernorm.weight", 1, {DIM_C}, P1, MODEL_INIT_ONES, BLK(ln_in)},
    {"model.layers.%d.post_attention_layernorm.weight", 1, {DIM_C}, P1, MODEL_INIT_ONES, BLK(ln_pa)},
    {"model.layers.%d.pre_feedforward_layernorm.weight", 1, {DIM_C}, P1, MODEL_INIT_ONES, BLK(ln_pf)},
    {"model.layers.%d.post_feedforward_layernorm.weight", 1, {DIM_C}, P1, MODEL_INIT_ONES, BLK(ln_pff)},
    {"model.norm.weight", 0, {DIM_C}, P1, MODEL_INIT_ONES, offsetof(decoder_top, norm_w)},
    DECODER_T_LM_HEAD,  // lm_head.weight, absent when tied
};

static const char *tensor_absent(const model_config *c, const model_tensor_desc *d) {
    return decoder_lm_head_absent(c, d);
}
static int absent_copy_of(const model_config *c, const model_tensor_desc *d) {
    return decoder_lm_head_copy_of(tensors, (int)(sizeof tensors / sizeof tensors[0]), d);
}

// ------------------------------------------------------------------ the computation (decoder.c)

// Block l's tensors (grad 0) or their gradients (grad 1) by their role in the decoder; no biases.
static decoder_weights block_weights(const wgt_model *m, int l, int grad) {
    const block_params *b = (const block_params *)(grad ? m->gl : m->pl) + l;
    return (decoder_weights){
        .ln1_w = b->ln_in,
        .qkv_w = model_packed_view(b->q_w, b->k_w, b->v_w, "the q, k and v projections are not packed"),
        .qkv_b = model_no_view(),
        .q_nw = b->q_nw, .k_nw = b->k_nw,
        .o_w = b->o_w, .o_b = model_no_view(), .attn_out_w = b->ln_pa,
        .ln2_w = b->ln_pf, .gate_w = b->gate_w, .up_w = b->up_w, .down_w = b->down_w, .mlp_out_w = b->ln_pff,
    };
}

// sliding-window layers with their own RoPE base between the full ones; q / k head norms; a norm
// on each branch's output; GeGLU; the token lookup times sqrt(hidden)
static const decoder_family family = {.weights = block_weights, .sliding = is_sliding, .qk_norm = 1, .sandwich = 1,
                                      .geglu = 1, .embed_scaled = 1};
static wgt_status init(wgt_model *m) { return decoder_init(m, &family); }

// ------------------------------------------------------------------ Hugging Face files

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
    WGT_TRY(decoder_sizes_from_hf(c, o, what, 4, 131072, 1e-6, 1));
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
    decoder_sizes_to_hf(o, c);
    model_hf_add_number(o, "query_pre_attn_scalar", model_head_size(c));
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

DECODER_ARCH(model_arch_gemma3_text, "gemma3_text", NULL, 0);
