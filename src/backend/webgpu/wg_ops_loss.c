// wg_ops_loss.c — dispatch wrappers for kernels/07_loss.wgsl: fused cross-entropy (dlogits in
// place) and the loss sum.
//
// The logits [R, V] can be larger than one storage binding may be (R = 8192, V = 50257 is
// 1.6 GB; lavapipe binds at most 128 MiB), so the rows are dispatched in chunks whose binding
// fits (the runtime's wg_binding_limit). A chunk's first row rarely starts on a 256-byte
// boundary, so each binding is a window from the aligned element at or below it and the kernel
// gets the remainder (lbase / tbase / obase).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/webgpu/wg_ops.h"

typedef struct {
    uint32_t R, V;
    float alpha, beta, inv_norm;
    uint32_t lbase, tbase, obase, sbase, has_scale, p0, p1, p2;
} ce_params;

typedef struct { uint32_t n, out_off, accumulate, p2; } sum_params;

// ------------------------------------------------------------------ cross_entropy settings
// WGTRAIN_CE_CFG="wg=1024,vec=1,sg=1,reg=4,sm=2,rev=1" (keys left out keep their default), a
// setting of the context (wg_settings.h checks its form; here it is fitted to the device):
//   wg   threads per row (64..1024, a power of 2)
//   vec  1: vec4 loads and stores for the body of each row; 0: scalar strided (the first kernel)
//   sg   1: reductions through subgroup operations (only where every subgroup has one size)
//   reg  body vec4s per thread kept in registers between the two passes (0..16)
//   sm   body vec4s per thread kept in workgroup memory between the passes (lowered to fit)
//   rev  1: pass 2 re-reads the rest of the row last-read first (friendlier to the L2)
typedef struct { uint32_t wg, vec, sg, reg, sm, rev; } ce_cfg;

// Measured on the H200 (bench_kernels, R = 8192, V = 50257, GPU timestamps, against a vec4 copy
// in the same run): the first scalar kernel 2.29 ms (34%); wg=512,reg=8,sm=4 1.46 ms (53%);
// wg=1024,reg=0,sm=2 1.23 ms (63%); wg=1024,reg=4,sm=2 1.21 ms (64%, the best of 12 settings).
// Software adapters pay per thread, so they keep 256 threads and no caching.
static const ce_cfg ce_default = {1024, 1, 1, 4, 2, 1};
static const ce_cfg ce_default_cpu = {256, 1, 1, 0, 0, 1};

// The pipeline of the configuration in force (the settings over the defaults, fitted to the
// device). The settings are read on every call, so a benchmark or test can switch.
static uint32_t ce_pick(int set, uint32_t dflt) { return set == WG_AUTO ? dflt : (uint32_t)set; }
static WGPUComputePipeline ce_pipeline(wg_ctx *ctx) {
    const wg_device_info *info = wg_ctx_info(ctx);
    const ce_cfg base = info->type == WGPUAdapterType_CPU ? ce_default_cpu : ce_default;
    const wg_ce_settings *o = &wg_ctx_settings(ctx)->ce;
    ce_cfg c = {ce_pick(o->wg, base.wg), ce_pick(o->vec, base.vec), ce_pick(o->sg, base.sg),
                ce_pick(o->reg, base.reg), ce_pick(o->sm, base.sm), ce_pick(o->rev, base.rev)};
    uint32_t wg_max = info->limits.maxComputeInvocationsPerWorkgroup;
    if (info->limits.maxComputeWorkgroupSizeX < wg_max) wg_max = info->limits.maxComputeWorkgroupSizeX;
    if (c.wg < 64 || (c.wg & (c.wg - 1))) c.wg = base.wg;  // the tree reduction halves
    while (c.wg > wg_max) c.wg /= 2;
    uint32_t sgs = info->subgroup_min;
    int sg = c.sg && info->has_subgroups && sgs == info->subgroup_max && sgs >= 4 && !(sgs & (sgs - 1)) && sgs <= c.wg;
    if (c.reg > 16) c.reg = 16;
    size_t smem = info->limits.maxComputeWorkgroupStorageSize;
    size_t red = 4 * (size_t)(sg ? c.wg / sgs : c.wg);
    size_t sm_fit = smem > red ? (smem - red) / (16 * (size_t)c.wg) : 0;
    if (c.sm > sm_fit) c.sm = (uint32_t)sm_fit;
    char defs[320];
    snprintf(defs, sizeof defs,
             "const CE_WG=%uu;const CE_VEC=%s;const CE_SG=%s;const CE_SGS=%uu;const CE_REG=%uu;const CE_SM=%uu;"
             "const CE_REV=%s;fn ce_sg_add(v:f32)->f32{return %s;}fn ce_sg_max(v:f32)->f32{return %s;}",
             c.wg, c.vec ? "true" : "false", sg ? "true" : "false", sg ? sgs : 1u, c.reg, c.sm,
             c.rev ? "true" : "false", sg ? "subgroupAdd(v)" : "v", sg ? "subgroupMax(v)" : "v");
    return wg_pipeline(ctx, "07_loss.wgsl", "cross_entropy", defs);
}

