# llama_torch_ref.py — a plain PyTorch LLaMA in the math of Hugging Face's LlamaForCausalLM
# (modeling_llama.py), for the tests that compare wgtrain with PyTorch where transformers is not
# installed: RMSNorm computed in float32 or wider, rotary embedding in the rotate-half convention
# with HF's inverse frequencies (the default, linear and llama3 rope types) and cos/sin tables
# (computed in float32, as HF does), causal
# attention with repeat_kv for grouped-query heads, the SwiGLU MLP, no biases, the lm_head tied
# to the token embedding or not; optional biases on q, k, v (Qwen2) and o (LLaMA's
# attention_bias). Mistral and Qwen2 are this computation under other config.json fields; Qwen3
# (Qwen3ForCausalLM) adds an RMSNorm over each q and k head (q_norm, k_norm) between the
# projection and RoPE, and a head size (head_dim) that need not be hidden / heads.
# Parameters use HF's names and [out, in] layout; a config.json in HF's format is written beside them.
import json
import math

import torch

from gpt2_torch_ref import load_safetensors, save_safetensors  # noqa: F401  (re-exported)


def param_shapes(L, C, F, V, NH, NKV, tie, qkv_bias=False, o_bias=False, head_dim=None, qk_norm=False):
    hs = head_dim or C // NH
    s = {"model.embed_tokens.weight": (V, C)}
    for l in range(L):
        p = f"model.layers.{l}."
        s.update({p + "self_attn.q_proj.weight": (NH * hs, C), p + "self_attn.k_proj.weight": (NKV * hs, C),
                  p + "self_attn.v_proj.weight": (NKV * hs, C), p + "self_attn.o_proj.weight": (C, NH * hs),
                  p + "mlp.gate_proj.weight": (F, C), p + "mlp.up_proj.weight": (F, C),
                  p + "mlp.down_proj.weight": (C, F),
                  p + "input_layernorm.weight": (C,), p + "post_attention_layernorm.weight": (C,)})
        if qkv_bias:  # Qwen2; LLaMA's attention_bias
            s.update({p + "self_attn.q_proj.bias": (NH * hs,), p + "self_attn.k_proj.bias": (NKV * hs,),
                      p + "self_attn.v_proj.bias": (NKV * hs,)})
        if o_bias:  # LLaMA's attention_bias
            s[p + "self_attn.o_proj.bias"] = (C,)
        if qk_norm:  # Qwen3
            s.update({p + "self_attn.q_norm.weight": (hs,), p + "self_attn.k_norm.weight": (hs,)})
    s["model.norm.weight"] = (C,)
    if not tie:
        s["lm_head.weight"] = (V, C)
    return s


