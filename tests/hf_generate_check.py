"""hf_generate_check.py — greedy continuations of `wgtrain sample --model DIR --ids --temperature 0`
(the key/value cache) against Hugging Face transformers' generate(do_sample=False) on the same
directory, in float32, for each model directory given (exported runs, or Hub models such as gpt2,
Llama 3.2 1B, Qwen2.5 0.5B). Needs transformers and a GPU (or patience): run by hand, not in CI.

  python3 tests/hf_generate_check.py [--device webgpu|cpu] [--tokens 64] DIR [DIR ...]
  python3 tests/hf_generate_check.py --random qwen3,gemma3_text [DIR ...]

--random makes, for each family named, a random float32 model of that family written as a Hugging
Face directory with the real tokenizer of third_party/hf-tokenizers (qwen3: q/k norms, head_dim
not hidden / heads, grouped-query attention; gemma3_text: head size 256, sliding layers with a
window of 16, shorter than prompt + reply, between full ones, one kv head), with O(1)-scale
weights (tests/llama_torch_ref.py) so that the logits are far from uniform, and checks it as a
directory given.

For each directory and a few prompts (ids from the directory's own tokenizer through `wgtrain
tokenize`), both sides generate --tokens ids greedily, without stopping at end-of-text
(wgtrain's --ignore-eos; generate with the generation config's eos_token_id cleared, and its
repetition penalty and n-gram blocking off, as wgtrain's defaults). The ids
must be equal up to the first position where transformers' top-2 logits are within 1e-4 of each
other (a near tie that float32 rounding may break either way); that position and the match
length are printed. Exit code 0 when every case matches."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = os.environ.get("WGT", os.path.join(ROOT, "build", "wgtrain"))
PROMPTS = ["The capital of France is", "def fibonacci(n):\n", "Once upon a time, in a small village,",
           "1, 2, 3, 4, 5,"]


def wgt(args, inp=None):
    p = subprocess.run([W] + args, input=inp, capture_output=True)
    if p.returncode:
        sys.exit(f"wgtrain {' '.join(args)}: {p.stderr.decode(errors='replace')}")
    return p.stdout.decode()


def vocab_size(tok_dir):
    import json
    t = json.load(open(os.path.join(tok_dir, "tokenizer.json")))
    return max(max(t["model"]["vocab"].values()), max(a["id"] for a in t.get("added_tokens", []))) + 1


def make_random(family, d):
    """A random model of `family` in directory d, with the real tokenizer of its family."""
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import finetune_helper as fh
    import llama_torch_ref as ref
    tok = os.path.join(ROOT, "third_party", "hf-tokenizers", "qwen3" if family == "qwen3" else "gemma3")
    V = vocab_size(tok)
    os.makedirs(d, exist_ok=True)
    if family == "qwen3":
        P = ref.random_params(4, 256, 512, V, 8, 2, True, 5, torch.float32, head_dim=64, qk_norm=True)
        cfg = ref.hf_config(4, 256, 512, V, 8, 2, True, 4096, theta=1e6, eps=1e-6, family="qwen3", head_dim=64)
    elif family == "gemma3_text":
        P = ref.gemma3_random_params(4, 256, 512, V, 2, 1, 256, True, 5, torch.float32)
        cfg = ref.gemma3_hf_config(4, 256, 512, V, 2, 1, 256, True, 4096, window=16, pattern=2)
    else:
        sys.exit(f"--random: no such family {family!r} (qwen3, gemma3_text)")
    fh.write_st(os.path.join(d, "model.safetensors"), P, "F32", {"format": "pt"})
    ref.write_config(os.path.join(d, "config.json"), cfg)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok, f), d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--device", default="webgpu")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--random", default="", help="comma list of families: random models of them are checked too")
    a = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM
    tmp = tempfile.mkdtemp(prefix="wgt_hfgen_")
    for fam in filter(None, a.random.split(",")):
        make_random(fam, os.path.join(tmp, "random_" + fam))
        a.dirs.append(os.path.join(tmp, "random_" + fam))
    if not a.dirs:
        sys.exit("give model directories or --random FAMILIES")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    bad = 0
    for d in a.dirs:
        model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).to(dev).eval()
        gc = model.generation_config
        gc.eos_token_id = None  # both sides run the full length
        gc.repetition_penalty, gc.no_repeat_ngram_size = 1.0, 0
        for text in PROMPTS:
            ids = [int(x) for x in wgt(["tokenize", "--tokenizer", d], text.encode()).split()]
            out = wgt(["sample", "--model", d, "--ids", "--prompt", " ".join(map(str, ids)), "--max-tokens",
                       str(a.tokens), "--temperature", "0", "--ignore-eos", "--device", a.device])
            got = [int(x) for x in out.split()][len(ids):]
            with torch.no_grad():
                g = model.generate(torch.tensor([ids], device=dev), do_sample=False, max_new_tokens=a.tokens,
                                   num_beams=1, output_scores=True, return_dict_in_generate=True, pad_token_id=0,
                                   generation_config=gc)
            want = g.sequences[0, len(ids):].tolist()
            # the first near tie of transformers' own logits: past it either continuation is right
            tie = len(want)
            for i, s in enumerate(g.scores):
                top = torch.topk(s[0].float(), 2).values
                if float(top[0] - top[1]) < 1e-4:
                    tie = i
                    break
            same = 0
            while same < min(len(got), len(want)) and got[same] == want[same]:
                same += 1
            ok = same >= min(tie + 1, len(want))
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {os.path.basename(os.path.normpath(d))} {text[:24]!r}: {same}/{len(want)} "
                  f"ids equal" + (f" (near tie at {tie})" if tie < len(want) else ""))
    shutil.rmtree(tmp, ignore_errors=True)
    print("all equal" if not bad else f"{bad} cases differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
