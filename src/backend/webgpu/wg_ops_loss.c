// wg_ops_loss.c — dispatch wrappers for kernels/07_loss.wgsl: fused cross-entropy (dlogits in
// place) and the loss sum.
//
// The logits [R, V] can be larger than one storage binding may be (R = 8192, V = 50257 is
// 1.6 GB; lavapipe binds at most 128 MiB), so the rows are dispatched in chunks whose binding
// fits. A chunk's first row rarely starts on a 256-byte boundary, so each binding starts at the
// aligned element at or below it and the kernel gets the remainder (lbase / tbase / obase).
#include "backend/webgpu/wg_ops.h"

// Test hook: when non-zero, the number of elements one logits binding may hold instead of the
// device's max_binding_elems, so that tests exercise the chunking at small sizes.
size_t wg_loss_max_chunk_elems_override = 0;

typedef struct {
    uint32_t R, V;
    float alpha, beta, inv_norm;
    uint32_t lbase, tbase, obase;
} ce_params;

typedef struct { uint32_t n, p0, p1, p2; } sum_params;

void wg_cross_entropy(wgt_backend *be, wgt_view logits, wgt_view losses, wgt_view targets, uint32_t R, uint32_t V,
                      float alpha, float beta, float inv_norm) {
    wg_ctx *ctx = wg_of(be);
    if (R == 0) return;
    size_t max_e = wg_loss_max_chunk_elems_override ? wg_loss_max_chunk_elems_override : be->max_binding_elems;
    if (max_e > ((size_t)1 << 31)) max_e = (size_t)1 << 31;  // the kernel indexes with u32
    const size_t slack = WGT_VIEW_ALIGN - 1;                 // the most an aligned-down start adds
    size_t rows_per = V ? (max_e > slack ? (max_e - slack) / V : 0) : R;
    WGT_ASSERT(rows_per > 0, "cross_entropy: one row of V logits is larger than the device's largest storage binding");
    WGPUComputePipeline p = wg_pipeline(ctx, "07_loss.wgsl", "cross_entropy", NULL);
    for (size_t r0 = 0; r0 < R; r0 += rows_per) {
        size_t rows = R - r0 < rows_per ? R - r0 : rows_per;
        size_t lo = logits.off + r0 * V, to = targets.off + r0, oo = losses.off + r0;
        wgt_view lv = {logits.buf, lo - lo % WGT_VIEW_ALIGN};
        wgt_view tv = {targets.buf, to - to % WGT_VIEW_ALIGN};
        wgt_view ov = {losses.buf, oo - oo % WGT_VIEW_ALIGN};
        ce_params prm = {(uint32_t)rows, V, alpha, beta, inv_norm, (uint32_t)(lo % WGT_VIEW_ALIGN),
                         (uint32_t)(to % WGT_VIEW_ALIGN), (uint32_t)(oo % WGT_VIEW_ALIGN)};
        wg_bind b[] = {wg_b(lv, prm.lbase + rows * V), wg_b(tv, prm.tbase + rows), wg_b(ov, prm.obase + rows)};
        wg_dispatch(ctx, "cross_entropy", p, b, 3, &prm, sizeof prm, rows);
    }
}

void wg_sum_losses(wgt_backend *be, wgt_view out, wgt_view losses, uint32_t n) {
    wg_ctx *ctx = wg_of(be);
    sum_params prm = {n, 0, 0, 0};
    // n = 0 still runs (one workgroup) so that out[0] = 0, as the reference writes
    wg_bind b[] = {wg_b(losses, n), wg_b(out, 1)};
    wg_dispatch(ctx, "sum_losses", wg_pipeline(ctx, "07_loss.wgsl", "sum_losses", NULL), b, 2, &prm, sizeof prm, 1);
}
