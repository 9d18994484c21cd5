# finetune_helper.py — the Python side of tests/test_finetune.sh: writes random Hugging Face models
# (GPT-2 in the hub layout with Conv1D weights and mask buffers or in save_pretrained's layout
# with the "transformer." prefix and a tied lm_head copy; LLaMA tied or untied; F32, F16 or
# BF16) and llm.c token shards, and checks wgtrain's results against the PyTorch references
# (gpt2_torch_ref.py, llama_torch_ref.py). Safetensors are read and written with struct + json.
import argparse
import json
import os
import re
import shutil
import struct
import sys

import importlib

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class LazyModule:
    """A module imported at its first use: importing torch costs about 2 s of CPU, and most of the
    commands here (and in shard_helper.py) only read or write files with numpy."""

    def __init__(self, name, on_load=None):
        self._name, self._mod, self._on_load = name, None, on_load

    def __getattr__(self, attr):
        if self._mod is None:
            self._mod = importlib.import_module(self._name)
            if self._on_load:
                self._on_load(self._mod)
        return getattr(self._mod, attr)


torch = LazyModule("torch", lambda t: t.set_grad_enabled(False))
gref = LazyModule("gpt2_torch_ref")
lref = LazyModule("llama_torch_ref")


# ------------------------------------------------------------------ safetensors
def to_bf16_bits(a):
    return gref.to_bf16_bits(a)


def write_st(path, tensors, dtype="F32", metadata=None):
    """name -> array, in F32, F16 or BF16, with optional metadata"""
    return gref.save_safetensors(path, tensors, dtype, metadata)

def from_bf16_bits(u):
    return (u.astype(np.uint32) << 16).view(np.float32)


def round_to(a, dtype):
    """The float32 values that the given dtype stores for a."""
    a = np.asarray(a, dtype=np.float32)
    if dtype == "F16":
        return a.astype(np.float16).astype(np.float32)
    if dtype == "BF16":
        return from_bf16_bits(to_bf16_bits(a))
    return a


