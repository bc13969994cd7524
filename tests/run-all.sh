#!/bin/bash
# Every test of sbx, in order: the build dependency lists (tests/check-deps.sh),
# the supervisor's layers (tests/check-layers.sh), unit tests (cmocka), worker tests
# (tests/worker/run.sh, when present), man page lint (mandoc), integration
# tests (node --test with the MCP SDK client), leftovers check, then the
# suites below that are present (operations: make check-ops). Each suite's
# output is shown and kept under build/test-results/; the last line is
#   N passed, N failed
# summed over all suites. Exit 1 if anything failed.
#
#   tests/run-all.sh           every suite (make check)
#   tests/run-all.sh --quick   build dependencies, layers, unit tests, man page lint and one integration
#                              file with the leftovers check (make check-quick;
#                              the file is $SBX_QUICK_INTEGRATION, default
#                              tests/integration/isolation.test.mjs)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
QUICK=no
case ${1-} in
  "") ;;
  --quick) QUICK=yes ;;
  *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac
INTEGRATION_FILES=()
[[ $QUICK == yes ]] && INTEGRATION_FILES=("${SBX_QUICK_INTEGRATION:-tests/integration/isolation.test.mjs}")
RES=${SBX_RESULTS_DIR:-$ROOT/build/test-results}
export SBX_RESULTS_DIR=$RES
rm -rf "$RES"
mkdir -p "$RES"

PASSED=0
FAILED=0
declare -a SUMMARY

add() { # suite passed failed
  PASSED=$((PASSED + $2))
  FAILED=$((FAILED + $3))
  SUMMARY+=("$(printf '%-12s %4d passed, %4d failed' "$1" "$2" "$3")")
}

# Count cmocka summaries ("[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)").
count_cmocka() { # file -> "passed failed"
  local p f
  p=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' "$1" | awk '{s+=$1} END {print s+0}')
  f=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test.*/\1/p' "$1" | awk '{s+=$1} END {print s+0}')
  echo "$p $f"
}

# Count top-level TAP results ("ok" / "not ok" at the start of a line).
count_tap() {
  local p f
  p=$(grep -c '^ok ' "$1")
  f=$(grep -c '^not ok ' "$1")
  echo "$p $f"
}

# node --test TAP: "# pass N" / "# fail N"
count_node() {
  local p f
  p=$(sed -n 's/^# pass \([0-9][0-9]*\)$/\1/p' "$1" | tail -1)
  f=$(sed -n 's/^# fail \([0-9][0-9]*\)$/\1/p' "$1" | tail -1)
  echo "${p:-0} ${f:-0}"
}

section() { printf '\n======== %s ========\n' "$1"; }

# wanted SUITE: run it? --quick runs only deps, layers, unit, man and integration.
wanted() {
  [[ $QUICK == no || $1 == deps || $1 == layers || $1 == unit || $1 == man || $1 == integration ]]
}

# tap_suite NAME TITLE COMMAND...: a command that prints TAP, run as one suite
tap_suite() {
  local name=$1 title=$2 rc p f
  shift 2
  section "$title"
  "$@" 2>&1 | tee "$RES/$name.log"
  rc=${PIPESTATUS[0]}
  read -r p f < <(count_tap "$RES/$name.log")
  ((rc != 0 && f == 0)) && f=1
  add "$name" "$p" "$f"
}

# ---- build dependencies: config.mk's modules against tests/deps.sh
wanted deps && tap_suite deps "build dependencies (tests/check-deps.sh)" tests/check-deps.sh

# ---- layers: includes and object symbols point down, no call circle
wanted layers && tap_suite layers "supervisor layers (tests/check-layers.sh)" tests/check-layers.sh

# ---- unit
section "unit tests (cmocka)"
tests/run-unit.sh 2>&1 | tee "$RES/unit.log"
urc=${PIPESTATUS[0]}
read -r p f < <(count_cmocka "$RES/unit.log")
((urc != 0 && f == 0)) && f=1
add unit "$p" "$f"

# ---- worker
if wanted worker && [[ -x tests/worker/run.sh || -f tests/worker/run.sh ]]; then
  section "worker tests"
  bash tests/worker/run.sh 2>&1 | tee "$RES/worker.log"
  wrc=${PIPESTATUS[0]}
  read -r p f < <(count_cmocka "$RES/worker.log")
  read -r tp tf < <(count_tap "$RES/worker.log")
  read -r np nf < <(count_node "$RES/worker.log")
  p=$((p + tp + np)) f=$((f + tf + nf))
  if ((p + f == 0)); then
    if ((wrc == 0)); then p=1; else f=1; fi
  elif ((wrc != 0 && f == 0)); then
    f=1
  fi
  add worker "$p" "$f"
