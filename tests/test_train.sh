#!/usr/bin/env bash
# test_train.sh — the trainer end to end on the CPU backend, with a generated corpus and tiny
# models so it runs in about a minute: prepare, train (metrics, plot, checkpoints), resume
# equality bit for bit, SIGTERM and SIGKILL at arbitrary moments (the last checkpoint must
# stay loadable and the finished run must equal one never interrupted), sample, eval, the
# llama-tiny preset (train, resume, sample, eval, bench), and the messages for bad inputs.
# Prints "N passed, N failed"; the exit code is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WGT:-$PWD/build/wgtrain}   # WGT: another build (the sanitizer build) of the same command
PY=${PYTHON:-python3}
if [[ ! -x $W ]]; then echo "build/wgtrain is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
T=$(mktemp -d /tmp/wgt_train_XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/shell_lib.sh  # pass/fail counters, check, expect_fail, section
# the step/loss/val_loss part of metrics.jsonl (timings differ between runs)
losses() { sed -E 's/, "lr".*//' "$1"; }

# ---------------------------------------------------------------- a corpus with structure to learn
$PY tests/make_corpus.py "$T/corpus.txt" 7

section prepare
out=$($W prepare --input "$T/corpus.txt" --out "$T/data" --vocab 512 2>&1); rc=$?
check "prepare exits 0 ($out)" test $rc -eq 0
check "prepare prints the unigram entropy" grep -q "unigram entropy" <<<"$out"
for f in meta.json tokenizer.bin train_000.bin val_000.bin; do check "prepare wrote $f" test -s "$T/data/$f"; done
check "prepare --help" bash -c "'$W' prepare --help >/dev/null"

# small sizes: a step takes milliseconds
M=(--data "$T/data" --device cpu --layers 2 --heads 2 --d-model 32 --d-ff 64 --seq 32 --batch 4 --lr 3e-3 --warmup 4)
section train
out=$($W train "${M[@]}" --out "$T/A" --steps 24 --val-every 6 --val-batches 2 --ckpt-every 8 --log-every 4 2>&1); rc=$?
check "train exits 0 ($out)" test $rc -eq 0
check "train prints the unigram entropy at start" grep -q "unigram entropy of the train tokens" <<<"$out"
check "progress lines have loss, lr, grad norm, tok/s, ETA" grep -qE "step +24/24 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| grad norm [0-9.]+ \| [0-9]+ tok/s \| ETA" <<<"$out"
for f in config.json ckpt.bin model.safetensors metrics.jsonl loss.svg tokenizer.bin; do check "train wrote $f" test -s "$T/A/$f"; done
check "metrics.jsonl has 24 rows" test "$(wc -l <"$T/A/metrics.jsonl")" -eq 24
check "metrics rows carry the fields" grep -qE '^\{"step": 6, "loss": [0-9.]+, "val_loss": [0-9.]+, "lr": [0-9.e-]+, "grad_norm": [0-9.e-]+, "tokens_per_s": [0-9.]+, "time_s": [0-9.]+\}$' "$T/A/metrics.jsonl"
check "four validation measurements" test "$(grep -c val_loss "$T/A/metrics.jsonl")" -eq 4
check "loss.svg is an SVG with the entropy line" grep -q "unigram entropy" "$T/A/loss.svg"
check "loss.svg is well-formed XML" $PY -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$T/A/loss.svg"
check "loss.svg has the learning-rate and gradient-norm panels" bash -c "grep -q '>lr<' '$T/A/loss.svg' && grep -q '>grad norm<' '$T/A/loss.svg'"
check "the validation loss falls" $PY - "$T/A/metrics.jsonl" <<'EOF'
import json, sys
v = [json.loads(l)["val_loss"] for l in open(sys.argv[1]) if "val_loss" in l]
sys.exit(0 if v[-1] < v[0] - 0.3 else 1)
EOF
check "config.json has model, train and data" $PY -c "
import json, sys; c = json.load(open(sys.argv[1])); v = json.load(open(sys.argv[2]))['vocab_size']
sys.exit(0 if c['model']['n_layer'] == 2 and c['model']['vocab'] == v and c['train']['batch'] == 4 and c['data'].startswith('/') else 1)" "$T/A/config.json" "$T/data/meta.json"
check "train --help" bash -c "'$W' train --help >/dev/null"

section "resume equals the uninterrupted run"
$W train "${M[@]}" --out "$T/B" --steps 24 --val-every 6 --val-batches 2 --ckpt-every 8 --stop-at 10 >/dev/null 2>&1
check "--stop-at 10 leaves 10 rows" test "$(wc -l <"$T/B/metrics.jsonl")" -eq 10
out=$($W train --out "$T/B" --resume --device cpu 2>&1); rc=$?
check "resume exits 0 ($out)" test $rc -eq 0
check "resume says where it continues" grep -q "resuming .* at step 10" <<<"$out"
check "resumed losses equal the straight run's bit for bit" diff <(losses "$T/A/metrics.jsonl") <(losses "$T/B/metrics.jsonl")
check "resumed weights equal the straight run's" cmp -s "$T/A/model.safetensors" "$T/B/model.safetensors"
out=$($W train --out "$T/B" --resume --device cpu 2>&1)
check "resuming a finished run says so" grep -q "nothing to do" <<<"$out"
out=$($W train --out "$T/B" --resume --device cpu --steps 30 2>&1); rc=$?
check "--steps may be raised on resume" test $rc -eq 0 -a "$(wc -l <"$T/B/metrics.jsonl")" -eq 30

section "dropout"
$W train "${M[@]}" --out "$T/D1" --steps 12 --val-every 6 --val-batches 2 --dropout 0.1 >/dev/null 2>&1
$W train "${M[@]}" --out "$T/D2" --steps 12 --val-every 6 --val-batches 2 --dropout 0.1 --ckpt-every 4 --stop-at 5 >/dev/null 2>&1
$W train --out "$T/D2" --resume --device cpu >/dev/null 2>&1
check "--dropout 0.1 is recorded in config.json" grep -qE '"dropout":[[:space:]]*0.1' "$T/D1/config.json"
check "--dropout: losses differ from the run without dropout" bash -c "! diff -q <(head -12 '$T/A/metrics.jsonl' | sed -E 's/, \"lr\".*//') <(sed -E 's/, \"lr\".*//' '$T/D1/metrics.jsonl') >/dev/null"
check "--dropout: a resumed run draws the same masks (bit-identical losses)" diff <(losses "$T/D1/metrics.jsonl") <(losses "$T/D2/metrics.jsonl")
expect_fail "--dropout 1 is refused" "--dropout" $W train "${M[@]}" --out "$T/D3" --dropout 1

section "gradient accumulation"
# 2 micro-batches of 4 draw the same windows as one batch of 8: same losses up to rounding
$W train "${M[@]}" --out "$T/G1" --steps 6 --batch 8 --val-every 0 >/dev/null 2>&1
$W train "${M[@]}" --out "$T/G2" --steps 6 --batch 4 --grad-accum 2 --val-every 0 >/dev/null 2>&1
check "--grad-accum 2 x batch 4 matches batch 8" $PY - "$T/G1/metrics.jsonl" "$T/G2/metrics.jsonl" <<'EOF'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:3])
sys.exit(0 if len(a) == len(b) == 6 and all(abs(x - y) < 1e-5 * abs(x) for x, y in zip(a, b)) else 1)
EOF

