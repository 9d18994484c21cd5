// ops_norm.c — C reference of 02_norm / 11_backward_norm: LayerNorm (eps 1e-5, with bias) and
// RMSNorm (LLaMA: no mean, no bias, eps given). The forwards save their row statistics so the
// backwards need not recompute them; statistics and the column sums of the parameter gradients
// are accumulated in double.
#include "backend/cpu/ops.h"

#define LN_EPS 1e-5

// out = (x - mean)·rstd·weight + bias, rstd = 1/sqrt(var + eps), var biased (÷C) as in GPT-2.
// Two passes over the row (mean, then squared deviations) avoid E[x²]-E[x]² cancellation.
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, uint32_t N, uint32_t C) {
    #pragma omp parallel for schedule(static)
    for (uint32_t n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        double m = 0.0;
        for (uint32_t c = 0; c < C; c++) m += x[c];
        m /= C;
        double var = 0.0;
        for (uint32_t c = 0; c < C; c++) { double d = x[c] - m; var += d * d; }
        var /= C;
        double rs = 1.0 / sqrt(var + LN_EPS);
        for (uint32_t c = 0; c < C; c++)
            o[c] = (float)((x[c] - m) * rs) * weight[c] + bias[c];
        mean[n] = (float)m;
        rstd[n] = (float)rs;
    }
}

// With xhat = (x - mean)·rstd and dxhat = dout·weight:
//   dinp    += rstd·(dxhat - mean(dxhat) - xhat·mean(dxhat·xhat))
//   dweight += Σ_n dout·xhat,   dbias += Σ_n dout
// dinp accumulates too (backend.h): the residual stream's gradient arrives there first.
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, uint32_t N, uint32_t C) {
    #pragma omp parallel for schedule(static)
    for (uint32_t n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float m = mean[n], rs = rstd[n];
        double s1 = 0.0, s2 = 0.0;
        for (uint32_t c = 0; c < C; c++) {
            double dxh = (double)g[c] * weight[c];
            s1 += dxh;
            s2 += dxh * (((double)x[c] - m) * rs);
        }
        s1 /= C;
        s2 /= C;
        for (uint32_t c = 0; c < C; c++) {
            double xh = ((double)x[c] - m) * rs;
            double dxh = (double)g[c] * weight[c];
            dx[c] += (float)(rs * (dxh - s1 - xh * s2));
        }
    }
    // Parameter gradients: reductions over rows, split by column blocks so the sum order is
    // fixed (deterministic) and each thread reads 256 contiguous bytes per row.
    const uint32_t CB = 64;
    #pragma omp parallel for schedule(static)
    for (uint32_t c0 = 0; c0 < C; c0 += CB) {
        uint32_t c1 = c0 + CB < C ? c0 + CB : C;
        double sw[64] = {0}, sb[64] = {0};
        for (uint32_t n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
            float m = mean[n], rs = rstd[n];
            for (uint32_t c = c0; c < c1; c++) {
                sw[c - c0] += (double)g[c] * (((double)x[c] - m) * rs);
                sb[c - c0] += g[c];
            }
        }
        for (uint32_t c = c0; c < c1; c++) {
            dweight[c] += (float)sw[c - c0];
            dbias[c] += (float)sb[c - c0];
        }
    }
}

// out = x·rstd·weight, rstd = 1/sqrt(mean(x²) + eps)
void cpu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, uint32_t N, uint32_t C,
                         float eps) {
    #pragma omp parallel for schedule(static)
    for (uint32_t n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        double ss = 0.0;
        for (uint32_t c = 0; c < C; c++) ss += (double)x[c] * x[c];
        double rs = 1.0 / sqrt(ss / C + eps);
        for (uint32_t c = 0; c < C; c++) o[c] = (float)(x[c] * rs) * weight[c];
        rstd[n] = (float)rs;
    }
}

// With xhat = x·rstd and dxhat = dout·weight:
//   dinp    += rstd·(dxhat - xhat·mean(dxhat·xhat)),   dweight += Σ_n dout·xhat
void cpu_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                          const float *rstd, uint32_t N, uint32_t C) {
    #pragma omp parallel for schedule(static)
    for (uint32_t n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        double rs = rstd[n], s = 0.0;
        for (uint32_t c = 0; c < C; c++) s += (double)g[c] * weight[c] * (x[c] * rs);
        s /= C;
        for (uint32_t c = 0; c < C; c++) dx[c] += (float)(rs * ((double)g[c] * weight[c] - x[c] * rs * s));
    }
    const uint32_t CB = 64;  // column blocks: a fixed sum order, as in the layernorm backward
    #pragma omp parallel for schedule(static)
    for (uint32_t c0 = 0; c0 < C; c0 += CB) {
        uint32_t c1 = c0 + CB < C ? c0 + CB : C;
        double sw[64] = {0};
        for (uint32_t n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
            double rs = rstd[n];
            for (uint32_t c = c0; c < c1; c++) sw[c - c0] += (double)g[c] * (x[c] * rs);
        }
        for (uint32_t c = c0; c < c1; c++) dweight[c] += (float)sw[c - c0];
    }
}