def random_params(L, C, F, V, NH, NKV, tie, seed, dtype=torch.float64, qkv_bias=False, o_bias=False, head_dim=None,
                  qk_norm=False):
    """O(1)-scale parameters (so that attention is far from uniform and every gradient is well
    above float32 rounding): embeddings N(0, 0.3^2), matrices N(0, 1/fan_in), norm weights 1 + N(0, 0.1^2),
    biases N(0, 0.3^2); values exactly representable in float32."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in param_shapes(L, C, F, V, NH, NKV, tie, qkv_bias, o_bias, head_dim, qk_norm).items():
        if name.endswith(".bias"):
            t = 0.3 * torch.randn(shape, generator=g, dtype=torch.float64)
        elif len(shape) == 1:
            t = 1.0 + 0.1 * torch.randn(shape, generator=g, dtype=torch.float64)
        elif "embed_tokens" in name:
            t = 0.3 * torch.randn(shape, generator=g, dtype=torch.float64)
        else:
            t = torch.randn(shape, generator=g, dtype=torch.float64) / shape[1] ** 0.5
        out[name] = t.to(torch.float32).to(dtype)
    return out


HF_CLASS = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
            "qwen3": "Qwen3ForCausalLM"}


def hf_config(L, C, F, V, NH, NKV, tie, max_pos, theta=10000.0, eps=1e-5, family="llama", **extra):
    """A config.json of the family in its config class's own fields: LLaMA's attention_bias /
    mlp_bias, Mistral's sliding_window (null: none), Qwen2's use_sliding_window (false)."""
    c = {"architectures": [HF_CLASS[family]], "model_type": family, "hidden_size": C, "intermediate_size": F,
         "num_attention_heads": NH, "num_key_value_heads": NKV, "num_hidden_layers": L, "vocab_size": V,
         "max_position_embeddings": max_pos, "rms_norm_eps": eps, "rope_theta": theta, "tie_word_embeddings": tie,
         "hidden_act": "silu", "rope_scaling": None, "initializer_range": 0.02, "torch_dtype": "float32"}
    if family == "llama":
        c.update({"attention_bias": False, "mlp_bias": False})
    if family == "mistral":
        c.update({"sliding_window": None})
    if family == "qwen2":
        c.update({"use_sliding_window": False, "sliding_window": 4096, "max_window_layers": L})
    if family == "qwen3":  # head_dim: given by the caller (extra) or hidden / heads
        c.update({"use_sliding_window": False, "sliding_window": None, "max_window_layers": L, "attention_bias": False,
                  "head_dim": C // NH})
    c.update(extra)
    return c


def write_config(path, cfg):
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)


def rmsnorm(x, w, eps):
    # HF LlamaRMSNorm: in float32 (here: float32 or the input's wider type), weight applied after
    # the cast back
    dt = x.dtype
    h = x.to(torch.promote_types(dt, torch.float32))
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return w * h.to(dt)


def rope_inv_freq(hs, theta, scaling=None):
    """HF's inverse frequencies in float32 (modeling_rope_utils.py): the default rope type, "linear"
    (/ factor) and "llama3" (_compute_llama3_parameters)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, hs, 2, dtype=torch.int64).float() / hs))
    kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    if kind == "default":
        return inv_freq
    factor = scaling["factor"]
    if kind == "linear":
        return inv_freq / factor
    assert kind == "llama3", kind
    low, high, orig = scaling["low_freq_factor"], scaling["high_freq_factor"], scaling["original_max_position_embeddings"]
    low_wl, high_wl = orig / low, orig / high
    wavelen = 2 * math.pi / inv_freq
    f = torch.where(wavelen > low_wl, inv_freq / factor, inv_freq)
    smooth = (orig / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * f / factor + smooth * f
    medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
    return torch.where(medium, smoothed, f)


def rope_tables(T, hs, theta, dtype, scaling=None):
    # HF LlamaRotaryEmbedding: inv_freq and the angles in float32
    inv_freq = rope_inv_freq(hs, theta, scaling).float()
    pos = torch.arange(T, dtype=torch.int64).float()
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep):
    # [B, NKV, T, hs] -> [B, NKV * n_rep, T, hs]: kv head j serves query heads j*n_rep .. j*n_rep+n_rep-1
    B, nkv, T, hs = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(B, nkv, n_rep, T, hs).reshape(B, nkv * n_rep, T, hs)


def causal_mask(T, window=0):
    """[T, T] True where query i sees key j: j <= i, and i - j < window when window > 0 (HF's
    sliding window: key j is kept while j > i - window)."""
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    mask = j <= i
    return mask & (i - j < window) if window else mask


def attention(q, k, v, window=0):
    T, hs = q.shape[-2], q.shape[-1]
    if hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        if window:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(T, window))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    att = (q @ k.transpose(-2, -1)) * hs ** -0.5
    att = att.masked_fill(~causal_mask(T, window), float("-inf")).softmax(-1)
    return att @ v


def linear(x, P, name):
    """nn.Linear: x W^T, plus the bias when the parameters have one (Qwen2's q, k, v; LLaMA's attention_bias)."""
    y = x @ P[name + ".weight"].T
    b = P.get(name + ".bias")
    return y if b is None else y + b


