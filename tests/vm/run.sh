#!/bin/bash
# make check-vm: the README's "Install and run as a service" on a real
# systemd host with pure cgroup v2, a Debian 12 guest under QEMU's software
# emulation (KVM does not run Debian's kernel on the build machines).
#
# Host side: install the host packages (tests/deps.sh --vm), build or reuse the
# cached guest image (tests/vm/image.sh), pack this tree with node_modules and
# the build directory VM_BUILD_DIR into a 9p share, boot the guest with a
# host-side timeout, print the TAP that tests/vm/guest-test.sh wrote into the
# share and end with "N passed, N failed". On a failure it prints the tails of
# the guest's console, the test's log and sbxd's journal.
#
# Environment: VM_BUILD_DIR (default build: bin/ and obj/ of the binaries to
# install), VM_CACHE_DIR (default /var/cache/sbx-ci/vm), VM_WORK_DIR
# (default build/vm: share, console.log, results), VM_TIMEOUT (seconds for
# the whole guest run, default 900), VM_POWEROFF (forced, or clean for an
# orderly shutdown), VM_CPUS (2), VM_MEMORY (MiB, 2048).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1

BUILD_DIR=$(cd "${VM_BUILD_DIR:-$ROOT/build}" 2>/dev/null && pwd) || BUILD_DIR=${VM_BUILD_DIR}
WORK=${VM_WORK_DIR:-$ROOT/build/vm}
TIMEOUT=${VM_TIMEOUT:-900}
POWEROFF=${VM_POWEROFF:-forced}
CPUS=${VM_CPUS:-2}
MEMORY=${VM_MEMORY:-2048}

fail() {
  echo "check-vm: $*" >&2
  echo "0 passed, 1 failed"
  exit 1
}

[[ $(id -u) -eq 0 ]] || fail "needs root (mmdebstrap, the image cache)"
case $POWEROFF in forced | clean) ;; *) fail "VM_POWEROFF must be forced or clean, not '$POWEROFF'" ;; esac
for b in sbxd sbxctl sandbox-mcp sbx-worker; do
  [[ -x $BUILD_DIR/bin/$b ]] || fail "$BUILD_DIR/bin/$b missing (make all, or set VM_BUILD_DIR)"
done
[[ -d node_modules/@modelcontextprotocol/sdk ]] || fail "node_modules missing: tests/deps.sh (npm ci)"

t0=$SECONDS
tests/deps.sh --vm || fail "cannot install the host packages"
image=$(tests/vm/image.sh "$BUILD_DIR") || fail "cannot build the guest image"
t_image=$((SECONDS - t0))

rm -rf "$WORK"
mkdir -p "$WORK/share/out" "$WORK/tmp"
# The tree as git sees it (tracked and new files), node_modules, and the
# build directory as build/, all with their times kept, so that make install
# in the guest finds everything up to date and builds nothing.
{
  if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard | tr '\0' '\n' |
      while IFS= read -r f; do [[ -e $f && ! -d $f ]] && echo "$f"; done
  else
    find . -path ./build -prune -o -path ./node_modules -prune -o ! -type d -print | sed 's|^\./||'
  fi
  echo node_modules
} | grep -v '^build/' | tar -cf "$WORK/share/tree.tar" --transform 's|^|sbx/|' --verbatim-files-from -T - ||
  fail "cannot pack the tree"
tar -rf "$WORK/share/tree.tar" -C "$BUILD_DIR" --transform 's|^\.|sbx/build|' ./bin ./obj ./gen ./lib ./tools ||
  fail "cannot pack $BUILD_DIR"

append="console=ttyS0 root=/dev/vda rw panic=-1 loglevel=4 fsck.mode=skip"
append+=" systemd.unified_cgroup_hierarchy=1 systemd.show_status=1"
[[ $POWEROFF == clean ]] && append+=" sbx_vm.poweroff=clean"

# snapshot=on: the guest's writes go to a temporary file in TMPDIR, the
# cached image stays as built. For an orderly shutdown the guest runs on a
# sparse copy instead, which the host reads after the power-off (debugfs):
# what sbxd.service's ExecStopPost saved on the way down.
drive="file=$image/root.img,if=virtio,format=raw,snapshot=on"
if [[ $POWEROFF == clean ]]; then
  cp --sparse=always "$image/root.img" "$WORK/root.img" || fail "cannot copy the guest image"
  drive="file=$WORK/root.img,if=virtio,format=raw"
