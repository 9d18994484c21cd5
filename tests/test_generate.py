"""test_generate.py — `wgtrain sample --model` and `wgtrain chat` on a random Qwen2-shaped Hugging Face
directory with the real Qwen3 tokenizer (151,669 ids, its ChatML template), against a plain PyTorch greedy
loop over tests/llama_torch_ref.py's forward (float64, the whole sequence recomputed per token: no cache):
  - sample --ids --temperature 0: the generated ids equal torch's argmax ids, on the C backend and on
    WebGPU (the software GPU in CI), through the key/value cache; and for a batch of prompts of
    different lengths (--prompts FILE), each row as torch's loop on its prompt alone;
  - sample --ids on random Qwen3 (q/k norms, head_dim 12) and Gemma-3 (sliding layers with a window of 4
    shorter than prompt + reply, head size 16) models without a tokenizer: greedy ids equal those of
    llama_torch_ref.py's forward / gemma3_forward in float64, on both backends;
  - chat with a JSON messages array on stdin (a pipe): the reply equals torch's greedy continuation of
    the conversation rendered with add_generation_prompt (ids from `wgtrain tokenize --chat`), decoded,
    for a first turn with --system and for a later turn with history;
  - chat through a pseudo-terminal: a line typed at the prompt gets the same reply as from the pipe;
    Ctrl-C at the prompt gives a new one, Ctrl-C during a reply stops it and the conversation goes on,
    Ctrl-D ends the session with exit code 0;
  - --stop ends a reply before the stop text; bad input is refused with a message naming it.
Greedy argmax can flip on a near tie between float32 and float64 logits: the random model's top two
logits are checked to differ by more than 1e-3 at each step (the float32 error is ~1e-5), so a
mismatch means a wrong computation. Prints "N passed, N failed"."""
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import time

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import finetune_helper as fh  # noqa: E402
import llama_torch_ref as ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = os.environ.get("WGT", os.path.join(ROOT, "build", "wgtrain"))
TOK = os.path.join(ROOT, "third_party", "hf-tokenizers", "qwen3")
L, C, F, NH, NKV, THETA, EPS = 2, 32, 48, 4, 1, 1000000.0, 1e-6
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def run(args, inp=None):
    p = subprocess.run([W] + args, input=inp, capture_output=True, timeout=600)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def vocab_size():
    t = json.load(open(os.path.join(TOK, "tokenizer.json")))
    return max(max(t["model"]["vocab"].values()), max(a["id"] for a in t["added_tokens"])) + 1


def make_model(d, V):
    os.makedirs(d, exist_ok=True)
    P = ref.random_params(L, C, F, V, NH, NKV, True, 7, torch.float32, qkv_bias=True)
    fh.write_st(os.path.join(d, "model.safetensors"), P, "F32", {"format": "pt"})
    ref.write_config(os.path.join(d, "config.json"),
                     ref.hf_config(L, C, F, V, NH, NKV, True, 256, theta=THETA, eps=EPS, family="qwen2"))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOK, f), d)
    return {k: v.to(torch.float64) for k, v in P.items()}


def torch_greedy(P, ids, n, stop=(), fwd=None):
    """n greedy ids after ids (fewer at a stop id), recomputing the whole sequence per token;
    fwd(P, idx): the logits (default: this file's Qwen2-shaped model)."""
    fwd = fwd or (lambda P_, idx: ref.forward(P_, idx, L, NH, NKV, THETA, EPS))
    ids, out, margin = list(ids), [], float("inf")
    for _ in range(n):
        lg = fwd(P, torch.tensor([ids]))[0, -1]
        top = torch.topk(lg, 2).values
        margin = min(margin, float(top[0] - top[1]))
        nxt = int(torch.argmax(lg))
        if nxt in stop:
            break
        out.append(nxt)
        ids.append(nxt)
    return out, margin


