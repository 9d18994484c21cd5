// lowbit.h — the packed weight formats of a frozen base (matmul_lowbit, matmul_t_lowbit;
// docs/memory.md#low-precision-frozen-bases): element e of a packed matrix, decoded exactly as
// kernels/03_matmul.wgsl decodes it (the accessors wg_ops_matmul.c writes), and the words and blocks a matrix of n values needs.
//   fmt 0 f16   word e/2, half e%2 (low half first), IEEE binary16 (backend/half.h)
//   fmt 1 bf16  word e/2, half e%2, the top 16 bits of an f32
//   fmt 2 nf4   word e/8, bits 4(e%8)..4(e%8)+3: the index of an NF4 level (model/nf4.h), times
//               absmax[e/64]
// Shared by the C reference, the model's host code and the tests.
#ifndef WGT_LOWBIT_H
#define WGT_LOWBIT_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "backend/half.h"
#include "model/nf4.h"

enum { WGT_LOWBIT_F16 = 0, WGT_LOWBIT_BF16 = 1, WGT_LOWBIT_NF4 = 2 };

// 4-byte words (absmax blocks) that n values of format fmt take.
static inline uint64_t wgt_lowbit_words(uint32_t fmt, uint64_t n) {
    return fmt == WGT_LOWBIT_NF4 ? (n + 7) / 8 : (n + 1) / 2;
}
static inline uint64_t wgt_lowbit_blocks(uint32_t fmt, uint64_t n) {
    return fmt == WGT_LOWBIT_NF4 ? (n + NF4_BLOCK - 1) / NF4_BLOCK : 0;
}

static inline float wgt_bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
// f32 -> bf16, round to nearest, ties to even (what torch's .to(bfloat16) does); NaN stays NaN.
static inline uint16_t wgt_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

// Element e of a packed matrix.
static inline float wgt_lowbit_get(uint32_t fmt, const uint32_t *w, const float *absmax, uint64_t e) {
    if (fmt == WGT_LOWBIT_NF4) return nf4_levels[(w[e / 8] >> (4 * (e % 8))) & 15u] * absmax[e / NF4_BLOCK];
    uint16_t h = (uint16_t)(w[e / 2] >> (16 * (e % 2)));
    return fmt == WGT_LOWBIT_F16 ? wgt_f16_to_f32(h) : wgt_bf16_to_f32(h);
}
#endif
