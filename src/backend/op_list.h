// op_list.h — the one list of ops. Every op is described here once: its name, a one-line
// summary, and its fields in call order — bindings first (outputs and in-outs, then inputs),
// then scalars. Everything that used to repeat an op's signature is generated from this list
// (docs/adding-an-op.md walks through it):
//   - the backend interface's entries              backend.h         struct wgt_backend
//   - the C reference prototypes                   cpu/ops.h         cpu_<op>(...)
//   - the CPU backend's checked forwarders         cpu/backend_cpu.c
//   - the WebGPU wrapper prototypes and table      webgpu/wg_ops.h, webgpu/backend_webgpu.c
//   - the run-time descriptors (names, roles, shapes, scalar ranges) and a generic call, used
//     by `wgtrain op` and the table-driven test   op_desc.h
//
// Why X-macros and not only a table of descriptors: the model calls typed C functions
// (be->matmul(be, out, inp, weight, bias, N, C, OC)) so that the compiler checks every
// argument, and a run-time table cannot declare typed prototypes. Each op's field list is a
// macro taking two macro names, BIND and SCAL; every consumer passes its own pair.
//
//   BIND(name, role, type, shape)
//     role   OUT        written (its old contents are not read)
//            INOUT      read and written: in-place ops, accumulating gradients (+=)
//            IN         read
//            IN_OPT     read, may be absent (a view without a buffer), e.g. no bias
//            INOUT_OPT  accumulated, may be absent, e.g. no dbias
//     type   F32 | I32 | U32, 4-byte elements; F16: IEEE half precision stored as pairs in
//            4-byte words (element 2i in the low half of word i), so a view of `count` halves
//            holds ceil(count/2) elements (backend/half.h, docs/numerics.md#mixed-precision)
//     shape  dimensions separated by commas, each a sum of products of scalar names and
//            integers ("N,OC", "B,T,3*C", "B,T,NH*HS+2*NKV*HS"); ">=T" means at least T (the op
//            reads the first T rows of a longer tensor). A view must hold at least the product
//            of its shape.
//   SCAL(name, type, default, lo, hi)
//     type     U32 | SIZE (size_t) | F32
//     default  a number, or WGT_REQ when there is none (sizes, found from the shapes by
//              `wgtrain op`, and values a caller must give)
//     lo, hi   the accepted range; `wgtrain op` refuses values outside it
#ifndef WGT_OP_LIST_H
#define WGT_OP_LIST_H
#include <math.h>

#define WGT_REQ NAN
#define WGT_U32_MAX 4294967295.0
#define WGT_SIZE_MAX 9007199254740992.0  // 2^53: every size is exact as a double