fi

# ---- man pages
shopt -s nullglob
man=(man/*.[1-9])
shopt -u nullglob
if ((${#man[@]})); then
  section "man pages (mandoc -Tlint -Wwarning)"
  p=0 f=0
  for m in "${man[@]}"; do
    if out=$(mandoc -Tlint -Wwarning "$m" 2>&1) && [[ -z $out ]]; then
      echo "ok - $m"
      p=$((p + 1))
    else
      echo "not ok - $m"
      printf '%s\n' "$out" | sed 's/^/#   /'
      f=$((f + 1))
    fi
  done | tee "$RES/man.log"
  read -r p f < <(count_tap "$RES/man.log")
  add man "$p" "$f"
fi

# ---- integration (+ leftovers)
section "integration tests (node --test, MCP SDK client)"
tests/run-integration.sh "${INTEGRATION_FILES[@]}" 2>&1 | tee "$RES/integration.log"
irc=${PIPESTATUS[0]}
if [[ -s $RES/integration.tap ]]; then
  read -r p f < <(count_node "$RES/integration.tap")
  # a timeout appends a top-level "not ok"
  f=$((f + $(grep -c '^not ok - node --test timed out' "$RES/integration.tap")))
else
  p=0 f=1
fi
nrc=$(cat "$RES/node.rc" 2>/dev/null || echo "$irc")
((nrc != 0 && f == 0)) && f=1
add integration "$p" "$f"

if [[ -s $RES/leftovers.tap ]]; then
  read -r p f < <(count_tap "$RES/leftovers.tap")
  add leftovers "$p" "$f"
else
  add leftovers 0 1
fi

# ---- protocol robustness (tests/proto: a fake peer on sbxd.sock)
if wanted proto && [[ -f tests/proto/run.sh ]]; then
  section "protocol robustness (tests/proto)"
  bash tests/proto/run.sh 2>&1 | tee "$RES/proto.log"
  read -r p f < <(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2/p' "$RES/proto.log" | tail -1)
  add proto "${p:-0}" "${f:-1}"
fi

# ---- isolation battery (tests/security: escape attempts, abuse cases)
if wanted security && [[ -f tests/security/run.sh ]]; then
  section "isolation battery (tests/security)"
  bash tests/security/run.sh 2>&1 | tee "$RES/security.log"
  read -r p f < <(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2/p' "$RES/security.log" | tail -1)
  add security "${p:-0}" "${f:-1}"
fi

# ---- fuzz corpora replayed through the fuzz targets (mk/fuzz.mk)
if wanted fuzz && [[ -f mk/fuzz.mk ]]; then
  section "fuzz corpora replay"
  make --no-print-directory -s check-fuzz-corpus 2>&1 | tee "$RES/fuzz.log"
  read -r p f < <(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2/p' "$RES/fuzz.log" | tail -1)
  add fuzz "${p:-0}" "${f:-1}"
fi

# ---- operations (mk/install.mk: make check-ops): install/uninstall into a
# temporary DESTDIR, systemd-analyze verify, installed man pages, sbxd.conf
# checks, sbxctl against a private sbxd. Skipped checks are not counted.
if wanted ops && [[ -f tests/check-ops.sh ]]; then
  section "operations (make check-ops)"
  make --no-print-directory -s check-ops 2>&1 | tee "$RES/ops.log"
  orc=${PIPESTATUS[0]}
  read -r p f < <(count_tap "$RES/ops.log")
  s=$(grep -c '^ok .* # SKIP' "$RES/ops.log")
  p=$((p - s))
  ((orc != 0 && f == 0)) && f=1
  ((s > 0)) && echo "ops: $s skipped, see the '# SKIP' lines in $RES/ops.log"
  add ops "$p" "$f"
fi

# The failed tests by name, so a log that keeps only the end of this output
# (CI's) still says what failed: TAP "not ok" lines at any depth, cmocka's
# "[  FAILED  ] name" lines.
if ((FAILED > 0)); then
  section "failed tests"
  for f in "$RES"/*.log "$RES"/*.tap; do
    [[ -f $f ]] || continue
    grep -hE '^[[:space:]]*not ok |^\[  FAILED  \] [^0-9]' "$f" | sed "s|^[[:space:]]*|$(basename "$f"): |"
  done | head -n 40
fi

section "summary"
printf '%s\n' "${SUMMARY[@]}"
echo "logs: $RES"
echo "$PASSED passed, $FAILED failed"
((FAILED == 0 && PASSED > 0))
