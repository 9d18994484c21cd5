// gpt2.h — the GPT-2 model: config, parameter / gradient / optimizer-state / activation layout,
// and the training step as a flat list of backend op calls that both backends run.
#ifndef WGT_GPT2_H
#define WGT_GPT2_H
#include <stdint.h>
#include "backend/backend.h"

typedef struct {
    int n_layer;    // L
    int n_head;     // NH
    int d_model;    // C
    int d_ff;       // F
    int vocab;      // V
    int max_seq;    // maxT (rows of wpe)
} gpt2_config;

// Parameter tensors of one layer, in the order of the layout.
enum { P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB, P_LN2W, P_LN2B, P_FCW, P_FCB, P_FCPROJW, P_FCPROJB,
       P_LAYER_COUNT };

typedef struct gpt2 gpt2;

// Validates the config (and that the device can hold it at batch B, sequence T) with messages
// naming the problem; allocates everything once.
wgt_status gpt2_config_check(const gpt2_config *c);
wgt_status gpt2_init(gpt2 **out, wgt_backend *be, const gpt2_config *cfg, int B, int T);
void gpt2_free(gpt2 *m);
const gpt2_config *gpt2_cfg(const gpt2 *m);
size_t gpt2_num_params(const gpt2 *m);

// GPT-2 initialisation: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0, norms 1.
wgt_status gpt2_init_random(gpt2 *m, uint64_t seed);

// Hugging Face GPT-2 names and layout (Conv1D weights [in, out]); the number of heads is not
// stored in safetensors, so it is given. Loading infers the rest of the config.
wgt_status gpt2_config_from_safetensors(gpt2_config *cfg, const char *path, int n_head);
wgt_status gpt2_load_safetensors(gpt2 *m, const char *path);
wgt_status gpt2_save_safetensors(gpt2 *m, const char *path, int grads);  // grads: write gradients instead

// Host copies of the whole parameter / gradient / optimizer state (in layout order), for
// checkpoints: n = gpt2_state_elems(m).
size_t gpt2_state_elems(const gpt2 *m);
wgt_status gpt2_state_download(gpt2 *m, float *params, float *m1, float *v1);
wgt_status gpt2_state_upload(gpt2 *m, const float *params, const float *m1, const float *v1);

typedef struct {
    float alpha;  // label smoothing
    float beta;   // z-loss
} gpt2_loss_opts;

// tokens: B*T int32 inputs; targets: B*T int32 (a target < 0 or >= V is ignored).
// Uploads the batch, runs the forward pass and the loss (logits become dlogits in place).
// inv_norm scales the gradient: 1/(valid targets of the whole accumulated batch).
wgt_status gpt2_forward(gpt2 *m, const int32_t *tokens, const int32_t *targets, gpt2_loss_opts lo, float inv_norm);
// Backward of the last forward; gradients accumulate into the gradient buffer.
void gpt2_backward(gpt2 *m);
void gpt2_zero_grad(gpt2 *m);
// Reads back the sum of the per-row losses of the last forward.
wgt_status gpt2_loss_sum(gpt2 *m, double *sum);
// Forward pass only (no loss, no backward possible afterwards): uploads `tokens` (B*T) and
// copies the logits, B*T*V floats, to the host.
wgt_status gpt2_forward_logits(gpt2 *m, const int32_t *tokens, float *logits);

// Global-norm clipping (max_norm <= 0: off) and AdamW, all on the device. Returns nothing read
// back; the gradient norm can be read with gpt2_grad_norm after the update.
void gpt2_update(gpt2 *m, float lr, float beta1, float beta2, float eps, float weight_decay, float max_norm, int t);
wgt_status gpt2_grad_norm(gpt2 *m, float *norm);

// Per-parameter access (for tests): name i in HF naming, its size, and a host copy.
int gpt2_param_count(const gpt2 *m);
const char *gpt2_param_name(const gpt2 *m, int i);
size_t gpt2_param_size(const gpt2 *m, int i);
wgt_status gpt2_param_get(gpt2 *m, int i, float *dst, int grad);  // internal layout
wgt_status gpt2_param_set(gpt2 *m, int i, const float *src);
#endif