#define WGT_OPS(X)                                                                               \
    X(gelu_inplace, "x = gelu(x), tanh approximation")                                         \
    X(gelu_forward, "out = gelu(inp), tanh approximation (out may be inp itself)")             \
    X(swiglu_combine, "hidden = silu(gate) * up")                                              \
    X(geglu_combine, "hidden = gelu(gate) * up, tanh approximation (GeGLU)")                   \
    X(cross_entropy, "row softmax cross-entropy, label smoothing alpha, z-loss beta; dlogits in place") \
    X(sum_losses, "out[0] = (accumulate ? out[0] : 0) + sum of losses")                        \
    X(ffn_gelu_backward, "grad_pre = grad_hidden * gelu'(pre_gelu)")                           \
    X(ffn_swiglu_backward, "grad_gate = g*up*silu'(gate), grad_up = g*silu(gate)")             \
    X(ffn_geglu_backward, "grad_gate = g*up*gelu'(gate), grad_up = g*gelu(gate)")              \
    X(embedding_forward, "out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]")                         \
    X(embedding_backward, "dwte[tokens[p],:] += dout[p,:]; dwpe[t,:] += sum over b of dout[b,t,:]") \
    X(layernorm_forward, "out = (inp - mean) * rstd * weight + bias per row (eps 1e-5); saves mean, rstd") \
    X(layernorm_backward, "dinp += ..., dweight += ..., dbias += ...")                         \
    X(rmsnorm_forward, "out = inp * rstd * weight per row, rstd = 1/sqrt(mean(inp^2) + eps); saves rstd") \
    X(rmsnorm_backward, "dinp += rstd * (dxhat - xhat * mean(dxhat * xhat)), dweight += ..., dxhat = dout * weight") \
    X(matmul, "out[N,OC] = inp[N,C] . weight[OC,C]^T + bias[OC] (bias optional)")              \
    X(matmul_t, "dinp[N,C] = dout[N,OC] . weight[OC,C]")                                       \
    X(matmul_at, "dweight[OC,C] += dout^T . inp; dbias[OC] += column sums of dout (optional)") \
    X(matmul_f16, "matmul with inp and weight in f16, f32 accumulation")                       \
    X(matmul_t_f16, "matmul_t with weight in f16, f32 accumulation")                           \
    X(matmul_at_f16, "matmul_at with inp in f16, f32 accumulation")                            \
    X(matmul_lowbit, "matmul with a packed frozen weight (fmt 0 f16, 1 bf16, 2 nf4) decoded as it is loaded") \
    X(matmul_t_lowbit, "matmul_t with a packed frozen weight (fmt 0 f16, 1 bf16, 2 nf4) decoded as it is loaded") \
    X(cast_f16, "out (f16) = inp rounded to nearest even; +-Inf past 65504, NaN stays NaN")    \
    X(cast_f32, "out = inp (f16) widened to f32, exact")                                       \
    X(qk_norm_forward, "RMSNorm over each q head (q_weight) and k head (k_weight) of qkv, times (w_offset + w); v copied; saves rstd") \
    X(qk_norm_backward, "dqkv from dout through qk_norm_forward (v copied), dq_weight += ..., dk_weight += ...") \
    X(rope_forward, "rotary position embedding (rotate-half) of the q and k heads of qkv, in place") \
    X(rope_backward, "dq, dk through rope_forward (the transposed rotation), in place; dv untouched") \
    X(attention_forward, "causal attention out = dropout(softmax(q k^T / sqrt(HS))) v, grouped kv heads; row lse") \
    X(attention_backward, "dqkv from dout, qkv, out, lse (the forward's dropout mask regenerated)") \
    X(decode_embedding, "out[b,t,:] = wte[tokens[b,t],:] + wpe[pos[b]+t,:] (wpe optional): tokens after a cache") \
    X(kv_cache_append, "k (rotated when cos is given) and v of qkv into the caches at rows pos[b]+t") \
    X(decode_attention, "queries at positions pos[b]+t against the cached keys/values 0..pos[b]+t (window)") \
    X(residual_forward, "out = a + b (out may be a)")                                          \
    X(add_inplace, "out += a")                                                                 \
    X(add_cols, "out[n, oo+j] = (accumulate ? out[n, oo+j] : 0) + scale * inp[n, io+j], j < W (row strides OS, IS)") \
    X(scale_inplace, "x *= s (f32)")                                                            \
    X(dropout_forward, "out = inp * keep / (1 - p), keep hashed from (seed, stream, index); p = 0 copies") \
    X(dropout_backward, "dinp = dout * keep / (1 - p), the forward's mask regenerated")          \
    X(grad_norm_sq, "norm_sq[0] = (accumulate ? norm_sq[0] : 0) + sum of g^2")                 \
    X(grad_clip_scale, "one update's decisions in the status: unscaled norm, clip/S, skip, t, bias corrections, loss scale") \
    X(adamw, "AdamW step on params; grads times status clip/S, t from the status; clip 0 skips the update")

// ---- element-wise and loss (docs/kernels.md#activations, #cross_entropy, #ffn-backward) ----
#define WGT_OP_gelu_inplace(BIND, SCAL)                                                            \
    BIND(x, INOUT, F32, "n") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)
// the GeLU of gelu_inplace into another buffer: what a model keeps both sides of (GPT-2's MLP
// keeps pre_gelu for the backward) costs one read and one write, not a copy and an in-place pass
#define WGT_OP_gelu_forward(BIND, SCAL)                                                            \
    BIND(out, OUT, F32, "n") BIND(inp, IN, F32, "n") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)
#define WGT_OP_swiglu_combine(BIND, SCAL)                                                          \
    BIND(hidden, OUT, F32, "n") BIND(gate, IN, F32, "n") BIND(up, IN, F32, "n")                    \
    SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)
// GeGLU (Gemma-3's MLP): gelu of gelu_inplace (PyTorch's approximate="tanh") times up
#define WGT_OP_geglu_combine(BIND, SCAL)                                                           \
    BIND(hidden, OUT, F32, "n") BIND(gate, IN, F32, "n") BIND(up, IN, F32, "n")                    \
    SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)
