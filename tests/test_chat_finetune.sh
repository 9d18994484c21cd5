#!/usr/bin/env bash
# test_chat_finetune.sh — instruction and chat data end to end (docs/instruction-data.md), on a
# TinyLlama-shaped random LLaMA scaled down (2 layers, d_model 32, grouped kv heads, tied) with
# TinyLlama's real tokenizer (Llama-2's 32000 tokens, third_party/hf-tokenizers/llama2) and the
# Zephyr chat template TinyLlama-Chat uses:
#   - prepare of a chat JSONL: records counted; the shard's ids and loss flags of a conversation
#     equal `tokenize --chat --mask` of it (one rendering); bad records refused with file and
#     line; over-long examples truncated or dropped and counted; old (unflagged) data still trains;
#   - train --init on the CPU and on the software GPU (WebGPU), sample, export with the
#     tokenizer files; --init refuses data prepared with another tokenizer, naming both;
#   - prompts of random words with one fixed answer: the loss (on the answers only) falls near
#     zero, which it could not if the prompts were trained.
# Prints "N passed, N failed"; the exit code is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WGT:-$PWD/build/wgtrain}
PY=${PYTHON:-python3}
HF=$PWD/third_party/hf-tokenizers
if [[ ! -x $W ]]; then echo "build/wgtrain is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
T=$(mktemp -d /tmp/wgt_chatft_XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/shell_lib.sh

section "a TinyLlama-shaped model with TinyLlama's tokenizer"
# TinyLlama-1.1B-Chat's (Zephyr) template
cat >"$T/zephyr.jinja" <<'EOF'
{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>\n' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>\n'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}
EOF
$PY - "$T" <<'EOF'
import json, random, sys
t = sys.argv[1]
r = random.Random(5)
words = "red green blue cat dog sun moon tree river stone bird fish cloud rain snow wind".split()
with open(t + "/chat.jsonl", "w") as f:
    for i in range(40):
        q = " ".join(r.choice(words) for _ in range(4))
        f.write(json.dumps({"messages": [{"role": "system", "content": "Answer briefly."},
                                         {"role": "user", "content": "What is " + q + "?"},
                                         {"role": "assistant", "content": "It is " + q.split()[0] + "."}]}) + "\n")
    f.write(json.dumps({"prompt": "Say hi:", "completion": " hi"}) + "\n")
    f.write(json.dumps({"text": "A plain text record is trained whole."}) + "\n")
    f.write(json.dumps({"messages": [{"role": "user", "content": "no answer here"}]}) + "\n")
# prompts of random words, one fixed answer
with open(t + "/fixed.jsonl", "w") as f:
    for i in range(400):
        q = " ".join(r.choice(words) for _ in range(6))
        f.write(json.dumps({"prompt": q + " =>", "completion": " the answer is always the same"}) + "\n")
json.dump([{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is x?"},
           {"role": "assistant", "content": "It is x."}], open(t + "/one.json", "w"))
with open(t + "/one.jsonl", "w") as f:
    f.write(json.dumps({"messages": json.load(open(t + "/one.json"))}) + "\n")
    f.write(json.dumps({"messages": json.load(open(t + "/one.json"))}) + "\n")
EOF

section "prepare"
# the model: a random LLaMA of wgtrain's own, exported as a Hugging Face directory with the tokenizer
$W prepare --tokenizer "$HF/llama2" --chat-template "$T/zephyr.jinja" --input "$T/one.jsonl" --out "$T/base_data" >/dev/null 2>&1
out=$($W train --data "$T/base_data" --arch llama --layers 2 --heads 4 --kv-heads 2 --d-model 32 --d-ff 64 --seq 64 \
    --max-seq 64 --batch 1 --steps 1 --lr 1e-6 --device cpu --out "$T/base_run" 2>&1 && $W export --run "$T/base_run" --out "$T/model" 2>&1); rc=$?
check "a random TinyLlama-shaped model exported with the tokenizer ($out)" test $rc -eq 0 -a -f "$T/model/tokenizer.json"
out=$($W prepare --tokenizer "$T/model" --chat-template "$T/zephyr.jinja" --input "$T/chat.jsonl" --out "$T/data" 2>&1); rc=$?
check "prepare of the chat JSONL exits 0 ($out)" test $rc -eq 0
check "the summary counts the records by kind" grep -q "43 record(s) from 1 JSONL file(s): 1 text, 1 prompt/completion, 41 messages" <<<"$out"
check "the conversation without an answer is skipped and counted" grep -q "skipped 1 with nothing to train" <<<"$out"
# the shard's first example: the ids and flags tokenize --chat --mask gives for it
$W prepare --tokenizer "$T/model" --chat-template "$T/zephyr.jinja" --input "$T/one.jsonl" --out "$T/one" >/dev/null 2>&1
want=$($W tokenize --tokenizer "$T/model" --chat-template "$T/zephyr.jinja" --chat --mask <"$T/one.json")
check "the shard holds tokenize --chat --mask's ids and loss mask (first token: a start, not a target)" $PY - "$T/one/train_000000.bin" "$want" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
h = struct.unpack("<256i", b[:1024])
assert h[0] == 20240520 and h[1] == 2, h[:3]
n = h[2]
ids = list(struct.unpack("<%dH" % n, b[1024:1024 + 2 * n]))
fl = list(b[1024 + 2 * n:])
lines = sys.argv[2].split("\n")
wid = [int(x) for x in lines[0].split()]
wm = [int(x) for x in lines[1].split()]
assert ids == wid, (ids, wid)
assert fl[0] == 2 and all(f & 2 == 0 for f in fl[1:]), fl
assert [f & 1 for f in fl[1:]] == wm[1:] and sum(wm) > 0, (fl, wm)
EOF
# a prompt/completion record: encode(P + C, add_special_tokens=True) + EOS, the first
# len(encode(P, add_special_tokens=True)) ids not trained (TRL's rule)
printf '{"prompt": "Say hi:", "completion": " hi there"}\n{"prompt": "Say hi:", "completion": " hi there"}\n' >"$T/pc.jsonl"
$W prepare --tokenizer "$T/model" --input "$T/pc.jsonl" --out "$T/pc" >/dev/null 2>&1
pw=$(printf 'Say hi:' | $W tokenize --tokenizer "$T/model" --add-special)
jw=$(printf 'Say hi: hi there' | $W tokenize --tokenizer "$T/model" --add-special)
check "prompt/completion ids and mask as TRL forms them" $PY - "$T/pc/train_000000.bin" "$pw" "$jw" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<256i", b[:1024])[2]
ids = list(struct.unpack("<%dH" % n, b[1024:1024 + 2 * n]))
fl = list(b[1024 + 2 * n:])
p, j = sys.argv[2].split(), sys.argv[3].split()
assert ids == [int(x) for x in j] + [2], (ids, j)  # + EOS (</s> = 2)
assert [f & 1 for f in fl] == [0] * len(p) + [1] * (n - len(p)), (fl, p)
EOF
printf '{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\n{"prompt": "x"}\n' >"$T/bad.jsonl"
expect_fail "a prompt without completion, named by file and line" "bad.jsonl line 2" \
    $W prepare --tokenizer "$T/model" --chat-template "$T/zephyr.jinja" --input "$T/bad.jsonl" --out "$T/bad"
printf '{"text": "x"}\nnot json\n' >"$T/bad2.jsonl"
expect_fail "malformed JSON, named by file and line" "bad2.jsonl line 2" $W prepare --tokenizer "$T/model" --input "$T/bad2.jsonl" --out "$T/bad"
expect_fail "messages without a chat template" "chat template" $W prepare --tokenizer "$T/model" --input "$T/one.jsonl" --out "$T/bad"
out=$($W prepare --tokenizer "$T/model" --chat-template "$T/zephyr.jinja" --input "$T/chat.jsonl" --out "$T/trunc" --max-tokens 12 2>&1)
# 12 tokens cut the 40 answered conversations before their answers: truncated, then skipped with
# nothing to train (the unanswered one is short, and skipped too)
check "--max-tokens truncates and counts ($out)" grep -q "skipped 41 with nothing to train; longer than --max-tokens 12: 40 truncated, 0 dropped" <<<"$out"
out=$($W prepare --tokenizer "$T/model" --chat-template "$T/zephyr.jinja" --input "$T/chat.jsonl" --out "$T/drop" --max-tokens 12 --long drop 2>&1)
check "--long drop drops and counts ($out)" grep -q "skipped 1 with nothing to train; longer than --max-tokens 12: 0 truncated, 40 dropped" <<<"$out"

section "train --init on the CPU and on the software GPU, sample, export"
R=(--init "$T/model" --data "$T/data" --seq 64 --batch 2 --lr 1e-3 --warmup 0 --val-batches 1)
out=$($W train "${R[@]}" --steps 2 --device cpu --out "$T/run_cpu" 2>&1); rc=$?
check "train on the CPU exits 0 ($out)" test $rc -eq 0
out=$($W train "${R[@]}" --steps 1 --device webgpu --out "$T/run_gpu" 2>&1); rc=$?
check "train on the software GPU exits 0 ($out)" test $rc -eq 0
check "the first update's loss is the same on both backends" $PY - "$T/run_cpu/metrics.jsonl" "$T/run_gpu/metrics.jsonl" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])][0]["loss"]
b = [json.loads(l) for l in open(sys.argv[2])][0]["loss"]
# the same weights and packed rows; float32 sums in other orders (BLAS vs WGSL, 32000-way
# softmax): a few 1e-6 relative, bounded at 1e-4
assert 5 < a < 15 and abs(a - b) <= 1e-4 * a, (a, b)
EOF
out=$($W sample --run "$T/run_cpu" --prompt "<|user|>" --tokens 4 --device cpu 2>&1); rc=$?
check "sample exits 0 ($out)" test $rc -eq 0
out=$($W export --run "$T/run_cpu" --out "$T/export" 2>&1); rc=$?
check "export exits 0 ($out)" test $rc -eq 0
check "export: tokenizer.json as the data had it" cmp -s "$HF/llama2/tokenizer.json" "$T/export/tokenizer.json"
check "export: tokenizer_config.json and special_tokens_map.json" test -f "$T/export/tokenizer_config.json" -a -f "$T/export/special_tokens_map.json"