def read_st(path):
    """name -> (dtype, shape, raw bytes), and the metadata."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        b, en = e["data_offsets"]
        out[name] = (e["dtype"], tuple(e["shape"]), data[b:en])
    return out, meta


def st_arrays(path):
    out = {}
    for name, (dt, shape, raw) in read_st(path)[0].items():
        if dt == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif dt == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            a = from_bf16_bits(np.frombuffer(raw, dtype="<u2"))
        else:
            raise SystemExit(f"{path}: tensor {name} has dtype {dt}")
        out[name] = a.reshape(shape)
    return out


# ------------------------------------------------------------------ models

def gpt2_config(L, C, NH, V, T):
    # as on the hub (openai-community/gpt2's config.json), with other sizes
    return {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
            "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": T, "n_embd": C, "n_head": NH,
            "n_inner": None, "n_layer": L, "n_positions": T, "resid_pdrop": 0.1, "summary_activation": None,
            "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
            "summary_use_proj": True, "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
            "vocab_size": V}


def cmd_gpt2(a):
    os.makedirs(a.out, exist_ok=True)
    P = {k: round_to(v.numpy(), a.dtype) for k, v in gref.random_params(a.L, a.C, 4 * a.C, a.V, a.T, a.seed,
                                                                          torch.float32).items()}
    if a.layout == "hub":
        # no prefix, Conv1D [in, out], the causal-mask buffers of older transformers
        out = {}
        for k, v in P.items():
            out[k] = v
            if k.endswith("ln_1.weight"):
                l = k.split(".")[1]
                out[f"h.{l}.attn.bias"] = np.tril(np.ones((a.T, a.T), np.float32)).reshape(1, 1, a.T, a.T)
                out[f"h.{l}.attn.masked_bias"] = np.array(-1e4, np.float32)
    else:
        # GPT2LMHeadModel's state dict: the transformer. prefix and the tied lm_head beside wte
        out = {"transformer." + k: v for k, v in P.items()}
        out["lm_head.weight"] = P["wte.weight"].copy()
    write_st(os.path.join(a.out, "model.safetensors"), out, a.dtype, {"format": "pt"})
    if not a.no_config:
        with open(os.path.join(a.out, "config.json"), "w") as f:
            json.dump(gpt2_config(a.L, a.C, a.NH, a.V, a.T), f, indent=2)


def cmd_llama(a):
    os.makedirs(a.out, exist_ok=True)
    P = {k: round_to(v.numpy(), a.dtype) for k, v in lref.random_params(a.L, a.C, a.F, a.V, a.NH, a.NKV, bool(a.tie),
                                                                          a.seed, torch.float32).items()}
    if a.tie and a.lm_head_copy:
        P["lm_head.weight"] = P["model.embed_tokens.weight"].copy()
    write_st(os.path.join(a.out, "model.safetensors"), P, a.dtype, {"format": "pt"})
    lref.write_config(os.path.join(a.out, "config.json"),
                      lref.hf_config(a.L, a.C, a.F, a.V, a.NH, a.NKV, bool(a.tie), a.T, theta=a.theta, eps=1e-5))


def cmd_mutate(a):
    """A copy of model directory src with one tensor dropped, added or reshaped (or lm_head changed)."""
    if os.path.exists(a.dst):
        shutil.rmtree(a.dst)
    shutil.copytree(a.src, a.dst)
    path = os.path.join(a.dst, "model.safetensors")
    T = st_arrays(path)
    if a.drop:
        del T[a.drop]
    if a.add:
        T[a.add] = np.zeros((3,), np.float32)
    if a.reshape:
        t = T[a.reshape]
        T[a.reshape] = np.zeros((t.shape[0] + 1,) + t.shape[1:], np.float32)
    if a.perturb:
        T[a.perturb] = T[a.perturb].copy()
        T[a.perturb].flat[0] += 1.0
    write_st(path, T)


def cmd_shards(a):
    """llm.c shards: a train shard of exactly T+1 tokens (so every training window is that one)."""
    os.makedirs(a.out, exist_ok=True)
    r = np.random.RandomState(a.seed)
    for name, n in (("train_000.bin", a.T + 1), ("val_000.bin", 3 * a.T + 1)):
        hdr = np.zeros(256, np.int32)
        hdr[0], hdr[1], hdr[2] = 20240520, 1, n
        with open(os.path.join(a.out, name), "wb") as f:
            f.write(hdr.tobytes())
            f.write(r.randint(0, a.V, n).astype("<u2").tobytes())


def read_shard(path):
    with open(path, "rb") as f:
        f.read(1024)
        return np.frombuffer(f.read(), dtype="<u2").astype(np.int64)


# ------------------------------------------------------------------ reference computations

def load_model(d, st=None):
    """(family, config dict, float64 params without the transformer. prefix) of a model directory."""
    cfg = json.load(open(os.path.join(d, "config.json")))
    A = st_arrays(st or os.path.join(d, "model.safetensors"))
    P = {}
    for k, v in A.items():
        if k.startswith("transformer."):
            k = k[len("transformer."):]
        P[k] = torch.from_numpy(np.array(v, dtype=np.float64))
    return cfg["model_type"], cfg, P


def ref_logits(d, idx, st=None):
    fam, cfg, P = load_model(d, st)
    if fam == "gpt2":
        return gref.forward(P, idx, cfg["n_layer"], cfg["n_head"])
    if fam == "gemma3_text":
        return lref.gemma3_forward(P, idx, cfg)
    window = (cfg.get("sliding_window") or 0) if fam == "mistral" else 0  # (qwen2/3: use_sliding_window false)
    return lref.forward(P, idx, cfg["num_hidden_layers"], cfg["num_attention_heads"],
                        cfg.get("num_key_value_heads", cfg["num_attention_heads"]), cfg.get("rope_theta", 10000.0),
                        cfg.get("rms_norm_eps", 1e-6), cfg.get("rope_scaling"), window)


def cmd_check_loss(a):
    """The first step's loss in metrics.jsonl against the reference loss of the one training window."""
    tok = torch.from_numpy(read_shard(os.path.join(a.data, "train_000.bin")))
    idx, tgt = tok[:-1].unsqueeze(0), tok[1:].unsqueeze(0)
    want = float(gref.loss_fn(ref_logits(a.model, idx, a.st), tgt))
    got = json.loads(open(a.metrics).readline())["loss"]
    rel = abs(got - want) / abs(want)
    print(f"first-step loss: wgtrain {got:.9g}, PyTorch {want:.9g}, relative difference {rel:.2e}")
    sys.exit(0 if rel < a.tol else 1)


