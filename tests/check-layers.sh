#!/bin/bash
# The supervisor's layers (docs/architecture.md), checked over the #include
# lines of the sources and the symbols of the built objects (nm). From the
# top:
#   5 main         supervisor/sbxd.c (and the admin CLI, supervisor/sbxctl*.c)
#   4 requests     supervisor/control*.c, control.h
#   3 model        supervisor/core/
#   2 kernel       supervisor/os/
#   1 data         supervisor/data/
#   0 common       common/, proto/ and the generated protobuf code
# The broker's headers (broker/) count as main: the admin CLI checks a
# token's tool sets with the broker's registry (broker/tools.h), and nothing
# below main may include them.
# A file may include and call its own layer and the layers below it, never
# one above; every file is in a layer; and no files call each other in a
# circle (the graph of which object uses which object's symbols has no
# cycle). TAP on stdout, offending lines as "# " comments; exit 1 if
# anything fails. The last two tests run the same checks on a small tree
# with a deliberate upward include and an upward call, which must fail.
#   tests/check-layers.sh [--objects DIR]      (default build/obj)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OBJ=build/obj
case ${1-} in
  --objects) OBJ=${2:?--objects needs a directory} ;;
  "") ;;
  *) echo "usage: $0 [--objects DIR]" >&2; exit 2 ;;
esac

LAYER_NAMES=(common data kernel model requests main)

