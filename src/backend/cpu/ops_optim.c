// ops_optim.c — C reference of 13_optimizer: the global gradient norm, the clipping factor and
// AdamW. The clip factor stays in a device buffer (scale[]) that AdamW reads, so the GPU path
// never waits on a readback; the CPU reference keeps the same data flow.
#include "backend/cpu/ops.h"

// norm_sq[0] = (accumulate ? norm_sq[0] : 0) + Σ g², summed in double: the model calls this
// once per parameter tensor with accumulate = 1 after the first.
void cpu_grad_norm_sq(float *norm_sq, const float *g, size_t n, uint32_t accumulate) {
    double s = 0.0;
    #pragma omp parallel for schedule(static) reduction(+ : s) if (n > 65536)
    for (size_t i = 0; i < n; i++) s += (double)g[i] * g[i];
    norm_sq[0] = (float)((accumulate ? (double)norm_sq[0] : 0.0) + s);
}

// scale[0] = min(1, max_norm / norm) (1 when max_norm <= 0 disables clipping); scale[1] = norm.
// A zero norm gives 1. A NaN or infinite norm gives 0, which makes adamw skip the update
// entirely (no scale can repair non-finite gradients); the host sees it in scale[1].
void cpu_grad_clip_scale(float *scale, const float *norm_sq, float max_norm) {
    float norm = sqrtf(norm_sq[0]);
    scale[0] = (max_norm > 0.0f && norm > max_norm) ? max_norm / norm : 1.0f;
    if (!isfinite(norm)) scale[0] = 0.0f;  // tells adamw to skip the update: nothing can repair it
    scale[1] = norm;
}

// g = grads·scale[0];  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²
// p -= lr·( (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + eps) + wd·p )   (decoupled weight decay)
// The caller passes wd = 0 for tensors that are not decayed (biases, norms).
void cpu_adamw(float *params, float *m, float *v, const float *grads, const float *scale, size_t n, float lr,
               float beta1, float beta2, float eps, float weight_decay, uint32_t t) {
    WGT_ASSERT(t >= 1, "AdamW step numbers start at 1");
    const float s = scale[0];
    if (s == 0.0f) return;  // a skipped update (non-finite gradient norm): nothing changes
    const float bc1 = (float)(1.0 - pow(beta1, t));
    const float bc2 = (float)(1.0 - pow(beta2, t));
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float g = grads[i] * s;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / bc1, vhat = vi / bc2;
        params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * params[i]);
    }
}
