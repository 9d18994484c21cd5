#!/usr/bin/env bash
# test_tokenize_cli.sh — `wgtrain tokenize` (GPT-2's tokenizer and a data/run directory's own):
# output format, round trips of text and of arbitrary bytes, refusals of bad ids and flags;
# then `prepare --tokenizer gpt2` -> train -> tokenize/sample/eval on the run, on the CPU backend.
# Prints "N passed, N failed"; the exit code is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WGT:-$PWD/build/wgtrain}   # WGT: another build (the sanitizer build) of the same command
PY=${PYTHON:-python3}
if [[ ! -x $W ]]; then echo "$W is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
T=$(mktemp -d /tmp/wgt_tokcli_XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/shell_lib.sh  # pass/fail counters, check, expect_fail, section
# round_trip WHAT FILE TOKENIZER [flags]: encode, decode, compare bytes
round_trip() {
    local what=$1 f=$2 tk=$3
    if $W tokenize --tokenizer "$tk" <"$f" >"$T/ids" && $W tokenize --tokenizer "$tk" --decode <"$T/ids" >"$T/back" &&
        cmp -s "$f" "$T/back"; then ok; else bad "$what round-trips"; fi
}

echo "== encoding format"
check "Hello world -> '15496 995\\n'" test "$(printf 'Hello world' | $W tokenize --tokenizer gpt2 | od -An -c | tr -s ' ')" = " 1 5 4 9 6 9 9 5 \n"
check "empty input -> a lone newline" test "$(printf '' | $W tokenize --tokenizer gpt2 | od -An -c | tr -d ' ')" = '\n'
check "<|endoftext|> is plain text by default" test "$(printf 'a<|endoftext|>b' | $W tokenize --tokenizer gpt2)" = "64 27 91 437 1659 5239 91 29 65"
# the ids of tiktoken's "gpt2" (and of HF's GPT2TokenizerFast): CR and LF of a CRLF are read as given, and the
# spaces before it stay one piece with the CR ("   \r", "\n": \s+(?!\S) gives back the LF before the letter)
check "spaces before CRLF, then a letter" test "$(printf 'trailing   \r\nCRLF line' | $W tokenize --tokenizer gpt2)" = "9535 4386 220 220 220 201 198 34 7836 37 1627"
check "--allow-special makes it 50256" test "$(printf 'a<|endoftext|>b' | $W tokenize --tokenizer gpt2 --allow-special)" = "64 50256 65"
check "decode: ids across spaces, tabs and lines" test "$(printf '15496\n\t 995  ' | $W tokenize --tokenizer gpt2 --decode)" = "Hello world"
check "decode: 50256 is <|endoftext|>" test "$(printf '50256' | $W tokenize --tokenizer gpt2 --decode)" = "<|endoftext|>"
check "decode: no ids, no bytes" test "$(printf ' \n' | $W tokenize --tokenizer gpt2 --decode | wc -c)" -eq 0
check "tokenize --help" bash -c "'$W' tokenize --help | grep -q -- --decode"

echo "== round trips"
printf 'Prose, it'"'"'s fine.\r\nTabs\tand   spaces   \n\n\tdef f():\n        return 1\n\xc4\xb0stanbul \xc4\xb1\xc5\x9f\xc4\xb1k \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 e\xcc\x81 \xc2\xa0\xe3\x80\x80\xe2\x80\xa8 end   ' >"$T/text.txt"
round_trip "varied text" "$T/text.txt" gpt2
$PY -c "import random, sys; sys.stdout.buffer.write(random.Random(5).randbytes(200000))" >"$T/random.bin"
round_trip "200 kB of random bytes (invalid UTF-8, NULs)" "$T/random.bin" gpt2
check "random bytes give ids < 50257" $PY -c "
import sys; ids = [int(x) for x in open(sys.argv[1]).read().split()]; sys.exit(0 if ids and max(ids) < 50257 else 1)" "$T/ids"

echo "== refusals"
expect_fail "an id out of range names it and its position" "id 50257 (id #3 of the input" bash -c "echo '1 2 50257 4' | '$W' tokenize --tokenizer gpt2 --decode"
expect_fail "the range is stated" "ids 0..50256" bash -c "echo '99999' | '$W' tokenize --tokenizer gpt2 --decode"
expect_fail "a huge id" "out of range" bash -c "echo '123456789012345678901234567890' | '$W' tokenize --tokenizer gpt2 --decode"
expect_fail "a non-number" '"x12" (item #2' bash -c "echo '5 x12' | '$W' tokenize --tokenizer gpt2 --decode"
expect_fail "a negative id" '"-1"' bash -c "echo '-1' | '$W' tokenize --tokenizer gpt2 --decode"
expect_fail "no --tokenizer" "no tokenizer" bash -c "'$W' tokenize </dev/null"
expect_fail "a missing tokenizer path" "not found" bash -c "'$W' tokenize --tokenizer '$T/nope' </dev/null"
expect_fail "an unknown option" "unknown option" bash -c "'$W' tokenize --tokenizer gpt2 --frobnicate </dev/null"
expect_fail "--allow-special with --decode" "for encoding" bash -c "'$W' tokenize --tokenizer gpt2 --decode --allow-special </dev/null"
expect_fail "GPT2 dir env pointing nowhere" "lacks GPT-2" env WGTRAIN_GPT2_DIR="$T" bash -c "'$W' tokenize --tokenizer gpt2 </dev/null"

echo "== prepare --tokenizer gpt2, train, then the run's tokenizer"
$PY - "$T/corpus.txt" <<'EOF'
import random, sys
r = random.Random(3)
words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "it's", "caf\u00e9", "\u4e2d\u6587"]
docs = [" ".join(r.choice(words) for _ in range(r.randint(20, 60))) + "." for _ in range(40)]
open(sys.argv[1], "w").write("\n<|endoftext|>\n".join(docs) + "\n")
EOF
out=$($W prepare --input "$T/corpus.txt" --out "$T/data" --tokenizer gpt2 2>&1); rc=$?
check "prepare --tokenizer gpt2 exits 0 ($out)" test $rc -eq 0
check "it says it uses GPT-2's tokenizer" grep -q "GPT-2's tokenizer (50257 tokens)" <<<"$out"
for f in meta.json encoder.json vocab.bpe train_000.bin val_000.bin; do check "prepare wrote $f" test -s "$T/data/$f"; done
check "no tokenizer.bin" test ! -e "$T/data/tokenizer.bin"
check "meta.json: kind gpt2, vocab 50257" $PY -c "
import json, sys; m = json.load(open(sys.argv[1]))
sys.exit(0 if m['tokenizer_kind'] == 'gpt2' and m['vocab_size'] == 50257 and m['eot_token'] == 50256 else 1)" "$T/data/meta.json"
check "the data directory's tokenizer is GPT-2's" test "$($W tokenize --tokenizer "$T/data" <"$T/text.txt")" = "$($W tokenize --tokenizer gpt2 <"$T/text.txt")"
expect_fail "--vocab with --tokenizer gpt2" "fixed" "$W" prepare --input "$T/corpus.txt" --out "$T/d2" --tokenizer gpt2 --vocab 1000
expect_fail "an unknown --tokenizer" "use bpe" "$W" prepare --input "$T/corpus.txt" --out "$T/d2" --tokenizer llama

