// test_recompute.c — activation recomputation (model.h model_recompute): with --recompute
// attention or block the backward recomputes what the forward did not keep, so the loss and every
// gradient must be those of no recomputation: bit for bit on the C backend (the same ops on the
// same inputs in the same order), within float rounding on WebGPU (1e-5 of the largest gradient:
// the recomputed forward is the same kernels on the same inputs, so in practice also exact). Cases:
// GPT-2, LLaMA and Gemma-3, with dropout (its masks regenerated), f16 mixed precision, and LoRA adapters
// (whose gradients are the whole training state). Also: recomputation keeps fewer bytes.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testlib.h"
#include "backend_pair.h"
#include "model/lora.h"

static const model_config LLAMA = {.arch = "llama", .n_layer = 3, .n_head = 4, .d_model = 32, .d_ff = 40, .vocab = 23,
                                   .max_seq = 12, .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5};
// Gemma-3: a sliding (window 4 of T = 9), a full and a sliding layer with their own RoPE bases, the
// four norms a block, q/k norms, head_dim 6 (d_model / n_head is 8), tied
static const model_config GEMMA3 = {.arch = "gemma3_text", .n_layer = 3, .n_head = 4, .d_model = 32, .d_ff = 40,
                                    .vocab = 23, .max_seq = 12, .n_kv_heads = 2, .rope_theta = 1e6, .rms_eps = 1e-6,
                                    .tie_embeddings = 1, .head_dim = 6, .sliding_window = 4, .rope_local_theta = 1e4,
                                    .sliding_pattern = 2};
static const model_config GPT2 = {.arch = "gpt2", .n_layer = 3, .n_head = 2, .d_model = 16, .d_ff = 32, .vocab = 19,
                                  .max_seq = 12};
enum { B_ = 2, T_ = 9 };

typedef struct {
    double loss;
    float *g;
    size_t n;
    uint64_t bytes;
} result;

static result run_case(wgt_backend *be, const model_config *cfg, model_recompute rc, model_precision prec,
                       const model_lora_opts *lora, float dropout) {
    result r = {0};
    uint64_t live0 = 0, peak0 = 0, live1 = 0, peak1 = 0;
    if (be->bytes_allocated) be->bytes_allocated(be, &live0, &peak0);
    model_opts o = {prec, lora, rc, 0};
    wgt_model *m;
    if (model_init_opts(&m, be, cfg, B_, T_, &o) != WGT_OK) die("model_init_opts");
    if (be->bytes_allocated) be->bytes_allocated(be, &live1, &peak1);
    r.bytes = live1 - live0;
    if (model_init_random(m, 5) != WGT_OK) die("init_random");
    r.n = model_state_elems(m);
    if (lora) {  // B != 0 so that every adapter gradient is nonzero
        float *s = calloc(r.n, 4), *z = calloc(r.n, 4);
        if (model_state_download(m, s, z, z) != WGT_OK) die("state_download");
        for (size_t k = 0; k < r.n; k++) if (s[k] == 0) s[k] = (float)(0.01 * ((k * 2654435761u) % 200) - 1.0);
        memset(z, 0, r.n * 4);
        if (model_state_upload(m, s, z, z) != WGT_OK) die("state_upload");
        free(s);
        free(z);
        model_lora_set_training(m, 1);
    }
    int32_t tok[B_ * T_], tgt[B_ * T_];
    for (int i = 0; i < B_ * T_; i++) {
        tok[i] = (i * 7 + 3) % cfg->vocab;
        tgt[i] = (i * 5 + 1) % cfg->vocab;
    }
    model_loss_opts lo = {0.0f, 1e-4f, dropout, 777u, 0};
    model_zero_grad(m);
    if (model_forward(m, tok, tgt, lo, 1.0f / (B_ * T_)) != WGT_OK) die("forward");
    model_backward(m);
    if (model_loss_sum(m, &r.loss) != WGT_OK) die("loss");
    r.g = malloc(r.n * 4);
    if (model_grads_download(m, r.g, 0, r.n) != WGT_OK) die("grads");
    model_free(m);
    return r;
}

