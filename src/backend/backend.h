// backend.h — the one interface both backends implement (a struct of function pointers).
// The model code (src/model/) calls only these, so the C reference (cpu) and WebGPU run the
// very same schedule. Ops only enqueue work: on WebGPU they record dispatches into the
// current step's command encoder; backend->sync() submits and waits.
//
// Conventions for every op:
//   - argument order: outputs first, then inputs, then sizes / scalars (as the C references);
//   - tensors are wgt_view: a buffer plus an offset in 4-byte elements (f32, i32 or u32);
//     offsets used by the model are multiples of WGT_VIEW_ALIGN elements (256 bytes), which is
//     what WebGPU requires of storage binding offsets;
//   - parameter gradients (dweight, dbias, dwte, dwpe, ...) ACCUMULATE (+=) so that gradient
//     accumulation over micro-batches is free; activation gradients overwrite unless noted.
#ifndef WGT_BACKEND_H
#define WGT_BACKEND_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "core/error.h"

#define WGT_VIEW_ALIGN 64  // elements (= 256 bytes)

typedef struct wgt_buf wgt_buf;  // opaque, owned by the backend
typedef struct {
    wgt_buf *buf;
    size_t off;  // in 4-byte elements
} wgt_view;

static inline wgt_view wgt_view_at(wgt_view v, size_t elems) { v.off += elems; return v; }

typedef struct wgt_backend wgt_backend;

// AdamW hyper-parameters of one update (bias corrections computed from t by the op).
typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    int t;  // 1-based step number
} wgt_adamw_params;

struct wgt_backend {
    const char *name;  // "cpu" or "webgpu"
    void *impl;

    // ---- memory ----
    // Allocates n 4-byte elements, zero-filled. Fails with WGT_ERR_MEMORY/WGT_ERR_CONFIG.
    wgt_status (*buf_alloc)(wgt_backend *be, wgt_buf **out, size_t n_elems, const char *label);
    void (*buf_free)(wgt_backend *be, wgt_buf *buf);
    // Host <-> device copies of n elements at view v. download waits for queued work.
    wgt_status (*upload)(wgt_backend *be, wgt_view dst, const void *src, size_t n_elems);
    wgt_status (*download)(wgt_backend *be, void *dst, wgt_view src, size_t n_elems);
    void (*fill_zero)(wgt_backend *be, wgt_view dst, size_t n_elems);
    void (*copy)(wgt_backend *be, wgt_view dst, wgt_view src, size_t n_elems);
    // Largest number of elements one op may see in a single binding (splitting is done by the
    // ops that can exceed it, e.g. the lm_head matmul and the loss).
    size_t max_binding_elems;

    // ---- execution ----
    // Submits everything recorded so far and waits; reports any device error since last sync.
    wgt_status (*sync)(wgt_backend *be);
    void (*free)(wgt_backend *be);

    // ---- seed kernels (SPEC §2) ----
    void (*gelu_inplace)(wgt_backend *be, wgt_view x, size_t n);
    void (*swiglu_combine)(wgt_backend *be, wgt_view hidden, wgt_view gate, wgt_view up, size_t n);
    // logits[R,V] are replaced by dlogits; targets u32 (>= V: ignored row).
    void (*cross_entropy)(wgt_backend *be, wgt_view logits, wgt_view losses, wgt_view targets,
                          uint32_t R, uint32_t V, float alpha, float beta, float inv_norm);
    void (*sum_losses)(wgt_backend *be, wgt_view out, wgt_view losses, uint32_t n);
    void (*ffn_gelu_backward)(wgt_backend *be, wgt_view grad_pre, wgt_view grad_hidden,
                              wgt_view pre_gelu, size_t n);
    void (*ffn_swiglu_backward)(wgt_backend *be, wgt_view grad_gate, wgt_view grad_up,
                                wgt_view grad_hidden, wgt_view gate, wgt_view up, size_t n);

