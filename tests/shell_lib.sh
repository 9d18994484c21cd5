# shell_lib.sh — the assertions the shell tests share (sourced, not run): each check counts a pass
# or a failure, and the script ends with `echo "$pass passed, $fail failed"`.
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { local what=$1; shift; if "$@"; then ok; else bad "$what"; fi; }
# expect_fail WHAT SUBSTRING CMD...: the command must fail and say SUBSTRING
expect_fail() {
    local what=$1 want=$2; shift 2
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [[ $rc -ne 0 && $out == *"$want"* ]]; then ok; else bad "$what: exit $rc, expected a message with '$want', got: $out"; fi
}
section() { echo "== $*"; }
