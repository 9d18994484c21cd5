// op_table_gpt.c — `wgtrain op` entries for the GPT-2 ops other than attention: embedding,
// layernorm, the matmul family, residual, gradient norm, clipping and AdamW. Binding names are
// backend.h's argument names. Sizes come from the input shapes (a matrix's last dimension is its
// row length, the others are flattened into rows). Accumulating outputs (parameter gradients,
// AdamW state) are in+out bindings that start at zero when no input is given.
#include <stdint.h>
#include <string.h>
#include "cli/op_table.h"

// rows = product of all but the last dimension, cols = the last dimension
static void rows_cols(const npy_array *a, size_t *rows, size_t *cols) {
    *cols = a->ndim ? a->shape[a->ndim - 1] : 1;
    *rows = *cols ? a->n / *cols : 0;
}

// An optional input that was not given: a zero-filled (or `fill`-filled) array of this shape,
// uploaded like a given one.
static void default_input(op_call *c, int b, int ndim, const size_t *shape, float fill) {
    if (c->have[b]) return;
    op_out_shape(c, b, ndim, shape);
    float *d = wgt_malloc(c->a[b].n * 4 + 4);
    for (size_t i = 0; i < c->a[b].n; i++) d[i] = fill;
    c->a[b].data = d;
    c->have[b] = 1;
}

// A given in+out or input array must have exactly n elements.
static wgt_status need_n(op_call *c, int b, size_t n, const char *shape_text) {
    if (c->have[b] && c->a[b].n != n)
        return wgt_fail(WGT_ERR_FORMAT, "%s: '%s' has %zu elements but must be %s = %zu elements", c->d->name,
                        c->d->b[b].name, c->a[b].n, shape_text, n);
    return WGT_OK;
}

static wgt_status fits_u32(op_call *c, size_t n, const char *what) {
    if (n > UINT32_MAX)
        return wgt_fail(WGT_ERR_FORMAT, "%s: %s = %zu is above 2^32-1, the largest size the kernels index", c->d->name, what, n);
    return WGT_OK;
}

static int is_whole(double x) { return x == (double)(long long)x; }

// ------------------------------------------------------------------ embedding
// embedding_forward bindings: 0 tokens [B,T], 1 wte [V,C], 2 wpe [maxT,C], 3 out [B,T,C]
static wgt_status tokens_bt(op_call *c, int b, size_t *B, size_t *T) {
    npy_array *t = &c->a[b];
    if (t->ndim == 2) { *B = t->shape[0]; *T = t->shape[1]; }
    else if (t->ndim == 1) { *B = 1; *T = t->shape[0]; }
    else return wgt_fail(WGT_ERR_FORMAT, "%s: tokens must be [B, T] (or [T]), got %d dimensions", c->d->name, t->ndim);
    if (*B == 0 || *T == 0) return wgt_fail(WGT_ERR_FORMAT, "%s: tokens is empty; give at least one token", c->d->name);
    return fits_u32(c, *B * *T, "B*T");
}

static wgt_status tokens_in_range(op_call *c, int b, size_t V) {
    const int32_t *tk = c->a[b].data;
    for (size_t i = 0; i < c->a[b].n; i++)
        if (tk[i] < 0 || (size_t)tk[i] >= V)
            return wgt_fail(WGT_ERR_FORMAT, "%s: tokens[%zu] = %lld is outside the vocabulary [0, %zu); fix the token file "
                            "or the embedding's V", c->d->name, i, (long long)(int32_t)tk[i], V);
    return WGT_OK;
}

