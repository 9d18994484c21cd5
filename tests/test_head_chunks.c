// test_head_chunks.c — the lm_head and the loss in row chunks (docs/memory.md#chunked-logits):
// with WGTRAIN_LOGITS_CHUNK_ROWS forcing chunks of 1, 4 and 7 rows (B*T = 18: 4 and 7 leave a short
// last chunk) the loss, every gradient and the logits must be those of the unchunked head. Each row's
// logits, loss and dlogits are the same ops on the same row, but a GEMM of fewer rows may sum a dot
// product in another order (BLAS on the C backend, the tiling on WebGPU), and the lm_head's gradient
// adds its B*T row products chunk after chunk instead of in one sum: so the results agree within
// float rounding (the bounds below say why), not bit for bit. Cases:
// GPT-2, LLaMA and Gemma-3, f16 with a loss scale, LoRA, packed examples, masked targets, label
// smoothing and z-loss, dropout. Also: the chunked model allocates one chunk of logits, the size
// rule picks chunks past 256 MiB of logits, and a malformed setting is refused.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testlib.h"
#include "backend_pair.h"
#include "model/lora.h"
#include "model/plan.h"

static const model_config LLAMA = {.arch = "llama", .n_layer = 2, .n_head = 4, .d_model = 32, .d_ff = 40, .vocab = 23,
                                   .max_seq = 12, .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5};
static const model_config GEMMA3 = {.arch = "gemma3_text", .n_layer = 2, .n_head = 4, .d_model = 32, .d_ff = 40,
                                    .vocab = 23, .max_seq = 12, .n_kv_heads = 2, .rope_theta = 1e6, .rms_eps = 1e-6,
                                    .tie_embeddings = 1, .head_dim = 6, .sliding_window = 4, .rope_local_theta = 1e4,
                                    .sliding_pattern = 2};
static const model_config GPT2 = {.arch = "gpt2", .n_layer = 2, .n_head = 2, .d_model = 16, .d_ff = 32, .vocab = 19,
                                  .max_seq = 12};
enum { B_ = 2, T_ = 9, BT_ = B_ * T_ };

typedef struct {
    const char *name;
    const model_config *cfg;
    model_precision prec;
    int lora, packed;
    float alpha, beta, dropout;
} hcase;

typedef struct {
    double loss;
    float *g, *logits;
    size_t n;
    uint64_t bytes;
} result;

static void set_rows(int rows) {
    char s[16];
    snprintf(s, sizeof s, "%d", rows);
    setenv("WGTRAIN_LOGITS_CHUNK_ROWS", s, 1);
}

static result run_case(wgt_backend *be, const hcase *c, int rows) {
    result r = {0};
    uint64_t live0 = 0, peak0 = 0, live1 = 0, peak1 = 0;
    model_lora_opts lora = {4, 8, 0.0, 0, "all-linear", MODEL_BASE_F32};
    set_rows(rows);
    if (be->bytes_allocated) be->bytes_allocated(be, &live0, &peak0);
    model_opts o = {c->prec, c->lora ? &lora : NULL, MODEL_RECOMPUTE_NONE, 0};
    wgt_model *m;
    if (model_init_opts(&m, be, c->cfg, B_, T_, &o) != WGT_OK) die("model_init_opts");
    if (be->bytes_allocated) be->bytes_allocated(be, &live1, &peak1);
    r.bytes = live1 - live0;
    if (model_init_random(m, 5) != WGT_OK) die("init_random");
    r.n = model_state_elems(m);
    if (c->lora) {  // B != 0 so that every adapter gradient is nonzero
        float *s = calloc(r.n, 4), *z = calloc(r.n, 4);
        if (model_state_download(m, s, z, z) != WGT_OK) die("state_download");
        for (size_t k = 0; k < r.n; k++) if (s[k] == 0) s[k] = (float)(0.01 * ((k * 2654435761u) % 200) - 1.0);
        memset(z, 0, r.n * 4);
        if (model_state_upload(m, s, z, z) != WGT_OK) die("state_upload");
        free(s);
        free(z);
        model_lora_set_training(m, 1);
    }
    if (c->prec == MODEL_PREC_F16 && model_set_loss_scale(m, 1024.0f, 0, 100) != WGT_OK) die("loss scale");
    int32_t tok[BT_], tgt[BT_];
    uint32_t doc[BT_];
    int valid = 0;
    for (int i = 0; i < BT_; i++) {
        tok[i] = (i * 7 + 3) % c->cfg->vocab;
        tgt[i] = i % 5 == 2 ? -1 : (i * 5 + 1) % c->cfg->vocab;  // masked targets: no loss, no gradient
        valid += tgt[i] >= 0;
        const int t = i % T_;
        doc[i] = (uint32_t)(t < 4 ? 0 : 4);  // packed: two examples a row, the second from position 4
    }
    if (c->packed && model_set_doc_start(m, doc) != WGT_OK) die("doc_start");
    model_loss_opts lo = {c->alpha, c->beta, c->dropout, 777u, 0};
    model_zero_grad(m);
    if (model_forward(m, tok, tgt, lo, 1.0f / (float)valid) != WGT_OK) die("forward");
    model_backward(m);
    if (model_loss_sum(m, &r.loss) != WGT_OK) die("loss");
    r.g = malloc(r.n * 4);
    if (model_grads_download(m, r.g, 0, r.n) != WGT_OK) die("grads");
    r.logits = malloc((size_t)BT_ * c->cfg->vocab * 4);
    model_lora_set_training(m, 0);
    if (model_forward_logits(m, tok, r.logits) != WGT_OK) die("forward_logits");
    model_free(m);
    return r;
}

