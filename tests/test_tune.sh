#!/usr/bin/env bash
# test_tune.sh — the GEMM tuning run and its cache (docs/tuning.md) on the software GPU: `wgtrain
# tune` writes an entry for the adapter, later contexts use its tiles (`tune --show`), other
# devices' entries survive a rewrite, a malformed cache or entry is ignored with a note (never a
# failure), a symlink at the cache path is not written through, bad flags are refused, and the
# automatic run of `bench` tunes once and then reads the cache. Prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WGT:-$PWD/build/wgtrain}
PY=${PYTHON:-/usr/bin/python3}
if [[ ! -x $W ]]; then echo "$W is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
T=$(mktemp -d /tmp/wgt_tune_XXXXXX)
trap 'rm -rf "$T"' EXIT
. tests/shell_lib.sh  # pass/fail counters, check, expect_fail, section
export WGTRAIN_TUNE_CACHE=$T/none.json  # never the user's own cache
TILES=64x64x8/8x8,64x128x8/8x8           # two candidates keep the software GPU's compiles short
# holds WHAT CONDITION: the condition (single-quoted, over $out and $rc) must be true
holds() { local what=$1; if eval "$2"; then ok; else bad "$what: exit $rc, output: $out"; fi; }

section "flags"
check "tune --help" bash -c "'$W' tune --help | grep -q -- --tiles"
expect_fail "a malformed tile" "'12x12x3/3x3' is not a tile" $W tune --adapter software --tiles 12x12x3/3x3 --cache "$T/x.json"
expect_fail "a tile over the device's workgroup memory" "'256x256x32/8x8' is not a tile" \
    $W tune --adapter software --tiles 64x64x8/8x8,256x256x32/8x8 --cache "$T/x.json"
expect_fail "--cache off is not a path" "--cache needs the path" $W tune --cache off
expect_fail "an unknown flag" "unknown option" $W tune --tile 64x64x8/8x8
expect_fail "WGTRAIN_AUTOTUNE=2" "WGTRAIN_AUTOTUNE" env WGTRAIN_AUTOTUNE=2 $W tune --show
expect_fail "nowhere to write" "no tuning cache to write" env WGTRAIN_TUNE_CACHE=off $W tune --adapter software --tiles $TILES
check "no cache file was made by the refusals" test ! -e "$T/x.json"

section "a tuning run and its entry"
C=$T/dir/sub/tuning.json  # the directories are made
if $W tune --adapter software --tiles $TILES --cache "$C" >"$T/tune.out" 2>"$T/tune.err"; then ok; else bad "tune: $(cat "$T/tune.err")"; fi
check "the summary names every GEMM" bash -c "grep -c '^matmul' '$T/tune.out' | grep -qx 6"
check "a progress line per GEMM on stderr" bash -c "grep -c '^tune: matmul' '$T/tune.err' | grep -qx 6"
check "saved to the cache path" grep -q "saved to $C" "$T/tune.out"
adapter=$($W info --adapter software | sed -n 's/^adapter: *//p')
check "the entry: format, key with the adapter and driver, six tiles from the candidates or the table" "$PY" - "$C" "$adapter" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "wgtrain-tuning" and d["version"] == 1 and len(d["devices"]) == 1, d
e = d["devices"][0]
assert sys.argv[2] in e["key"] and e["driver"] in e["key"] and e["adapter"] == sys.argv[2], e
allowed = {"64x64x8/8x8", "64x128x8/8x8", "128x128x8/8x8", "64x64x16/4x4", "128x128x16/8x8"}
for op in ("matmul", "matmul_t", "matmul_at"):
    for c in ("big", "small"):
        assert e[op][c] in allowed, (op, c, e[op][c])
        assert e[op][c + "_gflops"] > 0, e[op]
EOF
$W tune --adapter software --show --cache "$C" >"$T/show.out" 2>"$T/show.err"
check "a later context uses the tuned tiles" bash -c "grep -c '(tuned)' '$T/show.out' | grep -qx 3"
check "--show prints the tiles of the entry" "$PY" - "$C" "$T/show.out" <<'EOF'
import json, sys
e = json.load(open(sys.argv[1]))["devices"][0]
lines = {l.split()[0]: l.split() for l in open(sys.argv[2]) if l.startswith("matmul")}
for op in ("matmul", "matmul_t", "matmul_at"):
    assert lines[op][2] == e[op]["big"] and lines[op][4] == e[op]["small"], (op, lines[op], e[op])
EOF
check "--show is quiet about a good cache" test ! -s "$T/show.err"
$W tune --adapter software --show >"$T/show0.out" 2>&1
check "without an entry: the table's or the default tiles" bash -c "! grep -q '(tuned)' '$T/show0.out' && grep -c '^matmul' '$T/show0.out' | grep -qx 3"

section "other devices' entries survive; a rerun replaces this device's"
"$PY" - "$C" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
other = dict(d["devices"][0]); other["key"] = "some|other|gpu|driver|vulkan|k=0|v1"; other["adapter"] = "other"
d["devices"].insert(0, other)
json.dump(d, open(sys.argv[1], "w"))
EOF
if $W tune --adapter software --tiles $TILES --cache "$C" >/dev/null 2>"$T/tune2.err"; then ok; else bad "tune again: $(cat "$T/tune2.err")"; fi
check "the other entry is kept and this one is not doubled" "$PY" - "$C" <<'EOF'
import json, sys
keys = [e["key"] for e in json.load(open(sys.argv[1]))["devices"]]
assert len(keys) == 2 and keys[0].startswith("some|other") and len(set(keys)) == 2, keys
EOF
check "no temporary file left beside the cache" bash -c "! ls '$T/dir/sub' | grep -q '\.tmp\.'"

