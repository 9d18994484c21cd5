#!/usr/bin/env bash
# lora_1b.sh — LoRA fine-tuning of 1B-class shapes on the GPU against PyTorch + PEFT (docs/lora.md,
# docs/memory.md): writes random models of real configs (Llama-3.2-1B, SmolLM2-360M; BF16 weights)
# with bench/lora_models.py, then for each run prints wgtrain's memory plan, the device bytes its
# training actually peaked at, and its tokens/s, beside PyTorch + PEFT (bf16 base, fp32 compute) on
# the same shapes (bench/lora_models.py --peft). The Llama runs include --base-precision bf16 and
# nf4 (packed frozen bases, refused up front by --memory-limit 6 / 4 GiB if their plan does not fit). Needs transformers and peft for the PyTorch side.
#   bench/lora_1b.sh WORK_DIR
# Env: WGTRAIN (default build/wgtrain), PYTHON (default python3), STEPS (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:?usage: bench/lora_1b.sh WORK_DIR}
W=${WGTRAIN:-build/wgtrain}
PY=${PYTHON:-python3}
STEPS=${STEPS:-20}
mkdir -p "$work"
$PY bench/lora_models.py write "$work"
run() {  # NAME INIT [train flags...]
    local name=$1 init=$2; shift 2
    rm -rf "$work/run_$name"
    echo "== $name: $*"
    $W plan --init "$init" --device webgpu --adapter gpu "$@" | sed -n '/^plan:/p'
    $W train --init "$init" --data "$work/data" --out "$work/run_$name" --device webgpu --adapter gpu \
        --steps "$STEPS" --warmup 0 --val-every 0 --val-batches 1 --log-every 5 "$@" 2>&1 |
        grep -E "memory plan|total|tok/s|done" | tail -6
}
run llama1b_lora "$work/llama-3.2-1b" --batch 1 --seq 2048 --lora 16 --lora-targets all-linear --recompute block
run llama1b_lora_none "$work/llama-3.2-1b" --batch 1 --seq 2048 --lora 16 --lora-targets all-linear --recompute none
# the frozen base packed (--base-precision): the issue's 6 GiB (bf16) and 4 GiB (nf4) targets
run llama1b_lora_bf16 "$work/llama-3.2-1b" --batch 1 --seq 2048 --lora 16 --lora-targets all-linear --recompute block \
    --base-precision bf16 --memory-limit 6
run llama1b_lora_nf4 "$work/llama-3.2-1b" --batch 1 --seq 2048 --lora 16 --lora-targets all-linear --recompute block \
    --base-precision nf4 --memory-limit 4
run smollm360_full "$work/smollm2-360m" --batch 4 --seq 2048 --recompute block
$PY bench/lora_models.py peft "$work" --steps "$STEPS"
