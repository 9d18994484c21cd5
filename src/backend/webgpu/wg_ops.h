// wg_ops.h — the WebGPU implementation of each backend op (one wrapper per kernel). Each is
// defined in the wg_ops_<family>.c file next to the WGSL it dispatches; backend_webgpu.c puts
// them into the wgt_backend table. The arguments are those of backend.h.
#ifndef WGT_WG_OPS_H
#define WGT_WG_OPS_H
#include "backend/backend.h"
#include "backend/webgpu/wg_runtime.h"

// the wg_ctx behind a webgpu backend
static inline wg_ctx *wg_of(wgt_backend *be) { return (wg_ctx *)be->impl; }
static inline wg_bind wg_b(wgt_view v, size_t n) { wg_bind b = {v, n}; return b; }
static inline uint64_t wg_groups(uint64_t n, uint64_t per) { return (n + per - 1) / per; }

// Element type of the element-wise kernels (06, 09): 4 floats per thread when the length and
// every view offset are multiples of 4 (16-byte aligned vec4 bindings), else 1. Returns the lanes
// and sets *defines to the WGSL aliases the kernel source expects.
static inline int wg_ew_lanes(size_t n, const wgt_view *views, int nv, const char **defines) {
    int ok = n % 4 == 0;
    for (int i = 0; i < nv; i++) ok = ok && views[i].off % 4 == 0;
    *defines = ok ? "alias EW = vec4<f32>;\nalias EU = vec4<u32>;\n" : "alias EW = f32;\nalias EU = u32;\n";
    return ok ? 4 : 1;
}

void wg_gelu_inplace(wgt_backend *be, wgt_view x, size_t n);
void wg_swiglu_combine(wgt_backend *be, wgt_view hidden, wgt_view gate, wgt_view up, size_t n);
void wg_cross_entropy(wgt_backend *be, wgt_view logits, wgt_view losses, wgt_view targets, uint32_t R, uint32_t V,
                      float alpha, float beta, float inv_norm);
void wg_sum_losses(wgt_backend *be, wgt_view out, wgt_view losses, uint32_t n);
void wg_ffn_gelu_backward(wgt_backend *be, wgt_view grad_pre, wgt_view grad_hidden, wgt_view pre_gelu, size_t n);
void wg_ffn_swiglu_backward(wgt_backend *be, wgt_view grad_gate, wgt_view grad_up, wgt_view grad_hidden, wgt_view gate,
                            wgt_view up, size_t n);
void wg_embedding_forward(wgt_backend *be, wgt_view out, wgt_view tokens, wgt_view wte, wgt_view wpe, uint32_t B,
                          uint32_t T, uint32_t C);
void wg_embedding_backward(wgt_backend *be, wgt_view dwte, wgt_view dwpe, wgt_view dout, wgt_view tokens, uint32_t B,
                           uint32_t T, uint32_t C, uint32_t V);
void wg_layernorm_forward(wgt_backend *be, wgt_view out, wgt_view mean, wgt_view rstd, wgt_view inp, wgt_view weight,
                          wgt_view bias, uint32_t N, uint32_t C);
void wg_layernorm_backward(wgt_backend *be, wgt_view dinp, wgt_view dweight, wgt_view dbias, wgt_view dout,
                           wgt_view inp, wgt_view weight, wgt_view mean, wgt_view rstd, uint32_t N, uint32_t C);
void wg_matmul(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view bias, uint32_t N, uint32_t C,
               uint32_t OC);
void wg_matmul_t(wgt_backend *be, wgt_view dinp, wgt_view dout, wgt_view weight, uint32_t N, uint32_t C, uint32_t OC);
void wg_matmul_at(wgt_backend *be, wgt_view dweight, wgt_view dbias, wgt_view dout, wgt_view inp, uint32_t N,
                  uint32_t C, uint32_t OC);
void wg_attention_forward(wgt_backend *be, wgt_view out, wgt_view lse, wgt_view qkv, uint32_t B, uint32_t T,
                          uint32_t C, uint32_t NH);
void wg_attention_backward(wgt_backend *be, wgt_view dqkv, wgt_view dout, wgt_view qkv, wgt_view out, wgt_view lse,
                           uint32_t B, uint32_t T, uint32_t C, uint32_t NH);
// attention_backward with an explicit variant (0 auto, 1 streaming, 2 split-dKdV, 3 split-short);
// returns the variant that ran. The auto rule alone is wg_attention_backward_auto_variant.
int wg_attention_backward_with(wgt_backend *be, int variant, wgt_view dqkv, wgt_view dout, wgt_view qkv, wgt_view out,
                               wgt_view lse, uint32_t B, uint32_t T, uint32_t C, uint32_t NH);
int wg_attention_backward_auto_variant(wgt_backend *be, uint32_t B, uint32_t T, uint32_t C, uint32_t NH);
void wg_residual_forward(wgt_backend *be, wgt_view out, wgt_view a, wgt_view b, size_t n);
void wg_add_inplace(wgt_backend *be, wgt_view out, wgt_view a, size_t n);
void wg_grad_norm_sq(wgt_backend *be, wgt_view norm_sq, wgt_view g, size_t n, int accumulate);
void wg_grad_clip_scale(wgt_backend *be, wgt_view scale, wgt_view norm_sq, float max_norm);
void wg_adamw(wgt_backend *be, wgt_view params, wgt_view m, wgt_view v, wgt_view grads, wgt_view scale, size_t n,
              wgt_adamw_params hp);
#endif
