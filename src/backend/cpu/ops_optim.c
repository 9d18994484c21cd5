// ops_optim.c — C reference of 13_optimizer: the global gradient norm, the optimizer status of
// an update (clip factor, skip decision, update count, bias corrections, loss scale) and AdamW.
// The status stays in a device buffer that AdamW reads, so the GPU path never waits on a
// readback; the CPU reference keeps the same data flow.
#include "backend/cpu/ops.h"
#include "backend/opt_status.h"

// norm_sq[0] = (accumulate ? norm_sq[0] : 0) + Σ g², summed in double: the model calls this
// once per parameter tensor with accumulate = 1 after the first.
void cpu_grad_norm_sq(float *norm_sq, const float *g, size_t n, uint32_t accumulate) {
    double s = 0.0;
    #pragma omp parallel for schedule(static) reduction(+ : s) if (n > 65536)
    for (size_t i = 0; i < n; i++) s += (double)g[i] * g[i];
    norm_sq[0] = (float)((accumulate ? (double)norm_sq[0] : 0.0) + s);
}

// ---- bias corrections: 1 - beta^t in 64-bit fixed point ----
// The device has no f64, f32 powers lose accuracy as t grows, and float tricks for exact
// products do not survive GPU compilers (Vulkan lets them treat fma as a multiply and an add and
// simplify c - (c - a) to a). So beta^t is computed in integers: beta in [0, 1) as a 0.64 fixed
// point number, binary exponentiation keeping the top 64 bits of each 128-bit product (an
// absolute error of about 2^-57 after 2·32 products, far below the 2^-47 that the smallest
// 1 - beta the flags allow needs), then 1 - beta^t rounded to the nearest f32 from its top 25
// bits. The kernel (13_optimizer.wgsl) computes exactly these integers with 16-bit limbs, so both
// backends give the same f32, within half an ulp of 1 - pow(beta, t).
static uint64_t fx_mul(uint64_t x, uint64_t y) { return (uint64_t)(((unsigned __int128)x * y) >> 64); }

// beta (f32, [0, 1)) as the integer beta·2^64, exact for beta >= 2^-40 (smaller: truncated)
static uint64_t fx_from_f32(float beta) {
    uint32_t bits;
    memcpy(&bits, &beta, 4);
    uint32_t E = (bits >> 23) & 0xffu;
    if (E == 0 || (bits >> 31)) return 0;  // zero, subnormal or negative: 0
    uint64_t mant = (bits & 0x7fffffu) | 0x800000u;
    int sh = (int)E - 86;  // beta = mant·2^(E-150), times 2^64
    if (sh >= 0) return sh <= 40 ? mant << sh : 0;  // beta < 1 keeps sh <= 40 (mant < 2^24)
    return -sh < 32 ? mant >> -sh : 0;
}

float cpu_bias_correction(float beta, uint32_t t) {
    uint64_t b = fx_from_f32(beta), r = 0;
    int one = 1;  // r = 1, which 0.64 fixed point cannot hold
    for (uint32_t k = t; k; k >>= 1) {
        if (k & 1u) r = one ? b : fx_mul(r, b), one = 0;
        b = fx_mul(b, b);
    }
    if (one || r == 0) return one ? 0.0f : 1.0f;  // t = 0: 1 - 1; beta^t below 2^-64: 1
    uint64_t d = (uint64_t)0 - r;  // 2^64 - r = (1 - beta^t)·2^64
    int lz = __builtin_clzll(d);
    uint64_t top = (d << lz) >> 39;  // the leading 25 bits
    uint32_t mant = (uint32_t)((top + 1) >> 1);  // rounded to 24 (2^24 on a carry: still exact)
    return ldexpf((float)mant, -24 - lz);
}

