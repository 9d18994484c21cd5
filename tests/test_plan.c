// test_plan.c — the memory plan (model/plan.h) against the bytes the backends actually allocate:
// on the C backend the plan of a model is exactly what model_init allocates (the plan is the
// model's own allocation list); on WebGPU the peak over a whole training step (with the runtime's
// scratch slots for split GEMMs and readbacks, which the plan leaves out) is within 5 % of it.
// Cases across families, presets' shapes, precisions, recomputation and LoRA; also the kinds add
// up, the gradients and optimizer kinds match the trained state, and the largest batch that fits
// a limit is the largest whose plan fits.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testlib.h"
#include "backend_pair.h"
#include "model/plan.h"

static const model_config LLAMA = {.arch = "llama", .n_layer = 3, .n_head = 4, .d_model = 64, .d_ff = 96, .vocab = 300,
                                   .max_seq = 64, .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5};
static const model_config GPT2 = {.arch = "gpt2", .n_layer = 2, .n_head = 4, .d_model = 64, .d_ff = 256, .vocab = 257,
                                  .max_seq = 64};

static void one(wgt_backend *be, const char *name, const model_config *c, int B, int T, model_precision prec,
                const model_lora_opts *lora, model_recompute rc, int step) {
    model_opts o = {prec, lora, rc, 0};
    model_plan p;
    if (model_plan_make(&p, be, c, B, T, &o) != WGT_OK) die("plan");
    uint64_t sum = 0;
    for (int k = 0; k < PLAN_KINDS; k++) sum += p.bytes[k];
    CHECK(sum == p.total, "%s: the kinds add up to %llu, the total is %llu", name, (unsigned long long)sum,
          (unsigned long long)p.total);
    uint64_t live0, peak0, live1, peak1;
    be->bytes_allocated(be, &live0, &peak0);
    wgt_model *m;
    if (model_init_opts(&m, be, c, B, T, &o) != WGT_OK) die("model_init_opts");
    // the trained state: gradients = one state array; optimizer = two and the status words
    const uint64_t st = (uint64_t)model_state_elems(m) * 4;
    CHECK(p.bytes[PLAN_GRADIENTS] >= st && p.bytes[PLAN_OPTIMIZER] >= 2 * st && p.bytes[PLAN_OPTIMIZER] < 2 * st + 4096,
          "%s: gradients %llu and optimizer %llu bytes for a state of %llu", name,
          (unsigned long long)p.bytes[PLAN_GRADIENTS], (unsigned long long)p.bytes[PLAN_OPTIMIZER],
          (unsigned long long)st);
    if (step) {  // a training step: the runtime's scratch comes too
        if (model_init_random(m, 1) != WGT_OK) die("init_random");
        int32_t *tok = calloc((size_t)B * T, 4);
        model_loss_opts lo = {0, 0, 0, 1, 0};
        model_zero_grad(m);
        if (model_forward(m, tok, tok, lo, 1.0f) != WGT_OK) die("forward");
        model_backward(m);
        model_update(m, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f);
        if (be->sync(be) != WGT_OK) die("sync");
        free(tok);
    }
    be->bytes_allocated(be, &live1, &peak1);
    const uint64_t got = step ? peak1 - live0 : live1 - live0;
    if (!step)
        CHECK(got == p.total, "%s: planned %llu bytes, allocated %llu", name, (unsigned long long)p.total,
              (unsigned long long)got);
    else  // 5 %: the bound on what the runtime adds beyond the model's buffers
        CHECK(got >= p.total && got <= p.total + p.total / 20, "%s: planned %llu bytes, the step's peak %llu", name,
              (unsigned long long)p.total, (unsigned long long)got);
    printf("%-40s planned %9llu, %s %9llu bytes\n", name, (unsigned long long)p.total, step ? "peak" : "allocated",
           (unsigned long long)got);
    model_free(m);
}

