// ops_attention.c — C reference of 05_attention / 10_backward_attention: causal self-attention
// with grouped-query heads on a fused qkv[B, T, W], W = NH·HS + 2·NKV·HS: q (NH heads) | k (NKV
// heads) | v (NKV heads), each head HS contiguous columns. Query head h reads kv head
// h / (NH/NKV); NKV = NH is plain multi-head attention. The forward saves the row log-sum-exp of
// the scaled scores, and the backward recomputes the probabilities from it (flash style), so no
// T×T matrix is ever stored: the same contract the WGSL backward variants must meet. The scores'
// dot products over HS run in f32 (like the kernels'); the backward's dO·v and dO·out, and the
// sums over keys (softmax denominator, outputs, dK, dV, dQ) and over a group's query heads (dK,
// dV), in double.
//
// The mask: query t of sequence b attends keys j in [lo(t), t], lo(t) = max(doc_start[b,t],
// t - window + 1) (docs/kernels.md#attention-mask); doc_start NULL is 0 everywhere, window 0 no
// limit. Keys outside get probability 0 and no gradient.
//
// Dropout (p > 0, docs/kernels.md#dropout): the probability P[b,h,t,j] is multiplied by
// m = keep ? 1/(1 - p) : 0, keep = wgt_dropout_bits(wgt_dropout_key(seed, (b·NH + h)·T + t,
// WGT_DROPOUT_ATTN), j) >= floor(p·2^32), before it weighs v_j; lse stays that of the undropped
// softmax, and the backward regenerates m from (seed, row, j).
#include <stdlib.h>
#include "backend/cpu/ops.h"

// Speed (this is also the CPU trainer's attention): the loops over head columns and over a row's
// keys are written so that the compiler vectorizes them, and each row's work is one function
// compiled per instruction set (CPU_ISA_DISPATCH, cpu_isa.h). The results do not depend on which: a dot
// product sums 8 fixed lanes in a fixed order, and the other loops are element-wise, without FMA
// contraction (ISO C mode).

// a·b in f32, as 8 interleaved partial sums added pairwise, then the tail
// (size_t indices: with 32-bit ones the compiler cannot assume that i + l are adjacent)
static inline float dot(const float *a, const float *b, size_t n) {
    // named accumulators rather than an array: the vectorizer maps them to one vector all the
    // same, and the sanitizer build keeps them in registers instead of checking every access
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float *pa = a + i, *pb = b + i;
        a0 += pa[0] * pb[0], a1 += pa[1] * pb[1], a2 += pa[2] * pb[2], a3 += pa[3] * pb[3];
        a4 += pa[4] * pb[4], a5 += pa[5] * pb[5], a6 += pa[6] * pb[6], a7 += pa[7] * pb[7];
    }
    float s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}




// a·b in double (products of floats, exact), the same 8-lane order: D_i and dP_ij go through it,
// so that where the two are one sum (T = 1: out = v) dS is exactly 0, as it is mathematically
static inline double dot_d(const float *a, const float *b, size_t n) {
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float *pa = a + i, *pb = b + i;
        a0 += (double)pa[0] * pb[0], a1 += (double)pa[1] * pb[1], a2 += (double)pa[2] * pb[2], a3 += (double)pa[3] * pb[3];
        a4 += (double)pa[4] * pb[4], a5 += (double)pa[5] * pb[5], a6 += (double)pa[6] * pb[6], a7 += (double)pa[7] * pb[7];
    }
    double s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
    for (; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static void check_heads(uint32_t NH, uint32_t NKV, uint32_t HS) {
    WGT_ASSERT(NH > 0 && NKV > 0 && NH % NKV == 0, "attention needs NKV (kv heads) dividing NH (query heads)");
    WGT_ASSERT(HS > 0, "attention needs a head size of at least 1");
}

// the dropout multiplier of key j in a row whose key is rkey (thr = 0: no dropout, always 1)
static inline double drop_mult(uint32_t rkey, size_t j, uint32_t thr, float dscale) {
    return thr ? (double)wgt_dropout_mult(wgt_dropout_bits(rkey, (uint32_t)j), thr, dscale) : 1.0;
}

// One query row t of the forward: s_j = q·k_j·scale into s (f32), the row's lse, then
// out = Σ_j exp(s_j - lse)·m_j·v_j in double (acc), written as f32. e: T doubles of scratch.
CPU_ISA_DISPATCH(fwd_row, (float *o, float *lse_out, const float *base, const float *q, size_t lo, size_t t, size_t W,
                           size_t kc, size_t vc, uint32_t HS, float scale, uint32_t rkey, uint32_t thr,
                           float dscale, float *s, double *e, double *acc),
                 (o, lse_out, base, q, lo, t, W, kc, vc, HS, scale, rkey, thr, dscale, s, e, acc)) {
    float mx = -INFINITY;
    for (size_t j = lo; j <= t; j++) {
        s[j] = dot(q, base + j * W + kc, HS) * scale;
        mx = s[j] > mx ? s[j] : mx;  // a NaN score is passed over, as fmaxf would
    }
    #pragma omp simd
    for (size_t j = lo; j <= t; j++) e[j] = cpu_exp_d((double)s[j] - mx);
    double denom = 0.0;
    for (size_t j = lo; j <= t; j++) denom += e[j];
    const double l = mx + log(denom);
    #pragma omp simd
    for (size_t j = lo; j <= t; j++) e[j] = cpu_exp_d((double)s[j] - l);
    for (uint32_t d = 0; d < HS; d++) acc[d] = 0.0;
    for (size_t j = lo; j <= t; j++) {
        const double p = e[j] * drop_mult(rkey, j, thr, dscale);
        const float *v = base + j * W + vc;
        #pragma omp simd
        for (uint32_t d = 0; d < HS; d++) acc[d] += p * v[d];
    }
    for (uint32_t d = 0; d < HS; d++) o[d] = (float)acc[d];
    *lse_out = (float)l;
}

// The first key query t of sequence b attends: max(doc_start[b,t], t - window + 1), clamped at 0.
static size_t attn_lo(const uint32_t *doc_start, uint32_t window, size_t b, size_t T, size_t t) {
    size_t lo = doc_start ? doc_start[b * T + t] : 0;
    if (window && t + 1 > window && t + 1 - window > lo) lo = t + 1 - window;
    return lo;
}

// doc_start must give every row its own example start: <= t and non-decreasing along t (the
// kernels' block skipping relies on the order).
static void check_doc_start(const uint32_t *doc_start, uint32_t B, uint32_t T) {
    if (!doc_start) return;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            uint32_t d = doc_start[b * T + t];
            WGT_ASSERT(d <= t && (t == 0 || d >= doc_start[b * T + t - 1]),
                       "attention doc_start must be <= t and non-decreasing along each sequence");
        }
}