static wgt_status plan_emb_fwd(op_call *c) {
    size_t B = 0, T = 0;
    WGT_TRY(tokens_bt(c, 0, &B, &T));
    npy_array *wte = &c->a[1], *wpe = &c->a[2];
    if (wte->ndim != 2 || wpe->ndim != 2)
        return wgt_fail(WGT_ERR_FORMAT, "embedding_forward: wte must be [V, C] and wpe [maxT, C] (2-D)");
    size_t V = wte->shape[0], C = wte->shape[1];
    if (C == 0 || V == 0) return wgt_fail(WGT_ERR_FORMAT, "embedding_forward: wte has shape [%zu, %zu]; V and C must be > 0", V, C);
    if (wpe->shape[1] != C)
        return wgt_fail(WGT_ERR_FORMAT, "embedding_forward: wpe has C = %zu but wte has C = %zu; they must match", wpe->shape[1], C);
    if (wpe->shape[0] < T)
        return wgt_fail(WGT_ERR_FORMAT, "embedding_forward: wpe has %zu positions but tokens has T = %zu; give a wpe with at "
                        "least T rows", wpe->shape[0], T);
    WGT_TRY(tokens_in_range(c, 0, V));
    WGT_TRY(fits_u32(c, B * T * C, "B*T*C"));
    c->p[0] = (double)B; c->p[1] = (double)T; c->p[2] = (double)C;
    size_t shape[3] = {B, T, C};
    op_out_shape(c, 3, 3, shape);
    return WGT_OK;
}
static void run_emb_fwd(wgt_backend *be, op_call *c) {
    be->embedding_forward(be, c->v[3], c->v[0], c->v[1], c->v[2], (uint32_t)c->p[0], (uint32_t)c->p[1], (uint32_t)c->p[2]);
}

// embedding_backward bindings: 0 dwte [V,C] (+=), 1 dwpe [T',C] (+=, T' >= T), 2 dout [B,T,C], 3 tokens [B,T]
static wgt_status plan_emb_bwd(op_call *c) {
    size_t B = 0, T = 0, rows, C;
    WGT_TRY(tokens_bt(c, 3, &B, &T));
    rows_cols(&c->a[2], &rows, &C);
    if (C == 0 || c->a[2].n != B * T * C)
        return wgt_fail(WGT_ERR_FORMAT, "embedding_backward: dout has %zu elements, expected B*T*C = %zu*%zu*C with C its last "
                        "dimension (%zu)", c->a[2].n, B, T, C);
    size_t V;
    if (c->have[0]) {
        if (c->a[0].ndim != 2 || c->a[0].shape[1] != C)
            return wgt_fail(WGT_ERR_FORMAT, "embedding_backward: dwte must be [V, C] with C = %zu (dout's last dimension)", C);
        V = c->a[0].shape[0];
        if (c->p_set[3] && c->p[3] != (double)V)
            return wgt_fail(WGT_ERR_ARG, "embedding_backward: --set V=%g disagrees with dwte's %zu rows; drop one", c->p[3], V);
    } else {
        if (!c->p_set[3] || c->p[3] < 1 || !is_whole(c->p[3]))
            return wgt_fail(WGT_ERR_ARG, "embedding_backward: the vocabulary size is unknown; give --in dwte=FILE.npy or --set V=N");
        V = (size_t)c->p[3];
        size_t shape[2] = {V, C};
        default_input(c, 0, 2, shape, 0.0f);
    }
    if (c->have[1]) {
        if (c->a[1].ndim != 2 || c->a[1].shape[1] != C || c->a[1].shape[0] < T)
            return wgt_fail(WGT_ERR_FORMAT, "embedding_backward: dwpe must be [T', C] with T' >= T = %zu and C = %zu", T, C);
    } else {
        size_t shape[2] = {T, C};
        default_input(c, 1, 2, shape, 0.0f);
    }
    WGT_TRY(tokens_in_range(c, 3, V));
    WGT_TRY(fits_u32(c, V * C, "V*C"));
    WGT_TRY(fits_u32(c, B * T * C, "B*T*C"));
    c->p[0] = (double)B; c->p[1] = (double)T; c->p[2] = (double)C; c->p[3] = (double)V;
    return WGT_OK;
}
static void run_emb_bwd(wgt_backend *be, op_call *c) {
    be->embedding_backward(be, c->v[0], c->v[1], c->v[2], c->v[3], (uint32_t)c->p[0], (uint32_t)c->p[1], (uint32_t)c->p[2],
                           (uint32_t)c->p[3]);
}