expect_fail "GPT-2 on packed instruction data" "GPT-2's learned position embeddings" \
    $W train --data "$T/data" --arch gpt2 --layers 1 --heads 2 --d-model 16 --out "$T/run_g" --device cpu --steps 1 --seq 32

section "--init refuses data of another tokenizer"
printf '{"text": "hello there"}\n{"text": "general kenobi"}\n' >"$T/q.jsonl"
$W prepare --tokenizer "$HF/qwen3" --input "$T/q.jsonl" --out "$T/qdata" >/dev/null 2>&1
expect_fail "train --init with data of the Qwen3 tokenizer" "comes with the hf tokenizer" \
    $W train --init "$T/model" --data "$T/qdata" --out "$T/run_q" --device cpu --steps 1 --seq 16

section "fixed answers after random prompts: only the answers are trained"
$W prepare --tokenizer "$T/model" --input "$T/fixed.jsonl" --out "$T/fixed" >/dev/null 2>&1
out=$($W train --init "$T/model" --data "$T/fixed" --out "$T/run_fixed" --device cpu --seq 32 --batch 4 --steps 50 \
    --lr 3e-2 --warmup 5 --val-every 50 --val-batches 2 2>&1); rc=$?
check "train on the fixed answers exits 0 ($out)" test $rc -eq 0
# the prompts are 6 words drawn from 16 (entropy ~2.8 nats a word): trained, they alone would keep
# the mean loss far above 0.1
check "the answers' loss falls near zero (last train loss and val loss < 0.1)" $PY - "$T/run_fixed/metrics.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
last = rows[-1]
val = [r["val_loss"] for r in rows if "val_loss" in r and r["val_loss"] is not None]
print("first loss %.3f, last %.4f, val %s" % (rows[0]["loss"], last["loss"], val))
assert rows[0]["loss"] > 5 and last["loss"] < 0.1 and val and val[-1] < 0.1
EOF

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
