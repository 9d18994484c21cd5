// test_lowbit.c — a LoRA model on a frozen base packed in f16, bf16 or nf4 (--base-precision;
// model/base_lowbit.h): the stored values against the rounding each format defines (computed here
// in double), the packed model's loss and adapter gradients against those of an f32 base holding
// the decoded values (bit for bit on the C backend, whose lowbit GEMMs decode and call the same
// f32 GEMMs; within float rounding on WebGPU), the base fingerprint over the decoded values, the
// merge of a packed base, the plan's weight bytes, the refusals, and f32 -> bf16 rounding against a
// double-precision reference.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testlib.h"
#include "backend_pair.h"
#include "backend/lowbit.h"
#include "model/lora.h"
#include "model/nf4.h"
#include "model/plan.h"

// Every projection a multiple of 64 values (nf4's block): d_model 64, kv 2 x 16, d_ff 96.
static const model_config LLAMA = {.arch = "llama", .n_layer = 2, .n_head = 4, .d_model = 64, .d_ff = 96, .vocab = 50,
                                   .max_seq = 8, .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5};
static const model_config GPT2 = {.arch = "gpt2", .n_layer = 2, .n_head = 2, .d_model = 64, .d_ff = 128, .vocab = 50,
                                  .max_seq = 8};
static const model_config QWEN3 = {.arch = "qwen3", .n_layer = 2, .n_head = 4, .d_model = 64, .d_ff = 96, .vocab = 50,
                                   .max_seq = 8, .n_kv_heads = 2, .rope_theta = 1e6, .rms_eps = 1e-6, .tie_embeddings = 1,
                                   .head_dim = 32, .qk_norm = 1};
static const model_config GEMMA3 = {.arch = "gemma3_text", .n_layer = 2, .n_head = 4, .d_model = 64, .d_ff = 96,
                                    .vocab = 50, .max_seq = 8, .n_kv_heads = 2, .rope_theta = 1e6, .rms_eps = 1e-6,
                                    .tie_embeddings = 1, .head_dim = 32, .sliding_window = 3, .rope_local_theta = 1e4,
                                    .sliding_pattern = 2};
enum { B_ = 2, T_ = 5 };

static wgt_model *open_mp(wgt_backend *be, const model_config *cfg, model_base_prec bp, model_precision prec) {
    model_lora_opts lo = {4, 8, 0, 0, "all-linear", bp};
    wgt_model *m;
    if (model_init_lora(&m, be, cfg, B_, T_, prec, &lo) != WGT_OK) die("model_init_lora");
    return m;
}
static wgt_model *open_m(wgt_backend *be, const model_config *cfg, model_base_prec bp) {
    return open_mp(be, cfg, bp, MODEL_PREC_F32);
}

// The base: matrices N(0, 2/fan_in), embeddings N(0, 0.5), norms near 1, from a fixed stream;
// uploaded through model_param_set (a packed base quantises them).
static float *base_values(const model_param_info *p, uint64_t seed) {
    float *x = malloc(p->n * 4);
    trng_state = seed;
    double sd = p->ndim != 2 ? 0.1 : (p->flags & MODEL_T_EMBEDDING) ? 0.5 : 2.0 / sqrt((double)p->shape[1]);
    for (size_t k = 0; k < p->n; k++) x[k] = (float)((p->ndim != 2 ? 1.0 : 0.0) + sd * trng_normal());
    return x;
}
static void set_base(wgt_model *m) {
    for (int i = 0; i < model_param_count(m); i++) {
        float *x = base_values(model_param(m, i), 1000 + (uint64_t)i);
        if (model_param_set(m, i, x) != WGT_OK) die("param_set");
        free(x);
    }
}
// Adapters O(0.3) random (B too, else A's gradient is 0), moments 0.
static void set_adapters(wgt_model *m) {
    size_t n = model_state_elems(m);
    trng_state = 77;
    float *s = trand_normal(n, 0.3f), *z = calloc(n, 4);
    if (model_state_upload(m, s, z, z) != WGT_OK) die("state_upload");
    free(s);
    free(z);
}

