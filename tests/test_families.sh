#!/usr/bin/env bash
# test_families.sh — the families that share LLaMA's computation, end to end on the CPU backend:
# a random Hugging Face directory of each (tests/family_helper.py: llama with llama3 / linear RoPE
# scaling or attention_bias, mistral with a sliding window (8) shorter than the sequence (16), qwen2
# tied and untied, qwen3 with a head_dim other than hidden / heads, gemma3_text (tied with a (1 + w)
# round trip; untied with its sliding layer's window 8 shorter than the sequence), in
# F32 / BF16) is read by `train --init`, trained one step (the loss must be PyTorch's), and
# `export` must write a config.json with the original's settings and model_type and exactly the
# original's tensor names (what from_pretrained needs: nothing missing or unexpected), whose
# logits are PyTorch's on the exported weights; export -> init -> export gives back the same
# tensors (two of the cases).
# Prints "N passed, N failed"; the exit code is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WGT:-$PWD/build/wgtrain}
PY=${PYTHON:-python3}
H="$PY $PWD/tests/finetune_helper.py"
FH="$PY $PWD/tests/family_helper.py"
if [[ ! -x $W ]]; then echo "build/wgtrain is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
T=$(mktemp -d /tmp/wgt_families_XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/shell_lib.sh
R=(--device cpu --batch 2 --z-loss 0 --label-smoothing 0 --val-batches 1)
$H shards "$T/data" --V 96 --T 16 --seed 1
$H tokens "$T/tok.npy" --V 96 --B 2 --T 16

family_case() {  # family_case NAME ROUNDTRIP MAKE_FLAGS...
    local name=$1 rt=$2; shift 2
    local out rc
    $FH make "$T/$name" "$@" --seed $((${#name} + 3))
    section "$name ($*)"
    out=$($W train --init "$T/$name" --data "$T/data" --out "$T/run_$name" "${R[@]}" --steps 1 2>&1); rc=$?
    check "$name: train --init exits 0 ($out)" test $rc -eq 0
    [[ $rc -eq 0 ]] || return
    out=$($H check-loss "$T/$name" "$T/data" "$T/run_$name/metrics.jsonl" 2>&1)
    check "$name: the first step's loss is PyTorch's ($out)" test $? -eq 0
    out=$($W export --run "$T/run_$name" --out "$T/ex_$name" 2>&1)
    check "$name: export exits 0 ($out)" test $? -eq 0
    out=$($FH check-export "$T/$name" "$T/ex_$name" 2>&1)
    check "$name: the export's config.json and tensor names are the original's ($out)" test $? -eq 0
    out=$($W grad --config "$T/ex_$name/config.json" --model "$T/ex_$name/model.safetensors" --tokens "$T/tok.npy" \
          --logits "$T/lg_$name.npy" 2>&1)
    out=$($H check-logits "$T/ex_$name" "$T/tok.npy" "$T/lg_$name.npy" 2>&1)
    check "$name: the export's logits are PyTorch's ($out)" test $? -eq 0
    [[ $rt == rt ]] || return
    $W train --init "$T/ex_$name" --data "$T/data" --out "$T/rt_$name" "${R[@]}" --steps 0 >/dev/null 2>&1
    $W export --run "$T/rt_$name" --out "$T/ex2_$name" >/dev/null 2>&1
    out=$($H same-tensors "$T/ex_$name/model.safetensors" "$T/ex2_$name/model.safetensors" 2>&1)
    check "$name: export -> init -> export gives back the same tensors ($out)" test $? -eq 0
}
family_case llama3_untied rt --family llama --rope llama3
family_case llama_linear_tied - --family llama --rope linear --tie 1 --dtype BF16
family_case llama_bias - --family llama --bias 1
family_case mistral_window - --family mistral --window 8
family_case qwen2_tied rt --family qwen2 --tie 1 --dtype BF16
family_case qwen2_untied - --family qwen2
family_case qwen3_headdim rt --family qwen3 --head-dim 16 --dtype BF16
family_case qwen3_tied_bias - --family qwen3 --tie 1 --bias 1
family_case gemma3_tied rt --family gemma3_text --tie 1 --dtype BF16
family_case gemma3_untied - --family gemma3_text --head-dim 8 --window 8
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
