# test_llama_torch.py — wgtrain's whole LLaMA vs a PyTorch LLaMA in Hugging Face's math
# (llama_torch_ref.py): loss, every parameter gradient, then the losses of 10 AdamW steps, on the
# C reference and on WebGPU (lavapipe in CI), through `wgtrain grad --config config.json` on
# files in HF's LlamaForCausalLM layout. Cases: grouped-query, multi-query and plain heads, tied
# and untied lm_head, the largest head size (128), sequence lengths that are no multiple of any
# tile, an ignored target. Also: configs that contradict the tensors, or that this build cannot
# represent, are refused naming the tensor or field. PyTorch runs in float64, so the tolerances
# are float32 error.
import json
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_torch_ref as ref  # noqa: E402
from torch_test_lib import check, finish, run  # noqa: E402

VERBOSE = bool(os.environ.get("WGT_TEST_VERBOSE"))
worst = {}  # backend -> largest gradient error relative to its tensor's largest entry


def case(L, NH, NKV, C, F, V, maxT, B, T, tie, seed, backends, theta=10000.0, eps=1e-5, steps=10, ignore=False,
         rope_scaling=None, family="llama", bias="", extra=None, head_dim=None):
    """bias: "" none, "qkv" (Qwen2), "qkvo" (LLaMA's and Qwen3's attention_bias). head_dim: a head
    size other than C / NH (written as the config's head_dim)."""
    qb, ob = "qkv" in bias, "o" in bias.replace("qkv", "")
    if family == "gemma3_text":  # extra: gemma3_hf_config's keywords (local_theta, window, pattern)
        hd = head_dim or C // NH
        P = ref.gemma3_random_params(L, C, F, V, NH, NKV, hd, tie, seed)
        gcfg = ref.gemma3_hf_config(L, C, F, V, NH, NKV, hd, tie, maxT, theta, eps, **(extra or {}))
    else:
        P = ref.random_params(L, C, F, V, NH, NKV, tie, seed, qkv_bias=qb, o_bias=ob, head_dim=head_dim,
                              qk_norm=family == "qwen3")
    tokens = torch.randint(0, V, (B, T + 1), generator=torch.Generator().manual_seed(seed + 1))
    tok = tokens.numpy().astype(np.int32)
    if ignore:
        tok[0, -1] = -1  # an ignored target (the last column is never an input; inputs may not be negative)
    targets = torch.from_numpy(tok[:, 1:].astype(np.int64))
    tok_in = torch.from_numpy(tok[:, :-1].astype(np.int64))
    tag0 = f"L={L} NH={NH} NKV={NKV} C={C} F={F} V={V} B={B} T={T} tie={int(tie)}"
    if rope_scaling:
        tag0 += f" rope={rope_scaling['rope_type']}"
    tag0 = f"{family} {tag0}" + (f" bias={bias}" if bias else "") + (f" head_dim={head_dim}" if head_dim else "")

    def fwd(Pp):
        if family == "gemma3_text":
            return ref.gemma3_forward(Pp, tok_in, gcfg)
        return ref.forward(Pp, tok_in, L, NH, NKV, theta, eps, rope_scaling, (extra or {}).get("sliding_window") or 0)
    cfg_extra = dict(extra or {})
    if family in ("llama", "qwen3") and bias:
        cfg_extra["attention_bias"] = True
    if head_dim:
        cfg_extra["head_dim"] = head_dim
    with tempfile.TemporaryDirectory() as d:
        mpath, tpath, cpath = (os.path.join(d, n) for n in ("m.safetensors", "t.npy", "config.json"))
        ref.save_safetensors(mpath, P)
        if family == "gemma3_text":
            ref.write_config(cpath, gcfg)
        else:
            ref.write_config(cpath, ref.hf_config(L, C, F, V, NH, NKV, tie, maxT, theta, eps, family=family,
                                                  rope_scaling=rope_scaling, **cfg_extra))
        np.save(tpath, tok)
        Pg = {k: v.clone().requires_grad_(True) for k, v in P.items()}
        loss = ref.loss_fn(fwd(Pg), targets)
        loss.backward()
        for be in backends:
            gpath = os.path.join(d, f"g_{be}.safetensors")
            r = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath, "--backend", be, "--out", gpath])
            tag = f"[{be} {tag0}]"
            check(r.returncode == 0, f"{tag} wgtrain grad ran: {r.stdout} {r.stderr}")
            if r.returncode != 0:
                continue
            got = float(r.stdout.split("loss")[1].split()[0])
            check(abs(got - loss.item()) <= 1e-5 + 1e-5 * abs(loss.item()), f"{tag} loss {got} vs torch {loss.item()}")
            G = ref.load_safetensors(gpath)
            check(sorted(G) == sorted(Pg), f"{tag} gradient names {sorted(set(G) ^ set(Pg))} differ")
            case_worst = 0.0
            for name, p in Pg.items():
                g_ref = p.grad.numpy()
                g = G.get(name)
                if g is None or g.shape != g_ref.shape:
                    check(False, f"{tag} gradient {name} missing or wrong shape")
                    continue
                # float32 accumulation over B*T rows: error relative to the tensor's largest entry
                scale = np.abs(g_ref).max() + 1e-12
                err = np.abs(g - g_ref).max()
                if scale > 1e-9:  # (with T = 1 the keys get an exactly zero gradient: softmax over one key)
                    case_worst = max(case_worst, err / scale)
                check(err <= 2e-4 * scale + 1e-7, f"{tag} grad {name}: max err {err:.3g} (scale {scale:.3g})")
            worst[be] = max(worst.get(be, 0.0), case_worst)
            if VERBOSE:
                print(f"{tag} loss {got:.9f} torch {loss.item():.9f}; worst gradient error {case_worst:.2e} of max")
        if steps and not ignore:
            # AdamW on the same batch: decay on matrices and the embedding, none on norm weights
            lr, wd = 1e-3, 0.1
            Pt = {k: v.clone().requires_grad_(True) for k, v in P.items()}
            decay = [p for p in Pt.values() if p.dim() == 2]
            no_decay = [p for p in Pt.values() if p.dim() == 1]  # norm weights and biases
            opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                                    lr=lr, betas=(0.9, 0.999), eps=1e-8)
            ref_losses = []
            for s in range(steps + 1):
                opt.zero_grad()
                lo = ref.loss_fn(fwd(Pt), targets)
                ref_losses.append(lo.item())
                if s < steps:
                    lo.backward()
                    opt.step()
            for be in backends:
                r = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath, "--backend", be,
                         "--steps", str(steps), "--lr", str(lr), "--weight-decay", str(wd)])
                tag = f"[{be} adamw {tag0}]"
                check(r.returncode == 0, f"{tag} ran: {r.stderr}")
                if r.returncode != 0:
                    continue
                got = [float(line.split()[3]) for line in r.stdout.splitlines() if line.startswith("step ")]
                check(len(got) == steps + 1, f"{tag} printed {len(got)} step losses")
                for s, (a, b) in enumerate(zip(got, ref_losses)):
                    check(abs(a - b) <= 1e-4 + 1e-4 * abs(b), f"{tag} step {s}: loss {a} vs torch {b}")
                check(ref_losses[-1] < ref_losses[0], f"{tag} the loss falls over the steps")