static double loss_grads(wgt_model *m, float *g) {
    int32_t tok[B_ * T_], tgt[B_ * T_];
    for (int i = 0; i < B_ * T_; i++) tok[i] = (i * 7 + 3) % 50, tgt[i] = (i * 11 + 5) % 50;
    model_loss_opts lo = {0, 0, 0, 1, 0};
    model_zero_grad(m);
    if (model_forward(m, tok, tgt, lo, 1.0f / (B_ * T_)) != WGT_OK) die("forward");
    double s;
    if (model_loss_sum(m, &s) != WGT_OK) die("loss_sum");
    model_backward(m);
    if (model_grads_download(m, g, 0, model_state_elems(m)) != WGT_OK) die("grads_download");
    return s / (B_ * T_);
}

// The tensors a packed base packs: the per-layer matrices (a layer number in the name) that are
// not embeddings.
static int is_projection(const model_param_info *p) {
    return p->ndim == 2 && !(p->flags & MODEL_T_EMBEDDING) && strpbrk(p->name, "0123456789") != NULL;
}

// The stored values of tensor i of a packed model against the format's rounding of the originals.
static void check_values(wgt_model *m, model_base_prec bp, const char *name) {
    double worst = 0;
    for (int i = 0; i < model_param_count(m); i++) {
        const model_param_info *p = model_param(m, i);
        float *x = base_values(p, 1000 + (uint64_t)i), *d = malloc(p->n * 4);
        if (model_param_get(m, i, d, 0) != WGT_OK) die("param_get");
        const int packed = is_projection(p);
        if (!packed || bp == MODEL_BASE_F32) {
            CHECK(!memcmp(x, d, p->n * 4), "%s: %s is not stored in f32 as given", name, p->name);
        } else if (bp == MODEL_BASE_NF4) {
            // per block of 64: the largest |x| comes back exactly, every value within half the widest
            // gap between neighbouring levels (levels 0 and 1: 0.1519) of the block's absmax
            for (size_t b0 = 0; b0 < p->n; b0 += NF4_BLOCK) {
                double am = 0;
                for (size_t k = b0; k < b0 + NF4_BLOCK; k++) am = fmax(am, fabs(x[k]));
                for (size_t k = b0; k < b0 + NF4_BLOCK; k++) {
                    double e = fabs((double)d[k] - x[k]);
                    worst = fmax(worst, e / am);
                    CHECK(e <= 0.1520 * am * (1 + 1e-6), "%s: %s[%zu] = %g stored as %g (block absmax %g)", name, p->name, k,
                          x[k], d[k], am);
                    if (fabs(x[k]) == am) CHECK(fabs(d[k]) == (float)am, "%s: %s[%zu], its block's absmax, not exact", name, p->name, k);
                }
            }
        } else {
            // round to nearest of 8 (bf16) or 11 (f16) significant bits: relative error at most 2^-8 or
            // 2^-11, except below f16's normal range (2^-14), where f16's subnormal step 2^-24 gives an
            // absolute error of at most 2^-25; and the low bits of the f32 zero for bf16
            const double rel = bp == MODEL_BASE_BF16 ? 1.0 / 256 : 1.0 / 2048;
            for (size_t k = 0; k < p->n; k++) {
                double e = fabs((double)d[k] - x[k]);
                const int sub = bp == MODEL_BASE_F16 && fabs(x[k]) < ldexp(1, -14);
                if (!sub) worst = fmax(worst, e / fabs(x[k]));
                CHECK(e <= (sub ? ldexp(1, -25) : rel * fabs(x[k])), "%s: %s[%zu] = %.9g stored as %.9g", name, p->name, k,
                      x[k], d[k]);
                uint32_t u;
                memcpy(&u, &d[k], 4);
                if (bp == MODEL_BASE_BF16) CHECK((u & 0xffff) == 0, "%s: %s[%zu] has more than bf16's bits", name, p->name, k);
            }
        }
        free(x);
        free(d);
    }
    printf("%s: stored values within %.3g of %s\n", name, worst, bp == MODEL_BASE_NF4 ? "their block's absmax" : "their size");
}

