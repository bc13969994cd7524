#!/bin/bash
# Runs inside the check-vm guest (Debian 12, systemd as PID 1, pure cgroup
# v2), as root, from the tree the host packed (/root/sbx, with the binaries
# under build/): the README's "Install and run as a service" section as it is
# written, then one MCP session through sandbox-mcp (tests/vm/guest-session.mjs),
# a restart and a stop of sbxd. TAP goes to OUT/results.tap, sbxd's journal
# to OUT/sbxd-journal.txt.
#   tests/vm/guest-test.sh OUT
set -uo pipefail
OUT=${1:?usage: guest-test.sh OUT}
TAP=$OUT/results.tap
LOG=$OUT/steps.log
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
: >"$TAP"
: >"$LOG"
n=0
UNIT_CG=/sys/fs/cgroup/system.slice/sbxd.service

tap() { # ok|not-ok description [diagnostics...]
  local res=$1 desc=$2
  shift 2
  n=$((n + 1))
  if [[ $res == ok ]]; then
    echo "ok $n - $desc" >>"$TAP"
  else
    echo "not ok $n - $desc" >>"$TAP"
    printf '%s\n' "$@" | sed 's/^/#   /' >>"$TAP"
  fi
}

# check DESCRIPTION COMMAND...: one TAP line; the command's output goes to
# the step log, and its tail into the diagnostics of a failure. Every step
# has a time limit of its own, far above what it needs under emulation.
check() {
  local desc=$1 out rc
  shift
  echo "==== $desc: $*" >>"$LOG"
  out=$(timeout 300 "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" >>"$LOG"
  if ((rc == 0)); then
    tap ok "$desc"
  else
    tap not-ok "$desc" "\$ $*  (exit $rc)" "$(printf '%s\n' "$out" | tail -n 15)"
  fi
  return $rc
}

# The same with a shell snippet.
check_sh() { check "$1" bash -c "$2"; }

echo "# guest: $(uname -r), systemd $(systemctl --version | head -1 | cut -d' ' -f2), $(nproc) cpus, node $(node --version)" >>"$TAP"
check_sh "systemd is PID 1 on a pure cgroup v2 hierarchy" \
  '[ "$(cat /proc/1/comm)" = systemd ] && [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] &&
   ! grep -q " cgroup " /proc/self/mounts && cat /sys/fs/cgroup/cgroup.controllers'

# ---- the README, "Install and run as a service"
check "the copied build is up to date (make -q all)" make -q all
check "make install" make install
check "systemd-sysusers sbx.conf creates the group sbx" \
  bash -c 'systemd-sysusers sbx.conf && getent group sbx'
check_sh "systemd-tmpfiles --create sbx.conf: /var/lib/sbx 0711, /run/sbx 0755" \
  'systemd-tmpfiles --create sbx.conf && [ "$(stat -c %a /var/lib/sbx)" = 711 ] && [ "$(stat -c %a /run/sbx)" = 755 ]'
check "sbxd --config /etc/sbx/sbxd.conf --check-config" sbxd --config /etc/sbx/sbxd.conf --check-config
check "systemctl daemon-reload" systemctl daemon-reload
check "systemctl enable --now sbxd" systemctl enable --now sbxd
check_sh "systemctl status sbxd says active (running)" 'systemctl status sbxd --no-pager | tee /dev/stderr | grep -q "active (running)"'

# ---- what the unit and sbxd made of it
# sbx-egress runs as its own user (sysusers made it) and is sbxd's child: a third process there.
check_sh "sbxd, its spawner and sbx-egress live in the supervisor/ leaf of the delegated cgroup" \
  'main=$(systemctl show -p MainPID --value sbxd); procs='"$UNIT_CG"'/supervisor/cgroup.procs; cat $procs;
   [ -z "$(cat '"$UNIT_CG"'/cgroup.procs)" ] && grep -qx "$main" $procs && [ "$(wc -l <$procs)" -eq 3 ] &&
   for p in $(cat $procs); do readlink /proc/$p/exe; done | grep -q "/sbx-egress$"'
check_sh "memory and pids are enabled for the sandboxes' and their sessions' cgroups" \
  'for f in '"$UNIT_CG"'/cgroup.subtree_control '"$UNIT_CG"'/sandboxes/cgroup.subtree_control; do
     echo "$f: $(cat $f)"; grep -qw memory $f && grep -qw pids $f || exit 1; done'
check_sh "the cgroup of all sandboxes keeps them to 80% of the RAM (to a page) and 50% of pid_max, swap off (defaults)" \
  'd='"$UNIT_CG"'/sandboxes; t=$(( $(awk "/^MemTotal:/ { print \$2 }" /proc/meminfo) * 1024 )); p=$(cat /proc/sys/kernel/pid_max);
   echo "memory.max $(cat $d/memory.max) of $t, pids.max $(cat $d/pids.max) of $p, swap $(cat $d/memory.swap.max), cpu.weight $(cat $d/cpu.weight 2>&1)";
   m=$(cat $d/memory.max); w=$(( t / 100 * 80 + t % 100 * 80 / 100 )); [ "$m" -le $w ] && [ $(( w - m )) -lt 4096 ] &&
   [ "$(cat $d/pids.max)" = $(( p / 100 * 50 + p % 100 * 50 / 100 )) ] &&
   [ "$(cat $d/memory.swap.max)" = 0 ]'
check_sh "sbxd.sock is srw-rw---- root sbx" \
  'ls -l /run/sbx/sbxd.sock; [ "$(stat -c "%A %U %G" /run/sbx/sbxd.sock)" = "srw-rw---- root sbx" ]'
check_sh "sbxd logs to the journal with priorities" \
  'journalctl -u sbxd --no-pager -o verbose | grep -E "PRIORITY=|MESSAGE=" | head -4; journalctl -u sbxd --no-pager -p info | grep -q "ready on /run/sbx/sbxd.sock"'

# ---- a user and a sandbox, as the README says
check_sh "usermod -aG sbx alice" 'id alice >/dev/null 2>&1 || useradd -m -s /bin/bash alice; usermod -aG sbx alice && id alice'
check_sh "alice's repository" \
  'install -d -o alice -g alice /home/alice/src && cp -a examples/demo-repo /home/alice/src/myrepo && chown -R alice:alice /home/alice/src/myrepo'
check "sbxctl sandbox create myrepo --source /home/alice/src/myrepo --owner alice (64M, 32 pids)" \
  sbxctl sandbox create myrepo --source /home/alice/src/myrepo --owner alice --memory 64M --pids 32
check_sh "sbxctl sandbox list shows it owned by alice" \
  'sbxctl sandbox list | tee /dev/stderr | grep -E "^myrepo +$(id -u alice) "'

# ---- one MCP session as alice: sandbox-mcp with the SDK client; it
# restarts sbxd in the middle and leaves a command running for the stop.
echo "==== MCP session (tests/vm/guest-session.mjs)" >>"$LOG"
timeout 600 node tests/vm/guest-session.mjs --user alice --sandbox myrepo --broker-log "$OUT/sandbox-mcp.log" \
  2>>"$LOG" | while IFS= read -r line; do
    case $line in
      "ok - "* | "not ok - "*) ;;
      *) echo "$line" >>"$TAP"; continue ;;
    esac
    n=$((n + 1))
    echo "${line%%- *}$n - ${line#*- }" >>"$TAP"
    echo "$n" >"$OUT/.n"
  done