// For query t of head h (kv head g = h / (NH/NKV)): s_j = q_t·k_j / sqrt(HS) for lo(t) <= j <= t;
// lse_t = log Σ_j exp(s_j); out_t = Σ_j exp(s_j - lse_t)·m_tj·v_j (m_tj = 1 without dropout).
void cpu_attention_forward(float *out, float *lse, const float *qkv, const uint32_t *doc_start, uint32_t B, uint32_t T,
                           uint32_t NH, uint32_t NKV, uint32_t HS, float p, uint32_t seed, uint32_t window) {
    check_heads(NH, NKV, HS);
    check_doc_start(doc_start, B, T);
    WGT_ASSERT(p >= 0.0f && p < 1.0f, "attention dropout needs p in [0, 1)");
    const uint32_t thr = wgt_dropout_threshold(p);
    const float dscale = wgt_dropout_scale(p);
    const size_t C = (size_t)NH * HS;            // width of q and of out; first k column
    const size_t W = C + 2 * (size_t)NKV * HS;   // qkv row
    const size_t VC = C + (size_t)NKV * HS;      // first v column
    const uint32_t G = NH / NKV;                 // query heads per kv head
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t rows = (size_t)B * NH * T;
    #pragma omp parallel
    {
        float *s = wgt_malloc((size_t)T * sizeof(float));
        double *e = wgt_malloc((size_t)T * sizeof(double));
        double *acc = wgt_malloc((size_t)HS * sizeof(double));
        // Row cost grows with t, so hand rows out round-robin to balance the causal triangle.
        #pragma omp for schedule(static, 1)
        for (size_t r = 0; r < rows; r++) {
            size_t t = r % T, bh = r / T, h = bh % NH, b = bh / NH, g = h / G;
            const float *base = qkv + b * T * W;
            const uint32_t rkey = thr ? wgt_dropout_key(seed, (uint32_t)r, WGT_DROPOUT_ATTN) : 0;
            // lse[r]: r = (b·NH + h)·T + t, the [B,NH,T] layout
            fwd_row(out + (b * T + t) * C + h * HS, lse + r, base, base + t * W + h * HS,
                    attn_lo(doc_start, window, b, T, t), t, W, C + g * HS,
                    VC + g * HS, HS, scale, rkey, thr, dscale, s, e, acc);
        }
        free(acc);
        free(e);
        free(s);
    }
}

