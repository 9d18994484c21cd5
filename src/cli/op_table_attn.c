// op_table_attn.c — `wgtrain op` entries for causal multi-head attention: attention_forward
// (05_attention.wgsl) and attention_backward (10_backward_attention.wgsl). Binding names are
// backend.h's argument names; B, T, C come from qkv's shape ([B, T, 3C], or [T, 3C] for B = 1),
// NH from --set NH=N (forward) or from lse's size (backward). attention_backward's `variant`
// picks the WebGPU backward: 0 automatic, 1 streaming, 2 split-dKdV, 3 split-short, 4 fused (the
// CPU backend has one implementation and ignores it).
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "cli/op_table.h"

#include "backend/webgpu/wg_ops.h"

#define ATTN_MAX_HS 128   // the WGSL kernels' tiles are sized for head sizes up to 128
#define ATTN_SHORT_MAX_T 64

static int is_whole(double x) { return x == (double)(long long)x; }

// B, T, C from qkv (binding q); checks a --set value against the shape when one was given.
static wgt_status qkv_shape(op_call *c, int q, size_t *B, size_t *T, size_t *C) {
    const npy_array *a = &c->a[q];
    if (a->ndim == 3) { *B = a->shape[0]; *T = a->shape[1]; }
    else if (a->ndim == 2) { *B = 1; *T = a->shape[0]; }
    else return wgt_fail(WGT_ERR_FORMAT, "%s: qkv must be [B, T, 3C] (or [T, 3C]), got %d dimensions", c->d->name, a->ndim);
    size_t c3 = a->shape[a->ndim - 1];
    if (*B == 0 || *T == 0 || c3 == 0)
        return wgt_fail(WGT_ERR_FORMAT, "%s: qkv is empty (B = %zu, T = %zu, 3C = %zu); every size must be > 0", c->d->name,
                        *B, *T, c3);
    if (c3 % 3)
        return wgt_fail(WGT_ERR_FORMAT, "%s: qkv's last dimension is %zu, not a multiple of 3 (it holds q | k | v, C each)",
                        c->d->name, c3);
    *C = c3 / 3;
    if (*B * *T * c3 > UINT32_MAX)
        return wgt_fail(WGT_ERR_FORMAT, "%s: qkv has more than 2^32-1 elements; run fewer sequences at a time", c->d->name);
    const char *names[3] = {"B", "T", "C"};
    size_t vals[3] = {*B, *T, *C};
    for (int i = 0; i < 3; i++)
        if (c->p_set[i] && c->p[i] != (double)vals[i])
            return wgt_fail(WGT_ERR_ARG, "%s: --set %s=%g disagrees with qkv's shape (%s = %zu); drop the --set", c->d->name,
                            names[i], c->p[i], names[i], vals[i]);
    c->p[0] = (double)*B;
    c->p[1] = (double)*T;
    c->p[2] = (double)*C;
    return WGT_OK;
}

static wgt_status check_heads(op_call *c, size_t C, size_t NH) {
    if (NH == 0 || C % NH)
        return wgt_fail(WGT_ERR_ARG, "%s: C = %zu is not divisible by NH = %zu; the head size is C / NH", c->d->name, C, NH);
    if (C / NH > ATTN_MAX_HS)
        return wgt_fail(WGT_ERR_ARG, "%s: head size C / NH = %zu is above %d, the largest the attention kernels support; "
                        "use more heads", c->d->name, C / NH, ATTN_MAX_HS);
    return WGT_OK;
}

// ------------------------------------------------------------------ forward
// bindings: 0 qkv [B,T,3C], 1 out [B,T,C], 2 lse [B,NH,T]; params B, T, C, NH
static wgt_status plan_fwd(op_call *c) {
    size_t B, T, C;
    WGT_TRY(qkv_shape(c, 0, &B, &T, &C));
    if (!c->p_set[3])
        return wgt_fail(WGT_ERR_ARG, "attention_forward: the head count is unknown; add --set NH=N (C = %zu must be divisible "
                        "by it)", C);
    if (c->p[3] < 1 || !is_whole(c->p[3]))
        return wgt_fail(WGT_ERR_ARG, "attention_forward: NH = %g must be a whole number >= 1", c->p[3]);
    size_t NH = (size_t)c->p[3];
    WGT_TRY(check_heads(c, C, NH));
    size_t so[3] = {B, T, C}, sl[3] = {B, NH, T};
    op_out_shape(c, 1, 3, so);
    op_out_shape(c, 2, 3, sl);
    return WGT_OK;
}
static void run_fwd(wgt_backend *be, op_call *c) {
    be->attention_forward(be, c->v[1], c->v[2], c->v[0], (uint32_t)c->p[0], (uint32_t)c->p[1], (uint32_t)c->p[2],
                          (uint32_t)c->p[3]);
}