src=("${PIPESTATUS[@]}")
n=$(cat "$OUT/.n" 2>/dev/null || echo "$n")
rm -f "$OUT/.n"
# 1 is a failed check, already counted; anything else did not finish.
((src[0] <= 1)) || tap not-ok "the MCP session ran to its end" "node exited with ${src[0]}; see steps.log"

# ---- the session's cgroup, seen from the host, after systemd re-read its units
check "systemctl daemon-reload with a session running" systemctl daemon-reload
check_sh "the running command's cgroup is a session of the sandbox's, both with memory.max 64M, pids.max 32, no swap" \
  'pid=$(pgrep -f "^sleep 3600") && cg=$(sed -n "s/^0:://p" /proc/$pid/cgroup) && d=/sys/fs/cgroup$cg && b=${d%/*} &&
   for x in $d $b; do echo "$x: memory.max $(cat $x/memory.max), memory.swap.max $(cat $x/memory.swap.max), pids.max $(cat $x/pids.max)";
     [ "$(cat $x/memory.max)" = 67108864 ] && [ "$(cat $x/pids.max)" = 32 ] && [ "$(cat $x/memory.swap.max)" = 0 ] || exit 1; done &&
   case $cg in '"${UNIT_CG#/sys/fs/cgroup}"'/sandboxes/sb-*/s*) ;; *) exit 1 ;; esac'