section "loss scaling"
# scaling the loss by a power of two changes no f32 result while nothing overflows: a scaled run
# equals the unscaled one bit for bit (losses and weights), fixed or dynamic (growing every 3)
$W train "${M[@]}" --out "$T/LS0" --steps 12 --val-every 6 --val-batches 2 >/dev/null 2>&1
out=$($W train "${M[@]}" --out "$T/LS1" --steps 12 --val-every 6 --val-batches 2 --loss-scale 1024 2>&1)
check "--loss-scale 1024: the same losses as without" diff <(losses "$T/LS0/metrics.jsonl") <(losses "$T/LS1/metrics.jsonl")
check "--loss-scale 1024: the same weights as without" cmp -s "$T/LS0/model.safetensors" "$T/LS1/model.safetensors"
check "--loss-scale 1024: the progress line shows the scale and the skips" grep -qE "\| scale 1024 \| skips 0 \|" <<<"$out"
check "--loss-scale 1024: metrics carry loss_scale and skips" grep -q '"loss_scale": 1024, "skips": 0}' "$T/LS1/metrics.jsonl"
$W train "${M[@]}" --out "$T/LS2" --steps 12 --val-every 6 --val-batches 2 --loss-scale dynamic --loss-scale-window 3 >/dev/null 2>&1
check "dynamic scaling without overflow: the same losses as without" diff <(losses "$T/LS0/metrics.jsonl") <(losses "$T/LS2/metrics.jsonl")
check "dynamic scaling without overflow: the same weights as without" cmp -s "$T/LS0/model.safetensors" "$T/LS2/model.safetensors"
check "dynamic scaling: the scale doubles every 3 clean updates" $PY - "$T/LS2/metrics.jsonl" <<'EOF'
import json, sys
s = [json.loads(l)["loss_scale"] for l in open(sys.argv[1])]
sys.exit(0 if s == [65536.0 * 2 ** (i // 3) for i in range(12)] else 1)
EOF
# a start at 2^126 provably overflows (the squared norm of the scaled gradients is not finite):
# the updates are skipped and the scale halved until training proceeds (near 2^63 here)
out=$($W train "${M[@]}" --out "$T/LS3" --steps 90 --val-every 0 --val-batches 2 --loss-scale dynamic --loss-scale-init 8.507059173023462e37 2>&1); rc=$?
check "overflowing scale: the run completes ($rc)" test $rc -eq 0
check "overflowing scale: the skips are said" grep -q "overflowed at loss scale" <<<"$out"
check "overflowing scale: halved on every skip, then training proceeds with finite losses" $PY - "$T/LS3/metrics.jsonl" <<'EOF'
import json, math, sys
r = [json.loads(l) for l in open(sys.argv[1])]
k = 0
while k < len(r) and r[k].get("skipped"):
    k += 1
same = lambda x, y: abs(x / y - 1) < 1e-8  # printed with 9 digits
ok = 10 < k < 80 and all(same(r[i]["loss_scale"], 2.0 ** (126 - i)) and r[i]["skips"] == i + 1 for i in range(k))
# from the first applied update on the scale sits at the edge: an overflow now and then halves it
later = [x for x in r[k:] if x.get("skipped")]
ok = ok and same(r[k]["loss_scale"], 2.0 ** (126 - k)) and len(later) <= 5 and r[-1]["skips"] == k + len(later)
ok = ok and all(x["loss_scale"] <= r[k]["loss_scale"] for x in r[k:]) and not any(x.get("skipped") for x in r[-10:])
ok = ok and all(math.isfinite(x["loss"]) for x in r) and r[-1]["loss"] < r[k]["loss"]
sys.exit(0 if ok else 1)
EOF
# resume inside the overflowing phase and after it: the scale, the skip and clean counts are in
# the checkpoint, so the resumed run equals the straight one bit for bit
LSR=(--steps 40 --val-every 0 --val-batches 2 --loss-scale dynamic --loss-scale-init 1e25 --loss-scale-window 4)
$W train "${M[@]}" --out "$T/LS4" "${LSR[@]}" >/dev/null 2>&1
$W train "${M[@]}" --out "$T/LS5" "${LSR[@]}" --stop-at 7 >/dev/null 2>&1
$W train --out "$T/LS5" --resume --device cpu --stop-at 25 >/dev/null 2>&1
$W train --out "$T/LS5" --resume --device cpu >/dev/null 2>&1
scales() { sed -E 's/.*("skipped|"loss_scale)/\1/' "$1"; }
check "dynamic scaling with skips: resumed losses equal the straight run's" diff <(losses "$T/LS4/metrics.jsonl") <(losses "$T/LS5/metrics.jsonl")
check "dynamic scaling with skips: resumed weights equal the straight run's" cmp -s "$T/LS4/model.safetensors" "$T/LS5/model.safetensors"
check "dynamic scaling with skips: the same scales and skip counts" diff <(scales "$T/LS4/metrics.jsonl") <(scales "$T/LS5/metrics.jsonl")
check "dynamic scaling with skips: some updates were skipped" grep -q '"skipped": true' "$T/LS4/metrics.jsonl"
expect_fail "a fixed scale that overflows every update stops after 20 and names the fix" "start again with a lower --loss-scale" $W train "${M[@]}" --out "$T/LS7" --steps 30 --loss-scale 1e38
expect_fail "--loss-scale nonsense" "--loss-scale 'x'" $W train "${M[@]}" --out "$T/LS6" --loss-scale x
expect_fail "--loss-scale 0" "--loss-scale '0'" $W train "${M[@]}" --out "$T/LS6" --loss-scale 0
expect_fail "--loss-scale-window 0 (integer bounds in full)" "--loss-scale-window must be between 1 and 4294967295" $W train "${M[@]}" --out "$T/LS6" --loss-scale-window 0
# a checkpoint of format version 1 (before the loss scale state) still resumes, as the run it was
mkdir -p "$T/V1" && cp "$T/A/ckpt.bin" "$T/A/config.json" "$T/A/metrics.jsonl" "$T/V1/"
$PY - "$T/V1/ckpt.bin" <<'EOF'
import struct, sys, zlib
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
j = struct.unpack_from("<I", b, 64)[0]; pos = 64 + 4 + j + 40
del b[pos:pos + 24]  # version 2's skips, loss scale, clean count
struct.pack_into("<I", b, 8, 1)
struct.pack_into("<Q", b, 16, len(b) - 64)
struct.pack_into("<I", b, 24, zlib.crc32(bytes(b[64:])))
struct.pack_into("<I", b, 60, zlib.crc32(bytes(b[:60])))
open(p, "wb").write(b)
EOF
out=$($W train --out "$T/V1" --resume --device cpu --steps 30 2>&1); rc=$?
check "a version 1 checkpoint resumes ($out)" test $rc -eq 0
check "a version 1 checkpoint continues as the version 2 one does" diff <(losses "$T/B/metrics.jsonl") <(losses "$T/V1/metrics.jsonl")

section "webgpu: asynchronous step results"
# the software GPU trains a few steps with accumulation, validation and a checkpoint between
# steps; its losses follow the C backend's and its update count comes from the device
$W train "${M[@]}" --out "$T/WG0" --steps 5 --grad-accum 2 --val-every 2 --val-batches 1 --ckpt-every 3 >/dev/null 2>&1
out=$($W train "${M[@]}" --out "$T/WG1" --steps 5 --grad-accum 2 --val-every 2 --val-batches 1 --ckpt-every 3 --device webgpu 2>&1); rc=$?
check "webgpu train exits 0 ($rc)" test $rc -eq 0
check "webgpu losses follow the C backend's" $PY - "$T/WG0/metrics.jsonl" "$T/WG1/metrics.jsonl" <<'EOF'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
ok = len(a) == len(b) == 5 and all(abs(x["loss"] - y["loss"]) < 1e-3 * abs(x["loss"]) for x, y in zip(a, b))
ok = ok and all(("val_loss" in x) == ("val_loss" in y) for x, y in zip(a, b))
sys.exit(0 if ok else 1)
EOF
check "webgpu checkpoint counts 5 applied updates" $PY - "$T/WG1/ckpt.bin" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
j = struct.unpack_from("<I", b, 64)[0]; step, updates = struct.unpack_from("<QQ", b, 64 + 4 + j)
sys.exit(0 if (step, updates) == (5, 5) else 1)
EOF

section "SIGTERM and SIGKILL"
# a larger model so each step writes a ~20 MB checkpoint: kills land inside writes too
K=(--data "$T/data" --device cpu --layers 2 --heads 4 --d-model 256 --d-ff 1024 --seq 32 --batch 4 --steps 80
   --val-every 10 --val-batches 2 --lr 1e-3)
t0=$SECONDS
$W train "${K[@]}" --out "$T/R" --ckpt-every 80 >/dev/null 2>&1
check "reference run for the crash test" test -s "$T/R/ckpt.bin"
echo "reference run: $((SECONDS - t0)) s for 80 steps"
$W train "${K[@]}" --out "$T/S" --ckpt-every 5 >"$T/S.log" 2>&1 &
pid=$!
# SIGTERM once training runs (before that the default action applies: nothing to save yet)
for i in $(seq 1 200); do grep -q "^step" "$T/S.log" && break; sleep 0.1; done
sleep 0.3
kill -TERM $pid
wait $pid; rc=$?
if grep -q "train: done" "$T/S.log"; then
    echo "note: the run finished before SIGTERM; the SIGTERM check is vacuous on this machine"
else
    check "SIGTERM exits with 130 (got $rc)" test $rc -eq 130
    check "SIGTERM writes a checkpoint and says how to resume" grep -q "interrupted at step .*--resume" "$T/S.log"
fi
check "resume after SIGTERM" $W train --out "$T/S" --resume --device cpu >/dev/null 2>&1
check "after SIGTERM, losses equal the reference" diff <(losses "$T/R/metrics.jsonl") <(losses "$T/S/metrics.jsonl")

# The delays suit a machine where a run's first checkpoint is written within 0.5 s of its start; a
# slower one (the sanitizer build, a CPU shared with other tests) stretches them in proportion, so
# that the kills still land before, between and inside checkpoint writes
t0=$(date +%s.%N)
$W train "${K[@]}" --out "$T/X1" --steps 1 --ckpt-every 1 >/dev/null 2>&1
stretch=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { s = (b - a) / 0.5; print (s > 1 ? s : 1) }')
echo "first checkpoint after $(awk -v s="$stretch" 'BEGIN { print s * 0.5 }') s or less: the kill delays x $stretch"
kills=0; torn=0; loads=0
for delay in 0.3 0.55 0.8 1.05 0.45 0.7 0.95 0.35 0.6 0.85; do
    resume=(); [[ -f $T/X/ckpt.bin ]] && resume=(--resume)
    $W train "${K[@]}" --out "$T/X" --ckpt-every 1 "${resume[@]}" >/dev/null 2>&1 &
    pid=$!
    sleep "$(awk -v d="$delay" -v s="$stretch" 'BEGIN { print d * s }')"
    kill -KILL $pid 2>/dev/null && kills=$((kills + 1))
    wait $pid 2>/dev/null
    ls "$T"/X/*.tmp.* >/dev/null 2>&1 && torn=$((torn + 1))
    if [[ -f $T/X/ckpt.bin ]]; then
        if out=$($W eval --run "$T/X" --batches 1 --device cpu 2>&1); then loads=$((loads + 1))
        else bad "after kill -9 at ${delay}s the checkpoint does not load: $out"; fi
    fi
done
echo "kill -9: $kills kills, $torn left a half-written temporary file, the checkpoint loaded after $loads (none existed yet after the others)"
check "kill -9 hit a running trainer several times" test $kills -ge 5
check "several kills hit a run that had a checkpoint" test $loads -ge 3
out=$($W train --out "$T/X" --resume --device cpu 2>&1); rc=$?
check "resume after the kills ($out)" test $rc -eq 0
check "no temporary file is left after a resume" bash -c "! ls '$T'/X/*.tmp.* >/dev/null 2>&1"
check "after 10 kills, losses equal the uninterrupted run's" diff <(losses "$T/R/metrics.jsonl") <(losses "$T/X/metrics.jsonl")

section sample
s1=$($W sample --run "$T/A" --device cpu --tokens 20 --seed 3 2>&1); rc=$?
check "sample exits 0 ($s1)" test $rc -eq 0
check "sample produces text" test ${#s1} -ge 20
s2=$($W sample --run "$T/A" --device cpu --tokens 20 --seed 3 2>&1)
check "the same seed gives the same text" test "$s1" == "$s2"
s3=$($W sample --run "$T/A" --device cpu --tokens 10 --prompt "The cat" --temperature 0.5 --top-k 20 --top-p 0.9 2>&1); rc=$?
check "sample with a prompt starts with it ($s3)" test $rc -eq 0 -a "${s3:0:7}" == "The cat"
check "greedy sampling" bash -c "'$W' sample --run '$T/A' --device cpu --tokens 5 --temperature 0 >/dev/null"
check "sample --help" bash -c "'$W' sample --help >/dev/null"

section eval
out=$($W eval --run "$T/A" --device cpu 2>&1); rc=$?
check "eval exits 0 ($out)" test $rc -eq 0
check "eval prints loss and perplexity = exp(loss)" $PY - "$out" <<'EOF'
import math, re, sys
t = sys.argv[1]
l = float(re.search(r"^loss ([0-9.]+)$", t, re.M).group(1)); p = float(re.search(r"^perplexity ([0-9.e+]+)$", t, re.M).group(1))
sys.exit(0 if abs(math.exp(l) - p) < 1e-3 * p else 1)
EOF
check "eval --shard" bash -c "'$W' eval --run '$T/A' --device cpu --shard '$T/data/val_000.bin' --batches 1 >/dev/null"
check "eval --help" bash -c "'$W' eval --help >/dev/null"

section "model families and depth"
# 256 layers (the most --layers allows) at a tiny width: 86 and more once passed validation and
# then aborted building the model
out=$($W train "${M[@]}" --out "$T/D" --layers 256 --heads 1 --d-model 8 --d-ff 8 --seq 8 --batch 1 --steps 1 2>&1); rc=$?
check "train --layers 256 runs (exit $rc: ${out: -300})" test $rc -eq 0
check "config.json names the model family" $PY -c "
import json, sys; c = json.load(open(sys.argv[1]))
sys.exit(0 if c['model']['arch'] == 'gpt2' and c['model']['n_layer'] == 256 else 1)" "$T/D/config.json"
expect_fail "--layers 257" "--layers must be between" $W train "${M[@]}" --out "$T/E0" --layers 257
expect_fail "--arch nonsense" "unknown model family 'nonsense'" $W train "${M[@]}" --out "$T/E9" --arch nonsense
expect_fail "resume with another family" "--arch 'nonsense' differs" $W train --out "$T/A" --resume --arch nonsense

section "llama-tiny"
# the llama-tiny preset end to end on the CPU backend: a few steps, resume equality bit for bit,
# the run directory's config naming the family (sample and eval need no model flags), bench
LL=(--data "$T/data" --device cpu --preset llama-tiny --steps 6 --warmup 2 --val-every 3 --val-batches 1 --ckpt-every 3)
out=$($W train "${LL[@]}" --out "$T/L1" 2>&1); rc=$?
check "llama-tiny trains (exit $rc: ${out: -300})" test $rc -eq 0
check "train prints the LLaMA settings" grep -q "2 key/value heads, RoPE base 10000" <<<"$out"
check "llama-tiny config.json records the family and its settings" $PY -c "
import json, sys; m = json.load(open(sys.argv[1]))['model']
sys.exit(0 if (m['arch'], m['n_layer'], m['n_head'], m['n_kv_heads'], m['d_model'], m['d_ff'], m['max_seq'],
               m['rope_theta'], m['rms_eps'], m['tie_embeddings']) == ('llama', 4, 4, 2, 128, 352, 64, 10000, 1e-5, 1)
         else 1)" "$T/L1/config.json"
check "llama model.safetensors has Hugging Face LLaMA names and shapes" $PY - "$T/L1/model.safetensors" <<'EOF'
import json, struct, sys
f = open(sys.argv[1], "rb"); h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
want = {"model.embed_tokens.weight": [None, 128], "model.layers.3.self_attn.q_proj.weight": [128, 128],
        "model.layers.3.self_attn.k_proj.weight": [64, 128], "model.layers.3.self_attn.v_proj.weight": [64, 128],
        "model.layers.3.self_attn.o_proj.weight": [128, 128], "model.layers.3.mlp.gate_proj.weight": [352, 128],
        "model.layers.3.mlp.up_proj.weight": [352, 128], "model.layers.3.mlp.down_proj.weight": [128, 352],
        "model.layers.3.input_layernorm.weight": [128], "model.layers.3.post_attention_layernorm.weight": [128],
        "model.norm.weight": [128]}
ok = all(k in h and all(w is None or w == s for w, s in zip(v, h[k]["shape"])) for k, v in want.items())
sys.exit(0 if ok and "lm_head.weight" not in h and len([k for k in h if k != "__metadata__"]) == 2 + 9 * 4 else 1)
EOF
$W train "${LL[@]}" --out "$T/L2" --stop-at 3 >/dev/null 2>&1
out=$($W train --out "$T/L2" --resume --device cpu 2>&1); rc=$?
check "llama resume exits 0 ($out)" test $rc -eq 0
check "llama resumed losses equal the straight run's bit for bit" diff <(losses "$T/L1/metrics.jsonl") <(losses "$T/L2/metrics.jsonl")
check "llama resumed weights equal the straight run's" cmp -s "$T/L1/model.safetensors" "$T/L2/model.safetensors"
s1=$($W sample --run "$T/L1" --device cpu --tokens 12 --seed 5 2>&1); rc=$?
check "sample --run on a llama run ($s1)" test $rc -eq 0 -a ${#s1} -ge 12
s2=$($W sample --run "$T/L1" --device cpu --tokens 12 --seed 5 2>&1)
check "llama: the same seed gives the same text" test "$s1" == "$s2"
check "eval --run on a llama run" bash -c "'$W' eval --run '$T/L1' --device cpu --batches 1 | grep -q perplexity"
out=$($W train --data "$T/data" --device cpu --arch llama --steps 1 --val-every 0 --out "$T/L3" 2>&1); rc=$?
check "--arch llama alone takes the llama-tiny preset (exit $rc)" test $rc -eq 0 -a -n "$(grep 'preset llama-tiny' <<<"$out")"
# a gpt2 preset with --arch llama: the preset's sizes, LLaMA's defaults (untied) under the flags
out=$($W train "${M[@]}" --preset tiny --arch llama --kv-heads 1 --rope-theta 500000 --rms-eps 1e-6 --steps 2 --out "$T/L4" 2>&1); rc=$?
check "--preset tiny --arch llama with LLaMA flags (exit $rc: ${out: -200})" test $rc -eq 0
check "LLaMA flags reach config.json" $PY -c "
import json, sys; m = json.load(open(sys.argv[1]))['model']
sys.exit(0 if (m['arch'], m['n_layer'], m['n_kv_heads'], m['rope_theta'], m['rms_eps'], m['tie_embeddings']) ==
         ('llama', 2, 1, 500000, 1e-6, 0) else 1)" "$T/L4/config.json"
check "bench --preset llama-tiny" bash -c "'$W' bench --preset llama-tiny --device cpu --steps 1 --warmup 0 --seq 16 --batch 2 | grep -q 'llama L=4 NH=4 NKV=2'"
expect_fail "--kv-heads on a gpt2 model" "is a setting of the llama family" $W train "${M[@]}" --out "$T/E10" --kv-heads 2
expect_fail "--kv-heads not dividing --heads" "must divide n_head" $W train "${M[@]}" --out "$T/E11" --arch llama --kv-heads 3 --heads 4 --d-model 32
expect_fail "an odd head size" "is odd" $W train "${M[@]}" --out "$T/E12" --arch llama --d-model 36 --heads 4
expect_fail "resume a llama run with other kv heads" "--kv-heads 4 differs" $W train --out "$T/L1" --resume --kv-heads 4

section "bad inputs"
: >"$T/empty.txt"
expect_fail "empty corpus" "empty" $W prepare --input "$T/empty.txt" --out "$T/d1"
expect_fail "missing input file" "not found" $W prepare --input "$T/no-such-file.txt" --out "$T/d2"
expect_fail "--vocab 100" "--vocab 100" $W prepare --input "$T/corpus.txt" --out "$T/d3" --vocab 100
expect_fail "--seq beyond max_seq on resume" "maximum sequence length" $W train --out "$T/A" --resume --seq 64 --device cpu
expect_fail "--seq beyond --max-seq" "exceeds the model's maximum sequence length" $W train "${M[@]}" --out "$T/E1" --seq 64 --max-seq 32
expect_fail "--seq longer than the data" "too short" $W train "${M[@]}" --out "$T/E2" --seq 100000
expect_fail "--device nonsense" "unknown device" $W train "${M[@]}" --out "$T/E3" --device nonsense
# sizes whose buffers exceed the machine's memory (64 TiB of parameters) are refused by size
# before the allocator is asked
expect_fail "train: sizes beyond the host's memory" "more than this machine's" $W train --data "$T/data" --device cpu \
    --out "$T/huge" --arch llama --layers 256 --heads 512 --kv-heads 512 --d-model 65536 --d-ff 262144 --seq 16 --batch 1 --steps 1
expect_fail "existing run without --resume" "--resume" $W train "${M[@]}" --out "$T/A"
expect_fail "resume with another model size" "--layers 3 differs" $W train --out "$T/A" --resume --layers 3
expect_fail "resume without a checkpoint" "not found" $W train --out "$T/none" --resume
expect_fail "missing data directory" "not found" $W train "${M[@]}" --data "$T/no-data" --out "$T/E4"
expect_fail "bad flag value" "--batch" $W train "${M[@]}" --out "$T/E5" --batch 0
expect_fail "unknown preset" "unknown preset" $W train "${M[@]}" --out "$T/E6" --preset huge
expect_fail "unknown option" "unknown option" $W train "${M[@]}" --out "$T/E7" --bogus 1
expect_fail "sample --top-p 0" "--top-p" $W sample --run "$T/A" --top-p 0
# a shard with a token id beyond the vocabulary (written by hand in llm.c's format)
cp -r "$T/data" "$T/baddata"
$PY - "$T/baddata/train_000.bin" <<'EOF'
import struct, sys
toks = [i % 200 for i in range(5000)]; toks[1234] = 600
h = [20240520, 1, len(toks)] + [0] * 253
open(sys.argv[1], "wb").write(struct.pack("<256i", *h) + struct.pack("<%dH" % len(toks), *toks))
EOF
expect_fail "a shard changed after prepare (meta.json records another size)" "holds 5000 tokens but" $W train "${M[@]}" --data "$T/baddata" --out "$T/E8"
# the same shard in an llm.c-style directory (no meta.json, no tokenizer): the vocabulary check finds it
mkdir -p "$T/llmc" && cp "$T/baddata/train_000.bin" "$T/llmc/x_train_000.bin" && cp "$T/data/val_000.bin" "$T/llmc/x_val_000.bin"
expect_fail "token beyond the vocabulary" "token id 600 at position 1234" $W train "${M[@]}" --data "$T/llmc" --vocab 512 --out "$T/E8b"
# NaN weights (a checkpoint rewritten with valid checksums): updates are skipped, then training stops
mkdir -p "$T/P" && cp "$T/A/ckpt.bin" "$T/A/config.json" "$T/P/"
$PY - "$T/P/ckpt.bin" <<'EOF'
import struct, sys, zlib
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
# the progress block: 40 bytes in format version 1, 64 in version 2 (docs/checkpoint-format.md)
ver = struct.unpack_from("<I", b, 8)[0]
j = struct.unpack_from("<I", b, 64)[0]; off = 64 + 4 + j + (40 if ver == 1 else 64)
n = struct.unpack_from("<Q", b, off)[0]; off += 8
b[off:off + 4 * n] = struct.pack("<f", float("nan")) * n
struct.pack_into("<I", b, 24, zlib.crc32(bytes(b[64:])))
struct.pack_into("<I", b, 60, zlib.crc32(bytes(b[:60])))
open(p, "wb").write(b)
EOF
out=$($W train --out "$T/P" --resume --device cpu --steps 60 2>&1); rc=$?
check "NaN loss: the update is skipped and said so" grep -q "update is skipped" <<<"$out"
check "NaN loss: metrics mark skipped updates" grep -q '"loss": null.*"skipped": true' "$T/P/metrics.jsonl"
check "NaN loss: training stops after 20 in a row (exit $rc)" test $rc -ne 0 -a -n "$(grep 'not been finite for 20 updates' <<<"$out")"
# damaged checkpoints are refused by eval and resume
mkdir -p "$T/C1" "$T/C2"
cp "$T/A/ckpt.bin" "$T/C1/"
$PY -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 4; open(p, 'wb').write(b)" "$T/C1/ckpt.bin"
expect_fail "flipped byte" "checksum" $W eval --run "$T/C1" --device cpu
head -c 5000 "$T/A/ckpt.bin" >"$T/C2/ckpt.bin"
expect_fail "truncated checkpoint" "truncated" $W train --out "$T/C2" --resume --device cpu

section "which device"
out=$($W info --device cpu 2>&1)
check "info --device cpu says it is the C backend" grep -q "the C backend" <<<"$out"
expect_fail "--adapter cpu (one meaning per word)" "is --adapter software, and the C backend is --device cpu" $W info --adapter cpu
out=$($W train "${M[@]}" --out "$T/DW" --steps 1 --device webgpu 2>&1)
if grep -q "software GPU" <<<"$($W info 2>&1 | grep -i 'type:')" || grep -q "llvmpipe" <<<"$out"; then
    check "train on the software GPU names it and warns" grep -q "warning: this WebGPU adapter is a software GPU" <<<"$out"
else
    check "train on a real GPU names it without the software warning" bash -c "! grep -q 'software GPU' <<<\"\$1\"" _ "$out"
fi
check "train prints the device's name" grep -q "train: device webgpu (" <<<"$out"

section "make install"
make -s install PREFIX="$T/inst" >/dev/null 2>&1
check "make install: PREFIX/bin/wgtrain runs and finds Dawn in PREFIX/lib/wgtrain" \
    bash -c "'$T/inst/bin/wgtrain' info --help >/dev/null && test -f '$T/inst/lib/wgtrain/libwebgpu_wrapper.so'"
check "make install: the documents in PREFIX/share/doc/wgtrain" test -f "$T/inst/share/doc/wgtrain/architecture.md"
check "make install: the installed binary finds GPT-2's tokenizer" bash -c "printf hello | (cd / && '$T/inst/bin/wgtrain' tokenize --tokenizer gpt2) | grep -qx '31373'"

section "files and faults"
# grad: token arrays of the wrong shape name the shape; AdamW flags out of range are refused
$PY - "$T" <<'EOF'
import numpy as np, sys
d = sys.argv[1]
np.save(f"{d}/tok1d.npy", np.arange(5, dtype=np.int32))
np.save(f"{d}/tok_b0.npy", np.zeros((2, 0), dtype=np.int32))
np.save(f"{d}/tok_ok.npy", (np.arange(18, dtype=np.int32) % 200).reshape(2, 9))
np.save(f"{d}/x.npy", np.ones(7, dtype=np.float32))
u = (np.arange(18, dtype=np.uint32) % 200).reshape(2, 9)
u[1, 3] = 4294967295; np.save(f"{d}/tok_u32_inp.npy", u)
u[1, 3] = 7; u[0, 8] = 4294967295; np.save(f"{d}/tok_u32_tgt.npy", u)
i = (np.arange(18, dtype=np.int32) % 200).reshape(2, 9); i[0, 8] = -1; np.save(f"{d}/tok_i32_ign.npy", i)
EOF
G=(grad --model "$T/A/model.safetensors" --heads 2)
expect_fail "grad with 1-D tokens names the shape" "shape [5]" $W "${G[@]}" --tokens "$T/tok1d.npy"
expect_fail "grad with [B, 0] tokens names the shape" "shape [2, 0]" $W "${G[@]}" --tokens "$T/tok_b0.npy"
check "grad with good tokens works" bash -c "'$W' grad --model '$T/A/model.safetensors' --heads 2 --tokens '$T/tok_ok.npy' | grep -q '^loss '"
# uint32 tokens are reported as stored: 4294967295 is no -1, and no ignored target (an int32 -1 is)
expect_fail "grad: a uint32 input token is named as stored" "token 4294967295 at index 12 is outside" $W "${G[@]}" --tokens "$T/tok_u32_inp.npy"
expect_fail "grad: a uint32 target 4294967295 is not ignored" "token 4294967295 at index 8 is outside" $W "${G[@]}" --tokens "$T/tok_u32_tgt.npy"
check "grad: an int32 target -1 is ignored" bash -c "'$W' grad --model '$T/A/model.safetensors' --heads 2 --tokens '$T/tok_i32_ign.npy' | grep -q '^loss '"
expect_fail "grad --beta1 1" "--beta1 must be in [0, 1)" $W "${G[@]}" --tokens "$T/tok_ok.npy" --steps 1 --beta1 1
expect_fail "grad --beta2 1" "--beta2 must be in [0, 1)" $W "${G[@]}" --tokens "$T/tok_ok.npy" --steps 1 --beta2 1
expect_fail "grad --lr 1e30" "--lr must be in" $W "${G[@]}" --tokens "$T/tok_ok.npy" --steps 1 --lr 1e30
# an output that is not a regular file is refused, not replaced (and a FIFO does not block the writer)
mkfifo "$T/out.fifo"
expect_fail "op --out onto a FIFO" "FIFO" timeout 20 $W op gelu_inplace --backend cpu --in x="$T/x.npy" --out x="$T/out.fifo"
check "the FIFO is still a FIFO" test -p "$T/out.fifo"
# a FIFO in place of a shard fails at once instead of blocking forever
mkdir -p "$T/fifodata" && mkfifo "$T/fifodata/x_train.bin"
expect_fail "a FIFO as a shard" "FIFO" timeout 20 $W train "${M[@]}" --data "$T/fifodata" --vocab 512 --out "$T/E9"
# an unwritable loss.svg is a warning: the run still ends with its checkpoint
mkdir -p "$T/L/loss.svg"
out=$($W train "${M[@]}" --out "$T/L" --steps 4 --val-every 2 2>&1); rc=$?
check "unwritable loss.svg: the run completes (exit $rc)" test $rc -eq 0 -a -s "$T/L/ckpt.bin"
check "unwritable loss.svg: a warning names it" grep -q "warning: .*loss.svg" <<<"$out"
# an interrupted prepare (no meta.json beside the tokenizer) is refused, not read as llm.c data
cp -r "$T/data" "$T/half" && rm "$T/half/meta.json"
expect_fail "a data directory without meta.json but with a tokenizer" "did not finish" $W train "${M[@]}" --data "$T/half" --out "$T/E10"
# data tokenized by another tokenizer of the same size (the corpus in rot13: the same counts,
# other merges) is refused on resume and by eval, which used to compare only the vocabulary size
$PY -c "
import codecs, sys
parts = open(sys.argv[1]).read().split('<|endoftext|>')
open(sys.argv[2], 'w').write('<|endoftext|>'.join(codecs.encode(p, 'rot13') for p in parts))" "$T/corpus.txt" "$T/corpus_uc.txt"
$W prepare --input "$T/corpus_uc.txt" --out "$T/data_uc" --vocab 512 >/dev/null 2>&1
check "the rot13 corpus has a data directory with the same vocabulary size" $PY -c "
import json, sys
a, b = (json.load(open(p))['vocab_size'] for p in sys.argv[1:3]); sys.exit(0 if a == b else 1)" "$T/data/meta.json" "$T/data_uc/meta.json"
expect_fail "resume on data with another tokenizer" "another tokenizer" $W train --out "$T/A" --resume --device cpu --steps 30 --data "$T/data_uc"
expect_fail "eval on data with another tokenizer" "another tokenizer" $W eval --run "$T/A" --device cpu --data "$T/data_uc"
# one trainer per run directory; a shard truncated under a running trainer is an error, not SIGBUS
cp -r "$T/data" "$T/tdata"
$W train "${M[@]}" --data "$T/tdata" --out "$T/LK" --steps 1000000 --val-every 0 --ckpt-every 0 >"$T/LK.log" 2>&1 &
pid=$!
for i in $(seq 1 300); do grep -q "^step" "$T/LK.log" && break; sleep 0.1; done
expect_fail "a second trainer on the same run directory names the first's pid" "in use by another wgtrain process (pid $pid" $W train --out "$T/LK" --resume --device cpu
expect_fail "a second new run in the same directory is refused too" "pid $pid" $W train "${M[@]}" --data "$T/tdata" --out "$T/LK" --steps 5
truncate -s 1124 "$T/tdata/train_000.bin"
for i in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -KILL $pid 2>/dev/null && bad "the trainer kept running on a truncated shard"
wait $pid; rc=$?
check "a shard truncated while training ends the run with exit 1, not a signal (got $rc)" test $rc -eq 1
check "a shard truncated while training is reported" grep -q "truncated or replaced in place" "$T/LK.log"

echo
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
