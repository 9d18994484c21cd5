// decoder.h — the pre-norm decoder that the LLaMA-style families share (llama.c: LLaMA, Mistral,
// Qwen2, Qwen3; gemma3.c: Gemma-3), so that each family file keeps only what is its own: the
// tensor table, the config and its Hugging Face form, and a decoder_family saying how its
// computation differs. (Generation's cached decoding is decode.c, not this.) Per block, with x
// the residual stream:
//   h = x + [attn_out_norm](o_proj(attention(rope([qk_norm](q|k|v_proj(rmsnorm(x)))))))
//   out = h + [mlp_out_norm](down_proj(act(gate_proj(rmsnorm(h))) * up_proj(rmsnorm(h))))
// and logits = lm_head(rmsnorm(x_L)); [..] are a family's options, act is SiLU or tanh-GeLU, and
// the token lookup may be scaled by sqrt(C). The q, k and v projections are stored packed
// (MODEL_T_PACKED): one matmul writes the q | k | v rows that the RoPE and attention ops take.
// There is no position embedding: the lookup is embedding_forward with an all-zero position
// table (x + 0 = x exactly in IEEE arithmetic), whose gradient embedding_backward writes into a
// scratch nobody reads.
#ifndef WGT_MODEL_DECODER_H
#define WGT_MODEL_DECODER_H
#include "model/model_impl.h"

// The global tensors, alike in these families: their tables' globals struct.
typedef struct {
    wgt_view embed;    // [V, C]: the token embedding (and the lm_head when tied)
    wgt_view norm_w;   // [C] the final norm (model.norm)
    wgt_view lm_head;  // [V, C]; empty when tied (tie_embeddings)
} decoder_top;

// One block's weights, or their gradients, by their role; a family fills it from its own
// per-layer struct. A tensor the family or config does not have is an empty view.
typedef struct {
    wgt_view ln1_w;         // [C] the norm before the attention (input_layernorm)
    wgt_view qkv_w, qkv_b;  // [Q + 2 KV, C] the packed q | k | v projection (Q = NH x HS, KV = NKV x HS);
                            // [Q + 2 KV] its bias, or no view
    wgt_view q_nw, k_nw;    // [HS], [HS] the per-head norms of q and k (qk_norm)
    wgt_view o_w, o_b;      // [C, Q]; [C] its bias, or no view
    wgt_view attn_out_w;    // [C] the norm on the attention's output (sandwich)
    wgt_view ln2_w;         // [C] the norm before the MLP
    wgt_view gate_w, up_w;  // [F, C], [F, C]
    wgt_view down_w;        // [C, F]
    wgt_view mlp_out_w;     // [C] the norm on the MLP's output (sandwich)
} decoder_weights;

// What a family's computation does differently.
typedef struct {
    // Block l's weights (grad 0) or their gradients (grad 1).
    decoder_weights (*weights)(const wgt_model *m, int l, int grad);
    // NULL: every layer attends with the config's sliding_window (0: no window) and RoPE base
    // rope_theta (with its scaling). Else the layers where it returns 1 attend with the window and
    // RoPE base rope_local_theta, the others without a window and with rope_theta.
    int (*sliding)(const model_config *c, int l);
    int qk_norm;       // 1: RMSNorm over each q and k head before RoPE always (else as c->qk_norm says)
    int sandwich;      // 1: an RMSNorm on each branch's output before its residual add
    int geglu;         // 1: the gated MLP's activation is the tanh GeLU (GeGLU); 0: SiLU (SwiGLU)
    int embed_scaled;  // 1: the token lookup is multiplied by sqrt(C), rounded to f32
} decoder_family;

// The model_arch entries: init allocates the activations of family f (and uploads the RoPE
// tables); forward and backward are the passes above.
wgt_status decoder_init(wgt_model *m, const decoder_family *f);
void decoder_forward(wgt_model *m);
void decoder_backward(wgt_model *m);

// ---- what these families' configs, tables and descriptors have alike
// The first rows of their config_fields: the model.h fields they share.
#define DECODER_CONFIG_FIELDS                                                                  \
    {"n_kv_heads", offsetof(model_config, n_kv_heads), MODEL_CF_INT, 4096, 0},                 \
    {"rope_theta", offsetof(model_config, rope_theta), MODEL_CF_DOUBLE, 1e12, 0},              \
    {"rms_eps", offsetof(model_config, rms_eps), MODEL_CF_DOUBLE, DECODER_RMS_EPS_MAX, 0},     \
    {"tie_embeddings", offsetof(model_config, tie_embeddings), MODEL_CF_INT, 1, 0}
// Rows of their tensor tables, in the Hugging Face names both classes use (LlamaForCausalLM's;
// Gemma3ForCausalLM keeps them): matrices and the embedding N(0, 0.02) and decayed, every one
// split by the ops that touch it where it exceeds one storage binding (the embedding kernels
// into windows of vocabulary rows, the lm_head GEMMs into chunks). BLOCK is the family's
// per-layer struct: its views q_w, k_w, v_w, o_w and gate_w, up_w, down_w.
#define DECODER_T_EMBED                                                                               \
    {"model.embed_tokens.weight", 0, {DIM_V, DIM_C}, MODEL_T_DECAY | MODEL_T_EMBEDDING | MODEL_T_MAY_EXCEED_BINDING, \
     MODEL_INIT_NORMAL, offsetof(decoder_top, embed)}
