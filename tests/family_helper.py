# family_helper.py — the Python side of tests/test_families.sh: writes a random Hugging Face model
# directory of the LLaMA-computation families (llama with or without attention_bias and RoPE
# scaling, mistral, qwen2, qwen3 with its q/k norms and a head_dim; tied or untied) with llama_torch_ref.py, and compares an export's
# config.json and tensor names with the original's. `batch OUTDIR` runs many commands of this
# helper and of finetune_helper.py in one process (finetune_helper.run_batch).
import argparse
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import finetune_helper as fh  # noqa: E402

torch = fh.torch  # imported at first use (check-export needs neither)
ref = fh.lref

L, C, F, V, NH, NKV, T = 2, 32, 40, 96, 4, 2, 16
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 32}


def cmd_make(a):
    os.makedirs(a.out, exist_ok=True)
    if a.family == "gemma3_text":  # head_dim 16, a sliding and a full layer
        P = ref.gemma3_random_params(L, C, F, V, NH, NKV, a.head_dim or 16, bool(a.tie), a.seed, torch.float32)
        fh.write_st(os.path.join(a.out, "model.safetensors"), P, a.dtype, {"format": "pt"})
        ref.write_config(os.path.join(a.out, "config.json"),
                         ref.gemma3_hf_config(L, C, F, V, NH, NKV, a.head_dim or 16, bool(a.tie), T, eps=1e-6,
                                              window=a.window or T, pattern=2))
        return
    qkv = a.family == "qwen2" or a.bias
    P = ref.random_params(L, C, F, V, NH, NKV, bool(a.tie), a.seed, torch.float32, qkv_bias=qkv, o_bias=a.bias,
                          head_dim=a.head_dim or None, qk_norm=a.family == "qwen3")
    extra = {}
    if a.family == "qwen3":
        extra["attention_bias"] = bool(a.bias)
        if a.head_dim:
            extra["head_dim"] = a.head_dim
    if a.family == "llama":
        extra["attention_bias"] = bool(a.bias)
        if a.rope:
            extra["rope_scaling"] = LLAMA3 if a.rope == "llama3" else {"rope_type": "linear", "factor": 2.0}
    if a.family == "mistral" and a.window:
        extra["sliding_window"] = a.window
    fh.write_st(os.path.join(a.out, "model.safetensors"), P, a.dtype, {"format": "pt"})
    ref.write_config(os.path.join(a.out, "config.json"),
                     ref.hf_config(L, C, F, V, NH, NKV, bool(a.tie), T, theta=50000.0, eps=1e-5, family=a.family,
                                   **extra))


# the fields of each family's config class that decide the computation
KEYS = ["model_type", "architectures", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
        "num_hidden_layers", "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "tie_word_embeddings",
        "hidden_act", "rope_scaling"]
FAMILY_KEYS = {"llama": ["attention_bias", "mlp_bias"], "mistral": ["sliding_window"], "qwen2": ["use_sliding_window"],
               "qwen3": ["use_sliding_window", "attention_bias", "head_dim"],
               "gemma3_text": ["head_dim", "query_pre_attn_scalar", "rope_local_base_freq", "sliding_window", "layer_types",
                               "hidden_activation"]}


def cmd_check_export(a):
    """The export's config.json gives the original's settings, its tensors the original's names."""
    o = json.load(open(os.path.join(a.orig, "config.json")))
    e = json.load(open(os.path.join(a.export, "config.json")))
    bad = [k for k in KEYS + FAMILY_KEYS[o["model_type"]] if o.get(k) != e.get(k)]
    names_o = set(fh.read_st(os.path.join(a.orig, "model.safetensors"))[0])
    names_e = set(fh.read_st(os.path.join(a.export, "model.safetensors"))[0])
    if names_o != names_e:
        bad.append(f"tensor names: missing {sorted(names_o - names_e)[:3]}, unexpected {sorted(names_e - names_o)[:3]}")
    print("; ".join(f"{k}: {o.get(k)!r} -> {e.get(k)!r}" if not k.startswith("tensor") else k for k in bad) or "same")
    sys.exit(1 if bad else 0)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["batch"] and len(argv) == 2:  # lines of this helper ("family ...") or finetune_helper's ("fh ...")
        return fh.run_batch({"family": main, "fh": fh.main}, argv[1])
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("make")
    g.add_argument("out")
    g.add_argument("--family", choices=["llama", "mistral", "qwen2", "qwen3", "gemma3_text"], required=True)
    g.add_argument("--tie", type=int, default=0)
    g.add_argument("--bias", type=int, default=0)  # llama: attention_bias
    g.add_argument("--rope", choices=["", "llama3", "linear"], default="")
    g.add_argument("--window", type=int, default=0)  # mistral: sliding_window (0: null); gemma3_text: (0: T)
    g.add_argument("--head-dim", type=int, default=0)  # qwen3: head_dim (0: C / NH)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    g = sub.add_parser("check-export")
    g.add_argument("orig")
    g.add_argument("export")
    a = ap.parse_args(argv)
    globals()["cmd_" + a.cmd.replace("-", "_")](a)


if __name__ == "__main__":
    main()
