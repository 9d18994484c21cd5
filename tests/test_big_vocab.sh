#!/usr/bin/env bash
# test_big_vocab.sh — token ids beyond 16 bits end to end, on the CPU backend and the WebGPU one
# (the software GPU by default): llm.c 32-bit shards (magic 20240801, version 7) whose ids lie
# mostly above 65,535, written by tests/big_vocab_data.py (a writer other than wgtrain's), train
# a tiny LLaMA with a 70,000-id vocabulary on both backends (the loss falls; a resume equals the
# uninterrupted run), then eval and sample --ids on the run, grad with a uint32 .npy of ids above
# 65,535 (the embedding rows of the inputs' ids get gradients, rows of absent ids none; the
# backends agree), and AdamW steps of the same model widened to 262,144 ids on both backends.
# Prints "N passed, N failed"; the exit code is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WGT:-$PWD/build/wgtrain}
PY=${PYTHON:-python3}
D="$PY tests/big_vocab_data.py"
if [[ ! -x $W ]]; then echo "build/wgtrain is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
T=$(mktemp -d /tmp/wgt_bigv_XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/shell_lib.sh
# val_loss values of a metrics.jsonl, one a line
val_losses() { $PY -c "import json, sys; [print(json.loads(l)['val_loss']) for l in open(sys.argv[1]) if 'val_loss' in l]" "$1"; }
# the validation loss fell at every measurement and ends over $2 nats below log(70000), the loss
# of a model that knows nothing (where a fresh one starts)
falls() { $PY -c "
import math, sys; v = [float(x) for x in sys.argv[2:]]
sys.exit(0 if len(v) >= 2 and all(b < a for a, b in zip(v, v[1:])) and v[-1] < math.log(70000) - float(sys.argv[1]) else 1)" "$2" $(val_losses "$1"); }

section "16-bit data and a checkpoint from before 32-bit ids (tests/fixtures/legacy16)"
cp -r tests/fixtures/legacy16 "$T/legacy"
out=$($W eval --run "$T/legacy/run" --data "$T/legacy/data" --device cpu --batches 2 2>&1); rc=$?
check "eval of the old run exits 0 ($out)" test $rc -eq 0
check "eval gives the old build's loss ($(cat "$T/legacy/eval.txt"))" test "$(grep '^loss' <<<"$out")" = "$(cat "$T/legacy/eval.txt")"
$W sample --run "$T/legacy/run" --device cpu --prompt "the cat" --tokens 8 --temperature 0 --seed 1 >"$T/sample.txt" 2>&1
check "sample gives the old build's text, byte for byte" cmp -s "$T/sample.txt" "$T/legacy/sample.txt"

section "32-bit shards with ids above 65,535"
mkdir -p "$T/data"
$D shards "$T/data" 3
check "the shards are llm.c's 32-bit format" $PY -c "
import struct, sys; h = struct.unpack('<3i', open(sys.argv[1], 'rb').read(12)); sys.exit(0 if h[:2] == (20240801, 7) else 1)" "$T/data/x_train.bin"

# a model small enough that 70,000 embedding and lm_head rows dominate; untied, so the
# embedding's gradient comes from the input ids alone
M=(--data "$T/data" --arch llama --tie-embeddings 0 --vocab 70000 --layers 1 --heads 2 --kv-heads 2 --d-model 16
   --d-ff 32 --seq 16 --batch 4 --lr 3e-2 --warmup 1 --val-every 6 --val-batches 2 --ckpt-every 6 --log-every 6)
for be in cpu webgpu; do
    section "train, vocabulary 70,000, $be"
    out=$($W train "${M[@]}" --device $be --steps 12 --out "$T/$be" 2>&1); rc=$?
    check "$be: train exits 0 ($out)" test $rc -eq 0
    check "$be: the run reports the vocabulary" grep -q "vocabulary 70000" <<<"$out"
    # from log(70000) = 11.2 nats: 12 steps at this rate take off over 3
    check "$be: the validation loss falls by over 2.5 nats ($(val_losses "$T/$be/metrics.jsonl" | tr '\n' ' '))" falls "$T/$be/metrics.jsonl" 2.5
done

section "resume with a 70,000-id checkpoint"
$W train "${M[@]}" --device cpu --steps 12 --stop-at 6 --out "$T/R" >/dev/null 2>&1
out=$($W train --out "$T/R" --resume --device cpu 2>&1); rc=$?
check "resume exits 0 ($out)" test $rc -eq 0
check "the resumed run's weights equal the straight run's" cmp -s "$T/cpu/model.safetensors" "$T/R/model.safetensors"

section "eval and sample on the run"
out=$($W eval --run "$T/cpu" --device cpu --batches 2 2>&1); rc=$?
check "eval exits 0 ($out)" test $rc -eq 0
last=$(val_losses "$T/cpu/metrics.jsonl" | tail -1)
# the same 2 validation batches as the run's last measurement, printed to 6 decimals
check "eval's loss is the run's last validation loss ($last)" $PY -c "
import re, sys; m = re.search(r'^loss ([0-9.]+)', sys.argv[1], re.M); sys.exit(0 if m and abs(float(m.group(1)) - float(sys.argv[2])) < 2e-6 else 1)" "$out" "$last"
out=$($W sample --run "$T/cpu" --device cpu --ids --prompt "65536 69944 7" --tokens 6 --temperature 0 2>&1); rc=$?
check "sample --ids exits 0 ($out)" test $rc -eq 0
check "sample --ids prints the prompt and 6 ids, all in the vocabulary" $PY -c "
import sys; v = [int(x) for x in sys.argv[1].split()]; sys.exit(0 if len(v) == 9 and v[:3] == [65536, 69944, 7] and all(0 <= x < 70000 for x in v) else 1)" "$out"
out2=$($W sample --run "$T/webgpu" --device webgpu --ids --prompt "65536 69944 7" --tokens 2 --temperature 0 2>&1); rc=$?
check "sample --ids on the webgpu run exits 0 ($out2)" test $rc -eq 0
expect_fail "a prompt id beyond the vocabulary is refused" "70000" $W sample --run "$T/cpu" --device cpu --ids --prompt "5 70000"
expect_fail "a prompt id far beyond 2^32" "beyond the model's vocabulary" $W sample --run "$T/cpu" --device cpu --ids --prompt "99999999999"
expect_fail "sampling text needs a tokenizer" "--ids" $W sample --run "$T/cpu" --device cpu --prompt "hello"

section "grad --tokens: uint32 ids above 65,535"
$D config "$T/cpu/model.safetensors" "$T/cfg.json"
# 69999 and 68123 only as inputs, 65540 and 69000 only as targets, 68000 nowhere
$D npy "$T/t.npy" 69999,65536,67000,7,69998,65537,65538,65539,65540 40000,66000,68123,65600,7,7,65700,66800,69000
for be in cpu webgpu; do
    out=$($W grad --model "$T/cpu/model.safetensors" --config "$T/cfg.json" --tokens "$T/t.npy" --out "$T/g_$be.safetensors" --backend $be 2>&1); rc=$?
    check "$be: grad exits 0 ($out)" test $rc -eq 0
done
rows=($($D rows "$T/g_cpu.safetensors" model.embed_tokens.weight 69999 68123 65540 69000 68000))
check "embedding rows of input ids above 65,535 get gradients (${rows[*]})" $PY -c "
import sys; r = [float(x) for x in sys.argv[1:]]; sys.exit(0 if r[0] > 0 and r[1] > 0 and r[2] == r[3] == r[4] == 0 else 1)" "${rows[@]}"
rows=($($D rows "$T/g_cpu.safetensors" lm_head.weight 65540 69000))
check "lm_head rows of target ids get gradients (${rows[*]})" $PY -c "
import sys; sys.exit(0 if all(float(x) > 0 for x in sys.argv[1:]) else 1)" "${rows[@]}"
d=$($D compare "$T/g_cpu.safetensors" "$T/g_webgpu.safetensors")
# f32 sums in another order (tiled GEMMs, workgroup reductions): relative errors of about 1e-6
check "the backends' gradients agree (max relative difference $d)" $PY -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1e-4 else 1)" "$d"
$D npy "$T/bad.npy" 1,2,70000,4
expect_fail "grad refuses a uint32 id beyond the vocabulary" "token 70000 at index 2 is outside the vocabulary" \
    $W grad --model "$T/cpu/model.safetensors" --config "$T/cfg.json" --tokens "$T/bad.npy"

section "vocabulary 262,144 (Gemma 3's): AdamW steps on both backends"
$D widen "$T/cpu/model.safetensors" "$T/w.safetensors" 262144
$D config "$T/w.safetensors" "$T/wcfg.json"
$D npy "$T/w.npy" 262143,200000,65536,69944,7,131072,262143,65536,69944
for be in cpu webgpu; do
    out=$($W grad --model "$T/w.safetensors" --config "$T/wcfg.json" --tokens "$T/w.npy" --steps 3 --lr 1e-2 --backend $be 2>&1); rc=$?
    check "$be: grad --steps 3 exits 0 ($out)" test $rc -eq 0
    grep '^step' <<<"$out" | awk '{print $4}' >"$T/steps_$be"
    check "$be: the loss falls over the steps ($(tr '\n' ' ' <"$T/steps_$be"))" $PY -c "
import sys; v = [float(x) for x in open(sys.argv[1])]; sys.exit(0 if len(v) == 4 and v[3] < v[0] - 0.1 else 1)" "$T/steps_$be"
done
# the same steps on both backends: f32 rounding in another order, through 3 AdamW updates
check "the backends' losses agree" $PY -c "
import sys; a = [float(x) for x in open(sys.argv[1])]; b = [float(x) for x in open(sys.argv[2])]
sys.exit(0 if len(a) == len(b) == 4 and all(abs(x - y) < 1e-3 * abs(x) for x, y in zip(a, b)) else 1)" "$T/steps_cpu" "$T/steps_webgpu"

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