# ---- stop: sbxd ends the running session itself, the unit's cgroup goes
check_sh "a command is still running when sbxd is stopped" \
  "ps -eo args | grep -E '^sbx-worker \\[session' && pgrep -f '[s]leep 3600' >/dev/null"
check "systemctl stop sbxd" systemctl stop sbxd
check_sh "sbxd stopped by itself (Result=success, not a timeout or SIGKILL)" \
  'systemctl show -p Result -p ExecMainCode -p ExecMainStatus sbxd | tee /dev/stderr | grep -qx Result=success &&
   journalctl -u sbxd --no-pager | grep -q "sbxd stopped"'
check_sh "no sandbox or session cgroup is left under the unit" \
  'if [ -d '"$UNIT_CG"' ]; then find '"$UNIT_CG"' -type d; exit 1; fi; ! find /sys/fs/cgroup -type d -name "sandboxes" -o -type d -name "sb-*" | grep -q .'
check_sh "no sandbox process or mount is left" \
  '! pgrep -a -f "[s]bx-worker|[s]leep 3600" && ! grep -E " /run/sbx/" /proc/self/mounts'

# ---- the kernel's accounting that a stopped session relies on (docs/cgroups.md): what a
# process wrote to a tmpfs stays charged after its cgroup is removed, and its
# parent (the sandbox's cgroup) goes on counting it. In a cgroup of its own.
check_sh "tmpfs pages written in a removed child cgroup still count against its parent (cgroup v2)" \
  'X=/sys/fs/cgroup/tmpfs-charge-check; T=$(mktemp -d); trap "umount $T; rmdir $T; rmdir $X/child $X 2>/dev/null" EXIT;
   grep -qw memory /sys/fs/cgroup/cgroup.subtree_control || echo +memory >/sys/fs/cgroup/cgroup.subtree_control;
   mkdir $X && echo +memory >$X/cgroup.subtree_control && mkdir $X/child && mount -t tmpfs -o size=64m none $T &&
   sh -c "echo \$\$ >$X/child/cgroup.procs; exec dd if=/dev/zero of=$T/f bs=1M count=20 status=none" &&
   echo "child $(cat $X/child/memory.current), parent $(cat $X/memory.current)" && rmdir $X/child &&
   echo "after rmdir: parent $(cat $X/memory.current), file $(stat -c %s $T/f)" && [ "$(cat $X/memory.current)" -ge 20971520 ] &&
   umount $T && echo "after umount: parent $(cat $X/memory.current)" && [ "$(cat $X/memory.current)" -lt 20971520 ]; r=$?;
   rmdir $T; trap - EXIT; rmdir $X; exit $r'

# An orderly power-off (VM_POWEROFF=clean) stops sbxd once more, with a live
# session; the host reads the console for it.
if grep -qw 'sbx_vm.poweroff=clean' /proc/cmdline; then
  # A managed session with a file; its kept directory goes to the share, for
  # the host to look for in the image afterwards.
  check "for the shutdown: sbxd started again" systemctl start sbxd
  check "for the shutdown: a live managed session with a file" \
    node tests/vm/guest-session.mjs --user alice --sandbox myrepo --broker-log "$OUT/sandbox-mcp.log" \
    --leave-managed "$OUT/kept-at-poweroff"
fi

journalctl -u sbxd --no-pager -o short-monotonic >"$OUT/sbxd-journal.txt" 2>&1
echo "1..$n" >>"$TAP"
! grep -q '^not ok ' "$TAP"