// An f32-base model holding the packed model's decoded values and the same adapters.
static wgt_model *f32_twin(wgt_backend *be, wgt_model *q, const model_config *cfg) {
    wgt_model *r = open_m(be, cfg, MODEL_BASE_F32);
    for (int i = 0; i < model_param_count(q); i++) {
        const model_param_info *p = model_param(q, i);
        float *d = malloc(p->n * 4);
        if (model_param_get(q, i, d, 0) != WGT_OK || model_param_set(r, i, d) != WGT_OK) die("copy base");
        free(d);
    }
    set_adapters(r);
    return r;
}

static void test_prec(bpair *P, const model_config *cfg, model_base_prec bp, const char *fam) {
    char name[64];
    snprintf(name, sizeof name, "%s %s", fam, model_base_prec_name(bp));
    wgt_model *q = open_m(P->cpu, cfg, bp);
    set_base(q);
    set_adapters(q);
    check_values(q, bp, name);
    wgt_model *r = f32_twin(P->cpu, q, cfg);
    const size_t n = model_state_elems(q);
    float *gq = malloc(n * 4), *gr = malloc(n * 4), *gg = malloc(n * 4);
    double Lq = loss_grads(q, gq), Lr = loss_grads(r, gr);
    // the C backend: the same f32 GEMMs on the same values, so the same bits
    CHECK(Lq == Lr && !memcmp(gq, gr, n * 4), "%s: cpu loss %.9g vs %.9g of the f32 base, or its gradients differ", name, Lq,
          Lr);
    char hq[17], hr[17];
    if (model_lora_base_fingerprint(q, hq) != WGT_OK || model_lora_base_fingerprint(r, hr) != WGT_OK) die("fingerprint");
    CHECK(!strcmp(hq, hr), "%s: fingerprint %s, the f32 base of its values %s", name, hq, hr);
    // WebGPU: the packed model on the device against the C reference's f32 base. Tolerance as
    // test_lora's WebGPU check: f32 GEMMs and attention summed in other orders, ~1e-6 relative per
    // op through two layers; 1e-4 of the largest gradient bounds that with a margin.
    wgt_model *g = open_m(P->gpu, cfg, bp);
    set_base(g);
    set_adapters(g);
    double Lg = loss_grads(g, gg), mx = 0, worst = 0;
    for (size_t k = 0; k < n; k++) mx = fmax(mx, fabs(gr[k])), worst = fmax(worst, fabs(gg[k] - gr[k]));
    CHECK(fabs(Lg - Lr) <= 1e-5 * fabs(Lr), "%s: webgpu loss %.9g, cpu f32 base %.9g", name, Lg, Lr);
    CHECK(mx > 0 && worst <= 1e-4 * mx, "%s: webgpu adapter gradients %g from the cpu's (largest %g)", name, worst, mx);
    char hg[17];
    if (model_lora_base_fingerprint(g, hg) != WGT_OK) die("fingerprint");
    CHECK(!strcmp(hg, hr), "%s: webgpu fingerprint %s, cpu %s", name, hg, hr);
    printf("%s: cpu bit-identical to the f32 base of its values; webgpu loss %.2g, gradients %.2g of the largest apart\n",
           name, fabs(Lg - Lr), worst / mx);
    // the merge: the packed base decoded to f32 plus s B A computes what base + adapters computed
    // (the adapters' GEMMs summed separately before: f32 rounding, 1e-5 relative)
    if (model_lora_merge(g) != WGT_OK) die("merge");
    double Lm = loss_grads(g, gg);
    CHECK(fabs(Lm - Lg) <= 1e-5 * fabs(Lg), "%s: merged loss %.9g, unmerged %.9g", name, Lm, Lg);
    free(gq);
    free(gr);
    free(gg);
    model_free(q);
    model_free(r);
    model_free(g);
}

