// model_impl.h — what a model family implements and what it gets from model.c: the family
// descriptor (model_arch), the static tensor table it describes its parameters with, the
// shared model struct, and the helpers that make every backend view of the model. Only
// src/model/ includes this; everything else uses model.h. Steps: docs/adding-a-model.md.
#ifndef WGT_MODEL_IMPL_H
#define WGT_MODEL_IMPL_H
#include "core/safetensors.h"
#include "model/model.h"

// ---- views: the only places the model makes a wgt_view (so that a change to wgt_view, such
// as an element count, is made here)
// n elements of buffer b from element off.
static inline wgt_view model_view(wgt_buf *b, size_t off, size_t n) { return wgt_view_of(b, off, n); }
// n elements of view v from element off (a chunk of a larger range).
static inline wgt_view model_subview(wgt_view v, size_t off, size_t n) { return wgt_view_sub(v, off, n); }
// "no tensor" (an op's optional bias).
static inline wgt_view model_no_view(void) { return wgt_view_none(); }

// ---- the tensor table
// The sizes a tensor's shape is written in; model_dim_size evaluates them from the config.
// DIM_KV: n_kv_heads x head size (LLaMA's k and v projections); DIM_Q: n_head x head size (the
// q projection, = C unless head_dim is set); DIM_HS: the head size (Qwen3's q_norm / k_norm).
typedef enum { DIM_NONE, DIM_C, DIM_3C, DIM_F, DIM_V, DIM_MAXT, DIM_KV, DIM_Q, DIM_HS } model_dim;
size_t model_dim_size(const model_config *c, model_dim d);

// One kind of parameter tensor. Expanded at init, in table order, into the parameter table:
// a run of consecutive per-layer entries becomes that run for layer 0, then for layer 1, ...
typedef struct {
    const char *hf_name;   // Hugging Face name; a per-layer one has one %d for the layer
    int per_layer;
    model_dim shape[2];    // internal shape (matrices [out, in]); DIM_NONE second: a vector
    unsigned flags;        // MODEL_T_*
    model_init_kind init;
    size_t field;          // offsetof its wgt_view in the family's globals or per-layer struct
} model_tensor_desc;

// A Hugging Face tensor name that is not a parameter.
typedef struct {
    const char *hf_name;  // a per-layer one has one %d for the layer
    int per_layer;
    const char *copy_of;  // NULL: a buffer, skipped; else the parameter (same layer) it must be an
                          // exact copy of (a tied lm_head saved beside the embedding)
} model_hf_name;

// A family-specific config field (model_config members below the shared ones).
typedef enum { MODEL_CF_INT, MODEL_CF_DOUBLE } model_cf_type;
typedef struct {
    const char *key;   // JSON key and the name in messages
    size_t off;        // offsetof in model_config
    model_cf_type type;
    double hi;         // JSON accepts 0..hi; the family's config_check decides what it supports
    int since_later;   // 1: added after configs of the family were written: an absent key reads as 0
} model_config_field;

