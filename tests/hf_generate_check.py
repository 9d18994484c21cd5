"""hf_generate_check.py — greedy continuations of `wgtrain sample --model DIR --ids --temperature 0`
(the key/value cache) against Hugging Face transformers' generate(do_sample=False) on the same
directory, in float32, for each model directory given (exported runs, or Hub models such as gpt2,
Llama 3.2 1B, Qwen2.5 0.5B). Needs transformers and a GPU (or patience): run by hand, not in CI.

  python3 tests/hf_generate_check.py [--device webgpu|cpu] [--tokens 64] DIR [DIR ...]

For each directory and a few prompts (ids from the directory's own tokenizer through `wgtrain
tokenize`), both sides generate --tokens ids greedily, without stopping at end-of-text
(wgtrain's --ignore-eos; generate with the generation config's eos_token_id cleared, and its
repetition penalty and n-gram blocking off, as wgtrain's defaults). The ids
must be equal up to the first position where transformers' top-2 logits are within 1e-4 of each
other (a near tie that float32 rounding may break either way); that position and the match
length are printed. Exit code 0 when every case matches."""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = os.environ.get("WGT", os.path.join(ROOT, "build", "wgtrain"))
PROMPTS = ["The capital of France is", "def fibonacci(n):\n", "Once upon a time, in a small village,",
           "1, 2, 3, 4, 5,"]


def wgt(args, inp=None):
    p = subprocess.run([W] + args, input=inp, capture_output=True)
    if p.returncode:
        sys.exit(f"wgtrain {' '.join(args)}: {p.stderr.decode(errors='replace')}")
    return p.stdout.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--device", default="webgpu")
    ap.add_argument("--tokens", type=int, default=64)
    a = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM
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
    print("all equal" if not bad else f"{bad} cases differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
