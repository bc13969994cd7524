#!/bin/bash
# Protocol robustness: start a private sbxd (temporary state and run
# directories), drive it with tests/proto/fake-peer.py, stop it by pid, check
# it did not die on the way. TAP on stdout; the last line is
#   N passed, N failed
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
BIN_DIR=${SBX_BIN_DIR:-build/bin}
[[ $(id -u) -eq 0 ]] || { echo "proto: needs root (starts sbxd)"; echo "0 passed, 1 failed"; exit 1; }
[[ -x $BIN_DIR/sbxd ]] || { echo "proto: $BIN_DIR/sbxd missing"; echo "0 passed, 1 failed"; exit 1; }
version=$(sed -n 's/^#define SBX_PROTO_VERSION \([0-9]*\)u.*/\1/p' proto/wire.h)
dir=$(mktemp -d /tmp/sbx-test-XXXXXX)
mkdir -p "$dir/state" "$dir/run"
"$BIN_DIR/sbxd" --state-dir "$dir/state" --run-dir "$dir/run" --log-level debug >"$dir/sbxd.log" 2>&1 &
pid=$!
for _ in $(seq 200); do [[ -S $dir/run/sbxd.sock ]] && break; sleep 0.05; done
out=$(python3 tests/proto/fake-peer.py "$dir/run/sbxd.sock" "$version" 2>&1)
rc=$?
alive=1
kill -0 "$pid" 2>/dev/null || alive=0
kill -TERM "$pid" 2>/dev/null
wait "$pid"
status=$?
printf '%s\n' "$out" | sed '$d'
read -r p f < <(tail -1 <<<"$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
p=${p:-0} f=${f:-1}
if ((alive)) && ((status == 0 || status == 143)); then
  echo "ok - sbxd survived every fake peer and stopped cleanly (status $status)"; p=$((p + 1))
else
  echo "not ok - sbxd died during the fake-peer run (alive=$alive, status $status)"; f=$((f + 1))
  tail -40 "$dir/sbxd.log" | sed 's/^/# /'
fi
((rc != 0 && f == 0)) && f=1
if ((f == 0)); then rm -rf --one-file-system "$dir"; else echo "# logs kept in $dir"; fi
echo "$p passed, $f failed"
((f == 0))
