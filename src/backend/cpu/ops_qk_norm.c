// ops_qk_norm.c — C reference of qk_norm_forward / qk_norm_backward (kernels/02_norm.wgsl,
// kernels/11_backward_norm.wgsl): RMSNorm over each query and key head of a fused
// qkv[B, T, NH·HS + 2·NKV·HS] after the projection and before RoPE (Qwen3's q_norm / k_norm;
// Gemma-3's, whose weight is used as 1 + w: w_offset 1). A token's row is NH + 2·NKV heads of HS
// values; head h < NH takes q_weight, NH <= h < NH + NKV k_weight, and the v heads are copied.
// Per normalised head, with xhat = x·rstd, rstd = 1/sqrt(mean(x^2) + eps), g = w_offset + w:
//   forward   out = xhat·g
//   backward  dx = rstd·(dxhat - xhat·mean(dxhat·xhat)), dxhat = dout·g;  dw += Σ dout·xhat
// Element-wise math in f32 as the kernels, the sums in double; the weight gradients are summed
// over (token, head) rows in row order, in blocks of columns (a fixed order whatever the threads).
#include "backend/cpu/ops.h"

void cpu_qk_norm_forward(float *out, float *rstd, const float *qkv, const float *q_weight, const float *k_weight,
                         uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, float eps, float w_offset) {
    const size_t N = (size_t)B * T, H = (size_t)NH + 2 * (size_t)NKV, HN = (size_t)NH + NKV;
    #pragma omp parallel for schedule(static)
    for (size_t n = 0; n < N; n++) {
        for (size_t h = 0; h < H; h++) {
            const float *x = qkv + (n * H + h) * HS;
            float *o = out + (n * H + h) * HS;
            if (h >= HN) {  // v: copied
                for (uint32_t c = 0; c < HS; c++) o[c] = x[c];
                continue;
            }
            const float *w = h < NH ? q_weight : k_weight;
            double ss = 0.0;
            for (uint32_t c = 0; c < HS; c++) ss += (double)x[c] * x[c];
            const float rs = (float)(1.0 / sqrt(ss / HS + eps));
            for (uint32_t c = 0; c < HS; c++) o[c] = (x[c] * rs) * (w_offset + w[c]);
            rstd[n * HN + h] = rs;
        }
    }
}

void cpu_qk_norm_backward(float *dqkv, float *dq_weight, float *dk_weight, const float *dout, const float *qkv,
                          const float *q_weight, const float *k_weight, const float *rstd, uint32_t B, uint32_t T,
                          uint32_t NH, uint32_t NKV, uint32_t HS, float w_offset) {
    const size_t N = (size_t)B * T, H = (size_t)NH + 2 * (size_t)NKV, HN = (size_t)NH + NKV;
    #pragma omp parallel for schedule(static)
    for (size_t n = 0; n < N; n++) {
        for (size_t h = 0; h < H; h++) {
            const size_t base = (n * H + h) * HS;
            const float *x = qkv + base, *g = dout + base;
            float *dx = dqkv + base;
            if (h >= HN) {
                for (uint32_t c = 0; c < HS; c++) dx[c] = g[c];
                continue;
            }
            const float *w = h < NH ? q_weight : k_weight;
            const float rs = rstd[n * HN + h];
            double s = 0.0;
            for (uint32_t c = 0; c < HS; c++) s += (double)(g[c] * (w_offset + w[c])) * (x[c] * rs);
            const float mean = (float)(s / HS);
            for (uint32_t c = 0; c < HS; c++) dx[c] = rs * (g[c] * (w_offset + w[c]) - (x[c] * rs) * mean);
        }
    }
    // the weights: q over the NH q heads of every token, k over the NKV k heads, rows in order
    const uint32_t CB = 64;
    const uint32_t nblk = (HS + CB - 1) / CB;
    #pragma omp parallel for schedule(static)
    for (uint32_t j = 0; j < 2 * nblk; j++) {
        const int is_k = j >= nblk;
        const uint32_t c0 = (j % nblk) * CB, c1 = c0 + CB < HS ? c0 + CB : HS;
        const size_t h0 = is_k ? NH : 0, h1 = is_k ? HN : NH;
        double sw[64] = {0};
        for (size_t n = 0; n < N; n++) {
            for (size_t h = h0; h < h1; h++) {
                const size_t base = (n * H + h) * HS;
                const float rs = rstd[n * HN + h];
                for (uint32_t c = c0; c < c1; c++) sw[c - c0] += (double)dout[base + c] * (qkv[base + c] * rs);
            }
        }
        float *dw = is_k ? dk_weight : dq_weight;
        for (uint32_t c = c0; c < c1; c++) dw[c] += (float)sw[c - c0];
    }
}