struct model_arch {
    const char *name;  // "gpt2"
    const model_tensor_desc *tensors;
    int n_tensors;
    // struct sizes of the family's parameter views: one of globals, one per layer. model.c
    // fills one set over the parameters and one over the gradients from the tensor table.
    size_t globals_size, layer_size;
    const model_config_field *config_fields;  // family-specific config fields (may be none)
    int n_config_fields;
    // Hugging Face files: a prefix their names may carry ("transformer." in GPT2LMHeadModel
    // files; NULL: none), and tensors they may hold that are not parameters (buffers, a tied
    // lm_head), which loading skips
    const char *hf_prefix;
    const model_hf_name *hf_ignored;
    int n_hf_ignored;
    // Checks beyond the shared ones (NULL: none).
    wgt_status (*config_check)(const model_config *c);
    // Tensors a config may leave out (NULL: every table entry is always present): NULL when c has
    // tensor d, else why not (for the message refusing a file that holds it). An absent tensor
    // leaves its view empty and is neither in the parameter table nor in the files.
    const char *(*tensor_absent)(const model_config *c, const model_tensor_desc *d);
    // An absent tensor that a file may still hold as an exact copy of another (a tied lm_head
    // that a state dict saved beside the embedding): the index in `tensors` of the one it copies
    // (same layer), or -1 (NULL: none may). A copy that differs is refused.
    int (*absent_copy_of)(const model_config *c, const model_tensor_desc *d);
    // Fills c's sizes from a Hugging Face file (c->arch is set by the caller).
    wgt_status (*config_from_safetensors)(model_config *c, const st_file *f, const char *path, int n_head);
    // Hugging Face config.json: the model_type it has there, reading (c->arch set by the caller;
    // messages name the Hugging Face keys and `what`) and writing (a new cJSON object).
    const char *hf_model_type;
    wgt_status (*config_from_hf)(model_config *c, const cJSON *obj, const char *what);
    cJSON *(*config_to_hf)(const model_config *c);
    // Fills the family-specific fields still 0 with defaults (NULL: nothing to fill).
    void (*defaults)(model_config *c);
    // Allocates the activations (model_alloc) and sets m->acts; the views are bound already.
    wgt_status (*init)(wgt_model *m);
    // m->tokens -> m->logits [B*T, V].
    void (*forward)(wgt_model *m);
    // m->logits holding dlogits -> gradients (accumulated).
    void (*backward)(wgt_model *m);
};

// The families of this build: each family's file defines its descriptors, and families.c lists
// them (the only edit outside the family's file that a new family needs).
extern const model_arch model_arch_gpt2;
extern const model_arch model_arch_llama, model_arch_mistral, model_arch_qwen2, model_arch_qwen3;
extern const model_arch model_arch_gemma3_text;
extern const model_arch *const model_archs[];
extern const int model_n_archs;

typedef struct {
    model_param_info info;
    const model_tensor_desc *desc;
    int layer;  // -1: not per-layer
} model_tensor;

struct wgt_model {
    const model_arch *arch;
    wgt_backend *be;
    model_precision prec;
    wgt_view params_h;  // f16: the f16 copy of the weight-decayed range [0, decay_end) of params
    int half_stale;     // f16: params changed since params_h was cast (cast before the next forward)
    model_config c;
    int B, T;
    model_tensor *t;   // the parameter table, t[0..np)
    int np;
    size_t n_elems;    // state elements, with the alignment padding
    size_t decay_end;  // state [0, decay_end) is weight-decayed
    wgt_view params, grads, m1, v1;  // the whole state arrays
    // The parameter table's tensors: params itself, or under LoRA (lora.h) the frozen base, n_base
    // elements laid out as the table says (its decayed range [0, base_decay_end)); params, grads,
    // m1 and v1 then hold the adapters.
    wgt_view base;
    size_t n_base, base_decay_end;
    struct model_lora *lora;   // NULL: every parameter trains
    struct model_packed *packed;  // LoRA with --base-precision f16|bf16|nf4 (base_lowbit.h); NULL: f32 base
    model_recompute recompute; // what the family's init shares between blocks and its backward recomputes
    int inference;      // parameters only: no gradients, no AdamW moments (model_opts.inference)
    // the family's view structs over the parameters and over the gradients: globals, then
    // an array of n_layer per-layer structs
    void *pg, *pl, *gg, *gl;
    void *acts;        // the family's activations (malloc'd by its init; freed by model_free)
    // shared by every family
    wgt_view tokens, targets;  // [B*T] i32 / u32
    // packed examples (model_set_doc_start): doc_start [B*T] u32, the first position of each
    // token's example; doc_view is it while a batch is packed, else no view (plain causal)
    wgt_view doc_start, doc_view;
    wgt_view logits;           // [B*T, V] (dlogits after the loss); [head_rows, V] when the head is chunked
    // The head in row chunks (model_head_forward): 0, or the rows of one chunk of logits. The
    // family's forward leaves the head to the loss step (it records the final norm's output and the
    // lm_head here), and its backward recomputes each chunk's logits and loss before their GEMMs.
    uint32_t head_rows;
    wgt_view head_lnf, head_w;
    float ce_alpha, ce_beta, ce_inv_norm;  // the last forward's loss settings, which the backward repeats
    wgt_view losses;           // [B*T]
    // the optimizer status (backend/opt_status.h): loss sum, gradient norm, clip multiplier,
    // update and skip counts, loss scale; its loss scaling settings (model_set_loss_scale)
    wgt_view status;           // [WGT_ST_WORDS]
    int ls_dynamic;
    uint32_t ls_window;
    wgt_buf **bufs;            // every device buffer, freed together
    int nbufs, cap_bufs;
    wgt_status alloc_st;       // first failure of model_alloc
    int have_forward;
    // dropout of the last forward (model_loss_opts), which its backward repeats; p = 0: none.
    // A family draws each layer's masks from model_dropout_seed(m, l, site).
    float drop_p;
    uint32_t drop_seed;
};