fi

echo "check-vm: booting $image (timeout ${TIMEOUT} s, $CPUS vCPUs, $MEMORY MiB, power-off $POWEROFF)"
t1=$SECONDS
TMPDIR=$WORK/tmp timeout --kill-after=10 "$TIMEOUT" \
  qemu-system-x86_64 -accel tcg -machine q35 -smp "$CPUS" -m "$MEMORY" \
  -nodefaults -no-user-config -display none -monitor none -no-reboot \
  -serial "file:$WORK/console.log" \
  -kernel "$image/vmlinux" -initrd "$image/initrd.img" -append "$append" \
  -drive "$drive" \
  -virtfs "local,path=$WORK/share,mount_tag=sbxhost,security_model=none,id=sbxhost" \
  -device virtio-rng-pci </dev/null >"$WORK/qemu.log" 2>&1
qrc=$?
t_guest=$((SECONDS - t1))
rm -rf "$WORK/tmp"

out=$WORK/share/out
tap=$out/results.tap
status=0
if ((qrc == 124 || qrc == 137)); then
  echo "check-vm: the guest did not power off within $TIMEOUT s (killed)"
  status=1
elif ((qrc != 0)); then
  echo "check-vm: qemu exited with $qrc: $(tail -n 5 "$WORK/qemu.log")"
  status=1
fi
# The orderly shutdown happens after the guest wrote its results: the
# console says whether systemd stopped sbxd.service and powered off.
if [[ $POWEROFF == clean && -s $tap ]]; then
  n=$(grep -c '^\(not \)\?ok ' "$tap")
  sed -i '/^1\.\.[0-9]*$/d' "$tap"
  # A stop that hangs shows "A stop job is running for sbxd.service" until TimeoutStopSec.
  if ((qrc == 0)) && grep -aqE 'OK .*Stopped.*sbxd\.service' "$WORK/console.log" &&
     ! grep -aqE 'stop job is running for .*sbxd|sbxd\.service.*timed out' "$WORK/console.log" &&
     grep -q 'reboot: Power down' "$WORK/console.log"; then
    echo "ok $((n + 1)) - the orderly shutdown stopped sbxd.service and powered off" >>"$tap"
  else
    echo "not ok $((n + 1)) - the orderly shutdown stopped sbxd.service and powered off" >>"$tap"
  fi
  # The guest named the managed session live at the shutdown: sbxd kept it in
  # place, and ExecStopPost (sbxd --save-kept, the system going down) copied
  # it to the state directory on the disk and unmounted it.
  kept=$(cat "$out/kept-at-poweroff" 2>/dev/null)
  desc="the shutdown's ExecStopPost saved the live managed session to the disk (${kept:-not named by the guest})"
  if [[ -n $kept ]] && listing=$(debugfs -R "ls -p $kept" "$WORK/root.img" 2>&1) && grep -q '/meta/' <<<"$listing" &&
     grep -q '/upper/' <<<"$listing"; then
    echo "ok $((n + 2)) - $desc" >>"$tap"
  else
    echo "not ok $((n + 2)) - $desc" >>"$tap"
    printf '%s\n' "${listing:-}" | tail -n 5 | sed 's/^/#   /' >>"$tap"
  fi
  echo "1..$((n + 2))" >>"$tap"
fi
rm -f "$WORK/root.img"
[[ -s $tap ]] && cat "$tap"
passed=$(grep -c '^ok ' "$tap" 2>/dev/null)
failed=$(grep -c '^not ok ' "$tap" 2>/dev/null)
grc=$(cat "$out/guest.rc" 2>/dev/null || echo none)
if [[ $grc != 0 ]]; then
  echo "check-vm: the guest's test script ended with status $grc"
  status=1
fi
((${failed:-0} > 0 || ${passed:-0} == 0)) && status=1
((status != 0 && ${failed:-0} == 0)) && failed=1

if ((status != 0)); then
  for f in "$WORK/console.log" "$out/guest.log" "$out/sbxd-journal.txt"; do
    [[ -s $f ]] || continue
    echo "---- tail of $f"
    tail -n 60 "$f"
  done
fi
echo "check-vm: image $t_image s, guest $t_guest s (boot to power-off), total $((SECONDS - t0)) s; logs in $WORK"
echo "${passed:-0} passed, ${failed:-0} failed"
exit "$status"