static void compare(wgt_backend *be, const hcase *c) {
    result r0 = run_case(be, c, 0);  // 0: chosen by size (18 x V logits: whole)
    const size_t nl = (size_t)BT_ * c->cfg->vocab;
    const int chunks[] = {1, 4, 7};
    for (int i = 0; i < 3; i++) {
        result r = run_case(be, c, chunks[i]);
        double mx = 0, err = 0, lmx = 0, lerr = 0;
        for (size_t k = 0; k < r.n; k++) { mx = fmax(mx, fabs(r0.g[k])); err = fmax(err, fabs(r.g[k] - r0.g[k])); }
        for (size_t k = 0; k < nl; k++) {
            lmx = fmax(lmx, fabs(r0.logits[k]));
            lerr = fmax(lerr, fabs(r.logits[k] - r0.logits[k]));
        }
        CHECK(mx > 0, "%s %s: no gradient at all", be->name, c->name);
        // Rounding: an lm_head gradient element is a sum of B*T = 18 row products, added in chunks
        // instead of at once; reordering n float additions moves the sum by at most about n * 2^-24 of
        // the sum of its terms' magnitudes (< 18 * 6e-8 ~ 1.1e-6 of it), far inside 1e-5 of the largest
        // gradient here. On WebGPU a GEMM of fewer rows may also tile differently, the same kind of
        // reordering. Every other gradient follows from the same dlnf rows.
        CHECK(err <= 1e-5 * mx, "%s %s, chunks of %d rows: gradients %.3g apart (largest %.3g)", be->name, c->name,
              chunks[i], err, mx);
        // Loss and logits: the C backend's GEMM is BLAS, whose kernels block by the number of rows, so
        // a row's C-term dot products may be summed in another order in a chunk (as WebGPU's tiling
        // may): each logit moves by at most about C * 2^-24 of the sum of its terms' magnitudes,
        // inside 1e-5 of the largest logit; the loss, a smooth function of them, within 1e-5 of itself.
        CHECK(fabs(r.loss - r0.loss) <= 1e-5 * fabs(r0.loss), "%s %s, chunks of %d rows: loss %.9g, unchunked %.9g",
              be->name, c->name, chunks[i], r.loss, r0.loss);
        CHECK(lerr <= 1e-5 * lmx, "%s %s, chunks of %d rows: logits %.3g apart (largest %.3g)", be->name, c->name,
              chunks[i], lerr, lmx);
        // the chunked model holds chunks[i] rows of logits instead of B*T: the plan counts exactly
        // those, and the backend allocates less
        model_plan pl;
        model_lora_opts lora = {4, 8, 0.0, 0, "all-linear", MODEL_BASE_F32};
        model_opts o = {c->prec, c->lora ? &lora : NULL, MODEL_RECOMPUTE_NONE, 0};
        set_rows(chunks[i]);
        if (model_plan_make(&pl, be, c->cfg, B_, T_, &o) != WGT_OK) die("plan");
        CHECK(pl.bytes[PLAN_LOGITS] == (uint64_t)chunks[i] * c->cfg->vocab * 4, "%s %s: chunks of %d rows plan %llu "
              "bytes of logits", be->name, c->name, chunks[i], (unsigned long long)pl.bytes[PLAN_LOGITS]);
        CHECK(r.bytes < r0.bytes, "%s %s: chunks of %d rows allocate %llu bytes, unchunked %llu", be->name, c->name,
              chunks[i], (unsigned long long)r.bytes, (unsigned long long)r0.bytes);
        printf("%s %-22s chunks of %d rows: loss %.7f (unchunked %.7f), gradients within %.2g of %.2g\n", be->name,
               c->name, chunks[i], r.loss, r0.loss, err, mx);
        free(r.g);
        free(r.logits);
    }
    free(r0.g);
    free(r0.logits);
}

