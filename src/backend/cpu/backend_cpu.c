// backend_cpu.c — the CPU backend: the backend.h vtable over host memory. A buffer is a plain
// 64-byte-aligned float array, a view is a pointer into it, and every op runs its cpu_ reference
// at once (so sync has nothing to wait for). Each forwarder checks that the views it is given
// hold the elements the op will touch: a layout bug in the model then stops with a clear
// message here instead of corrupting a neighbouring tensor.
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/ops.h"

struct wgt_buf {
    float *data;
    size_t n;  // elements
};

// Element pointer of view v after checking that `need` elements from it lie inside the buffer.
static float *at(wgt_view v, size_t need) {
    WGT_ASSERT(v.buf != NULL, "op given a view without a buffer");
    WGT_ASSERT(v.off <= v.buf->n && need <= v.buf->n - v.off, "view runs past the end of its buffer");
    return v.buf->data + v.off;
}
static const float *cat(wgt_view v, size_t need) { return at(v, need); }
static const uint32_t *cat_u32(wgt_view v, size_t need) { return (const uint32_t *)at(v, need); }
static const int32_t *cat_i32(wgt_view v, size_t need) { return (const int32_t *)at(v, need); }
// Optional tensors (bias) arrive as a view with buf == NULL.
static float *at_opt(wgt_view v, size_t need) { return v.buf ? at(v, need) : NULL; }

// ---- memory ----

static wgt_status buf_alloc(wgt_backend *be, wgt_buf **out, size_t n_elems, const char *label) {
    *out = NULL;
    if (n_elems > (SIZE_MAX - 64) / sizeof(float))
        return wgt_fail(WGT_ERR_CONFIG, "buffer '%s' of %zu elements is too large", label ? label : "", n_elems);
    size_t bytes = (n_elems * sizeof(float) + 63) / 64 * 64;  // aligned_alloc wants a multiple
    if (bytes == 0) bytes = 64;
    float *data = aligned_alloc(64, bytes);
    if (!data)
        return wgt_fail(WGT_ERR_MEMORY, "cannot allocate %zu bytes of host memory for '%s'",
                        bytes, label ? label : "");
    memset(data, 0, bytes);
    wgt_buf *b = wgt_malloc(sizeof *b);
    b->data = data;
    b->n = n_elems;
    *out = b;
    return WGT_OK;
}

static void buf_free(wgt_backend *be, wgt_buf *buf) {
    if (!buf) return;
    free(buf->data);
    free(buf);
}

static wgt_status upload(wgt_backend *be, wgt_view dst, const void *src, size_t n) {
    if (n) memcpy(at(dst, n), src, n * sizeof(float));
    return WGT_OK;
}

static wgt_status download(wgt_backend *be, void *dst, wgt_view src, size_t n) {
    if (n) memcpy(dst, at(src, n), n * sizeof(float));
    return WGT_OK;
}

static void fill_zero(wgt_backend *be, wgt_view dst, size_t n) {
    if (n) memset(at(dst, n), 0, n * sizeof(float));
}

// memmove: source and destination may overlap when both are views of one buffer.
static void copy_elems(wgt_backend *be, wgt_view dst, wgt_view src, size_t n) {
    if (n) memmove(at(dst, n), at(src, n), n * sizeof(float));
}

static wgt_status sync_noop(wgt_backend *be) { return WGT_OK; }

static void backend_free(wgt_backend *be) { free(be); }

// ---- ops: bounds checks, then the reference ----

static void gelu_inplace(wgt_backend *be, wgt_view x, size_t n) {
    cpu_gelu_inplace(at(x, n), n);
}

static void swiglu_combine(wgt_backend *be, wgt_view hidden, wgt_view gate, wgt_view up, size_t n) {
    cpu_swiglu_combine(at(hidden, n), cat(gate, n), cat(up, n), n);
}

