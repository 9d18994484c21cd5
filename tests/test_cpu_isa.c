// test_cpu_isa.c — the CPU backend's instruction-set variants (cpu_isa.h) give the same bits.
// The hot loops (GeLU, SwiGLU and their backwards, the attention rows) are compiled for plain
// x86-64, AVX2 and AVX-512F; docs/architecture.md promises that each gives the same results, so
// that a result does not depend on the CPU that computed it. This test runs every variant this
// CPU supports, on the ops directly (random inputs plus the edge values ±0, denormals, ±FLT_MAX,
// ±inf, NaN, at every position of a vector so that each lands in the vector body and the scalar
// tail) and on three training steps of a tiny GPT-2 and LLaMA (with dropout), and requires
// bit-identical outputs from each against the baseline. It also checks that an unknown or
// unsupported WGTRAIN_CPU_ISA is refused by backend_cpu_init with a message naming it.
// (OpenBLAS chooses its own kernels by CPU; within one process they are the same for every
// variant, so the matmuls are not what differs here.)
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testlib.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/ops.h"
#include "model/model.h"

static uint64_t rng = 0x1234567ull;
static float urand(void) {  // uniform in [-1, 1)
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 40) / (double)(1ull << 23) - 1.0);
}

// random values of a wide range of magnitudes, then the edge values scattered at the front
static float *inputs(size_t n, float scale) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = urand() * scale * powf(10.0f, 2.0f * urand());
    const float edge[] = {0.0f, -0.0f, 1e-40f, -1e-40f, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY,
                          NAN, -NAN, 100.0f, -100.0f, 1e4f, -1e4f, 3e38f, -3e38f, 87.0f, -87.0f, 44.0f, -44.0f};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0] && i * 3 < n; i++) x[i * 3] = edge[i];
    return x;
}

static void same_bits(const char *what, cpu_isa isa, const void *got, const void *ref, size_t bytes) {
    const uint8_t *a = got, *b = ref;
    size_t i = 0;
    while (i < bytes && a[i] == b[i]) i++;
    CHECK(i == bytes, "%s: the %s variant differs from the baseline at byte %zu", what, cpu_isa_name(isa), i);
}

#define NE 1037  // not a multiple of any vector width: every variant has a scalar tail

// the element-wise ops under the current variant; outputs in out[0..5]
static void run_elementwise(float *out[6], const float *a, const float *b, const float *c) {
    memcpy(out[0], a, NE * 4);
    cpu_gelu_inplace(out[0], NE);
    cpu_swiglu_combine(out[1], a, b, NE);
    cpu_ffn_gelu_backward(out[2], b, a, NE);
    cpu_ffn_swiglu_backward(out[3], out[4], c, a, b, NE);
    cpu_ffn_gelu_backward(out[5], c, b, NE);
}

// attention forward and backward (GQA, HS = 13, with and without dropout; the second sequence
// packed with a sliding window) under the current variant
enum { AB = 2, AT = 19, ANH = 4, ANKV = 2, AHS = 13, AW = (ANH + 2 * ANKV) * AHS };
static void run_attention(float *out, float *lse, float *dqkv, const float *qkv, const float *dout, float p) {
    cpu_attention_forward(out, lse, qkv, NULL, AB, AT, ANH, ANKV, AHS, p, 77, 0);
    cpu_attention_backward(dqkv, dout, qkv, out, lse, NULL, AB, AT, ANH, ANKV, AHS, p, 77, 0);
    uint32_t doc[AB * AT];
    for (uint32_t i = 0; i < AB * AT; i++) doc[i] = i % AT < 7 ? 0 : i % AT < 12 ? 7 : 12;
    const size_t no = (size_t)AB * AT * ANH * AHS, nl = (size_t)AB * ANH * AT, nd = (size_t)AB * AT * AW;
    cpu_attention_forward(out + no, lse + nl, qkv, doc, AB, AT, ANH, ANKV, AHS, p, 77, 5);
    cpu_attention_backward(dqkv + nd, dout, qkv, out + no, lse + nl, doc, AB, AT, ANH, ANKV, AHS, p, 77, 5);
}

