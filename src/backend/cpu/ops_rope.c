// ops_rope.c — C reference of 04_rope.wgsl: rotary position embedding in the rotate-half
// convention of Hugging Face LLaMA, in place on the q (NH heads) and k (NKV heads) parts of a
// fused qkv[B, T, NH·HS + 2·NKV·HS] (v untouched), and the host helper that fills the cos / sin
// tables. Per head, with x1 = x[0 .. HS/2), x2 = x[HS/2 .. HS) and row t of the tables:
//   forward   x'  = x·cos + rotate_half(x)·sin,  rotate_half(x) = [-x2, x1]
//   backward  dx  = dx'·cos + rotate_half^T(dx'·sin),  rotate_half^T(y) = [y2, -y1]
// (the transpose of the forward's linear map). Element-wise in f32, products rounded before the
// sum as in PyTorch's (q * cos) + (rotate_half(q) * sin). The tables come from a per-pair
// inverse-frequency table (cpu_rope_inv_freq: the plain, linear and llama3 rope types), so the
// kernel is the same for every rope type.
#include "backend/cpu/ops.h"

void cpu_rope_inv_freq(double *inv_freq, uint32_t HS, double theta, int type, double factor, double low, double high,
                       double orig) {
    WGT_ASSERT(HS >= 2 && HS % 2 == 0, "rope needs an even head size");
    WGT_ASSERT(theta > 0, "rope needs a positive base theta");
    WGT_ASSERT(type == WGT_ROPE_DEFAULT || factor >= 1, "a scaled rope needs a factor of at least 1");
    WGT_ASSERT(type != WGT_ROPE_LLAMA3 || (low > 0 && high > low && orig > 0), "llama3 rope: bad frequency factors");
    const double two_pi = 6.283185307179586;
    for (uint32_t i = 0; i < HS / 2; i++) {
        double f = 1.0 / pow(theta, (double)(2 * i) / (double)HS);
        if (type == WGT_ROPE_LINEAR) f /= factor;
        if (type == WGT_ROPE_LLAMA3) {
            double wavelen = two_pi / f;
            if (wavelen > orig / low) f /= factor;  // low frequencies: scaled
            else if (wavelen >= orig / high) {      // between: mixed (HF: neither < high_wavelen nor > low_wavelen)
                double s = (orig / wavelen - low) / (high - low);
                f = (1 - s) * f / factor + s * f;
            }  // high frequencies: kept
        }
        inv_freq[i] = f;
    }
}

void cpu_rope_tables(float *cos_tab, float *sin_tab, uint32_t maxT, uint32_t HS, const double *inv_freq) {
    WGT_ASSERT(HS >= 2 && HS % 2 == 0, "rope needs an even head size");
    const uint32_t H2 = HS / 2;
    for (uint32_t i = 0; i < H2; i++) {
        for (uint32_t t = 0; t < maxT; t++) {
            double a = (double)t * inv_freq[i];
            float c = (float)cos(a), s = (float)sin(a);
            size_t r = (size_t)t * HS;
            cos_tab[r + i] = cos_tab[r + H2 + i] = c;  // emb = cat(freqs, freqs)
            sin_tab[r + i] = sin_tab[r + H2 + i] = s;
        }
    }
}

// The rotation of every q and k head of rows (b, t), in place; transpose = 1 for the backward.
// doc (may be NULL): row (b, t) is at position t - doc[b·T + t] (packed examples restart).
static void rope_apply(float *x, const float *ct, const float *st, const uint32_t *doc, uint32_t B, uint32_t T,
                       uint32_t NH, uint32_t NKV, uint32_t HS, int transpose) {
    WGT_ASSERT(HS >= 2 && HS % 2 == 0, "rope needs an even head size");
    const size_t W = (size_t)(NH + 2 * (size_t)NKV) * HS, heads = (size_t)NH + NKV, rows = (size_t)B * T;
    const uint32_t H2 = HS / 2;
    #pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        size_t pos = r % T;
        if (doc) {
            WGT_ASSERT(doc[r] <= pos, "rope doc_start must be <= the position in the sequence");
            pos -= doc[r];
        }
        const float *c = ct + pos * HS, *s = st + pos * HS;
        for (size_t h = 0; h < heads; h++) {
            float *p = x + r * W + h * HS;
            for (uint32_t d = 0; d < H2; d++) {
                float x1 = p[d], x2 = p[d + H2];
                if (!transpose) {
                    p[d] = x1 * c[d] - x2 * s[d];
                    p[d + H2] = x2 * c[d + H2] + x1 * s[d + H2];
                } else {
                    p[d] = x1 * c[d] + x2 * s[d + H2];
                    p[d + H2] = x2 * c[d + H2] - x1 * s[d];
                }
            }
        }
    }
}

void cpu_rope_forward(float *qkv, const float *cos, const float *sin, const uint32_t *doc_start, uint32_t B, uint32_t T,
                      uint32_t NH, uint32_t NKV, uint32_t HS) {
    rope_apply(qkv, cos, sin, doc_start, B, T, NH, NKV, HS, 0);
}

void cpu_rope_backward(float *dqkv, const float *cos, const float *sin, const uint32_t *doc_start, uint32_t B,
                       uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS) {
    rope_apply(dqkv, cos, sin, doc_start, B, T, NH, NKV, HS, 1);
}