// ------------------------------------------------------------------ layernorm
// layernorm_forward bindings: 0 inp [N,C], 1 weight [C], 2 bias [C], 3 out, 4 mean [N], 5 rstd [N]
static wgt_status plan_ln_fwd(op_call *c) {
    size_t N, C;
    rows_cols(&c->a[0], &N, &C);
    if (N == 0 || C == 0) return wgt_fail(WGT_ERR_FORMAT, "layernorm_forward: inp is empty; it must be [N, C] with N, C > 0");
    WGT_TRY(need_n(c, 1, C, "[C] with C inp's last dimension"));
    WGT_TRY(need_n(c, 2, C, "[C] with C inp's last dimension"));
    WGT_TRY(fits_u32(c, N * C, "N*C"));
    c->p[0] = (double)N; c->p[1] = (double)C;
    op_out_like(c, 3, 0);
    size_t shape[1] = {N};
    op_out_shape(c, 4, 1, shape);
    op_out_shape(c, 5, 1, shape);
    return WGT_OK;
}
static void run_ln_fwd(wgt_backend *be, op_call *c) {
    be->layernorm_forward(be, c->v[3], c->v[4], c->v[5], c->v[0], c->v[1], c->v[2], (uint32_t)c->p[0], (uint32_t)c->p[1]);
}

// layernorm_backward bindings: 0 dinp (+=), 1 dweight (+=), 2 dbias (+=), 3 dout [N,C], 4 inp [N,C],
// 5 weight [C], 6 mean [N], 7 rstd [N]
static wgt_status plan_ln_bwd(op_call *c) {
    size_t N, C;
    rows_cols(&c->a[4], &N, &C);
    if (N == 0 || C == 0) return wgt_fail(WGT_ERR_FORMAT, "layernorm_backward: inp is empty; it must be [N, C] with N, C > 0");
    WGT_TRY(need_n(c, 3, N * C, "inp's size N*C"));
    WGT_TRY(need_n(c, 5, C, "[C] with C inp's last dimension"));
    WGT_TRY(need_n(c, 6, N, "[N] (one per row of inp)"));
    WGT_TRY(need_n(c, 7, N, "[N] (one per row of inp)"));
    WGT_TRY(need_n(c, 0, N * C, "inp's size N*C"));
    WGT_TRY(need_n(c, 1, C, "[C]"));
    WGT_TRY(need_n(c, 2, C, "[C]"));
    WGT_TRY(fits_u32(c, N * C, "N*C"));
    size_t shc[1] = {C};
    default_input(c, 0, c->a[4].ndim, c->a[4].shape, 0.0f);
    default_input(c, 1, 1, shc, 0.0f);
    default_input(c, 2, 1, shc, 0.0f);
    c->p[0] = (double)N; c->p[1] = (double)C;
    return WGT_OK;
}
static void run_ln_bwd(wgt_backend *be, op_call *c) {
    be->layernorm_backward(be, c->v[0], c->v[1], c->v[2], c->v[3], c->v[4], c->v[5], c->v[6], c->v[7], (uint32_t)c->p[0],
                           (uint32_t)c->p[1]);
}

// ------------------------------------------------------------------ matmul family
// out shape: the leading dimensions of `like`, then `last`
static void out_rows(op_call *c, int out, int like, size_t last) {
    size_t shape[NPY_MAX_DIMS];
    int nd = c->a[like].ndim;
    if (nd == 0) nd = 1;
    for (int i = 0; i < nd - 1; i++) shape[i] = c->a[like].shape[i];
    shape[nd - 1] = last;
    op_out_shape(c, out, nd, shape);
}