def tokenize_chat(d, messages):
    rc, out, err = run(["tokenize", "--tokenizer", d, "--chat", "--add-generation-prompt"], json.dumps(messages).encode())
    assert rc == 0, err
    return [int(x) for x in out.split()]


def decode(d, ids):
    rc, out, err = run(["tokenize", "--tokenizer", d, "--decode"], " ".join(map(str, ids)).encode())
    assert rc == 0, err
    return out


def special_id(d, text):
    rc, out, err = run(["tokenize", "--tokenizer", d], text.encode())
    ids = out.split()
    assert rc == 0 and len(ids) == 1, err
    return int(ids[0])


def family_models(tmp):
    """Random float32 models of the families with per-head q/k norms, written as Hugging Face directories
    without a tokenizer (sample --ids needs none): (name, directory, float64 parameters, forward)."""
    V, out = 300, []
    # Qwen3: q_norm / k_norm, head_dim 12 (not hidden / heads), grouped-query attention
    d = os.path.join(tmp, "qwen3")
    os.makedirs(d)
    P = ref.random_params(2, 32, 48, V, 4, 2, True, 11, torch.float32, head_dim=12, qk_norm=True)
    fh.write_st(os.path.join(d, "model.safetensors"), P, "F32", {"format": "pt"})
    ref.write_config(os.path.join(d, "config.json"),
                     ref.hf_config(2, 32, 48, V, 4, 2, True, 64, theta=THETA, eps=EPS, family="qwen3", head_dim=12))
    out.append(("qwen3", d, {k: v.to(torch.float64) for k, v in P.items()},
                lambda P_, idx: ref.forward(P_, idx, 2, 4, 2, THETA, EPS)))
    # Gemma-3: three layers (sliding, full, sliding) with a window of 4 (shorter than prompt + reply: the
    # cache keeps every key, the attention masks), head size 16, one kv head, an untied lm_head
    d = os.path.join(tmp, "gemma3")
    os.makedirs(d)
    P = ref.gemma3_random_params(3, 24, 40, V, 4, 1, 16, False, 13, torch.float32)
    cfg = ref.gemma3_hf_config(3, 24, 40, V, 4, 1, 16, False, 64, window=4, pattern=2)
    fh.write_st(os.path.join(d, "model.safetensors"), P, "F32", {"format": "pt"})
    ref.write_config(os.path.join(d, "config.json"), cfg)
    out.append(("gemma3_text", d, {k: v.to(torch.float64) for k, v in P.items()},
                lambda P_, idx: ref.gemma3_forward(P_, idx, cfg)))
    return out


