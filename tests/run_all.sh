#!/usr/bin/env bash
# run_all.sh — runs every test (C binaries in build/tests, Python and shell tests in tests/)
# and prints the total as "N passed, N failed, N skipped". Exit code: 0 only if every test passed.
# RUN_JOBS=N runs N tests at once (scripts/test.sh: one per core); the longest start first, so
# that none is left running alone at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHON=/usr/bin/python3   # Debian's python3 has torch and numpy
. tests/run_lib.sh
first=(tests/test_llama_torch.py tests/test_big_vocab.sh tests/test_generate.py build/tests/test_model_webgpu
       build/tests/test_kernels_gpt tests/test_finetune.sh tests/test_chat_finetune.sh tests/test_train.sh)
declare -A seen
for t in "${first[@]}" build/tests/test_* tests/test_*.py tests/test_*.sh; do
    [[ -f $t && -z ${seen[$t]:-} ]] || continue
    seen[$t]=1
    case $t in
        build/tests/*) [[ -x $t ]] && run "$(basename "$t")" "$t" ;;
        *.py) run "$(basename "$t")" "$PYTHON" "$t" ;;
        *.sh) run "$(basename "$t")" bash "$t" ;;
    esac
done
run_finish
