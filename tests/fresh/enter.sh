#!/bin/bash
# tests/fresh/enter.sh ROOT CACHE COMMAND: run COMMAND (a bash command line)
# as root in /root/sbx of the root filesystem ROOT, as a fresh machine would.
# tests/fresh/run.sh starts it as pid 1 of new mount, pid, cgroup, uts and ipc
# namespaces (unshare); everything mounted here goes away with them.
#
#   /          ROOT, bind-mounted on itself and made the root with pivot_root
#   /proc      this pid namespace's own: only the processes started here
#   /sys       sysfs, and at /sys/fs/cgroup the host's cgroup layout (v1
#              controllers, cgroup2 at unified, its symlinks) mounted afresh
#              in this cgroup namespace, whose root is the cgroup run.sh made
#   /dev       a tmpfs with null, zero, full, random, urandom, tty, a devpts
#              instance and /dev/shm
#   /run       an empty tmpfs
#   /var/cache/apt/archives   CACHE, the .deb packages kept between runs
#
# The command gets a clean environment (PATH, HOME, TERM, and the host's
# proxy variables if set) and runs under bash as pid 1, which reaps orphans.
set -euo pipefail
R=${1:?root} CACHE=${2:?cache} CMD=${3:?command}

mount --bind "$R" "$R"
mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
mount -t sysfs -o nosuid,nodev,noexec sysfs "$R/sys"

# The host's cgroup layout, each hierarchy seen from this cgroup namespace.
mount -t tmpfs -o nosuid,nodev,noexec,mode=0755 cgroup "$R/sys/fs/cgroup"
mapfile -t cgmounts < <(awk '$2 ~ "^/sys/fs/cgroup/" && ($3 == "cgroup" || $3 == "cgroup2") { print $3, $2, $4 }' /proc/self/mounts)
for m in "${cgmounts[@]}"; do
  read -r type dir opts <<<"$m"
  mkdir -p "$R$dir"
  mount -t "$type" -o "$opts" "$type" "$R$dir"
done
for l in /sys/fs/cgroup/*; do
  [[ -L $l ]] && ln -s "$(readlink "$l")" "$R$l"
done

mount -t tmpfs -o nosuid,noexec,mode=0755 dev "$R/dev"
for n in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
  IFS=: read -r name major minor <<<"$n"
  mknod -m 0666 "$R/dev/$name" c "$major" "$minor"
done
mkdir "$R/dev/pts" "$R/dev/shm"
mount -t devpts -o nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,gid=5 devpts "$R/dev/pts"
ln -s pts/ptmx "$R/dev/ptmx"
mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$R/dev/shm"
ln -s /proc/self/fd "$R/dev/fd"
ln -s /proc/self/fd/0 "$R/dev/stdin"
ln -s /proc/self/fd/1 "$R/dev/stdout"
ln -s /proc/self/fd/2 "$R/dev/stderr"

mount -t tmpfs -o nosuid,nodev,mode=0755 run "$R/run"
mount --bind "$CACHE" "$R/var/cache/apt/archives"

envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb)
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [[ -n ${!v-} ]] && envs+=("$v=${!v}")
done
# ROOT becomes / with pivot_root, not chroot: a chrooted process may not
# create user namespaces (EPERM from unshare(2)), and every sbx session does.
# pivot_root . . stacks the host's root on top of ROOT; unmounting it leaves
# ROOT alone, with nothing of the host's file systems reachable.
cd "$R"
pivot_root . .
umount -l .
# "exit" after the command keeps bash from exec'ing it: bash stays pid 1 and
# reaps the orphans the command leaves.
exec /usr/bin/env -i "${envs[@]}" /bin/bash -c "cd /root/sbx || exit 1; $CMD; exit \$?"
