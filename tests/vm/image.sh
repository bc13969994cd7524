#!/bin/bash
# The check-vm guest image: Debian 12 (mmdebstrap, variant minbase, from the
# host's own apt sources) with systemd as PID 1, the packages of
# tests/vm/packages and the runtime libraries of the binaries under test, as
# an ext4 disk image, plus the kernel as an uncompressed vmlinux (QEMU boots
# its PVH entry point) and a busybox initrd that loads the disk and ext4
# modules and switches to the disk.
#
#   tests/vm/image.sh BUILD_DIR     prints the image directory
#
# BUILD_DIR holds bin/ (the binaries) and obj/ (their make dependency files).
# Images live in VM_CACHE_DIR (default /var/cache/sbx-ci/vm) as image-KEY/,
# KEY a digest of everything the image is made from: this script, the
# package list, the files baked in, the added packages, the host's apt
# sources and busybox. A complete image is reused; building another removes
# the older ones.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=$(cd "${1:?usage: image.sh BUILD_DIR}" && pwd)
CACHE=${VM_CACHE_DIR:-/var/cache/sbx-ci/vm}
SUITE=bookworm                      # Debian 12
IMAGE_SIZE=3G                       # sparse; about 800 MB are used
MACHINE_ID=5b8c0f3e9a7d4c21b6e84f0a2d19c7e3   # fixed: every boot is not a first boot
# virtio-blk over PCI and ext4; crc32c_generic is what ext4's checksums ask
# for by name, and no module depends on it.
INITRD_MODULES=(virtio_pci virtio_blk crc32c_generic ext4)

log() { echo "vm image: $*" >&2; }
die() { log "$*"; exit 1; }

