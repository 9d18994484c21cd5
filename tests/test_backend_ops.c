// test_backend_ops.c — every op of src/backend/op_list.h on both backends, on random data,
// through the ops' generic calls (op_desc.h), compared with a tolerance per case (in the manner
// of ggml's test-backend-ops). Each tensor sits at an offset inside a larger buffer whose
// guard elements must come back unchanged: an op writes its views and nothing else.
// An op without a case here fails the test.
//   test_backend_ops            all cases
//   test_backend_ops --list     the cases, one a line
//   test_backend_ops WORD ...   the cases whose op name contains a WORD
// The hand-written edge-case tests (test_kernels_*.c) and finite-difference tests
// (test_cpu_grad.c) stay beside this one.
#include <stdint.h>
#include "backend/cpu/ops.h"
#include "backend/lowbit.h"
#include "backend/opt_status.h"
#include "backend/op_desc.h"
#include "backend/webgpu/wg_ops.h"
#include "backend_pair.h"

#define GUARD 64  // elements before and after every view (one alignment unit)

typedef struct op_case op_case;
struct op_case {
    const char *op;
    const char *sizes;  // "N=37,C=64,OC=96": the scalars without defaults, and any to override
    // |gpu - cpu| <= tol_max * max|cpu| + rtol * |cpu| per output; why in the comment beside
    double tol_max, rtol;
    // makes inputs consistent where random data would not be (statistics from a forward)
    void (*prepare)(const wgt_op_desc *d, float **host, const double *s);
};

static int bind_of(const wgt_op_desc *d, const char *name) {
    for (int b = 0; b < d->nb; b++)
        if (!strcmp(d->b[b].name, name)) return b;
    fprintf(stderr, "op %s has no binding %s\n", d->name, name);
    exit(2);
}
static int scalar_of(const wgt_op_desc *d, const char *name) {
    for (int i = 0; i < d->ns; i++)
        if (!strcmp(d->s[i].name, name)) return i;
    return -1;
}

// a packed frozen weight (backend/lowbit.h): f16 / bf16 words of N(0,1) values (random bits
// would hold NaN and Inf), nf4 words of random codes and absmax values in [0, 2)
static void prep_lowbit(const wgt_op_desc *d, float **h, const double *s) {
    const uint32_t fmt = (uint32_t)s[scalar_of(d, "fmt")], WW = (uint32_t)s[scalar_of(d, "WW")];
    uint32_t *w = (uint32_t *)h[bind_of(d, "weight")];
    for (uint32_t i = 0; i < WW; i++) {
        if (fmt == WGT_LOWBIT_NF4) {
            w[i] = trng_u32();
            continue;
        }
        float a = trng_normal(), b = trng_normal();
        uint32_t lo = fmt == WGT_LOWBIT_F16 ? wgt_f32_to_f16(a) : wgt_f32_to_bf16(a);
        uint32_t hi = fmt == WGT_LOWBIT_F16 ? wgt_f32_to_f16(b) : wgt_f32_to_bf16(b);
        w[i] = lo | hi << 16;
    }
    float *am = h[bind_of(d, "absmax")];
    for (uint32_t i = 0; i < (uint32_t)s[scalar_of(d, "NB")]; i++) am[i] = 2.0f * (float)(trng_u32() >> 8) / 16777216.0f;
}

// layernorm_backward needs the mean and rstd of its input
static void prep_layernorm_bwd(const wgt_op_desc *d, float **h, const double *s) {
    uint32_t N = (uint32_t)s[scalar_of(d, "N")], C = (uint32_t)s[scalar_of(d, "C")];
    float *out = malloc((size_t)N * C * 4), *bias = calloc(C, 4);
    cpu_layernorm_forward(out, h[bind_of(d, "mean")], h[bind_of(d, "rstd")], h[bind_of(d, "inp")],
                          h[bind_of(d, "weight")], bias, N, C);
    free(out);
    free(bias);
}

// rmsnorm_backward needs the rstd of its input
static void prep_rmsnorm_bwd(const wgt_op_desc *d, float **h, const double *s) {
    uint32_t N = (uint32_t)s[scalar_of(d, "N")], C = (uint32_t)s[scalar_of(d, "C")];
    float *out = malloc((size_t)N * C * 4);
    cpu_rmsnorm_forward(out, h[bind_of(d, "rstd")], h[bind_of(d, "inp")], h[bind_of(d, "weight")], N, C, 1e-5f);
    free(out);
}