// three AdamW steps of a tiny model; its final parameters and moments into st (3 * n floats)
static void run_training(wgt_backend *be, const model_config *cfg, float dropout, float *st, size_t n) {
    wgt_model *m;
    const int B = 2, T = 9;
    if (model_init(&m, be, cfg, B, T) != WGT_OK || model_init_random(m, 5) != WGT_OK) {
        fprintf(stderr, "model_init: %s\n", wgt_last_error());
        exit(1);
    }
    int32_t tok[18], tgt[18];
    for (int i = 0; i < B * T; i++) tok[i] = (i * 7 + 3) % cfg->vocab, tgt[i] = (i * 5 + 1) % cfg->vocab;
    for (int s = 0; s < 3; s++) {
        model_zero_grad(m);
        model_loss_opts lo = {0.1f, 1e-4f, dropout, 100u + (uint32_t)s, 0};
        if (model_forward(m, tok, tgt, lo, 1.0f / (B * T)) != WGT_OK) { fprintf(stderr, "forward: %s\n", wgt_last_error()); exit(1); }
        model_backward(m);
        model_update(m, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f);
    }
    if (model_state_elems(m) != n || model_state_download(m, st, st + n, st + 2 * n) != WGT_OK) {
        fprintf(stderr, "state_download: %s\n", wgt_last_error());
        exit(1);
    }
    model_free(m);
}

// In a child process (the variant is settled once per process): WGTRAIN_CPU_ISA=value must make
// backend_cpu_init fail with WGT_ERR_CONFIG and a message containing `expect`.
static void check_refused(const char *value, const char *expect) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("WGTRAIN_CPU_ISA", value, 1);
        wgt_backend *be = NULL;
        wgt_status st = backend_cpu_init(&be);
        int ok = st == WGT_ERR_CONFIG && be == NULL && strstr(wgt_last_error(), expect) != NULL;
        if (!ok) fprintf(stderr, "WGTRAIN_CPU_ISA=%s: status %d, message: %s\n", value, (int)st, wgt_last_error());
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "WGTRAIN_CPU_ISA=%s should be refused with a message naming '%s'", value, expect);
}