section "a bad cache is ignored, never fatal"
printf '{"format": "wgtrain-tuning", "version": 1, "devi' >"$T/trunc.json"
out=$($W tune --adapter software --show --cache "$T/trunc.json" 2>&1); rc=$?
holds "a truncated cache: exit 0, a note naming it, the default tiles" '[[ $rc -eq 0 && $out == *"ignoring the tuning cache $T/trunc.json"* && $out != *"(tuned)"* ]]'
"$PY" - "$C" "$T/badtile.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for e in d["devices"]:
    e["matmul_t"]["small"] = "512x512x64/16x16"
json.dump(d, open(sys.argv[2], "w"))
EOF
out=$($W tune --adapter software --show --cache "$T/badtile.json" 2>&1); rc=$?
holds "an entry with an impossible tile: exit 0, a note naming the field, no tuned tiles" '[[ $rc -eq 0 && $out == *"matmul_t.small"* && $out != *"(tuned)"* ]]'
printf '[1, 2, 3]' >"$T/notours.json"
out=$($W tune --adapter software --show --cache "$T/notours.json" 2>&1)
holds "JSON that is not a cache: a note" '[[ $out == *"not a wgtrain tuning cache"* ]]'
if $W tune --adapter software --tiles 64x64x8/8x8 --cache "$T/trunc.json" >/dev/null 2>"$T/e"; then ok; else bad "tune over a truncated cache: $(cat "$T/e")"; fi
check "the truncated cache was rewritten whole" "$PY" -c "import json,sys; assert len(json.load(open(sys.argv[1]))['devices']) == 1" "$T/trunc.json"
head -c 2000000 /dev/zero | tr '\0' ' ' >"$T/huge.json"
out=$($W tune --adapter software --show --cache "$T/huge.json" 2>&1); rc=$?
holds "a cache over 1 MiB: exit 0 and a note" '[[ $rc -eq 0 && $out == *"ignoring the tuning cache"* ]]'

section "a file that is not a tuning cache is refused, a huge cache is rewritten in linear time"
echo "precious" >"$T/foreign.txt"
printf '{"a": 1}' >"$T/foreign.json"
for f in foreign.txt foreign.json; do
    cp "$T/$f" "$T/$f.orig"
    out=$($W tune --adapter software --tiles 64x64x8/8x8 --cache "$T/$f" 2>&1); rc=$?
    holds "tune --cache $f (not a cache) is refused before tuning" '[[ $rc -ne 0 && $out == *"is not a wgtrain tuning cache"* && $out != *"tune: matmul"* ]]'
    check "$f is untouched" cmp -s "$T/$f" "$T/$f.orig"
done
# about 350 000 entries in 1 MiB: a quadratic rewrite took minutes (25 000 entries: 1.6 s)
"$PY" - "$T/big.json" <<'EOF'
import sys
head = '{"format": "wgtrain-tuning", "version": 1, "devices": ['
n = (1048000 - len(head)) // 3
open(sys.argv[1], "w").write(head + ",".join(["{}"] * n) + "]}")
EOF
out=$(timeout -k 5 120 $W tune --adapter software --tiles 64x64x8/8x8 --cache "$T/big.json" 2>&1); rc=$?
holds "tune over a 1 MiB cache of ~350 000 entries finishes" '[[ $rc -eq 0 ]]'
check "the rewritten cache keeps at most 64 entries, this device's last" "$PY" - "$T/big.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))["devices"]
assert len(d) == 64 and "key" in d[-1] and all(e == {} for e in d[:-1]), len(d)
EOF

section "a symlink at the cache path is not written through"
echo "precious" >"$T/target"
ln -s "$T/target" "$T/link.json"
out=$($W tune --adapter software --tiles 64x64x8/8x8 --cache "$T/link.json" 2>&1); rc=$?
holds "tune refuses, naming the path" '[[ $rc -ne 0 && $out == *"$T/link.json"* ]]'
check "the symlink's target is untouched" test "$(cat "$T/target")" = precious

section "the automatic run of bench"
B=(bench --preset llama-tiny --device webgpu --steps 1 --warmup 0 --seq 16 --batch 2)
out=$(WGTRAIN_TUNE_CACHE=$T/auto.json $W "${B[@]}" 2>&1); rc=$?
holds "not on a software adapter by default" '[[ $rc -eq 0 && $out != *"tuning the GEMM tiles"* && ! -e "$T/auto.json" ]]'
out=$(WGTRAIN_AUTOTUNE=1 WGTRAIN_TUNE_CACHE=$T/auto.json $W "${B[@]}" 2>&1); rc=$?
holds "WGTRAIN_AUTOTUNE=1: tunes once with a note and a progress line, then benchmarks" '[[ $rc -eq 0 && $out == *"tuning the GEMM tiles"* && $out == *"tune: matmul_at"* && $out == *"tokens/s"* ]]'
check "and caches the result" "$PY" -c "import json,sys; assert len(json.load(open(sys.argv[1]))['devices']) == 1" "$T/auto.json"
out=$(WGTRAIN_AUTOTUNE=1 WGTRAIN_TUNE_CACHE=$T/auto.json $W "${B[@]}" 2>&1); rc=$?
holds "the second run reads the cache instead of tuning" '[[ $rc -eq 0 && $out != *"tuning the GEMM tiles"* ]]'
out=$(WGTRAIN_AUTOTUNE=1 WGTRAIN_TUNE_CACHE=off $W "${B[@]}" 2>&1); rc=$?
holds "WGTRAIN_TUNE_CACHE=off: no tuning (nowhere to keep it)" '[[ $rc -eq 0 && $out != *"tuning the GEMM tiles"* ]]'

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
