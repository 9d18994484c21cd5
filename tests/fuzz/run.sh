#!/usr/bin/env bash
# run.sh — runs every fuzz driver of a build directory (default build-san, the sanitizer
# build: `make fuzz` builds it and calls this) for FUZZ_ITERS inputs each (default 5000) and
# prints each driver's counts. FUZZ_SEED varies the inputs. Exit code 0 only if no driver
# crashed, hit a sanitizer error or broke an invariant.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-san}
N=${FUZZ_ITERS:-5000}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
bad=0; n=0
for f in "$B"/fuzz/fuzz_*; do
    [[ -x $f && $f != *.d ]] || continue
    n=$((n + 1))
    t0=$SECONDS
    if out=$("$f" "$N" 2>&1); then
        echo "$(grep ' inputs, ' <<<"$out") ($((SECONDS - t0)) s)"
    else
        bad=$((bad + 1))
        echo "$(basename "$f"): FAILED"
        tail -40 <<<"$out" | sed 's/^/    | /'
    fi
done
[[ $n -gt 0 ]] || { echo "no fuzz drivers in $B/fuzz: run make fuzz"; exit 1; }
echo "$((n - bad)) passed, $bad failed"
[[ $bad -eq 0 ]]
