#!/usr/bin/env bash
# test_hf_tokenize_cli.sh — `wgtrain tokenize --tokenizer PATH` on Hugging Face tokenizer.json
# files (third_party/hf-tokenizers, scripts/setup.sh): the ids of Hugging Face `tokenizers` for
# texts of tests/fixtures/hf_tokenizer_ids.json, with and without --add-special, --decode back to
# its text byte for byte, a directory or the file as PATH, and the refusals of the command.
# Prints "N passed, N failed"; the exit code is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
W=$PWD/build/wgtrain
PY=${PYTHON:-python3}
H=third_party/hf-tokenizers
if [[ ! -x $W ]]; then echo "build/wgtrain is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
T=$(mktemp -d /tmp/wgt_hftok_XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/shell_lib.sh

# write_case NAME TOKENIZER INDEX: the text, and the expected ids / decodings, as files
write_case() {
    $PY - "$@" "$T" <<'PYEOF'
import json, sys
name, tok, i, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
fx = json.load(open("tests/fixtures/hf_tokenizer_ids.json", encoding="utf-8"))
row = fx["tokenizers"][tok][i]
open(f"{out}/{name}.txt", "wb").write(fx["texts"][i].encode("utf-8"))
open(f"{out}/{name}.ids", "w").write(" ".join(map(str, row["ids"])) + "\n")
open(f"{out}/{name}.sids", "w").write(" ".join(map(str, row["ids_special"])) + "\n")
open(f"{out}/{name}.dec", "wb").write(row["decoded_special"].encode("utf-8"))
PYEOF
}

# one text each (every run loads the whole file; test_hf_tokenizer.c covers the fixture's texts):
# the family's own special tokens inside the text
for case in llama3_1:52 qwen3:56 llama2:58 gemma3:57; do
    tok=${case%%:*} i=${case##*:}
    section "$tok"
    write_case c "$tok" "$i"
    check "$tok text #$i ids" cmp -s <($W tokenize --tokenizer "$H/$tok" <"$T/c.txt") "$T/c.ids"
    check "$tok text #$i --add-special ids" cmp -s <($W tokenize --tokenizer "$H/$tok/tokenizer.json" --add-special <"$T/c.txt") "$T/c.sids"
    check "$tok text #$i --decode" cmp -s <($W tokenize --tokenizer "$H/$tok" --decode <"$T/c.sids") "$T/c.dec"
done

section "a tokenizer.json under another name"
cp "$H/llama2/tokenizer.json" "$T/tok"
check "a JSON file without .json is read as tokenizer.json" test "$(printf 'Hello world' | $W tokenize --tokenizer "$T/tok" --add-special)" = "1 22557 1526"

section "refusals"
expect_fail "an id past the vocabulary" "out of range" bash -c "echo '1 999999' | '$W' tokenize --tokenizer $H/llama2 --decode"
expect_fail "invalid UTF-8 input" "not valid UTF-8" bash -c "printf 'a\\xffb' | '$W' tokenize --tokenizer $H/llama2"
expect_fail "--allow-special with a tokenizer.json" "always" bash -c "echo a | '$W' tokenize --tokenizer $H/llama2 --allow-special"
expect_fail "--add-special with --decode" "encoding" bash -c "echo 1 | '$W' tokenize --tokenizer $H/llama2 --add-special --decode"
expect_fail "--add-special with GPT-2's tokenizer" "tokenizer.json" bash -c "echo a | '$W' tokenize --tokenizer gpt2 --add-special"
printf '{"model":{"type":"WordPiece","vocab":{}}}' >"$T/wp.json"
expect_fail "a WordPiece tokenizer.json names the model" "WordPiece" bash -c "echo a | '$W' tokenize --tokenizer '$T/wp.json'"
head -c 5000 "$H/llama2/tokenizer.json" >"$T/cut.json"
expect_fail "a truncated tokenizer.json" "not valid JSON" bash -c "echo a | '$W' tokenize --tokenizer '$T/cut.json'"
# read strictly, as every JSON file: a byte order mark, a NUL and junk, a key twice
{ printf '\xef\xbb\xbf'; cat "$H/llama2/tokenizer.json"; } >"$T/bom.json"
expect_fail "a tokenizer.json with a byte order mark" "byte order mark" bash -c "echo a | '$W' tokenize --tokenizer '$T/bom.json'"
{ cat "$H/llama2/tokenizer.json"; printf '\0junk'; } >"$T/nul.json"
expect_fail "a tokenizer.json with a NUL and junk after it" "after the JSON value" bash -c "echo a | '$W' tokenize --tokenizer '$T/nul.json'"
{ printf '{"version": "1.0", '; tail -c +2 "$H/llama2/tokenizer.json"; } >"$T/dup.json"
expect_fail "a tokenizer.json with a key twice" '"version" twice' bash -c "echo a | '$W' tokenize --tokenizer '$T/dup.json'"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
