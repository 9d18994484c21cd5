// op_table_seed.c — `wgtrain op` entries for the seed kernels (activation, loss, FFN backward).
#include <string.h>
#include "cli/op_table.h"

static wgt_status plan_n(op_call *c, int nin, int out0, int nout) {
    for (int i = 1; i < nin; i++)
        if (c->a[i].n != c->a[0].n)
            return wgt_fail(WGT_ERR_FORMAT, "%s: '%s' has %zu elements but '%s' has %zu; they must match", c->d->name,
                            c->d->b[i].name, c->a[i].n, c->d->b[0].name, c->a[0].n);
    for (int o = 0; o < nout; o++) op_out_like(c, out0 + o, 0);
    return WGT_OK;
}

static wgt_status plan_gelu(op_call *c) { return plan_n(c, 1, 0, 0); }
static void run_gelu(wgt_backend *be, op_call *c) { be->gelu_inplace(be, c->v[0], c->a[0].n); }

static wgt_status plan_swiglu(op_call *c) { return plan_n(c, 2, 2, 1); }
static void run_swiglu(wgt_backend *be, op_call *c) { be->swiglu_combine(be, c->v[2], c->v[0], c->v[1], c->a[0].n); }

static wgt_status plan_gelu_bwd(op_call *c) { return plan_n(c, 2, 2, 1); }
static void run_gelu_bwd(wgt_backend *be, op_call *c) { be->ffn_gelu_backward(be, c->v[2], c->v[0], c->v[1], c->a[0].n); }

static wgt_status plan_swiglu_bwd(op_call *c) { return plan_n(c, 3, 3, 2); }
static void run_swiglu_bwd(wgt_backend *be, op_call *c) {
    be->ffn_swiglu_backward(be, c->v[3], c->v[4], c->v[0], c->v[1], c->v[2], c->a[0].n);
}

// cross_entropy bindings: 0 logits [R,V] (in: logits, out: dlogits), 1 targets [R], 2 losses [R]
static wgt_status plan_ce(op_call *c) {
    npy_array *l = &c->a[0], *t = &c->a[1];
    if (l->ndim != 2)
        return wgt_fail(WGT_ERR_FORMAT, "cross_entropy: logits must be 2-D [R, V], got %d dimensions", l->ndim);
    size_t R = l->shape[0], V = l->shape[1];
    if (V == 0) return wgt_fail(WGT_ERR_FORMAT, "cross_entropy: V = 0 (logits of shape [%zu, 0]); the vocabulary must have at least one entry", R);
    if (R > UINT32_MAX || V > UINT32_MAX) return wgt_fail(WGT_ERR_FORMAT, "cross_entropy: R or V above 2^32");
    if (t->n != R)
        return wgt_fail(WGT_ERR_FORMAT, "cross_entropy: targets has %zu elements but logits has R = %zu rows", t->n, R);
    c->p[0] = (double)R;
    c->p[1] = (double)V;
    if (!c->p_set[4]) {  // inv_norm defaults to 1 / number of targets that are not ignored
        size_t valid = 0;
        const uint32_t *tg = t->data;
        for (size_t i = 0; i < R; i++) valid += tg[i] < V;
        c->p[4] = valid ? 1.0 / (double)valid : 0.0;
    }
    size_t shape[1] = {R};
    op_out_shape(c, 2, 1, shape);
    return WGT_OK;
}
static void run_ce(wgt_backend *be, op_call *c) {
    be->cross_entropy(be, c->v[0], c->v[2], c->v[1], (uint32_t)c->p[0], (uint32_t)c->p[1], (float)c->p[2],
                      (float)c->p[3], (float)c->p[4]);
}

static wgt_status plan_sum(op_call *c) {
    if (c->a[0].n > UINT32_MAX) return wgt_fail(WGT_ERR_FORMAT, "sum_losses: more than 2^32 losses");
    size_t shape[1] = {1};
    op_out_shape(c, 1, 1, shape);
    return WGT_OK;
}
static void run_sum(wgt_backend *be, op_call *c) { be->sum_losses(be, c->v[1], c->v[0], (uint32_t)c->a[0].n); }

const op_desc op_table_seed[] = {
    {"gelu_inplace", "x = gelu(x), tanh approximation", 1, {{"x", OP_F32, OP_INOUT, 0}}, 0, {{0}}, plan_gelu, run_gelu},
    {"swiglu_combine", "hidden = silu(gate) * up", 3,
     {{"gate", OP_F32, OP_IN, 0}, {"up", OP_F32, OP_IN, 0}, {"hidden", OP_F32, OP_OUT, 0}}, 0, {{0}}, plan_swiglu, run_swiglu},
    {"cross_entropy", "row-wise softmax cross-entropy with label smoothing and z-loss; dlogits in place", 3,
     {{"logits", OP_F32, OP_INOUT, 0}, {"targets", OP_INT, OP_IN, 0}, {"losses", OP_F32, OP_OUT, 0}}, 5,
     {{"R", NAN, 1}, {"V", NAN, 1}, {"alpha", 0.0, 0}, {"beta", 1e-4, 0}, {"inv_norm", NAN, 0}}, plan_ce, run_ce},
    {"sum_losses", "out[0] = sum of losses", 2, {{"losses", OP_F32, OP_IN, 0}, {"out", OP_F32, OP_OUT, 0}}, 0, {{0}},
     plan_sum, run_sum},
    {"ffn_gelu_backward", "grad_pre = grad_hidden * gelu'(pre_gelu)", 3,
     {{"grad_hidden", OP_F32, OP_IN, 0}, {"pre_gelu", OP_F32, OP_IN, 0}, {"grad_pre", OP_F32, OP_OUT, 0}}, 0, {{0}},
     plan_gelu_bwd, run_gelu_bwd},
    {"ffn_swiglu_backward", "grad_gate = g*up*silu'(gate), grad_up = g*silu(gate)", 5,
     {{"grad_hidden", OP_F32, OP_IN, 0}, {"gate", OP_F32, OP_IN, 0}, {"up", OP_F32, OP_IN, 0},
      {"grad_gate", OP_F32, OP_OUT, 0}, {"grad_up", OP_F32, OP_OUT, 0}}, 0, {{0}}, plan_swiglu_bwd, run_swiglu_bwd},
    {NULL, NULL, 0, {{0}}, 0, {{0}}, NULL, NULL},
};
