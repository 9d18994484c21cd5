# run_lib.sh — the runner that tests/run_all.sh and tests/run_sanitize.sh share (sourced): `run
# NAME CMD...` runs one test program, reads its "N passed, N failed[, N skipped]" line and adds it
# to the totals (a non-zero exit without a failure counts as one failure; a missing skip count is
# 0), and `run_finish` prints the failing names, the names of the tests that skipped cases, and
# the total with its skips, and returns the verdict (skips do not fail a run, but always show).
# With RUN_SANITIZER=1 a sanitizer report in the output counts as a failure too, and a failure
# shows the report instead of the log's tail.
# RUN_JOBS=N (default 1) runs up to N test programs at once (each in its own temporary
# directory, as they are written); the reports still print in the order the tests were given.
# OpenMP threads that wait by sleeping, not spinning: the tests' CPU runs are many short parallel
# loops, and spinning threads take the cores from every other process (the other test, the
# software GPU's threads); a 200-step CPU run of test_mixed_precision.sh took 12 s of CPU spinning
# and 0.5 s sleeping, with the same results bit for bit (the work is split the same way).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
total_pass=0; total_fail=0; total_skip=0; failed=(); skipped=()
run_dir=$(mktemp -d /tmp/wgt_run_XXXXXX)
trap 'rm -rf "$run_dir"' EXIT
run_n=0; run_next=0; run_names=()
# run_exec I CMD...: runs test I, leaving its log, exit status and seconds in run_dir
run_exec() {
    local i=$1; shift
    local t0=$SECONDS
    "$@" >"$run_dir/$i.log" 2>&1
    local rc=$?
    echo $((SECONDS - t0)) >"$run_dir/$i.sec"
    echo $rc >"$run_dir/$i.rc.tmp" && mv "$run_dir/$i.rc.tmp" "$run_dir/$i.rc"   # the rc file last: "finished"
}
# run_report I: adds test I's counts to the totals and prints its line (and its failure)
run_report() {
    local i=$1 name=${run_names[$1]} log=$run_dir/$1.log
    local rc; rc=$(cat "$run_dir/$i.rc")
    local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    local p=0 f=0 s=0
    if [[ -n $line ]]; then
        p=$(awk '{print $1}' <<<"$line"); f=$(awk '{print $3}' <<<"$line")
        if [[ $line =~ ^[0-9]+\ passed,\ [0-9]+\ failed,\ ([0-9]+)\ skipped ]]; then s=${BASH_REMATCH[1]}; fi
    fi
    if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; fi   # a crash (or a sanitizer abort) counts as a failure
    if [[ ${RUN_SANITIZER:-0} == 1 && $f -eq 0 ]] && grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$log"; then
        f=1
    fi
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f)); total_skip=$((total_skip + s))
    [[ $s -gt 0 ]] && skipped+=("$name ($s)")
    printf '%-28s %4d passed %3d failed %3d skipped  (%ds)\n' "$name" "$p" "$f" "$s" "$(cat "$run_dir/$i.sec")"
    if [[ $rc -ne 0 || $f -ne 0 ]]; then
        failed+=("$name")
        if [[ ${RUN_SANITIZER:-0} == 1 ]]; then grep -E -A12 'ERROR: |runtime error:|^FAIL' "$log" | head -60 | sed 's/^/    | /'
        else sed 's/^/    | /' "$log" | tail -40; fi
    fi
    rm -f "$log"
}
# run_flush: reports, in order, every test that has finished after the last one reported
run_flush() {
    while [[ $run_next -lt $run_n && -f $run_dir/$run_next.rc ]]; do
        run_report "$run_next"
        run_next=$((run_next + 1))
    done
}
run() {
    local name=$1; shift
    local i=$run_n
    run_names[i]=$name
    run_n=$((run_n + 1))
    if [[ ${RUN_JOBS:-1} -le 1 ]]; then
        run_exec "$i" "$@"
    else
        while [[ $(jobs -rp | wc -l) -ge $RUN_JOBS ]]; do wait -n; done
        run_exec "$i" "$@" &
    fi
    run_flush
}
run_finish() {
    wait
    run_flush
    echo
    [[ ${#failed[@]} -gt 0 ]] && echo "failing: ${failed[*]}"
    [[ ${#skipped[@]} -gt 0 ]] && echo "skipping cases: ${skipped[*]}"
    echo "$total_pass passed, $total_fail failed, $total_skip skipped"
    [[ $total_fail -eq 0 ]]
}