static wgt_status weight_shape(op_call *c, int b, size_t *OC, size_t *C) {
    if (c->a[b].ndim != 2) return wgt_fail(WGT_ERR_FORMAT, "%s: weight must be 2-D [OC, C], got %d dimensions", c->d->name, c->a[b].ndim);
    *OC = c->a[b].shape[0];
    *C = c->a[b].shape[1];
    return WGT_OK;
}

// matmul bindings: 0 inp [N,C], 1 weight [OC,C], 2 bias [OC] (optional), 3 out [N,OC]
static wgt_status plan_mm(op_call *c) {
    size_t N, C, OC = 0, WC = 0;
    rows_cols(&c->a[0], &N, &C);
    WGT_TRY(weight_shape(c, 1, &OC, &WC));
    if (WC != C)
        return wgt_fail(WGT_ERR_FORMAT, "matmul: inp rows have C = %zu but weight is [%zu, %zu]; weight must be [OC, C] "
                        "(PyTorch Linear layout; transpose a Conv1D [C, OC] weight)", C, OC, WC);
    WGT_TRY(need_n(c, 2, OC, "[OC] with OC weight's first dimension"));
    WGT_TRY(fits_u32(c, N * OC, "N*OC"));
    WGT_TRY(fits_u32(c, N * C, "N*C"));
    WGT_TRY(fits_u32(c, OC * C, "OC*C"));
    c->p[0] = (double)N; c->p[1] = (double)C; c->p[2] = (double)OC;
    out_rows(c, 3, 0, OC);
    return WGT_OK;
}
static void run_mm(wgt_backend *be, op_call *c) {
    be->matmul(be, c->v[3], c->v[0], c->v[1], c->v[2], (uint32_t)c->p[0], (uint32_t)c->p[1], (uint32_t)c->p[2]);
}

// matmul_t bindings: 0 dout [N,OC], 1 weight [OC,C], 2 dinp [N,C]
static wgt_status plan_mm_t(op_call *c) {
    size_t N, OC, WOC = 0, C = 0;
    rows_cols(&c->a[0], &N, &OC);
    WGT_TRY(weight_shape(c, 1, &WOC, &C));
    if (WOC != OC)
        return wgt_fail(WGT_ERR_FORMAT, "matmul_t: dout rows have OC = %zu but weight is [%zu, %zu]; weight must be [OC, C]",
                        OC, WOC, C);
    WGT_TRY(fits_u32(c, N * OC, "N*OC"));
    WGT_TRY(fits_u32(c, N * C, "N*C"));
    WGT_TRY(fits_u32(c, OC * C, "OC*C"));
    c->p[0] = (double)N; c->p[1] = (double)C; c->p[2] = (double)OC;
    out_rows(c, 2, 0, C);
    return WGT_OK;
}
static void run_mm_t(wgt_backend *be, op_call *c) {
    be->matmul_t(be, c->v[2], c->v[0], c->v[1], (uint32_t)c->p[0], (uint32_t)c->p[1], (uint32_t)c->p[2]);
}