    // ---- GPT-2 ops (SPEC §3); shapes in B, T, C, NH, V, OC ----
    // out[BT,C] = wte[tokens] + wpe[t]; tokens i32 [B,T]
    void (*embedding_forward)(wgt_backend *be, wgt_view out, wgt_view tokens, wgt_view wte,
                              wgt_view wpe, uint32_t B, uint32_t T, uint32_t C);
    // dwte[V,C] += scatter(dout); dwpe[T,C] += sum over b
    void (*embedding_backward)(wgt_backend *be, wgt_view dwte, wgt_view dwpe, wgt_view dout,
                               wgt_view tokens, uint32_t B, uint32_t T, uint32_t C, uint32_t V);
    // out[N,C], mean[N], rstd[N]
    void (*layernorm_forward)(wgt_backend *be, wgt_view out, wgt_view mean, wgt_view rstd,
                              wgt_view inp, wgt_view weight, wgt_view bias, uint32_t N, uint32_t C);
    // dinp[N,C] += ..., dweight[C] += ..., dbias[C] += ...
    void (*layernorm_backward)(wgt_backend *be, wgt_view dinp, wgt_view dweight, wgt_view dbias,
                               wgt_view dout, wgt_view inp, wgt_view weight, wgt_view mean,
                               wgt_view rstd, uint32_t N, uint32_t C);
    // out[N,OC] = inp[N,C] . weight[OC,C]^T + bias[OC] (bias.buf may be NULL)
    void (*matmul)(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view bias,
                   uint32_t N, uint32_t C, uint32_t OC);
    // dinp[N,C] = dout[N,OC] . weight[OC,C]   (overwrites)
    void (*matmul_t)(wgt_backend *be, wgt_view dinp, wgt_view dout, wgt_view weight,
                     uint32_t N, uint32_t C, uint32_t OC);
    // dweight[OC,C] += dout[N,OC]^T . inp[N,C]; dbias[OC] += sum_n dout (dbias.buf may be NULL)
    void (*matmul_at)(wgt_backend *be, wgt_view dweight, wgt_view dbias, wgt_view dout,
                      wgt_view inp, uint32_t N, uint32_t C, uint32_t OC);
    // qkv[B,T,3C] (q | k | v, heads contiguous inside each); out[B,T,C]; lse[B,NH,T]
    void (*attention_forward)(wgt_backend *be, wgt_view out, wgt_view lse, wgt_view qkv,
                              uint32_t B, uint32_t T, uint32_t C, uint32_t NH);
    // dqkv[B,T,3C] (overwrites)
    void (*attention_backward)(wgt_backend *be, wgt_view dqkv, wgt_view dout, wgt_view qkv,
                               wgt_view out, wgt_view lse, uint32_t B, uint32_t T, uint32_t C,
                               uint32_t NH);
    // out[n] = a[n] + b[n]  (out may alias a)
    void (*residual_forward)(wgt_backend *be, wgt_view out, wgt_view a, wgt_view b, size_t n);
    // out[n] += a[n]  (gradient accumulation of a residual branch)
    void (*add_inplace)(wgt_backend *be, wgt_view out, wgt_view a, size_t n);
    // norm_sq[0] (+)= sum g^2 over the listed tensors is done per tensor by accumulate=1.
    void (*grad_norm_sq)(wgt_backend *be, wgt_view norm_sq, wgt_view g, size_t n, int accumulate);
    // scale[0] = min(1, max_norm / sqrt(norm_sq[0])) (1 if max_norm <= 0), or 0 when the norm is
    // NaN or infinite; scale[1] = norm
    void (*grad_clip_scale)(wgt_backend *be, wgt_view scale, wgt_view norm_sq, float max_norm);
    // AdamW on n params; the gradient is multiplied by scale[0] first (clipping, accumulation);
    // scale[0] == 0 skips the update (params, m and v unchanged)
    void (*adamw)(wgt_backend *be, wgt_view params, wgt_view m, wgt_view v, wgt_view grads,
                  wgt_view scale, size_t n, wgt_adamw_params hp);

    // ---- optional entries: NULL where a backend does not offer them (check before calling) ----
    // Tools (wgtrain bench, info lines) use these instead of reaching into `impl`.
    // The device's name for reports ("NVIDIA H200", "llvmpipe (LLVM ...)").
    const char *(*device_name)(wgt_backend *be);
    // Per-kernel GPU time, on a backend opened with profiling (backend_webgpu_init_ex, profile=1):
    // profile_reset forgets what was timed so far; profile_report waits for queued work, writes a
    // table of kernel, calls, total ms and share to f (when not NULL) and returns the total GPU ms.
    void (*profile_reset)(wgt_backend *be);
    double (*profile_report)(wgt_backend *be, FILE *f);
};

wgt_status backend_cpu_init(wgt_backend **out);
// adapter: NULL/"" = best (a real GPU first, else lavapipe), or an index / name substring.
wgt_status backend_webgpu_init(wgt_backend **out, const char *adapter);
// profile != 0: time every kernel with timestamp queries (the profile_* entries)
wgt_status backend_webgpu_init_ex(wgt_backend **out, const char *adapter, int profile);
#endif
