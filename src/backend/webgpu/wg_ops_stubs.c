// wg_ops_stubs.c — placeholders for kernels not yet written: abort with a clear message.
// Each real wrapper in wg_ops_<family>.c overrides its weak placeholder here.
#include "backend/webgpu/wg_ops.h"

__attribute__((weak)) void wg_gelu_inplace(wgt_backend *be, wgt_view x, size_t n) {
    WGT_ASSERT(0, "gelu_inplace is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_swiglu_combine(wgt_backend *be, wgt_view hidden, wgt_view gate, wgt_view up, size_t n) {
    WGT_ASSERT(0, "swiglu_combine is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_cross_entropy(wgt_backend *be, wgt_view logits, wgt_view losses, wgt_view targets, uint32_t R, uint32_t V,
                      float alpha, float beta, float inv_norm) {
    WGT_ASSERT(0, "cross_entropy is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_sum_losses(wgt_backend *be, wgt_view out, wgt_view losses, uint32_t n) {
    WGT_ASSERT(0, "sum_losses is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_ffn_gelu_backward(wgt_backend *be, wgt_view grad_pre, wgt_view grad_hidden, wgt_view pre_gelu, size_t n) {
    WGT_ASSERT(0, "ffn_gelu_backward is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_ffn_swiglu_backward(wgt_backend *be, wgt_view grad_gate, wgt_view grad_up, wgt_view grad_hidden, wgt_view gate,
                            wgt_view up, size_t n) {
    WGT_ASSERT(0, "ffn_swiglu_backward is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_embedding_forward(wgt_backend *be, wgt_view out, wgt_view tokens, wgt_view wte, wgt_view wpe, uint32_t B,
                          uint32_t T, uint32_t C) {
    WGT_ASSERT(0, "embedding_forward is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_embedding_backward(wgt_backend *be, wgt_view dwte, wgt_view dwpe, wgt_view dout, wgt_view tokens, uint32_t B,
                           uint32_t T, uint32_t C, uint32_t V) {
    WGT_ASSERT(0, "embedding_backward is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_layernorm_forward(wgt_backend *be, wgt_view out, wgt_view mean, wgt_view rstd, wgt_view inp, wgt_view weight,
                          wgt_view bias, uint32_t N, uint32_t C) {
    WGT_ASSERT(0, "layernorm_forward is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_layernorm_backward(wgt_backend *be, wgt_view dinp, wgt_view dweight, wgt_view dbias, wgt_view dout,
                           wgt_view inp, wgt_view weight, wgt_view mean, wgt_view rstd, uint32_t N, uint32_t C) {
    WGT_ASSERT(0, "layernorm_backward is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_matmul(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view bias, uint32_t N, uint32_t C,
               uint32_t OC) {
    WGT_ASSERT(0, "matmul is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_matmul_t(wgt_backend *be, wgt_view dinp, wgt_view dout, wgt_view weight, uint32_t N, uint32_t C, uint32_t OC) {
    WGT_ASSERT(0, "matmul_t is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_matmul_at(wgt_backend *be, wgt_view dweight, wgt_view dbias, wgt_view dout, wgt_view inp, uint32_t N,
                  uint32_t C, uint32_t OC) {
    WGT_ASSERT(0, "matmul_at is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_attention_forward(wgt_backend *be, wgt_view out, wgt_view lse, wgt_view qkv, uint32_t B, uint32_t T,
                          uint32_t C, uint32_t NH) {
    WGT_ASSERT(0, "attention_forward is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_attention_backward(wgt_backend *be, wgt_view dqkv, wgt_view dout, wgt_view qkv, wgt_view out, wgt_view lse,
                           uint32_t B, uint32_t T, uint32_t C, uint32_t NH) {
    WGT_ASSERT(0, "attention_backward is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_residual_forward(wgt_backend *be, wgt_view out, wgt_view a, wgt_view b, size_t n) {
    WGT_ASSERT(0, "residual_forward is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_add_inplace(wgt_backend *be, wgt_view out, wgt_view a, size_t n) {
    WGT_ASSERT(0, "add_inplace is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_grad_norm_sq(wgt_backend *be, wgt_view norm_sq, wgt_view g, size_t n, int accumulate) {
    WGT_ASSERT(0, "grad_norm_sq is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_grad_clip_scale(wgt_backend *be, wgt_view scale, wgt_view norm_sq, float max_norm) {
    WGT_ASSERT(0, "grad_clip_scale is not implemented on the webgpu backend yet");
}

__attribute__((weak)) void wg_adamw(wgt_backend *be, wgt_view params, wgt_view m, wgt_view v, wgt_view grads, wgt_view scale, size_t n,
              wgt_adamw_params hp) {
    WGT_ASSERT(0, "adamw is not implemented on the webgpu backend yet");
}