// The optimizer status of one update (opt_status.h), from the squared norm and the loss sum
// that grad_norm_sq and sum_losses left in it. S is the loss scale the gradients carry:
//   norm = sqrt(norm_sq) / S                   the unscaled norm (exact for a power-of-two S)
//   clip = min(1, max_norm / norm)             1 when max_norm <= 0 (clipping off) or norm = 0
//   applied when norm and the loss sum are both finite:
//     t += 1, bc1 = 1 - beta1^t, bc2 = 1 - beta2^t, multiplier = clip / S, clean += 1;
//     dynamic: after `window` applied updates in a row S doubles (up to 2^64)
//   skipped otherwise: multiplier 0 (adamw changes nothing), skips += 1;
//     dynamic: S halves (not below the smallest normal f32)
// A NaN or infinite norm cannot be repaired by any clip factor, hence the skip; a multiplier
// clip / S below the smallest normal f32 (an enormous S or norm) is skipped too, because GPUs
// that flush subnormals would read it as 0.
void cpu_grad_clip_scale(float *status, float max_norm, float beta1, float beta2, uint32_t dynamic, uint32_t window) {
    const float S = status[WGT_ST_LOSS_SCALE];
    WGT_ASSERT(S > 0.0f && isfinite(S), "the optimizer status holds no valid loss scale (model_init sets it)");
    const float norm = sqrtf(status[WGT_ST_NORM_SQ]) / S;
    float clip = (max_norm > 0.0f && norm > max_norm) ? max_norm / norm : 1.0f;
    // a multiplier below the smallest normal f32 would be flushed to 0 by GPUs that drop
    // subnormals: such an update is skipped on every backend, like an overflow
    const int ok = isfinite(norm) && isfinite(status[WGT_ST_LOSS_SUM]) && clip / S >= 1.17549435e-38f;
    uint32_t t = wgt_st_u32(status, WGT_ST_T), clean = wgt_st_u32(status, WGT_ST_CLEAN);
    float next = S;
    status[WGT_ST_NORM] = norm;
    status[WGT_ST_STEP_SCALE] = S;
    if (ok) {
        t += t < UINT32_MAX ? 1u : 0u;
        status[WGT_ST_CLIP] = clip / S;
        status[WGT_ST_BC1] = cpu_bias_correction(beta1, t);
        status[WGT_ST_BC2] = cpu_bias_correction(beta2, t);
        clean += clean < UINT32_MAX ? 1u : 0u;
        if (dynamic && clean >= window) {
            if (S * 2.0f <= WGT_LOSS_SCALE_MAX) next = S * 2.0f;
            clean = 0;
        }
        wgt_st_set_u32(status, WGT_ST_SKIPPED, 0);
    } else {
        status[WGT_ST_CLIP] = 0.0f;
        uint32_t skips = wgt_st_u32(status, WGT_ST_SKIPS);
        wgt_st_set_u32(status, WGT_ST_SKIPS, skips < UINT32_MAX ? skips + 1 : skips);
        wgt_st_set_u32(status, WGT_ST_SKIPPED, 1);
        if (dynamic) {
            next = S * 0.5f >= 1.17549435e-38f ? S * 0.5f : 1.17549435e-38f;
            clean = 0;
        }
    }
    wgt_st_set_u32(status, WGT_ST_T, t);
    wgt_st_set_u32(status, WGT_ST_CLEAN, clean);
    status[WGT_ST_LOSS_SCALE] = next;
}

// g = grads·c, c = status clip/S;  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²
// p -= lr·( (m / bc1) / (sqrt(v / bc2) + eps) + wd·p )   (decoupled weight decay)
// bc1, bc2 = 1-β^t from the status (grad_clip_scale). The caller passes wd = 0 for tensors that
// are not decayed (biases, norms).
void cpu_adamw(float *params, float *m, float *v, const float *grads, const float *status, size_t n, float lr,
               float beta1, float beta2, float eps, float weight_decay) {
    const float s = status[WGT_ST_CLIP];
    if (s == 0.0f) return;  // a skipped update (non-finite gradient norm): nothing changes
    WGT_ASSERT(wgt_st_u32(status, WGT_ST_T) >= 1, "AdamW step numbers start at 1");
    const float bc1 = status[WGT_ST_BC1];
    const float bc2 = status[WGT_ST_BC2];
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
