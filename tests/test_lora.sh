#!/usr/bin/env bash
# test_lora.sh — LoRA runs end to end on the CPU backend, on random Hugging Face models written by
# tests/finetune_helper.py: `train --init DIR --lora R` (the adapters train, the base does not, the
# checkpoint holds the adapters' state only), resume (the same run continues; another rank, or a
# base whose values changed, is refused), `export` (a PEFT adapter directory whose config says
# what the run trained), `export --merge` (the merged weights equal base + (alpha/r) B A, computed
# here in float64), `grad --lora-adapter` on the exported adapter against the merged model's loss,
# and the flags' refusals. The PyTorch parity of the math is test_lora_torch.py's.
# Prints "N passed, N failed"; the exit code is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/shell_lib.sh
hf_setup lora  # W, PY, H, T, T/data, T/tok.npy
R=(--device cpu --batch 2 --seq 16 --val-batches 1 --lr 1e-2 --warmup 0)
$H llama "$T/base" --tie 0 --seed 7

section "train --lora: the adapters train, the base stays"
out=$($W train --init "$T/base" --data "$T/data" --out "$T/run" "${R[@]}" --steps 4 --ckpt-every 2 --lora 4 \
      --lora-alpha 8 --lora-targets all-linear 2>&1); rc=$?
check "train --lora exits 0 ($out)" test $rc -eq 0
check "train prints the adapters" grep -q "LoRA rank 4, alpha 8 (scale 2).* 14 adapters" <<<"$out"
check "the run wrote the adapters" test -s "$T/run/adapter_model.safetensors" -a -s "$T/run/adapter_config.json"
check "the run wrote no full model.safetensors" test ! -e "$T/run/model.safetensors"
check "config.json records the base's fingerprint" $PY -c "
import json, sys; c = json.load(open(sys.argv[1]))['lora']; sys.exit(0 if len(c['base_fnv1a64']) == 16 and c['r'] == 4 else 1)" "$T/run/config.json"
# the loss falls (the adapters learn the one training window)
check "the loss falls" $PY -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r['loss'] for r in rows if 'loss' in r]
sys.exit(0 if len(rows) >= 4 and rows[-1] < rows[0] - 0.1 else 1)" "$T/run/metrics.jsonl"
# the checkpoint holds the adapters and their moments: 3 x the adapter state, far below the model
ck=$(stat -c %s "$T/run/ckpt.bin"); full=$(stat -c %s "$T/base/model.safetensors")
check "the checkpoint ($ck bytes) is smaller than the base ($full bytes)" test "$ck" -lt "$full"

section "resume"
out=$($W train --resume --out "$T/run" --device cpu --steps 6 2>&1); rc=$?
check "resume exits 0 ($out)" test $rc -eq 0
check "resume reached step 6" grep -q "\"step\": *6" <(tail -2 "$T/run/metrics.jsonl")
# stopped at step 3 and resumed to 6 (with adapter dropout): the adapters of an uninterrupted run, bit for bit
D=(--init "$T/base" --data "$T/data" "${R[@]}" --steps 6 --lora 4 --lora-dropout 0.2)
$W train "${D[@]}" --out "$T/straight" >/dev/null 2>&1
$W train "${D[@]}" --out "$T/stopped" --stop-at 3 >/dev/null 2>&1
out=$($W train --resume --out "$T/stopped" --device cpu 2>&1); rc=$?
check "resume after --stop-at exits 0 ($out)" test $rc -eq 0
check "stopped and resumed gives the uninterrupted run's adapters bit for bit" \
    cmp "$T/straight/adapter_model.safetensors" "$T/stopped/adapter_model.safetensors"
# --recompute block: the same gradients on the C backend, so the same adapters bit for bit
$W train "${D[@]}" --out "$T/recomp" --recompute block >/dev/null 2>&1
check "--recompute block trains the adapters of --recompute none bit for bit" \
    cmp "$T/straight/adapter_model.safetensors" "$T/recomp/adapter_model.safetensors"