// logits are replaced by dlogits; a target >= V marks an ignored row (loss 0, zero dlogits).
// loss_scale (optional): the loss scale word of the optimizer status (opt_status.h); dlogits are
// multiplied by inv_norm * loss_scale[0] (by inv_norm alone without it). The losses are unscaled.
#define WGT_OP_cross_entropy(BIND, SCAL)                                                           \
    BIND(logits, INOUT, F32, "R,V") BIND(losses, OUT, F32, "R") BIND(targets, IN, U32, "R")        \
    BIND(loss_scale, IN_OPT, F32, "1")                                                             \
    SCAL(R, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(V, U32, WGT_REQ, 1, WGT_U32_MAX)                    \
    SCAL(alpha, F32, 0.0, 0, 1) SCAL(beta, F32, 1e-4, 0, 1e4) SCAL(inv_norm, F32, WGT_REQ, 0, 1)
#define WGT_OP_sum_losses(BIND, SCAL)                                                              \
    BIND(out, INOUT, F32, "1") BIND(losses, IN, F32, "n") SCAL(n, U32, WGT_REQ, 1, WGT_U32_MAX)    \
    SCAL(accumulate, U32, 0, 0, 1)
#define WGT_OP_ffn_gelu_backward(BIND, SCAL)                                                       \
    BIND(grad_pre, OUT, F32, "n") BIND(grad_hidden, IN, F32, "n") BIND(pre_gelu, IN, F32, "n")     \
    SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)
#define WGT_OP_ffn_swiglu_backward(BIND, SCAL)                                                     \
    BIND(grad_gate, OUT, F32, "n") BIND(grad_up, OUT, F32, "n") BIND(grad_hidden, IN, F32, "n")    \
    BIND(gate, IN, F32, "n") BIND(up, IN, F32, "n") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)
#define WGT_OP_ffn_geglu_backward(BIND, SCAL)                                                      \
    BIND(grad_gate, OUT, F32, "n") BIND(grad_up, OUT, F32, "n") BIND(grad_hidden, IN, F32, "n")    \
    BIND(gate, IN, F32, "n") BIND(up, IN, F32, "n") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)

// ---- embedding (docs/kernels.md#embedding); tokens must lie in [0, V) ----
#define WGT_OP_embedding_forward(BIND, SCAL)                                                       \
    BIND(out, OUT, F32, "B,T,C") BIND(tokens, IN, I32, "B,T") BIND(wte, IN, F32, "V,C")            \
    BIND(wpe, IN, F32, ">=T,C") SCAL(B, U32, WGT_REQ, 1, WGT_U32_MAX)                              \
    SCAL(T, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX)                    \
    SCAL(V, U32, WGT_REQ, 1, WGT_U32_MAX)
#define WGT_OP_embedding_backward(BIND, SCAL)                                                      \
    BIND(dwte, INOUT, F32, "V,C") BIND(dwpe, INOUT, F32, ">=T,C") BIND(dout, IN, F32, "B,T,C")     \
    BIND(tokens, IN, I32, "B,T") SCAL(B, U32, WGT_REQ, 1, WGT_U32_MAX)                             \
    SCAL(T, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX)                    \
    SCAL(V, U32, WGT_REQ, 1, WGT_U32_MAX)

// ---- normalisation (docs/kernels.md#layernorm_forward, #rmsnorm_forward) ----
#define WGT_OP_layernorm_forward(BIND, SCAL)                                                       \
    BIND(out, OUT, F32, "N,C") BIND(mean, OUT, F32, "N") BIND(rstd, OUT, F32, "N")                 \
    BIND(inp, IN, F32, "N,C") BIND(weight, IN, F32, "C") BIND(bias, IN, F32, "C")                  \
    SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX)
#define WGT_OP_layernorm_backward(BIND, SCAL)                                                      \
    BIND(dinp, INOUT, F32, "N,C") BIND(dweight, INOUT, F32, "C") BIND(dbias, INOUT, F32, "C")      \
    BIND(dout, IN, F32, "N,C") BIND(inp, IN, F32, "N,C") BIND(weight, IN, F32, "C")                \
    BIND(mean, IN, F32, "N") BIND(rstd, IN, F32, "N") SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX)        \
    SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX)