def forward(P, idx, L, NH, NKV, theta, eps, rope_scaling=None, window=0):
    B, T = idx.shape
    hs = P["model.layers.0.self_attn.q_proj.weight"].shape[0] // NH
    cos, sin = rope_tables(T, hs, theta, P["model.embed_tokens.weight"].dtype, rope_scaling)
    x = P["model.embed_tokens.weight"][idx]
    for l in range(L):
        p = f"model.layers.{l}."
        h = rmsnorm(x, P[p + "input_layernorm.weight"], eps)
        q = linear(h, P, p + "self_attn.q_proj").view(B, T, NH, hs).transpose(1, 2)
        k = linear(h, P, p + "self_attn.k_proj").view(B, T, NKV, hs).transpose(1, 2)
        v = linear(h, P, p + "self_attn.v_proj").view(B, T, NKV, hs).transpose(1, 2)
        if p + "self_attn.q_norm.weight" in P:  # Qwen3: RMSNorm over each head's hs values, before RoPE
            q = rmsnorm(q, P[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, P[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        y = attention(q, repeat_kv(k, NH // NKV), repeat_kv(v, NH // NKV), window)
        x = x + linear(y.transpose(1, 2).reshape(B, T, NH * hs), P, p + "self_attn.o_proj")
        h = rmsnorm(x, P[p + "post_attention_layernorm.weight"], eps)
        g = torch.nn.functional.silu(h @ P[p + "mlp.gate_proj.weight"].T)
        x = x + (g * (h @ P[p + "mlp.up_proj.weight"].T)) @ P[p + "mlp.down_proj.weight"].T
    x = rmsnorm(x, P["model.norm.weight"], eps)
    lm = P.get("lm_head.weight", P["model.embed_tokens.weight"])
    return x @ lm.T


def loss_fn(logits, targets):
    V = logits.shape[-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1)


# ---- Gemma-3 (Gemma3ForCausalLM, model_type gemma3_text) in plain PyTorch, in the math of
# transformers' modeling_gemma3.py: the embedding times sqrt(hidden) (a float32 scalar), RMSNorm
# times (1 + w), four norms a block (input, post-attention, pre-feedforward, post-feedforward),
# q_norm / k_norm over each head before RoPE, GeGLU with the tanh GeLU, sliding and full layers
# with their own RoPE bases (layer_types), scores scaled by query_pre_attn_scalar^-0.5.
GEMMA_NORMS = ["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"]


def gemma3_param_shapes(L, C, F, V, NH, NKV, hd, tie):
    s = {"model.embed_tokens.weight": (V, C)}
    for l in range(L):
        p = f"model.layers.{l}."
        s.update({p + "self_attn.q_proj.weight": (NH * hd, C), p + "self_attn.k_proj.weight": (NKV * hd, C),
                  p + "self_attn.v_proj.weight": (NKV * hd, C), p + "self_attn.o_proj.weight": (C, NH * hd),
                  p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
                  p + "mlp.gate_proj.weight": (F, C), p + "mlp.up_proj.weight": (F, C), p + "mlp.down_proj.weight": (C, F)})
        s.update({p + n + ".weight": (C,) for n in GEMMA_NORMS})
    s["model.norm.weight"] = (C,)
    if not tie:
        s["lm_head.weight"] = (V, C)
    return s


def gemma3_random_params(L, C, F, V, NH, NKV, hd, tie, seed, dtype=torch.float64):
    """As random_params, but the norm weights are w ~ N(0, 0.1^2) (Gemma multiplies by 1 + w)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in gemma3_param_shapes(L, C, F, V, NH, NKV, hd, tie).items():
        if len(shape) == 1:
            t = 0.1 * torch.randn(shape, generator=g, dtype=torch.float64)
        elif "embed_tokens" in name:
            t = 0.3 * torch.randn(shape, generator=g, dtype=torch.float64)
        else:
            t = torch.randn(shape, generator=g, dtype=torch.float64) / shape[1] ** 0.5
        out[name] = t.to(torch.float32).to(dtype)
    return out


def gemma3_hf_config(L, C, F, V, NH, NKV, hd, tie, max_pos, theta=1e6, eps=1e-6, local_theta=1e4, window=4096,
                     pattern=6, **extra):
    c = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": C, "intermediate_size": F,
         "num_attention_heads": NH, "num_key_value_heads": NKV, "num_hidden_layers": L, "vocab_size": V, "head_dim": hd,
         "query_pre_attn_scalar": hd, "max_position_embeddings": max_pos, "rms_norm_eps": eps, "rope_theta": theta,
         "rope_local_base_freq": local_theta, "rope_scaling": None, "sliding_window": window,
         "layer_types": ["full_attention" if (l + 1) % pattern == 0 else "sliding_attention" for l in range(L)],
         "tie_word_embeddings": tie, "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False,
         "final_logit_softcapping": None, "attn_logit_softcapping": None, "initializer_range": 0.02,
         "torch_dtype": "float32"}
    c.update(extra)
    return c


def gemma_rmsnorm(x, w, eps):
    # Gemma3RMSNorm: x * rsqrt(mean(x^2) + eps) in float32 or wider, times (1 + w)
    dt = x.dtype
    h = x.to(torch.promote_types(dt, torch.float32))
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (h * (1.0 + w.to(h.dtype))).to(dt)


def gemma3_forward(P, idx, cfg):
    B, T = idx.shape
    NH, NKV, hd, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["rms_norm_eps"]
    E = P["model.embed_tokens.weight"]
    C = E.shape[1]
    x = E[idx] * torch.tensor(C ** 0.5, dtype=torch.float32).to(E.dtype)
    tables = {kind: rope_tables(T, hd, theta, E.dtype) for kind, theta in
              (("full_attention", cfg["rope_theta"]), ("sliding_attention", cfg["rope_local_base_freq"]))}
    scale = cfg["query_pre_attn_scalar"] ** -0.5
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        cos, sin = tables[cfg["layer_types"][l]]
        h = gemma_rmsnorm(x, P[p + "input_layernorm.weight"], eps)
        q = gemma_rmsnorm((h @ P[p + "self_attn.q_proj.weight"].T).view(B, T, NH, hd), P[p + "self_attn.q_norm.weight"], eps)
        k = gemma_rmsnorm((h @ P[p + "self_attn.k_proj.weight"].T).view(B, T, NKV, hd), P[p + "self_attn.k_norm.weight"],
                          eps)
        v = (h @ P[p + "self_attn.v_proj.weight"].T).view(B, T, NKV, hd)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, NH // NKV), repeat_kv(v, NH // NKV)
        att = (q @ k.transpose(-2, -1)) * scale
        win = cfg["sliding_window"] if cfg["layer_types"][l] == "sliding_attention" else 0
        att = att.masked_fill(~causal_mask(T, win), float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, NH * hd)
        x = x + gemma_rmsnorm(y @ P[p + "self_attn.o_proj.weight"].T, P[p + "post_attention_layernorm.weight"], eps)
        h = gemma_rmsnorm(x, P[p + "pre_feedforward_layernorm.weight"], eps)
        g = torch.nn.functional.gelu(h @ P[p + "mlp.gate_proj.weight"].T, approximate="tanh")
        m = (g * (h @ P[p + "mlp.up_proj.weight"].T)) @ P[p + "mlp.down_proj.weight"].T
        x = x + gemma_rmsnorm(m, P[p + "post_feedforward_layernorm.weight"], eps)
    x = gemma_rmsnorm(x, P["model.norm.weight"], eps)
    return x @ P.get("lm_head.weight", E).T