def cmd_tokens(a):
    r = np.random.RandomState(a.seed)
    np.save(a.out, r.randint(0, a.V, (a.B, a.T + 1)).astype(np.int32))


def cmd_check_logits(a):
    """wgtrain's logits (grad --logits) against the reference's on the exported weights."""
    tok = torch.from_numpy(np.load(a.tokens).astype(np.int64))
    want = ref_logits(a.model, tok[:, :-1]).numpy()
    got = np.load(a.logits).astype(np.float64)
    rel = np.abs(got - want).max() / np.abs(want).max()
    print(f"logits: max |wgtrain - PyTorch| / max |PyTorch| = {rel:.2e}")
    sys.exit(0 if got.shape == want.shape and rel < a.tol else 1)


def cmd_same_tensors(a):
    """Two safetensors files hold the same names, dtypes, shapes and bytes."""
    A, B = read_st(a.a)[0], read_st(a.b)[0]
    if A.keys() != B.keys():
        print("names differ:", sorted(A.keys() ^ B.keys()))
        sys.exit(1)
    diff = [k for k in A if A[k] != B[k]]
    if diff:
        print("tensors differ:", diff[:5])
        sys.exit(1)


def cmd_same_values(a):
    """Tensor values of b (F32) equal those of a (any dtype) after a's own prefix is dropped."""
    strip = lambda d: {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in d.items()}
    A, B = strip(st_arrays(a.a)), strip(st_arrays(a.b))
    for k in a.ignore or []:
        A.pop(k, None)
    A = {k: v for k, v in A.items() if not re.fullmatch(r"h\.\d+\.attn\.(masked_)?bias", k)}
    if A.keys() != B.keys():
        print("names differ:", sorted(A.keys() ^ B.keys()))
        sys.exit(1)
    bad = [k for k in A if A[k].shape != B[k].shape or not np.array_equal(A[k].view(np.uint32), B[k].view(np.uint32))]
    if bad:
        print("values differ:", bad[:5])
        sys.exit(1)


def ckpt_params(path):
    """The f32 parameter array of a ckpt.bin (docs/checkpoint-format.md), after its CRCs."""
    import zlib
    raw = open(path, "rb").read()
    if raw[:8] != b"WGTCKPT\n" or len(raw) < 64:
        raise SystemExit(f"{path}: not a wgtrain checkpoint")
    version, hsize, psize, pcrc = struct.unpack_from("<IIQI", raw, 8)
    if version != 2 or hsize != 64 or len(raw) != 64 + psize or zlib.crc32(raw[64:]) != pcrc:
        raise SystemExit(f"{path}: version {version}, or size or CRC wrong")
    J = struct.unpack_from("<I", raw, 64)[0]
    off = 64 + 4 + J + 8 * 8  # the configuration, then eight counters (version 2)
    N = struct.unpack_from("<Q", raw, off)[0]
    return np.frombuffer(raw, dtype="<f4", count=N, offset=off + 8)


