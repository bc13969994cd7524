#!/bin/bash
# make check-images (mk/images.mk): build the shipped image definitions
# (dist/images.d, sbx-images(7)) with a private sbxd, one after another, with
# sbxctl image build: every build must end "built", with the versions its
# programs printed inside the image listed. The python image is built by make
# check already (tests/integration/images.test.mjs).
# Prints, per image, its state, build time, size and versions, and writes them
# to build/images/results.tsv (docs/images.md quotes them). Needs root and the
# network (the host's apt sources; npm's registry for browser and webgamedev).
#
#   IMAGES        which, in order (default: node anaconda go media browser webgamedev twine)
#   IMAGE_CACHE   the .deb cache (default /var/cache/sbx-ci/images/archives)
#
# The last line is `N passed, N failed` (twine passes when it is refused with
# its reason, as shipped). After the browser image is built, the boxes set's
# picture checks (tests/images/box-pictures.mjs: sandbox_shot of a page, of the
# display :99, a recording) run against this sbxd, whose box_image is browser;
# each of their ok / not ok lines counts.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
IMAGES=${IMAGES:-node anaconda go media browser webgamedev twine}
CACHE=${IMAGE_CACHE:-/var/cache/sbx-ci/images/archives}
OUT=$ROOT/build/images
[[ $(id -u) -eq 0 ]] || { echo "check-images: needs root" >&2; exit 1; }
for b in sbxd sbxctl sbx-worker sbx-image-build; do
  [[ -x build/bin/$b ]] || { echo "check-images: build/bin/$b missing: make all" >&2; exit 1; }
done
mkdir -p "$CACHE" "$OUT"
D=$(mktemp -d /tmp/sbx-images-XXXXXX)
PID=
cleanup() {
  if [[ -n $PID ]]; then kill -TERM "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; fi
  # sessions sbxd kept in place at its stop (sbxd(8)): copied out and unmounted
  [[ -d $D/run/live ]] && build/bin/sbxd --config "$D/sbxd.conf" --state-dir "$D/state" --run-dir "$D/run" --save-kept \
    >>"$D/sbxd.log" 2>&1
  if grep -q " $D" /proc/self/mounts; then echo "check-images: still mounted under $D" >&2
  else rm -rf --one-file-system "$D"; fi
}
trap cleanup EXIT
mkdir -m 0755 "$D/images.d" "$D/state" "$D/run"
install -m 0644 dist/images.d/*.conf "$D/images.d/"
printf '[sbxd]\nimages_dir = %s\nimage_cache_dir = %s\nbox_image = browser\nbox_spares = 0\n' "$D/images.d" "$CACHE" >"$D/sbxd.conf"
build/bin/sbxd --config "$D/sbxd.conf" --state-dir "$D/state" --run-dir "$D/run" >"$D/sbxd.log" 2>&1 &
PID=$!
for _ in $(seq 100); do [[ -S $D/run/sbxd.sock ]] && break; sleep 0.1; done
C=(build/bin/sbxctl --socket "$D/run/sbxd.sock")
passed=0 failed=0
# sandbox_script `true` on image $1 over stdio JSON-RPC: exit_code 0 in structuredContent
script_true() {
  printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"check-images","version":"0"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_script\",\"arguments\":{\"command\":\"true\",\"image\":\"$1\",\"egress\":\"none\"}}}" |
    timeout 300 build/bin/sandbox-mcp --set script --socket "$D/run/sbxd.sock" >"$D/$1.script" 2>&1
  grep -q '"structuredContent":{"exit_code":0,' "$D/$1.script"
}
# the boxes set's pictures in a box of the browser image just built (box-pictures.mjs)
box_pictures() {
  local line last= bad=0
  while IFS= read -r line; do
    last=$line
    echo "check-images: box-pictures: $line"
    case $line in
      "ok "*) passed=$((passed + 1)) ;;
      "not ok "*) failed=$((failed + 1)) bad=1 ;;
    esac
  done < <(timeout 900 node tests/images/box-pictures.mjs "$D/run/sbxd.sock" "$D/box-pictures.mcp.log" 2>&1; echo "exit $?")
  # a failed check, or the script itself failed (counted once more if no check said so)
  [[ $last == "exit 0" ]] || { ((bad)) || failed=$((failed + 1)); echo "---- box-pictures: $last"; tail -n 30 "$D/box-pictures.mcp.log" "$D/sbxd.log"; }
}
printf 'image\tstate\tbuild_s\tsize_bytes\tversions\n' >"$OUT/results.tsv"
for img in $IMAGES; do
  t0=$(date +%s)
  "${C[@]}" image build "$img" >"$D/$img.out" 2>"$D/$img.err"
  rc=$? t=$(( $(date +%s) - t0 ))
  "${C[@]}" image show "$img" --json >"$D/$img.json" 2>/dev/null
  line=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))
print("\t".join([j["name"], j["state"], sys.argv[2], str(j["size_bytes"]),
  "; ".join("%s" % v for v in j["versions"].values()) or j.get("error", "")]))' "$D/$img.json" "$t")
  printf '%s\n' "$line" >>"$OUT/results.tsv"
  echo "check-images: $line"
  if [[ $img == twine ]]; then
    # shipped refused: the build must say why
    if ((rc != 0)) && grep -q "cannot be built: Tweego" "$D/$img.err"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  elif ((rc == 0)) && grep -q '"state": "built"' "$D/$img.json" && ! grep -q -E 'not found|No such file' "$D/$img.json"; then
    passed=$((passed + 1))
    # the image's smallest command through sandbox_script (sandbox-mcp --set script, sandbox-mcp(1))
    if script_true "$img"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "---- $img: sandbox_script true failed"; fi
    [[ $img == browser ]] && box_pictures
  else
    failed=$((failed + 1))
    echo "---- $img: $(cat "$D/$img.err")"
    tail -n 30 "$D/state/images/$img.log" 2>/dev/null
  fi
done
echo "check-images: results in $OUT/results.tsv"
echo "$passed passed, $failed failed"
((failed == 0))
