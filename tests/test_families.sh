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
. tests/shell_lib.sh
hf_setup families  # W, PY, H, T, R, T/data, T/tok.npy
FH="$PY $PWD/tests/family_helper.py"

# The Python side runs in two processes (tests/family_helper.py batch: torch imported once): every
# model is written first, every comparison with the reference made last.
names=() rts=() flags=()
family_case() {  # family_case NAME ROUNDTRIP MAKE_FLAGS...
    names+=("$1"); rts+=("$2"); local name=$1; shift 2; flags+=("$*")
    echo "family make $T/$name $* --seed $((${#name} + 3))" >>"$T/make.txt"
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
$FH batch "$T/mk" <"$T/make.txt"
checks=()  # what each line of checks.txt asserts
later() { checks+=("$1"); echo "$2" >>"$T/checks.txt"; }  # later WHAT "HELPER COMMAND ARGS...": checked in the batch
for k in "${!names[@]}"; do
    name=${names[k]}
    section "$name (${flags[k]})"
    check "$name: the model is written ($(cat "$T/mk/$k.out"))" test "$(cat "$T/mk/$k.rc")" = 0
    out=$($W train --init "$T/$name" --data "$T/data" --out "$T/run_$name" "${R[@]}" --steps 1 2>&1); rc=$?
    check "$name: train --init exits 0 ($out)" test $rc -eq 0
    [[ $rc -eq 0 ]] || continue
    later "$name: the first step's loss is PyTorch's" "fh check-loss $T/$name $T/data $T/run_$name/metrics.jsonl"
    out=$($W export --run "$T/run_$name" --out "$T/ex_$name" 2>&1)
    check "$name: export exits 0 ($out)" test $? -eq 0
    later "$name: the export's config.json and tensor names are the original's" "family check-export $T/$name $T/ex_$name"
    out=$($W grad --config "$T/ex_$name/config.json" --model "$T/ex_$name/model.safetensors" --tokens "$T/tok.npy" \
          --logits "$T/lg_$name.npy" 2>&1)
    later "$name: the export's logits are PyTorch's" "fh check-logits $T/ex_$name $T/tok.npy $T/lg_$name.npy"
    [[ ${rts[k]} == rt ]] || continue
    $W train --init "$T/ex_$name" --data "$T/data" --out "$T/rt_$name" "${R[@]}" --steps 0 >/dev/null 2>&1
    $W export --run "$T/rt_$name" --out "$T/ex2_$name" >/dev/null 2>&1
    later "$name: export -> init -> export gives back the same tensors" \
        "fh same-tensors $T/ex_$name/model.safetensors $T/ex2_$name/model.safetensors"
done
section "the comparisons with the reference"
$FH batch "$T/ck" <"$T/checks.txt"
for k in "${!checks[@]}"; do
    out=$(cat "$T/ck/$k.out" 2>&1)
    check "${checks[k]} ($out)" test "$(cat "$T/ck/$k.rc" 2>/dev/null)" = 0
    [[ ${checks[k]} == *logits* ]] && echo "   ${checks[k]}: $out"
done
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
