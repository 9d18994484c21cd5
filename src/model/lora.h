// lora.h — LoRA (low-rank adaptation) on the model interface: the base model's weights are frozen
// (no gradients, no optimizer state) and each targeted linear layer W [out, in] gets two trained
// matrices, A [r, in] and B [out, r], so that it computes W x + s B A dropout(x) with s = alpha/r
// (alpha/sqrt(r) with rsLoRA). A starts Kaiming-uniform as PEFT's (bound 1/sqrt(in)), B at 0, so a
// new adapter leaves the model's output unchanged. Under LoRA the model's training state (what
// model_state_*, the optimizer, the gradient norm and checkpoints see) is the adapters alone;
// the parameter table (model_param_*, safetensors) is the frozen base. docs/lora.md.
#ifndef WGT_LORA_H
#define WGT_LORA_H
#include "model/model.h"

#define LORA_R_MAX 4096
#define LORA_TARGETS_MAX 64

typedef struct {
    int r;                          // rank; 0: no adapters (every parameter trains)
    double alpha;                   // the scale's numerator
    double dropout;                 // on the adapter's input, in [0, 1)
    int rslora;                     // 1: scale alpha / sqrt(r)
    char targets[LORA_TARGETS_MAX]; // "all-linear", or a comma list of q,k,v,qkv,o,gate,up,down
    model_base_prec base_prec;      // the frozen base's projection weights (f32 default)
} model_lora_opts;

// The targets string against family `arch`: each name must be one of the family's projections
// (LLaMA: q,k,v,o,gate,up,down; GPT-2: qkv,o,up,down, its q, k and v being one c_attn matrix).
wgt_status model_lora_targets_check(const char *targets, const char *arch, const char *flag);
// The model of model_init_prec with adapters on the targets of *lo (lo NULL or lo->r 0: none).
wgt_status model_init_lora(wgt_model **out, wgt_backend *be, const model_config *c, int B, int T,
                           model_precision prec, const model_lora_opts *lo);
// Everything a model can be made with.
typedef struct {
    model_precision prec;
    const model_lora_opts *lora;  // NULL: no adapters
    model_recompute recompute;
    int inference;  // 1: parameters only, no gradients or AdamW moments (generation: forward and decoding only)
} model_opts;
wgt_status model_init_opts(wgt_model **out, wgt_backend *be, const model_config *c, int B, int T, const model_opts *o);
int model_lora_on(const wgt_model *m);
// Whether the adapter dropout applies to the next forwards (model_forward): on for the training
// step's micro-batches, off for everything else (validation, evaluation, sampling: the default).
// model_forward_logits turns it off. Nothing without LoRA.
void model_lora_set_training(wgt_model *m, int on);
float model_lora_scale(const wgt_model *m);
const model_lora_opts *model_lora_options(const wgt_model *m);  // NULL without LoRA

// The adapters, in parameter-table order.
typedef struct {
    char module[96];    // the Hugging Face module, e.g. "model.layers.0.self_attn.q_proj" (no prefix)
    int tensor;         // its weight in the parameter table (model_param)
    size_t in, out;     // the weight's [out, in]
    size_t a_off, b_off;  // A [r, in] and B [out, r] in the training state (model_state_download)
} model_lora_adapter;
int model_lora_count(const wgt_model *m);
const model_lora_adapter *model_lora_at(const wgt_model *m, int i);

// A 16-hex-digit FNV-1a fingerprint of the frozen base's values (every tensor of the parameter
// table, in order), so that a resumed LoRA run refuses another base.
wgt_status model_lora_base_fingerprint(wgt_model *m, char hex[17]);
// Adds s B A into each targeted base weight (host arithmetic in double, rounded once to f32) and
// turns the adapters off: the model then computes the merged weights alone (export --merge).
wgt_status model_lora_merge(wgt_model *m);
// PEFT's adapter format into directory dir: adapter_config.json (peft_type LORA, r, lora_alpha,
// lora_dropout, target_modules, use_rslora, base_model_name_or_path = base) and
// adapter_model.safetensors (base_model.model.<module>.lora_A.weight [r, in], lora_B [out, r]).
wgt_status model_lora_save_peft(wgt_model *m, const char *dir, const char *base);
// The adapters' gradients, under the names adapter_model.safetensors gives the adapters.
wgt_status model_lora_save_grads(wgt_model *m, const char *path);

// PEFT's adapter_config.json of directory dir as options for family arch (its target_modules as
// the family's projections); settings this build does not compute (bias, modules_to_save, DoRA,
// per-layer ranks...) are refused by name.
wgt_status model_lora_peft_config(const char *dir, const char *arch, model_lora_opts *o);
// The adapters of dir/adapter_model.safetensors into m (made with the options of its config):
// every adapter present with its shape, finite, and nothing else in the file.
wgt_status model_lora_load_peft(wgt_model *m, const char *dir);

// The base_model_name_or_path of dir/adapter_config.json into base[n].
wgt_status model_lora_peft_base(const char *dir, char *base, size_t n);

// ---- for model.c: the hooks of the GEMM helpers and the frozen base's views
typedef struct model_lora model_lora;
// Plans the adapters of the laid-out model m (m->t, m->n_elems of the base): *out NULL when
// lo asks for none. Refusals name the flag.
wgt_status lora_plan(wgt_model *m, const model_lora_opts *lo, model_lora **out);
// Allocates the frozen base, the adapters' state, the gradient sink and the scratch, and binds
// the family's parameter and gradient views.
wgt_status lora_alloc(wgt_model *m);
void lora_free(model_lora *l);
// The gradient view of frozen tensor p: a GEMM weight's names the marker buffer (bound by no op:
// lora_matmul_at takes it), another's (a norm weight, a bias) a sink that nothing reads.
wgt_view lora_grad_view(const wgt_model *m, const model_param_info *p);
// Initial adapters: A Kaiming-uniform from seed, B 0 (uploads into m->params).
wgt_status lora_init_adapters(wgt_model *m, uint64_t seed);
int lora_training(const wgt_model *m);
void lora_zero_sink(wgt_model *m);
// --precision f16: n values of the f16 activation inp widened to f32 in LoRA's scratch (the frozen
// GEMMs and the adapters take f32 inputs); valid until the next call.
wgt_view lora_widen(wgt_model *m, wgt_view inp, size_t n);
// After the base GEMM out = inp W^T: out += s B A drop(inp) for each adapter inside w.
void lora_matmul(wgt_model *m, wgt_view out, wgt_view inp, wgt_view w, uint32_t N, uint32_t C, uint32_t OC);
// After dinp = dout W: dinp += drop^T(s (dout B) A) for each adapter inside w.
void lora_matmul_t(wgt_model *m, wgt_view dinp, wgt_view dout, wgt_view w, uint32_t N, uint32_t C, uint32_t OC);
// Whether dw is a frozen weight's gradient view (lora_matmul_at takes it).
int lora_grad_frozen(const wgt_model *m, wgt_view dw);
// dw a frozen weight's gradient view: accumulates the gradients of its adapters and returns 1
// (the base's own gradient is not computed); 0 when dw is a trained tensor's.
int lora_matmul_at(wgt_model *m, wgt_view dw, wgt_view dout, wgt_view inp, uint32_t N, uint32_t C, uint32_t OC);
#endif
