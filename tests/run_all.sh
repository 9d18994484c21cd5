#!/usr/bin/env bash
# run_all.sh — runs every test (C binaries in build/tests, Python and shell tests in tests/)
# and prints the total as "N passed, N failed". Exit code: 0 only if every test passed.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHON=/usr/bin/python3   # Debian's python3 has torch and numpy
total_pass=0; total_fail=0; failed=()
run() {
    local name=$1; shift
    local log; log=$(mktemp)
    local t0=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    local p=0 f=0
    if [[ -n $line ]]; then p=$(awk '{print $1}' <<<"$line"); f=$(awk '{print $3}' <<<"$line"); fi
    if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; fi   # a crash counts as a failure
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    printf '%-28s %4d passed %3d failed  (%ds)\n' "$name" "$p" "$f" $((SECONDS - t0))
    if [[ $rc -ne 0 || $f -ne 0 ]]; then failed+=("$name"); sed 's/^/    | /' "$log" | tail -40; fi
    rm -f "$log"
}
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
echo
[[ ${#failed[@]} -gt 0 ]] && echo "failing: ${failed[*]}"
echo "$total_pass passed, $total_fail failed"
[[ $total_fail -eq 0 ]]
