#!/usr/bin/env bash
# generate_vs_hf.sh — generation speed, wgtrain's key/value cache (bench_generate) against Hugging
# Face generate fp32 (hf_generate_speed.py) on the same device, for GPT-2 124M and the 1B-class
# LLaMA shape, prefill and decode at batch 1 and 8; then the 1B shape at a long context (prompt
# 1920, 128 new tokens), where decode_attention's split-K matters most, with it and without it
# (WGTRAIN_DECODE_SPLIT=off; the "attn splits" column says what ran).
#   bench/generate_vs_hf.sh gpu    # WebGPU vs transformers on CUDA
#   bench/generate_vs_hf.sh cpu    # the C backend vs transformers on the CPU (the tiny shape)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
make -s build/bench/bench_generate
if [[ ${1:-gpu} == cpu ]]; then
    build/bench/bench_generate --shape tiny --device cpu --prompt 128 --tokens 64
    $PY bench/hf_generate_speed.py --shape tiny --device cpu --prompt 128 --tokens 64
    exit 0
fi
for shape in gpt2-124m llama-1b; do
    build/bench/bench_generate --shape $shape --device webgpu --adapter gpu --prompt 128 --tokens 128
    WGTRAIN_DECODE_SPLIT=off build/bench/bench_generate --shape $shape --device webgpu --adapter gpu --prompt 128 --tokens 128
    $PY bench/hf_generate_speed.py --shape $shape --device cuda --prompt 128 --tokens 128
done
build/bench/bench_generate --shape llama-1b --device webgpu --adapter gpu --prompt 1920 --tokens 128
WGTRAIN_DECODE_SPLIT=off build/bench/bench_generate --shape llama-1b --device webgpu --adapter gpu --prompt 1920 --tokens 128
$PY bench/hf_generate_speed.py --shape llama-1b --device cuda --prompt 1920 --tokens 128
