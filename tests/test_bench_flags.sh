#!/usr/bin/env bash
# test_bench_flags.sh — the benchmarks in bench/ (built by scripts/test.sh beside the tests, so that
# they keep compiling): every numeric flag is range-checked by the command's parsers (bad text, out of
# range, trailing characters: exit 2 with a message naming the flag and its range or the bad text), and a small run of the GEMM and
# kernel benchmarks on the software GPU completes with every spot check of the GEMMs correct.
# Prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
B=${WGT_BENCH:-$PWD/build/bench}
. tests/shell_lib.sh
for b in bench_matmul bench_attention bench_kernels bench_generate bench_allreduce; do
    if [[ ! -x $B/$b ]]; then echo "$B/$b is missing: run make bench first"; echo "0 passed, 1 failed"; exit 1; fi
done
# exit2 WHAT SUBSTRING CMD...: the command exits with status 2 (a usage error) and says SUBSTRING
exit2() {
    local what=$1 want=$2; shift 2
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [[ $rc -eq 2 && $out == *"$want"* ]]; then ok; else bad "$what: exit $rc, expected 2 and '$want', got: $out"; fi
}

section "bench_matmul"
exit2 "--reps 0" "--reps must be between 1 and 1000, got 0" $B/bench_matmul --reps 0
exit2 "--reps x" "--reps expects an integer, got 'x'" $B/bench_matmul --reps x
exit2 "--batches 5x" "--batches expects an integer, got '5x'" $B/bench_matmul --batches 5x
exit2 "--vec4 4" "--vec4 must be between 0 and 3, got 4" $B/bench_matmul --vec4 4
exit2 "--vec4 ''" "--vec4 expects an integer, got ''" $B/bench_matmul --vec4 ''
exit2 "--group 0" "--group must be between 1 and 1024, got 0" $B/bench_matmul --group 0
exit2 "--group -3" "--group must be between 1 and 1024, got -3" $B/bench_matmul --group -3
exit2 "--splitk 2x" "--splitk expects an integer, got '2x'" $B/bench_matmul --splitk 2x
exit2 "--rows 99999999999999999999" "--rows expects an integer, got '99999999999999999999'" $B/bench_matmul --rows 99999999999999999999
exit2 "--vocab 8" "--vocab must be between 16 and 262144, got 8" $B/bench_matmul --vocab 8
exit2 "--profile --busy" "--profile and --busy exclude each other" $B/bench_matmul --profile --busy
exit2 "an unknown flag" "usage: bench_matmul" $B/bench_matmul --bogus

section "bench_attention"
exit2 "--reps 0" "--reps must be between 1 and 100000, got 0" $B/bench_attention --reps 0
exit2 "--HS 300" "--HS must be between 1 and 256, got 300" $B/bench_attention --HS 300
exit2 "--T 1e3" "--T expects an integer, got '1e3'" $B/bench_attention --T 1e3
exit2 "--B 0" "--B must be between 1 and 4096, got 0" $B/bench_attention --B 0
exit2 "--NH x" "--NH expects an integer, got 'x'" $B/bench_attention --NH x
exit2 "--NKV 0" "--NKV must be between 1 and 1024, got 0" $B/bench_attention --NKV 0
exit2 "--dropout 1" "--dropout must be in [0, 1), got 1" $B/bench_attention --dropout 1
exit2 "--dropout nan" "--dropout must be finite, got 'nan'" $B/bench_attention --dropout nan
exit2 "--dropout 0.1x" "--dropout expects a number, got '0.1x'" $B/bench_attention --dropout 0.1x
exit2 "--budget -1" "--budget must be in [0, 86400), got -1" $B/bench_attention --budget -1
exit2 "--budget inf" "--budget must be finite, got 'inf'" $B/bench_attention --budget inf

section "bench_kernels, bench_generate and bench_allreduce"
exit2 "bench_kernels --reps 0" "--reps must be between 1 and 100000, got 0" $B/bench_kernels --reps 0
exit2 "bench_kernels --reps 3q" "--reps expects an integer, got '3q'" $B/bench_kernels --reps 3q
exit2 "bench_generate --prompt 0" "--prompt must be between 1 and 2047, got 0" $B/bench_generate --prompt 0
exit2 "bench_generate --tokens 12abc" "--tokens expects an integer, got '12abc'" $B/bench_generate --tokens 12abc
exit2 "bench_allreduce --elems 0" "--elems must be between 1 and 2147483648, got 0" $B/bench_allreduce --elems 0
exit2 "bench_allreduce --iters 5x" "--iters expects an integer, got '5x'" $B/bench_allreduce --iters 5x

section "small runs on the software GPU"
out=$($B/bench_matmul --small --adapter software --only matmul_t --reps 1 --rows 256 --vocab 512 2>&1); rc=$?
check "bench_matmul --small exits 0 ($rc)" test $rc -eq 0
check "bench_matmul times the 6 shapes, each spot check ok" test "$(grep -c 'check ok' <<<"$out")" -eq 6
check "bench_matmul reports no wrong result" test "$(grep -c 'WRONG' <<<"$out")" -eq 0
out=$($B/bench_kernels --small --adapter software --reps 1 2>&1); rc=$?
check "bench_kernels --small exits 0 ($rc: $(tail -2 <<<"$out"))" test $rc -eq 0
check "bench_kernels times matmul_at's dbias at both widths" test "$(grep -c '^matmul_at dbias (R x [0-9]*) ' <<<"$out")" -eq 2

echo "$pass passed, $fail failed"