// qk_norm_backward needs the rstd of its qkv (forward at its eps default, 1e-6)
static void prep_qk_norm_bwd(const wgt_op_desc *d, float **h, const double *s) {
    uint32_t B = (uint32_t)s[scalar_of(d, "B")], T = (uint32_t)s[scalar_of(d, "T")], NH = (uint32_t)s[scalar_of(d, "NH")],
             NKV = (uint32_t)s[scalar_of(d, "NKV")], HS = (uint32_t)s[scalar_of(d, "HS")];
    float *out = malloc((size_t)B * T * (NH + 2 * NKV) * HS * 4);
    cpu_qk_norm_forward(out, h[bind_of(d, "rstd")], h[bind_of(d, "qkv")], h[bind_of(d, "q_weight")],
                        h[bind_of(d, "k_weight")], B, T, NH, NKV, HS, 1e-6f, (float)s[scalar_of(d, "w_offset")]);
    free(out);
}

// doc_start of packed examples: each sequence cut into examples of random lengths (1 to about
// T/2, so some span several tiles and some are single tokens); doc_start[b,t] = the first
// position of t's example (<= t, non-decreasing: the op's contract)
static void prep_doc_start(const wgt_op_desc *d, float **h, const double *s) {
    uint32_t B = (uint32_t)s[scalar_of(d, "B")], T = (uint32_t)s[scalar_of(d, "T")];
    uint32_t *doc = (uint32_t *)h[bind_of(d, "doc_start")];
    for (uint32_t b = 0; b < B; b++) {
        uint32_t start = 0, left = 0;
        for (uint32_t t = 0; t < T; t++) {
            if (!left) {
                start = t;
                left = 1 + trng_u32() % (T / 2 + 1);
            }
            doc[(size_t)b * T + t] = start;
            left--;
        }
    }
}

// attention_backward needs the forward's out and lse (with the same dropout and mask)
static void prep_attention_bwd(const wgt_op_desc *d, float **h, const double *s) {
    prep_doc_start(d, h, s);
    uint32_t B = (uint32_t)s[scalar_of(d, "B")], T = (uint32_t)s[scalar_of(d, "T")], NH = (uint32_t)s[scalar_of(d, "NH")],
             NKV = (uint32_t)s[scalar_of(d, "NKV")], HS = (uint32_t)s[scalar_of(d, "HS")];
    float p = (float)s[scalar_of(d, "p")];
    uint32_t seed = (uint32_t)s[scalar_of(d, "seed")], window = (uint32_t)s[scalar_of(d, "window")];
    cpu_attention_forward(h[bind_of(d, "out")], h[bind_of(d, "lse")], h[bind_of(d, "qkv")],
                          (const uint32_t *)h[bind_of(d, "doc_start")], B, T, NH, NKV, HS, p, seed, window);
}

// the decode ops' positions: row b has pos[b] tokens cached and T new ones, pos[b] + T <= maxT
// (the largest row reaches maxT exactly, one row starts at 0)
static void prep_decode(const wgt_op_desc *d, float **h, const double *s) {
    uint32_t B = (uint32_t)s[scalar_of(d, "B")], T = (uint32_t)s[scalar_of(d, "T")], maxT = (uint32_t)s[scalar_of(d, "maxT")];
    uint32_t *pos = (uint32_t *)h[bind_of(d, "pos")];
    for (uint32_t b = 0; b < B; b++) pos[b] = b == 0 ? maxT - T : b == 1 ? 0 : (b * 37u) % (maxT - T + 1);
}