// ------------------------------------------------------------------ backward
// bindings: 0 dout [B,T,C], 1 qkv [B,T,3C], 2 out [B,T,C], 3 lse [B,NH,T], 4 dqkv [B,T,3C];
// params B, T, C, NH, variant
static wgt_status plan_bwd(op_call *c) {
    size_t B, T, C;
    WGT_TRY(qkv_shape(c, 1, &B, &T, &C));
    const char *bt_names[2] = {"dout", "out"};
    int bt_binds[2] = {0, 2};
    for (int i = 0; i < 2; i++)
        if (c->a[bt_binds[i]].n != B * T * C)
            return wgt_fail(WGT_ERR_FORMAT, "attention_backward: '%s' has %zu elements but must be [B, T, C] = [%zu, %zu, %zu] "
                            "(from qkv)", bt_names[i], c->a[bt_binds[i]].n, B, T, C);
    size_t nl = c->a[3].n;
    if (nl == 0 || nl % (B * T))
        return wgt_fail(WGT_ERR_FORMAT, "attention_backward: lse has %zu elements; it must be [B, NH, T] with B = %zu, T = %zu "
                        "(the forward's lse)", nl, B, T);
    size_t NH = nl / (B * T);
    if (c->p_set[3] && c->p[3] != (double)NH)
        return wgt_fail(WGT_ERR_ARG, "attention_backward: --set NH=%g disagrees with lse's size (NH = %zu); drop the --set",
                        c->p[3], NH);
    WGT_TRY(check_heads(c, C, NH));
    c->p[3] = (double)NH;
    double v = c->p[4];
    if (v < 0 || v > 4 || !is_whole(v))
        return wgt_fail(WGT_ERR_ARG, "attention_backward: variant = %g; use 0 (automatic), 1 (streaming), 2 (split-dKdV), "
                        "3 (split-short) or 4 (fused)", v);
    if (v == 3 && T > ATTN_SHORT_MAX_T)
        return wgt_fail(WGT_ERR_ARG, "attention_backward: split-short (variant 3) keeps T x T scores in workgroup memory and "
                        "handles T <= %d (56 on devices with 32 KiB of it), but T = %zu; use variant 0, 1, 2 or 4",
                        ATTN_SHORT_MAX_T, T);
    op_out_like(c, 4, 1);
    return WGT_OK;
}
static void run_bwd(wgt_backend *be, op_call *c) {
    uint32_t B = (uint32_t)c->p[0], T = (uint32_t)c->p[1], C = (uint32_t)c->p[2], NH = (uint32_t)c->p[3];
    int variant = (int)c->p[4];
    if (strcmp(be->name, "webgpu") || variant == 0) {
        be->attention_backward(be, c->v[4], c->v[0], c->v[1], c->v[2], c->v[3], B, T, C, NH);
        return;
    }
    int ran = wg_attention_backward_with(be, variant, c->v[4], c->v[0], c->v[1], c->v[2], c->v[3], B, T, C, NH);
    if (ran != variant)
        fprintf(stderr, "wgtrain op attention_backward: variant %d does not fit this device at T = %u; ran variant %d\n",
                variant, T, ran);
}

const op_desc op_table_attn[] = {
    {"attention_forward", "causal multi-head attention: out = softmax(q k^T / sqrt(HS)) v per head, and the row lse", 3,
     {{"qkv", OP_F32, OP_IN, 0}, {"out", OP_F32, OP_OUT, 0}, {"lse", OP_F32, OP_OUT, 0}}, 4,
     {{"B", NAN, 1}, {"T", NAN, 1}, {"C", NAN, 1}, {"NH", NAN, 1}}, plan_fwd, run_fwd},
    {"attention_backward", "dqkv from dout, qkv, out, lse; variant 0 auto, 1 streaming, 2 split-dKdV, 3 split-short, 4 fused", 5,
     {{"dout", OP_F32, OP_IN, 0}, {"qkv", OP_F32, OP_IN, 0}, {"out", OP_F32, OP_IN, 0}, {"lse", OP_F32, OP_IN, 0},
      {"dqkv", OP_F32, OP_OUT, 0}}, 5,
     {{"B", NAN, 1}, {"T", NAN, 1}, {"C", NAN, 1}, {"NH", NAN, 1}, {"variant", 0, 1}}, plan_bwd, run_bwd},
    {NULL, NULL, 0, {{0}}, 0, {{0}}, NULL, NULL},
};