// RMSNorm (LLaMA): no mean, no bias; eps from the model's config
#define WGT_OP_rmsnorm_forward(BIND, SCAL)                                                         \
    BIND(out, OUT, F32, "N,C") BIND(rstd, OUT, F32, "N") BIND(inp, IN, F32, "N,C")                 \
    BIND(weight, IN, F32, "C") SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX) \
    SCAL(eps, F32, 1e-5, 0, 1)
#define WGT_OP_rmsnorm_backward(BIND, SCAL)                                                        \
    BIND(dinp, INOUT, F32, "N,C") BIND(dweight, INOUT, F32, "C") BIND(dout, IN, F32, "N,C")        \
    BIND(inp, IN, F32, "N,C") BIND(weight, IN, F32, "C") BIND(rstd, IN, F32, "N")                  \
    SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX)

// ---- matmul family (docs/kernels.md#matmul) ----
#define WGT_OP_matmul(BIND, SCAL)                                                                  \
    BIND(out, OUT, F32, "N,OC") BIND(inp, IN, F32, "N,C") BIND(weight, IN, F32, "OC,C")            \
    BIND(bias, IN_OPT, F32, "OC") SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX)                            \
    SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(OC, U32, WGT_REQ, 1, WGT_U32_MAX)
#define WGT_OP_matmul_t(BIND, SCAL)                                                                \
    BIND(dinp, OUT, F32, "N,C") BIND(dout, IN, F32, "N,OC") BIND(weight, IN, F32, "OC,C")          \
    SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX)                    \
    SCAL(OC, U32, WGT_REQ, 1, WGT_U32_MAX)
#define WGT_OP_matmul_at(BIND, SCAL)                                                               \
    BIND(dweight, INOUT, F32, "OC,C") BIND(dbias, INOUT_OPT, F32, "OC")                            \
    BIND(dout, IN, F32, "N,OC") BIND(inp, IN, F32, "N,C") SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX)    \
    SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(OC, U32, WGT_REQ, 1, WGT_U32_MAX)

// The same GEMMs with an f16 operand (mixed precision, docs/kernels.md#matmul_f16): the tiles are
// widened to f32 as they are loaded, the products and sums stay f32, out / dinp / dweight are f32.
#define WGT_OP_matmul_f16(BIND, SCAL)                                                              \
    BIND(out, OUT, F32, "N,OC") BIND(inp, IN, F16, "N,C") BIND(weight, IN, F16, "OC,C")            \
    BIND(bias, IN_OPT, F32, "OC") SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX)                            \
    SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(OC, U32, WGT_REQ, 1, WGT_U32_MAX)
#define WGT_OP_matmul_t_f16(BIND, SCAL)                                                            \
    BIND(dinp, OUT, F32, "N,C") BIND(dout, IN, F32, "N,OC") BIND(weight, IN, F16, "OC,C")          \
    SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX)                    \
    SCAL(OC, U32, WGT_REQ, 1, WGT_U32_MAX)
#define WGT_OP_matmul_at_f16(BIND, SCAL)                                                           \
    BIND(dweight, INOUT, F32, "OC,C") BIND(dbias, INOUT_OPT, F32, "OC")                            \
    BIND(dout, IN, F32, "N,OC") BIND(inp, IN, F16, "N,C") SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX)    \
    SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(OC, U32, WGT_REQ, 1, WGT_U32_MAX)

// ---- 08_cast: f32 <-> f16 (docs/kernels.md#cast_f16); out holds ceil(n/2) words, and an odd n
// zeroes the high half of the last one ----
#define WGT_OP_cast_f16(BIND, SCAL)                                                                \
    BIND(out, OUT, F16, "n") BIND(inp, IN, F32, "n") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)
#define WGT_OP_cast_f32(BIND, SCAL)                                                                \
    BIND(out, OUT, F32, "n") BIND(inp, IN, F16, "n") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)

