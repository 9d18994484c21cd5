// model.h — the model interface: everything the trainer, checkpoints and the commands (train,
// grad, bench, sample, eval) know of a model. A family of models (GPT-2 is the first) is a
// model_arch found by name; a model_config names its family and sizes and travels as JSON in
// config.json and checkpoints; a model's parameters are a table of tensors with Hugging Face
// names. How to add a family: docs/adding-a-model.md.
#ifndef WGT_MODEL_H
#define WGT_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "backend/backend.h"

#define MODEL_ARCH_MAX 16
// The family of configs that predate the "arch" field, and of `wgtrain grad` without --arch.
#define MODEL_ARCH_DEFAULT "gpt2"

typedef struct {
    char arch[MODEL_ARCH_MAX];  // the family, e.g. "gpt2" (model_arch_find)
    // sizes every family has
    int n_layer;  // L: transformer blocks
    int n_head;   // NH: attention heads
    int d_model;  // C: embedding width
    int d_ff;     // F: MLP hidden width
    int vocab;    // V
    int max_seq;  // maxT: the longest sequence the model takes
    // Family-specific fields go below this line, each with a line in its family's config field
    // table so that JSON, comparison and validation handle it; 0 in families that do not use it
    // (model_config_check refuses a nonzero one).
    // LLaMA (llama.c):
    int n_kv_heads;       // NKV: key/value heads (grouped-query attention), dividing n_head
    double rope_theta;    // RoPE base
    double rms_eps;       // RMSNorm epsilon
    int tie_embeddings;   // 1: lm_head is the token embedding (no lm_head.weight)
    // RoPE scaling (Hugging Face's rope_scaling): 0 none, 1 linear, 2 llama3 (WGT_ROPE_* of
    // backend/cpu/ops.h); the factors of the type (0 where the type has none)
    int rope_scaling;
    double rope_factor;       // linear, llama3: factor
    double rope_low_freq;     // llama3: low_freq_factor
    double rope_high_freq;    // llama3: high_freq_factor
    int rope_orig_max_pos;    // llama3: original_max_position_embeddings
    int qkv_bias;             // 1: the q, k, v projections have biases (Qwen2; LLaMA's attention_bias)
    int o_bias;               // 1: the o projection has a bias (LLaMA's attention_bias)
    int sliding_window;       // Mistral, Gemma-3: the attention window (0: none): query t sees keys
                              // t - window + 1 .. t (attention_forward's window)
    int head_dim;             // HS when it is not d_model / n_head (Qwen3, Hugging Face's head_dim); 0: it is
    int qk_norm;              // 1: RMSNorm over each q and k head before RoPE (Qwen3's q_norm / k_norm)
    // Gemma-3 (gemma3.c; with n_kv_heads, rope_theta for the full-attention layers, rms_eps,
    // tie_embeddings, head_dim, sliding_window above):
    double rope_local_theta;  // RoPE base of the sliding-window layers (rope_local_base_freq)
    int sliding_pattern;      // P: layer l has full attention when (l + 1) % P == 0, else the window
} model_config;

// The attention head size: head_dim, or d_model / n_head when that is 0.
static inline int model_head_size(const model_config *c) {
    return c->head_dim ? c->head_dim : (c->n_head > 0 ? c->d_model / c->n_head : 0);
}
// The largest head size of the attention kernels (their tile sizes follow the device's workgroup memory).
#define MODEL_HEAD_SIZE_MAX 256

// ---- families
typedef struct model_arch model_arch;  // defined in model_impl.h, for the families themselves
const model_arch *model_arch_find(const char *name);  // NULL: no such family in this build

// ---- configuration
// Validates every field (an unknown family lists the known ones) with a message naming it.
wgt_status model_config_check(const model_config *c);
// The config as a JSON object {"arch": ..., "n_layer": ..., ...}; a JSON object without "arch"
// is a config written before families existed and reads as MODEL_ARCH_DEFAULT. from_* checks
// that each field is present and of the right type and range (0 is read as "not set yet");
// model_config_check is what decides that the model can be built.
cJSON *model_config_to_cjson(const model_config *c);
wgt_status model_config_from_cjson(model_config *c, const cJSON *obj, const char *what);
char *model_config_to_json(const model_config *c);  // malloc'd
wgt_status model_config_from_json(model_config *c, const char *json, const char *what);
// The first field in which a and b differ, with both values formatted: returns 0 when they
// describe the same model.
typedef struct {
    char key[32], a[64], b[64];
} model_config_delta;
int model_config_diff(const model_config *a, const model_config *b, model_config_delta *d);
// Infers the config of family `arch` from a Hugging Face safetensors file. The number of heads
// is not stored there, so it is given (families with more settings than the tensors show, such
// as LLaMA's RoPE base, refuse and ask for a config.json).
wgt_status model_config_from_safetensors(model_config *c, const char *arch, const char *path, int n_head);
// Fills the family-specific fields still 0 with the family's defaults (LLaMA: n_kv_heads =
// n_head, rope_theta 10000, rms_eps 1e-5); an unknown family is left alone.
void model_config_defaults(model_config *c);
// Sets the family and clears every family-specific field (what another family's preset left).
void model_config_set_arch(model_config *c, const char *arch);

