// nf4.c — NF4 block quantisation (nf4.h). Written here rather than taken from bitsandbytes (a CUDA
// library): the whole format is a 16-entry table, a block maximum and a nearest-level search.
#include <math.h>
#include <string.h>
#include "model/nf4.h"

// The levels of QLoRA's released construction (bitsandbytes create_normal_map, offset 0.9677083):
// Φ^-1 of 8 evenly spaced probabilities from 0.9677083 to 0.5 (exclusive) for the positive side, 7
// for the negative side, and 0, each divided by the largest, rounded to f32. test_nf4 recomputes
// them from that definition in double precision.
const float nf4_levels[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f,
    1.0f};

int nf4_code(float q) {
    int c = 0;  // the nearest level: above the midpoint between two levels is the upper one
    for (int i = 1; i < 16; i++)
        if (q >= 0.5f * (nf4_levels[i - 1] + nf4_levels[i])) c = i;
    return c;
}

wgt_status nf4_quantize(uint8_t *codes, float *absmax, const float *x, size_t n) {
    WGT_ASSERT(n % NF4_BLOCK == 0, "nf4_quantize: n is not a multiple of the block");
    memset(codes, 0, n / 2);
    for (size_t b = 0; b < n / NF4_BLOCK; b++) {
        const float *v = x + b * NF4_BLOCK;
        float am = 0;
        for (int i = 0; i < NF4_BLOCK; i++) {
            if (!isfinite(v[i]))
                return wgt_fail(WGT_ERR_FORMAT, "value %zu is not finite (%g): NF4 quantises finite weights only",
                                b * NF4_BLOCK + i, (double)v[i]);
            am = fmaxf(am, fabsf(v[i]));
        }
        absmax[b] = am;
        for (int i = 0; i < NF4_BLOCK; i++) {
            int c = am > 0 ? nf4_code(v[i] / am) : 7;
            size_t k = b * NF4_BLOCK + i;
            codes[k / 2] |= (uint8_t)(c << (4 * (k & 1)));
        }
    }
    return WGT_OK;
}

void nf4_dequantize(float *x, const uint8_t *codes, const float *absmax, size_t n) {
    for (size_t k = 0; k < n; k++) x[k] = nf4_levels[(codes[k / 2] >> (4 * (k & 1))) & 15] * absmax[k / NF4_BLOCK];
}

void nf4_dq_quantize(int8_t *q, float *mean, float *scale, const float *absmax, size_t nb) {
    for (size_t g = 0; g * NF4_DQ_GROUP < nb; g++) {
        size_t lo = g * NF4_DQ_GROUP, hi = lo + NF4_DQ_GROUP < nb ? lo + NF4_DQ_GROUP : nb;
        double s = 0;
        for (size_t i = lo; i < hi; i++) s += absmax[i];
        const float mu = (float)(s / (double)(hi - lo));
        float dev = 0;
        for (size_t i = lo; i < hi; i++) dev = fmaxf(dev, fabsf(absmax[i] - mu));
        mean[g] = mu;
        scale[g] = dev > 0 ? dev / 127.0f : 1.0f;
        for (size_t i = lo; i < hi; i++) {
            float r = rintf((absmax[i] - mu) / scale[g]);
            q[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
        }
    }
}

void nf4_dq_restore(float *absmax, const int8_t *q, const float *mean, const float *scale, size_t nb) {
    for (size_t i = 0; i < nb; i++) {
        size_t g = i / NF4_DQ_GROUP;
        absmax[i] = fmaxf(0.0f, mean[g] + (float)q[i] * scale[g]);
    }
}