// One query row i of one query head in the backward: P_ij = exp(s_ij - l) for j <= i (into pb,
// T doubles of scratch), then dS_ij, and dq (zeroed here), dk_j, dv_j accumulated in double.
CPU_ISA_DISPATCH(bwd_row, (double *dq, double *dk, double *dv, const float *base, const float *q,
                           const float *go, double D, double l, size_t lo, size_t i, size_t W, size_t kc, size_t vc,
                           uint32_t HS, float scale, uint32_t rkey, uint32_t thr, float dscale, double *pb),
                 (dq, dk, dv, base, q, go, D, l, lo, i, W, kc, vc, HS, scale, rkey, thr, dscale, pb)) {
    for (size_t j = lo; j <= i; j++) pb[j] = (double)(dot(q, base + j * W + kc, HS) * scale) - l;
    #pragma omp simd
    for (size_t j = lo; j <= i; j++) pb[j] = cpu_exp_d(pb[j]);
    for (uint32_t d = 0; d < HS; d++) dq[d] = 0.0;
    for (size_t j = lo; j <= i; j++) {
        const float *k = base + j * W + kc;
        const float *v = base + j * W + vc;
        const double p = pb[j];
        const double m = drop_mult(rkey, j, thr, dscale);
        const double ds = p * (dot_d(go, v, HS) * m - D);
        const double pm = p * m;
        double *dkj = dk + j * HS, *dvj = dv + j * HS;
        #pragma omp simd
        for (uint32_t d = 0; d < HS; d++) {
            dq[d] += ds * k[d];
            dkj[d] += ds * q[d];
            dvj[d] += pm * go[d];
        }
    }
}

// Over the keys lo(i) <= j <= i of each query i, with P_ij = exp(s_ij - lse_i) recomputed, m_ij
// the dropout multiplier (1 without dropout) and
// D_i = Σ_d dO_i·O_i (= Σ_j P_ij·dP_ij, O the dropped output):
//   dP_ij = (dO_i·v_j)·m_ij,  dS_ij = P_ij·(dP_ij - D_i)
//   dq_i = scale·Σ_j dS_ij·k_j,  dk_j = scale·Σ_h Σ_i dS_ij·q_i,  dv_j = Σ_h Σ_i P_ij·m_ij·dO_i
// where Σ_h runs over the query heads of k_j's group. One task per (b, kv head g): it loops over
// the group's query heads in order, and its dq, dk, dv columns belong to no other task, so the
// parallel loop needs no atomics; dk/dv are accumulated over the group in a per-thread double
// scratch. With NKV = NH every group is one head.
void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                            const float *lse, const uint32_t *doc_start, uint32_t B, uint32_t T, uint32_t NH,
                            uint32_t NKV, uint32_t HS, float p, uint32_t seed, uint32_t window) {
    check_heads(NH, NKV, HS);
    check_doc_start(doc_start, B, T);
    WGT_ASSERT(p >= 0.0f && p < 1.0f, "attention dropout needs p in [0, 1)");
    const uint32_t thr = wgt_dropout_threshold(p);
    const float dscale = wgt_dropout_scale(p);
    const size_t C = (size_t)NH * HS, W = C + 2 * (size_t)NKV * HS, VC = C + (size_t)NKV * HS;
    const uint32_t G = NH / NKV;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t tasks = (size_t)B * NKV;
    #pragma omp parallel
    {
        double *dk = wgt_malloc((size_t)T * HS * sizeof(double));
        double *dv = wgt_malloc((size_t)T * HS * sizeof(double));
        double *dq = wgt_malloc((size_t)HS * sizeof(double));
        double *pb = wgt_malloc((size_t)T * sizeof(double));
        #pragma omp for schedule(dynamic, 1)
        for (size_t bg = 0; bg < tasks; bg++) {
            size_t g = bg % NKV, b = bg / NKV;
            const float *base = qkv + b * T * W;
            float *dbase = dqkv + b * T * W;
            memset(dk, 0, (size_t)T * HS * sizeof(double));
            memset(dv, 0, (size_t)T * HS * sizeof(double));
            for (size_t h = g * G; h < (g + 1) * G; h++) {
                const size_t bh = b * NH + h;
                for (size_t i = 0; i < T; i++) {
                    const float *q = base + i * W + h * HS;
                    const float *go = dout + (b * T + i) * C + h * HS;
                    const float *o = out + (b * T + i) * C + h * HS;
                    const double D = dot_d(go, o, HS);
                    double l = lse[bh * T + i];
                    const uint32_t rkey = thr ? wgt_dropout_key(seed, (uint32_t)(bh * T + i), WGT_DROPOUT_ATTN) : 0;
                    bwd_row(dq, dk, dv, base, q, go, D, l, attn_lo(doc_start, window, b, T, i), i, W, C + g * HS,
                            VC + g * HS, HS, scale, rkey, thr, dscale, pb);
                    float *dqi = dbase + i * W + h * HS;
                    for (uint32_t d = 0; d < HS; d++) dqi[d] = (float)(dq[d] * scale);
                }
            }
            for (size_t j = 0; j < T; j++) {
                float *dkj = dbase + j * W + C + g * HS, *dvj = dbase + j * W + VC + g * HS;
                for (uint32_t d = 0; d < HS; d++) {
                    dkj[d] = (float)(dk[j * HS + d] * scale);
                    dvj[d] = (float)dv[j * HS + d];
                }
            }
        }
        free(pb);
        free(dq);
        free(dv);
        free(dk);
    }
}
