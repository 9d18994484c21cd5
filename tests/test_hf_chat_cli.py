"""test_hf_chat_cli.py — `wgtrain tokenize --tokenizer DIR --chat [--mask]` on the real Llama-3.1,
Qwen3 and Gemma-3 tokenizers: the ids equal rendering the same messages with python3-jinja2,
configured as transformers configures it (tests/test_chat_template_ref.py's environment), then
`wgtrain tokenize --tokenizer DIR` of that text; the ids --mask marks decode exactly to each
assistant message's content followed by the template text up to and including the model's
end-of-turn token; --add-generation-prompt and --chat-template FILE change the rendering as
Jinja2's does. Prints "N passed, N failed"."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_chat_template_ref as ref  # noqa: E402 (the Jinja2 environment of transformers)

ROOT = ref.ROOT
W = os.environ.get("WGT", os.path.join(ROOT, "build", "wgtrain"))
HF = os.path.join(ROOT, "third_party", "hf-tokenizers")
END_OF_TURN = {"llama3_1": "<|eot_id|>", "qwen3": "<|im_end|>", "gemma3": "<end_of_turn>"}

MESSAGES = [
    {"role": "system", "content": "You are terse. Answer in one line."},
    {"role": "user", "content": "Hi there! What's 2+2?"},
    {"role": "assistant", "content": "Four: 2+2=4 — ünïcödé and 日本語 🙂."},
    {"role": "user", "content": "And <|im_end|> or <end_of_turn> written by a user?"},
    {"role": "assistant", "content": "Those are\nspecial tokens.\tIndeed"},
]

passed = failed = 0


def check(what, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what} {detail}", file=sys.stderr)


def wgt(args, stdin):
    r = subprocess.run([W] + args, input=stdin, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"wgtrain {' '.join(args)} failed: {r.stderr.decode(errors='replace')}")
    return r.stdout


def jinja_render(template, model, gen_prompt):
    cfg = json.load(open(os.path.join(HF, model, "tokenizer_config.json"), encoding="utf-8"))
    ctx = {"messages": MESSAGES, "add_generation_prompt": gen_prompt}
    for k in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = cfg.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            ctx[k] = v
    return ref.make_env().from_string(template).render(**ctx)


def main():
    if not os.access(W, os.X_OK):
        print("build/wgtrain is missing: run make first")
        print("0 passed, 1 failed")
        return 1
    msgs = json.dumps(MESSAGES, ensure_ascii=False).encode()
    for model in ("llama3_1", "qwen3", "gemma3"):
        d = os.path.join(HF, model)
        template = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))["chat_template"]
        for gen in (False, True):
            text = jinja_render(template, model, gen)
            want = wgt(["tokenize", "--tokenizer", d], text.encode()).split()
            args = ["tokenize", "--tokenizer", d, "--chat"] + (["--add-generation-prompt"] if gen else [])
            got = wgt(args, msgs).split()
            check(f"{model} gen={gen}: --chat ids equal jinja2 + tokenize ({len(want)} ids)", got == want)
        out = wgt(["tokenize", "--tokenizer", d, "--chat", "--mask"], msgs).decode().split("\n")
        ids, mask = out[0].split(), out[1].split()
        check(f"{model}: one mask value per id", len(ids) == len(mask) and set(mask) <= {"0", "1"})
        text = jinja_render(template, model, False)
        expect, pos = "", 0
        for m in MESSAGES:
            if m["role"] != "assistant":
                continue
            a = text.index(m["content"], pos)
            e = text.index(END_OF_TURN[model], a + len(m["content"])) + len(END_OF_TURN[model])
            expect += text[a:e]
            pos = e
        kept = " ".join(i for i, k in zip(ids, mask) if k == "1")
        dec = wgt(["tokenize", "--tokenizer", d, "--decode"], kept.encode()).decode()
        check(f"{model}: the masked ids decode to the assistant turns", dec == expect, f"\n got {dec!r}\nwant {expect!r}")
        # --chat-template FILE overrides the config's
        with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False, encoding="utf-8") as f:
            f.write("{% for m in messages %}[{{ m.role }}] {{ m.content }}" + END_OF_TURN[model] + "{% endfor %}")
        try:
            custom = open(f.name, encoding="utf-8").read()
            want = wgt(["tokenize", "--tokenizer", d], jinja_render(custom, model, False).encode()).split()
            got = wgt(["tokenize", "--tokenizer", d, "--chat", "--chat-template", f.name], msgs).split()
            check(f"{model}: --chat-template FILE is used", got == want)
        finally:
            os.unlink(f.name)
    # refusals
    r = subprocess.run([W, "tokenize", "--tokenizer", os.path.join(HF, "llama2"), "--chat"], input=msgs, capture_output=True)
    check("llama2 (no chat template) is refused, naming --chat-template",
          r.returncode != 0 and b"--chat-template" in r.stderr, r.stderr)
    r = subprocess.run([W, "tokenize", "--tokenizer", os.path.join(HF, "qwen3"), "--chat"], input=b'{"role": "user"}',
                       capture_output=True)
    check("messages that are not an array are refused", r.returncode != 0 and b"JSON array" in r.stderr, r.stderr)
    r = subprocess.run([W, "tokenize", "--tokenizer", os.path.join(HF, "qwen3"), "--mask"], input=b"x", capture_output=True)
    check("--mask without --chat is refused", r.returncode != 0 and b"go with --chat" in r.stderr, r.stderr)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
