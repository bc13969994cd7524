#!/bin/bash
# make check-fresh (mk/fresh.mk): the README's two commands on a fresh
# Debian 12 machine. Builds a root filesystem with mmdebstrap (variant
# minbase plus make) from the host's apt sources, puts a git archive of HEAD
# in /root/sbx, and runs there, as root, `make run` and then `make check-quick`
# (unit tests, man lint, one integration file and the leftovers check), each
# in its own mount, pid, cgroup, uts and ipc namespaces (tests/fresh/enter.sh).
# The tree's own tests/deps.sh installs everything inside: whatever it forgets
# fails here. Run as root; the network is the host's.
#
#   FRESH_CACHE  the .deb packages downloaded by mmdebstrap and by apt inside,
#                kept between runs (default /var/cache/sbx-ci/fresh/archives;
#                remove it for a cold run). The root filesystem is never kept.
#   FRESH_OUT    logs, the inner test results and a copy of the build directory
#                made inside, for later stages: FRESH_OUT/build (bin, obj, gen,
#                lib, tools, times kept; make check-vm VM_BUILD_DIR=FRESH_OUT/build),
#                FRESH_OUT/commit names the commit (default build/fresh)
#   FRESH_WORK   where the root filesystem is built and removed (default /var/tmp)
#
# Prints each step's time; the last line is `N passed, N failed`: one for each
# step (root filesystem, make run) plus the counts of make check-quick.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
SUITE=bookworm                         # Debian 12
CACHE=${FRESH_CACHE:-/var/cache/sbx-ci/fresh/archives}
OUT=${FRESH_OUT:-$ROOT/build/fresh}
WORKBASE=${FRESH_WORK:-/var/tmp}
T_BOOTSTRAP=600 T_RUN=1200 T_CHECK=900   # seconds: a hung step is killed (at most 45 min)

WORK="" CGDIRS=() STEP_PID=""
PASSED=0 FAILED=0 SUMMARY=()

say() { echo "check-fresh: $*"; }
die() { say "$*" >&2; exit 1; }   # cleanup counts it as a failure

count() { # NAME PASSED FAILED
  PASSED=$((PASSED + $2)) FAILED=$((FAILED + $3))
  SUMMARY+=("$(printf '%-16s %4d passed, %4d failed' "$1" "$2" "$3")")
}

# ---- cgroups: one per hierarchy below our own, the root of the inner cgroup
# namespace; run.sh moves itself in, so everything it starts is below it.
cg_enter() {
  local ctrls path mnt d line lines
  mapfile -t lines </proc/self/cgroup   # read it whole: it changes as we move
  for line in "${lines[@]}"; do
    IFS=: read -r _ ctrls path <<<"$line"
    if [[ -z $ctrls ]]; then
      mnt=$(awk '$3 == "cgroup2" && $2 ~ "^/sys/fs/cgroup" { print $2; exit }' /proc/self/mounts)
    else
      mnt=$(awk -v c="$ctrls" '$3 == "cgroup" {
              n = split(c, want, ","); split($4, o, ","); for (i in o) have[o[i]] = 1
              ok = 1; for (i = 1; i <= n; i++) if (!(want[i] in have)) ok = 0
              delete have; if (ok) { print $2; exit } }' /proc/self/mounts)
    fi
    [[ -n $mnt ]] || continue
    d=${mnt}${path%/}/check-fresh-$$
    mkdir "$d" || return 1
    CGDIRS+=("$d")
    if [[ -f $d/cpuset.cpus ]]; then   # v1 cpuset: a task needs cpus and mems
      cat "$d/../cpuset.cpus" >"$d/cpuset.cpus" && cat "$d/../cpuset.mems" >"$d/cpuset.mems" || return 1
    fi
    echo $$ >"$d/cgroup.procs" || return 1
  done
}