// q [Q, C], k and v [KV, C] packed after it (one [Q + 2 KV, C] matrix), o [C, Q]
#define DECODER_T_ATTN_PROJ(BLOCK)                                                                         \
    {"model.layers.%d.self_attn.q_proj.weight", 1, {DIM_Q, DIM_C}, MODEL_T_DECAY | MODEL_T_MAY_EXCEED_BINDING, \
     MODEL_INIT_NORMAL, offsetof(BLOCK, q_w)},                                                             \
    {"model.layers.%d.self_attn.k_proj.weight", 1, {DIM_KV, DIM_C},                                        \
     MODEL_T_DECAY | MODEL_T_MAY_EXCEED_BINDING | MODEL_T_PACKED, MODEL_INIT_NORMAL, offsetof(BLOCK, k_w)}, \
    {"model.layers.%d.self_attn.v_proj.weight", 1, {DIM_KV, DIM_C},                                        \
     MODEL_T_DECAY | MODEL_T_MAY_EXCEED_BINDING | MODEL_T_PACKED, MODEL_INIT_NORMAL, offsetof(BLOCK, v_w)}, \
    {"model.layers.%d.self_attn.o_proj.weight", 1, {DIM_C, DIM_Q}, MODEL_T_DECAY | MODEL_T_MAY_EXCEED_BINDING, \
     MODEL_INIT_NORMAL, offsetof(BLOCK, o_w)}
// gate [F, C], up [F, C], down [C, F]
#define DECODER_T_MLP(BLOCK)                                                                             \
    {"model.layers.%d.mlp.gate_proj.weight", 1, {DIM_F, DIM_C}, MODEL_T_DECAY | MODEL_T_MAY_EXCEED_BINDING, \
     MODEL_INIT_NORMAL, offsetof(BLOCK, gate_w)},                                                        \
    {"model.layers.%d.mlp.up_proj.weight", 1, {DIM_F, DIM_C}, MODEL_T_DECAY | MODEL_T_MAY_EXCEED_BINDING,   \
     MODEL_INIT_NORMAL, offsetof(BLOCK, up_w)},                                                          \
    {"model.layers.%d.mlp.down_proj.weight", 1, {DIM_C, DIM_F}, MODEL_T_DECAY | MODEL_T_MAY_EXCEED_BINDING, \
     MODEL_INIT_NORMAL, offsetof(BLOCK, down_w)}
// [V, C], absent when tied (decoder_lm_head_absent)
#define DECODER_T_LM_HEAD                                                                              \
    {"lm_head.weight", 0, {DIM_V, DIM_C}, MODEL_T_DECAY | MODEL_T_MAY_EXCEED_BINDING, MODEL_INIT_NORMAL, \
     offsetof(decoder_top, lm_head)}
// A family's descriptor, from the statics of its file that these names give (tensors,
// config_fields, config_check, tensor_absent, absent_copy_of, config_from_hf, config_to_hf,
// defaults, init) and its Hugging Face model_type NAME; IGNORED, N_IGNORED: its hf_ignored.
#define DECODER_ARCH(var, NAME, IGNORED, N_IGNORED)                       \
    const model_arch var = {                                              \
        .name = NAME,                                                     \
        .tensors = tensors,                                               \
        .n_tensors = sizeof tensors / sizeof tensors[0],                  \
        .globals_size = sizeof(decoder_top),                              \
        .layer_size = sizeof(block_params),                               \
        .config_fields = config_fields,                                   \
        .n_config_fields = sizeof config_fields / sizeof config_fields[0], \
        .hf_prefix = NULL,                                                \
        .hf_ignored = IGNORED,                                            \
        .n_hf_ignored = N_IGNORED,                                        \
        .config_check = config_check,                                     \
        .tensor_absent = tensor_absent,                                   \
        .absent_copy_of = absent_copy_of,                                 \
        .config_from_safetensors = decoder_config_from_safetensors,       \
        .hf_model_type = NAME,                                            \
        .config_from_hf = config_from_hf,                                 \
        .config_to_hf = config_to_hf,                                     \
        .defaults = defaults,                                             \
        .init = init,                                                     \
        .forward = decoder_forward,                                       \
        .backward = decoder_backward,                                     \
    }

// The checks that hold in each: n_kv_heads divides n_head, an even head size, head_dim set only
// where it is not d_model / n_head, rms_eps in [1e-30, DECODER_RMS_EPS_MAX], tie_embeddings 0 or 1.
#define DECODER_RMS_EPS_MAX 0.5
wgt_status decoder_config_check(const model_config *c);
// The tied lm_head: why a config has no lm_head.weight (NULL: it has one), and the index in
// `tensors` of the embedding that a file's lm_head.weight must then be an exact copy of (-1:
// d is not the lm_head).
const char *decoder_lm_head_absent(const model_config *c, const model_tensor_desc *d);
int decoder_lm_head_copy_of(const model_tensor_desc *tensors, int n, const model_tensor_desc *d);
// Hugging Face config.json: the sizes every such config has (hidden_size, intermediate_size,
// num_attention_heads, num_hidden_layers, vocab_size, num_key_value_heads, max_position_embeddings,
// rms_norm_eps, tie_word_embeddings), absent optional ones taking the config class's defaults
// (kv_heads_default 0: num_attention_heads).
wgt_status decoder_sizes_from_hf(model_config *c, const cJSON *o, const char *what, int kv_heads_default,
                                 int max_pos_default, double eps_default, int tie_default);
// Writes the first seven of them (through num_key_value_heads) and head_dim.
void decoder_sizes_to_hf(cJSON *o, const model_config *c);
// A safetensors file of these families shows the sizes but not the heads, the RoPE base(s), the
// window or the norm epsilon: guessing them would give a model that computes something else, so
// this refuses and asks for the config.json.
wgt_status decoder_config_from_safetensors(model_config *c, const st_file *f, const char *path, int n_head);
#endif