static void compare(wgt_backend *be, const char *name, const model_config *cfg, model_precision prec,
                    const model_lora_opts *lora, float dropout, int exact) {
    result r0 = run_case(be, cfg, MODEL_RECOMPUTE_NONE, prec, lora, dropout);
    for (int rc = MODEL_RECOMPUTE_ATTENTION; rc <= MODEL_RECOMPUTE_BLOCK; rc++) {
        result r = run_case(be, cfg, (model_recompute)rc, prec, lora, dropout);
        const char *rn = model_recompute_name((model_recompute)rc);
        if (exact) {
            CHECK(r.loss == r0.loss, "%s %s: loss %.9g, without recomputation %.9g", be->name, name, r.loss, r0.loss);
            CHECK(!memcmp(r.g, r0.g, r.n * 4), "%s %s, --recompute %s: the gradients are not bit-identical", be->name,
                  name, rn);
        } else {
            double mx = 0, err = 0;
            for (size_t k = 0; k < r.n; k++) { mx = fmax(mx, fabs(r0.g[k])); err = fmax(err, fabs(r.g[k] - r0.g[k])); }
            CHECK(err <= 1e-5 * mx, "%s %s, --recompute %s: gradients %.3g apart (largest %.3g)", be->name, name, rn,
                  err, mx);
            CHECK(fabs(r.loss - r0.loss) <= 1e-6 * fabs(r0.loss), "%s %s: loss %.9g vs %.9g", be->name, name, r.loss,
                  r0.loss);
        }
        CHECK(r.bytes < r0.bytes, "%s %s: --recompute %s allocates %llu bytes, no recomputation %llu", be->name, name,
              rn, (unsigned long long)r.bytes, (unsigned long long)r0.bytes);
        printf("%s %s --recompute %-9s: %llu bytes against %llu\n", be->name, name, rn, (unsigned long long)r.bytes,
               (unsigned long long)r0.bytes);
        free(r.g);
    }
    free(r0.g);
}

int main(void) {
    wgt_backend *cpu;
    if (backend_cpu_init(&cpu) != WGT_OK) die("cpu");
    model_lora_opts lora = {4, 8, 0.2, 0, "all-linear", MODEL_BASE_F32};
    compare(cpu, "gpt2", &GPT2, MODEL_PREC_F32, NULL, 0.0f, 1);
    compare(cpu, "gpt2 dropout", &GPT2, MODEL_PREC_F32, NULL, 0.1f, 1);
    compare(cpu, "gpt2 f16", &GPT2, MODEL_PREC_F16, NULL, 0.0f, 1);
    compare(cpu, "llama dropout", &LLAMA, MODEL_PREC_F32, NULL, 0.1f, 1);
    compare(cpu, "llama f16", &LLAMA, MODEL_PREC_F16, NULL, 0.0f, 1);
    compare(cpu, "llama lora", &LLAMA, MODEL_PREC_F32, &lora, 0.1f, 1);
    compare(cpu, "gpt2 lora", &GPT2, MODEL_PREC_F32, &lora, 0.0f, 1);
    compare(cpu, "gemma3 dropout", &GEMMA3, MODEL_PREC_F32, NULL, 0.1f, 1);
    compare(cpu, "gemma3 f16", &GEMMA3, MODEL_PREC_F16, NULL, 0.0f, 1);
    compare(cpu, "gemma3 lora", &GEMMA3, MODEL_PREC_F32, &lora, 0.1f, 1);
    cpu->free(cpu);
    bpair P = bpair_open();
    compare(P.gpu, "llama dropout", &LLAMA, MODEL_PREC_F32, NULL, 0.1f, 0);
    compare(P.gpu, "gpt2 lora", &GPT2, MODEL_PREC_F32, &lora, 0.1f, 0);
    compare(P.gpu, "gemma3 dropout", &GEMMA3, MODEL_PREC_F32, NULL, 0.1f, 0);
    bpair_close(&P);
    return test_finish();
}
