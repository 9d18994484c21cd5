#!/usr/bin/env bash
# test_fault_cli.sh — hostile inputs and faults through the real command, on the CPU backend with
# tiny models: a metrics.jsonl of extreme values on --resume (the plot must not hang or stand
# before the checkpoint), a diverging run (its last good checkpoint kept, its advice accepted by
# --resume, changed settings recorded), an export failing on a full disk or killed mid-way (the
# directory shows one export whole), SIGTERM inside a long gradient accumulation, a replaced
# tokenizer.bin under `sample`, `prepare` into a run directory or its own input, --init from
# NaN weights, one --config setting spelled twice, a Hugging Face config.json with a duplicate
# key or too deep, and an out-of-range number. Prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WGT:-$PWD/build/wgtrain}   # WGT: another build (the sanitizer build) of the same command
PY=${PYTHON:-python3}
if [[ ! -x $W ]]; then echo "$W is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
T=$(mktemp -d /tmp/wgt_fault_XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/shell_lib.sh  # pass/fail counters, check, expect_fail, section
holds() { local what=$1; if eval "$2"; then ok; else bad "$what: exit $rc, output: $out"; fi; }
# the step of a checkpoint (ckpt.bin: 64-byte header, config JSON, then step and updates)
ckpt_step() { $PY -c "
import struct, sys
b = open(sys.argv[1], 'rb').read(); j = struct.unpack_from('<I', b, 64)[0]
print(struct.unpack_from('<Q', b, 64 + 4 + j)[0])" "$1"; }

$PY tests/make_corpus.py "$T/corpus.txt" 7
$W prepare --input "$T/corpus.txt" --out "$T/data" --vocab 300 >/dev/null
M=(--data "$T/data" --device cpu --layers 2 --heads 2 --d-model 32 --d-ff 64 --seq 32 --batch 4)

section "a metrics.jsonl of extreme values on --resume"
$W train "${M[@]}" --out "$T/P" --steps 4 --val-every 2 --val-batches 1 --ckpt-every 2 --stop-at 2 >/dev/null 2>&1
cat >"$T/P/metrics.jsonl" <<'EOF'
{"step": 1, "loss": 1.7e308, "lr": 1.7e308, "grad_norm": 5e-324, "tokens_per_s": 1, "time_s": 1}
{"step": 2, "loss": -1.7e308, "val_loss": 1.7e308, "lr": -1.7e308, "grad_norm": 1.7e308, "tokens_per_s": 1, "time_s": 2}
EOF
out=$(timeout -k 5 60 $W train --out "$T/P" --resume --device cpu 2>&1); rc=$?
holds "the resumed run finishes (no endless plot)" '[[ $rc -eq 0 ]]'
check "the checkpoint of the validation step 4 is written" test "$(ckpt_step "$T/P/ckpt.bin")" = 4
check "loss.svg is well-formed XML" $PY -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$T/P/loss.svg"
check "loss.svg holds no non-finite coordinate" bash -c "! grep -qiE 'nan|inf\"' '$T/P/loss.svg'"

section "a diverging run keeps its last good checkpoint; the advice works"
$W train "${M[@]}" --out "$T/D" --steps 80 --lr 3e-3 --warmup 2 --ckpt-every 2 --stop-at 4 >/dev/null 2>&1
out=$($W train --out "$T/D" --resume --device cpu --lr 10 --weight-decay 10 --warmup 0 2>&1); rc=$?
holds "a resume may raise --lr, --weight-decay, --warmup: recorded, then the run diverges and stops" \
    '[[ $rc -ne 0 && $out == *"resuming with changed settings: --warmup 0 (was 2), --lr 10 (was 0.003)"* && $out == *"has not been finite"* ]]'
ck=$(ckpt_step "$T/D/ckpt.bin")
holds "the stop message names the checkpoint kept (step $ck)" '[[ $out == *"last checkpoint (step $ck,"* ]]'
check "no checkpoint was written over the good one during the skipped updates (step $ck was not skipped)" \
    $PY - "$T/D/metrics.jsonl" "$ck" <<'EOF'
import json, sys
rows = {r["step"]: r for r in map(json.loads, open(sys.argv[1]))}
ck = int(sys.argv[2])
assert ck >= 4 and not rows[ck].get("skipped"), (ck, rows.get(ck))
# a later checkpoint was due (every 2 steps) during the skipped updates, and none replaced this one
assert any(r.get("skipped") for s, r in rows.items() if s > ck and s % 2 == 0), "no skipped update at a checkpoint step"
EOF
# a fresh run diverging the same way: whatever checkpoint it leaves is of an update that went through
$W train "${M[@]}" --out "$T/F" --steps 80 --lr 10 --weight-decay 10 --warmup 0 --ckpt-every 2 >/dev/null 2>&1
if [[ -f $T/F/ckpt.bin ]]; then
    check "a fresh diverging run: its checkpoint is not of a skipped update" $PY - "$T/F/metrics.jsonl" "$(ckpt_step "$T/F/ckpt.bin")" <<'EOF'
import json, sys
rows = {r["step"]: r for r in map(json.loads, open(sys.argv[1]))}
assert not rows[int(sys.argv[2])].get("skipped"), sys.argv[2]
EOF
fi
advice=$(grep -o "wgtrain train --out [^ ]* --resume --lr [0-9.e+-]*" <<<"$out")
holds "the advice is a command" '[[ -n $advice ]]'
out=$(${advice/wgtrain/$W} --device cpu --stop-at $((ck + 2)) 2>&1); rc=$?
holds "the advised command is accepted by --resume and runs" \
    '[[ $rc -eq 0 && $out == *"resuming with changed settings: --lr "* && $out != *"differs from the checkpoint"* ]]'
check "config.json records the new --lr (and the --min-lr that follows it)" $PY - "$T/D/config.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))["train"]
assert t["lr"] == 1 and abs(t["min_lr"] - 0.1) < 1e-12, t
EOF
check "the first metrics row after the resume records the change" \
    grep -q "\"step\": $((ck + 1)),.*\"resumed_with\": {\"lr\":1,\"min_lr\":0.1" "$T/D/metrics.jsonl"
$W train "${M[@]}" --out "$T/C" --steps 8 --ckpt-every 4 --stop-at 4 >/dev/null 2>&1
out=$($W train --out "$T/C" --resume --device cpu --clip 0.5 --loss-scale dynamic --loss-scale-init 1024 2>&1); rc=$?
holds "--resume with --clip and a loss scale" '[[ $rc -eq 0 && $out == *"--clip 0.5 (was 1)"* && $out == *"loss scale dynamic from 1024"* ]]'
check "config.json records them" $PY -c "
import json, sys; t = json.load(open(sys.argv[1]))['train']
sys.exit(0 if t['clip'] == 0.5 and t['loss_scale'] == 'dynamic' and t['loss_scale_init'] == 1024 else 1)" "$T/C/config.json"
expect_fail "AdamW's betas still may not change" "differs from the checkpoint" \
    $W train --out "$T/C" --resume --device cpu --steps 10 --beta1 0.8

section "a failed or killed export leaves one export whole"
$W train "${M[@]}" --layers 1 --out "$T/EA" --steps 2 >/dev/null 2>&1
$W train "${M[@]}" --d-model 64 --d-ff 256 --out "$T/EB" --steps 2 >/dev/null 2>&1
$W export --run "$T/EA" --out "$T/E" >/dev/null && echo "mine" >"$T/E/README.md"
$W export --run "$T/EB" --out "$T/EBref" >/dev/null
snap() { (cd "$1" && find . -type f | sort | xargs md5sum); }
snap "$T/E" >"$T/E.md5"
big=$(stat -c %s "$T/EBref/model.safetensors"); small=$(stat -c %s "$T/E/model.safetensors")
check "the second export's weights are larger ($big > $small bytes)" test "$big" -gt $((small + 4096))
# a full disk: files larger than the first export's weights cannot be written (EFBIG, as ENOSPC)
out=$( (trap '' XFSZ; ulimit -f $(( (small + 2048) / 1024 )); $W export --run "$T/EB" --out "$T/E") 2>&1); rc=$?
holds "the export fails on the full disk with a clean message" '[[ $rc -ne 0 && $out == *"File too large"* ]]'
check "the directory still holds the first export, whole" diff <(snap "$T/E") "$T/E.md5"
check "no stage is left beside it" bash -c "! ls -a '$T' | grep -q wgtrain-"
WGTRAIN_TEST_KILL_AT=export-staged $W export --run "$T/EB" --out "$T/E" >/dev/null 2>&1; rc=$?
check "killed after staging (exit $rc)" test $rc -eq 137
check "after the kill before the switch: the first export, whole" diff <(snap "$T/E") "$T/E.md5"
WGTRAIN_TEST_KILL_AT=export-switched $W export --run "$T/EB" --out "$T/E" >/dev/null 2>&1; rc=$?
check "killed after the switch (exit $rc)" test $rc -eq 137
for f in wgtrain-export.json config.json model.safetensors; do
    check "after the kill after the switch: the second export's $f" cmp -s "$T/E/$f" "$T/EBref/$f"
done
out=$($W export --run "$T/EA" --out "$T/E" 2>&1); rc=$?
holds "the next export recovers and succeeds" '[[ $rc -eq 0 ]]'
check "it is the first export again, with the file export did not write kept" diff <(snap "$T/E") "$T/E.md5"
check "nothing is left beside it" bash -c "! ls -a '$T' | grep -q wgtrain-"

section "SIGTERM inside a long gradient accumulation"
$W train "${M[@]}" --out "$T/G" --steps 3 --grad-accum 1000000 >"$T/G.log" 2>&1 &
pid=$!
for i in $(seq 1 300); do grep -q "M parameters" "$T/G.log" && break; sleep 0.1; done
sleep 1
kill -TERM $pid
for i in $(seq 1 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $pid 2>/dev/null; then kill -KILL $pid; bad "SIGTERM: still running 30 s later"; fi
wait $pid; rc=$?
check "SIGTERM stops the update at its next micro-batch (exit $rc)" test $rc -eq 130
check "and checkpoints the last completed update (step 0)" bash -c "grep -q 'interrupted at step 0 (checkpoint at step 0)' '$T/G.log' && test \"\$(cd '$PWD' && $(declare -f ckpt_step); PY=$PY ckpt_step '$T/G/ckpt.bin')\" = 0"

section "sample checks the run's tokenizer"
$PY tests/make_corpus.py "$T/corpus2.txt" 11
$W prepare --input "$T/corpus2.txt" --out "$T/data2" --vocab 300 >/dev/null
check "a second tokenizer of the same size" bash -c "test \$(cat '$T/data/meta.json' | $PY -c 'import json,sys; print(json.load(sys.stdin)[\"vocab_size\"])') = \$(cat '$T/data2/meta.json' | $PY -c 'import json,sys; print(json.load(sys.stdin)[\"vocab_size\"])') && ! cmp -s '$T/data/tokenizer.bin' '$T/data2/tokenizer.bin'"
$W train "${M[@]}" --out "$T/S" --steps 2 >/dev/null 2>&1
s0=$($W sample --run "$T/S" --device cpu --tokens 12 --seed 2 2>/dev/null)
cp "$T/data2/tokenizer.bin" "$T/S/tokenizer.bin"
out=$($W sample --run "$T/S" --device cpu --tokens 12 --seed 2 2>"$T/s.err"); rc=$?
holds "a replaced RUN/tokenizer.bin is noticed and the data's (the run's) is used" \
    '[[ $rc -eq 0 && $out == "$s0" ]] && grep -q "is not this run'"'"'s tokenizer" "$T/s.err"'
mv "$T/data" "$T/data.away"
expect_fail "with the run's own tokenizer nowhere: refused" "not this run's" $W sample --run "$T/S" --device cpu --tokens 4
check "--ids needs no tokenizer" bash -c "'$W' sample --run '$T/S' --device cpu --tokens 2 --ids --prompt '1 2' >/dev/null 2>&1"
mv "$T/data.away" "$T/data"

section "prepare refuses a run directory and its own input"
cp "$T/S/tokenizer.bin" "$T/S.tok"
expect_fail "prepare --out RUN_DIR" "holds a training run" $W prepare --input "$T/corpus.txt" --out "$T/S" --vocab 300
check "the run's tokenizer.bin is untouched" cmp -s "$T/S/tokenizer.bin" "$T/S.tok"
check "no shard was dropped into the run" bash -c "! ls '$T/S' | grep -q '^train_'"
mkdir -p "$T/txt" && cp "$T/corpus.txt" "$T/txt/a.txt"
expect_fail "prepare --input D --out D" "did not make" $W prepare --input "$T/txt" --out "$T/txt" --vocab 300
mkdir -p "$T/in2/out" && cp "$T/corpus.txt" "$T/in2/a.txt" && cp "$T/corpus.txt" "$T/in2/out/b.txt"
expect_fail "an input inside --out" "did not make" $W prepare --input "$T/in2" --out "$T/in2/out" --vocab 300
check "prepare again into its own earlier data directory" $W prepare --input "$T/corpus.txt" --out "$T/data" --vocab 300

section "--init from non-finite weights"
$W export --run "$T/EA" --out "$T/HF" >/dev/null
$PY - "$T/HF/model.safetensors" <<'EOF'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack_from("<Q", b, 0)[0]
h = json.loads(b[8:8 + n])
for k, v in h.items():
    if k == "__metadata__": continue
    a, z = v["data_offsets"]
    b[8 + n + a:8 + n + z] = struct.pack("<I", 0x7fc00000) * ((z - a) // 4)
open(sys.argv[1], "wb").write(b)
EOF
out=$($W train --init "$T/HF" --data "$T/data" --device cpu --steps 0 --out "$T/N" 2>&1); rc=$?
holds "--init warns, naming a tensor and the count of non-finite values" \
    '[[ $out == *"warning: "*"the tensor '"'"'"*"'"'"' has "*" non-finite values"* ]]'
out=$($W sample --run "$T/N" --device cpu --tokens 2 2>&1)
holds "sample warns about the run's non-finite weights" '[[ $out == *"are not finite"* ]]'

section "JSON read strictly, numbers in range"
printf '{"steps": 5, "train": {"steps": 2}}' >"$T/two.json"
expect_fail "train --config with one setting spelled twice" 'gives --steps twice, as "steps" and as "train.steps"' \
    $W train --config "$T/two.json" --data "$T/data" --out "$T/Z1" --device cpu
mkdir -p "$T/HF2" && cp "$T/EBref/model.safetensors" "$T/HF2/"
$PY - "$T/EBref/config.json" "$T/HF2/config.json" <<'EOF'
import sys
t = open(sys.argv[1]).read().rstrip().rstrip("}")
open(sys.argv[2], "w").write(t + ',\n  "n_head": 1\n}\n')
EOF
expect_fail "--init with a key twice in config.json" '"n_head" twice' \
    $W train --init "$T/HF2" --data "$T/data" --device cpu --steps 0 --out "$T/Z2"
$PY -c "import sys; open(sys.argv[1], 'w').write('[' * 5000 + ']' * 5000)" "$T/HF2/config.json"
expect_fail "a config.json 5000 levels deep is said to be too deep" "too deep" \
    $W train --init "$T/HF2" --data "$T/data" --device cpu --steps 0 --out "$T/Z3"
printf '\xef\xbb\xbf{"model_type": "gpt2"}' >"$T/HF2/config.json"
expect_fail "a config.json with a byte order mark" "byte order mark" \
    $W train --init "$T/HF2" --data "$T/data" --device cpu --steps 0 --out "$T/Z4"
expect_fail "--temperature 4.9e-324 is out of range" "out of range" \
    $W sample --run "$T/S" --device cpu --tokens 1 --temperature 4.9e-324
expect_fail "--lr 1e-400 is out of range" "out of range" $W train "${M[@]}" --out "$T/Z5" --lr 1e-400

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
