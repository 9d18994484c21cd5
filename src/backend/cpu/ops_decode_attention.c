// ops_decode_attention.c — C reference of 16_decode_attention.wgsl: the three ops of decoding
// with a key/value cache (docs/kernels.md#decode_attention). Row b of a batch has pos[b] tokens
// in its cache; its T new tokens are at positions p = pos[b] + t.
//   decode_embedding   out[b,t,:] = wte[tokens[b,t],:] + wpe[p,:]   (no wpe: + 0, LLaMA)
//   kv_cache_append    kcache[b,p,:] = rope_p(k of qkv[b,t]), vcache[b,p,:] = v of qkv[b,t]
//   decode_attention   out[b,t,head h] = softmax_j(rope_p(q_h)·k_j / sqrt(HS)) · v_j over the
//                      cached keys j in [lo, p] of kv head h / (NH/NKV); lo = 0, or p - window + 1
//                      with a window
// The rotation is rope_forward's, element for element (x1·cos - x2·sin, x2·cos + x1·sin, at row p
// of the tables), so that the cached path sees the same rotated q and k as the full forward.
// The scores' dot products run in f32 (the attention reference's 8-lane order); the softmax sums
// and the weighted sum of values in double.
#include <math.h>
#include <stdlib.h>
#include "backend/cpu/ops.h"

static void check_pos(const uint32_t *pos, uint32_t B, uint32_t T, uint32_t maxT) {
    for (uint32_t b = 0; b < B; b++)
        WGT_ASSERT(pos[b] <= maxT && T <= maxT - pos[b], "decoding past the end of the key/value cache");
}

void cpu_decode_embedding(float *out, const int32_t *tokens, const float *wte, const float *wpe, const uint32_t *pos,
                          uint32_t B, uint32_t T, uint32_t C, uint32_t V, uint32_t maxT) {
    check_pos(pos, B, T, maxT);
    const size_t BT = (size_t)B * T;
    #pragma omp parallel for schedule(static)
    for (size_t bt = 0; bt < BT; bt++) {
        const int32_t tok = tokens[bt];
        WGT_ASSERT(tok >= 0 && (uint32_t)tok < V, "token id outside the vocabulary reached the embedding");
        const size_t p = (size_t)pos[bt / T] + bt % T;
        const float *e = wte + (size_t)tok * C;
        float *o = out + bt * C;
        if (wpe) {
            const float *w = wpe + p * C;
            for (uint32_t c = 0; c < C; c++) o[c] = e[c] + w[c];
        } else {
            for (uint32_t c = 0; c < C; c++) o[c] = e[c] + 0.0f;
        }
    }
}

// Head x (HS values) rotated at table row `row` into y, as rope_forward; a copy without tables.
static void rope_head(float *y, const float *x, const float *ct, const float *st, size_t row, uint32_t HS) {
    if (!ct) {
        for (uint32_t d = 0; d < HS; d++) y[d] = x[d];
        return;
    }
    const uint32_t H2 = HS / 2;
    const float *c = ct + row * HS, *s = st + row * HS;
    for (uint32_t d = 0; d < H2; d++) {
        float x1 = x[d], x2 = x[d + H2];
        float a = x1 * c[d], b = x2 * s[d];
        y[d] = a - b;
        float e = x2 * c[d + H2], f = x1 * s[d + H2];
        y[d + H2] = e + f;
    }
}

void cpu_kv_cache_append(float *kcache, float *vcache, const float *qkv, const float *cos, const float *sin,
                         const uint32_t *pos, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS,
                         uint32_t maxT) {
    check_pos(pos, B, T, maxT);
    WGT_ASSERT((cos == NULL) == (sin == NULL), "kv_cache_append: cos and sin come together");
    WGT_ASSERT(!cos || HS % 2 == 0, "rope needs an even head size");
    const size_t KV = (size_t)NKV * HS, W = (size_t)NH * HS + 2 * KV, BT = (size_t)B * T;
    #pragma omp parallel for schedule(static)
    for (size_t bt = 0; bt < BT; bt++) {
        const size_t b = bt / T, p = (size_t)pos[b] + bt % T;
        const float *row = qkv + bt * W;
        float *kc = kcache + (b * maxT + p) * KV, *vc = vcache + (b * maxT + p) * KV;
        for (uint32_t g = 0; g < NKV; g++) rope_head(kc + (size_t)g * HS, row + (size_t)NH * HS + (size_t)g * HS, cos, sin, p, HS);
        for (size_t i = 0; i < KV; i++) vc[i] = row[(size_t)NH * HS + KV + i];
    }
}

// f32 dot product, 8 interleaved partial sums added pairwise, then the tail (the attention
// reference's order)
static inline float dot8(const float *a, const float *b, size_t n) {
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

void cpu_decode_attention(float *out, const float *qkv, const float *kcache, const float *vcache, const float *cos,
                          const float *sin, const uint32_t *pos, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV,
                          uint32_t HS, uint32_t maxT, uint32_t window) {
    check_pos(pos, B, T, maxT);
    WGT_ASSERT(NH > 0 && NKV > 0 && NH % NKV == 0, "attention needs NKV (kv heads) dividing NH (query heads)");
    WGT_ASSERT((cos == NULL) == (sin == NULL), "decode_attention: cos and sin come together");
    WGT_ASSERT(!cos || HS % 2 == 0, "rope needs an even head size");
    const size_t KV = (size_t)NKV * HS, W = (size_t)NH * HS + 2 * KV, rows = (size_t)B * T * NH;
    const float scale = 1.0f / sqrtf((float)HS);
    const uint32_t group = NH / NKV;
    #pragma omp parallel
    {
        float *q = wgt_malloc((size_t)HS * sizeof *q);
        double *e = wgt_malloc((size_t)maxT * sizeof *e), *acc = wgt_malloc((size_t)HS * sizeof *acc);
        #pragma omp for schedule(static)
        for (size_t r = 0; r < rows; r++) {
            const size_t bt = r / NH, h = r % NH, b = bt / T, p = (size_t)pos[b] + bt % T;
            const size_t lo = window && p + 1 > window ? p + 1 - window : 0;
            rope_head(q, qkv + bt * W + h * HS, cos, sin, p, HS);
            const float *kb = kcache + b * maxT * KV + (h / group) * HS, *vb = vcache + b * maxT * KV + (h / group) * HS;
            float mx = -INFINITY;
            for (size_t j = lo; j <= p; j++) {
                float s = dot8(q, kb + j * KV, HS) * scale;
                e[j] = s;
                if (s > mx) mx = s;
            }
            double sum = 0;
            for (size_t j = lo; j <= p; j++) sum += e[j] = exp(e[j] - (double)mx);
            for (uint32_t d = 0; d < HS; d++) acc[d] = 0;
            for (size_t j = lo; j <= p; j++) {
                const float *v = vb + j * KV;
                for (uint32_t d = 0; d < HS; d++) acc[d] += e[j] * v[d];
            }
            float *o = out + bt * (size_t)NH * HS + h * HS;
            for (uint32_t d = 0; d < HS; d++) o[d] = (float)(acc[d] / sum);
        }
        free(q);
        free(e);
        free(acc);
    }
}