// ---- per-head q/k RMSNorm (docs/kernels.md#qk_norm_forward): Qwen3's q_norm / k_norm, Gemma-3's
// with (1 + w) (w_offset 1). qkv is B·T rows of NH + 2·NKV heads of HS: each q head is normalised
// over its HS values with q_weight [HS], each k head with k_weight [HS], v is copied; rstd holds
// the NH + NKV heads' 1/sqrt(mean(x^2) + eps) per token ----
#define WGT_OP_qk_norm_forward(BIND, SCAL)                                                         \
    BIND(out, OUT, F32, "B,T,NH*HS+2*NKV*HS") BIND(rstd, OUT, F32, "B,T,NH+NKV")                   \
    BIND(qkv, IN, F32, "B,T,NH*HS+2*NKV*HS") BIND(q_weight, IN, F32, "HS") BIND(k_weight, IN, F32, "HS") \
    SCAL(B, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(T, U32, WGT_REQ, 1, WGT_U32_MAX)                    \
    SCAL(NH, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(NKV, U32, WGT_REQ, 1, WGT_U32_MAX)                 \
    SCAL(HS, U32, WGT_REQ, 1, 4096) SCAL(eps, F32, 1e-6, 0, 1) SCAL(w_offset, F32, 0.0, 0, 1)
#define WGT_OP_qk_norm_backward(BIND, SCAL)                                                        \
    BIND(dqkv, OUT, F32, "B,T,NH*HS+2*NKV*HS") BIND(dq_weight, INOUT, F32, "HS")                   \
    BIND(dk_weight, INOUT, F32, "HS") BIND(dout, IN, F32, "B,T,NH*HS+2*NKV*HS")                    \
    BIND(qkv, IN, F32, "B,T,NH*HS+2*NKV*HS") BIND(q_weight, IN, F32, "HS") BIND(k_weight, IN, F32, "HS") \
    BIND(rstd, IN, F32, "B,T,NH+NKV") SCAL(B, U32, WGT_REQ, 1, WGT_U32_MAX)                        \
    SCAL(T, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(NH, U32, WGT_REQ, 1, WGT_U32_MAX)                   \
    SCAL(NKV, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(HS, U32, WGT_REQ, 1, 4096) SCAL(w_offset, F32, 0.0, 0, 1)

// ---- rotary position embedding (docs/kernels.md#rope) ----
// In place on the q (NH heads) and k (NKV heads) parts of qkv, HF LLaMA's rotate-half convention
// at positions 0..T-1: x' = x*cos[t] + rotate_half(x)*sin[t], rotate_half(x) = [-x2, x1] (x1, x2
// the halves of a head). cos, sin [maxT, HS]: cpu_rope_tables fills them. HS must be even.
// doc_start (optional, the attention mask's): packed examples restart their positions, row
// (b, t) at position t - doc_start[b,t] (<= t).
#define WGT_OP_rope_forward(BIND, SCAL)                                                            \
    BIND(qkv, INOUT, F32, "B,T,NH*HS+2*NKV*HS") BIND(cos, IN, F32, ">=T,HS")                        \
    BIND(sin, IN, F32, ">=T,HS") BIND(doc_start, IN_OPT, U32, "B,T")                               \
    SCAL(B, U32, WGT_REQ, 1, WGT_U32_MAX)                                                          \
    SCAL(T, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(NH, U32, WGT_REQ, 1, WGT_U32_MAX)                   \
    SCAL(NKV, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(HS, U32, WGT_REQ, 2, WGT_U32_MAX)
#define WGT_OP_rope_backward(BIND, SCAL)                                                           \
    BIND(dqkv, INOUT, F32, "B,T,NH*HS+2*NKV*HS") BIND(cos, IN, F32, ">=T,HS")                       \
    BIND(sin, IN, F32, ">=T,HS") BIND(doc_start, IN_OPT, U32, "B,T")                               \
    SCAL(B, U32, WGT_REQ, 1, WGT_U32_MAX)                                                          \
    SCAL(T, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(NH, U32, WGT_REQ, 1, WGT_U32_MAX)                   \
    SCAL(NKV, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(HS, U32, WGT_REQ, 2, WGT_U32_MAX)

// ---- attention (docs/kernels.md#attention); qkv holds q (NH heads) | k (NKV heads) | v (NKV
// heads), heads contiguous in each; query head h reads kv head h / (NH/NKV); NKV divides NH.
// p > 0: dropout on the probabilities, mask hashed from (seed, (b·NH + h)·T + t, key j) and
// regenerated by the backward (docs/kernels.md#dropout); lse stays that of the whole softmax.
// The mask (docs/kernels.md#attention-mask): query t of sequence b attends keys [lo(t), t],
// lo(t) = max(doc_start[b,t], t - window + 1) (window 0: no limit; doc_start absent: 0), so that
// packed examples see only themselves (doc_start[b,t]: the first position of t's example) and a
// sliding window limits the span. doc_start[b,t] <= t and non-decreasing in t ----
#define WGT_OP_attention_forward(BIND, SCAL)                                                       \
    BIND(out, OUT, F32, "B,T,NH*HS") BIND(lse, OUT, F32, "B,NH,T")                                 \
    BIND(qkv, IN, F32, "B,T,NH*HS+2*NKV*HS") BIND(doc_start, IN_OPT, U32, "B,T")                   \
    SCAL(B, U32, WGT_REQ, 1, WGT_U32_MAX)                                                          \
    SCAL(T, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(NH, U32, WGT_REQ, 1, WGT_U32_MAX)                   \
    SCAL(NKV, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(HS, U32, WGT_REQ, 1, 256)                         \
    SCAL(p, F32, 0.0, 0, 0.999) SCAL(seed, U32, 0, 0, WGT_U32_MAX) SCAL(window, U32, 0, 0, WGT_U32_MAX)
#define WGT_OP_attention_backward(BIND, SCAL)                                                      \
    BIND(dqkv, OUT, F32, "B,T,NH*HS+2*NKV*HS") BIND(dout, IN, F32, "B,T,NH*HS")                    \
    BIND(qkv, IN, F32, "B,T,NH*HS+2*NKV*HS") BIND(out, IN, F32, "B,T,NH*HS")                       \
    BIND(lse, IN, F32, "B,NH,T") BIND(doc_start, IN_OPT, U32, "B,T")                               \
    SCAL(B, U32, WGT_REQ, 1, WGT_U32_MAX)                                                          \
    SCAL(T, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(NH, U32, WGT_REQ, 1, WGT_U32_MAX)                   \
    SCAL(NKV, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(HS, U32, WGT_REQ, 1, 256)                         \
    SCAL(p, F32, 0.0, 0, 0.999) SCAL(seed, U32, 0, 0, WGT_U32_MAX) SCAL(window, U32, 0, 0, WGT_U32_MAX)

// ---- decoding with a key/value cache (docs/kernels.md#decode_attention, 16_decode_attention.wgsl).
// Row b of a batch has pos[b] tokens cached already; its T new tokens sit at positions
// pos[b] .. pos[b]+T-1, which the caller keeps below maxT (the C reference aborts on a position
// past it; the kernels skip it, leaving its outputs as they were). The caches are
// [B, maxT, NKV*HS] per layer. cos / sin: the RoPE tables [maxT, HS] of rope_forward (absent: no
// rotation, GPT-2); kv_cache_append rotates k as it stores it and decode_attention rotates q as it
// reads it, so qkv is never modified. window > 0: query position p sees keys [p-window+1, p]. ----
#define WGT_OP_decode_embedding(BIND, SCAL)                                                        \
    BIND(out, OUT, F32, "B,T,C") BIND(tokens, IN, I32, "B,T") BIND(wte, IN, F32, "V,C")            \
    BIND(wpe, IN_OPT, F32, "maxT,C") BIND(pos, IN, U32, "B") SCAL(B, U32, WGT_REQ, 1, WGT_U32_MAX) \
    SCAL(T, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX)                    \
    SCAL(V, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(maxT, U32, WGT_REQ, 1, WGT_U32_MAX)
#define WGT_OP_kv_cache_append(BIND, SCAL)                                                         \
    BIND(kcache, INOUT, F32, "B,maxT,NKV*HS") BIND(vcache, INOUT, F32, "B,maxT,NKV*HS")             \
    BIND(qkv, IN, F32, "B,T,NH*HS+2*NKV*HS") BIND(cos, IN_OPT, F32, "maxT,HS")                      \
    BIND(sin, IN_OPT, F32, "maxT,HS") BIND(pos, IN, U32, "B") SCAL(B, U32, WGT_REQ, 1, WGT_U32_MAX) \
    SCAL(T, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(NH, U32, WGT_REQ, 1, WGT_U32_MAX)                   \
    SCAL(NKV, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(HS, U32, WGT_REQ, 1, 256)                         \
    SCAL(maxT, U32, WGT_REQ, 1, WGT_U32_MAX)
#define WGT_OP_decode_attention(BIND, SCAL)                                                        \
    BIND(out, OUT, F32, "B,T,NH*HS") BIND(qkv, IN, F32, "B,T,NH*HS+2*NKV*HS")                      \
    BIND(kcache, IN, F32, "B,maxT,NKV*HS") BIND(vcache, IN, F32, "B,maxT,NKV*HS")                  \
    BIND(cos, IN_OPT, F32, "maxT,HS") BIND(sin, IN_OPT, F32, "maxT,HS") BIND(pos, IN, U32, "B")     \
    SCAL(B, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(T, U32, WGT_REQ, 1, WGT_U32_MAX)                    \
    SCAL(NH, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(NKV, U32, WGT_REQ, 1, WGT_U32_MAX)                 \
    SCAL(HS, U32, WGT_REQ, 1, 256) SCAL(maxT, U32, WGT_REQ, 1, WGT_U32_MAX)                        \
    SCAL(window, U32, 0, 0, WGT_U32_MAX)

// ---- GEMMs on a packed frozen weight W [OC, C] (docs/kernels.md#matmul_lowbit; LoRA's frozen base,
// docs/memory.md). weight: WW 4-byte words holding W's OC*C values in row-major order, element e
// at word e/2 half e%2 (fmt 0 IEEE f16, 1 bfloat16: the top 16 bits of the f32) or word e/8 bits
// 4(e%8).. (fmt 2 nf4: the index of one of the 16 NormalFloat levels, times absmax[e/64]); absmax
// (NB values, fmt 2 only) may be absent for fmt 0 and 1. WW (and NB) must cover OC*C values.
#define WGT_OP_matmul_lowbit(BIND, SCAL)                                                           \
    BIND(out, OUT, F32, "N,OC") BIND(inp, IN, F32, "N,C") BIND(weight, IN, U32, "WW")              \
    BIND(absmax, IN_OPT, F32, "NB") BIND(bias, IN_OPT, F32, "OC")                                  \
    SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX)                    \
    SCAL(OC, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(fmt, U32, WGT_REQ, 0, 2)                           \
    SCAL(WW, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(NB, U32, 0, 0, WGT_U32_MAX)
#define WGT_OP_matmul_t_lowbit(BIND, SCAL)                                                         \
    BIND(dinp, OUT, F32, "N,C") BIND(dout, IN, F32, "N,OC") BIND(weight, IN, U32, "WW")            \
    BIND(absmax, IN_OPT, F32, "NB")                                                                \
    SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(C, U32, WGT_REQ, 1, WGT_U32_MAX)                    \
    SCAL(OC, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(fmt, U32, WGT_REQ, 0, 2)                           \
    SCAL(WW, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(NB, U32, 0, 0, WGT_U32_MAX)

// ---- residual, gradient norm, optimizer (docs/kernels.md#residual, #optimizer) ----
#define WGT_OP_residual_forward(BIND, SCAL)                                                        \
    BIND(out, OUT, F32, "n") BIND(a, IN, F32, "n") BIND(b, IN, F32, "n")                           \
    SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)
#define WGT_OP_add_inplace(BIND, SCAL)                                                             \
    BIND(out, INOUT, F32, "n") BIND(a, IN, F32, "n") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)
// A scaled copy or sum between column windows of two row-major matrices (LoRA: an adapter's output
// into its rows of a packed projection, and back; docs/lora.md). oo + W <= OS and io + W <= IS.
#define WGT_OP_add_cols(BIND, SCAL)                                                                \
    BIND(out, INOUT, F32, "N,OS") BIND(inp, IN, F32, "N,IS") SCAL(N, U32, WGT_REQ, 1, WGT_U32_MAX)  \
    SCAL(OS, U32, WGT_REQ, 1, WGT_U32_MAX) SCAL(IS, U32, WGT_REQ, 1, WGT_U32_MAX)                  \
    SCAL(W, U32, 1, 1, WGT_U32_MAX) SCAL(oo, U32, 0, 0, WGT_U32_MAX) SCAL(io, U32, 0, 0, WGT_U32_MAX) \
    SCAL(scale, F32, 1.0, -1e30, 1e30) SCAL(accumulate, U32, 1, 0, 1)
// x *= s, one f32 product per element (Gemma-3's embedding times sqrt(hidden), and its gradient)
#define WGT_OP_scale_inplace(BIND, SCAL)                                                           \
    BIND(x, INOUT, F32, "n") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX) SCAL(s, F32, 1.0, -1e30, 1e30)
// Dropout of a residual branch (docs/kernels.md#dropout): element i is kept when the hash of
// (seed, stream, i) is at least p·2^32; no mask is stored, the backward draws the same one from the
// same (seed, stream). p in [0, 1); p = 0 is an exact copy. out (dinp) may be the same view as
// inp (dout).
#define WGT_OP_dropout_forward(BIND, SCAL)                                                         \
    BIND(out, OUT, F32, "n") BIND(inp, IN, F32, "n") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)       \
    SCAL(p, F32, 0.0, 0, 0.999) SCAL(seed, U32, 0, 0, WGT_U32_MAX) SCAL(stream, U32, 0, 0, WGT_U32_MAX)
#define WGT_OP_dropout_backward(BIND, SCAL)                                                        \
    BIND(dinp, OUT, F32, "n") BIND(dout, IN, F32, "n") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)     \
    SCAL(p, F32, 0.0, 0, 0.999) SCAL(seed, U32, 0, 0, WGT_U32_MAX) SCAL(stream, U32, 0, 0, WGT_U32_MAX)
#define WGT_OP_grad_norm_sq(BIND, SCAL)                                                            \
    BIND(norm_sq, INOUT, F32, "1") BIND(g, IN, F32, "n") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)   \
    SCAL(accumulate, U32, 0, 0, 1)
// status: the optimizer status (opt_status.h, WGT_ST_WORDS words; docs/kernels.md#grad_clip_scale).
// Reads the squared norm, the loss sum and the loss scale S; writes the unscaled norm, adamw's
// multiplier clip/S (0: skip, for a non-finite norm or loss), the update count t and the bias
// corrections 1-beta^t; with dynamic = 1 halves S on a skip and doubles it after `window`
// applied updates in a row.
#define WGT_OP_grad_clip_scale(BIND, SCAL)                                                         \
    BIND(status, INOUT, F32, "16") SCAL(max_norm, F32, 1.0, 0, 3e38)                               \
    SCAL(beta1, F32, 0.9, 0, 0.9999999) SCAL(beta2, F32, 0.999, 0, 0.9999999)                      \
    SCAL(dynamic, U32, 0, 0, 1) SCAL(window, U32, 2000, 1, WGT_U32_MAX)
// the gradient multiplier and the bias corrections of the update come from status (written by
// grad_clip_scale with the same beta1, beta2)
#define WGT_OP_adamw(BIND, SCAL)                                                                   \
    BIND(params, INOUT, F32, "n") BIND(m, INOUT, F32, "n") BIND(v, INOUT, F32, "n")                \
    BIND(grads, IN, F32, "n") BIND(status, IN, F32, "16") SCAL(n, SIZE, WGT_REQ, 1, WGT_SIZE_MAX)  \
    SCAL(lr, F32, 1e-3, 0, 1e4) SCAL(beta1, F32, 0.9, 0, 0.9999999)                                \
    SCAL(beta2, F32, 0.999, 0, 0.9999999) SCAL(eps, F32, 1e-8, 1e-30, 1)                           \
    SCAL(weight_decay, F32, 0.0, 0, 1e4)

// ---- helpers for the consumers ----
// C types of the scalars
#define WGT_CTYPE_U32 uint32_t
#define WGT_CTYPE_SIZE size_t
#define WGT_CTYPE_F32 float
// ", wgt_view name" / ", type name": an op's parameter list after `wgt_backend *be`
#define WGT_PARAM_B(name, role, type, shape) , wgt_view name
#define WGT_PARAM_S(name, type, def, lo, hi) , WGT_CTYPE_##type name
#define WGT_NO_B(name, role, type, shape)
#define WGT_NO_S(name, type, def, lo, hi)
// drops the leading comma of a generated list: WGT_ARGS(, a, b) is a, b
#define WGT_DROP_FIRST_(x, ...) __VA_ARGS__
#define WGT_ARGS(...) WGT_DROP_FIRST_(__VA_ARGS__)

// op ids: WGT_OP_ID_matmul, ...; WGT_OP_COUNT
#define WGT_OP_ENUM_(op, summary) WGT_OP_ID_##op,
enum { WGT_OPS(WGT_OP_ENUM_) WGT_OP_COUNT };
#undef WGT_OP_ENUM_
#endif
