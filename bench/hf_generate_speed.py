# hf_generate_speed.py — the peer of bench_generate.c: Hugging Face transformers' generate on the
# same shapes with random weights, fp32 (TF32 off), greedy, with its key/value cache, on the same
# device. Prefill tokens/s: B prompts of P tokens in one forward (batched, as generate runs them);
# decode tokens/s: B·N new tokens over generate's time minus the prefill's. Prints a table like
# bench_generate's.
#   python3 bench/hf_generate_speed.py [--shape gpt2-124m|llama-1b|tiny] [--prompt P] [--tokens N]
import argparse
import time

import torch


def make(shape):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    if shape == "gpt2-124m":
        return GPT2LMHeadModel(GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024))
    if shape == "llama-1b":
        return LlamaForCausalLM(LlamaConfig(num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                                            hidden_size=2048, intermediate_size=8192, vocab_size=128256,
                                            max_position_embeddings=2048, rope_theta=500000.0, tie_word_embeddings=True,
                                            rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                                          "high_freq_factor": 4.0,
                                                          "original_max_position_embeddings": 8192}))
    return LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                        hidden_size=64, intermediate_size=128, vocab_size=512,
                                        max_position_embeddings=512))


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="gpt2-124m")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = make(a.shape).to(a.device).float().eval()
    model.generation_config.eos_token_id = None  # every run the full length
    V = model.config.vocab_size
    print(f"shape {a.shape}, transformers generate on {a.device}, prompt {a.prompt}, new tokens {a.tokens}")
    print(f"{'batch':<6} {'prefill tok/s':>14} {'decode tok/s':>14}")
    for B in (1, 8):
        ids = (torch.arange(a.prompt).repeat(B, 1) * 7919 + 13) % V
        ids = ids.to(a.device)
        with torch.no_grad():
            for _ in range(2):  # warm-up
                model.generate(ids, do_sample=False, max_new_tokens=4, pad_token_id=0)
            sync(a.device)
            t0 = time.perf_counter()
            model(ids, use_cache=True)
            sync(a.device)
            t1 = time.perf_counter()
            model.generate(ids, do_sample=False, max_new_tokens=a.tokens, pad_token_id=0)
            sync(a.device)
            t2 = time.perf_counter()
        pre = t1 - t0
        print(f"{B:<6} {B * a.prompt / pre:14.1f} {B * a.tokens / max(t2 - t1 - pre, 1e-9):14.1f}")


if __name__ == "__main__":
    main()