// clip and the optimizer read an optimizer status (backend/opt_status.h) that must be a valid
// one: a positive squared norm, a finite loss sum, a loss scale, counters, bias corrections.
// The counters' words hold integers' bits (tiny floats to the comparison: test_kernels_gpt
// checks them exactly).
static void prep_positive(const wgt_op_desc *d, float **h, const double *s) {
    for (int b = 0; b < d->nb; b++) {
        const char *n = d->b[b].name;
        if (!strcmp(n, "status")) {
            float *st = h[b];
            memset(st, 0, WGT_ST_WORDS * 4);
            st[WGT_ST_NORM_SQ] = 6.25f * 64.0f;
            st[WGT_ST_LOSS_SUM] = 17.0f;
            st[WGT_ST_LOSS_SCALE] = 8.0f;
            st[WGT_ST_CLIP] = 0.7f;
            st[WGT_ST_BC1] = cpu_bias_correction(0.9f, 3);
            st[WGT_ST_BC2] = cpu_bias_correction(0.999f, 3);
            wgt_st_set_u32(st, WGT_ST_T, 3);
            wgt_st_set_u32(st, WGT_ST_CLEAN, 2);
        }
        if (!strcmp(n, "loss_scale")) h[b][0] = 4.0f;
        if (!strcmp(n, "v") && d->b[b].role == WGT_ROLE_INOUT)
            for (size_t i = 0; i < (size_t)s[scalar_of(d, "n")]; i++) h[b][i] = fabsf(h[b][i]) * 1e-2f;
    }
}

