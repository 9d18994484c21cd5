#!/usr/bin/env bash
# test_sharded.sh — sharded Hugging Face checkpoints (model.safetensors.index.json) on the CPU
# backend: `train --init` and `grad` read a checkpoint split into BF16 / F16 / F32 shards (tests/
# shard_helper.py, save_pretrained's layout) to the same first loss, logits and gradients as the
# same weights in one file; `export --max-shard-size` writes shards with their index, which read
# back to the same values; a broken checkpoint (a shard missing, a path leaving the directory,
# a tensor in the wrong shard, in two shards, unlisted or listed but absent, a tied copy that
# differs across shards) is refused naming the tensor or file.
# Prints "N passed, N failed"; the exit code is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/shell_lib.sh
hf_setup sharded  # W, PY, H, T, R, T/data, T/tok.npy
S="$PY $PWD/tests/shard_helper.py"

first_loss() { $PY -c "import json,sys; print(repr(json.loads(open(sys.argv[1]).readline())['loss']))" "$1"; }

section "LLaMA split into BF16 shards: init, grad, export"
# BF16 values in one file and in shards: the same weights, so the same losses bit for bit
$H llama "$T/l_one" --tie 0 --dtype BF16 --seed 11 --NKV 2
n=$($S split "$T/l_one" "$T/l_sh" --max-bytes 6000 --dtype BF16 --reverse)
check "the LLaMA checkpoint is split into several shards ($n)" test "$n" -ge 3
for d in l_one l_sh; do
    out=$($W train --init "$T/$d" --data "$T/data" --out "$T/run_$d" "${R[@]}" --steps 1 2>&1)
    check "train --init $d exits 0 ($out)" test $? -eq 0
done
a=$(first_loss "$T/run_l_one/metrics.jsonl"); b=$(first_loss "$T/run_l_sh/metrics.jsonl")
check "the sharded checkpoint trains to the same first loss as the one file ($a vs $b)" test "$a" = "$b"
out=$($H check-loss "$T/l_one" "$T/data" "$T/run_l_sh/metrics.jsonl" 2>&1)
check "the sharded checkpoint's first loss is PyTorch's ($out)" test $? -eq 0
g1=$($W grad --config "$T/l_one/config.json" --model "$T/l_one/model.safetensors" --tokens "$T/tok.npy" --out "$T/g1.safetensors" 2>&1)
g2=$($W grad --config "$T/l_sh/config.json" --model "$T/l_sh/model.safetensors.index.json" --tokens "$T/tok.npy" --out "$T/g2.safetensors" 2>&1)
check "grad reads the index: the same loss ($g1 / $g2)" test -n "$g1" -a "$g1" = "$g2"
out=$($H same-tensors "$T/g1.safetensors" "$T/g2.safetensors" 2>&1)
check "grad on the shards: the same gradients, bit for bit ($out)" test $? -eq 0

# export in shards of at most 20000 bytes (a tensor larger than that alone), then back
out=$($W export --run "$T/run_l_sh" --out "$T/ex_sh" --max-shard-size 20KB 2>&1)
check "export --max-shard-size 20KB exits 0 and says so ($out)" grep -q "shards and model.safetensors.index.json" <<<"$out"
out=$($S check-export "$T/ex_sh" --max-bytes 20000 --min-shards 3 2>&1)
check "the export's shards and index are save_pretrained's ($out)" test $? -eq 0
out=$($W export --run "$T/run_l_sh" --out "$T/ex_one" 2>&1)
check "the default export is one model.safetensors ($out)" test -f "$T/ex_one/model.safetensors" -a ! -e "$T/ex_one/model.safetensors.index.json"
$S join "$T/ex_sh" "$T/ex_sh_joined.safetensors"
out=$($H same-values "$T/ex_one/model.safetensors" "$T/ex_sh_joined.safetensors" 2>&1)
check "the shards hold the same tensors as the one-file export ($out)" test $? -eq 0
out=$($W train --init "$T/ex_sh" --data "$T/data" --out "$T/rt" "${R[@]}" --steps 0 2>&1)
check "train --init reads the exported shards ($out)" test $? -eq 0
out=$($W export --run "$T/rt" --out "$T/ex_rt" 2>&1)
out=$($H same-tensors "$T/ex_one/model.safetensors" "$T/ex_rt/model.safetensors" 2>&1)
check "export (shards) -> init -> export gives back the same tensors ($out)" test $? -eq 0
# re-exporting over an export with another shard count leaves no stale file that contradicts it
out=$($W export --run "$T/run_l_sh" --out "$T/ex_sh" 2>&1)
check "an unsharded export over a sharded one removes the index and shards" \
    bash -c "test -f '$T/ex_sh/model.safetensors' -a ! -e '$T/ex_sh/model.safetensors.index.json' && ! ls '$T/ex_sh' | grep -q '^model-0'"
