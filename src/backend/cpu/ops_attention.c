// ops_attention.c — C reference of 05_attention / 10_backward_attention: causal multi-head
// self-attention on a fused qkv[B,T,3C] (q | k | v, head h at columns h·HS..(h+1)·HS of each).
// The forward saves the row log-sum-exp of the scaled scores, and the backward recomputes the
// probabilities from it (flash style), so no T×T matrix is ever stored: the same contract the
// three WGSL backward variants must meet. Dot products over HS run in f32; the sums over keys
// (softmax denominator, outputs, dK, dV, dQ) in double.
#include <stdlib.h>
#include "backend/cpu/ops.h"

static float dot(const float *a, const float *b, uint32_t n) {
    float s = 0.0f;
    for (uint32_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

// For query t of head h: s_j = q_t·k_j / sqrt(HS) for j <= t; lse_t = log Σ_j exp(s_j);
// out_t = Σ_j exp(s_j - lse_t)·v_j.
void cpu_attention_forward(float *out, float *lse, const float *qkv,
                           uint32_t B, uint32_t T, uint32_t C, uint32_t NH) {
    WGT_ASSERT(NH > 0 && C % NH == 0, "attention needs C divisible by the head count");
    const uint32_t HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t rows = (size_t)B * NH * T;
    #pragma omp parallel
    {
        float *s = wgt_malloc((size_t)T * sizeof(float));
        double *acc = wgt_malloc((size_t)HS * sizeof(double));
        // Row cost grows with t, so hand rows out round-robin to balance the causal triangle.
        #pragma omp for schedule(static, 1)
        for (size_t r = 0; r < rows; r++) {
            size_t t = r % T, bh = r / T, h = bh % NH, b = bh / NH;
            const float *base = qkv + b * T * C3;
            const float *q = base + t * C3 + h * HS;
            float mx = -INFINITY;
            for (size_t j = 0; j <= t; j++) {
                s[j] = dot(q, base + j * C3 + C + h * HS, HS) * scale;
                mx = fmaxf(mx, s[j]);
            }
            double denom = 0.0;
            for (size_t j = 0; j <= t; j++) denom += exp((double)s[j] - mx);
            double l = mx + log(denom);
            for (uint32_t d = 0; d < HS; d++) acc[d] = 0.0;
            for (size_t j = 0; j <= t; j++) {
                double p = exp((double)s[j] - l);
                const float *v = base + j * C3 + 2 * (size_t)C + h * HS;
                for (uint32_t d = 0; d < HS; d++) acc[d] += p * v[d];
            }
            float *o = out + (b * T + t) * C + h * HS;
            for (uint32_t d = 0; d < HS; d++) o[d] = (float)acc[d];
            lse[r] = (float)l;  // r = (b·NH + h)·T + t, the [B,NH,T] layout
        }
        free(acc);
        free(s);
    }
}

// With P_ij = exp(s_ij - lse_i) recomputed and D_i = Σ_d dO_i·O_i (= Σ_j P_ij·dP_ij):
//   dP_ij = dO_i·v_j,  dS_ij = P_ij·(dP_ij - D_i)
//   dq_i = scale·Σ_j dS_ij·k_j,  dk_j = scale·Σ_i dS_ij·q_i,  dv_j = Σ_i P_ij·dO_i
// One task per (b, h): its dq, dk, dv columns belong to no other task, so the parallel loop
// needs no atomics, and dk/dv are accumulated in a per-thread double scratch.
void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                            const float *lse, uint32_t B, uint32_t T, uint32_t C, uint32_t NH) {
    WGT_ASSERT(NH > 0 && C % NH == 0, "attention needs C divisible by the head count");
    const uint32_t HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t tasks = (size_t)B * NH;
    #pragma omp parallel
    {
        double *dk = wgt_malloc((size_t)T * HS * sizeof(double));
        double *dv = wgt_malloc((size_t)T * HS * sizeof(double));
        double *dq = wgt_malloc((size_t)HS * sizeof(double));
        #pragma omp for schedule(dynamic, 1)
        for (size_t bh = 0; bh < tasks; bh++) {
            size_t h = bh % NH, b = bh / NH;
            const float *base = qkv + b * T * C3;
            float *dbase = dqkv + b * T * C3;
            memset(dk, 0, (size_t)T * HS * sizeof(double));
            memset(dv, 0, (size_t)T * HS * sizeof(double));
            for (size_t i = 0; i < T; i++) {
                const float *q = base + i * C3 + h * HS;
                const float *go = dout + (b * T + i) * C + h * HS;
                const float *o = out + (b * T + i) * C + h * HS;
                double D = 0.0;
                for (uint32_t d = 0; d < HS; d++) D += (double)go[d] * o[d];
                double l = lse[bh * T + i];
                for (uint32_t d = 0; d < HS; d++) dq[d] = 0.0;
                for (size_t j = 0; j <= i; j++) {
                    const float *k = base + j * C3 + C + h * HS;
                    const float *v = base + j * C3 + 2 * (size_t)C + h * HS;
                    double p = exp((double)(dot(q, k, HS) * scale) - l);
                    double ds = p * ((double)dot(go, v, HS) - D);
                    double *dkj = dk + j * HS, *dvj = dv + j * HS;
                    for (uint32_t d = 0; d < HS; d++) {
                        dq[d] += ds * k[d];
                        dkj[d] += ds * q[d];
                        dvj[d] += p * go[d];
                    }
                }
                float *dqi = dbase + i * C3 + h * HS;
                for (uint32_t d = 0; d < HS; d++) dqi[d] = (float)(dq[d] * scale);
            }
            for (size_t j = 0; j < T; j++) {
                float *dkj = dbase + j * C3 + C + h * HS, *dvj = dbase + j * C3 + 2 * (size_t)C + h * HS;
                for (uint32_t d = 0; d < HS; d++) {
                    dkj[d] = (float)(dk[j * HS + d] * scale);
                    dvj[d] = (float)dv[j * HS + d];
                }
            }
        }
        free(dq);
        free(dv);
        free(dk);
    }
}
