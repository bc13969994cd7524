#!/bin/bash
# make run: start a private sbxd, create the sandbox "demo" from
# examples/demo-repo, drive sandbox-mcp --set runtime with the MCP SDK client
# (examples/demo-client.mjs), then stop everything and check that nothing is
# left mounted or running. Exit 1 if any step fails.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/build/bin
cd "$ROOT"

if [[ $(id -u) -ne 0 ]]; then
  echo "run-demo: sbxd needs root (namespaces, cgroups, overlay mounts); run as root" >&2
  exit 1
fi
for b in sbxd sbxctl sandbox-mcp sbx-worker; do
  [[ -x $BIN/$b ]] || { echo "run-demo: $BIN/$b missing: make all" >&2; exit 1; }
done

DEMO=$(mktemp -d /tmp/sbx-demo-XXXXXX)
STATE=$DEMO/state RUN=$DEMO/run LOGS=$DEMO/logs
mkdir -p "$STATE" "$RUN" "$LOGS"
SOCK=$RUN/sbxd.sock
SBXD_PID=
STARTED_PID=
status=0

if [[ -t 1 ]]; then
  say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  say() { printf '\n== %s\n' "$*"; }
fi

stop_sbxd() {
  [[ -n $SBXD_PID ]] || return 0
  if kill -0 "$SBXD_PID" 2>/dev/null; then
    kill -TERM "$SBXD_PID"
    for _ in $(seq 1 200); do
      kill -0 "$SBXD_PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$SBXD_PID" 2>/dev/null; then
      echo "run-demo: sbxd did not stop within 20 s of SIGTERM; killing it" >&2
      kill -KILL "$SBXD_PID" 2>/dev/null || true
      status=1
    fi
  fi
  local rc=0
  wait "$SBXD_PID" 2>/dev/null || rc=$?
  SBXD_PID=
  # sessions sbxd kept in place at its stop (sbxd(8)): copied out and unmounted
  [[ -d $RUN/live ]] && "$BIN/sbxd" --state-dir "$STATE" --run-dir "$RUN" --save-kept 2>>"$LOGS/sbxd.log"
  if ((rc != 0)); then
    echo "run-demo: sbxd exited with status $rc" >&2
    status=1
  fi
}

cleanup() {
  local rc=$?
  ((rc != 0)) && status=$rc
  set +e
  say "stopping sbxd (SIGTERM) and cleaning up"
  stop_sbxd
  if ((status != 0)); then
    echo "---- tail of $LOGS/sbxd.log"
    tail -n 40 "$LOGS/sbxd.log"
    [[ -s $LOGS/sandbox-mcp.log ]] && { echo "---- tail of $LOGS/sandbox-mcp.log"; tail -n 20 "$LOGS/sandbox-mcp.log"; }
  fi
  if awk -v d="$DEMO" '$2 == d || index($2, d "/") == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    echo "run-demo: something is still mounted under $DEMO; not removing it" >&2
    status=1
  else
    rm -rf --one-file-system "$DEMO"
  fi
  say "checking that nothing is left (mounts, processes, cgroups, network namespaces)"
  local scope=(--dir "$DEMO")
  [[ -n $STARTED_PID ]] && scope+=(--pid "$STARTED_PID")
  if ! "$ROOT/tests/leftovers.sh" "${scope[@]}"; then
    status=1
  fi
  if ((status == 0)); then
    say "demo finished: everything stopped, nothing left behind"
  else
    say "demo FAILED"
  fi
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "starting sbxd with private state and run directories under $DEMO"
echo "\$ sbxd --state-dir $STATE --run-dir $RUN"
"$BIN/sbxd" --state-dir "$STATE" --run-dir "$RUN" 2>"$LOGS/sbxd.log" </dev/null &
SBXD_PID=$!
STARTED_PID=$SBXD_PID
for _ in $(seq 1 300); do
  [[ -S $SOCK ]] && break
  if ! kill -0 "$SBXD_PID" 2>/dev/null; then
    echo "run-demo: sbxd exited during start-up" >&2
    exit 1
  fi
  sleep 0.05
done
[[ -S $SOCK ]] || { echo "run-demo: $SOCK did not appear within 15 s" >&2; exit 1; }
echo "sbxd pid $SBXD_PID is ready on $SOCK"

say "creating the sandbox \"demo\" from examples/demo-repo"
echo "\$ sbxctl sandbox create demo --source $ROOT/examples/demo-repo"
"$BIN/sbxctl" --socket "$SOCK" sandbox create demo --source "$ROOT/examples/demo-repo"
echo "\$ sbxctl sandbox list"
"$BIN/sbxctl" --socket "$SOCK" sandbox list

say "driving sandbox-mcp --set runtime with the MCP SDK client"
SANDBOX_MCP=$BIN/sandbox-mcp node "$ROOT/examples/demo-client.mjs" --socket "$SOCK" --sandbox demo \
  --source "$ROOT/examples/demo-repo" --broker-log "$LOGS/sandbox-mcp.log" --sbxd-pid "$SBXD_PID" </dev/null

say "supervisor status"
echo "\$ sbxctl status"
"$BIN/sbxctl" --socket "$SOCK" status