// matmul_at bindings: 0 dweight [OC,C] (+=), 1 dbias [OC] (+=), 2 dout [N,OC], 3 inp [N,C]
static wgt_status plan_mm_at(op_call *c) {
    size_t N, OC, N2, C;
    rows_cols(&c->a[2], &N, &OC);
    rows_cols(&c->a[3], &N2, &C);
    if (N != N2)
        return wgt_fail(WGT_ERR_FORMAT, "matmul_at: dout has %zu rows but inp has %zu; both must be [N, ...] with the same N", N, N2);
    if (c->have[0] && (c->a[0].ndim != 2 || c->a[0].shape[0] != OC || c->a[0].shape[1] != C))
        return wgt_fail(WGT_ERR_FORMAT, "matmul_at: dweight must be [OC, C] = [%zu, %zu] (dout's and inp's last dimensions)", OC, C);
    WGT_TRY(need_n(c, 1, OC, "[OC] with OC dout's last dimension"));
    if (!is_whole(c->p[0]) || (c->p[0] != 0 && c->p[0] != 1))
        return wgt_fail(WGT_ERR_ARG, "matmul_at: --set with_dbias takes 0 or 1");
    WGT_TRY(fits_u32(c, N * OC, "N*OC"));
    WGT_TRY(fits_u32(c, N * C, "N*C"));
    WGT_TRY(fits_u32(c, OC * C, "OC*C"));
    size_t shw[2] = {OC, C}, shb[1] = {OC};
    default_input(c, 0, 2, shw, 0.0f);
    default_input(c, 1, 1, shb, 0.0f);
    c->p[1] = (double)N; c->p[2] = (double)C; c->p[3] = (double)OC;
    return WGT_OK;
}
static void run_mm_at(wgt_backend *be, op_call *c) {
    wgt_view db = c->v[1];
    if (c->p[0] == 0) db.buf = NULL;  // dbias is then returned unchanged
    be->matmul_at(be, c->v[0], db, c->v[2], c->v[3], (uint32_t)c->p[1], (uint32_t)c->p[2], (uint32_t)c->p[3]);
}

// ------------------------------------------------------------------ residual
// residual_forward bindings: 0 a, 1 b, 2 out
static wgt_status plan_res(op_call *c) {
    if (c->a[1].n != c->a[0].n)
        return wgt_fail(WGT_ERR_FORMAT, "residual_forward: a has %zu elements but b has %zu; they must match", c->a[0].n, c->a[1].n);
    op_out_like(c, 2, 0);
    return WGT_OK;
}
static void run_res(wgt_backend *be, op_call *c) { be->residual_forward(be, c->v[2], c->v[0], c->v[1], c->a[0].n); }

// add_inplace bindings: 0 out (+=), 1 a
static wgt_status plan_add(op_call *c) {
    if (c->a[1].n != c->a[0].n)
        return wgt_fail(WGT_ERR_FORMAT, "add_inplace: out has %zu elements but a has %zu; they must match", c->a[0].n, c->a[1].n);
    return WGT_OK;
}
static void run_add(wgt_backend *be, op_call *c) { be->add_inplace(be, c->v[0], c->v[1], c->a[0].n); }

// ------------------------------------------------------------------ optimizer
// grad_norm_sq bindings: 0 g, 1 norm_sq [1] (+= when accumulate)
static wgt_status plan_norm(op_call *c) {
    if (c->p[0] != 0 && c->p[0] != 1) return wgt_fail(WGT_ERR_ARG, "grad_norm_sq: --set accumulate takes 0 or 1");
    if (c->p[0] == 1 && !c->have[1])
        return wgt_fail(WGT_ERR_ARG, "grad_norm_sq: accumulate=1 adds to norm_sq: give it with --in norm_sq=FILE.npy");
    WGT_TRY(need_n(c, 1, 1, "[1]"));
    size_t shape[1] = {1};
    default_input(c, 1, 1, shape, 0.0f);
    return WGT_OK;
}
static void run_norm(wgt_backend *be, op_call *c) { be->grad_norm_sq(be, c->v[1], c->v[0], c->a[0].n, (int)c->p[0]); }

// grad_clip_scale bindings: 0 norm_sq [1], 1 scale [2] (clip factor, norm)
static wgt_status plan_clip(op_call *c) {
    WGT_TRY(need_n(c, 0, 1, "[1]"));
    size_t shape[1] = {2};
    op_out_shape(c, 1, 1, shape);
    return WGT_OK;
}
static void run_clip(wgt_backend *be, op_call *c) { be->grad_clip_scale(be, c->v[1], c->v[0], (float)c->p[0]); }