# The host's apt sources, each file passed to mmdebstrap as it is.
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [[ -s $f ]] && sources+=("$f")
done
((${#sources[@]})) || die "no apt sources on this host (/etc/apt/sources.list{,.d})"

# Debian package of a file (dpkg -S), trying the merged-/usr twin too.
pkg_of() {
  local p
  p=$(dpkg -S "$1" 2>/dev/null || dpkg -S "/usr$1" 2>/dev/null || dpkg -S "${1#/usr}" 2>/dev/null) ||
    die "no Debian package owns $1"
  p=${p%%:*}
  echo "${p%%,*}"
}

# Runtime libraries of the binaries, and the headers outside the tree that
# the dependency files name (make install must find them, or it rebuilds).
added_packages() {
  local b f
  for b in "$BUILD_DIR"/bin/sbxd "$BUILD_DIR"/bin/sbxctl "$BUILD_DIR"/bin/sandbox-mcp "$BUILD_DIR"/bin/sbx-worker; do
    [[ -x $b ]] || die "$b missing"
    ldd "$b" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
  done | sort -u | while read -r f; do pkg_of "$f"; done
  find "$BUILD_DIR/obj" -name '*.d' -exec cat {} + 2>/dev/null | tr ' \\' '\n\n' | sed -n 's/:$//; /^\//p' |
    sort -u | while read -r f; do [[ -e $f ]] && pkg_of "$f"; done
}

mapfile -t listed < <(sed 's/#.*//' "$HERE/packages" | tr -s ' \t' '\n\n' | sed '/^$/d')
mapfile -t added < <(added_packages | sort -u)
packages=$(printf '%s\n' "${listed[@]}" "${added[@]}" | sort -u)

key=$( {
  cat "$0" "$HERE/packages" "$HERE"/image/*
  echo "$packages"
  cat "${sources[@]}"
  dpkg-query -W busybox-static
} | sha256sum | cut -c1-16)
dir=$CACHE/image-$key

mkdir -p "$CACHE"
exec 9>"$CACHE/lock"
flock 9
if [[ -e $dir/complete ]]; then
  log "cached $dir"
  echo "$dir"
  exit 0
fi

t0=$SECONDS
log "building $dir (packages: $(echo $packages))"
tmp=$(mktemp -d "$CACHE/build-$key.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root

# Documentation and translations are left out: the guest never reads them.
mmdebstrap --mode=root --variant=minbase --format=directory --quiet \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --include="$(echo $packages | tr ' ' ',')" \
  "$SUITE" "$root" "${sources[@]}" </dev/null

echo "$MACHINE_ID" >"$root/etc/machine-id"
echo sbx-vm >"$root/etc/hostname"
printf '/dev/vda / ext4 rw,noatime 0 0\n' >"$root/etc/fstab"
install -D -m 0755 "$HERE/image/entry" "$root/usr/lib/sbx-vm/entry"
install -D -m 0644 "$HERE/image/sbx-vm-test.service" "$root/etc/systemd/system/sbx-vm-test.service"
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
ln -sf ../sbx-vm-test.service "$root/etc/systemd/system/multi-user.target.wants/sbx-vm-test.service"
# Periodic jobs that would only compete with the test for the two vCPUs.
for u in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer; do
  ln -sf /dev/null "$root/etc/systemd/system/$u"
done
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*_Packages

# The kernel: the ELF vmlinux out of the xz-compressed bzImage.
kver=$(basename "$(ls -d "$root"/lib/modules/* | head -1)")
vmlinuz=$root/boot/vmlinuz-$kver
off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | head -1 | cut -d: -f1)
[[ -n $off ]] || die "no xz stream in $vmlinuz"
tail -c +$((off + 1)) "$vmlinuz" | xz -dc --single-stream >"$tmp/vmlinux" 2>/dev/null || true
[[ $(head -c 4 "$tmp/vmlinux" | od -An -c | tr -d ' ') == 177ELF ]] || die "no ELF kernel in $vmlinuz"

# The initrd: busybox, the modules (dependencies first) and an init script.
mods=$root/lib/modules/$kver
ird=$tmp/initrd
mkdir -p "$ird"/{bin,dev,proc,sys,newroot,modules}
cp /bin/busybox "$ird/bin/busybox"
declare -A seen=()
order=()
add_module() { # path relative to $mods
  local m=$1 d
  [[ -n ${seen[$m]:-} ]] && return
  seen[$m]=1
  for d in $(awk -v m="$m:" '$1 == m { $1 = ""; print }' "$mods/modules.dep"); do
    add_module "$d"
  done
  order+=("$m")
}
for name in "${INITRD_MODULES[@]}"; do
  rel=$(awk -v n="$name" -F: '{ f = $1; sub(/.*\//, "", f); sub(/\.ko(\.[a-z]+)?$/, "", f); gsub(/-/, "_", f)
                                if (f == n) { print $1; exit } }' "$mods/modules.dep")
  if [[ -z $rel ]]; then
    grep -q "/$name.ko" "$mods/modules.builtin" || die "module $name neither in modules.dep nor built in"
    continue
  fi
  add_module "$rel"
done
for m in "${order[@]}"; do
  base=$(basename "$m")
  case $base in
    *.ko) cp "$mods/$m" "$ird/modules/$base" ;;
    *.ko.xz) xz -dc "$mods/$m" >"$ird/modules/${base%.xz}" ;;
    *) die "cannot unpack module $m" ;;
  esac
  echo "${base%.xz}" >>"$ird/modules/order"
done
cat >"$ird/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules/order); do insmod "/modules/$m" || echo "initrd: insmod $m failed"; done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
mount -t ext4 -o rw,noatime /dev/vda /newroot || { echo "initrd: cannot mount /dev/vda"; poweroff -f; }
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
INIT
chmod 0755 "$ird/init"
(cd "$ird" && find . | cpio -o -H newc --quiet) >"$tmp/initrd.img"
rm -rf "$ird"

rm -rf "$root/boot"/vmlinuz-* "$root/boot"/initrd.img-*
truncate -s "$IMAGE_SIZE" "$tmp/root.img"
mkfs.ext4 -q -F -L sbx-vm -d "$root" "$tmp/root.img"
rm -rf "$root"
echo "$packages" >"$tmp/packages"
echo "$kver" >"$tmp/kernel-version"
touch "$tmp/complete"

find "$CACHE" -mindepth 1 -maxdepth 1 -name 'image-*' ! -name "image-$key" -exec rm -rf {} +
mv "$tmp" "$dir"
trap - EXIT
log "built $dir in $((SECONDS - t0)) s ($(du -sm "$dir" | cut -f1) MB used, kernel $kver)"
echo "$dir"
