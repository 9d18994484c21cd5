// nf4.h — QLoRA's 4-bit NormalFloat (NF4) block quantisation of frozen weights (Dettmers et al.
// 2023, "QLoRA"): each block of 64 values is scaled by its absolute maximum and every value is
// stored as the index (4 bits) of the nearest of 16 levels, the quantiles of N(0, 1) that the paper
// defines (with an exact zero; its released code's construction), normalised to [-1, 1].
// Double quantisation stores the f32 absmax of each block again in 8 bits: per group of 256 absmax
// values, their mean and int8 codes of the rest (the paper uses 8-bit floats there; linear int8
// with a per-group scale is this build's choice, ~0.2 % of an absmax at most). docs/memory.md.
#ifndef WGT_NF4_H
#define WGT_NF4_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

#define NF4_BLOCK 64
#define NF4_DQ_GROUP 256

extern const float nf4_levels[16];  // ascending, nf4_levels[0] = -1, nf4_levels[7] = 0, nf4_levels[15] = 1

// The index of the level nearest to q (q in [-1, 1]; ties to the upper level).
int nf4_code(float q);
// x[n] (n a multiple of NF4_BLOCK, every value finite) into codes[n/2] (element 2i in the low nibble
// of byte i) and absmax[n/NF4_BLOCK]. Non-finite input is refused naming its index.
wgt_status nf4_quantize(uint8_t *codes, float *absmax, const float *x, size_t n);
// x[i] = nf4_levels[code i] * absmax[i / NF4_BLOCK].
void nf4_dequantize(float *x, const uint8_t *codes, const float *absmax, size_t n);
// Double quantisation of nb absmax values (all >= 0): per group of NF4_DQ_GROUP, mean[g] and
// scale[g] (f32) and q[i] = round((absmax[i] - mean) / scale) in [-127, 127]; back with
// nf4_dq_restore. Error per value at most scale / 2 = (largest |absmax - mean| of its group) / 254.
void nf4_dq_quantize(int8_t *q, float *mean, float *scale, const float *absmax, size_t nb);
void nf4_dq_restore(float *absmax, const int8_t *q, const float *mean, const float *scale, size_t nb);
#endif