// Tolerances, and why:
//   bitwise (0, 0)      one IEEE operation per element on both sides
//   element-wise f32    ~1e-6 of the largest: the same formula, libm vs GPU exp/tanh (few ulps)
//   reductions          the reference sums in double, kernels in f32 in another order:
//                       ~1e-5 of the largest for sums of 10^2..10^4 terms
//   attention           online softmax vs two-pass; exp of differences (~1e-5); with grouped
//                       kv heads dK, dV add a group's query heads (f32 vs double)
//   rope                x1·c - x2·s per element: one product may be fused (FMA) on one side
static const op_case cases[] = {
    {"gelu_inplace", "n=4099", 1e-6, 1e-5, NULL},
    {"gelu_inplace", "n=4096", 1e-6, 1e-5, NULL},  // the vec4 path
    {"gelu_forward", "n=4099", 1e-6, 1e-5, NULL},
    {"gelu_forward", "n=4096", 1e-6, 1e-5, NULL},  // the vec4 path
    {"swiglu_combine", "n=1027", 1e-6, 1e-5, NULL},
    {"swiglu_combine", "n=2048", 1e-6, 1e-5, NULL},
    {"geglu_combine", "n=1027", 1e-6, 1e-5, NULL},
    {"geglu_combine", "n=2048", 1e-6, 1e-5, NULL},  // the vec4 path
    {"ffn_geglu_backward", "n=4099", 1e-6, 1e-5, NULL},
    {"ffn_geglu_backward", "n=4100", 1e-6, 1e-5, NULL},
    {"scale_inplace", "n=1001,s=33.941125", 0, 0, NULL},  // one product each side: bitwise
    {"scale_inplace", "n=1004,s=-0.7", 0, 0, NULL},       // the vec4 path
    {"cross_entropy", "R=37,V=1000,inv_norm=0.03,alpha=0.1", 1e-5, 1e-4, NULL},
    {"cross_entropy", "R=5,V=50257,inv_norm=0.2", 1e-5, 1e-4, NULL},
    {"cross_entropy", "R=9,V=7,inv_norm=0.5,beta=0", 1e-5, 1e-4, NULL},
    {"sum_losses", "n=3001", 1e-5, 1e-5, NULL},
    {"ffn_gelu_backward", "n=4099", 1e-6, 1e-5, NULL},
    {"ffn_swiglu_backward", "n=4100", 1e-6, 1e-5, NULL},
    {"embedding_forward", "B=3,T=17,C=40,V=50", 0, 0, NULL},
    {"embedding_backward", "B=3,T=17,C=40,V=11", 1e-5, 1e-5, NULL},
    {"layernorm_forward", "N=37,C=200", 1e-5, 1e-5, NULL},
    {"layernorm_forward", "N=300,C=30", 1e-5, 1e-5, NULL},  // C not a multiple of 4: a workgroup a row
    {"layernorm_backward", "N=37,C=200", 1e-5, 1e-5, prep_layernorm_bwd},
    // the parameter sums in two stages: 3 row chunks (the last partial), 2 column blocks (the
    // second 3 vec4 wide), then 2 whole chunks (no partial one: only the path without row tests);
    // and C not a multiple of 4, which keeps the one-stage kernel
    {"layernorm_backward", "N=600,C=76", 1e-5, 1e-5, prep_layernorm_bwd},
    {"layernorm_backward", "N=512,C=68", 1e-5, 1e-5, prep_layernorm_bwd},  // whole row chunks only
    {"layernorm_backward", "N=300,C=30", 1e-5, 1e-5, prep_layernorm_bwd},
    {"rmsnorm_forward", "N=37,C=200", 1e-5, 1e-5, NULL},
    {"rmsnorm_forward", "N=3,C=1000,eps=1e-6", 1e-5, 1e-5, NULL},
    {"rmsnorm_backward", "N=37,C=200", 1e-5, 1e-5, prep_rmsnorm_bwd},
    {"rmsnorm_backward", "N=300,C=24", 1e-5, 1e-5, prep_rmsnorm_bwd},
    // per-head q/k RMSNorm: grouped (3 q heads a kv head), odd head sizes, HS 256 (Gemma-3), 1 + w
    {"qk_norm_forward", "B=2,T=7,NH=6,NKV=2,HS=20", 1e-5, 1e-5, NULL},
    {"qk_norm_forward", "B=1,T=5,NH=2,NKV=1,HS=256,eps=1e-5,w_offset=1", 1e-5, 1e-5, NULL},
    {"qk_norm_forward", "B=3,T=3,NH=1,NKV=1,HS=300", 1e-5, 1e-5, NULL},
    {"qk_norm_backward", "B=2,T=7,NH=6,NKV=2,HS=20", 1e-5, 1e-5, prep_qk_norm_bwd},
    {"qk_norm_backward", "B=1,T=9,NH=4,NKV=4,HS=256,w_offset=1", 1e-5, 1e-5, prep_qk_norm_bwd},
    {"qk_norm_backward", "B=3,T=3,NH=1,NKV=1,HS=300", 1e-5, 1e-5, prep_qk_norm_bwd},
    {"matmul", "N=37,C=68,OC=50", 1e-5, 1e-5, NULL},
    {"matmul", "N=130,C=256,OC=129", 1e-5, 1e-5, NULL},
    {"matmul_t", "N=37,C=68,OC=50", 1e-5, 1e-5, NULL},
    {"matmul_at", "N=300,C=68,OC=52", 1e-5, 1e-5, NULL},
    {"matmul_at", "N=33,C=130,OC=20", 1e-5, 1e-5, NULL},
    // f16 operands: both sides widen the same halves exactly, so the f32 GEMM tolerances hold
    {"matmul_f16", "N=37,C=68,OC=50", 1e-5, 1e-5, NULL},
    {"matmul_f16", "N=130,C=257,OC=129", 1e-5, 1e-5, NULL},  // odd C: rows start mid-word
    {"matmul_t_f16", "N=37,C=67,OC=50", 1e-5, 1e-5, NULL},
    {"matmul_at_f16", "N=300,C=67,OC=52", 1e-5, 1e-5, NULL},
    {"matmul_at_f16", "N=33,C=130,OC=20", 1e-5, 1e-5, NULL},
    // packed frozen weights (f16, bf16, nf4): both sides decode the same values exactly, then an f32
    // GEMM each (f32 sums in another order): the f32 GEMM tolerances. Odd C (rows start mid-word),
    // sizes off the 128-tiles, nf4 blocks of 64 that straddle rows (C = 200) or not (C = 64)
    {"matmul_lowbit", "N=37,C=70,OC=53,fmt=0,WW=1855", 1e-5, 1e-5, prep_lowbit},
    {"matmul_lowbit", "N=65,C=33,OC=67,fmt=1,WW=1106", 1e-5, 1e-5, prep_lowbit},
    {"matmul_lowbit", "N=37,C=200,OC=45,fmt=2,WW=1125,NB=141", 1e-5, 1e-5, prep_lowbit},
    {"matmul_lowbit", "N=130,C=64,OC=129,fmt=2,WW=1032,NB=129", 1e-5, 1e-5, prep_lowbit},
    {"matmul_lowbit", "N=257,C=72,OC=131,fmt=0,WW=4716", 1e-5, 1e-5, prep_lowbit},  // 3 x 2 tiles of 128
    {"matmul_t_lowbit", "N=37,C=70,OC=53,fmt=0,WW=1855", 1e-5, 1e-5, prep_lowbit},
    {"matmul_t_lowbit", "N=65,C=33,OC=67,fmt=1,WW=1106", 1e-5, 1e-5, prep_lowbit},
    {"matmul_t_lowbit", "N=37,C=200,OC=45,fmt=2,WW=1125,NB=141", 1e-5, 1e-5, prep_lowbit},
    {"matmul_t_lowbit", "N=130,C=129,OC=64,fmt=2,WW=1032,NB=129", 1e-5, 1e-5, prep_lowbit},
    // whole tiles (the kernel's unchecked loads), and one output tile with a long K: split-K on GPUs
    {"matmul_lowbit", "N=260,C=256,OC=384,fmt=1,WW=49152", 1e-5, 1e-5, prep_lowbit},
    {"matmul_lowbit", "N=260,C=256,OC=384,fmt=2,WW=12288,NB=1536", 1e-5, 1e-5, prep_lowbit},
    {"matmul_t_lowbit", "N=260,C=384,OC=256,fmt=1,WW=49152", 1e-5, 1e-5, prep_lowbit},
    {"matmul_t_lowbit", "N=260,C=384,OC=256,fmt=2,WW=12288,NB=1536", 1e-5, 1e-5, prep_lowbit},
    {"matmul_lowbit", "N=16,C=1024,OC=64,fmt=2,WW=8192,NB=1024", 1e-5, 1e-5, prep_lowbit},
    {"matmul_t_lowbit", "N=16,C=64,OC=1024,fmt=0,WW=32768", 1e-5, 1e-5, prep_lowbit},
    // the casts are exact on both sides: bitwise
    {"cast_f16", "n=4099", 0, 0, NULL},
    {"cast_f16", "n=70000", 0, 0, NULL},
    {"cast_f32", "n=4099", 0, 0, NULL},
    {"rope_forward", "B=2,T=37,NH=4,NKV=2,HS=16", 1e-6, 1e-5, prep_doc_start},
    {"rope_forward", "B=1,T=5,NH=3,NKV=3,HS=6", 1e-6, 1e-5, prep_doc_start},  // HS/2 odd; plain heads
    {"rope_backward", "B=2,T=37,NH=4,NKV=2,HS=16", 1e-6, 1e-5, prep_doc_start},
    {"rope_backward", "B=1,T=70,NH=2,NKV=1,HS=10", 1e-6, 1e-5, prep_doc_start},
    {"attention_forward", "B=2,T=37,NH=4,NKV=4,HS=16", 1e-5, 1e-4, prep_doc_start},
    {"attention_forward", "B=1,T=70,NH=1,NKV=1,HS=96", 1e-5, 1e-4, prep_doc_start},
    {"attention_forward", "B=2,T=37,NH=8,NKV=2,HS=16", 1e-5, 1e-4, prep_doc_start},  // grouped-query
    {"attention_forward", "B=1,T=45,NH=4,NKV=1,HS=32", 1e-5, 1e-4, prep_doc_start},  // one kv head
    {"attention_backward", "B=2,T=37,NH=4,NKV=4,HS=16", 1e-4, 1e-4, prep_attention_bwd},
    {"attention_backward", "B=1,T=130,NH=2,NKV=2,HS=16", 1e-4, 1e-4, prep_attention_bwd},
    {"attention_backward", "B=2,T=37,NH=8,NKV=2,HS=16", 1e-4, 1e-4, prep_attention_bwd},   // grouped-query
    {"attention_backward", "B=1,T=130,NH=4,NKV=1,HS=16", 1e-4, 1e-4, prep_attention_bwd},  // one kv head, long
    // decoding with a cache: tokens at each row's own positions (prep_decode); the appended keys
    // are rope_forward's products (1e-6 as rope); decode_attention as attention (online softmax,
    // f32 sums in another order than the reference's double ones), also with a window, heads of
    // 256 and more than one 256-key chunk
    {"decode_embedding", "B=3,T=5,C=40,V=50,maxT=20", 0, 0, prep_decode},
    {"kv_cache_append", "B=3,T=4,NH=4,NKV=2,HS=16,maxT=30", 1e-6, 1e-5, prep_decode},
    {"kv_cache_append", "B=2,T=1,NH=3,NKV=3,HS=6,maxT=9", 1e-6, 1e-5, prep_decode},
    {"decode_attention", "B=3,T=1,NH=4,NKV=2,HS=16,maxT=300", 1e-5, 1e-4, prep_decode},
    {"decode_attention", "B=2,T=7,NH=8,NKV=1,HS=32,maxT=40", 1e-5, 1e-4, prep_decode},
    {"decode_attention", "B=2,T=3,NH=2,NKV=2,HS=256,maxT=600,window=100", 1e-5, 1e-4, prep_decode},
    {"decode_attention", "B=1,T=5,NH=3,NKV=1,HS=10,maxT=16,window=3", 1e-5, 1e-4, prep_decode},
    // dropout on the probabilities: the same masks on both sides, so the attention tolerances
    {"attention_forward", "B=2,T=37,NH=4,NKV=4,HS=16,p=0.1,seed=5", 1e-5, 1e-4, prep_doc_start},
    {"attention_forward", "B=1,T=70,NH=4,NKV=2,HS=32,p=0.5,seed=4000000000", 1e-5, 1e-4, prep_doc_start},
    {"attention_backward", "B=2,T=37,NH=4,NKV=4,HS=16,p=0.1,seed=5", 1e-4, 1e-4, prep_attention_bwd},
    {"attention_backward", "B=1,T=130,NH=4,NKV=2,HS=16,p=0.3,seed=77", 1e-4, 1e-4, prep_attention_bwd},
    // the mask's sliding window on top of the packed examples (all cases above have those)
    {"attention_forward", "B=2,T=70,NH=4,NKV=2,HS=16,window=9", 1e-5, 1e-4, prep_doc_start},
    {"attention_backward", "B=2,T=70,NH=4,NKV=2,HS=16,window=9", 1e-4, 1e-4, prep_attention_bwd},
    {"attention_backward", "B=1,T=130,NH=2,NKV=2,HS=16,window=1", 1e-4, 1e-4, prep_attention_bwd},
    // head size 256 (Gemma-3): no tile fits 32 KiB of workgroup memory, so the row kernels run
    // (17_attention_rows.wgsl); T past one 256-key chunk, grouped heads, dropout, all with packed
    // examples; a window shorter and one longer than a chunk
    {"attention_forward", "B=1,T=300,NH=2,NKV=1,HS=256", 1e-5, 1e-4, prep_doc_start},
    {"attention_forward", "B=2,T=19,NH=4,NKV=2,HS=256,p=0.2,seed=9", 1e-5, 1e-4, prep_doc_start},
    {"attention_forward", "B=2,T=70,NH=2,NKV=1,HS=256,window=9", 1e-5, 1e-4, prep_doc_start},
    {"attention_forward", "B=1,T=300,NH=2,NKV=2,HS=256,window=270", 1e-5, 1e-4, prep_doc_start},
    {"attention_backward", "B=1,T=300,NH=2,NKV=1,HS=256", 1e-4, 1e-4, prep_attention_bwd},
    {"attention_backward", "B=2,T=19,NH=4,NKV=2,HS=256,p=0.2,seed=9", 1e-4, 1e-4, prep_attention_bwd},
    {"attention_backward", "B=1,T=11,NH=3,NKV=3,HS=200", 1e-4, 1e-4, prep_attention_bwd},
    {"attention_backward", "B=2,T=70,NH=2,NKV=1,HS=256,window=9", 1e-4, 1e-4, prep_attention_bwd},
    {"attention_backward", "B=1,T=300,NH=2,NKV=2,HS=256,window=270", 1e-4, 1e-4, prep_attention_bwd},
    {"residual_forward", "n=1001", 0, 0, NULL},
    {"residual_forward", "n=1004", 0, 0, NULL},  // the vec4 path
    {"add_inplace", "n=1001", 0, 0, NULL},
    {"add_inplace", "n=1004", 0, 0, NULL},
    // one f32 product and at most one sum an element, the same on both sides: bitwise
    {"add_cols", "N=37,OS=50,IS=20,W=12,oo=30,io=5,scale=0.25,accumulate=1", 0, 0, NULL},
    {"add_cols", "N=300,OS=16,IS=70,W=16,oo=0,io=54,scale=-3,accumulate=0", 0, 0, NULL},
    {"dropout_forward", "n=4099,p=0.1,seed=7,stream=3", 0, 0, NULL},  // the same mask and one product
    {"dropout_forward", "n=70001,p=0.5,seed=4294967295", 0, 0, NULL},
    {"dropout_forward", "n=1001", 0, 0, NULL},                        // p = 0: a copy
    {"dropout_backward", "n=4099,p=0.1,seed=7,stream=3", 0, 0, NULL},
    {"dropout_backward", "n=1001,p=0.9,seed=1,stream=4294967295", 0, 0, NULL},
    {"grad_norm_sq", "n=70001", 1e-5, 1e-5, NULL},
    {"grad_norm_sq", "n=300,accumulate=1", 1e-5, 1e-5, NULL},
    {"grad_clip_scale", "max_norm=1", 0, 2.4e-7, prep_positive},
    {"grad_clip_scale", "max_norm=10,dynamic=1,window=3", 0, 2.4e-7, prep_positive},
    {"adamw", "n=5000,weight_decay=0.1", 1e-6, 1e-5, prep_positive},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static uint64_t need(const wgt_op_desc *d, int b, const double *s) { return wgt_op_need(d, b, s); }

// Random inputs by element type: floats N(0,1); tokens in [0, V); targets in [0, V + V/8)
// (some ignored).
static void fill_random(const wgt_op_desc *d, int b, float *h, size_t n, const double *s) {
    int vi = scalar_of(d, "V");
    uint32_t V = vi >= 0 ? (uint32_t)s[vi] : 1;
    for (size_t i = 0; i < n; i++) {
        if (d->b[b].type == WGT_TYPE_F32) h[i] = trng_normal();
        else if (d->b[b].type == WGT_TYPE_F16) {  // two N(0,1) halves a word
            uint16_t two[2] = {wgt_f32_to_f16(trng_normal()), wgt_f32_to_f16(trng_normal())};
            memcpy(&h[i], two, 4);
        }
        else {
            uint32_t u = d->b[b].type == WGT_TYPE_I32 ? trng_u32() % V : trng_u32() % (V + V / 8 + 1);
            memcpy(&h[i], &u, 4);
        }
    }
}

static void run_case(bpair *P, const op_case *c) {
    const wgt_op_desc *d = wgt_op_find(c->op);
    CHECK(d != NULL, "case names an op that is not in op_list.h: %s", c->op);
    if (!d) return;
    double s[WGT_OP_MAX_SCALARS];
    for (int i = 0; i < d->ns; i++) s[i] = d->s[i].def;
    // sizes from the case text
    char buf[256];
    snprintf(buf, sizeof buf, "%s", c->sizes);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        *eq = 0;
        int i = scalar_of(d, tok);
        CHECK(i >= 0, "%s: case sets unknown scalar %s", d->name, tok);
        if (i >= 0) s[i] = strtod(eq + 1, NULL);
    }
    for (int i = 0; i < d->ns; i++) CHECK(!isnan(s[i]), "%s: case leaves %s unset", d->name, d->s[i].name);
    float *host[WGT_OP_MAX_BINDS] = {0};
    btensor t[WGT_OP_MAX_BINDS];
    wgt_view vc[WGT_OP_MAX_BINDS], vg[WGT_OP_MAX_BINDS];
    size_t n[WGT_OP_MAX_BINDS];
    for (int b = 0; b < d->nb; b++) {
        n[b] = (size_t)need(d, b, s);
        host[b] = malloc((n[b] + 2 * GUARD) * 4);
        fill_random(d, b, host[b], n[b] + 2 * GUARD, s);  // guards random too
    }
    // prepare works on the tensors themselves (host[b] + GUARD)
    float *inner[WGT_OP_MAX_BINDS];
    for (int b = 0; b < d->nb; b++) inner[b] = host[b] + GUARD;
    if (c->prepare) c->prepare(d, inner, s);
    for (int b = 0; b < d->nb; b++) {
        t[b] = bt_new(P, n[b] + 2 * GUARD, host[b]);
        vc[b] = wgt_view_sub(bt_c(t[b]), GUARD, n[b]);
        vg[b] = wgt_view_sub(bt_g(t[b]), GUARD, n[b]);
    }
    d->call(P->cpu, vc, s);
    d->call(P->gpu, vg, s);
    char what[200];
    for (int b = 0; b < d->nb; b++) {
        float *hc, *hg;
        bt_get(P, t[b], &hc, &hg);
        // guards: nothing outside the view changed, on either backend
        int guard_ok = !memcmp(hc, host[b], GUARD * 4) && !memcmp(hg, host[b], GUARD * 4) &&
                       !memcmp(hc + GUARD + n[b], host[b] + GUARD + n[b], GUARD * 4) &&
                       !memcmp(hg + GUARD + n[b], host[b] + GUARD + n[b], GUARD * 4);
        CHECK(guard_ok, "%s [%s] '%s': an op wrote outside its view", d->name, c->sizes, d->b[b].name);
        if (wgt_role_writes(d->b[b].role) && d->b[b].type == WGT_TYPE_F16) {
            // f16 outputs: the same bits (the casts are exact); the whole last word counts
            snprintf(what, sizeof what, "%s [%s] '%s'", d->name, c->sizes, d->b[b].name);
            CHECK(!memcmp(hg + GUARD, hc + GUARD, n[b] * 4), "%s: the f16 bits differ", what);
        } else if (wgt_role_writes(d->b[b].role)) {
            double mx = 0;
            for (size_t i = 0; i < n[b]; i++)
                if (isfinite(hc[GUARD + i]) && fabs(hc[GUARD + i]) > mx) mx = fabs(hc[GUARD + i]);
            snprintf(what, sizeof what, "%s [%s] '%s'", d->name, c->sizes, d->b[b].name);
            CHECK_CLOSE_REPORT(what, hg + GUARD, hc + GUARD, n[b], c->tol_max * mx, c->rtol);
        } else {  // inputs stay as they were
            CHECK(!memcmp(hc + GUARD, inner[b], n[b] * 4) && !memcmp(hg + GUARD, inner[b], n[b] * 4),
                  "%s [%s]: input '%s' was modified", d->name, c->sizes, d->b[b].name);
        }
        free(hc);
        free(hg);
    }
    for (int b = 0; b < d->nb; b++) {
        bt_free(P, &t[b]);
        free(host[b]);
    }
}

