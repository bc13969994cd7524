#!/bin/bash
# Run each cmocka unit test binary given on the command line (default: the
# binaries listed in tests/module.mk under build/bin/tests). Prints cmocka's
# own output; a binary that dies without a cmocka summary is reported as
#   [  FAILED  ] 1 test(s), <binary> exited with <status>
# so that tests/run-all.sh can count it. Exit 1 if any binary failed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1

bins=("$@")
if ((${#bins[@]} == 0)); then
  while read -r t; do
    bins+=("build/bin/tests/$t")
  done < <(sed -n 's|^UNIT_TESTS *+= *tests/unit/\(.*\)\.c *$|\1|p' tests/module.mk)
fi
if ((${#bins[@]} == 0)); then
  echo "run-unit: no unit tests listed" >&2
  exit 0
fi

failed=0
for b in "${bins[@]}"; do
  name=$(basename "$b")
  echo "=== unit: $name"
  if [[ ! -x $b ]]; then
    echo "[  FAILED  ] 1 test(s), $b is missing (not built)"
    failed=1
    continue
  fi
  out=$(timeout 300 "$b" 2>&1)
  rc=$?
  printf '%s\n' "$out"
  if ((rc != 0)); then
    failed=1
    if ! grep -q '^\[  FAILED  \] [0-9]* test' <<<"$out"; then
      echo "[  FAILED  ] 1 test(s), $name exited with status $rc"
    fi
  fi
done
exit $failed