def export_layout(cfg):
    """What transformers expects of an export with this config.json, in wgtrain's state order:
    [(HF name, HF shape, internal shape, weight-decayed, packed, transposed)], table order with
    per-layer runs expanded (src/model/gpt2.c, llama.c; the placement of src/model/model.c)."""
    out = []
    if cfg["model_type"] == "gpt2":
        C, L, V, T = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], cfg["n_positions"]
        F = cfg.get("n_inner") or 4 * C
        g = [("wte.weight", (V, C), 1), ("wpe.weight", (T, C), 1)]
        per = [("ln_1.weight", (C,), 0), ("ln_1.bias", (C,), 0), ("attn.c_attn.weight", (3 * C, C), 1),
               ("attn.c_attn.bias", (3 * C,), 0), ("attn.c_proj.weight", (C, C), 1), ("attn.c_proj.bias", (C,), 0),
               ("ln_2.weight", (C,), 0), ("ln_2.bias", (C,), 0), ("mlp.c_fc.weight", (F, C), 1),
               ("mlp.c_fc.bias", (F,), 0), ("mlp.c_proj.weight", (C, F), 1), ("mlp.c_proj.bias", (C,), 0)]
        # matrices: [out, in] inside, Conv1D's [in, out] in the file; names under "transformer."
        ent = lambda n, s, d: ("transformer." + n, s[::-1] if d and n.startswith("h.") else s, s, d, 0,
                               d and n.startswith("h."))
        out += [ent(n, s, d) for n, s, d in g]
        out += [ent(f"h.{l}.{n}", s, d) for l in range(L) for n, s, d in per]
        out += [ent("ln_f.weight", (C,), 0), ent("ln_f.bias", (C,), 0)]
        return out
    C, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    F, NH = cfg["intermediate_size"], cfg["num_attention_heads"]
    KV = cfg["num_key_value_heads"] * (C // NH)
    per = [("self_attn.q_proj.weight", (C, C), 1, 0), ("self_attn.k_proj.weight", (KV, C), 1, 1),
           ("self_attn.v_proj.weight", (KV, C), 1, 1), ("self_attn.o_proj.weight", (C, C), 1, 0),
           ("mlp.gate_proj.weight", (F, C), 1, 0), ("mlp.up_proj.weight", (F, C), 1, 0),
           ("mlp.down_proj.weight", (C, F), 1, 0), ("input_layernorm.weight", (C,), 0, 0),
           ("post_attention_layernorm.weight", (C,), 0, 0)]
    out.append(("model.embed_tokens.weight", (V, C), (V, C), 1, 0, 0))
    out += [(f"model.layers.{l}.{n}", s, s, d, p, 0) for l in range(L) for n, s, d, p in per]
    out.append(("model.norm.weight", (C,), (C,), 0, 0, 0))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", (V, C), (V, C), 1, 0, 0))
    return out


def cmd_check_export(a):
    """An export against what transformers loads and against the run's checkpoint: exactly the
    tensor names of GPT2LMHeadModel / LlamaForCausalLM's state (save_pretrained's: no lm_head
    when tied, no GPT-2 mask buffers), each F32 in transformers' shape, format "pt", and each
    value bit for bit the checkpoint's parameter (transposed back where the file is Conv1D)."""
    cfg = json.load(open(os.path.join(a.hf, "config.json")))
    T, meta = read_st(os.path.join(a.hf, "model.safetensors"))
    params = ckpt_params(a.ckpt)
    lay = export_layout(cfg)
    want = {n for n, *_ in lay}
    problems = []
    if set(T) != want:
        problems.append(f"names: missing {sorted(want - set(T))[:4]}, unexpected {sorted(set(T) - want)[:4]}")
    if meta != {"format": "pt"}:
        problems.append(f"metadata {meta}")
    end, ends = 0, {}
    align = lambda x: (x + 63) // 64 * 64
    for decay in (1, 0):  # the decayed tensors first, each at a multiple of 64 elements unless packed
        for n, hf_shape, shape, d, packed, tr in lay:
            if d != decay:
                continue
            off = end if packed else align(end)
            size = int(np.prod(shape))
            end = off + size
            if n not in T:
                continue
            dt, sh, raw = T[n]
            if dt != "F32" or sh != tuple(hf_shape):
                problems.append(f"{n}: {dt} {list(sh)}, transformers expects F32 {list(hf_shape)}")
                continue
            ref = params[off:off + size].reshape(shape)
            got = np.frombuffer(raw, dtype="<f4").reshape(sh)
            if tr:
                got = got.T
            if not np.array_equal(np.ascontiguousarray(got).view(np.uint32), ref.view(np.uint32)):
                problems.append(f"{n}: values differ from the checkpoint's")
        end = align(end)
    if end != len(params):
        problems.append(f"the layout has {end} elements, the checkpoint {len(params)}")
    print(f"{len(T)} tensors, {end} state elements: " + ("; ".join(problems[:6]) if problems else "all as expected"))
    sys.exit(1 if problems else 0)


def cmd_st_info(a):
    """Prints the names (sorted) and the metadata of a safetensors file."""
    T, meta = read_st(a.path)
    print(json.dumps({"names": sorted(T), "dtypes": sorted({v[0] for v in T.values()}), "metadata": meta}))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["batch"] and len(argv) == 2:
        return run_batch({"fh": main}, argv[1])
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gpt2")
    g.add_argument("out")
    for k, d in (("L", 2), ("C", 32), ("NH", 4), ("V", 96), ("T", 16), ("seed", 1)):
        g.add_argument("--" + k, type=int, default=d)
    g.add_argument("--layout", choices=["hub", "pretrained"], default="hub")
    g.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    g.add_argument("--no-config", action="store_true")
    g = sub.add_parser("llama")
    g.add_argument("out")
    for k, d in (("L", 2), ("C", 32), ("NH", 4), ("NKV", 2), ("F", 48), ("V", 96), ("T", 16), ("seed", 1), ("tie", 0)):
        g.add_argument("--" + k, type=int, default=d)
    g.add_argument("--theta", type=float, default=10000.0)
    g.add_argument("--lm-head-copy", action="store_true")
    g.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    g = sub.add_parser("mutate")
    g.add_argument("src")
    g.add_argument("dst")
    for k in ("drop", "add", "reshape", "perturb"):
        g.add_argument("--" + k)
    g = sub.add_parser("shards")
    g.add_argument("out")
    for k, d in (("V", 96), ("T", 16), ("seed", 1)):
        g.add_argument("--" + k, type=int, default=d)
    g = sub.add_parser("check-loss")
    g.add_argument("model")
    g.add_argument("data")
    g.add_argument("metrics")
    g.add_argument("--st")
    g.add_argument("--tol", type=float, default=1e-5)
    g = sub.add_parser("tokens")
    g.add_argument("out")
    for k, d in (("V", 96), ("B", 2), ("T", 16), ("seed", 3)):
        g.add_argument("--" + k, type=int, default=d)
    g = sub.add_parser("check-logits")
    g.add_argument("model")
    g.add_argument("tokens")
    g.add_argument("logits")
    g.add_argument("--tol", type=float, default=1e-4)
    g = sub.add_parser("same-tensors")
    g.add_argument("a")
    g.add_argument("b")
    g = sub.add_parser("same-values")
    g.add_argument("a")
    g.add_argument("b")
    g.add_argument("--ignore", action="append")
    g = sub.add_parser("check-export")
    g.add_argument("hf")
    g.add_argument("ckpt")
    g = sub.add_parser("st-info")
    g.add_argument("path")
    g = sub.add_parser("batch")  # (handled by run_batch before this parser)
    g.add_argument("outdir")
    a = ap.parse_args(argv)
    globals()["cmd_" + a.cmd.replace("-", "_")](a)


def run_batch(mains, outdir):
    """`batch OUTDIR`: runs the commands on stdin, one a line (`HELPER COMMAND ARGS...`, HELPER a key
    of mains), in this one process, so that torch is imported once; command N's output goes to
    OUTDIR/N.out and its exit status to OUTDIR/N.rc."""
    import contextlib
    import shlex
    import traceback
    os.makedirs(outdir, exist_ok=True)
    for n, line in enumerate(l for l in sys.stdin.read().splitlines() if l.strip()):
        argv = shlex.split(line)
        rc = 0
        with open(os.path.join(outdir, f"{n}.out"), "w") as f, contextlib.redirect_stdout(f), \
                contextlib.redirect_stderr(f):
            try:
                mains[argv[0]](argv[1:])
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:  # noqa: BLE001  (the command fails; the batch goes on)
                traceback.print_exc()
                rc = 1
        with open(os.path.join(outdir, f"{n}.rc"), "w") as f:
            f.write(f"{rc}\n")


if __name__ == "__main__":
    main()