int main(void) {
    wgt_backend *cpu;
    if (backend_cpu_init(&cpu) != WGT_OK) die("cpu");
    model_lora_opts lora = {8, 16, 0.1, 0, "all-linear", MODEL_BASE_F32};
    model_lora_opts lora_qv = {4, 8, 0, 1, "q,v", MODEL_BASE_F32};
    const model_precision precs[2] = {MODEL_PREC_F32, MODEL_PREC_F16};
    for (int f = 0; f < 2; f++)
        for (int pi = 0; pi < 2; pi++)
            for (int rc = 0; rc < 3; rc++) {
                char name[96];
                snprintf(name, sizeof name, "cpu %s %s recompute %s", f ? "gpt2" : "llama", model_precision_name(precs[pi]),
                         model_recompute_name((model_recompute)rc));
                one(cpu, name, f ? &GPT2 : &LLAMA, 2, 48, precs[pi], NULL, (model_recompute)rc, 0);
            }
    one(cpu, "cpu llama lora all-linear", &LLAMA, 3, 32, MODEL_PREC_F32, &lora, MODEL_RECOMPUTE_NONE, 0);
    one(cpu, "cpu llama lora q,v block", &LLAMA, 3, 32, MODEL_PREC_F32, &lora_qv, MODEL_RECOMPUTE_BLOCK, 0);
    one(cpu, "cpu gpt2 lora attention", &GPT2, 1, 64, MODEL_PREC_F32, &lora, MODEL_RECOMPUTE_ATTENTION, 0);
    // frozen bases packed (--base-precision): the packed words, absmax and marker are weights too
    model_lora_opts lora_bf16 = lora, lora_nf4 = lora, lora_f16 = lora_qv;
    lora_bf16.base_prec = MODEL_BASE_BF16;
    lora_nf4.base_prec = MODEL_BASE_NF4;
    lora_f16.base_prec = MODEL_BASE_F16;
    one(cpu, "cpu llama lora bf16 base", &LLAMA, 2, 48, MODEL_PREC_F32, &lora_bf16, MODEL_RECOMPUTE_NONE, 0);
    one(cpu, "cpu llama lora nf4 base block", &LLAMA, 2, 48, MODEL_PREC_F32, &lora_nf4, MODEL_RECOMPUTE_BLOCK, 0);
    one(cpu, "cpu llama lora f16 base q,v", &LLAMA, 2, 48, MODEL_PREC_F32, &lora_f16, MODEL_RECOMPUTE_NONE, 0);
    one(cpu, "cpu llama lora nf4 base, precision f16", &LLAMA, 2, 48, MODEL_PREC_F16, &lora_nf4, MODEL_RECOMPUTE_NONE, 0);
    // the largest batch under a limit: its plan fits, the next one's does not
    model_opts o = {MODEL_PREC_F32, NULL, MODEL_RECOMPUTE_NONE, 0};
    model_plan p4, fit, next;
    if (model_plan_make(&p4, cpu, &LLAMA, 4, 48, &o) != WGT_OK) die("plan");
    int b = model_plan_largest_batch(cpu, &LLAMA, 48, &o, p4.total + 1000, 64, &fit);
    if (model_plan_make(&next, cpu, &LLAMA, b + 1, 48, &o) != WGT_OK) die("plan");
    CHECK(b == 4 && fit.total <= p4.total + 1000 && next.total > p4.total + 1000, "largest batch %d, want 4", b);
    CHECK(model_plan_largest_batch(cpu, &LLAMA, 48, &o, 1000, 64, NULL) == 0, "a 1000-byte limit fits a batch");
    // recomputation and LoRA plan less
    model_plan a, bl;
    model_opts ob = {MODEL_PREC_F32, NULL, MODEL_RECOMPUTE_BLOCK, 0}, ol = {MODEL_PREC_F32, &lora, MODEL_RECOMPUTE_NONE, 0};
    if (model_plan_make(&a, cpu, &LLAMA, 4, 48, &ob) != WGT_OK || model_plan_make(&bl, cpu, &LLAMA, 4, 48, &ol) != WGT_OK)
        die("plan");
    CHECK(a.bytes[PLAN_ACTIVATIONS] < p4.bytes[PLAN_ACTIVATIONS] / 2, "block recomputation keeps %llu of %llu bytes",
          (unsigned long long)a.bytes[PLAN_ACTIVATIONS], (unsigned long long)p4.bytes[PLAN_ACTIVATIONS]);
    CHECK(bl.bytes[PLAN_OPTIMIZER] < p4.bytes[PLAN_OPTIMIZER] / 4, "LoRA's optimizer state is not small");
    cpu->free(cpu);

    // a fresh device each: its peak counts since it opened
    for (int k = 0; k < 4; k++) {
        bpair P = bpair_open();
        if (k == 0) one(P.gpu, "webgpu llama f32 step", &LLAMA, 2, 48, MODEL_PREC_F32, NULL, MODEL_RECOMPUTE_NONE, 1);
        if (k == 1) one(P.gpu, "webgpu gpt2 f16 block step", &GPT2, 2, 64, MODEL_PREC_F16, NULL, MODEL_RECOMPUTE_BLOCK, 1);
        if (k == 2)
            one(P.gpu, "webgpu llama lora attention step", &LLAMA, 2, 48, MODEL_PREC_F32, &lora, MODEL_RECOMPUTE_ATTENTION,
                1);
        if (k == 3) {
            model_lora_opts lq = lora;
            lq.base_prec = MODEL_BASE_NF4;
            one(P.gpu, "webgpu llama lora nf4 base step", &LLAMA, 2, 48, MODEL_PREC_F32, &lq, MODEL_RECOMPUTE_NONE, 1);
        }
        bpair_close(&P);
    }
    return test_finish();
}
