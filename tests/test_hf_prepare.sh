#!/usr/bin/env bash
# test_hf_prepare.sh — a Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) as a
# tokenizer kind: `wgtrain prepare --tokenizer DIR` on a small text corpus with Qwen3's tokenizer
# (151,669 ids: llm.c's 32-bit shards, version 7) and Llama-2's (32,000 ids: 16-bit shards,
# version 1). The shards' ids equal `wgtrain tokenize` of each document after the config's
# eos_token id (prepare starts every document with it); the data directory keeps both files
# byte for byte and meta.json names the kind;
# `wgtrain train` runs a few CPU steps of a tiny LLaMA of the tokenizer's vocabulary on it, and
# `tokenize --tokenizer DATA_DIR` opens the copy. Prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WGT:-$PWD/build/wgtrain}
PY=${PYTHON:-python3}
HF=third_party/hf-tokenizers
if [[ ! -x $W ]]; then echo "build/wgtrain is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
T=$(mktemp -d /tmp/wgt_hfprep_XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/shell_lib.sh

mkdir -p "$T/texts"
printf 'Hello world! The quick brown fox jumps over the lazy dog.\nSecond line: ünïcödé, 12345 digits, tabs\tand  spaces.\n' >"$T/texts/a.txt"
printf 'Special text <|im_end|> and </s> and <eos> inside a document.\n' >"$T/texts/b.txt"
printf '日本語のテキスト and emoji 🙂 end.' >"$T/texts/c.txt"

# header ints and ids of an llm.c shard: prints "MAGIC VERSION COUNT" then the ids on one line
shard() { $PY -c "
import struct, sys
b = open(sys.argv[1], 'rb').read(); h = struct.unpack('<256i', b[:1024])
w = 4 if h[1] == 7 else 2
ids = struct.unpack('<%d%s' % (h[2], 'I' if w == 4 else 'H'), b[1024:1024 + w * h[2]])
print(h[0], h[1], h[2]); print(' '.join(map(str, ids)))" "$1"; }

for m in qwen3:151669:151645:7 llama2:32000:2:1; do
    IFS=: read -r name vocab eos ver <<<"$m"
    section "$name ($vocab ids)"
    out=$($W prepare --tokenizer "$HF/$name" --input "$T/texts" --out "$T/$name" --val-fraction 0.34 2>&1); rc=$?
    check "prepare exits 0 ($out)" test $rc -eq 0
    check "tokenizer.json is copied byte for byte" cmp -s "$HF/$name/tokenizer.json" "$T/$name/tokenizer.json"
    check "tokenizer_config.json is copied byte for byte" cmp -s "$HF/$name/tokenizer_config.json" "$T/$name/tokenizer_config.json"
    check "meta.json names the kind, vocabulary and end-of-text" $PY -c "
import json, sys; m = json.load(open(sys.argv[1]))
sys.exit(0 if (m['tokenizer_kind'], m['tokenizer'], m['vocab_size'], m['eot_token']) == ('hf', 'tokenizer.json', $vocab, $eos) else 1)" "$T/$name/meta.json"
    # the documents in the order prepare reads them (sorted paths); the last one is validation
    want=""
    for f in a b; do want+="$eos $($W tokenize --tokenizer "$HF/$name" <"$T/texts/$f.txt") "; done
    got=$(shard "$T/$name/train_000.bin")
    check "train shard header is version $ver ($(head -1 <<<"$got"))" test "$(head -1 <<<"$got" | cut -d' ' -f1-2)" = "$([[ $ver == 7 ]] && echo 20240801 || echo 20240520) $ver"
    check "train ids equal tokenize of eos + each document" test "$(tail -1 <<<"$got")" = "${want% }"
    vwant="$eos $($W tokenize --tokenizer "$HF/$name" <"$T/texts/c.txt")"
    check "val ids equal tokenize of eos + the last document" test "$(shard "$T/$name/val_000.bin" | tail -1)" = "$vwant"
    check "tokenize --tokenizer DATA_DIR opens the copy (same ids)" test \
        "$($W tokenize --tokenizer "$T/$name" <"$T/texts/a.txt")" = "$($W tokenize --tokenizer "$HF/$name" <"$T/texts/a.txt")"
    expect_fail "--allow-special with the data directory's Hugging Face tokenizer" "always recognises" \
        $W tokenize --tokenizer "$T/$name" --allow-special <"$T/texts/a.txt"
    out=$($W train --data "$T/$name" --arch llama --vocab "$vocab" --layers 1 --heads 2 --kv-heads 2 --d-model 16 \
        --d-ff 32 --seq 8 --batch 2 --steps 3 --device cpu --out "$T/run_$name" 2>&1); rc=$?
    check "train runs 3 CPU steps on it ($out)" test $rc -eq 0
    check "the run directory keeps the tokenizer.json" cmp -s "$HF/$name/tokenizer.json" "$T/run_$name/tokenizer.json"
    # export: the tokenizer files AutoTokenizer reads, as the data had them
    out=$($W export --run "$T/run_$name" --out "$T/hf_$name" 2>&1); rc=$?
    check "export exits 0 and names the tokenizer files ($out)" grep -q "tokenizer.json, tokenizer_config.json" <<<"$out"
    check "export: tokenizer.json byte for byte" cmp -s "$HF/$name/tokenizer.json" "$T/hf_$name/tokenizer.json"
    check "export: tokenizer_config.json byte for byte" cmp -s "$HF/$name/tokenizer_config.json" "$T/hf_$name/tokenizer_config.json"
    check "export: special_tokens_map.json holds the config's eos_token" $PY -c "
import json, sys
m = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
assert m['eos_token'] == c['eos_token'] and 'vocab.json' not in __import__('os').listdir(sys.argv[3]), m" \
        "$T/hf_$name/special_tokens_map.json" "$HF/$name/tokenizer_config.json" "$T/hf_$name"
    check "export: the exported tokenizer encodes as the original" test \
        "$($W tokenize --tokenizer "$T/hf_$name" <"$T/texts/a.txt")" = "$($W tokenize --tokenizer "$HF/$name" <"$T/texts/a.txt")"
done

section "export of a run whose tokenizer has no tokenizer_config.json"
# Llama-2's tokenizer.json with a post-processor that appends </s>: its EOS is the end-of-text
mkdir -p "$T/nocfg" && $PY -c "
import json, sys; t = json.load(open(sys.argv[1]))
t['post_processor'] = {'type': 'TemplateProcessing',
    'single': [{'Sequence': {'id': 'A', 'type_id': 0}}, {'SpecialToken': {'id': '</s>', 'type_id': 0}}],
    'pair': [{'Sequence': {'id': 'A', 'type_id': 0}}, {'Sequence': {'id': 'B', 'type_id': 1}}, {'SpecialToken': {'id': '</s>', 'type_id': 1}}],
    'special_tokens': {'</s>': {'id': '</s>', 'ids': [2], 'tokens': ['</s>']}}}
json.dump(t, open(sys.argv[2], 'w'))" "$HF/llama2/tokenizer.json" "$T/nocfg/tokenizer.json"
out=$($W prepare --tokenizer "$T/nocfg" --input "$T/texts" --out "$T/nocfg_data" 2>&1); rc=$?
check "prepare with the post-processor's EOS exits 0 ($out)" test $rc -eq 0
out=$($W train --data "$T/nocfg_data" --arch llama --vocab 32000 --layers 1 --heads 2 --kv-heads 2 --d-model 16 \
    --d-ff 32 --seq 8 --batch 2 --steps 1 --device cpu --out "$T/run_nocfg" 2>&1); rc=$?
check "train exits 0 ($out)" test $rc -eq 0
out=$($W export --run "$T/run_nocfg" --out "$T/hf_nocfg" 2>&1); rc=$?
check "export exits 0 ($out)" test $rc -eq 0
check "export writes a minimal tokenizer_config.json and special_tokens_map.json naming </s>" $PY -c "
import json, sys
c = json.load(open(sys.argv[1])); m = json.load(open(sys.argv[2]))
assert c['tokenizer_class'] == 'PreTrainedTokenizerFast' and c['eos_token'] == '</s>' and m['eos_token'] == '</s>', (c, m)" \
    "$T/hf_nocfg/tokenizer_config.json" "$T/hf_nocfg/special_tokens_map.json"

section "refusals"
mkdir -p "$T/noeos" && $PY -c "
import json, sys; t = json.load(open(sys.argv[1])); t['post_processor'] = None; json.dump(t, open(sys.argv[2], 'w'))" \
    "$HF/llama2/tokenizer.json" "$T/noeos/tokenizer.json"
expect_fail "a tokenizer.json without config or EOS" "no end-of-text token" $W prepare --tokenizer "$T/noeos" --input "$T/texts" --out "$T/x"
mkdir -p "$T/badeos" && cp "$HF/llama2/tokenizer.json" "$T/badeos/" && echo '{"eos_token": "<nope>"}' >"$T/badeos/tokenizer_config.json"
expect_fail "an eos_token that is no token" "eos_token" $W prepare --tokenizer "$T/badeos" --input "$T/texts" --out "$T/y"
expect_fail "--vocab with an existing tokenizer" "--vocab does not go" $W prepare --tokenizer "$HF/llama2" --vocab 500 --input "$T/texts" --out "$T/z"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
