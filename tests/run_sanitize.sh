#!/usr/bin/env bash
# run_sanitize.sh — the file-format, CLI and fault tests again, on the AddressSanitizer +
# UndefinedBehaviorSanitizer build in build-san (`make sanitize` builds it and calls this):
# test_files, test_data, test_checkpoint, test_cpu_isa (the CPU variants and their dispatch),
# test_chat_template, test_hf_tokenizer, test_decode (the key/value cache), test_train.sh, test_op_cli.sh,
# test_cli_conventions.sh, test_tune.sh, test_hf_prepare.sh, test_hf_chat_cli.py and test_fault_cli.sh with the
# sanitized `wgtrain`, and a
# short pass of every fuzz driver. Any memory error, leak or undefined behaviour aborts the
# program concerned and counts as a failure. Prints "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
B=${SAN_BUILD:-build-san}
export PYTHON=${PYTHON:-/usr/bin/python3}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
if [[ ! -x $B/wgtrain ]]; then echo "$B/wgtrain is missing: run make sanitize"; echo "0 passed, 1 failed"; exit 1; fi
RUN_SANITIZER=1
. tests/run_lib.sh
# (the longest first: with RUN_JOBS > 1 none is left running alone at the end)
run "san/test_train.sh" env WGT="$PWD/$B/wgtrain" bash tests/test_train.sh
run "san/test_tune.sh" env WGT="$PWD/$B/wgtrain" bash tests/test_tune.sh
for t in test_files test_data test_checkpoint test_cpu_isa test_chat_template test_hf_tokenizer test_decode; do run "san/$t" "$B/tests/$t"; done
run "san/test_op_cli.sh" env WGT="$B/wgtrain" bash tests/test_op_cli.sh
run "san/test_cli_conventions.sh" env WGT="$PWD/$B/wgtrain" bash tests/test_cli_conventions.sh
run "san/test_hf_prepare.sh" env WGT="$PWD/$B/wgtrain" bash tests/test_hf_prepare.sh
run "san/test_hf_chat_cli.py" env WGT="$PWD/$B/wgtrain" "$PYTHON" tests/test_hf_chat_cli.py
run "san/test_fault_cli.sh" env WGT="$PWD/$B/wgtrain" bash tests/test_fault_cli.sh
for f in "$B"/fuzz/fuzz_*; do
    [[ -x $f && $f != *.d ]] || continue
    run "san/$(basename "$f")" "$f" "${SAN_FUZZ_ITERS:-300}"
done
run_finish