static int selected(const op_case *c, int argc, char **argv) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++)
        if (strstr(c->op, argv[i])) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < NCASES; i++) printf("%-22s %s\n", cases[i].op, cases[i].sizes);
        return 0;
    }
    // every op has a case, and every case an op
    if (argc < 2)
        for (int o = 0; o < WGT_OP_COUNT; o++) {
            int have = 0;
            for (int i = 0; i < NCASES; i++) have |= !strcmp(cases[i].op, wgt_op_descs[o].name);
            CHECK(have, "op %s has no case in test_backend_ops.c", wgt_op_descs[o].name);
        }
    bpair P = bpair_open();
    for (int i = 0; i < NCASES; i++)
        if (selected(&cases[i], argc, argv)) run_case(&P, &cases[i]);
    // The ops with f16 bindings once more through the other storage path: on a device with
    // shader-f16 the first pass ran the native path, so force the packed one (a device without
    // it ran the packed path already and has no other).
    wg_ctx *ctx = wg_of(P.gpu);
    if (wg_f16_native(ctx)) {
        wg_settings *S = wg_ctx_settings(ctx), saved = *S;
        S->f16 = WG_F16_PACKED;
        printf("f16 ops again with packed f16 storage\n");
        for (int i = 0; i < NCASES; i++) {
            const wgt_op_desc *d = wgt_op_find(cases[i].op);
            int has_h = 0;
            for (int b = 0; d && b < d->nb; b++) has_h |= d->b[b].type == WGT_TYPE_F16;
            if (has_h && selected(&cases[i], argc, argv)) run_case(&P, &cases[i]);
        }
        *S = saved;
    } else {
        printf("f16 ops ran with packed f16 storage (the device has no shader-f16)\n");
    }
    bpair_close(&P);
    return test_finish();
}
