// half.h — IEEE binary16 (f16) conversions on the bits, shared by the C reference, the model's
// host code and the tests. f16 tensors are stored as pairs in 4-byte words (element 2i in the low
// 16 bits of word i, element 2i+1 in the high bits; an odd count leaves the last high half 0),
// which is also the byte layout of an array<f16> on the GPU, so both backends hold identical
// bytes. kernels/08_cast.wgsl does the same integer arithmetic (docs/numerics.md#mixed-precision).
#ifndef WGT_HALF_H
#define WGT_HALF_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// f32 -> f16, round to nearest, ties to even. Overflow (|x| >= 65520 after rounding) gives ±Inf,
// NaN stays a (quiet) NaN with the sign and the top payload bits, -0 stays -0, results below the
// normal range are f16 subnormals rounded the same way (2^-25 is a tie and rounds to 0).
static inline uint16_t wgt_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
    if (e == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
    const int32_t he = (int32_t)e - 112;  // the f16 biased exponent
    if (he >= 31) return (uint16_t)(sign | 0x7c00u);
    if (he <= 0) {
        if (he < -10) return (uint16_t)sign;  // below 2^-25: rounds to zero
        const uint32_t m = mant | 0x800000u, shift = (uint32_t)(14 - he);
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;  // may carry into the smallest normal
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((uint32_t)he << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;  // a carry out of 65504 gives Inf
    return (uint16_t)(sign | r);
}

// f16 -> f32, exact (every f16, subnormals included, is an f32).
static inline float wgt_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu, x;
    if (e == 0x1fu) x = sign | 0x7f800000u | (m << 13);
    else if (e) x = sign | ((e + 112u) << 23) | (m << 13);
    else if (!m) x = sign;
    else {
        uint32_t sh = 0;
        while (!(m & 0x400u)) { m <<= 1; sh++; }
        x = sign | ((113u - sh) << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

// 4-byte words that hold n f16 values.
static inline size_t wgt_f16_words(size_t n) { return (n + 1) / 2; }

// n floats -> n halves in words (an odd count zeroes the last high half); and back.
static inline void wgt_f16_pack(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = wgt_f32_to_f16(src[i]);
    if (n & 1) dst[n] = 0;
}
static inline void wgt_f16_unpack(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = wgt_f16_to_f32(src[i]);
}
#endif