static void cross_entropy(wgt_backend *be, wgt_view logits, wgt_view losses, wgt_view targets,
                          uint32_t R, uint32_t V, float alpha, float beta, float inv_norm) {
    cpu_cross_entropy(at(logits, (size_t)R * V), at(losses, R), cat_u32(targets, R), R, V,
                      alpha, beta, inv_norm);
}

static void sum_losses(wgt_backend *be, wgt_view out, wgt_view losses, uint32_t n) {
    cpu_sum_losses(at(out, 1), cat(losses, n), n);
}

static void ffn_gelu_backward(wgt_backend *be, wgt_view grad_pre, wgt_view grad_hidden,
                              wgt_view pre_gelu, size_t n) {
    cpu_ffn_gelu_backward(at(grad_pre, n), cat(grad_hidden, n), cat(pre_gelu, n), n);
}

static void ffn_swiglu_backward(wgt_backend *be, wgt_view grad_gate, wgt_view grad_up,
                                wgt_view grad_hidden, wgt_view gate, wgt_view up, size_t n) {
    cpu_ffn_swiglu_backward(at(grad_gate, n), at(grad_up, n), cat(grad_hidden, n), cat(gate, n),
                            cat(up, n), n);
}

// The forward has no V, so wte is checked against the largest token actually present.
static void embedding_forward(wgt_backend *be, wgt_view out, wgt_view tokens, wgt_view wte,
                              wgt_view wpe, uint32_t B, uint32_t T, uint32_t C) {
    size_t BT = (size_t)B * T;
    const int32_t *tok = cat_i32(tokens, BT);
    int32_t mx = -1;
    for (size_t i = 0; i < BT; i++) mx = tok[i] > mx ? tok[i] : mx;
    cpu_embedding_forward(at(out, BT * C), tok, cat(wte, (size_t)(mx + 1) * C),
                          cat(wpe, (size_t)T * C), B, T, C);
}

static void embedding_backward(wgt_backend *be, wgt_view dwte, wgt_view dwpe, wgt_view dout,
                               wgt_view tokens, uint32_t B, uint32_t T, uint32_t C, uint32_t V) {
    size_t BT = (size_t)B * T;
    cpu_embedding_backward(at(dwte, (size_t)V * C), at(dwpe, (size_t)T * C), cat(dout, BT * C),
                           cat_i32(tokens, BT), B, T, C, V);
}

static void layernorm_forward(wgt_backend *be, wgt_view out, wgt_view mean, wgt_view rstd,
                              wgt_view inp, wgt_view weight, wgt_view bias, uint32_t N, uint32_t C) {
    size_t NC = (size_t)N * C;
    cpu_layernorm_forward(at(out, NC), at(mean, N), at(rstd, N), cat(inp, NC), cat(weight, C),
                          cat(bias, C), N, C);
}

static void layernorm_backward(wgt_backend *be, wgt_view dinp, wgt_view dweight, wgt_view dbias,
                               wgt_view dout, wgt_view inp, wgt_view weight, wgt_view mean,
                               wgt_view rstd, uint32_t N, uint32_t C) {
    size_t NC = (size_t)N * C;
    cpu_layernorm_backward(at(dinp, NC), at(dweight, C), at(dbias, C), cat(dout, NC),
                           cat(inp, NC), cat(weight, C), cat(mean, N), cat(rstd, N), N, C);
}

static void matmul(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view bias,
                   uint32_t N, uint32_t C, uint32_t OC) {
    cpu_matmul(at(out, (size_t)N * OC), cat(inp, (size_t)N * C), cat(weight, (size_t)OC * C),
               at_opt(bias, OC), N, C, OC);
}

static void matmul_t(wgt_backend *be, wgt_view dinp, wgt_view dout, wgt_view weight,
                     uint32_t N, uint32_t C, uint32_t OC) {
    cpu_matmul_t(at(dinp, (size_t)N * C), cat(dout, (size_t)N * OC), cat(weight, (size_t)OC * C),
                 N, C, OC);
}

