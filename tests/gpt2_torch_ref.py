# gpt2_torch_ref.py — a minimal GPT-2 in PyTorch (same math as wgtrain: tanh GeLU, LayerNorm
# eps 1e-5, causal attention, lm_head tied to wte) plus safetensors writing, used by the tests
# that compare wgtrain with PyTorch.
import json
import struct

import numpy as np
import torch


def param_shapes(L, C, F, V, maxT):
    s = {"wte.weight": (V, C), "wpe.weight": (maxT, C)}
    for l in range(L):
        p = f"h.{l}."
        s.update({p + "ln_1.weight": (C,), p + "ln_1.bias": (C,),
                  p + "attn.c_attn.weight": (C, 3 * C), p + "attn.c_attn.bias": (3 * C,),
                  p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
                  p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
                  p + "mlp.c_fc.weight": (C, F), p + "mlp.c_fc.bias": (F,),
                  p + "mlp.c_proj.weight": (F, C), p + "mlp.c_proj.bias": (C,)})
    s.update({"ln_f.weight": (C,), "ln_f.bias": (C,)})
    return s


def random_params(L, C, F, V, maxT, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in param_shapes(L, C, F, V, maxT).items():
        if "ln_" in name and name.endswith("weight"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=g)
        elif name.endswith("bias"):
            t = 0.05 * torch.randn(shape, generator=g)
        else:
            t = 0.1 * torch.randn(shape, generator=g)
        out[name] = t.to(torch.float32).to(dtype)  # values exactly representable in float32
    return out


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def layernorm(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + 1e-5) * w + b


def forward(P, idx, L, NH):
    B, T = idx.shape
    C = P["wte.weight"].shape[1]
    x = P["wte.weight"][idx] + P["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = f"h.{l}."
        h = layernorm(x, P[p + "ln_1.weight"], P[p + "ln_1.bias"])
        qkv = h @ P[p + "attn.c_attn.weight"] + P[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=2)
        hs = C // NH
        q = q.view(B, T, NH, hs).transpose(1, 2)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / (hs ** 0.5)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ P[p + "attn.c_proj.weight"] + P[p + "attn.c_proj.bias"]
        h = layernorm(x, P[p + "ln_2.weight"], P[p + "ln_2.bias"])
        h = gelu(h @ P[p + "mlp.c_fc.weight"] + P[p + "mlp.c_fc.bias"])
        x = x + h @ P[p + "mlp.c_proj.weight"] + P[p + "mlp.c_proj.bias"]
    x = layernorm(x, P["ln_f.weight"], P["ln_f.bias"])
    return x @ P["wte.weight"].T


def loss_fn(logits, targets):
    V = logits.shape[-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1)


def to_bf16_bits(a):
    """float32 array -> bfloat16 bit patterns (round to nearest even)."""
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


def save_safetensors(path, tensors, dtype="F32", metadata=None):
    """tensors: name -> torch tensor or array, stored as dtype F32, F16 or BF16."""
    header, off, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        a = np.asarray(t.detach().cpu().numpy() if torch.is_tensor(t) else t, dtype=np.float32)
        if dtype == "F16":
            raw = a.astype("<f2").tobytes()
        elif dtype == "BF16":
            raw = to_bf16_bits(a).astype("<u2").tobytes()
        else:
            raw = a.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        out[name] = np.frombuffer(data[b:en], dtype=np.float32).reshape(e["shape"])
    return out