out=$($W export --run "$T/run_l_sh" --out "$T/ex_one" --max-shard-size 40KB 2>&1)
check "a sharded export over an unsharded one removes model.safetensors ($out)" \
    bash -c "test ! -e '$T/ex_one/model.safetensors' -a -f '$T/ex_one/model.safetensors.index.json'"
mkdir -p "$T/foreign"; echo x > "$T/foreign/model-00001-of-00002.safetensors"
expect_fail "export over shards it did not write" "did not write" "$W" export --run "$T/run_l_sh" --out "$T/foreign"
expect_fail "--max-shard-size 0" "--max-shard-size '0'" "$W" export --run "$T/run_l_sh" --out "$T/x" --max-shard-size 0
expect_fail "--max-shard-size 5XB" "--max-shard-size '5XB'" "$W" export --run "$T/run_l_sh" --out "$T/x" --max-shard-size 5XB

section "GPT-2 (transformer. prefix, tied lm_head copy in another shard), F16 and F32 shards"
$H gpt2 "$T/g_one" --layout pretrained --dtype F16 --seed 12
n=$($S split "$T/g_one" "$T/g_sh" --max-bytes 9000 --dtype F16)
check "the GPT-2 checkpoint is split into several shards ($n)" test "$n" -ge 3
for d in g_one g_sh; do
    out=$($W train --init "$T/$d" --data "$T/data" --out "$T/run_$d" "${R[@]}" --steps 1 2>&1)
    check "train --init $d exits 0 ($out)" test $? -eq 0
done
a=$(first_loss "$T/run_g_one/metrics.jsonl"); b=$(first_loss "$T/run_g_sh/metrics.jsonl")
check "GPT-2 shards: the same first loss as one file ($a vs $b)" test "$a" = "$b"
$S break "$T/g_sh" "$T/g_perturb" --case perturb --tensor lm_head.weight
expect_fail "a tied lm_head copy that differs, in another shard" "not an exact copy" \
    "$W" train --init "$T/g_perturb" --data "$T/data" --out "$T/x" "${R[@]}" --steps 0
$S split "$T/g_one" "$T/g_sh32" --max-bytes 12000 --dtype F32 >/dev/null
out=$($W grad --config "$T/g_sh32/config.json" --model "$T/g_sh32/model.safetensors.index.json" --tokens "$T/tok.npy" 2>&1)
check "grad reads F32 shards ($out)" test $? -eq 0

section "broken sharded checkpoints are refused, naming what is wrong"
brk() {  # brk CASE SUBSTRING: train --init and grad both refuse the broken copy
    local case=$1 want=$2
    $S break "$T/l_sh" "$T/b_$case" --case "$case"
    expect_fail "init: $case" "$want" "$W" train --init "$T/b_$case" --data "$T/data" --out "$T/x_$case" "${R[@]}" --steps 0
    expect_fail "grad: $case" "$want" "$W" grad --config "$T/b_$case/config.json" \
        --model "$T/b_$case/model.safetensors.index.json" --tokens "$T/tok.npy"
    check "init: $case leaves no run" test ! -e "$T/x_$case/ckpt.bin"
}
brk missing-shard "which is missing"
brk escape "must be a file name in the index's directory"
brk subdir "must be a file name in the index's directory"
brk wrong-shard "but the index"
brk unlisted "does not list"
brk listed-absent "model.extra.weight"
brk two-shards "but the index"
brk no-weight-map "weight_map"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