M=(--data "$T/data" --device cpu --layers 1 --heads 2 --d-model 16 --d-ff 32 --seq 16 --batch 2 --lr 1e-3 --warmup 1)
out=$($W train "${M[@]}" --out "$T/run" --steps 2 --val-every 2 --val-batches 1 --ckpt-every 2 --log-every 1 2>&1); rc=$?
check "train on GPT-2 tokens exits 0 ($out)" test $rc -eq 0
check "the run keeps GPT-2's files" test -s "$T/run/encoder.json" -a -s "$T/run/vocab.bpe" -a ! -e "$T/run/tokenizer.bin"
check "config.json: vocab 50257" $PY -c "
import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))['model']['vocab'] == 50257 else 1)" "$T/run/config.json"
check "the run's tokenizer is GPT-2's" test "$($W tokenize --tokenizer "$T/run" <"$T/text.txt")" = "$($W tokenize --tokenizer gpt2 <"$T/text.txt")"
out=$($W sample --run "$T/run" --prompt "The cat" --tokens 4 --device cpu 2>&1); rc=$?
check "sample on the GPT-2 run exits 0 ($out)" test $rc -eq 0
check "sample prints the prompt first" test "${out:0:7}" = "The cat"
out=$($W eval --run "$T/run" --device cpu 2>&1); rc=$?
check "eval on the GPT-2 run exits 0 ($out)" test $rc -eq 0
check "eval prints the loss" grep -qE "^loss [0-9.]+$" <<<"$out"
mv "$T/run/encoder.json" "$T/run/encoder.moved"
out=$($W sample --run "$T/run" --prompt "x" --tokens 1 --device cpu 2>&1); rc=$?
check "sample falls back to the data directory's tokenizer ($out)" test $rc -eq 0

echo "== a trained BPE through the same command"
out=$($W prepare --input "$T/corpus.txt" --out "$T/bdata" --vocab 300 2>&1); rc=$?
check "prepare (bpe) exits 0" test $rc -eq 0
round_trip "text with the data directory's BPE" "$T/text.txt" "$T/bdata"
round_trip "random bytes with the BPE file itself" "$T/random.bin" "$T/bdata/tokenizer.bin"
check "the BPE's ids are below its vocabulary" $PY -c "
import sys; ids = [int(x) for x in open(sys.argv[1]).read().split()]; sys.exit(0 if max(ids) < 300 else 1)" "$T/ids"
expect_fail "the BPE refuses an id past its vocabulary" "wgtrain-bpe tokenizer has ids 0.." bash -c "echo 300 | '$W' tokenize --tokenizer '$T/bdata' --decode"

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
