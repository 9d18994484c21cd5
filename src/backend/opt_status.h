// opt_status.h — the optimizer status: a small device buffer that carries one update's
// decisions from kernel to kernel without the host (docs/kernels.md#the-optimizer-status).
// grad_norm_sq writes the squared norm into it, sum_losses adds the micro-batches' losses,
// cross_entropy reads the loss scale, grad_clip_scale turns all of that into the clip
// multiplier, the skip decision, the update count and the next loss scale, and adamw reads the
// multiplier and the bias corrections. The host reads it back asynchronously, one update late.
// f32 words hold floats; u32 words hold the integer's bits (the buffer is bound as f32 and the
// kernels bitcast). The WGSL copy of these indices is at the top of kernels/13_optimizer.wgsl.
#ifndef WGT_OPT_STATUS_H
#define WGT_OPT_STATUS_H
#include <stdint.h>
#include <string.h>

enum {
    WGT_ST_NORM_SQ = 0,     // f32 sum of squares of the (scaled) gradients (grad_norm_sq)
    WGT_ST_LOSS_SUM = 1,    // f32 sum of the row losses of the update's micro-batches (sum_losses)
    WGT_ST_LOSS_SCALE = 2,  // f32 S, the loss scale of the next backward (cross_entropy reads it)
    WGT_ST_CLIP = 3,        // f32 adamw's gradient multiplier: clip factor / S; 0 skips the update
    WGT_ST_NORM = 4,        // f32 the unscaled gradient norm of the last update (NaN/inf: skipped)
    WGT_ST_STEP_SCALE = 5,  // f32 the loss scale the last update's gradients carried
    WGT_ST_BC1 = 6,         // f32 1 - beta1^t of the last applied update
    WGT_ST_BC2 = 7,         // f32 1 - beta2^t
    WGT_ST_T = 8,           // u32 updates applied so far (AdamW's t of the last one)
    WGT_ST_SKIPS = 9,       // u32 updates skipped so far
    WGT_ST_SKIPPED = 10,    // u32 1 when the last update was skipped
    WGT_ST_CLEAN = 11,      // u32 updates applied since the loss scale last changed
    WGT_ST_WORDS = 16       // words in all (12..15 reserved, zero)
};

// A dynamic loss scale grows up to WGT_LOSS_SCALE_MAX (= 2^64) and no further: its reciprocal,
// adamw's multiplier, stays a normal f32 on GPUs that flush subnormals to zero.
#define WGT_LOSS_SCALE_MAX 18446744073709551616.0f

static inline uint32_t wgt_st_u32(const float *st, int word) {
    uint32_t v;
    memcpy(&v, &st[word], 4);
    return v;
}
static inline void wgt_st_set_u32(float *st, int word, uint32_t v) { memcpy(&st[word], &v, 4); }
#endif