// Hugging Face config.json (the model_type decides the family: "gpt2", "llama"), for `grad
// --config` and the fine-tuning tools. Reading refuses what this build cannot represent exactly
// (an unknown model_type, rope_scaling, biases, another activation...) and sizes that contradict
// each other, naming the Hugging Face field; `what` names the file in messages. The writer gives
// a config.json that Hugging Face transformers reads as the same model (malloc'd).
wgt_status model_config_from_hf_json(model_config *c, const char *json, const char *what);
wgt_status model_config_from_hf_file(model_config *c, const char *path);  // reads the file, then as above
char *model_config_to_hf_json(const model_config *c);

// ---- precision (docs/numerics.md#mixed-precision)
// f32: everything f32. f16 (mixed precision): f32 master weights, AdamW moments, gradients,
// residual stream, norm statistics, softmax and loss; the GEMMs read f16 copies of the weights
// (cast after every update) and f16 activations, which are also what the backward keeps.
typedef enum { MODEL_PREC_F32, MODEL_PREC_F16 } model_precision;
const char *model_precision_name(model_precision p);  // "f32", "f16"
// "f32" or "f16"; anything else is WGT_ERR_ARG with a message naming `flag` and the choices.
wgt_status model_precision_parse(const char *s, const char *flag, model_precision *out);

// ---- activation recomputation (docs/memory.md): none keeps every block's activations for the
// backward; attention keeps one set of the attention's (ln1, qkv, atty, lse) for all blocks and
// recomputes a block's from its kept input in the backward; block keeps only each block's input and
// recomputes the whole block. The gradients are bit-identical on the C backend.
typedef enum { MODEL_RECOMPUTE_NONE, MODEL_RECOMPUTE_ATTENTION, MODEL_RECOMPUTE_BLOCK } model_recompute;
const char *model_recompute_name(model_recompute r);  // "none", "attention", "block"
// "none", "attention" or "block"; anything else is WGT_ERR_ARG naming `flag` and the choices.
wgt_status model_recompute_parse(const char *s, const char *flag, model_recompute *out);

// ---- the storage of a LoRA run's frozen base (--base-precision; docs/memory.md): every per-layer
// projection weight f32, f16, bf16 or nf4 (QLoRA's NormalFloat, blocks of 64 with their absmax);
// the embeddings, an untied lm_head, the norms and biases stay f32.
typedef enum { MODEL_BASE_F32, MODEL_BASE_F16, MODEL_BASE_BF16, MODEL_BASE_NF4 } model_base_prec;
const char *model_base_prec_name(model_base_prec p);  // "f32", "f16", "bf16", "nf4"
// one of those names; anything else is WGT_ERR_ARG naming `flag` and the choices
wgt_status model_base_prec_parse(const char *s, const char *flag, model_base_prec *out);

// ---- a model on a backend, for batches of B x T tokens
typedef struct wgt_model wgt_model;
// Validates the config and that the device can hold it; allocates everything once (f32).
wgt_status model_init(wgt_model **out, wgt_backend *be, const model_config *c, int B, int T);
// The same at a chosen precision.
wgt_status model_init_prec(wgt_model **out, wgt_backend *be, const model_config *c, int B, int T,
                           model_precision prec);
model_precision model_prec(const wgt_model *m);
void model_free(wgt_model *m);
const model_config *model_cfg(const wgt_model *m);
size_t model_num_params(const wgt_model *m);
// The family's initialisation (GPT-2: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)),
// biases 0, norm weights 1; LLaMA as Hugging Face's LlamaPreTrainedModel: every matrix and the
// embedding N(0, 0.02), norm weights 1); zeroes the gradients and the AdamW moments.
wgt_status model_init_random(wgt_model *m, uint64_t seed);
// The same state with the base zeroed instead of drawn (the adapters and moments as above), for a
// model whose every parameter a checkpoint is about to replace (model_load_safetensors refuses a
// file that lacks one): a 1B model's hundreds of millions of normals cost most of its start-up.
wgt_status model_init_for_load(wgt_model *m, uint64_t seed);