static void test_plan_and_refusals(wgt_backend *cpu) {
    // the plan's weights: f32 > f16 = bf16 > nf4, by the packed projections' bytes
    uint64_t w[4];
    size_t proj = 0;
    for (int bp = 0; bp < 4; bp++) {
        model_lora_opts lo = {4, 8, 0, 0, "all-linear", (model_base_prec)bp};
        model_opts o = {MODEL_PREC_F32, &lo, MODEL_RECOMPUTE_NONE, 0};
        model_plan p;
        if (model_plan_make(&p, cpu, &LLAMA, B_, T_, &o) != WGT_OK) die("plan");
        w[bp] = p.bytes[PLAN_WEIGHTS];
    }
    wgt_model *m = open_m(cpu, &LLAMA, MODEL_BASE_F32);
    for (int i = 0; i < model_param_count(m); i++) {
        const model_param_info *p = model_param(m, i);
        if (is_projection(p)) proj += p->n;
    }
    model_free(m);
    // f32 keeps 4 bytes a projection value, f16/bf16 2, nf4 half a byte and 4 per 64 (absmax); the
    // marker and alignment add under 1 KiB
    CHECK(w[1] == w[2], "f16 and bf16 plan %llu and %llu weight bytes", (unsigned long long)w[1], (unsigned long long)w[2]);
    CHECK(llabs((long long)(w[0] - w[2]) - (long long)(2 * proj)) <= 1024, "bf16 saves %lld bytes, want %zu",
          (long long)(w[0] - w[2]), 2 * proj);
    CHECK(llabs((long long)(w[0] - w[3]) - (long long)(proj * 4 - proj / 2 - proj / 16)) <= 1024,
          "nf4 saves %lld bytes, want %zu", (long long)(w[0] - w[3]), proj * 4 - proj / 2 - proj / 16);
    printf("plan weights: f32 %llu, bf16 %llu, nf4 %llu bytes (%zu projection values)\n", (unsigned long long)w[0],
           (unsigned long long)w[2], (unsigned long long)w[3], proj);
    // refusals: nf4 on projections that are not whole blocks (k_proj 12 x 24 = 288 values); a
    // packed base without LoRA
    model_config odd = LLAMA;
    odd.d_model = 24;
    model_lora_opts lo = {4, 8, 0, 0, "all-linear", MODEL_BASE_NF4};
    wgt_model *x = NULL;
    CHECK(model_init_lora(&x, cpu, &odd, B_, T_, MODEL_PREC_F32, &lo) != WGT_OK &&
              strstr(wgt_last_error(), "--base-precision nf4") && strstr(wgt_last_error(), "bf16"),
          "nf4 on 288-value projections: %s", wgt_last_error());
    lo.base_prec = MODEL_BASE_BF16;
    CHECK(model_init_lora(&x, cpu, &odd, B_, T_, MODEL_PREC_F32, &lo) == WGT_OK, "bf16 on d_model 24: %s", wgt_last_error());
    model_free(x);
    x = NULL;
    lo.r = 0;
    CHECK(model_init_lora(&x, cpu, &LLAMA, B_, T_, MODEL_PREC_F32, &lo) != WGT_OK && strstr(wgt_last_error(), "--lora"),
          "a packed base without LoRA: %s", wgt_last_error());
}

// f32 -> bf16 against round-to-nearest-even computed in double: of the two bf16 neighbours of x
// (x's bits truncated, and the next bf16 away from zero) the nearer, the even one on a tie;
// past the largest bf16 the rounding gives infinity as IEEE's does; NaN stays NaN. Random bit
// patterns, exact ties, subnormals and the overflow edge.
static void test_bf16_rounding(void) {
    int bad = 0;
    trng_state = 5;
    for (int i = 0; i < 300000; i++) {
        uint32_t u = trng_u32();
        if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u;         // a tie
        if (i % 4 == 2) u &= 0x807fffffu;                        // subnormal
        if (i == 3) u = 0x7f7fffffu;                             // the largest float: rounds up to Inf
        float x;
        memcpy(&x, &u, 4);
        uint16_t got = wgt_f32_to_bf16(x);
        if (isnan(x)) {
            bad += !isnan(wgt_bf16_to_f32(got));
            continue;
        }
        if (isinf(x)) {
            bad += got != (uint16_t)(u >> 16);
            continue;
        }
        uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;       // hi: the next one away from zero (may be Inf)
        float flo, fhi;
        memcpy(&flo, &lo, 4);
        memcpy(&fhi, &hi, 4);
        double dlo = fabs((double)x - flo);
        double dhi = isinf(fhi) ? fabs((double)x - copysign(ldexp(1, 128), x)) : fabs((double)x - fhi);
        uint32_t want = dlo < dhi ? lo : dhi < dlo ? hi : (((lo >> 16) & 1) ? hi : lo);
        if (got != (uint16_t)(want >> 16) && bad++ < 5)
            fprintf(stderr, "bf16 of %08x: got %04x, want %04x\n", u, got, want >> 16);
    }
    CHECK(bad == 0, "f32 -> bf16: %d of 300000 values rounded wrongly", bad);
}

