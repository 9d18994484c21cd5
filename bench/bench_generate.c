// bench_generate.c — generation speed with the key/value cache (src/model/decode.c): prefill and
// decode tokens/s at batch 1 and 8 for a model shape with random weights, on WebGPU or the C
// backend. The peer is bench/hf_generate_speed.py (Hugging Face generate, fp32, its own cache);
// bench/generate_vs_hf.sh runs both.
//   bench_generate [--shape gpt2-124m|llama-1b|tiny] [--device webgpu|cpu] [--adapter A]
//                  [--prompt P] [--tokens N]
// prefill: B prompts of P tokens, one after the other (each a chunked prefill), tokens/s = B·P / s;
// decode: N steps of all B sequences after it, tokens/s = B·N / s, each step waiting for its logits
// (as a generation loop must, to pick the next token). "attn splits": the key splits of WebGPU's
// decode_attention at that batch (split-K; 1: none; WGTRAIN_DECODE_SPLIT=off turns it off).
// The default prompt and length are bench/generate_vs_hf.sh's; --prompt 1920 is a long context.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "core/clock.h"
#include "model/decode.h"
#include "model/lora.h"
#include "model/model.h"
#include "backend/webgpu/wg_ops.h"
#include "bench_common.h"

static void fail(const char *what) {
    fprintf(stderr, "bench_generate: %s: %s\n", what, wgt_last_error());
    exit(1);
}

int main(int argc, char **argv) {
    const char *shape = "gpt2-124m", *device = "webgpu", *adapter = "gpu";
    int P = 128, N = 128;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--shape")) shape = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--adapter")) adapter = argv[i + 1];
        else if (!strcmp(argv[i], "--prompt")) P = (int)arg_whole(argv[i], argv[i + 1], 1, 2047);
        else if (!strcmp(argv[i], "--tokens")) N = (int)arg_whole(argv[i], argv[i + 1], 1, 2047);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (P < 1 || N < 1 || P + N > 2048) {
        fprintf(stderr, "--prompt and --tokens: at least 1 each, at most 2048 together\n");
        return 2;
    }
    model_config c;
    memset(&c, 0, sizeof c);
    if (!strcmp(shape, "gpt2-124m")) {
        c = (model_config){.arch = "gpt2", .n_layer = 12, .n_head = 12, .d_model = 768, .d_ff = 3072, .vocab = 50257,
                           .max_seq = 1024};
    } else if (!strcmp(shape, "llama-1b")) {  // Llama 3.2 1B's shape (tied, GQA 32/8, llama3 RoPE)
        c = (model_config){.arch = "llama", .n_layer = 16, .n_head = 32, .d_model = 2048, .d_ff = 8192, .vocab = 128256,
                           .max_seq = 2048, .n_kv_heads = 8, .rope_theta = 500000, .rms_eps = 1e-5,
                           .tie_embeddings = 1, .rope_scaling = 2, .rope_factor = 32, .rope_low_freq = 1,
                           .rope_high_freq = 4, .rope_orig_max_pos = 8192};
    } else if (!strcmp(shape, "tiny")) {
        c = (model_config){.arch = "llama", .n_layer = 2, .n_head = 4, .d_model = 64, .d_ff = 128, .vocab = 512,
                           .max_seq = 512, .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5};
    } else {
        fprintf(stderr, "unknown --shape %s (gpt2-124m, llama-1b, tiny)\n", shape);
        return 2;
    }
    // the cache holds the prompt and the new tokens (the warm-up's prompt and two steps at least)
    const int cap = P + (N > 2 ? N : 2);
    if (cap > c.max_seq) {
        fprintf(stderr, "--prompt + --tokens (2 at least) exceed the shape's %d positions\n", c.max_seq);
        return 2;
    }
    model_config_defaults(&c);
    wgt_backend *be = NULL;
    if ((!strcmp(device, "cpu") ? backend_cpu_init(&be) : backend_webgpu_init(&be, adapter)) != WGT_OK) fail("backend");
    if (be->tune_auto && be->tune_auto(be) != WGT_OK) fail("tuning");
    wgt_model *m = NULL;
    model_opts mo = {MODEL_PREC_F32, NULL, MODEL_RECOMPUTE_NONE, 1};  // inference-only, as sample and chat
    if (model_init_opts(&m, be, &c, 1, 1, &mo) != WGT_OK) fail("model_init");
    if (model_init_random(m, 1) != WGT_OK) fail("init_random");
    printf("shape %s, device %s (%s), prompt %d, new tokens %d\n", shape, device,
           be->device_name ? be->device_name(be) : device, P, N);
    printf("%-6s %14s %14s %12s\n", "batch", "prefill tok/s", "decode tok/s", "attn splits");
    int32_t *prompt = malloc((size_t)P * sizeof *prompt), tok[8];
    for (int i = 0; i < P; i++) prompt[i] = (int32_t)((i * 7919u + 13u) % (unsigned)c.vocab);
    const int batches[] = {1, 8};
    for (int k = 0; k < 2; k++) {
        const int B = batches[k];
        model_decoder *d = NULL;
        if (model_decoder_init(&d, m, B, cap) != WGT_OK) fail("decoder_init");
        // warm-up: every pipeline compiled, one prefill and two steps
        if (model_decoder_prefill(d, 0, prompt, P, NULL) != WGT_OK) fail("prefill");
        for (int b = 1; b < B; b++)
            if (model_decoder_prefill(d, b, prompt, P, NULL) != WGT_OK) fail("prefill");
        for (int b = 0; b < B; b++) tok[b] = prompt[b];
        if (model_decoder_step(d, B, tok, NULL) != WGT_OK || model_decoder_step(d, B, tok, NULL) != WGT_OK) fail("step");
        for (int b = 0; b < B; b++) model_decoder_truncate(d, b, 0);
        double t0 = wgt_now_s();
        for (int b = 0; b < B; b++)
            if (model_decoder_prefill(d, b, prompt, P, NULL) != WGT_OK) fail("prefill");
        double t1 = wgt_now_s();
        float *lg = malloc((size_t)B * c.vocab * sizeof *lg);
        for (int s = 0; s < N; s++) {
            for (int b = 0; b < B; b++) tok[b] = (int32_t)((s * 31 + b) % c.vocab);
            if (model_decoder_step(d, B, tok, lg) != WGT_OK) fail("step");
        }
        double t2 = wgt_now_s();
        const unsigned splits = strcmp(device, "cpu") ? wg_decode_attention_splits(be, (uint64_t)B * c.n_head, (uint32_t)cap) : 1;
        printf("%-6d %14.1f %14.1f %12u\n", B, B * P / (t1 - t0), B * N / (t2 - t1), splits);
        free(lg);
        model_decoder_free(d);
    }
    free(prompt);
    model_free(m);
    be->free(be);
    return 0;
}