cg_leave() {
  local d
  for d in "${CGDIRS[@]}"; do
    echo $$ >"$d/../cgroup.procs" 2>/dev/null
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    [[ -d $d ]] && say "could not remove the cgroup $d (still in use?)" >&2
  done
  CGDIRS=()
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $STEP_PID ]]; then
    kill -TERM "$STEP_PID" 2>/dev/null
    wait "$STEP_PID" 2>/dev/null
  fi
  if [[ -n $WORK ]]; then
    if awk -v w="$WORK" 'index($2, w "/") == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
      say "something is still mounted under $WORK; not removing it" >&2
      rc=1
    else
      rm -rf --one-file-system "$WORK"
    fi
  fi
  cg_leave
  ((rc != 0 && FAILED == 0)) && count "check-fresh" 0 1   # stopped early
  ((rc == 0 && FAILED != 0)) && rc=1
  ((${#SUMMARY[@]})) && printf '%s\n' "${SUMMARY[@]}"
  echo "$PASSED passed, $FAILED failed"
  exit "$rc"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

[[ $(id -u) -eq 0 ]] || die "needs root (mmdebstrap in root mode, namespaces, mounts)"
command -v mmdebstrap >/dev/null || die "mmdebstrap missing: run tests/deps.sh --fresh"
COMMIT=$(git rev-parse --verify HEAD 2>/dev/null) || die "$ROOT is not a git checkout: nothing to archive"
[[ -z $(git status --porcelain --untracked-files=no) ]] ||
  say "note: uncommitted changes are not tested; the root gets HEAD ($COMMIT)"

mkdir -p "$CACHE" "$OUT" || die "cannot create $CACHE or $OUT"
OUT=$(cd "$OUT" && pwd)
# One run at a time per cache: apt locks the archives directory.
exec 9>"$CACHE/.check-fresh.lock"
flock -w 3600 9 || die "another check-fresh holds $CACHE for an hour"
rm -rf "${OUT:?}/build" "$OUT/test-results" "$OUT/sbx-test-logs" "$OUT"/*.log "$OUT/commit"

# step NAME TIMEOUT LOG COMMAND...: run COMMAND with its output in LOG, killed
# after TIMEOUT seconds; prints the time it took. Returns its status.
step() {
  local name=$1 limit=$2 log=$3 t0 rc=0
  shift 3
  say "$name ..."
  t0=$(date +%s)
  timeout --kill-after=30 "$limit" "$@" >"$log" 2>&1 </dev/null &
  STEP_PID=$!
  wait "$STEP_PID" || rc=$?
  STEP_PID=
  ((rc == 124 || rc == 137)) && echo "check-fresh: $name timed out after $limit s" >>"$log"
  say "$name: $( ((rc == 0)) && echo ok || echo "FAILED ($rc)"), $(($(date +%s) - t0)) s (log: $log)"
  return "$rc"
}

# bootstrap: the root filesystem, from the host's apt settings: every sources
# file, and the apt.conf files that set Acquire:: options (for example
# Check-Valid-Until for a snapshot mirror), kept in the root's apt.conf.d.
bootstrap() {
  local f opts=() sources=() log=$OUT/bootstrap.log
  for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
    [[ -f $f ]] && grep -q '^[[:space:]]*Acquire' "$f" && opts+=("--aptopt=$f")
  done
  if [[ -f /etc/apt/sources.list ]] && grep -q '^[[:space:]]*deb' /etc/apt/sources.list; then
    sources+=(/etc/apt/sources.list)
  fi
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] && sources+=("$f")
  done
  if ! ((${#sources[@]})) || ! grep -qw "$SUITE" "${sources[@]}"; then
    echo "check-fresh: the host's apt sources (${sources[*]:-none}) name no $SUITE suite" | tee "$log"
    return 1
  fi
  # mmdebstrap's own mounts (the cache, /proc, /dev) stay in a mount namespace.
  step "root filesystem (mmdebstrap minbase + make)" "$T_BOOTSTRAP" "$log" \
    env FRESH_DEB_CACHE="$CACHE" unshare --mount --propagation private -- mmdebstrap --mode=root --variant=minbase \
    --include=make --format=directory --skip=essential/unlink "${opts[@]}" \
    --setup-hook='mkdir -p "$1/var/cache/apt/archives" && mount --bind "$FRESH_DEB_CACHE" "$1/var/cache/apt/archives"' \
    --customize-hook='umount "$1/var/cache/apt/archives"' \
    "$SUITE" "$R" "${sources[@]}"
}

# The host's network settings and npm configuration: name resolution, the
# global and user npmrc (as the root's user npmrc, global first so that user
# settings win), the effective registry, and the CA file npm is told to use,
# copied to /etc/npm-host-ca.pem (ca-certificates rewrites /etc/ssl/certs).
carry_host_config() {
  cp /etc/resolv.conf /etc/hosts "$R/etc/" || return 1
  command -v npm >/dev/null || { say "npm not on the host: the root uses npm's defaults"; return 0; }
  local f cafile npmrc=$R/root/.npmrc
  {
    for f in "$(npm config get globalconfig)" "$(npm config get userconfig)"; do
      [[ -f $f ]] && { echo "; from the host's $f"; grep -v -E '^[[:space:]]*cafile[[:space:]]*=' "$f"; }
    done
    echo "; the host's effective registry"
    echo "registry=$(npm config get registry)"
    cafile=$(npm config get cafile)
    if [[ -n $cafile && $cafile != null && -f $cafile ]]; then
      cp "$cafile" "$R/etc/npm-host-ca.pem"
      echo "; the host's cafile $cafile"
      echo "cafile=/etc/npm-host-ca.pem"
    fi
  } >"$npmrc"
}

# inside STEP LOG COMMAND: COMMAND in /root/sbx of the root (tests/fresh/enter.sh).
inside() {
  step "$1" "$2" "$3" unshare --mount --propagation private --pid --fork --kill-child \
    --cgroup --uts --ipc -- bash "$ROOT/tests/fresh/enter.sh" "$R" "$CACHE" "$4"
}

tails() {
  local f
  for f in "$@"; do
    [[ -f $f ]] || continue
    echo "---- tail of $f"
    tail -n 60 "$f"
  done
}

copy_out() {
  local s=$R/root/sbx
  # the whole build directory (bin, obj, gen, lib), times kept: make check-vm
  # installs it with make install, which then finds everything up to date
  [[ -d $s/build/bin ]] && mkdir -p "$OUT/build" &&
    cp -a "$s/build/bin" "$s/build/obj" "$s/build/gen" "$s/build/lib" "$s/build/tools" "$OUT/build/" && echo "$COMMIT" >"$OUT/commit"
  [[ -d $s/build/test-results ]] && cp -a "$s/build/test-results" "$OUT/test-results"
  local d
  for d in "$R"/tmp/sbx-test-*/logs "$R"/tmp/sbx-demo-*/logs; do
    [[ -d $d ]] || continue
    mkdir -p "$OUT/sbx-test-logs/$(basename "$(dirname "$d")")"
    cp -a "$d/." "$OUT/sbx-test-logs/$(basename "$(dirname "$d")")/"
  done
}

main() {
  local t0 p f qrc=0
  t0=$(date +%s)
  cg_enter || die "cannot make the cgroups of the clean room below $(head -c 200 /proc/self/cgroup)"
  WORK=$(mktemp -d "$WORKBASE/sbx-fresh.XXXXXX") || die "cannot create a directory in $WORKBASE"
  chmod 0755 "$WORK"                   # apt's _apt user downloads into it
  R=$WORK/root
  say "Debian $SUITE root in $R, commit $COMMIT, .deb cache $CACHE"

  if bootstrap; then
    count "root filesystem" 1 0
  else
    count "root filesystem" 0 1
    tails "$OUT/bootstrap.log"
    return 1
  fi
  if ! { mkdir -p "$R/root/sbx" && git archive --format=tar HEAD | tar -x -C "$R/root/sbx"; }; then
    count "copy in" 0 1
    return 1
  fi
  if ! carry_host_config; then
    count "host settings" 0 1
    return 1
  fi

  if inside "make run" "$T_RUN" "$OUT/make-run.log" "make run"; then
    count "make run" 1 0
  else
    count "make run" 0 1
  fi
  inside "make check-quick" "$T_CHECK" "$OUT/check-quick.log" "make check-quick" || qrc=$?
  read -r p f < <(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2/p' "$OUT/check-quick.log" | tail -1)
  p=${p:-0} f=${f:-0}
  ((qrc != 0 && f == 0)) && f=1
  count "make check-quick" "$p" "$f"
  copy_out

  sed -n '/^======== summary/,$p' "$OUT/check-quick.log" | grep -v '^logs: ' | sed 's/^/  inner: /'
  [[ -d $OUT/test-results ]] && say "inner test results: $OUT/test-results"
  if ((FAILED)); then
    tails "$OUT/make-run.log" "$OUT/check-quick.log" "$OUT"/test-results/*.log "$OUT"/sbx-test-logs/*/*.log
  fi
  [[ -d $OUT/build/bin ]] && say "build directory of the fresh root: $OUT/build (commit in $OUT/commit)"
  say "total $(($(date +%s) - t0)) s"
}

main   # cleanup (the EXIT trap) prints the summary and the closing line
