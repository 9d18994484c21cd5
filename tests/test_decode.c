// test_decode.c — generation with a key/value cache (src/model/decode.c) against the full forward
// (model_forward_logits), for every family the decoder covers, on the C backend and on WebGPU
// (lavapipe in CI). For each config, three sequences of different lengths are decoded at once:
// each is prefilled with a few tokens, then all are stepped together (the batch shrinking as the
// shorter ones end), and the logits after every token must equal the full forward's row at that
// position. Then one sequence is prefilled in chunks of 4 tokens (WGTRAIN_TEST_DECODE_CHUNK),
// truncated and prefilled again (what a chat does when a turn is re-rendered).
//
// Configs: gpt2 at odd sizes (head size 12, nothing a multiple of 64); llama with grouped-query
// attention (NKV = 2 of NH = 4), llama3 RoPE scaling and an untied lm_head; qwen2 with q/k/v
// biases, one kv head (MQA), a tied embedding; mistral with linear RoPE scaling and a sliding
// window longer than the sequences (the full forward refuses longer ones); llama with attention
// biases (q, k, v and o); qwen3 with its per-head q/k norms and a head size (12) that is not
// d_model / n_head; gemma3_text with (1 + w) norms, four per block, q/k norms, GeGLU, sliding
// layers (window 5, shorter than the sequences: a step sees only the last 5 keys, with the local
// RoPE base) between full ones (the global base), one kv head and an untied lm_head; and
// gemma3_text at the released models' head size 256 with a window of 3.
//
// Tolerance: both paths compute the same float32 formulas in other orders (a GEMM of 1 row vs
// T rows may split its sums differently; the decode attention is an online softmax over chunks,
// the full one another; the C decode reference sums in double). The measured differences are
// ~1e-6 of the largest logit; the bound, rel 1e-4 of the row's largest |logit| plus 1e-4 of
// each, leaves a wide margin for other GPUs, while a wrong position, rotation, cache row or head
// changes logits by O(1) of that scale.
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include "model/decode.h"
#include "model/lora.h"
#include "model/plan.h"
#include "backend/webgpu/wg_ops.h"
#include "backend_pair.h"

#define NSEQ 3
#define TMAX 13

// O(1)-scale parameters (as test_model_webgpu.c): the attention far from uniform
static void set_params(wgt_model *m, uint64_t seed) {
    trng_state = seed;
    for (int i = 0; i < model_param_count(m); i++) {
        const model_param_info *p = model_param(m, i);
        float *x = malloc(p->n * 4);
        for (size_t k = 0; k < p->n; k++) {
            double r = trng_normal();
            if (p->init == MODEL_INIT_ONES) x[k] = (float)(1.0 + 0.1 * r);
            else if (p->flags & MODEL_T_EMBEDDING) x[k] = (float)(0.5 * r);
            else if (p->ndim == 2) x[k] = (float)(r / sqrt((double)p->shape[1]));
            else x[k] = (float)(0.1 * r);
        }
        if (model_param_set(m, i, x) != WGT_OK) die("param_set");
        free(x);
    }
}

static void compare(const char *what, const float *got, const float *ref, int V) {
    double mx = 0;
    for (int i = 0; i < V; i++) mx = fmax(mx, fabs(ref[i]));
    CHECK(mx > 0.1, "%s: the reference logits are all near 0 (max %g): the test would not see an error", what, mx);
    CHECK_CLOSE(what, got, ref, (size_t)V, 1e-4 * mx, 1e-4);
}

