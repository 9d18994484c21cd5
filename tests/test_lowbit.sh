#!/usr/bin/env bash
# test_lowbit.sh — LoRA runs on a frozen base stored packed (--base-precision bf16 | nf4 | f16), end
# to end on the CPU backend from a BF16 Hugging Face checkpoint (tests/finetune_helper.py): the run
# records its base precision, the plan prints smaller weights, resume continues it bit for bit and
# refuses another precision, mixed precision on a packed base with and without recomputation, eval and sample run, export writes the PEFT adapter and --merge the
# decoded base plus (alpha/r) B A in f32, and the flag's refusals. test_lowbit.c checks the
# gradients against an f32 base of the decoded values.
# Prints "N passed, N failed"; the exit code is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WGT:-$PWD/build/wgtrain}
PY=${PYTHON:-python3}
H="$PY $PWD/tests/finetune_helper.py"
if [[ ! -x $W ]]; then echo "build/wgtrain is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
T=$(mktemp -d /tmp/wgt_lowbit_XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/shell_lib.sh
R=(--device cpu --batch 2 --seq 16 --val-batches 1 --lr 1e-2 --warmup 0)

$H shards "$T/data" --V 96 --T 16 --seed 1
$H llama "$T/base" --tie 0 --seed 7 --dtype BF16

for bp in nf4 bf16; do
    section "train --lora --base-precision $bp"
    out=$($W train --init "$T/base" --data "$T/data" --out "$T/run_$bp" "${R[@]}" --steps 4 --lora 4 \
          --base-precision $bp 2>&1); rc=$?
    check "train --base-precision $bp exits 0 ($out)" test $rc -eq 0
    check "config.json records base_precision $bp" $PY -c "
import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))['lora']['base_precision'] == sys.argv[2] else 1)" \
        "$T/run_$bp/config.json" "$bp"
    check "the loss falls ($bp)" $PY -c "
import json, sys
rows = [json.loads(l)['loss'] for l in open(sys.argv[1]) if '\"loss\"' in l]
sys.exit(0 if len(rows) >= 4 and rows[-1] < rows[0] - 0.1 else 1)" "$T/run_$bp/metrics.jsonl"
done
# the plan's weights: nf4 below bf16 below f32
w() { $W plan --init "$T/base" --data "$T/data" "${R[@]}" --lora 4 --base-precision "$1" 2>&1 |
      awk '/^train: +weights/ {print $(NF-1) * ($NF == "GiB" ? 1024 : 1); exit}'; }
w32=$(w f32); w16=$(w bf16); w4=$(w nf4)
check "plan weights f32 $w32 > bf16 $w16 > nf4 $w4 MiB" $PY -c "
import sys; a, b, c = map(float, sys.argv[1:]); sys.exit(0 if a > b > c > 0 else 1)" "$w32" "$w16" "$w4"

section "resume"
D=(--init "$T/base" --data "$T/data" "${R[@]}" --steps 6 --lora 4 --lora-dropout 0.2 --base-precision nf4)
$W train "${D[@]}" --out "$T/straight" >/dev/null 2>&1
$W train "${D[@]}" --out "$T/stopped" --stop-at 3 >/dev/null 2>&1
out=$($W train --resume --out "$T/stopped" --device cpu 2>&1); rc=$?
check "resume of an nf4 run exits 0 ($out)" test $rc -eq 0
check "stopped and resumed gives the uninterrupted nf4 run's adapters bit for bit" \
    cmp "$T/straight/adapter_model.safetensors" "$T/stopped/adapter_model.safetensors"
expect_fail "resume with another base precision" "base" $W train --resume --out "$T/stopped" --device cpu --steps 8 \
    --base-precision bf16

# mixed precision with a packed base: recomputation repeats the same ops, so the same adapters
for rc in none block; do
    $W train --init "$T/base" --data "$T/data" --out "$T/f16_$rc" "${R[@]}" --steps 4 --lora 4 --precision f16 \
        --base-precision nf4 --recompute $rc >/dev/null 2>&1
done
check "--precision f16 on an nf4 base trains, --recompute block to --recompute none's adapters bit for bit" \
    cmp "$T/f16_none/adapter_model.safetensors" "$T/f16_block/adapter_model.safetensors"

