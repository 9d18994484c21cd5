// ops_loss.c — C reference of 07_loss.wgsl: fused cross entropy (label smoothing α, z-loss β)
// that writes dlogits over the logits in place, and the loss sum. Each row is reduced in
// double: the reference should be the most accurate party in every kernel comparison.
#include "backend/cpu/ops.h"

// Per row r with target t < V (docs/kernels.md#cross_entropy):
//   lse  = max + log(max(denom, 1e-30)),  denom = Σ exp(l - max)
//   loss = lse - (1-α)·l[t] - α·mean(l) + β·lse²
//   dl[v] = ((p[v] - ((1-α)·[v==t] + α/V)) + 2β·lse·p[v]) · inv_norm · S
// S = loss_scale[0] (the optimizer status's loss scale word), 1 without it; inv_norm · S is
// one f32 product, so a power-of-two S scales every dlogit exactly.
// A target >= V marks an ignored row: loss 0 and a zero dlogits row. Every value of the row
// is read (max, denom, sum, l[t]) before the first write, which is what makes in-place safe.
void cpu_cross_entropy(float *logits, float *losses, const uint32_t *targets, const float *loss_scale, uint32_t R,
                       uint32_t V, float alpha, float beta, float inv_norm) {
    if (loss_scale) inv_norm *= loss_scale[0];
    #pragma omp parallel for schedule(static)
    for (uint32_t r = 0; r < R; r++) {
        float *row = logits + (size_t)r * V;
        uint32_t t = targets[r];
        if (t >= V) {
            losses[r] = 0.0f;
            memset(row, 0, (size_t)V * sizeof(float));
            continue;
        }
        float mx = -INFINITY;
        for (uint32_t v = 0; v < V; v++) mx = fmaxf(mx, row[v]);
        double denom = 0.0;
        for (uint32_t v = 0; v < V; v++) denom += exp((double)row[v] - mx);
        double sum_l = 0.0;
        if (alpha > 0.0f)  // skipped when unused, as the kernel's uniform branch does
            for (uint32_t v = 0; v < V; v++) sum_l += row[v];
        double d = denom < 1e-30 ? 1e-30 : denom;  // NaN stays NaN: a diverged row's loss is NaN
        double lse = mx + log(d);
        double a = alpha, b = beta;
        losses[r] = (float)(lse - (1.0 - a) * row[t] - a * (sum_l / V) + b * lse * lse);

        double inv_d = 1.0 / d, zl = 2.0 * b * lse, smooth = a / V;
        for (uint32_t v = 0; v < V; v++) {
            double p = exp((double)row[v] - mx) * inv_d;
            double target = (v == t ? 1.0 - a : 0.0) + smooth;
            row[v] = (float)(((p - target) + zl * p) * inv_norm);
        }
    }
}

// out[0] = Σ losses (in double, rounded once), added to out[0] when accumulate = 1, so that the
// micro-batches of one update sum into one word. The host divides by the count for the mean.
void cpu_sum_losses(float *out, const float *losses, uint32_t n, uint32_t accumulate) {
    double s = 0.0;
    for (uint32_t i = 0; i < n; i++) s += losses[i];
    // the sum is rounded to f32 before it is added, as the kernel's workgroup total is
    out[0] = accumulate ? out[0] + (float)s : (float)s;
}