// The size rule, on the memory plan: SmolLM2's vocabulary (49152) at B=4, T=2048 has 1.5 GiB of
// logits, so under recomputation they come in chunks of 64 MiB (341 rows); at T=256 (48 MiB), or
// without recomputation, they stay whole.
static void check_size_rule(wgt_backend *be) {
    unsetenv("WGTRAIN_LOGITS_CHUNK_ROWS");
    model_config c = LLAMA;
    c.vocab = 49152;
    c.max_seq = 2048;
    model_opts o = {MODEL_PREC_F32, NULL, MODEL_RECOMPUTE_BLOCK, 0};
    model_plan p;
    if (model_plan_make(&p, be, &c, 4, 2048, &o) != WGT_OK) die("plan");
    CHECK(p.bytes[PLAN_LOGITS] == 341ull * 49152 * 4, "B=4, T=2048, V=49152: %llu bytes of logits planned, expected "
          "one chunk of 341 rows", (unsigned long long)p.bytes[PLAN_LOGITS]);
    model_opts o_none = o;
    o_none.recompute = MODEL_RECOMPUTE_NONE;
    if (model_plan_make(&p, be, &c, 4, 2048, &o_none) != WGT_OK) die("plan");
    CHECK(p.bytes[PLAN_LOGITS] == 8192ull * 49152 * 4, "B=4, T=2048, --recompute none: %llu bytes of logits planned, "
          "expected all 8192 rows", (unsigned long long)p.bytes[PLAN_LOGITS]);
    if (model_plan_make(&p, be, &c, 1, 256, &o) != WGT_OK) die("plan");
    CHECK(p.bytes[PLAN_LOGITS] == 256ull * 49152 * 4, "B=1, T=256: %llu bytes of logits planned, expected all 256 rows",
          (unsigned long long)p.bytes[PLAN_LOGITS]);
    setenv("WGTRAIN_LOGITS_CHUNK_ROWS", "12x", 1);
    wgt_model *m = NULL;
    wgt_status st = model_init_opts(&m, be, &LLAMA, B_, T_, &o);
    CHECK(st != WGT_OK && m == NULL && strstr(wgt_last_error(), "WGTRAIN_LOGITS_CHUNK_ROWS"),
          "a malformed WGTRAIN_LOGITS_CHUNK_ROWS is refused naming it (got: %s)", st == WGT_OK ? "accepted" : wgt_last_error());
    if (m) model_free(m);
    unsetenv("WGTRAIN_LOGITS_CHUNK_ROWS");
}

int main(void) {
    const hcase cases[] = {
        {"gpt2", &GPT2, MODEL_PREC_F32, 0, 0, 0.1f, 1e-4f, 0.0f},
        {"gpt2 f16", &GPT2, MODEL_PREC_F16, 0, 0, 0.0f, 0.0f, 0.0f},
        {"gpt2 lora", &GPT2, MODEL_PREC_F32, 1, 0, 0.0f, 1e-4f, 0.0f},
        {"llama smoothing z-loss", &LLAMA, MODEL_PREC_F32, 0, 0, 0.1f, 1e-4f, 0.1f},
        {"llama f16 packed", &LLAMA, MODEL_PREC_F16, 0, 1, 0.0f, 1e-4f, 0.0f},
        {"llama lora packed", &LLAMA, MODEL_PREC_F32, 1, 1, 0.1f, 0.0f, 0.0f},
        {"gemma3 smoothing z-loss", &GEMMA3, MODEL_PREC_F32, 0, 0, 0.1f, 1e-4f, 0.1f},
        {"gemma3 f16", &GEMMA3, MODEL_PREC_F16, 0, 0, 0.1f, 0.0f, 0.0f},
        {"gemma3 lora", &GEMMA3, MODEL_PREC_F32, 1, 1, 0.0f, 1e-4f, 0.0f},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    wgt_backend *cpu;
    if (backend_cpu_init(&cpu) != WGT_OK) die("cpu");
    for (int i = 0; i < nc; i++) compare(cpu, &cases[i]);
    check_size_rule(cpu);
    cpu->free(cpu);
    bpair P = bpair_open();
    compare(P.gpu, &cases[1]);  // gpt2 f16
    compare(P.gpu, &cases[3]);  // llama smoothing z-loss dropout
    compare(P.gpu, &cases[8]);  // gemma3 lora packed
    bpair_close(&P);
    unsetenv("WGTRAIN_LOGITS_CHUNK_ROWS");
    return test_finish();
}