section "eval, sample, export"
out=$($W eval --run "$T/run_nf4" --data "$T/data" --device cpu 2>&1); rc=$?
check "eval of an nf4 run exits 0 ($out)" test $rc -eq 0
out=$($W sample --run "$T/run_nf4" --device cpu --ids --prompt "1 2" --tokens 5 2>&1); rc=$?
check "sample of an nf4 run exits 0 ($out)" test $rc -eq 0
out=$($W export --run "$T/run_nf4" --out "$T/adapter" 2>&1); rc=$?
check "export of an nf4 run exits 0 ($out)" test $rc -eq 0
check "the adapter's config is PEFT's LoRA" $PY -c "
import json, sys; c = json.load(open(sys.argv[1])); sys.exit(0 if c['peft_type'] == 'LORA' and c['r'] == 4 else 1)" \
    "$T/adapter/adapter_config.json"
for bp in nf4 bf16; do
    out=$($W export --run "$T/run_$bp" --out "$T/merged_$bp" --merge 2>&1); rc=$?
    check "export --merge of a $bp run exits 0 ($out)" test $rc -eq 0
    $W export --run "$T/run_$bp" --out "$T/adapter_$bp" >/dev/null 2>&1
    # merged - (alpha/r) B A is the stored base: bf16 values exactly (a BF16 checkpoint), nf4 values
    # within half the widest level gap (0.152) of each 64-block's absmax, each to f32 rounding
    check "the $bp merge is the decoded base plus (alpha/r) B A" $PY -c "
import json, struct, sys
import numpy as np
def load(p):  # F32 and BF16 safetensors
    raw = open(p, 'rb').read(); n = struct.unpack('<Q', raw[:8])[0]; hd = json.loads(raw[8:8 + n]); out = {}
    for k, e in hd.items():
        if k == '__metadata__': continue
        b, en = (8 + n + o for o in e['data_offsets'])
        if e['dtype'] == 'BF16': x = (np.frombuffer(raw[b:en], np.uint16).astype(np.uint32) << 16).view(np.float32)
        else: x = np.frombuffer(raw[b:en], np.float32)
        out[k] = x.reshape(e['shape'])
    return out
base, ad, mg = (load(p) for p in sys.argv[1:4]); nf4 = sys.argv[4] == 'nf4'
n = 0
for k, w in base.items():
    m = k[:-len('.weight')]
    a, b = ad.get('base_model.model.%s.lora_A.weight' % m), ad.get('base_model.model.%s.lora_B.weight' % m)
    if a is None:
        if not np.array_equal(mg[k], w): sys.exit(1)
        continue
    n += 1
    dec = mg[k].astype(np.float64) - 2.0 * b.astype(np.float64) @ a.astype(np.float64)
    tol = 1e-6 * np.abs(mg[k]).max()
    if nf4:
        wb, db = w.astype(np.float64).reshape(-1, 64), dec.reshape(-1, 64)
        bound = 0.1520 * np.abs(wb).max(axis=1, keepdims=True) + tol
        if (np.abs(db - wb) > bound).any(): sys.exit(1)
    elif np.abs(dec - w).max() > tol: sys.exit(1)
sys.exit(0 if n == 14 else 1)" "$T/base/model.safetensors" "$T/adapter_$bp/adapter_model.safetensors" \
        "$T/merged_$bp/model.safetensors" "$bp"
done

section "refusals"
expect_fail "a LoRA run over --memory-limit suggests an nf4 base" "--base-precision nf4 (" $W train --init "$T/base" \
    --data "$T/data" --out "$T/x0" "${R[@]}" --steps 1 --lora 4 --memory-limit 0.0001
expect_fail "--base-precision without --lora" "--lora" $W train --init "$T/base" --data "$T/data" --out "$T/x1" "${R[@]}" \
    --steps 1 --base-precision nf4
expect_fail "--base-precision with a typo" "f32, f16, bf16 or nf4" $W train --init "$T/base" --data "$T/data" \
    --out "$T/x2" "${R[@]}" --steps 1 --lora 4 --base-precision int4
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
