# shell_lib.sh — the assertions the shell tests share (sourced, not run): each check counts a pass
# or a failure, and the script ends with `echo "$pass passed, $fail failed"`; hf_setup is the
# start of the tests on Hugging Face model directories.
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
# hf_setup NAME: the start that the Hugging Face model tests share (test_finetune.sh,
# test_families.sh, test_sharded.sh): W (wgtrain; WGT names another build), PY, H
# (finetune_helper.py), a temporary directory T removed at exit, R (the flags of a short CPU run
# whose first loss is the reference's: no z-loss, no label smoothing), and in T one training window
# of 16 tokens of a 96-token vocabulary (T/data) and a batch of 2 x 17 tokens (T/tok.npy).
hf_setup() {
    W=${WGT:-$PWD/build/wgtrain}
    PY=${PYTHON:-python3}
    H="$PY $PWD/tests/finetune_helper.py"
    if [[ ! -x $W ]]; then echo "build/wgtrain is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
    T=$(mktemp -d "/tmp/wgt_$1_XXXXXX")
    trap 'rm -rf "$T"' EXIT
    R=(--device cpu --batch 2 --z-loss 0 --label-smoothing 0 --val-batches 1)
    $H shards "$T/data" --V 96 --T 16 --seed 1
    $H tokens "$T/tok.npy" --V 96 --B 2 --T 16
}