int main(void) {
    // before anything settles the variant in this process
    check_refused("sse9", "sse9");
    check_refused("AVX2 ", "not an instruction set");
    for (int i = 0; i < CPU_ISA_COUNT; i++)
        if (!cpu_isa_supported((cpu_isa)i)) check_refused(cpu_isa_name((cpu_isa)i), "this CPU (or build) has no");
    if (getenv("WGTRAIN_CPU_ISA")) unsetenv("WGTRAIN_CPU_ISA");  // the comparison sets the variants itself

    wgt_backend *be;
    if (backend_cpu_init(&be) != WGT_OK) { fprintf(stderr, "backend_cpu_init: %s\n", wgt_last_error()); return 1; }
    float *a = inputs(NE, 8.0f), *b = inputs(NE, 3.0f), *c = inputs(NE, 1.0f);
    float *ref[6], *got[6];
    for (int k = 0; k < 6; k++) ref[k] = malloc(NE * 4), got[k] = malloc(NE * 4);
    const size_t nq = (size_t)AB * AT * AW, no = (size_t)AB * AT * ANH * AHS, nl = (size_t)AB * ANH * AT;
    float *qkv = malloc(nq * 4), *dout = malloc(no * 4);
    for (size_t i = 0; i < nq; i++) qkv[i] = 2.0f * urand();
    for (size_t i = 0; i < no; i++) dout[i] = urand();
    float *att_ref[2][3], *att_got[3];
    // each twice: the plain causal run, then the packed one with a window (run_attention)
    for (int d = 0; d < 2; d++)
        att_ref[d][0] = malloc(2 * no * 4), att_ref[d][1] = malloc(2 * nl * 4), att_ref[d][2] = malloc(2 * nq * 4);
    att_got[0] = malloc(2 * no * 4), att_got[1] = malloc(2 * nl * 4), att_got[2] = malloc(2 * nq * 4);
    const model_config cfgs[2] = {
        {.arch = "gpt2", .n_layer = 2, .n_head = 2, .d_model = 16, .d_ff = 40, .vocab = 23, .max_seq = 9},
        {.arch = "llama", .n_layer = 2, .n_head = 4, .d_model = 24, .d_ff = 36, .vocab = 23, .max_seq = 9,
         .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5, .tie_embeddings = 0},
    };
    float *st_ref[2] = {0}, *st_got = NULL;
    size_t st_n[2];
    int variants = 0;
    for (int i = 0; i < CPU_ISA_COUNT; i++) {
        cpu_isa isa = (cpu_isa)i;
        if (!cpu_isa_supported(isa)) {
            printf("%-8s not supported by this CPU: not compared\n", cpu_isa_name(isa));
            continue;
        }
        CHECK(cpu_isa_set(isa) == WGT_OK && cpu_isa_active() == isa, "cpu_isa_set(%s)", cpu_isa_name(isa));
        variants++;
        int base = isa == CPU_ISA_BASELINE;
        run_elementwise(base ? ref : got, a, b, c);
        for (int d = 0; d < 2; d++) {
            float **o = base ? att_ref[d] : att_got;
            run_attention(o[0], o[1], o[2], qkv, dout, d ? 0.2f : 0.0f);
            if (!base) {
                char what[64];
                const char *names[3] = {"attention_forward out", "attention_forward lse", "attention_backward dqkv"};
                const size_t sizes[3] = {2 * no, 2 * nl, 2 * nq};
                for (int k = 0; k < 3; k++) {
                    snprintf(what, sizeof what, "%s%s", names[k], d ? " (dropout)" : "");
                    same_bits(what, isa, att_got[k], att_ref[d][k], sizes[k] * 4);
                }
            }
        }
        if (!base) {
            const char *names[6] = {"gelu_inplace", "swiglu_combine", "ffn_gelu_backward", "ffn_swiglu_backward grad_gate",
                                    "ffn_swiglu_backward grad_up", "ffn_gelu_backward (small inputs)"};
            for (int k = 0; k < 6; k++) same_bits(names[k], isa, got[k], ref[k], NE * 4);
        }
        for (int m = 0; m < 2; m++) {
            if (base) {
                wgt_model *probe;
                if (model_init(&probe, be, &cfgs[m], 2, 9) != WGT_OK) { fprintf(stderr, "%s\n", wgt_last_error()); return 1; }
                st_n[m] = model_state_elems(probe);
                model_free(probe);
                st_ref[m] = malloc(3 * st_n[m] * 4);
            }
            free(st_got);
            st_got = malloc(3 * st_n[m] * 4);
            run_training(be, &cfgs[m], m ? 0.1f : 0.0f, base ? st_ref[m] : st_got, st_n[m]);
            if (!base) {
                char what[300];
                snprintf(what, sizeof what, "%.16s: parameters and AdamW moments after 3 steps", cfgs[m].arch);
                same_bits(what, isa, st_got, st_ref[m], 3 * st_n[m] * 4);
            }
        }
        printf("%-8s compared%s\n", cpu_isa_name(isa), base ? " (the reference)" : ": the same bits as baseline");
    }
    if (variants < 2) printf("only the baseline variant runs on this CPU: nothing to compare it with\n");
    for (int k = 0; k < 6; k++) free(ref[k]), free(got[k]);
    for (int d = 0; d < 2; d++) for (int k = 0; k < 3; k++) free(att_ref[d][k]);
    for (int k = 0; k < 3; k++) free(att_got[k]);
    free(st_ref[0]), free(st_ref[1]), free(st_got);
    free(a), free(b), free(c), free(qkv), free(dout);
    be->free(be);
    return test_finish();
}