// adamw bindings: 0 params (in+out), 1 m, 2 v (in+out, zero by default), 3 grads, 4 scale [>=1] (default 1)
static wgt_status plan_adamw(op_call *c) {
    size_t n = c->a[0].n;
    WGT_TRY(need_n(c, 3, n, "params' size"));
    WGT_TRY(need_n(c, 1, n, "params' size"));
    WGT_TRY(need_n(c, 2, n, "params' size"));
    if (c->have[4] && c->a[4].n < 1) return wgt_fail(WGT_ERR_FORMAT, "adamw: scale is empty; it holds the gradient factor in scale[0]");
    // lr, beta1, beta2, eps, weight_decay, t
    if (!(c->p[1] >= 0 && c->p[1] < 1) || !(c->p[2] >= 0 && c->p[2] < 1))
        return wgt_fail(WGT_ERR_ARG, "adamw: beta1 and beta2 must be in [0, 1) (got %g, %g)", c->p[1], c->p[2]);
    if (!(c->p[3] > 0)) return wgt_fail(WGT_ERR_ARG, "adamw: eps must be > 0 (got %g)", c->p[3]);
    if (c->p[5] < 1 || !is_whole(c->p[5]) || c->p[5] > INT32_MAX)
        return wgt_fail(WGT_ERR_ARG, "adamw: t is the 1-based step number: a whole number >= 1 (got %g)", c->p[5]);
    WGT_TRY(fits_u32(c, n, "n"));
    default_input(c, 1, c->a[0].ndim, c->a[0].shape, 0.0f);
    default_input(c, 2, c->a[0].ndim, c->a[0].shape, 0.0f);
    size_t shs[1] = {1};
    default_input(c, 4, 1, shs, 1.0f);
    return WGT_OK;
}
static void run_adamw(wgt_backend *be, op_call *c) {
    wgt_adamw_params hp = {(float)c->p[0], (float)c->p[1], (float)c->p[2], (float)c->p[3], (float)c->p[4], (int)c->p[5]};
    be->adamw(be, c->v[0], c->v[1], c->v[2], c->v[3], c->v[4], c->a[0].n, hp);
}