static void run(wgt_backend *be, const char *bname, const char *name, model_config c) {
    model_config_defaults(&c);
    const int V = c.vocab;
    const int len[NSEQ] = {13, 11, 9}, pre[NSEQ] = {2, 4, 5};  // remaining 11, 7, 4: a shrinking batch
    int32_t seq[NSEQ][TMAX];
    trng_state = 1234;
    for (int s = 0; s < NSEQ; s++)
        for (int t = 0; t < TMAX; t++) seq[s][t] = (int32_t)(trng_u32() % (uint32_t)V);
    // an inference-only model (what sample and chat make): the full forward and the decoder need
    // no gradients or optimizer state
    wgt_model *m = NULL;
    model_opts io = {MODEL_PREC_F32, NULL, MODEL_RECOMPUTE_NONE, 1};
    if (model_init_opts(&m, be, &c, 1, TMAX, &io) != WGT_OK) die("model_init");
    set_params(m, 99);
    // the full forward of each sequence (padded to TMAX with its own tokens: causal attention
    // keeps rows < len independent of what follows)
    float *full = malloc((size_t)NSEQ * TMAX * V * 4);
    for (int s = 0; s < NSEQ; s++)
        if (model_forward_logits(m, seq[s], full + (size_t)s * TMAX * V) != WGT_OK) die("forward");
    model_decoder *d = NULL;
    uint64_t live0, live1, peak, cache, acts;
    be->bytes_allocated(be, &live0, &peak);
    if (model_decoder_init(&d, m, NSEQ, TMAX + 3) != WGT_OK) die("decoder_init");
    be->bytes_allocated(be, &live1, &peak);
    model_decoder_bytes(&c, NSEQ, TMAX + 3, &cache, &acts);
    // the C backend rounds each buffer up to 64 bytes; the decoder makes at most 2 per layer and 22 others
    const uint64_t got = live1 - live0, slack = 64ull * (2ull * (uint64_t)c.n_layer + 22);
    if (!strcmp(bname, "cpu"))
        CHECK(got >= cache + acts && got <= cache + acts + slack,
              "%s %s: the decoder allocated %llu bytes, model_decoder_bytes says %llu + %llu", bname, name,
              (unsigned long long)got, (unsigned long long)cache, (unsigned long long)acts);
    float *lg = malloc((size_t)NSEQ * V * 4);
    char what[160];
    int pos[NSEQ];
    for (int s = 0; s < NSEQ; s++) {
        if (model_decoder_prefill(d, s, seq[s], pre[s], lg) != WGT_OK) die("prefill");
        snprintf(what, sizeof what, "%s %s: prefill of sequence %d (%d tokens)", bname, name, s, pre[s]);
        compare(what, lg, full + ((size_t)s * TMAX + pre[s] - 1) * V, V);
        pos[s] = pre[s];
        CHECK(model_decoder_len(d, s) == pre[s], "%s: the decoder holds %d tokens, not %d", what, model_decoder_len(d, s),
              pre[s]);
    }
    for (;;) {
        int nb = 0;
        while (nb < NSEQ && pos[nb] < len[nb]) nb++;
        if (!nb) break;
        int32_t tk[NSEQ];
        for (int s = 0; s < nb; s++) tk[s] = seq[s][pos[s]];
        if (model_decoder_step(d, nb, tk, lg) != WGT_OK) die("step");
        for (int s = 0; s < nb; s++) {
            snprintf(what, sizeof what, "%s %s: sequence %d position %d (batch of %d)", bname, name, s, pos[s], nb);
            compare(what, lg + (size_t)s * V, full + ((size_t)s * TMAX + pos[s]) * V, V);
            pos[s]++;
        }
    }
    model_decoder_free(d);
    // chunked prefill, then a truncation and a new prefill from the middle
    setenv("WGTRAIN_TEST_DECODE_CHUNK", "4", 1);
    if (model_decoder_init(&d, m, 1, TMAX) != WGT_OK) die("decoder_init (chunks)");
    unsetenv("WGTRAIN_TEST_DECODE_CHUNK");
    if (model_decoder_prefill(d, 0, seq[0], TMAX, lg) != WGT_OK) die("prefill (chunks)");
    snprintf(what, sizeof what, "%s %s: prefill of %d tokens in chunks of 4", bname, name, TMAX);
    compare(what, lg, full + (size_t)(TMAX - 1) * V, V);
    model_decoder_truncate(d, 0, 6);
    if (model_decoder_prefill(d, 0, seq[0] + 6, 5, lg) != WGT_OK) die("prefill (after truncation)");
    snprintf(what, sizeof what, "%s %s: truncated to 6, 5 tokens prefilled again", bname, name);
    compare(what, lg, full + (size_t)10 * V, V);
    // the refusals: past the context, a token outside the vocabulary
    CHECK(model_decoder_prefill(d, 0, seq[0], TMAX, lg) == WGT_ERR_ARG, "%s %s: a prefill past the context is refused",
          bname, name);
    int32_t bad = V;
    CHECK(model_decoder_step(d, 1, &bad, lg) == WGT_ERR_ARG, "%s %s: a token id of V is refused", bname, name);
    CHECK(model_decoder_len(d, 0) == 11, "%s %s: refusals leave the cache as it was", bname, name);
    model_decoder_free(d);
    free(lg);
    free(full);
    model_free(m);
}