class Pty:
    """A command on a pseudo-terminal: what it wrote so far (buf), keys sent to it."""

    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        self.buf = b""

    def read_until(self, token, since=0, limit=120):
        end = time.time() + limit
        while token not in self.buf[since:] and time.time() < end:
            r, _, _ = select.select([self.fd], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                self.buf += chunk
        return token in self.buf[since:]

    def send(self, keys):
        """Sends keys; returns where the output after them starts."""
        at = len(self.buf)
        os.write(self.fd, keys)
        return at

    def end(self, keys, limit=60):
        """Sends keys once the prompt is back and the line editor reads (keys typed while the
        terminal is between two reads can be lost); the exit code, or -1 (killed after limit s)."""
        self.read_until(b"> ", max(0, len(self.buf) - 2), limit=limit)
        time.sleep(0.5)
        os.write(self.fd, keys)
        end = time.time() + limit
        while time.time() < end:
            self.read_until(b"\0", limit=0.2)  # (drains the output)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        return -1


def main():
    if not os.path.exists(os.path.join(TOK, "tokenizer.json")):
        print("the Qwen3 tokenizer is missing (scripts/setup.sh installs it)")
        print("0 passed, 1 failed")
        return 1
    tmp = tempfile.mkdtemp(prefix="wgt_gen_")
    try:
        d = os.path.join(tmp, "qwen")
        P = make_model(d, vocab_size())
        # ---- sample: greedy ids through the cache against torch's uncached loop
        prompt = [9707, 11, 1879, 0, 576, 264, 1273]
        want, margin = torch_greedy(P, prompt, 12)
        check("the random model has no near ties (margin %.2e)" % margin, margin > 1e-3)
        for dev in ("cpu", "webgpu"):
            rc, out, err = run(["sample", "--model", d, "--ids", "--prompt", " ".join(map(str, prompt)), "--max-tokens",
                                "12", "--temperature", "0", "--ignore-eos", "--device", dev])
            got = [int(x) for x in out.split()][len(prompt):] if rc == 0 else None
            check(f"sample --model greedy ids on {dev} equal torch's", got == want, f"{got} vs {want} {err}")
        # qwen3 and gemma3_text: greedy ids through the cache against their torch forwards
        fprompt = [5, 77, 123, 9, 250, 31, 64]
        for fam, fd, FP, fwd in family_models(tmp):
            want_f, margin_f = torch_greedy(FP, fprompt, 12, fwd=fwd)
            check(f"the random {fam} model has no near ties (margin {margin_f:.2e})", margin_f > 1e-3)
            for dev in ("cpu", "webgpu"):
                rc, out, err = run(["sample", "--model", fd, "--ids", "--prompt", " ".join(map(str, fprompt)),
                                    "--max-tokens", "12", "--temperature", "0", "--device", dev])
                got = [int(x) for x in out.split()][len(fprompt):] if rc == 0 else None
                check(f"sample --model greedy ids of {fam} on {dev} equal torch's", got == want_f,
                      f"{got} vs {want_f} {err}")
        # a batch of prompts (--prompts): each row equals torch's greedy ids for its own prompt
        prompts = [prompt, [1, 2, 3], [500, 600, 700, 800, 900, 1000, 1100, 1200, 1300, 1400]]
        pf = os.path.join(tmp, "prompts.txt")
        with open(pf, "w") as f:
            f.write("\n".join(" ".join(map(str, p)) for p in prompts) + "\n")
        rc, out, err = run(["sample", "--model", d, "--ids", "--prompts", pf, "--max-tokens", "8", "--temperature", "0",
                            "--ignore-eos", "--device", "cpu"])
        rows = [[int(x) for x in line.split()] for line in out.decode().splitlines()] if rc == 0 else []
        for i, p in enumerate(prompts):
            want_b, margin_b = torch_greedy(P, p, 8)
            got_b = rows[i][len(p):] if i < len(rows) else None
            check(f"sample --prompts row {i} equals torch's greedy ids (margin {margin_b:.1e})", got_b == want_b,
                  f"{got_b} vs {want_b} {err}")
        # ---- chat from a pipe: the reply is torch's greedy continuation, decoded
        stop = {special_id(d, "<|im_end|>"), special_id(d, "<|endoftext|>")}
        conv1 = [{"role": "user", "content": "Hello! What is 2+2?"}]
        conv2 = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                 {"role": "assistant", "content": "Hello there."}, {"role": "user", "content": "And now?"}]
        for name, msgs, args, full in (("first turn with --system", conv1, ["--system", "Be brief."],
                                        [{"role": "system", "content": "Be brief."}] + conv1),
                                       ("a turn with history", conv2, [], conv2)):
            ids = tokenize_chat(d, full)
            gen, margin = torch_greedy(P, ids, 10, stop)
            want_text = decode(d, gen) + b"\n"
            for dev in ("cpu", "webgpu") if name.startswith("first") else ("cpu",):  # (lavapipe: ~13 s a run)
                rc, out, err = run(["chat", "--model", d, "--temperature", "0", "--max-tokens", "10", "--device", dev]
                                   + args, json.dumps(msgs).encode())
                check(f"chat {name} on {dev}: exit 0", rc == 0, err)
                check(f"chat {name} on {dev}: the reply is torch's greedy one (margin {margin:.1e})", out == want_text,
                      f"{out!r} vs {want_text!r}")
        # --stop: the reply ends before the stop text (the first 3 bytes of the full reply)
        full = decode(d, torch_greedy(P, tokenize_chat(d, conv1), 10, stop)[0])
        stop_text = full[3:6].decode(errors="ignore")
        if len(stop_text) >= 1 and full[3:6] == stop_text.encode():
            rc, out, err = run(["chat", "--model", d, "--temperature", "0", "--max-tokens", "10", "--device", "cpu",
                                "--stop", stop_text], json.dumps(conv1).encode())
            check("chat --stop ends the reply before the stop text", rc == 0 and out == full[:full.find(stop_text.encode())]
                  + b"\n", f"{out!r} {full!r} {stop_text!r} {err}")
        # ---- a terminal: one line typed, the reply, Ctrl-D
        want = decode(d, torch_greedy(P, tokenize_chat(d, conv1), 10, stop)[0])
        t = Pty([W, "chat", "--model", d, "--temperature", "0", "--max-tokens", "10", "--device", "cpu"])
        check("chat on a terminal shows a prompt", t.read_until(b"> "), t.buf[-300:])
        start = t.send(b"Hello! What is 2+2?\r")
        ok = t.read_until(b"\n> ", start)
        shown = t.buf[start:].replace(b"\r\n", b"\n")
        check("chat on a terminal prints the reply, then a new prompt", ok and want.replace(b"\r\n", b"\n") in shown,
              f"{shown!r} vs {want!r}")
        check("Ctrl-D ends the session with exit code 0", t.end(b"\x04") == 0)
        # Ctrl-C at the prompt gives a new prompt; during a long reply it stops the reply, and the
        # conversation goes on
        t = Pty([W, "chat", "--model", d, "--temperature", "0", "--max-tokens", "3000", "--ignore-eos", "--device", "cpu"])
        t.read_until(b"> ")
        time.sleep(0.5)  # the line editor reading (a Ctrl-C before that only sets the flag)
        start = t.send(b"\x03")
        check("Ctrl-C at the prompt gives a new prompt", t.read_until(b"> ", start), t.buf[start:])
        start = t.send(b"Hi\r")
        t.read_until(b"Hi\r\n", start)
        t.read_until(b" ", len(t.buf), limit=1.0)  # the reply has begun
        t.send(b"\x03")
        check("Ctrl-C stops the reply", t.read_until(b"[stopped]", start, limit=60), t.buf[start:][-300:])
        # keys typed before the line editor reads again can be lost: the prompt first, as end() does
        t.read_until(b"> ", max(0, len(t.buf) - 2))
        time.sleep(0.5)
        start = t.send(b"more\r")
        t.read_until(b"more\r\n", start)
        t.read_until(b" ", len(t.buf), limit=1.0)
        t.send(b"\x03")
        check("the conversation goes on after a stopped reply", t.read_until(b"[stopped]", start, limit=60),
              t.buf[start:][-300:])
        check("Ctrl-D then ends it with exit code 0", t.end(b"\x04") == 0)
        # ---- refusals
        rc, out, err = run(["chat", "--model", d, "--device", "cpu"], b'{"role": "user"}')
        check("chat refuses stdin that is not an array of messages", rc == 1 and "JSON array of messages" in err, err)
        rc, out, err = run(["chat", "--model", d, "--device", "cpu"], b'[{"role": "user", "content": "x"},]')
        check("chat refuses malformed JSON", rc == 1 and "messages on stdin" in err, err)
        rc, out, err = run(["chat", "--model", d, "--min-p", "2"], b"[]")
        check("chat refuses --min-p 2", rc == 1 and "--min-p" in err, err)
        rc, out, err = run(["chat", "--model", d, "--max-context", "999999"], b"[]")
        check("chat refuses a context above the model's", rc == 1 and "--max-context" in err, err)
        rc, out, err = run(["sample", "--model", d, "--repetition-penalty", "0"])
        check("sample refuses a repetition penalty of 0", rc == 1 and "--repetition-penalty" in err, err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