const op_desc op_table_gpt[] = {
    {"embedding_forward", "out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]", 4,
     {{"tokens", OP_INT, OP_IN, 0}, {"wte", OP_F32, OP_IN, 0}, {"wpe", OP_F32, OP_IN, 0}, {"out", OP_F32, OP_OUT, 0}}, 3,
     {{"B", NAN, 1}, {"T", NAN, 1}, {"C", NAN, 1}}, plan_emb_fwd, run_emb_fwd},
    {"embedding_backward", "dwte[tokens[p],:] += dout[p,:]; dwpe[t,:] += sum over b of dout[b,t,:]", 4,
     {{"dwte", OP_F32, OP_INOUT, 1}, {"dwpe", OP_F32, OP_INOUT, 1}, {"dout", OP_F32, OP_IN, 0}, {"tokens", OP_INT, OP_IN, 0}},
     4, {{"B", NAN, 1}, {"T", NAN, 1}, {"C", NAN, 1}, {"V", NAN, 1}}, plan_emb_bwd, run_emb_bwd},
    {"layernorm_forward", "out = (inp - mean) * rstd * weight + bias per row (eps 1e-5); saves mean, rstd", 6,
     {{"inp", OP_F32, OP_IN, 0}, {"weight", OP_F32, OP_IN, 0}, {"bias", OP_F32, OP_IN, 0}, {"out", OP_F32, OP_OUT, 0},
      {"mean", OP_F32, OP_OUT, 0}, {"rstd", OP_F32, OP_OUT, 0}}, 2, {{"N", NAN, 1}, {"C", NAN, 1}}, plan_ln_fwd, run_ln_fwd},
    {"layernorm_backward", "dinp += ..., dweight += ..., dbias += ... (in+out bindings start at 0)", 8,
     {{"dinp", OP_F32, OP_INOUT, 1}, {"dweight", OP_F32, OP_INOUT, 1}, {"dbias", OP_F32, OP_INOUT, 1},
      {"dout", OP_F32, OP_IN, 0}, {"inp", OP_F32, OP_IN, 0}, {"weight", OP_F32, OP_IN, 0}, {"mean", OP_F32, OP_IN, 0},
      {"rstd", OP_F32, OP_IN, 0}}, 2, {{"N", NAN, 1}, {"C", NAN, 1}}, plan_ln_bwd, run_ln_bwd},
    {"matmul", "out[N,OC] = inp[N,C] . weight[OC,C]^T + bias[OC] (bias optional)", 4,
     {{"inp", OP_F32, OP_IN, 0}, {"weight", OP_F32, OP_IN, 0}, {"bias", OP_F32, OP_IN, 1}, {"out", OP_F32, OP_OUT, 0}}, 3,
     {{"N", NAN, 1}, {"C", NAN, 1}, {"OC", NAN, 1}}, plan_mm, run_mm},
    {"matmul_t", "dinp[N,C] = dout[N,OC] . weight[OC,C]", 3,
     {{"dout", OP_F32, OP_IN, 0}, {"weight", OP_F32, OP_IN, 0}, {"dinp", OP_F32, OP_OUT, 0}}, 3,
     {{"N", NAN, 1}, {"C", NAN, 1}, {"OC", NAN, 1}}, plan_mm_t, run_mm_t},
    {"matmul_at", "dweight[OC,C] += dout[N,OC]^T . inp[N,C]; dbias[OC] += column sums of dout (unless with_dbias=0)", 4,
     {{"dweight", OP_F32, OP_INOUT, 1}, {"dbias", OP_F32, OP_INOUT, 1}, {"dout", OP_F32, OP_IN, 0}, {"inp", OP_F32, OP_IN, 0}},
     4, {{"with_dbias", 1, 1}, {"N", NAN, 1}, {"C", NAN, 1}, {"OC", NAN, 1}}, plan_mm_at, run_mm_at},
    {"residual_forward", "out = a + b", 3, {{"a", OP_F32, OP_IN, 0}, {"b", OP_F32, OP_IN, 0}, {"out", OP_F32, OP_OUT, 0}}, 0,
     {{0}}, plan_res, run_res},
    {"add_inplace", "out += a", 2, {{"out", OP_F32, OP_INOUT, 0}, {"a", OP_F32, OP_IN, 0}}, 0, {{0}}, plan_add, run_add},
    {"grad_norm_sq", "norm_sq[0] = (accumulate ? norm_sq[0] : 0) + sum of g^2", 2,
     {{"g", OP_F32, OP_IN, 0}, {"norm_sq", OP_F32, OP_INOUT, 1}}, 1, {{"accumulate", 0, 1}}, plan_norm, run_norm},
    {"grad_clip_scale", "scale[0] = min(1, max_norm / sqrt(norm_sq[0])) (1 if max_norm <= 0, 0 if the norm is not finite); scale[1] = norm", 2,
     {{"norm_sq", OP_F32, OP_IN, 0}, {"scale", OP_F32, OP_OUT, 0}}, 1, {{"max_norm", 1.0, 0}}, plan_clip, run_clip},
    {"adamw", "AdamW step on params (m, v start at 0; grads times scale[0], default 1; scale 0 skips the update)", 5,
     {{"params", OP_F32, OP_INOUT, 0}, {"m", OP_F32, OP_INOUT, 1}, {"v", OP_F32, OP_INOUT, 1}, {"grads", OP_F32, OP_IN, 0},
      {"scale", OP_F32, OP_IN, 1}}, 6,
     {{"lr", 1e-3, 0}, {"beta1", 0.9, 0}, {"beta2", 0.999, 0}, {"eps", 1e-8, 0}, {"weight_decay", 0.0, 0}, {"t", 1, 1}},
     plan_adamw, run_adamw},
    {NULL, NULL, 0, {{0}}, 0, {{0}}, NULL, NULL},
};