// The inference-only model allocates the parameters and nothing of training: against a training
// model of the same config, exactly the gradients and both AdamW moments (3 x the parameters'
// 4-byte elements) fewer live bytes on the C backend, and in the memory plan no gradients and no
// moments (the optimizer's status words stay: the forward's loss path reads them).
static void check_inference_bytes(wgt_backend *be, model_config c) {
    model_config_defaults(&c);
    uint64_t live0, live1, live2, peak;
    be->bytes_allocated(be, &live0, &peak);
    wgt_model *full = NULL, *inf = NULL;
    model_opts fo = {MODEL_PREC_F32, NULL, MODEL_RECOMPUTE_NONE, 0}, io = fo;
    io.inference = 1;
    if (model_init_opts(&full, be, &c, 1, 4, &fo) != WGT_OK) die("model_init (training)");
    be->bytes_allocated(be, &live1, &peak);
    model_free(full);
    if (model_init_opts(&inf, be, &c, 1, 4, &io) != WGT_OK) die("model_init (inference)");
    be->bytes_allocated(be, &live2, &peak);
    const uint64_t n = model_state_elems(inf), grads_moments = 3 * (uint64_t)n * 4;
    CHECK(live1 - live0 - (live2 - live0) == grads_moments,
          "%s: the inference-only model saves %llu bytes, not the %llu of gradients and moments", c.arch,
          (unsigned long long)(live1 - live2), (unsigned long long)grads_moments);
    model_free(inf);
    model_plan pf, pi;
    if (model_plan_make(&pf, be, &c, 1, 4, &fo) != WGT_OK || model_plan_make(&pi, be, &c, 1, 4, &io) != WGT_OK)
        die("plan");
    CHECK(pi.bytes[PLAN_GRADIENTS] == 0 && pf.bytes[PLAN_GRADIENTS] == (uint64_t)n * 4,
          "%s: plan gradients %llu (inference) and %llu (training)", c.arch, (unsigned long long)pi.bytes[PLAN_GRADIENTS],
          (unsigned long long)pf.bytes[PLAN_GRADIENTS]);
    CHECK(pf.bytes[PLAN_OPTIMIZER] - pi.bytes[PLAN_OPTIMIZER] == 2 * (uint64_t)n * 4,
          "%s: the plan's optimizer state differs by %llu bytes, not the two moments' %llu", c.arch,
          (unsigned long long)(pf.bytes[PLAN_OPTIMIZER] - pi.bytes[PLAN_OPTIMIZER]), (unsigned long long)(2 * n * 4));
    CHECK(pi.bytes[PLAN_WEIGHTS] == pf.bytes[PLAN_WEIGHTS] && pf.total - pi.total == grads_moments,
          "%s: the plans differ by %llu bytes in all, not %llu", c.arch, (unsigned long long)(pf.total - pi.total),
          (unsigned long long)grads_moments);
}

// A training call on an inference-only model stops with an assertion naming the model kind (in a
// child process: the assertion aborts), rather than writing through gradient views it has not.
static void check_inference_refuses_update(void) {
    int fd[2];
    if (pipe(fd)) exit(1);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        wgt_backend *be = NULL;
        wgt_model *m = NULL;
        model_config c = {.arch = "gpt2", .n_layer = 1, .n_head = 2, .d_model = 16, .d_ff = 32, .vocab = 20, .max_seq = 8};
        model_config_defaults(&c);
        model_opts io = {MODEL_PREC_F32, NULL, MODEL_RECOMPUTE_NONE, 1};
        if (backend_cpu_init(&be) != WGT_OK || model_init_opts(&m, be, &c, 1, 4, &io) != WGT_OK) _exit(3);
        model_update(m, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f);
        _exit(0);
    }
    close(fd[1]);
    char buf[4096];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof buf - 1 && (r = read(fd[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)r;
    buf[len] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, "inference-only"),
          "model_update on an inference-only model aborts naming it (status %d, stderr: %s)", status, buf);
}