// ---- the parameter table
enum {
    MODEL_T_DECAY = 1 << 0,                // AdamW weight decay applies
    MODEL_T_HF_TRANSPOSED = 1 << 1,        // Hugging Face files store it [in, out] (GPT-2's Conv1D)
    MODEL_T_MAY_EXCEED_BINDING = 1 << 2,   // the ops that touch it split it: it may be larger than
                                           // one storage binding (the others must fit one)
    MODEL_T_EMBEDDING = 1 << 3,            // rows looked up by token or position (not a matmul weight)
    MODEL_T_PACKED = 1 << 4,               // stored right after the previous tensor of the table
                                           // (same layer and decay), without alignment padding: a
                                           // run of them is one matrix stacked along its rows that
                                           // one op reads whole (LLaMA's q | k | v projections)
    MODEL_T_HF_PLUS_ONE = 1 << 5,          // held as 1 + w where Hugging Face files hold w (Gemma's
                                           // norm weights, used as 1 + w): loading adds 1 in f32, as
                                           // transformers' forward does (bits of w below 2^-24 of 1 are
                                           // dropped there too), saving subtracts it (exact for
                                           // 1 + w >= 0.5)
};
typedef enum {
    MODEL_INIT_ZEROS,     // biases
    MODEL_INIT_ONES,      // norm weights
    MODEL_INIT_NORMAL,    // N(0, 0.02)
    MODEL_INIT_RESIDUAL,  // N(0, 0.02 / sqrt(2 L)): projections into the residual stream
} model_init_kind;
typedef struct {
    char name[64];         // Hugging Face name, e.g. "h.3.attn.c_attn.weight"
    int ndim;              // 1 or 2
    size_t shape[2];       // internal shape: matrices are [out, in]
    size_t n;              // elements
    unsigned flags;        // MODEL_T_*
    model_init_kind init;
    size_t off;            // where it starts in the state arrays (model_state_download)
} model_param_info;
int model_param_count(const wgt_model *m);
const model_param_info *model_param(const wgt_model *m, int i);
// Host copies of tensor i (internal layout) for tests; grad != 0 reads its gradient.
wgt_status model_param_get(wgt_model *m, int i, float *dst, int grad);
wgt_status model_param_set(wgt_model *m, int i, const float *src);

// ---- training
// Options of a training forward: the loss terms and dropout (on the attention probabilities and
// on each residual branch, p = 0: none). The dropout masks are hashed from dropout_seed, so the
// backward regenerates them and a resumed run draws the same ones (docs/kernels.md#dropout).
typedef struct {
    float alpha;            // label smoothing
    float beta;             // z-loss
    float dropout;          // probability in [0, 1)
    uint32_t dropout_seed;  // one per micro-batch
    int accumulate_loss;    // 1: the loss sum adds to the update's (micro-batches after the first)
} model_loss_opts;
// tokens: B*T int32 inputs; targets: B*T int32 (a target < 0 or >= V is ignored). Uploads the
// batch, runs the forward pass and the loss (the logits become dlogits in place). inv_norm
// scales the gradient: 1/(valid targets of the whole accumulated batch).
wgt_status model_forward(wgt_model *m, const int32_t *tokens, const int32_t *targets, model_loss_opts lo,
                         float inv_norm);
// Packed examples for the forwards that follow: doc_start [B*T], per position the first position
// of its example (<= t, non-decreasing along each sequence): attention stays inside each example
// and positions restart at it. NULL: plain causal sequences (the default). Refused for GPT-2,
// whose learned position embeddings do not restart.
wgt_status model_set_doc_start(wgt_model *m, const uint32_t *doc_start);
// Forward pass only (no backward possible afterwards): the B*T*V logits to the host.
wgt_status model_forward_logits(wgt_model *m, const int32_t *tokens, float *logits);
// Backward of the last model_forward; gradients accumulate into the gradient buffer.
void model_backward(wgt_model *m);
void model_zero_grad(wgt_model *m);
// The sum of the per-row losses since the last forward without accumulate_loss (a blocking
// readback).
wgt_status model_loss_sum(wgt_model *m, double *sum);
// Global-norm clipping (max_norm <= 0: off) and AdamW, all on the device; decay applies to the
// MODEL_T_DECAY tensors. The update count, the skip decision (a non-finite norm or loss) and
// the loss scale live in the device's optimizer status (backend/opt_status.h). Reads nothing
// back.
void model_update(wgt_model *m, float lr, float beta1, float beta2, float eps, float weight_decay, float max_norm);
// Creates, before step 1, every pipeline (and runtime scratch) that a training step with these
// loss options needs: a forward with the loss, the backward, the update, and with dropout also
// the validation forward without it. It records one such step in the backend's dry run
// (backend.h dry_run) and leaves the model's state untouched; a backend without a dry run (the
// CPU) does nothing. *pipelines (may be NULL) receives the backend's pipeline count after it
// (0 without a dry run), *seconds (may be NULL) the time it took.
wgt_status model_prepare_step(wgt_model *m, model_loss_opts lo, int *pipelines, double *seconds);
// The gradient norm of the last update (unscaled, before clipping; NaN/inf: the update was
// skipped). A blocking readback.
wgt_status model_grad_norm(wgt_model *m, float *norm);

