#!/usr/bin/env bash
# run_all.sh — runs every test (C binaries in build/tests, Python and shell tests in tests/)
# and prints the total as "N passed, N failed, N skipped". Exit code: 0 only if every test passed.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHON=/usr/bin/python3   # Debian's python3 has torch and numpy
. tests/run_lib.sh
for t in build/tests/test_*; do
    [[ -x $t ]] || continue
    run "$(basename "$t")" "$t"
done
for t in tests/test_*.py; do
    [[ -f $t ]] || continue
    run "$(basename "$t")" "$PYTHON" "$t"
done
for t in tests/test_*.sh; do
    [[ -f $t ]] || continue
    run "$(basename "$t")" bash "$t"
done
run_finish
