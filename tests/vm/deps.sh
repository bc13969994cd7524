#!/bin/bash
# Host packages of `make check-vm` (tests/vm/run.sh), installed only if
# missing, non-interactively, from the host's own apt sources. The build and
# test dependencies of the tree itself are tests/deps.sh's.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

PKGS=(
  qemu-system-x86     # qemu-system-x86_64 with software emulation (-accel tcg)
  mmdebstrap          # the Debian 12 guest root file system
  busybox-static      # the guest's initrd: a static shell that loads the disk and ext4 modules
  e2fsprogs           # mkfs.ext4 -d: the root file system image from a directory
  xz-utils            # the uncompressed vmlinux out of the kernel's xz-compressed bzImage
  cpio                # the initrd archive (newc)
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "vm deps: host packages present" >&2
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "vm deps: missing Debian packages: ${missing[*]}; run as root or install them" >&2
  exit 1
fi
echo "vm deps: installing ${missing[*]}" >&2
apt-get -o DPkg::Lock::Timeout=600 update -qq </dev/null
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" </dev/null