// Host access to the gradient buffer (data-parallel training averages it across processes):
// elements [off, off + n) of the state layout, n > 0 and inside model_state_elems(m). download
// waits for the backward; upload takes effect before the next op (model_update).
wgt_status model_grads_download(wgt_model *m, float *dst, size_t off, size_t n);
wgt_status model_grads_upload(wgt_model *m, const float *src, size_t off, size_t n);
// The parameters alone (model_state_elems floats), for checking that ranks hold the same weights.
wgt_status model_params_download(wgt_model *m, float *dst);

// Loss scaling (docs/numerics.md#loss-scaling): the gradient seed is multiplied by `scale` and
// the norm and the update divide it out; dynamic: a skipped update halves it and `window`
// applied updates in a row double it. A power-of-two scale changes no f32 result. Default: 1,
// static. Blocking (done once, before training).
wgt_status model_set_loss_scale(wgt_model *m, float scale, int dynamic, uint32_t window);
// The optimizer's counters (for checkpoints; blocking).
typedef struct {
    uint64_t updates;   // updates applied (AdamW's t)
    uint64_t skips;     // updates skipped
    uint32_t clean;     // updates applied since the loss scale last changed
    float loss_scale;   // the scale of the next update
} model_opt_state;
wgt_status model_opt_state_get(wgt_model *m, model_opt_state *o);
wgt_status model_opt_state_set(wgt_model *m, const model_opt_state *o);

// One update's results, read back without stalling: model_result_begin (after model_update)
// starts copying them into readback slot `slot` (0 .. WGT_READBACK_SLOTS-1) and returns;
// model_result_end collects them (wait = 0: *ready = 0 while the device is not there yet).
typedef struct {
    double loss_sum;     // sum of the row losses of the update's micro-batches
    float grad_norm;     // unscaled, before clipping; NaN/inf when the update was skipped
    float loss_scale;    // the scale its gradients carried
    float next_scale;    // the scale of the next update
    uint32_t updates;    // updates applied so far, this one included
    uint32_t skips;      // updates skipped so far
    uint32_t clean;      // updates applied since the scale last changed
    int skipped;         // this update was skipped
} model_step_result;
wgt_status model_result_begin(wgt_model *m, int slot);
wgt_status model_result_end(wgt_model *m, int slot, int wait, int *ready, model_step_result *r);
// The same results by a blocking readback (the old synchronous path).
wgt_status model_step_result_now(wgt_model *m, model_step_result *r);

// ---- state for checkpoints: parameters and both AdamW moments, n = model_state_elems(m)
// elements each, in the layout of the parameter table's offsets (decayed tensors first).
size_t model_state_elems(const wgt_model *m);
wgt_status model_state_download(wgt_model *m, float *params, float *m1, float *v1);
wgt_status model_state_upload(wgt_model *m, const float *params, const float *m1, const float *v1);

// ---- Hugging Face safetensors (the family's names and layout)
// path: one .safetensors file, or a sharded checkpoint's model.safetensors.index.json
// (st_open_checkpoint: every shard's header is checked against the index first). Loading refuses
// a missing tensor, a wrong shape and a tensor the model does not use; it reads one tensor at a
// time.
wgt_status model_load_safetensors(wgt_model *m, const char *path);
// The same refusals from the file's header alone, before a model is made: names, shapes and
// dtypes against config c (a copy that must be exact is compared by shape; loading compares its
// values). Nothing is allocated but the table, so a config that contradicts its file is refused
// before model_init lays out and zero-fills buffers of the config's size.
wgt_status model_check_safetensors(const model_config *c, const char *path);
wgt_status model_save_safetensors(wgt_model *m, const char *path, int grads);  // grads: the gradients
// What Hugging Face transformers' from_pretrained reads, written into directory `dir`: the names
// with the family's prefix (GPT-2: "transformer.", as GPT2LMHeadModel.save_pretrained writes them;
// no lm_head.weight for a tied lm_head), F32, the metadata {"format": "pt"}; one model.safetensors
// when the tensors fit max_shard_bytes, else shards cut as save_pretrained cuts them
// (model-00001-of-0000N.safetensors ..., a tensor larger than the limit alone in its shard) and
// model.safetensors.index.json. The host holds one shard at a time. *n_shards: the files written.
#define MODEL_SHARD_BYTES_DEFAULT 5000000000ull  // save_pretrained's max_shard_size "5GB"
wgt_status model_export_safetensors(wgt_model *m, const char *dir, uint64_t max_shard_bytes, int *n_shards);
#endif