expect_fail "--recompute with a typo" "--recompute" $W train "${D[@]}" --out "$T/recomp2" --recompute blocks
expect_fail "resume with another rank" "--lora" $W train --resume --out "$T/run" --device cpu --steps 8 --lora 8
cp -r "$T/run" "$T/run_b"
$H llama "$T/base_other" --tie 0 --seed 8
cp "$T/base/model.safetensors" "$T/base_saved.safetensors"
cp "$T/base_other/model.safetensors" "$T/base/model.safetensors"
expect_fail "resume on a changed base" "fingerprint" $W train --resume --out "$T/run_b" --device cpu --steps 8
cp "$T/base_saved.safetensors" "$T/base/model.safetensors"

section "export: a PEFT adapter, and --merge"
out=$($W export --run "$T/run" --out "$T/adapter" 2>&1); rc=$?
check "export exits 0 ($out)" test $rc -eq 0
check "adapter_config.json says what the run trained" $PY -c "
import json, sys
c = json.load(open(sys.argv[1]))
ok = (c['peft_type'] == 'LORA' and c['r'] == 4 and c['lora_alpha'] == 8 and c['bias'] == 'none'
      and c['task_type'] == 'CAUSAL_LM' and c['base_model_name_or_path'] == sys.argv[2]
      and sorted(c['target_modules']) == sorted(['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj',
          'self_attn.o_proj', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj']))
sys.exit(0 if ok else 1)" "$T/adapter/adapter_config.json" "$(realpath "$T/base")"
expect_fail "export over an adapter without --force" "--force" $W export --run "$T/run" --out "$T/adapter"
out=$($W export --run "$T/run" --out "$T/merged" --merge 2>&1); rc=$?
check "export --merge exits 0 ($out)" test $rc -eq 0
check "the merged weights are base + (alpha/r) B A" $PY -c "
import sys; sys.path.insert(0, 'tests')
import numpy as np, gpt2_torch_ref as g
base, ad, mg = (g.load_safetensors(p) for p in sys.argv[1:4])
n = 0
for k, w in base.items():
    m = k[:-len('.weight')]
    a, b = ad.get('base_model.model.%s.lora_A.weight' % m), ad.get('base_model.model.%s.lora_B.weight' % m)
    want = w.astype(np.float64) + (2.0 * b.astype(np.float64) @ a.astype(np.float64) if a is not None else 0)
    n += a is not None
    # one float32 rounding of the float64 sum: half an ulp of each value
    if np.abs(mg[k] - want).max() > 1e-6 * (np.abs(want).max() + 1e-30): sys.exit(1)
sys.exit(0 if n == 14 and sorted(mg) == sorted(base) else 1)" "$T/base/model.safetensors" "$T/adapter/adapter_model.safetensors" "$T/merged/model.safetensors"
# wgtrain's loss with the exported adapter on the base equals its loss on the merged model:
# W x + s B (A x) against (W + s B A) x in float32, ~1e-6 relative
la=$($W grad --model "$T/base/model.safetensors" --config "$T/base/config.json" --tokens "$T/tok.npy" \
     --lora-adapter "$T/adapter" 2>&1 | awk '/^loss/ {print $2}')
lm=$($W grad --model "$T/merged/model.safetensors" --config "$T/merged/config.json" --tokens "$T/tok.npy" 2>&1 |
     awk '/^loss/ {print $2}')
check "loss with the adapter ($la) equals the merged model's ($lm)" $PY -c "
import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-5 * abs(b) else 1)" "$la" "$lm"
out=$($W sample --run "$T/run" --device cpu --ids --prompt "1 2" --tokens 5 2>&1); rc=$?
check "sample runs on a LoRA run ($out)" test $rc -eq 0
# greedy ids of the LoRA run (its adapters merged for decoding) equal those of the merged export,
# and differ from the base's unless the adapters changed nothing the argmax sees
lora_ids=$($W sample --run "$T/run" --device cpu --ids --prompt "1 2" --tokens 8 --temperature 0 --ignore-eos 2>/dev/null)
merged_ids=$($W sample --model "$T/merged" --device cpu --ids --prompt "1 2" --tokens 8 --temperature 0 --ignore-eos 2>/dev/null)
check "sample of a LoRA run decodes with its adapters: the merged model's greedy ids ($lora_ids | $merged_ids)" \
    test -n "$lora_ids" -a "$lora_ids" = "$merged_ids"

# --init on a PEFT adapter directory: its base, and the adapters continue from it (--steps 0: as they were)
out=$($W train --init "$T/adapter" --data "$T/data" --out "$T/cont" "${R[@]}" --steps 0 2>&1); rc=$?
check "train --init ADAPTER_DIR exits 0 ($out)" test $rc -eq 0
check "train --init ADAPTER_DIR names the adapter's base" grep -q "is a LoRA adapter: its base" <<<"$out"
check "the run starts from the adapter's values" $PY -c "
import sys; sys.path.insert(0, 'tests')
import numpy as np, gpt2_torch_ref as g
a, b = g.load_safetensors(sys.argv[1]), g.load_safetensors(sys.argv[2])
sys.exit(0 if sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a) else 1)" \
    "$T/adapter/adapter_model.safetensors" "$T/cont/adapter_model.safetensors"
expect_fail "--lora contradicting the adapter of --init" "contradicts" $W train --init "$T/adapter" --data "$T/data" \
    --out "$T/cont2" "${R[@]}" --steps 1 --lora 8

section "GPT-2, and refusals"
$H gpt2 "$T/g" --layout hub --seed 2
out=$($W train --init "$T/g" --data "$T/data" --out "$T/run_g" "${R[@]}" --steps 2 --lora 2 --lora-targets qkv,down \
      --lora-dropout 0.1 --lora-rslora 2>&1); rc=$?
check "gpt2 train --lora exits 0 ($out)" test $rc -eq 0
check "gpt2: 4 adapters, rsLoRA scale 8/sqrt(2)" grep -q "scale 5.65685.* 4 adapters" <<<"$out"
expect_fail "gpt2 target q" "qkv" $W train --init "$T/g" --data "$T/data" --out "$T/r1" "${R[@]}" --lora 2 --lora-targets q
expect_fail "llama target lm_head" "--lora-targets" $W train --init "$T/base" --data "$T/data" --out "$T/r2" "${R[@]}" \
    --lora 2 --lora-targets q,lm_head
out=$($W train --init "$T/base" --data "$T/data" --out "$T/r3" "${R[@]}" --steps 4 --lora 2 --precision f16 2>&1); rc=$?
check "LoRA in f16 (mixed precision) trains ($out)" test $rc -eq 0
check "LoRA in f16: the loss falls" $PY -c "
import json, sys
rows = [json.loads(l)['loss'] for l in open(sys.argv[1]) if '\"loss\"' in l]
sys.exit(0 if len(rows) >= 4 and rows[-1] < rows[0] - 0.05 else 1)" "$T/r3/metrics.jsonl"
expect_fail "--base-precision nf4 without --lora" "needs --lora" $W train --init "$T/base" --data "$T/data" \
    --out "$T/r5" "${R[@]}" --base-precision nf4
expect_fail "rank above the limit" "--lora" $W train --init "$T/base" --data "$T/data" --out "$T/r4" "${R[@]}" --lora 5000
expect_fail "export --merge of a full run" "LoRA run" bash -c "'$W' train --init '$T/base' --data '$T/data' --out '$T/full' \
    ${R[*]} --steps 1 >/dev/null 2>&1; '$W' export --run '$T/full' --out '$T/fm' --merge"

section "the memory plan before step 1"
out=$($W train --init "$T/base" --data "$T/data" --out "$T/p1" "${R[@]}" --steps 1 --lora 4 2>&1)
check "train prints the plan by kind" grep -q "activations kept" <<<"$out"
expect_fail "a run above --memory-limit is refused up front" "it was not started" $W train --init "$T/base" \
    --data "$T/data" --out "$T/p2" "${R[@]}" --steps 1 --memory-limit 0.0001
check "the refused run wrote no checkpoint" test ! -e "$T/p2/ckpt.bin"
# a limit between the plans of block and no recomputation: auto picks recomputation, and says so
out=$($W train --init "$T/base" --data "$T/data" --out "$T/p3" "${R[@]}" --steps 1 --batch 8 --memory-limit 0.00085 2>&1)
check "--recompute auto picks recomputation under a tight limit ($out)" grep -Eq "recompute (attention|block), chosen by auto" <<<"$out"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