# layer_of PATH (relative to the tree's top) -> number, or nothing if none
layer_of() {
  case $1 in
    common/*|proto/*|build/gen/*|gen/*) echo 0 ;;
    supervisor/data/*) echo 1 ;;
    supervisor/os/*) echo 2 ;;
    supervisor/core/*) echo 3 ;;
    supervisor/control.[ch]|supervisor/control-*.[ch]) echo 4 ;;
    supervisor/sbxd.c|supervisor/sbxctl.[ch]|supervisor/sbxctl-*.[ch]) echo 5 ;;
    broker/*.h) echo 5 ;;
  esac
}

# The sources the layers cover, below tree $1.
layer_sources() {
  (cd "$1" && find common proto supervisor -name '*.[ch]' 2>/dev/null | sort)
}

# resolve TREE FILE INCLUDE -> the included file (relative to TREE), or nothing
resolve() {
  local tree=$1 file=$2 inc=$3 dir c
  dir=$(dirname "$file")
  for c in "$dir/$inc" "supervisor/$inc" "common/$inc" "proto/$inc" "build/gen/$inc" "broker/$inc"; do
    if [[ -f $tree/$c ]]; then
      realpath -m --relative-to="$tree" "$tree/$c"
      return
    fi
  done
  [[ $inc == sbx.pb-c.h ]] && echo build/gen/sbx.pb-c.h
}

# check_in_layers TREE: prints the files in no layer
check_in_layers() {
  local f
  while read -r f; do
    [[ -n $(layer_of "$f") ]] || echo "$f is in no layer (put it in supervisor/core, os or data, or name it control-*)"
  done < <(layer_sources "$1")
}

# check_includes TREE: prints each include of a layer above the includer's, or of no known file
INCLUDES=0
check_includes() {
  local tree=$1 f inc to lf lt
  INCLUDES=0
  while read -r f; do
    lf=$(layer_of "$f")
    [[ -n $lf ]] || continue
    while read -r inc; do
      INCLUDES=$((INCLUDES + 1))
      to=$(resolve "$tree" "$f" "$inc")
      if [[ -z $to ]]; then
        echo "$f includes \"$inc\", which is no file of the tree"
        continue
      fi
      lt=$(layer_of "$to")
      if [[ -z $lt ]]; then
        echo "$f includes $to, which is in no layer"
      elif ((lt > lf)); then
        echo "$f (${LAYER_NAMES[lf]}) includes $to (${LAYER_NAMES[lt]}, a layer above)"
      fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$tree/$f")
  done < <(layer_sources "$tree")
}

# edges OBJDIR SOURCE... -> "user definer symbol" lines (sources, not objects),
# one per reference from one source's object to another's
edges() {
  local dir=$1 src o
  shift
  for src in "$@"; do
    o=$dir/${src#build/}
    o=${o%.c}.o
    nm --defined-only -g "$o" | awk -v s="$src" 'NF == 3 && $2 ~ /[TDBRVW]/ { print "D", s, $3 }'
    nm -u "$o" | awk -v s="$src" '{ print "U", s, $NF }'
  done | awk '
    $1 == "D" { def[$3] = $2; next }
    { use[++n] = $2 " " $3 }
    END { for (i = 1; i <= n; i++) { split(use[i], u, " "); if ((u[2] in def) && def[u[2]] != u[1]) print u[1], def[u[2]], u[2] } }'
}

# check_links EDGES: prints each reference to a layer above
check_links() {
  local user def sym lu ld
  while read -r user def sym; do
    lu=$(layer_of "$user") ld=$(layer_of "$def")
    [[ -n $lu && -n $ld ]] || continue
    ((ld > lu)) && echo "$user (${LAYER_NAMES[lu]}) calls $sym of $def (${LAYER_NAMES[ld]}, a layer above)"
  done <"$1"
}

# check_cycles EDGES: prints the files of each call circle
check_cycles() {
  awk '{ print $1, $2 }' "$1" | sort -u | tsort 2>&1 >/dev/null | sed -n 's/^tsort: //p'
}

N=0
FAILED=0
report() { # name, then the offending lines on stdin
  local out
  out=$(cat)
  N=$((N + 1))
  if [[ -z $out ]]; then
    echo "ok $N - $1"
  else
    echo "not ok $N - $1"
    printf '%s\n' "$out" | sed 's/^/# /'
    FAILED=$((FAILED + 1))
  fi
}

# The tree itself.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
report "every file of common/, proto/ and supervisor/ is in a layer" < <(check_in_layers "$ROOT")
check_includes "$ROOT" >"$TMP/includes"
report "#include lines point down ($INCLUDES includes)" <"$TMP/includes"
# The objects of the layered sources (the admin CLI, the worker and the broker are programs of their own).
mapfile -t SRCS < <(layer_sources "$ROOT" | grep '\.c$' | grep -v '^supervisor/sbxctl')
SRCS+=(build/gen/sbx.pb-c.c)
missing=()
for src in "${SRCS[@]}"; do
  o=$OBJ/${src#build/}
  [[ -f ${o%.c}.o ]] || missing+=("${o%.c}.o")
done
if ((${#missing[@]})); then
  report "object symbols point down" <<<"not built (make all first): ${missing[*]}"
else
  edges "$OBJ" "${SRCS[@]}" >"$TMP/edges"
  report "object symbols point down ($(wc -l <"$TMP/edges") references between objects, nm)" < <(check_links "$TMP/edges")
  report "no call circle among the files (tsort of the same references)" < <(check_cycles "$TMP/edges")
fi

# The checks must catch what they are for: a tree with an upward include,
# and objects with an upward call that also closes a circle.
FIX=$TMP/fixture
mkdir -p "$FIX/supervisor/os" "$FIX/supervisor/core" "$FIX/obj/supervisor/os" "$FIX/obj/supervisor/core"
printf '#pragma once\nint model_call(void);\n' >"$FIX/supervisor/core/model.h"
printf '#include "core/model.h"\nint kernel_call(void) { return model_call(); }\n' >"$FIX/supervisor/os/kernel.c"
printf 'int kernel_call(void);\nint model_call(void) { return 1; }\nint model_other(void) { return kernel_call(); }\n' \
  >"$FIX/supervisor/core/model.c"
out=$(check_includes "$FIX")
[[ $out == *"supervisor/os/kernel.c (kernel) includes supervisor/core/model.h (model, a layer above)"* ]] &&
  out= || out="no failure for supervisor/os/kernel.c including core/model.h: ${out:-nothing reported}"
report "the include check refuses an upward include (a deliberate one)" <<<"$out"
if cc -c "$FIX/supervisor/os/kernel.c" -iquote "$FIX/supervisor" -o "$FIX/obj/supervisor/os/kernel.o" &&
   cc -c "$FIX/supervisor/core/model.c" -o "$FIX/obj/supervisor/core/model.o"; then
  edges "$FIX/obj" supervisor/os/kernel.c supervisor/core/model.c >"$FIX/edges"
  links=$(check_links "$FIX/edges")
  cycles=$(check_cycles "$FIX/edges")
  out=
  [[ $links == *"supervisor/os/kernel.c (kernel) calls model_call of supervisor/core/model.c"* ]] ||
    out="no failure for an upward call: ${links:-nothing reported}"
  [[ $cycles == *supervisor/core/model.c* && $cycles == *supervisor/os/kernel.c* ]] ||
    out+="${out:+; }no call circle found: ${cycles:-nothing reported}"
else
  out="cannot compile the fixture"
fi
report "the link check refuses an upward call and a call circle (deliberate ones)" <<<"$out"

echo "1..$N"
echo "$((N - FAILED)) passed, $FAILED failed"
((FAILED == 0))
