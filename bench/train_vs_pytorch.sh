#!/usr/bin/env bash
# train_vs_pytorch.sh — one GPT-2 training step timed in PyTorch (strict fp32) and in wgtrain in
# the same run, and their ratio.
#   GPU:  bench/train_vs_pytorch.sh gpu [PRESET]  (default gpt2-124m: B=8, T=1024; seeds: the
#         kernel documents' reference model, T=512, V=16384; llama-124m: 12 layers, 768 wide,
#         12 heads, 4 kv heads, d_ff 2048, V=50257, T=1024, against bench/torch_llama.py)
#   CPU:  bench/train_vs_pytorch.sh cpu   (tiny config, 2 threads each, wgtrain's CPU backend)
# Env: WGTRAIN (default build/wgtrain), PYTHON (default python3), STEPS.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-cpu}
W=${WGTRAIN:-build/wgtrain}
PY=${PYTHON:-python3}
STEPS=${STEPS:-10}
if [[ $mode == gpu ]]; then
    preset=${2:-gpt2-124m}
    peer=bench/torch_gpt2.py; [[ $preset == llama* ]] && peer=bench/torch_llama.py
    t=$($PY "$peer" --preset "$preset" --device cuda --steps "$STEPS" | tee /dev/stderr | sed -n 's/.*torch tokens\/s \([0-9.]*\).*/\1/p')
    w=$($W bench --preset "$preset" --device webgpu --adapter gpu --steps "$STEPS" --profile | tee /dev/stderr | sed -n 's/.* \([0-9.]*\) tokens\/s.*/\1/p')
else
    threads=${THREADS:-2}
    # the same OpenBLAS kernels for both: wgtrain picks the CPU's best when OpenBLAS 0.3.21 falls
    # back to Prescott on a CPU newer than it (src/backend/cpu/blas_core.c); PyTorch gets them too
    core=${OPENBLAS_CORETYPE:-$($W info --device cpu | sed -n "s/.*this CPU's best: \([A-Za-z]*\)).*/\1/p")}
    export OPENBLAS_CORETYPE=$core
    echo "OpenBLAS kernels: ${core:-as detected}" >&2
    t=$(OMP_NUM_THREADS=$threads $PY bench/torch_gpt2.py --preset tiny --device cpu --threads "$threads" --steps "$STEPS" | tee /dev/stderr | sed -n 's/.*torch tokens\/s \([0-9.]*\).*/\1/p')
    w=$(OMP_NUM_THREADS=$threads $W bench --preset tiny --device cpu --steps "$STEPS" | tee /dev/stderr | sed -n 's/.* \([0-9.]*\) tokens\/s.*/\1/p')
fi
awk -v w="$w" -v t="$t" -v m="$mode" 'BEGIN { printf "%s: wgtrain %.0f tokens/s, PyTorch %.0f tokens/s, ratio %.2fx\n", m, w, t, w / t }'