def refusals():
    """Configs that contradict the tensors, or that this build cannot represent, are refused
    naming the tensor or the Hugging Face field."""
    L, NH, NKV, C, F, V, T = 1, 4, 2, 16, 24, 11, 4
    P = ref.random_params(L, C, F, V, NH, NKV, False, 5)
    with tempfile.TemporaryDirectory() as d:
        mpath, tpath, cpath = (os.path.join(d, n) for n in ("m.safetensors", "t.npy", "config.json"))
        ref.save_safetensors(mpath, P)
        np.save(tpath, np.arange(2 * (T + 1), dtype=np.int32).reshape(2, T + 1) % V)
        good = ref.hf_config(L, C, F, V, NH, NKV, False, 8)

        def expect(what, cfg, want, model=None):
            ref.write_config(cpath, cfg)
            r = run(["grad", "--model", model or mpath, "--config", cpath, "--tokens", tpath])
            ok = r.returncode != 0 and want in r.stderr
            check(ok, f"refusal: {what}: exit {r.returncode}, expected a message with {want!r}, got {r.stderr.strip()}")

        ref.write_config(cpath, good)
        r = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
        check(r.returncode == 0, f"refusal: the good config runs: {r.stderr}")
        expect("a size that contradicts a shape", {**good, "intermediate_size": 32}, "model.layers.0.mlp.gate_proj.weight")
        expect("kv heads that contradict k_proj", {**good, "num_key_value_heads": 1}, "model.layers.0.self_attn.k_proj.weight")
        expect("absent num_key_value_heads means = heads", {k: v for k, v in good.items() if k != "num_key_value_heads"},
               "model.layers.0.self_attn.k_proj.weight")
        expect("tied, but the file has another lm_head", {**good, "tie_word_embeddings": True},
               "exact copy of model.embed_tokens.weight")
        expect("one layer too many: a missing tensor", {**good, "num_hidden_layers": 2}, "model.layers.1.")
        expect("heads not dividing hidden_size", {**good, "num_attention_heads": 3}, "num_attention_heads (3) does not divide")
        expect("kv heads not dividing heads", {**good, "num_key_value_heads": 3}, "num_key_value_heads (3) does not divide")
        expect("an odd head size", {**good, "hidden_size": 12, "num_attention_heads": 4}, "odd")
        expect("head size above 256", {**good, "hidden_size": 1024, "num_attention_heads": 2}, "above the supported 256")
        expect("head_dim other than the file's", {**good, "head_dim": 8}, "model.layers.0.self_attn.q_proj.weight")
        expect("an odd head_dim", {**good, "head_dim": 5}, "head size head_dim = 5 is odd")
        expect("a Qwen3 config for a file without q_norm / k_norm", ref.hf_config(L, C, F, V, NH, NKV, False, 8,
               family="qwen3"), "lacks tensor 'model.layers.0.self_attn.q_norm.weight'")
        expect("Qwen3 with sliding-window layers", ref.hf_config(L, C, F, V, NH, NKV, False, 8, family="qwen3",
               layer_types=["sliding_attention"]), '"layer_types" has an entry other than "full_attention"')
        expect("rope_scaling yarn", {**good, "rope_scaling": {"rope_type": "yarn", "factor": 8.0}},
               '"rope_scaling" has rope_type "yarn"; this build computes "default", "linear" and "llama3" RoPE')
        expect("rope_scaling dynamic (old spelling)", {**good, "rope_scaling": {"type": "dynamic", "factor": 2.0}},
               'rope_type "dynamic"')
        expect("rope_parameters longrope", {**good, "rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0}},
               '"rope_parameters" has rope_type "longrope"')
        expect("llama3 without its factors", {**good, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
               "low_freq_factor")
        expect("llama3 with high <= low", {**good, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
               "low_freq_factor": 4.0, "high_freq_factor": 1.0, "original_max_position_embeddings": 8}},
               "high_freq_factor (1) must be above low_freq_factor (4)")
        expect("linear with a factor below 1", {**good, "rope_scaling": {"rope_type": "linear", "factor": 0.5}}, "factor")
        expect("rope_scaling and rope_parameters disagree", {**good, "rope_scaling": {"rope_type": "linear", "factor": 2.0},
               "rope_parameters": {"rope_type": "linear", "factor": 3.0}}, "describe different RoPE")
        expect("another activation", {**good, "hidden_act": "gelu"}, "hidden_act")
        expect("attention_bias, but a file without biases", {**good, "attention_bias": True},
               "lacks tensor 'model.layers.0.self_attn.q_proj.bias'")
        expect("mlp biases", {**good, "mlp_bias": True}, "mlp_bias")
        expect("a Qwen2 config for a file without the q, k, v biases", ref.hf_config(L, C, F, V, NH, NKV, False, 8,
               family="qwen2"), "lacks tensor 'model.layers.0.self_attn.q_proj.bias'")
        expect("Qwen2's per-layer sliding window", ref.hf_config(L, C, F, V, NH, NKV, False, 8, family="qwen2",
               use_sliding_window=True), '"use_sliding_window" must be false')
        # MistralConfig's absent sliding_window is 4096: T = 4 fits, and the loss is LLaMA's
        mcfg = ref.hf_config(L, C, F, V, NH, NKV, False, 8, family="mistral")
        del mcfg["sliding_window"]
        ref.write_config(cpath, mcfg)
        rm = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
        ref.write_config(cpath, good)
        rl = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
        check(rm.returncode == 0 and rm.stdout == rl.stdout, f"mistral without sliding_window runs as llama: {rm.stderr}")
        expect("a missing size", {k: v for k, v in good.items() if k != "hidden_size"}, "hidden_size")
        # sizes whose buffers exceed the machine's memory (64 TiB of parameters) against this small
        # file: the file's header contradicts them, which is found before anything is allocated
        # (test_train.sh has the refusal by size, of the same sizes without a file)
        expect("sizes beyond the host's memory, against a small file", {**good, "hidden_size": 65536,
               "num_attention_heads": 512, "num_key_value_heads": 512, "intermediate_size": 262144,
               "num_hidden_layers": 256}, "tensor 'model.embed_tokens.weight' has shape [11, 16] but the model expects [11, 65536]")
        expect("an unknown model_type", {**good, "model_type": "phi3"}, 'model_type "phi3" is not a family of this build')
        expect("no model_type", {k: v for k, v in good.items() if k != "model_type"}, "model_type")
        expect("a GPT-2 config for a LLaMA file", {"model_type": "gpt2", "n_embd": C, "n_head": NH, "n_layer": L,
                                                   "vocab_size": V, "n_positions": 8}, "wte.weight")
        # an extra tensor: a file with one more layer than the config
        P2 = ref.random_params(2, C, F, V, NH, NKV, False, 6)
        m2 = os.path.join(d, "m2.safetensors")
        ref.save_safetensors(m2, P2)
        expect("an extra tensor", good, "model.layers.1.", model=m2)
        # untied config, tied file (no lm_head.weight)
        P3 = {k: v for k, v in P.items() if k != "lm_head.weight"}
        m3 = os.path.join(d, "m3.safetensors")
        ref.save_safetensors(m3, P3)
        expect("untied config, file without lm_head", good, "lm_head.weight", model=m3)
        ref.write_config(cpath, {**good, "tie_word_embeddings": True})
        r = run(["grad", "--model", m3, "--config", cpath, "--tokens", tpath])
        check(r.returncode == 0, f"refusal: a tied config with a tied file runs: {r.stderr}")
        # a tied model's state dict holds lm_head.weight as a copy of the embedding: accepted, same result
        m4 = os.path.join(d, "m4.safetensors")
        ref.save_safetensors(m4, {**P3, "lm_head.weight": P3["model.embed_tokens.weight"]})
        r4 = run(["grad", "--model", m4, "--config", cpath, "--tokens", tpath])
        check(r4.returncode == 0 and r4.stdout == r.stdout, f"refusal: a tied file with a copied lm_head runs: {r4.stderr}")
        # without a config a LLaMA file is refused with a pointer to --config
        r = run(["grad", "--model", mpath, "--arch", "llama", "--heads", str(NH), "--tokens", tpath])
        check(r.returncode != 0 and "--config" in r.stderr, f"refusal: --arch llama without --config: {r.stderr}")
        ref.write_config(cpath, good)
        r = run(["grad", "--model", mpath, "--config", cpath, "--heads", "2", "--tokens", tpath])
        check(r.returncode != 0 and "--heads 2" in r.stderr, f"refusal: --heads contradicting the config: {r.stderr}")


def gemma3_refusals():
    """What gemma3_text configs this build does not compute are refused naming the field."""
    L, NH, NKV, C, F, V, T, hd = 2, 2, 1, 16, 24, 11, 4, 8
    P = ref.gemma3_random_params(L, C, F, V, NH, NKV, hd, True, 5)
    with tempfile.TemporaryDirectory() as d:
        mpath, tpath, cpath = (os.path.join(d, n) for n in ("m.safetensors", "t.npy", "config.json"))
        ref.save_safetensors(mpath, P)
        np.save(tpath, np.arange(2 * (T + 1), dtype=np.int32).reshape(2, T + 1) % V)
        good = ref.gemma3_hf_config(L, C, F, V, NH, NKV, hd, True, 8, window=4, pattern=2)

        def expect(what, cfg, want):
            ref.write_config(cpath, cfg)
            r = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
            check(r.returncode != 0 and want in r.stderr,
                  f"gemma3 refusal: {what}: exit {r.returncode}, expected {want!r}, got {r.stderr.strip()}")

        ref.write_config(cpath, good)
        r = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
        check(r.returncode == 0, f"gemma3: the good config runs: {r.stderr}")
        expect("logit soft-capping", {**good, "final_logit_softcapping": 30.0}, '"final_logit_softcapping" must be null')
        expect("score soft-capping", {**good, "attn_logit_softcapping": 50.0}, '"attn_logit_softcapping" must be null')
        expect("query_pre_attn_scalar other than head_dim", {**good, "query_pre_attn_scalar": 16},
               "query_pre_attn_scalar is 16 but head_dim is 8")
        expect("rope_scaling", {**good, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}, '"rope_scaling" must be null')
        expect("layer_types that are not periodic", {**good, "layer_types": ["full_attention", "sliding_attention"]},
               "layer_types does not follow one period")
        rp = {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
        expect("rope_parameters of another type", {**good, "rope_parameters": {**rp, "sliding_attention": {
               "rope_type": "linear", "rope_theta": 1e4, "factor": 2.0}}}, "has rope_type linear")
        expect("rope_parameters disagreeing with rope_theta", {**good, "rope_parameters": rp, "rope_theta": 5e5},
               "give one RoPE base of each kind")
        expect("another activation", {**good, "hidden_activation": "gelu"}, "hidden_activation")
        expect("untied config, tied file", {**good, "tie_word_embeddings": False}, "lm_head.weight")
        ref.write_config(cpath, {**good, "rope_parameters": rp})
        r2 = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
        check(r2.returncode == 0 and r2.stdout == r.stdout, f"gemma3: rope_parameters as transformers 5 writes them: {r2.stderr}")
        # with every layer full attention the window has no effect: a window shorter than the
        # sequence gives the loss and gradients of one longer than it
        ref.write_config(cpath, {**good, "sliding_window": 3, "layer_types": ["full_attention"] * L})
        r = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
        ref.write_config(cpath, {**good, "sliding_window": 64, "layer_types": ["full_attention"] * L})
        r2 = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
        check(r.returncode == 0 and r.stdout == r2.stdout, f"gemma3: all full-attention layers ignore the window: {r.stderr}")


def gpt2_config():
    """grad --config also reads GPT-2 configs (n_inner null: 4 n_embd), matching --heads."""
    import gpt2_torch_ref as g2
    L, NH, C, V, maxT, T = 1, 2, 8, 13, 6, 5
    P = g2.random_params(L, C, 4 * C, V, maxT, 3)
    with tempfile.TemporaryDirectory() as d:
        mpath, tpath, cpath = (os.path.join(d, n) for n in ("m.safetensors", "t.npy", "config.json"))
        g2.save_safetensors(mpath, P)
        np.save(tpath, np.arange(T + 1, dtype=np.int32).reshape(1, T + 1) % V)
        cfg = {"model_type": "gpt2", "n_embd": C, "n_head": NH, "n_layer": L, "vocab_size": V, "n_positions": maxT,
               "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
        ref.write_config(cpath, cfg)
        a = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
        b = run(["grad", "--model", mpath, "--heads", str(NH), "--tokens", tpath])
        check(a.returncode == 0 and a.stdout == b.stdout, f"gpt2 --config equals --heads: {a.stdout} {a.stderr} / {b.stdout}")
        ref.write_config(cpath, {**cfg, "n_head": 3})
        r = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
        check(r.returncode != 0 and "n_head (3) does not divide n_embd" in r.stderr, f"gpt2: bad n_head: {r.stderr}")
        ref.write_config(cpath, {**cfg, "n_inner": 16})
        r = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
        check(r.returncode != 0 and "h.0.mlp.c_fc.weight" in r.stderr, f"gpt2: n_inner contradicting: {r.stderr}")
        ref.write_config(cpath, {**cfg, "activation_function": "relu"})
        r = run(["grad", "--model", mpath, "--config", cpath, "--tokens", tpath])
        check(r.returncode != 0 and "activation_function" in r.stderr, f"gpt2: relu: {r.stderr}")


backends = os.environ.get("WGTRAIN_TEST_BACKENDS", "cpu,webgpu").split(",")
torch.set_default_dtype(torch.float64)
# grouped-query (2 query heads per KV head), untied; T = 13
case(L=2, NH=4, NKV=2, C=32, F=48, V=53, maxT=16, B=2, T=13, tie=False, seed=1, backends=backends)
# plain heads, tied, another RoPE base and epsilon; T = 9
case(L=2, NH=2, NKV=2, C=16, F=40, V=37, maxT=9, B=3, T=9, tie=True, seed=2, backends=backends, theta=500000.0,
     eps=1e-6, steps=5)
# multi-query (one KV head), tied, an ignored target, T = 37
case(L=1, NH=4, NKV=1, C=64, F=96, V=300, maxT=40, B=1, T=37, tie=True, seed=3, backends=backends, steps=0, ignore=True)
# the largest head size, 128, untied; T = 20
case(L=1, NH=2, NKV=1, C=256, F=64, V=50, maxT=32, B=1, T=20, tie=False, seed=4, backends=backends, steps=3)
# Llama 3.1's RoPE scaling with bands small enough for this model: wavelengths 6.3 (kept: below
# 64/4), 20 and 63 (mixed), the rest (divided by 8); T = 37 spans them
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}
case(L=2, NH=4, NKV=2, C=64, F=40, V=61, maxT=40, B=2, T=37, tie=False, seed=6, backends=backends, steps=3,
     rope_scaling=LLAMA3)
# linear scaling (position interpolation), multi-query, tied
case(L=1, NH=3, NKV=1, C=24, F=20, V=29, maxT=24, B=2, T=11, tie=True, seed=7, backends=backends, steps=0,
     rope_scaling={"rope_type": "linear", "factor": 4.0})
# Qwen2 (biases on q, k, v, not o): grouped-query, untied, odd sizes, T = 19
case(L=2, NH=6, NKV=2, C=36, F=44, V=47, maxT=20, B=2, T=19, tie=False, seed=8, backends=backends, steps=3,
     family="qwen2", bias="qkv")
# Qwen2 multi-query, tied (Qwen2.5's small models tie)
case(L=1, NH=4, NKV=1, C=32, F=24, V=31, maxT=12, B=1, T=12, tie=True, seed=9, backends=backends, steps=0,
     family="qwen2", bias="qkv")
# LLaMA with attention_bias (q, k, v and o), with llama3 RoPE scaling
case(L=1, NH=2, NKV=2, C=16, F=20, V=23, maxT=10, B=2, T=10, tie=False, seed=10, backends=backends, steps=0,
     bias="qkvo", rope_scaling={**LLAMA3, "original_max_position_embeddings": 16})
# Mistral with a sliding window the sequence fits in (T = window: the full causal attention is the window's)
case(L=2, NH=4, NKV=1, C=32, F=40, V=41, maxT=32, B=2, T=16, tie=False, seed=11, backends=backends, steps=0,
     family="mistral", extra={"sliding_window": 16})
# Mistral with a window shorter than the sequence (T = 16, window 5): the attention's window mask
case(L=1, NH=2, NKV=1, C=16, F=20, V=23, maxT=16, B=2, T=16, tie=False, seed=19, backends=backends, steps=0,
     family="mistral", extra={"sliding_window": 5})
# Mistral without a window (v0.2 and later: sliding_window null)
case(L=1, NH=2, NKV=1, C=16, F=12, V=17, maxT=8, B=1, T=8, tie=True, seed=12, backends=backends, steps=0,
     family="mistral")
# Qwen3: per-head q/k norms, head_dim (12) other than C / NH (8), grouped-query, untied, T = 13
case(L=2, NH=4, NKV=2, C=32, F=40, V=37, maxT=16, B=2, T=13, tie=False, seed=13, backends=backends, steps=3,
     family="qwen3", head_dim=12, theta=1000000.0, eps=1e-6)
# Qwen3 multi-query, tied, head_dim = C / NH, attention_bias (q, k, v and o), T = 7
case(L=1, NH=3, NKV=1, C=24, F=20, V=29, maxT=8, B=2, T=7, tie=True, seed=14, backends=backends, steps=0,
     family="qwen3", bias="qkvo")
# Qwen3-0.6B's proportions (head_dim twice C / NH: the q projection wider than the model), T = 9
case(L=1, NH=4, NKV=2, C=32, F=24, V=41, maxT=12, B=1, T=9, tie=True, seed=15, backends=backends, steps=0,
     family="qwen3", head_dim=16)
# head size 256 (Gemma-3's; qwen3 head_dim 256 on a 32-wide model): the attention's row kernels on
# WebGPU, where no tile fits the software GPU's 32 KiB of workgroup memory
case(L=1, NH=2, NKV=1, C=32, F=24, V=23, maxT=12, B=2, T=11, tie=False, seed=16, backends=backends, steps=2,
     family="qwen3", head_dim=256)
# Gemma-3: sliding and full layers (pattern 2: layer 1 full) with their RoPE bases, head_dim 16
# (C / NH is 8), grouped heads, tied (as released); T = 13 within the window
case(L=2, NH=4, NKV=2, C=32, F=40, V=37, maxT=16, B=2, T=13, tie=True, seed=17, backends=backends, steps=3,
     family="gemma3_text", head_dim=16, theta=1e6, eps=1e-6, extra={"local_theta": 1e4, "window": 16, "pattern": 2})
# Gemma-3 at its head size, 256 (the attention's row kernels on WebGPU), multi-query, untied;
# layer 0 slides with a window (5) shorter than T = 9, layer 1 full
case(L=2, NH=2, NKV=1, C=24, F=20, V=29, maxT=12, B=1, T=9, tie=False, seed=18, backends=backends, steps=0,
     family="gemma3_text", head_dim=256, theta=1e6, eps=1e-6, extra={"window": 5, "pattern": 2})
# one token
case(L=1, NH=2, NKV=1, C=8, F=12, V=5, maxT=4, B=2, T=1, tie=False, seed=5, backends=backends, steps=3)
refusals()
gemma3_refusals()
gpt2_config()
for be, w in worst.items():
    print(f"{be}: largest gradient error {w:.2e} of its tensor's largest entry (bound 2e-4)")
sys.exit(finish())
