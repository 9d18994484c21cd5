// dropout.h — the dropout mask of both backends (docs/kernels.md#dropout): a counter-based hash,
// so that no mask is stored and a backward regenerates its forward's mask from (seed, stream,
// index). Integer operations only (u32 wrap-around): the WGSL twins in kernels/00_shared.wgsl
// (hash32, dropout_key, dropout_bits) give the same bits. The C reference (cpu/) and the WebGPU
// hosts (webgpu/, for the threshold and scale they pass to the kernels) both use this file.
#ifndef WGT_DROPOUT_H
#define WGT_DROPOUT_H
#include <stdint.h>

// lowbias32 (C. Wellons, hash-prospector): a bijection of u32 with low avalanche bias.
static inline uint32_t wgt_hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

// The key of one mask stream, from three words.
static inline uint32_t wgt_dropout_key(uint32_t seed, uint32_t a, uint32_t b) {
    return wgt_hash32(wgt_hash32(wgt_hash32(seed ^ 0x9e3779b9u) ^ a) ^ b);
}

// The 32 random bits of counter i in the stream of `key`: a Weyl step, then one hash round.
static inline uint32_t wgt_dropout_bits(uint32_t key, uint32_t i) { return wgt_hash32(key + i * 0x9e3779b9u); }

// Attention's rows use b = WGT_DROPOUT_ATTN: dropout_forward's keys have b = index >> 32, never
// 2^32 - 1, so the two kinds of mask never share a stream.
#define WGT_DROPOUT_ATTN 0xffffffffu

// An element is kept when its bits >= floor(p·2^32) (p in [0, 1): the product is exact in
// double), so it is dropped with probability floor(p·2^32)/2^32; a kept value is multiplied by
// the f32 1/(1 - p). p = 0 gives threshold 0: nothing dropped.
static inline uint32_t wgt_dropout_threshold(float p) { return p > 0.0f ? (uint32_t)((double)p * 4294967296.0) : 0u; }
static inline float wgt_dropout_scale(float p) { return 1.0f / (1.0f - p); }
// the multiplier of an element: scale when kept, 0 when dropped
static inline float wgt_dropout_mult(uint32_t bits, uint32_t thr, float scale) { return bits >= thr ? scale : 0.0f; }
#endif
