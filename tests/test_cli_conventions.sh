#!/usr/bin/env bash
# test_cli_conventions.sh — the command-line conventions (issue 8, items 10 and 11) on the CPU
# backend: --flag=value, "did you mean", --version, presets, train --config, the warmup
# warning, Ctrl-C acknowledged at once, the validation note, eval progress, and prepare
# skipping binary files and symlinked duplicates. Prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WGT:-$PWD/build/wgtrain}
PY=${PYTHON:-python3}
if [[ ! -x $W ]]; then echo "build/wgtrain is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
T=$(mktemp -d /tmp/wgt_cli_XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/shell_lib.sh  # pass/fail counters, check, expect_fail, section
has() { [[ $1 == *"$2"* ]]; }

# ---------------------------------------------------------------- a small corpus, a binary file, a symlink
mkdir -p "$T/in/sub"
$PY - "$T/in" <<'EOF2'
import random, sys
r = random.Random(3)
w = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home"]
for name in ["a.txt", "b.txt"]:
    docs = [" ".join(r.choice(w) for _ in range(120)) for _ in range(60)]
    open(f"{sys.argv[1]}/{name}", "w").write("\n<|endoftext|>\n".join(docs))
open(f"{sys.argv[1]}/logo.png", "wb").write(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(r.randrange(256) for _ in range(4000)))
open(f"{sys.argv[1]}/noise.dat", "wb").write(bytes(r.randrange(128, 256) for _ in range(4000)))
open(f"{sys.argv[1]}/latin1.txt", "wb").write(("caf\xe9 na\xefve r\xe9sum\xe9 " * 40).encode("latin-1"))
EOF2
ln -s ../a.txt "$T/in/sub/a-again.txt"

section prepare
out=$($W prepare --input "$T/in" --out="$T/data" --vocab=400 2>&1); rc=$?
check "prepare with --flag=value exits 0 ($out)" test $rc -eq 0
check "prepare says it skipped the binary files" grep -q "skipped 2 binary file(s).*logo.png.*noise.dat" <<<"$out"
check "prepare says it skipped the symlinked duplicate" grep -q "skipped 1 duplicate(s).*a-again.txt" <<<"$out"
check "prepare reads the 3 text files (Latin-1 text is text)" grep -q "^prepare: 3 files" <<<"$out"
expect_fail "prepare of only binary files" "binary ones were skipped" $W prepare --input "$T/in/logo.png" --out "$T/d2"

section "flags"
# OpenBLAS 0.3.21 falls back to its SSE3 (Prescott) kernels on CPUs newer than it; wgtrain then
# re-executes itself with the CPU's best kernels (src/backend/cpu/blas_core.c)
if grep -qw avx2 /proc/cpuinfo; then
    out=$(env -u OPENBLAS_CORETYPE "$W" info --device cpu)
    check "the CPU backend's BLAS kernels are not Prescott on a CPU with AVX2 ($out)" test "$(grep -c 'blas kernels: Prescott' <<<"$out")" = 0
    out=$(OPENBLAS_CORETYPE=Haswell "$W" info --device cpu)
    check "OPENBLAS_CORETYPE is the user's to set ($out)" grep -q "blas kernels: Haswell" <<<"$out"
fi
check "wgtrain --version" bash -c "'$W' --version | grep -qE '^wgtrain [0-9]+\.[0-9]+\.[0-9]+ .*Dawn'"
check "wgtrain -V" bash -c "'$W' -V | grep -q '^wgtrain '"
expect_fail "a misspelt command" "did you mean train?" $W trian
expect_fail "did you mean, train" "did you mean --steps?" $W train --stpes 5
expect_fail "did you mean, train --flag=value" "did you mean --steps?" $W train --stpes=5
expect_fail "did you mean, an abbreviation" "did you mean --val-every or --val-batches?" $W train --val 5
expect_fail "did you mean, a switch" "did you mean --resume?" $W train --resum
expect_fail "a switch given a value" "--resume takes no value" $W train --resume=1
expect_fail "did you mean, eval" "did you mean --batches?" $W eval --bathces 3
expect_fail "did you mean, sample" "did you mean --temperature?" $W sample --temprature 1
expect_fail "did you mean, prepare" "did you mean --input?" $W prepare --inptu x
expect_fail "did you mean, tokenize" "did you mean --decode?" $W tokenize --decod
expect_fail "did you mean, bench" "did you mean --layers?" $W bench --layrs 2
expect_fail "did you mean, grad" "did you mean --tokens?" $W grad --tokns x
expect_fail "did you mean, op" "did you mean --backend?" $W op gelu_inplace --backnd cpu
expect_fail "did you mean, an op" "did you mean gelu_inplace?" $W op gelu_inplce
expect_fail "did you mean, info" "did you mean --adapter?" $W info --adaptr x
expect_fail "a value that is not a flag" "unexpected argument 'foo'" $W train foo
out=$($W presets 2>&1)
for p in tiny small gpt2-124m llama-tiny llama-124m; do check "wgtrain presets lists $p" grep -q "^  $p " <<<"$out"; done
check "wgtrain presets: tiny's steps, lr, warmup, batch, seq" grep -qE "^  tiny +gpt2 +4 +4 +- +128 +512 +64 +8 +600 +0.002 +40 " <<<"$out"
out=$($W train --help)
check "train --help has the presets table and points to wgtrain presets" bash -c 'grep -q "wgtrain presets" <<<"$1" && grep -q "^  llama-124m " <<<"$1"' _ "$out"
check "train --help documents --config" grep -q -- "--config FILE.json" <<<"$out"

# small sizes: a step takes milliseconds
M=(--data "$T/data" --device cpu --layers 2 --heads 2 --d-model 32 --d-ff 64 --seq 32 --batch 4 --lr 3e-3)
section "train: --flag=value, the warmup warning, the validation note"
out=$($W train "${M[@]}" --out="$T/A" --steps=8 --warmup=20 --val-every=4 --val-batches=2 2>&1); rc=$?
check "train with --flag=value exits 0 ($out)" test $rc -eq 0
check "--steps=8 is taken" grep -q '"steps":	8' "$T/A/config.json"
check "a warning when warmup exceeds the run" grep -q "warning: --warmup 20 is longer than the run (--steps 8)" <<<"$out"
check "validation says how many tokens and why eval differs" grep -q "validation: 2 batches (--val-batches) of 4 x 32, about 256 tokens, every 4 steps.*\`wgtrain eval\`, which scores all of them" <<<"$out"
out=$($W train "${M[@]}" --out "$T/A2" --steps 8 --warmup 2 2>&1)
check "no warmup warning for a short warmup" bash -c '! grep -q "warning: --warmup" <<<"$1"' _ "$out"

section "train --config"
# a run's config.json repeats the run
out=$($W train --config "$T/A/config.json" --out "$T/B" --device cpu 2>&1); rc=$?
check "train --config RUN/config.json exits 0 ($out)" test $rc -eq 0
check "the repeated run's config.json equals the original's" diff "$T/A/config.json" "$T/B/config.json"
check "the repeated run's losses equal the original's" diff <(sed -E 's/, "lr".*//' "$T/A/metrics.jsonl") <(sed -E 's/, "lr".*//' "$T/B/metrics.jsonl")
# a subset of the keys, flags' names and config.json's sections; the command line overrides the file
cat >"$T/part.json" <<EOF2
{"data": "$T/data", "layers": 2, "heads": 2, "d-model": 32, "d-ff": 64, "seq": 32, "batch": 4,
 "train": {"steps": 6, "lr": 0.001, "warmup": 2}, "log": {"val_every": 3}}
EOF2
out=$($W train --config="$T/part.json" --out "$T/C" --device cpu --steps 5 2>&1); rc=$?
check "train --config with some keys exits 0 ($out)" test $rc -eq 0
check "the file's values are used (lr, val_every)" bash -c "grep -q '\"lr\":	0.001' '$T/C/config.json' && grep -q '\"val_every\":	3' '$T/C/config.json'"
check "a flag overrides the file (--steps 5)" grep -q '"steps":	5' "$T/C/config.json"
echo '{"steps": 4, "bogus": 1, "train": {"stpes": 3}}' >"$T/bad.json"
expect_fail "unknown keys in --config are refused, named" 'unknown keys "bogus", "train.stpes"' $W train --config "$T/bad.json" --out "$T/D"
echo '{"steps": "many"}' >"$T/bad2.json"
expect_fail "a key's value of the wrong type" '"steps" must be an integer' $W train --config "$T/bad2.json" --out "$T/D"
expect_fail "a missing --config file" "cannot open training configuration" $W train --config "$T/none.json" --out "$T/D"

section "Ctrl-C is acknowledged at once"
K=(--data "$T/data" --device cpu --layers 2 --heads 4 --d-model 256 --d-ff 1024 --seq 32 --batch 4 --steps 100000)
$W train "${K[@]}" --out "$T/S" >"$T/S.log" 2>&1 &
pid=$!
for i in $(seq 1 200); do grep -q "^step" "$T/S.log" && break; sleep 0.1; done
kill -INT $pid
wait $pid; rc=$?
check "SIGINT exits 130 (got $rc)" test $rc -eq 130
check "SIGINT prints 'stopping after this step...' before the checkpoint" bash -c "grep -n 'stopping after this step' '$T/S.log' | cut -d: -f1 | { read a; b=\$(grep -n '^checkpoint:' '$T/S.log' | cut -d: -f1); test -n \"\$a\" -a -n \"\$b\" && test \$a -lt \$b; }"
check "the run can be resumed" test -s "$T/S/ckpt.bin"

section "eval progress"
out=$($W eval --run "$T/A" --device cpu --progress=0.000001 2>"$T/eval.err"); rc=$?
check "eval exits 0 ($out)" test $rc -eq 0
check "eval says how many batches and tokens it scores" grep -qE "^eval: [0-9]+ batch(es)? of 4 x 32 tokens \(all of the [0-9]+ val tokens\)" <<<"$out"
check "eval progress lines on stderr" grep -qE "^eval: [0-9]+% \([0-9.KM]+ of about [0-9.KM]+ tokens, batch [0-9]+ of [0-9]+" "$T/eval.err"
check "eval's stdout is unchanged (loss, perplexity)" grep -q "^loss [0-9.]*$" <<<"$out"
out=$($W eval --run "$T/A" --device cpu --progress 0 2>&1 >/dev/null)
check "--progress 0: no progress lines" test -z "$out"

echo
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