int main(void) {
    check_inference_refuses_update();
    bpair bp = bpair_open();
    const struct {
        const char *name;
        model_config c;
    } cases[] = {
        {"gpt2", {.arch = "gpt2", .n_layer = 2, .n_head = 3, .d_model = 36, .d_ff = 100, .vocab = 77, .max_seq = 20}},
        {"llama-gqa-llama3rope",
         {.arch = "llama", .n_layer = 2, .n_head = 4, .d_model = 40, .d_ff = 72, .vocab = 77, .max_seq = 20,
          .n_kv_heads = 2, .rope_theta = 500000, .rms_eps = 1e-5, .rope_scaling = 2, .rope_factor = 8,
          .rope_low_freq = 1, .rope_high_freq = 4, .rope_orig_max_pos = 8}},
        {"qwen2-mqa-bias-tied",
         {.arch = "qwen2", .n_layer = 2, .n_head = 4, .d_model = 32, .d_ff = 48, .vocab = 61, .max_seq = 20,
          .n_kv_heads = 1, .rope_theta = 1000000, .rms_eps = 1e-6, .tie_embeddings = 1}},
        {"mistral-window-linear",
         {.arch = "mistral", .n_layer = 2, .n_head = 4, .d_model = 32, .d_ff = 40, .vocab = 50, .max_seq = 20,
          .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5, .rope_scaling = 1, .rope_factor = 2,
          .sliding_window = 16}},
        {"llama-attention-bias",
         {.arch = "llama", .n_layer = 1, .n_head = 2, .d_model = 24, .d_ff = 40, .vocab = 40, .max_seq = 20,
          .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5, .qkv_bias = 1, .o_bias = 1}},
        {"qwen3-qknorm-headdim-gqa",
         {.arch = "qwen3", .n_layer = 2, .n_head = 4, .d_model = 32, .d_ff = 48, .vocab = 61, .max_seq = 20,
          .n_kv_heads = 2, .rope_theta = 1000000, .rms_eps = 1e-6, .tie_embeddings = 1, .head_dim = 12, .qk_norm = 1}},
        {"gemma3-window5-mqa-untied",
         {.arch = "gemma3_text", .n_layer = 3, .n_head = 4, .d_model = 24, .d_ff = 40, .vocab = 53, .max_seq = 20,
          .n_kv_heads = 1, .rope_theta = 1000000, .rms_eps = 1e-6, .head_dim = 16, .sliding_window = 5,
          .rope_local_theta = 10000, .sliding_pattern = 2}},
        {"gemma3-headsize256",
         {.arch = "gemma3_text", .n_layer = 2, .n_head = 2, .d_model = 32, .d_ff = 40, .vocab = 45, .max_seq = 20,
          .n_kv_heads = 1, .rope_theta = 1000000, .rms_eps = 1e-6, .tie_embeddings = 1, .head_dim = 256,
          .sliding_window = 3, .rope_local_theta = 10000, .sliding_pattern = 2}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_inference_bytes(bp.cpu, cases[i].c);
        run(bp.cpu, "cpu", cases[i].name, cases[i].c);
        run(bp.gpu, "webgpu", cases[i].name, cases[i].c);
    }
    // decode_attention's split-K through the decoder (the software GPU does not split by itself;
    // a forced count splits even these short caches): 3 key ranges a query, with GQA and with
    // gemma3's windows
    if (wg_settings_set(wg_ctx_settings(wg_of(bp.gpu)), "WGTRAIN_DECODE_SPLIT", "3") != WGT_OK) die("settings");
    run(bp.gpu, "webgpu split-K", cases[1].name, cases[1].c);
    run(bp.gpu, "webgpu split-K", cases[6].name, cases[6].c);
    // an embedding larger than one binding (as bound by decode_embedding): with bindings of 2048
    // elements, wte (77 x 36, 77 x 40 floats) is read in two windows of vocabulary rows
    wg_settings *ws = wg_ctx_settings(wg_of(bp.gpu));
    if (wg_settings_set(ws, "WGTRAIN_DECODE_SPLIT", NULL) != WGT_OK ||
        wg_settings_set(ws, "WGTRAIN_TEST_BINDING_LIMIT", "2048") != WGT_OK)
        die("settings");
    run(bp.gpu, "webgpu wte windows", cases[0].name, cases[0].c);
    run(bp.gpu, "webgpu wte windows", cases[1].name, cases[1].c);
    if (wg_settings_set(ws, "WGTRAIN_TEST_BINDING_LIMIT", NULL) != WGT_OK) die("settings");
    bpair_close(&bp);
    return test_finish();
}