// The seed of dropout site `site` (0: attention probabilities, 1: attention branch, 2: MLP
// branch) of layer l in the current forward.
uint32_t model_dropout_seed(const wgt_model *m, int l, int site);
// Dropout of a residual branch x (site 1 or 2) in place; nothing when p = 0.
void model_branch_dropout(wgt_model *m, wgt_view x, int l, int site);
// The gradient of that branch before its dropout: dropout_backward(tmp <- dres) and tmp, or dres
// itself when p = 0.
wgt_view model_branch_dropout_grad(wgt_model *m, wgt_view tmp, wgt_view dres, int l, int site);

// The lm_head of every family (logits = lnf W^T, lnf [B*T, C] a saved activation, W [V, C]):
// the family's forward ends with model_head_forward and its backward starts with
// model_head_backward (dlnf [B*T, C] f32 out, W's gradient gw accumulated). Unchunked they are
// the plain GEMMs over m->logits; chunked (m->head_rows) the loss step and the backward run them
// chunk by chunk (docs/memory.md#chunked-logits).
void model_head_forward(wgt_model *m, wgt_view lnf, wgt_view w);
void model_head_backward(wgt_model *m, wgt_view dlnf, wgt_view lnf, wgt_view w, wgt_view gw);

// Whether the parameter table is frozen (LoRA): a family then skips the gradients that are no
// GEMM's (the embedding's), which have nowhere to go; the GEMM helpers skip the frozen weights'.
static inline int model_base_frozen(const wgt_model *m) { return m->lora != NULL; }

// The packed frozen base (base_lowbit.c): the span of the table's layout it covers, its format
// (backend/lowbit.h), the buffers, and the marker the packed weights' views point into.
typedef struct model_packed {
    model_base_prec prec;
    uint32_t fmt;
    size_t p0, p1;   // packed span [p0, p1) of the layout; the f32 base leaves out [p0, align(p1))
    size_t cut;      // align(p1) - p0
    wgt_view words, absmax, marker;
} model_packed;

// Allocates a zeroed device buffer of n elements as *v, named `label` in messages. It must fit
// one storage binding unless may_exceed. After a failure it does nothing more; the first
// failure is m->alloc_st.
void model_alloc(wgt_model *m, wgt_view *v, size_t n, const char *label, int may_exceed);
// ---- mixed precision: the helpers that let one op list serve both precisions. In f32 they are
// the plain ops on the plain views; in f16 a saved activation is an f16 tensor (ceil(n/2) words)
// that its producer fills through an f32 scratch, and the GEMMs take the f16 operands.
static inline int model_f16(const wgt_model *m) { return m->prec == MODEL_PREC_F16; }
// Allocates a saved activation of n values: f32, or f16 in the f16 model.
void model_alloc_act(wgt_model *m, wgt_view *v, size_t n, const char *label);
// Where a producer of saved activation `saved` writes: saved itself (f32), or the f32 scratch.
static inline wgt_view model_act_out(const wgt_model *m, wgt_view saved, wgt_view scratch) {
    return model_f16(m) ? model_subview(scratch, 0, saved.n * 2 <= scratch.n ? saved.n * 2 : scratch.n) : saved;
}
// After the producer: f16 rounds what it wrote (out = model_act_out's view) into saved.
void model_act_keep(wgt_model *m, wgt_view saved, wgt_view out, size_t n);
// A saved activation as f32 for an op that reads f32: saved itself, or widened into scratch.
wgt_view model_act_f32(wgt_model *m, wgt_view saved, wgt_view scratch, size_t n);
// The f16 copy of a weight (a view of m->params inside the weight-decayed range).
wgt_view model_half_weight(const wgt_model *m, wgt_view w);
// The GEMMs of the model at its precision: inp / the saved activations are f16 in f16 and the
// weights the f16 copies; out, dout, dinp and the weight gradients are always f32.
void model_matmul(wgt_model *m, wgt_view out, wgt_view inp, wgt_view w, wgt_view bias, uint32_t N, uint32_t C,
                  uint32_t OC);
