#!/bin/bash
# The build's dependency lists cannot drift from what tests/deps.sh installs:
# for every pkg-config module of config.mk (PKGS, TEST_PKGS) and every build
# tool (TOOL_DEBS), the Debian package named for it in config.mk must own its
# .pc file (dpkg -S) or its command, and must be in tests/deps.sh's list.
# TAP on stdout; exit 1 if anything is off.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
PKG_CONFIG=${PKG_CONFIG:-pkg-config}

mapfile -t installed < <(tests/deps.sh --list)
mapfile -t deps < <(make --no-print-directory -s print-deps)
echo "1..${#deps[@]}"
n=0 fails=0
for line in "${deps[@]}"; do
  read -r kind name pkg <<<"$line"
  n=$((n + 1))
  why=
  if [[ $pkg == - ]]; then
    why="config.mk's PKG_DEBS names no Debian package for it"
  elif [[ $kind == module ]]; then
    dir=$($PKG_CONFIG --variable=pcfiledir "$name" 2>/dev/null)
    file=$dir/$name.pc
    [[ -n $dir && -f $file ]] || why="no $name.pc: pkg-config does not find module $name"
  else
    file=$(command -v "$name") || why="command $name not found"
  fi
  if [[ -z $why ]]; then
    owner=$(dpkg-query -S "$file" 2>/dev/null | head -n 1 | cut -d: -f1)
    if [[ $owner != "$pkg" ]]; then
      why="$file belongs to '${owner:-no package}', config.mk names $pkg"
    elif ! printf '%s\n' "${installed[@]}" | grep -qx -- "$pkg"; then
      why="$pkg (for $name) is not in tests/deps.sh's list"
    fi
  fi
  if [[ -z $why ]]; then
    echo "ok $n - $kind $name: $pkg, installed by tests/deps.sh"
  else
    echo "not ok $n - $kind $name: $why"
    fails=$((fails + 1))
  fi
done
((fails == 0))