static void matmul_at(wgt_backend *be, wgt_view dweight, wgt_view dbias, wgt_view dout,
                      wgt_view inp, uint32_t N, uint32_t C, uint32_t OC) {
    cpu_matmul_at(at(dweight, (size_t)OC * C), at_opt(dbias, OC), cat(dout, (size_t)N * OC),
                  cat(inp, (size_t)N * C), N, C, OC);
}

static void attention_forward(wgt_backend *be, wgt_view out, wgt_view lse, wgt_view qkv,
                              uint32_t B, uint32_t T, uint32_t C, uint32_t NH) {
    size_t BT = (size_t)B * T;
    cpu_attention_forward(at(out, BT * C), at(lse, BT * NH), cat(qkv, BT * 3 * C), B, T, C, NH);
}

static void attention_backward(wgt_backend *be, wgt_view dqkv, wgt_view dout, wgt_view qkv,
                               wgt_view out, wgt_view lse, uint32_t B, uint32_t T, uint32_t C,
                               uint32_t NH) {
    size_t BT = (size_t)B * T;
    cpu_attention_backward(at(dqkv, BT * 3 * C), cat(dout, BT * C), cat(qkv, BT * 3 * C),
                           cat(out, BT * C), cat(lse, BT * NH), B, T, C, NH);
}

static void residual_forward(wgt_backend *be, wgt_view out, wgt_view a, wgt_view b, size_t n) {
    cpu_residual_forward(at(out, n), cat(a, n), cat(b, n), n);
}

static void add_inplace(wgt_backend *be, wgt_view out, wgt_view a, size_t n) {
    cpu_add_inplace(at(out, n), cat(a, n), n);
}

static void grad_norm_sq(wgt_backend *be, wgt_view norm_sq, wgt_view g, size_t n, int accumulate) {
    cpu_grad_norm_sq(at(norm_sq, 1), cat(g, n), n, accumulate);
}

static void grad_clip_scale(wgt_backend *be, wgt_view scale, wgt_view norm_sq, float max_norm) {
    cpu_grad_clip_scale(at(scale, 2), cat(norm_sq, 1), max_norm);
}

static void adamw(wgt_backend *be, wgt_view params, wgt_view m, wgt_view v, wgt_view grads,
                  wgt_view scale, size_t n, wgt_adamw_params hp) {
    cpu_adamw(at(params, n), at(m, n), at(v, n), cat(grads, n), cat(scale, 1), n, hp);
}

wgt_status backend_cpu_init(wgt_backend **out) {
    wgt_backend *be = wgt_calloc(1, sizeof *be);
    be->name = "cpu";
    be->impl = NULL;
    be->buf_alloc = buf_alloc;
    be->buf_free = buf_free;
    be->upload = upload;
    be->download = download;
    be->fill_zero = fill_zero;
    be->copy = copy_elems;
    be->max_binding_elems = SIZE_MAX;
    be->sync = sync_noop;
    be->free = backend_free;
    be->gelu_inplace = gelu_inplace;
    be->swiglu_combine = swiglu_combine;
    be->cross_entropy = cross_entropy;
    be->sum_losses = sum_losses;
    be->ffn_gelu_backward = ffn_gelu_backward;
    be->ffn_swiglu_backward = ffn_swiglu_backward;
    be->embedding_forward = embedding_forward;
    be->embedding_backward = embedding_backward;
    be->layernorm_forward = layernorm_forward;
    be->layernorm_backward = layernorm_backward;
    be->matmul = matmul;
    be->matmul_t = matmul_t;
    be->matmul_at = matmul_at;
    be->attention_forward = attention_forward;
    be->attention_backward = attention_backward;
    be->residual_forward = residual_forward;
    be->add_inplace = add_inplace;
    be->grad_norm_sq = grad_norm_sq;
    be->grad_clip_scale = grad_clip_scale;
    be->adamw = adamw;
    *out = be;
    return WGT_OK;
}