void model_matmul_t(wgt_model *m, wgt_view dinp, wgt_view dout, wgt_view w, uint32_t N, uint32_t C, uint32_t OC);
void model_matmul_at(wgt_model *m, wgt_view dw, wgt_view db, wgt_view dout, wgt_view inp, uint32_t N, uint32_t C,
                     uint32_t OC);

// ---- what the families' blocks do alike (family_common.c); their structs stay private
// Block l's activations under --recompute (docs/memory.md). The family's per-block struct holds
// only views: first the block's input, then the attention's (those before byte offset attn_end),
// then the rest (size bytes in all). Block 0 allocates every one; under block recompute a later
// block shares all but its input with block 0, under attention recompute the attention's. This
// copies the shared ones from block 0's struct h0 into h and says what block l allocates itself.
typedef enum { MODEL_ACTS_ALL, MODEL_ACTS_NOT_ATTENTION, MODEL_ACTS_INPUT } model_acts_own;
model_acts_own model_block_acts_share(const wgt_model *m, int l, void *h, const void *h0, size_t attn_end, size_t size);
// The blocks' backward, last to first (block_backward(m, l): d(out) in m's residual gradient to
// d(in)). Under --recompute the shared activations hold the last block's, so each earlier block's
// forward (block) or attention (attention) runs again before its backward.
typedef void (*model_block_fn)(wgt_model *m, int l);
void model_blocks_backward(wgt_model *m, model_block_fn block_forward, model_block_fn attn_forward,
                           model_block_fn block_backward);
// Three tensors stored back to back (MODEL_T_PACKED: a q | k | v projection) as one view; where
// they are not (a broken invariant) it aborts with `what` ("the q, k and v projections are not packed").
wgt_view model_packed_view(wgt_view a, wgt_view b, wgt_view c, const char *what);

// A tensor of a Hugging Face file by its name, with or without the family's prefix.
const st_tensor *model_st_find(const model_arch *a, const st_file *f, const char *name);

// ---- Hugging Face config.json fields, for the families' config_from_hf / config_to_hf.
// A key that is absent or null takes `dflt`, unless `required` (then it is refused); a present
// value must be of the type and within [lo, hi]. Messages name `what` and the key.
wgt_status model_hf_int(const cJSON *o, const char *what, const char *key, int required, int dflt, int lo, int hi,
                        int *out);
wgt_status model_hf_double(const cJSON *o, const char *what, const char *key, int required, double dflt, double lo,
                           double hi, double *out);
wgt_status model_hf_bool(const cJSON *o, const char *what, const char *key, int dflt, int *out);
// A setting this build has one value of: absent or null is fine; else it must equal `want`
// (a string, or a JSON literal "false" / "true" when is_bool); `why` ends the refusal.
wgt_status model_hf_expect(const cJSON *o, const char *what, const char *key, const char *want, int is_bool,
                           const char *why);
// Adds a number that reads back exactly.
void model_hf_add_number(cJSON *o, const char *key, double v);
// A new Hugging Face config.json object with its "architectures": [hf_class] and "model_type".
cJSON *model_hf_config_new(const char *hf_class, const char *model_type);
#endif