// A binding for an absent optional view (no loss scale): the kernel does not read it.
static wg_bind placeholder(wgt_backend *be) {
    wgt_buf *b = wg_scratch(wg_of(be), WG_SCRATCH_PLACEHOLDER, WGT_VIEW_ALIGN, "placeholder");
    WGT_ASSERT(b != NULL, "could not allocate the 256-byte placeholder buffer");
    return wg_b(wgt_view_of(b, 0, 1), 1);
}

void wg_cross_entropy(wgt_backend *be, wgt_view logits, wgt_view losses, wgt_view targets, wgt_view loss_scale,
                      uint32_t R, uint32_t V, float alpha, float beta, float inv_norm) {
    wg_ctx *ctx = wg_of(be);
    if (R == 0) return;
    size_t max_e = (size_t)wg_binding_limit(be);
    if (max_e > ((size_t)1 << 31)) max_e = (size_t)1 << 31;  // the kernel indexes with u32
    max_e &= ~(size_t)3;  // so that a binding rounded up to whole vec4s still fits
    const size_t slack = WGT_VIEW_ALIGN - 1;  // the most an aligned-down start adds
    size_t rows_per = V ? (max_e > slack ? (max_e - slack) / V : 0) : R;
    WGT_ASSERT(rows_per > 0, "cross_entropy: one row of V logits is larger than the device's largest storage binding");
    WGPUComputePipeline p = ce_pipeline(ctx);
    // The logits are bound as whole vec4s: the runtime lets a binding's end round up to a whole
    // vec4 past the tensor (the kernel never reads or writes past the rows).
    for (size_t r0 = 0; r0 < R; r0 += rows_per) {
        size_t rows = R - r0 < rows_per ? R - r0 : rows_per;
        ce_params prm = {(uint32_t)rows, V, alpha, beta, inv_norm, 0, 0, 0, 0, loss_scale.buf != NULL, 0, 0, 0};
        wg_bind b[] = {wg_binding_window(logits, r0 * V, rows * V, &prm.lbase),
                       wg_binding_window(losses, r0, rows, &prm.obase),
                       wg_binding_window(targets, r0, rows, &prm.tbase),
                       loss_scale.buf ? wg_binding_window(loss_scale, 0, 1, &prm.sbase) : placeholder(be)};
        b[0].n = (b[0].n + 3) / 4 * 4;  // whole vec4s
        wg_dispatch(ctx, "cross_entropy", p, b, 4, &prm, sizeof prm, rows);
    }
}

void wg_sum_losses(wgt_backend *be, wgt_view out, wgt_view losses, uint32_t n, uint32_t accumulate) {
    wg_ctx *ctx = wg_of(be);
    sum_params prm = {n, 0, accumulate, 0};
    // n = 0 still runs (one workgroup) so that out[0] = 0, as the reference writes; out may be a
    // word inside the optimizer status (a window from its aligned start)
    wg_bind b[] = {wg_binding_window(out, 0, 1, &prm.out_off), wg_b(losses, n)};
    // the module's cross_entropy constants must exist for it to compile; their values do not matter here
    const char *defs = "const CE_WG=256u;const CE_VEC=false;const CE_SG=false;const CE_SGS=1u;const CE_REG=0u;const CE_SM=0u;"
                       "const CE_REV=false;fn ce_sg_add(v:f32)->f32{return v;}fn ce_sg_max(v:f32)->f32{return v;}";
    wg_dispatch(ctx, "sum_losses", wg_pipeline(ctx, "07_loss.wgsl", "sum_losses", defs), b, 2, &prm, sizeof prm, 1);
}
