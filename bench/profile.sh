#!/bin/bash
# Profile one benchmark step against a private sbxd: syscall counts and time
# (strace -c -f on sbxd and its workers) and a perf profile of sbxd.
#
#   bench/profile.sh exec_live|exec_auto|claim_exec|file_read|file_edit|transcript|paging [N]
#
# Output under /tmp/sbx-prof-<what>/ (kept): strace.txt, perf.txt, sbxd.log.
# Not part of make bench; used to find the causes written in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:?what}
N=${2:-200}
BIN=$(realpath build/bin)
DRIVE=$(realpath build/bench/mcpdrive)
P=/tmp/sbx-prof-$WHAT
rm -rf --one-file-system "$P"
mkdir -p "$P/state" "$P/run" "$P/src"
printf '[sbxd]\ntranscript_cap_bytes = 2G\n' >"$P/sbxd.conf"
printf 'x\n' >"$P/src/f"
python3 - "$P/src" <<'EOF'
import os, sys
with open(os.path.join(sys.argv[1], "big.txt"), "w") as f:
    for i in range(10 * 1024 * 1024 // 40):
        f.write("%08d the quick brown fox jumps ove\n" % i)
with open(os.path.join(sys.argv[1], "edit.txt"), "w") as f:
    for i in range(1024 * 1024 // 40):
        f.write("|row %d| lorem ipsum dolor sit amet\n" % i)
EOF
"$BIN/sbxd" --config "$P/sbxd.conf" --state-dir "$P/state" --run-dir "$P/run" --log-level notice >"$P/sbxd.log" 2>&1 &
SBXD=$!
trap 'kill -TERM $SBXD; wait $SBXD 2>/dev/null || true; grep " $P" /proc/self/mounts && echo "still mounted" >&2; rm -rf --one-file-system "$P/state" "$P/run"' EXIT
for _ in $(seq 100); do [[ -S $P/run/sbxd.sock ]] && break; sleep 0.1; done
"$BIN/sbxctl" --socket "$P/run/sbxd.sock" sandbox create p --source "$P/src" >/dev/null
case $WHAT in
  exec_live) STEP='{"tag":"x","tool":"exec_command","args":{"sandbox_id":"p","cmd":"true","workspace_session_id":"${ws}"}}'
             SETUP='{"tool":"create_workspace_session","args":{"sandbox_id":"p"},"allow_error":true},{"sleep_ms":200},{"tool":"list_workspace_sessions","args":{"sandbox_id":"p"},"save":{"ws":"sessions.-1.workspace_session_id"}}' ;;
  exec_auto) STEP='{"tag":"x","tool":"exec_command","args":{"sandbox_id":"p","cmd":"true"}}' ;;
  claim_exec) STEP='{"tag":"x","tool":"execute_command","args":{"sandbox_claim_name":"${c}","command":"true"}}'
              SETUP='{"tool":"create_sandbox","args":{},"save":{"c":"sandbox_claim_name"}}' ;;
  file_read) STEP='{"tag":"x","tool":"file_read","args":{"sandbox_id":"p","path":"big.txt","offset":131072,"limit":2000}}' ;;
  file_edit) STEP='{"tag":"x","tool":"file_edit","args":{"sandbox_id":"p","path":"edit.txt","edits":[{"old_string":"|row ${i}|","new_string":"|row ${i}|e"}]}}' ;;
  transcript) STEP='{"tag":"x","tool":"exec_command","args":{"sandbox_id":"p","cmd":"yes 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 | head -c 268435456","yield_time_ms":30000},"until_done":true}' ;;
  paging) SETUP='{"tool":"exec_command","args":{"sandbox_id":"p","cmd":"seq 1 10000000","yield_time_ms":30000},"until_done":true,"save":{"cs":"command_session_id"}}'
          STEP='{"tag":"x","tool":"read_command_lines","args":{"sandbox_id":"p","command_session_id":"${cs}","start_offset":9000000,"limit":1000}}' ;;
  *) echo "unknown $WHAT" >&2; exit 2 ;;
esac
cat >"$P/script.json" <<EOF
{"setup":[${SETUP:-}], "warmup":3, "n":$N, "loop":[$STEP]}
EOF
MCP=("$BIN/sandbox-mcp" --set runtime,sessions,lifecycle --socket "$P/run/sbxd.sock")
# 1. plain timing
"$DRIVE" "$P/script.json" -- "${MCP[@]}" | python3 -c 'import json,sys,statistics as s; d=json.load(sys.stdin); v=d["samples"]["x"]; print("median %.3f ms over %d" % (s.median(v)/1000, len(v)))' | tee "$P/timing.txt"
# 2. syscalls of sbxd and everything it starts
strace -c -f -w -o "$P/strace.txt" -p $SBXD & ST=$!
sleep 0.5
"$DRIVE" "$P/script.json" -- "${MCP[@]}" >/dev/null
kill -INT $ST; wait $ST || true
# 3. perf profile of sbxd (user + kernel, call graphs)
perf record -q -g -o "$P/perf.data" -p $SBXD 2>/dev/null & PR=$!
sleep 0.5
"$DRIVE" "$P/script.json" -- "${MCP[@]}" >/dev/null
kill -INT $PR; wait $PR || true
perf report -i "$P/perf.data" --no-children --stdio --percent-limit 1.5 2>/dev/null | grep -v '^$' | head -120 >"$P/perf.txt"
echo "see $P/{timing,strace,perf}.txt"
