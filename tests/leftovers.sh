#!/bin/bash
# After a test run or the demo: prove that nothing of sbx is left behind.
# Only looks, never kills or unmounts. Prints TAP; exit 1 if anything is left.
#
#   tests/leftovers.sh                      everything of sbx on this host
#   tests/leftovers.sh --dir D --pid N ...  only what belongs to the sbxd with
#                                           pid N and the directory D (make run)
#
#   mounts     no mount point or source with "sbx" in /proc/self/mounts
#              (scoped: under D)
#   processes  no process whose executable or command line refers to this
#              tree's build/bin or to a test/demo directory (/tmp/sbx-test-*,
#              /tmp/sbx-demo-*) (scoped: to D, or the pid N itself)
#   uids       no process running as a sandbox host uid (>= 100000)
#              (scoped: none in a cgroup of sbxd N)
#   cgroups    no directory matching *sbx* under /sys/fs/cgroup (depth 6)
#              (scoped: named sbxd-N)
#   netns      no named network namespace with "sbx" in its name
#   loops      no loop device backed by a file of a test/demo directory (the
#              small state filesystems of disk-filling tests) (scoped: under D)
#
# Things may take a moment to go away after SIGTERM: each check is retried
# for up to SBX_LEFTOVER_WAIT seconds (default 5).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/build/bin"
WAIT=${SBX_LEFTOVER_WAIT:-5}
DIRS=() PIDS=()
while (($#)); do
  case $1 in
    --dir) DIRS+=("${2:?}"); shift 2 ;;
    --pid) PIDS+=("${2:?}"); shift 2 ;;
    *) echo "usage: $0 [--dir DIR]... [--pid PID]..." >&2; exit 2 ;;
  esac
done

check_mounts() {
  if ((${#DIRS[@]})); then
    local d
    for d in "${DIRS[@]}"; do
      awk -v d="$d" '$2 == d || index($2, d "/") == 1 || index($1, d "/") == 1 { print "mounted: " $1 " on " $2 " (" $3 ")" }' /proc/self/mounts
    done
  else
    awk '$1 ~ /sbx/ || $2 ~ /sbx/ { print "mounted: " $1 " on " $2 " (" $3 ")" }' /proc/self/mounts
  fi
}

refers() { # cmdline exe pid -> 0 if the process is one of ours
  local cmd=$1 exe=$2 pid=$3 d n
  if ((${#DIRS[@]} || ${#PIDS[@]})); then
    for n in "${PIDS[@]}"; do [[ $pid == "$n" ]] && return 0; done
    for d in "${DIRS[@]}"; do [[ $cmd == *"$d"* ]] && return 0; done
    return 1
  fi
  [[ $exe == "$BIN/"* || $cmd == "$BIN/"* || $cmd =~ /tmp/sbx-(test|demo)- ]]
}

check_procs() {
  local p cmd exe comm
  for p in /proc/[0-9]*; do
    [[ ${p#/proc/} == "$$" || ${p#/proc/} == "$BASHPID" ]] && continue
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue  # stderr first: the process may be gone
    [[ -n $cmd ]] || continue
    exe=$(readlink "$p/exe" 2>/dev/null || true)
    comm=$(cat "$p/comm" 2>/dev/null || true)
    if refers "$cmd" "$exe" "${p#/proc/}"; then
      echo "process ${p#/proc/} ($comm): $cmd"
    fi
  done
}

check_uids() {
  local pid n hit
  while read -r pid; do
    if ((${#PIDS[@]})); then
      hit=0
      for n in "${PIDS[@]}"; do
        grep -q "/sbxd-$n/" "/proc/$pid/cgroup" 2>/dev/null && hit=1
      done
      ((hit)) || continue
    fi
    echo "process $pid runs as a sandbox uid: $(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null)"
  done < <(awk '/^Uid:/ && $2 >= 100000 { split(FILENAME, f, "/"); print f[3] }' /proc/[0-9]*/status 2>/dev/null)
}

check_cgroups() {
  [[ -d /sys/fs/cgroup ]] || return 0
  local n
  if ((${#PIDS[@]})); then
    for n in "${PIDS[@]}"; do
      find /sys/fs/cgroup -mindepth 1 -maxdepth 6 -type d -name "sbxd-$n" 2>/dev/null | sed 's/^/cgroup: /'
    done
  else
    find /sys/fs/cgroup -mindepth 1 -maxdepth 6 -type d -name '*sbx*' 2>/dev/null | sed 's/^/cgroup: /'
  fi
}

check_netns() {
  if command -v ip >/dev/null; then
    ip netns list 2>/dev/null | grep -i sbx | sed 's/^/netns: /'
  fi
  local f
  for f in /run/netns/*sbx* /run/netns/*SBX*; do
    [[ -e $f ]] && echo "netns file: $f"
  done
  true
}

check_loops() {
  command -v losetup >/dev/null || return 0
  local dev file d
  while read -r dev file; do
    if ((${#DIRS[@]})); then
      for d in "${DIRS[@]}"; do [[ $file == "$d/"* ]] && echo "loop device: $dev on $file"; done
    elif [[ $file =~ /tmp/sbx-(test|demo)- ]]; then
      echo "loop device: $dev on $file"
    fi
  done < <(losetup -n -l -O NAME,BACK-FILE 2>/dev/null)
}

n=0 failed=0
echo "TAP version 13"
echo "1..6"
for check in mounts procs uids cgroups netns loops; do
  n=$((n + 1))
  deadline=$((SECONDS + WAIT))
  while :; do
    out=$("check_$check")
    [[ -z $out ]] && break
    ((SECONDS >= deadline)) && break
    sleep 0.5
  done
  case $check in
    mounts) what="no mount of sbx is left" ;;
    procs) what="no sbx process (build/bin or a test/demo directory) is left" ;;
    uids) what="no process runs as a sandbox host uid" ;;
    cgroups) what="no sbx cgroup is left under /sys/fs/cgroup" ;;
    netns) what="no sbx network namespace is left" ;;
    loops) what="no loop device of a test directory is left" ;;
  esac
  if [[ -z $out ]]; then
    echo "ok $n - $what"
  else
    echo "not ok $n - $what"
    sed 's/^/# /' <<<"$out"
    failed=$((failed + 1))
  fi
done
if ((${#DIRS[@]} == 0)); then
  kept=$(ls -d /tmp/sbx-test-* 2>/dev/null | tr '\n' ' ')
  [[ -n $kept ]] && echo "# kept test directories (logs of failed runs): $kept"
fi
exit $((failed > 0))
