#!/bin/bash
# The isolation battery: node --test over tests/security/*.test.mjs (escape
# attempts and abuse cases, each file with its own private sbxd), run as
# root against the binaries in ${SBX_BIN_DIR:-build/bin}. Builds the probe
# binary that the battery copies into sandboxes. Human-readable output on
# stdout, TAP in $SBX_RESULTS_DIR/security.tap; the last line is
#   N passed, N failed
# (skipped tests, each with its reason, are counted apart). Exit 1 on failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
RES=${SBX_RESULTS_DIR:-$ROOT/build/test-results}
mkdir -p "$RES"
BIN_DIR=${SBX_BIN_DIR:-build/bin}
BUILD_DIR=$(dirname "$BIN_DIR")

fail() { echo "security: $*" >&2; echo "0 passed, 1 failed"; exit 1; }
[[ $(id -u) -eq 0 ]] || fail "the battery needs root (it starts sbxd)"
for b in sbxd sbxctl sandbox-mcp sbx-worker; do
  [[ -x $BIN_DIR/$b ]] || fail "$BIN_DIR/$b missing: make all"
done
make --no-print-directory -s BUILD="$BUILD_DIR" "$BIN_DIR/tests/sbx-sec-probe" >/dev/null || fail "cannot build the probe"

files=("$@")
((${#files[@]})) || files=(tests/security/*.test.mjs)
conc=()
node --help 2>/dev/null | grep -q -- --test-concurrency && conc=(--test-concurrency=1)

rc=0
SBX_BIN_DIR=$BIN_DIR timeout --kill-after=30 360 node --test \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$RES/security.tap" \
  "${conc[@]}" "${files[@]}" </dev/null || rc=$?
if ((rc == 124 || rc == 137)); then
  echo "not ok - the battery timed out after 360 s" >>"$RES/security.tap"
fi
p=$(sed -n 's/^# pass \([0-9][0-9]*\)$/\1/p' "$RES/security.tap" | tail -1)
f=$(sed -n 's/^# fail \([0-9][0-9]*\)$/\1/p' "$RES/security.tap" | tail -1)
s=$(sed -n 's/^# skipped \([0-9][0-9]*\)$/\1/p' "$RES/security.tap" | tail -1)
p=${p:-0} f=${f:-0}
f=$((f + $(grep -c '^not ok - the battery timed out' "$RES/security.tap")))
((rc != 0 && f == 0)) && f=1
grep '# SKIP' "$RES/security.tap" | sed 's/^ *ok [0-9]* - /skipped: /'
echo "security battery: ${s:-0} skipped"
echo "$p passed, $f failed"
((f == 0))
