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
// and logits = lm_head(rmsnorm(x_L)). The activations, forward and backward are the decoder that
// gemma3.c shares (decoder.c); this file holds the tensors, the config and its Hugging Face form.
#include <stddef.h>
#include <string.h>
#include "backend/cpu/ops.h"  // WGT_ROPE_*: the rope types
#include "model/decoder.h"

// ------------------------------------------------------------------ config

#define ROPE_FACTOR_MAX 1e6       // rope_scaling.factor: 1 .. this
#define ROPE_FREQ_FACTOR_MAX 1e6  // low_freq_factor, high_freq_factor: above 0 .. this

// (the fields from rope_scaling on came later: a run config without them reads them as 0)
static const model_config_field config_fields[] = {
    DECODER_CONFIG_FIELDS,  // n_kv_heads, rope_theta, rms_eps, tie_embeddings
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
    WGT_TRY(decoder_config_check(c));
    if (!(c->rope_theta > 0)) return wgt_fail(WGT_ERR_CONFIG, "rope_theta must be above 0, got %g", c->rope_theta);
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
    wgt_view q_w, k_w, v_w; // [Q, C], [KV, C], [KV, C]: packed, one [Q + 2 KV, C] matrix (block_weights);
                            // Q = NH x HS (= C unless head_dim is set), KV = NKV x HS
    wgt_view o_w;           // [C, Q]
    wgt_view gate_w, up_w;  // [F, C], [F, C]
    wgt_view down_w;        // [C, F]
    wgt_view ln1_w, ln2_w;  // [C] input_layernorm, [C] post_attention_layernorm
    wgt_view q_b, k_b, v_b; // [Q], [KV], [KV]: packed, one [Q + 2 KV] bias (qkv_bias; else empty)
    wgt_view o_b;           // [C] (o_bias; else empty)
    wgt_view q_nw, k_nw;    // [HS], [HS] q_norm, k_norm (qk_norm; else empty)
} block_params;

enum { X = MODEL_T_MAY_EXCEED_BINDING, PK = MODEL_T_PACKED };
#define BLK(f) offsetof(block_params, f)
// In the order of LlamaForCausalLM's state dict (the DECODER_T_* rows: decoder.h). Matrices and the
// embedding are decayed, norm weights not; everything is N(0, 0.02) (initializer_range) but the
// norm weights, which are 1. Every op that touches a tensor here splits it where it exceeds one
// storage binding but the per-head norm weights, which are HS long.
static const model_tensor_desc tensors[] = {
    DECODER_T_EMBED,                    // model.embed_tokens.weight
    DECODER_T_ATTN_PROJ(block_params),  // model.layers.%d.self_attn.{q,k,v,o}_proj.weight
    DECODER_T_MLP(block_params),        // model.layers.%d.mlp.{gate,up,down}_proj.weight
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
    {"model.norm.weight", 0, {DIM_C}, X, MODEL_INIT_ONES, offsetof(decoder_top, norm_w)},
    DECODER_T_LM_HEAD,  // lm_head.weight, absent when tied
};

// A tied config has no lm_head.weight; a file may still hold one that is an exact copy of the
// embedding (what a tied model's state dict holds).
static const char *tensor_absent(const model_config *c, const model_tensor_desc *d) {
    const char *tied = decoder_lm_head_absent(c, d);
    if (tied) return tied;
    if (d->per_layer && (d->field == BLK(q_b) || d->field == BLK(k_b) || d->field == BLK(v_b)) && !c->qkv_bias)
        return "its q, k and v projections have no bias (qkv_bias 0; attention_bias false in a LLaMA config.json)";
    if (d->per_layer && d->field == BLK(o_b) && !c->o_bias)
        return "its o projection has no bias (o_bias 0; attention_bias false in a LLaMA config.json)";
    if (d->per_layer && (d->field == BLK(q_nw) || d->field == BLK(k_nw)) && !c->qk_norm)
        return "it has no per-head q and k norms (qk_norm 0: only Qwen3 has them)";
    return NULL;
}
static int absent_copy_of(const model_config *c, const model_tensor_desc *d) {
    return decoder_lm_head_copy_of(tensors, (int)(sizeof tensors / sizeof tensors[0]), d);
}

// Older Hugging Face LLaMA files also hold each layer's rotary inverse frequencies (a buffer).
static const model_hf_name hf_ignored[] = {
    {"model.layers.%d.self_attn.rotary_emb.inv_freq", 1, NULL},
};

// ------------------------------------------------------------------ the computation (decoder.c)

// Block l's tensors (grad 0) or their gradients (grad 1) by their role in the decoder: the q, k, v
// projection packed into one [Q + 2 KV, C] matrix, the biases where the config has them.
static decoder_weights block_weights(const wgt_model *m, int l, int grad) {
    const block_params *b = (const block_params *)(grad ? m->gl : m->pl) + l;
    return (decoder_weights){
        .ln1_w = b->ln1_w,
        .qkv_w = model_packed_view(b->q_w, b->k_w, b->v_w, "the q, k and v projections are not packed"),
        .qkv_b = m->c.qkv_bias ? model_packed_view(b->q_b, b->k_b, b->v_b, "the q, k and v biases are not packed")
                               : model_no_view(),
        .q_nw = b->q_nw, .k_nw = b->k_nw,
        .o_w = b->o_w, .o_b = m->c.o_bias ? b->o_b : model_no_view(),
        .ln2_w = b->ln2_w, .gate_w = b->gate_w, .up_w = b->up_w, .down_w = b->down_w,
    };
}

// one window (Mistral's, or none) and one RoPE base for every layer; the q / k head norms where
// the config has them (Qwen3); SwiGLU; the plain token lookup
static const decoder_family family = {.weights = block_weights, .sliding = NULL, .qk_norm = 0, .sandwich = 0,
                                      .geglu = 0, .embed_scaled = 0};
static wgt_status init(wgt_model *m) { return decoder_init(m, &family); }

// ------------------------------------------------------------------ Hugging Face files

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
    WGT_TRY(decoder_sizes_from_hf(c, o, what, 0, v->max_pos_default, v->eps_default, 0));
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
    const int hs = model_head_size(c);
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
    decoder_sizes_to_hf(o, c);
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

// one descriptor per line of `variants`
#define LLAMA_ARCH(var, NAME) DECODER_ARCH(var, NAME, hf_ignored, sizeof hf_ignored / sizeof hf_ignored[0])
LLAMA_ARCH(model_arch_llama, "llama");
LLAMA_ARCH(model_arch_mistral, "mistral");
LLAMA_ARCH(model_arch_qwen2, "qwen2");
LLAMA_ARCH(model_arch_qwen3, "qwen3");
