#!/usr/bin/env bash
# test_web.sh — the browser build end to end: `make web`, the page served on 127.0.0.1, Debian's
# Chromium headless on its software WebGPU adapter (SwiftShader) driven over the DevTools
# protocol by web/run_headless.mjs; the page prepares the bundled corpus, trains the `micro`
# preset for STEPS steps, pressing Stop half-way and then Resume, samples and exports, and logs
# its `wgtrain-result` line. Checked: the loss falls, the per-step losses (the stopped and resumed
# run's) agree with the native build's (build/wgtrain on the same text, seed and preset, on
# lavapipe, uninterrupted), the page plotted every step, sampled and wrote a Hugging Face export. Prints "N passed, N failed"; the exit code is the verdict.
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WGT:-$PWD/build/wgtrain}
STEPS=${WEB_TEST_STEPS:-12}
SEED=3
if [[ ! -x $W ]]; then echo "build/wgtrain is missing: run make first"; echo "0 passed, 1 failed"; exit 1; fi
. tests/shell_lib.sh
T=$(mktemp -d /tmp/wgt_web_XXXXXX)
server=""
cleanup() { [[ -n $server ]] && kill "$server" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

section "make web"
out=$(make -j"$(nproc)" web 2>&1); rc=$?
check "make web exits 0 ($(tail -5 <<<"$out"))" test $rc -eq 0
for f in index.html app.js wgtrain.js wgpu.js wgtrain.wasm corpus.txt wasi/index.js; do
    check "build/web/$f exists" test -s "build/web/$f"
done
# setup.sh installs Chromium: its absence is a failure here, never a skip
check "chromium is installed (scripts/setup.sh)" command -v chromium >/dev/null
check "node is installed" command -v node >/dev/null
if [[ $fail -gt 0 ]]; then echo "$pass passed, $fail failed"; exit 1; fi

section "the native run"
$W prepare --input build/web/corpus.txt --out "$T/data" --vocab 512 >"$T/prepare.log" 2>&1
check "native prepare exits 0" test $? -eq 0
$W train --data "$T/data" --out "$T/run" --preset micro --steps "$STEPS" --seed $SEED --device webgpu \
    --adapter software --log-every 1 >"$T/train.log" 2>&1
check "native train exits 0 ($(tail -3 "$T/train.log"))" test $? -eq 0

section "the page in headless Chromium"
python3 -u -m http.server 0 --bind 127.0.0.1 --directory build/web >"$T/http.log" 2>&1 &
server=$!
port=""
for _ in $(seq 50); do
    port=$(sed -nE 's/.*port ([0-9]+).*/\1/p' "$T/http.log" | head -1)
    [[ -n $port ]] && break
    sleep 0.1
done
check "the static server started" test -n "$port"
url="http://127.0.0.1:$port/index.html?preset=micro&steps=$STEPS&seed=$SEED&vocab=512&sample_device=cpu&stop_at=$((STEPS / 2))&auto=1"
node --experimental-websocket web/run_headless.mjs "$url" --timeout 540 >"$T/result.json" 2>"$T/chromium.log"
rc=$?
check "the page reported a wgtrain-result (exit $rc; $(grep -v 'Fontconfig\|dbus' "$T/chromium.log" | tail -5))" test $rc -eq 0 -a -s "$T/result.json"

# The tolerance of the comparison: both runs execute the same WGSL kernels in f32 on the same
# data and seed (and a resumed run equals an uninterrupted one bit for bit), but on different
# adapters and shader compilers (SwiftShader in Chromium, lavapipe natively). The kernels of this
# model reduce in fixed orders that do not depend on the subgroup size, and the two agree to the
# last printed digit where measured; what may differ is a compiler's freedom to fuse a multiply
# and an add (WGSL allows it), a rounding of ~1e-7 relative per operation that a dozen small
# AdamW steps do not amplify beyond ~1e-5. 1e-4 nats per step is above that and far below what a
# wrong kernel, a wrong struct offset in wgpu.js or another data order or seed gives (1e-2 and
# more from the first steps on).
python3 - "$T/result.json" "$T/run/metrics.jsonl" "$STEPS" <<'EOF' >"$T/check.txt" 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
native = [json.loads(l)["loss"] for l in open(sys.argv[2]) if l.strip()]
steps = int(sys.argv[3])
ok = lambda cond, what: print(("PASS " if cond else "FAIL ") + what)
ok(r.get("rc") == 0, f"the page's train exited 0 ({r.get('error', '')})")
web = r.get("losses", [])
ok(r.get("steps") == steps and len(web) == steps, f"{steps} steps, one loss each (got {r.get('steps')}, {len(web)})")
ok(len(web) == steps and web[-1] < web[0] - 0.1, f"the loss falls: {web[:1]} -> {web[-1:]}")
diff = max((abs(a - b) for a, b in zip(web, native)), default=1e9)
ok(len(native) == steps and diff <= 1e-4, f"per-step losses agree with the native build within 1e-4 (max diff {diff:.2e})")
st = r.get("stopped_at")
ok(isinstance(st, int) and 1 <= st < steps, f"Stop stopped the run part-way and Resume finished it (stopped at {st})")
ok(isinstance(r.get("val_loss"), float) and r["val_loss"] < web[0], f"a validation loss below the first loss ({r.get('val_loss')})")
ad = r.get("adapter") or {}
ok(bool(ad.get("vendor") or ad.get("architecture")), f"the adapter is described ({ad.get('vendor')}, {ad.get('architecture')})")
ok(r.get("plotted", 0) >= steps, f"the plot got every step ({r.get('plotted')})")
ok(len(r.get("sample", "").strip()) > 20, "a sample was generated")
names = [f["name"] for f in r.get("export", [])]
ok("config.json" in names and "model.safetensors" in names, f"a Hugging Face export ({names})")
print(f"INFO web losses {web}")
print(f"INFO native losses {native}")
print(f"INFO step time: web {r.get('step_s')} s, seconds in all {r.get('seconds')}")
EOF
while read -r verdict what; do
    case $verdict in
        PASS) ok ;;
        FAIL) bad "$what" ;;
        INFO) echo "$what" ;;
        *) bad "result check: $verdict $what" ;;
    esac
done <"$T/check.txt"
grep -qE '^(PASS|FAIL)' "$T/check.txt" || bad "the result was not checked: $(head -c 500 "$T/result.json")"
echo "native step time: $(python3 -c "
import json,sys; r=[json.loads(l) for l in open('$T/run/metrics.jsonl')]
print(round((r[-1]['time_s']-r[0]['time_s'])/max(1,len(r)-1),3),'s')")"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
