#!/bin/bash
# Install what building and testing sbx needs, only if missing. Idempotent,
# non-interactive, needs no stdin. Debian packages via apt-get (as root), then
# the npm packages of package-lock.json via `npm ci` when node_modules is
# missing or older than the lockfile.
#   tests/deps.sh           everything the build and every test need
#   tests/deps.sh --list    the Debian packages of that, one per line; installs nothing
#   tests/deps.sh --fresh   only the host tools of make check-fresh (mk/fresh.mk),
#                           which then runs plain tests/deps.sh inside its root
#   tests/deps.sh --vm      only the host tools of make check-vm (mk/vm.mk)
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
cd "$(dirname "$0")/.."

PKGS=(
  build-essential pkg-config          # compiler, make, pkg-config for every library below
  protobuf-c-compiler libprotobuf-c-dev  # protoc-c and the runtime: every inter-process message
  libnl-3-dev libnl-route-3-dev       # loopback set-up in a session's network namespace
  libcap-dev                          # capabilities
  libbsd-dev                          # setproctitle, strlcpy
  libjansson-dev                      # JSON in the broker
  libseccomp-dev                      # the worker's seccomp filter
  libsqlite3-dev                      # durable metadata
  libgit2-dev                         # line diff (xdiff) for file_blame and file_edit diffs
  libcmocka-dev                       # unit tests
  libinih-dev                         # sbxd.conf parser
  nettle-dev                          # SHA-256 of sbx-gateway's bearer tokens in sbxd
  libmicrohttpd-dev                   # sbx-gateway's HTTP server (with GnuTLS for its optional TLS)
  libarchive-dev                      # the tar sandbox-mcp writes for sandbox_sync (boxes set)
  libxml2-dev                         # JUnit XML reports in the broker's digests (streaming reader)
  libzstd-dev                         # persisted artifacts compressed at rest in seekable frames
  zstd                                # zstd -d of an artifact's frames in the artifacts test
  mandoc                              # man page lint
  systemd                             # systemd-analyze verify of dist/sbxd.service (make check-ops); never started here
  clang                               # second compiler, analyzers
  nodejs npm                          # the MCP SDK client of the integration tests and the demo
  python3                             # raw-socket client of the robustness tests
  openssl                             # self-signed certificates of the gateway's TLS test
  iproute2 util-linux procps          # ip, setpriv/mount tools, ps for tests and the demo
  mount e2fsprogs                     # losetup, mkfs.ext4: the small state filesystems of disk-filling tests
  mmdebstrap uidmap                   # image builds (sbx-images(7), --mode=unshare needs newuidmap) and their tests
  golang-go rustc cargo python3-pytest  # the artifacts set's runtimes (go, rust) and digest fixtures (tests/fixtures/digest)
)
FRESH_PKGS=(
  mmdebstrap                          # builds the Debian 12 root of make check-fresh
  util-linux                          # unshare, mount
)
VM_PKGS=(
  qemu-system-x86                     # qemu-system-x86_64 with software emulation (-accel tcg)
  mmdebstrap                          # the Debian 12 guest root file system
  busybox-static                      # the guest's initrd: a static shell that loads the disk and ext4 modules
  e2fsprogs                           # mkfs.ext4 -d: the root file system image from a directory
  xz-utils                            # the uncompressed vmlinux out of the kernel's xz-compressed bzImage
  cpio                                # the initrd archive (newc)
)
npm=yes
case ${1-} in
  "") ;;
  --fresh) PKGS=("${FRESH_PKGS[@]}") npm=no ;;
  --vm) PKGS=("${VM_PKGS[@]}") npm=no ;;
  # tests/check-deps.sh compares this list with config.mk's modules.
  --list) printf '%s\n' "${PKGS[@]}"; exit 0 ;;
  *) echo "usage: $0 [--fresh|--vm|--list]" >&2; exit 2 ;;
esac

missing=()
for p in "${PKGS[@]}"; do
  # node/npm may come from elsewhere (e.g. a nodejs build that bundles npm and
  # conflicts with Debian's npm package): a working command is enough.
  case "$p" in
    nodejs) command -v node >/dev/null && continue ;;
    npm) command -v npm >/dev/null && continue ;;
  esac
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "deps: missing Debian packages: ${missing[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}" >&2
  # others may hold the dpkg lock (a parallel install): wait for it
  apt-get -o DPkg::Lock::Timeout=600 update -qq </dev/null
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" </dev/null
else
  echo "deps: Debian packages present" >&2
fi

[[ $npm == yes ]] || exit 0

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "deps: node and npm are required" >&2
  exit 1
fi

if [[ ! -d node_modules || ! -e node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "deps: npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error </dev/null
else
  echo "deps: node_modules up to date" >&2
fi