// LoRA in mixed precision (--precision f16): the activations the backward keeps are f16, the frozen
// GEMMs and the adapters widen them to f32. Against the same model in f32 on the C backend, and
// WebGPU's f16 against the C backend's f16.
static void test_f16(bpair *P, const model_config *cfg, model_base_prec bp, const char *fam) {
    char name[64];
    snprintf(name, sizeof name, "%s %s base, --precision f16", fam, model_base_prec_name(bp));
    wgt_model *h = open_mp(P->cpu, cfg, bp, MODEL_PREC_F16), *f = open_m(P->cpu, cfg, bp),
              *g = open_mp(P->gpu, cfg, bp, MODEL_PREC_F16);
    wgt_model *ms[3] = {h, f, g};
    for (int i = 0; i < 3; i++) {
        set_base(ms[i]);
        set_adapters(ms[i]);
    }
    const size_t n = model_state_elems(h);
    float *gh = malloc(n * 4), *gf = malloc(n * 4), *gg = malloc(n * 4);
    double Lh = loss_grads(h, gh), Lf = loss_grads(f, gf), Lg = loss_grads(g, gg), mx = 0, dhf = 0, dgh = 0;
    for (size_t k = 0; k < n; k++) {
        mx = fmax(mx, fabs(gf[k]));
        dhf = fmax(dhf, fabs(gh[k] - gf[k]));
        dgh = fmax(dgh, fabs(gg[k] - gh[k]));
    }
    // f16 against f32: each kept activation rounded to 11 significant bits (2^-12 relative), through
    // two layers' GEMMs, norms and attention: the loss within 1e-3 and the adapter gradients within
    // 3 % of the largest (measured: 0.4 to 1.6 %), while an adapter term dropped or doubled moves
    // them by far more (test_lora)
    CHECK(fabs(Lh - Lf) <= 1e-3 * fabs(Lf), "%s: loss %.7g, f32 %.7g", name, Lh, Lf);
    CHECK(mx > 0 && dhf <= 3e-2 * mx, "%s: adapter gradients %g from f32's (largest %g)", name, dhf, mx);
    // WebGPU f16 against the C backend's f16: the same f16 roundings of values that differ by f32
    // summation order, which flips an occasional rounding (2^-11 of that value): 1e-4 for the loss
    // (measured to 1.6e-5), 1e-3 of the largest gradient (measured to 2e-4)
    CHECK(fabs(Lg - Lh) <= 1e-4 * fabs(Lh), "%s: webgpu loss %.9g, cpu %.9g", name, Lg, Lh);
    CHECK(dgh <= 1e-3 * mx, "%s: webgpu adapter gradients %g from the cpu's (largest %g)", name, dgh, mx);
    printf("%s: loss %.3g from f32, gradients %.3g of the largest; webgpu %.3g, %.3g\n", name, fabs(Lh - Lf) / fabs(Lf),
           dhf / mx, fabs(Lg - Lh) / fabs(Lh), dgh / mx);
    free(gh);
    free(gf);
    free(gg);
    for (int i = 0; i < 3; i++) model_free(ms[i]);
}

int main(void) {
    test_bf16_rounding();
    bpair P = bpair_open();
    test_plan_and_refusals(P.cpu);
    test_prec(&P, &LLAMA, MODEL_BASE_BF16, "llama");
    test_prec(&P, &LLAMA, MODEL_BASE_NF4, "llama");
    test_prec(&P, &LLAMA, MODEL_BASE_F16, "llama");
    test_prec(&P, &GPT2, MODEL_BASE_NF4, "gpt2");
    test_prec(&P, &QWEN3, MODEL_BASE_NF4, "qwen3");
    test_prec(&P, &GEMMA3, MODEL_BASE_BF16, "gemma3_text");
    test_f16(&P, &LLAMA, MODEL_BASE_F32, "llama");
    test_f16(&P, &LLAMA, MODEL_BASE_NF4, "llama");
    test_f16(&P, &GPT2, MODEL_BASE_BF16, "gpt2");
    bpair_close(&P);
    return test_finish();
}
