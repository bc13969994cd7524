#!/bin/bash
# The sbx benchmark suite (make bench). Starts a private sbxd under
# /tmp/sbx-bench-XXXXXX, drives build/bin/sandbox-mcp with the C driver
# build/bench/mcpdrive (one MCP round trip per timed step), times the
# whole-process peers with hyperfine, then bench/report.py prints the table
# and writes bench/results/latest.json. Everything it starts is stopped by pid
# and its directory removed on exit.
#
# Environment: BENCH_SCALE (default 1; 0.1 for a quick run) scales counts and
# sizes; BENCH_BIN (build/bin), BENCH_DRIVE (build/bench/mcpdrive),
# BENCH_MINSESS (build/bench/minsess);
# BENCH_KEEP=1 keeps the temporary directory; BENCH_STALL_FILES sets the stall
# row's file count alone (BENCH_STALL_FILES_50K the pub_50k row's);
# BENCH_STALL_ATTACKS="pub pub_50k ren shuf read" (the default) the stall
# row's attacks that run; BENCH_ONLY="row row" runs only
# those rows (exec_live exec_auto churn transcript paging publish publish_many fileops
# layers memory lifecycle peers neighbour stall images egress script artifacts gateway boxes boxes_version
# stop). BENCH_IMAGE_CACHE: the .deb cache of
# the images row (default /var/cache/sbx-ci/images/archives).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export DEBIAN_FRONTEND=noninteractive
SCALE=${BENCH_SCALE:-1}
BIN=$(realpath "${BENCH_BIN:-build/bin}")
DRIVE=$(realpath "${BENCH_DRIVE:-build/bench/mcpdrive}")
MINSESS=$(realpath "${BENCH_MINSESS:-build/bench/minsess}")
DIGEST=$(realpath "${BENCH_DIGEST:-build/bench/digestbench}")
ZSCAN=$(realpath "${BENCH_ZSCAN:-build/bench/zscanbench}")
ONLY=${BENCH_ONLY:-}
T_START=$(date +%s)

log() { printf '[bench %4ds] %s\n' $(( $(date +%s) - T_START )) "$*" >&2; }
# scaled count: sc N MIN -> max(MIN, round(N*SCALE))
sc() { python3 -c "import sys; n,m,s=float(sys.argv[1]),int(sys.argv[2]),float(sys.argv[3]); print(max(m,int(round(n*s))))" "$1" "$2" "$SCALE"; }
want() { [[ -z $ONLY || " $ONLY " == *" $1 "* ]]; }

# ---- peers and tools (not part of make check) --------------------------------
need=()
for p in hyperfine bubblewrap crun runc firejail busybox-static time; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if ((${#need[@]})); then
  log "apt-get install ${need[*]}"
  apt-get update -qq </dev/null >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null >/dev/null
fi
# only the file ops rows compare against server-filesystem
if want fileops && [[ ! -d bench/node_modules/@modelcontextprotocol/server-filesystem ]]; then
  log "npm ci in bench/"
  (cd bench && npm ci --no-audit --no-fund --loglevel=error </dev/null >/dev/null)
fi
FS_SERVER=$ROOT/bench/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js

# ---- private sbxd ------------------------------------------------------------
D=$(mktemp -d /tmp/sbx-bench-XXXXXX)
OUT=$D/out
mkdir -p "$D/state" "$D/run" "$OUT" "$D/scripts"
SBXD_PID=
WWW_PID=
cleanup() {
  local rc=$?
  # the egress row's HTTP server, if a failed step left it
  [[ -n $WWW_PID ]] && kill "$WWW_PID" 2>/dev/null && { wait "$WWW_PID" 2>/dev/null || true; }
  if [[ -n $SBXD_PID ]] && kill -0 "$SBXD_PID" 2>/dev/null; then
    kill -TERM "$SBXD_PID"
    for _ in $(seq 200); do kill -0 "$SBXD_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$SBXD_PID" 2>/dev/null && { log "sbxd $SBXD_PID ignored SIGTERM: SIGKILL"; kill -KILL "$SBXD_PID"; }
    wait "$SBXD_PID" 2>/dev/null || true
  fi
  # sessions sbxd kept in place at its stop (sbxd(8)): copied out and unmounted
  [[ -d $D/run/live ]] && "$BIN/sbxd" --config "$D/sbxd.conf" --state-dir "$D/state" --run-dir "$D/run" \
    --log-level warning --save-kept >>"$D/sbxd.log" 2>&1
  if grep -q " $D" /proc/self/mounts; then
    log "still mounted under $D:"; grep " $D" /proc/self/mounts >&2
    rc=1
  elif [[ -z ${BENCH_KEEP:-} ]]; then
    rm -rf --one-file-system "$D"
  else
    log "kept $D"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A private copy of the four programs: others may rebuild build/bin during the run
# (sbxd finds sbx-worker next to itself).
mkdir -p "$D/bin"
cp "$BIN/sbxd" "$BIN/sbx-worker" "$BIN/sandbox-mcp" "$BIN/sbxctl" "$BIN/sbx-image-build" "$BIN/sbx-egress" "$D/bin/"
cp "$BIN/sbx-gateway" "$D/bin/"
# the gateway row's sbx-gateway runs as its own uid (gateway_user below) and reaches sbxd.sock
chmod 0755 "$D" "$D/run"
BIN=$D/bin
# The transcript row keeps four 1 GiB transcripts in one sandbox: budgets that hold them all,
# so that no row's timing includes evicting another's (core/transcripts.h). The lifecycle
# row's templates: one with warm claims, one without. session_disk_bytes: the stall rows'
# 1 GiB file in a live session fits its tmpfs. The images row builds the shipped
# python definition (sbx-images(7)).
mkdir -m 0755 "$D/images.d"
install -m 0644 dist/images.d/python.conf "$D/images.d/python.conf"
IMAGE_CACHE=${BENCH_IMAGE_CACHE:-/var/cache/sbx-ci/images/archives}
mkdir -p "$IMAGE_CACHE"
# The egress row's sandbox reaches a server on the host's loopback: egress_allow_private;
# sbx-egress runs as nobody where the sbx-egress user is not installed.
EGRESS_USER=$(getent passwd sbx-egress >/dev/null && echo sbx-egress || echo nobody)
printf '[sbxd]\negress_user = %s\negress_allow_private = yes\ngateway_user = 65532\nsocket_mode = 0666\ntranscript_cap_bytes = 2G\nsandbox_transcripts_max_bytes = 16G\nowner_transcripts_max_bytes = 16G\ntranscripts_max_bytes = 16G\nsession_disk_bytes = 3G\nclaims_per_user = 64\nimages_dir = %s\nimage_cache_dir = %s\n[template bench-warm]\nwarm = 4\n[template bench-cold]\nwarm = 0\n' \
  "$EGRESS_USER" "$D/images.d" "$IMAGE_CACHE" >"$D/sbxd.conf"
# The boxes rows: boxes on the default image, two spares.
printf '[sbxd]\nbox_image = default\nbox_spares = 2\n' >>"$D/sbxd.conf"
# The persisted-artifact rows (issue 19): a 1 GiB artifact (compressed at rest) fits.
printf '[sbxd]\nruntime_max_artifact_bytes = 2G\nruntime_artifacts_max_bytes = 4G\n' >>"$D/sbxd.conf"
SOCK=$D/run/sbxd.sock
start_sbxd() { # (again, for the stop row)
  "$BIN/sbxd" --config "$D/sbxd.conf" --state-dir "$D/state" --run-dir "$D/run" --log-level notice \
    >>"$D/sbxd.log" 2>&1 &
  SBXD_PID=$!
  for _ in $(seq 150); do [[ -S $SOCK ]] && break; kill -0 $SBXD_PID || { cat "$D/sbxd.log" >&2; exit 1; }; sleep 0.1; done
  [[ -S $SOCK ]] || { log "sbxd did not start"; cat "$D/sbxd.log" >&2; exit 1; }
}
start_sbxd
MCP=("$BIN/sandbox-mcp" --set runtime,sessions --socket "$SOCK")
log "sbxd pid $SBXD_PID, scale $SCALE, dir $D"

sandbox() { # NAME SRC
  "$BIN/sbxctl" --socket "$SOCK" sandbox create "$1" --source "$2" >/dev/null
}
drive() { # NAME [server argv...]: runs $D/scripts/NAME.json, output in $OUT/NAME.json
  local name=$1; shift
  if (($#)); then "$DRIVE" "$D/scripts/$name.json" -- "$@" >"$OUT/$name.json"
  else "$DRIVE" "$D/scripts/$name.json" -- "${MCP[@]}" >"$OUT/$name.json"; fi
}
# Builds before c36f79c answered create_workspace_session with isError ("sbxd sent
# an invalid reply: state") while the worker was starting, although the session
# existed: create it, wait, then take the newest id from list_workspace_sessions
# (works with either).
new_session_steps() { # SANDBOX VAR
  printf '{"tool":"create_workspace_session","args":{"sandbox_id":"%s"},"allow_error":true},{"sleep_ms":200},
  {"tool":"list_workspace_sessions","args":{"sandbox_id":"%s"},"save":{"%s":"sessions.-1.workspace_session_id"}}' "$1" "$1" "$2"
}

# a tiny fixture used by several rows
mkdir -p "$D/src/tiny/src"
printf '# tiny\n' >"$D/src/tiny/README.md"
printf 'x\n' >"$D/src/tiny/f"
printf 'echo hi\n' >"$D/src/tiny/src/hello.sh"
cp bench/lines.pl "$D/src/tiny/"
sandbox tiny "$D/src/tiny"

# ---- 1. exec in a live session vs fork+exec+wait of /bin/true -----------------
if want exec_live; then
  N=$(sc 300 30)
  cat >"$D/scripts/exec_live.json" <<EOF
{"setup":[$(new_session_steps tiny ws)], "warmup":10, "n":$N,
 "loop":[{"tag":"sbx","tool":"exec_command","args":{"sandbox_id":"tiny","cmd":"true","workspace_session_id":"\${ws}"},"expect":"ok"},
         {"tag":"base","exec":["/bin/true"]}],
 "teardown":[{"tool":"finalize_workspace_session","args":{"sandbox_id":"tiny","workspace_session_id":"\${ws}","action":"discard"}}]}
EOF
  log "exec_live: $N pairs"; drive exec_live
fi

# ---- 2. exec in an automatic session vs bwrap ------------------------------------
if want exec_auto; then
  N=$(sc 150 20)
  cat >"$D/scripts/exec_auto.json" <<EOF
{"warmup":5, "n":$N,
 "loop":[{"tag":"sbx","tool":"exec_command","args":{"sandbox_id":"tiny","cmd":"true"},"expect":"ok"},
         {"tag":"base","exec":["/usr/bin/bwrap","--unshare-all","--die-with-parent","--ro-bind","/","/","true"]}]}
EOF
  log "exec_auto: $N pairs"; drive exec_auto
fi

# ---- 3. session churn: automatic sessions per second ------------------------------
if want churn; then
  N=$(sc 300 30)
  cat >"$D/scripts/churn.json" <<EOF
{"warmup":5, "n":$N, "loop":[{"tag":"sbx","tool":"exec_command","args":{"sandbox_id":"tiny","cmd":"true"},"expect":"ok"}]}
EOF
  log "churn: $N serial, then 2 clients x $N"; drive churn
  cp "$D/scripts/churn.json" "$D/scripts/churn2a.json"; cp "$D/scripts/churn.json" "$D/scripts/churn2b.json"
  drive churn2a & p1=$!
  drive churn2b & p2=$!
  wait $p1; wait $p2
  # The physical limit on this machine now: bench/minsess.c, sessions in-process.
  log "churn: physical limit, $N sessions of bench/minsess"
  mkdir -p "$D/minsess"
  "$MINSESS" "$N" "$D/minsess" >"$OUT/minsess.json"
fi

# ---- 4. transcript throughput -------------------------------------------------------
if want transcript; then
  BYTES=$(sc 1073741824 4194304)
  N=$(sc 3 1)
  (( N > 3 )) && N=3
  # The producer writes 1 MiB at a time from one process; `yes | head` (two
  # processes, three copies in 8 KiB pieces) is kept as a context row.
  GEN="perl lines.pl $BYTES"
  YES="yes 'the quick brown fox jumps over the lazy dog, a benchmark line of about one hundred bytes.....' | head -c $BYTES"
  cat >"$D/scripts/transcript.json" <<EOF
{"vars":{"bytes":$BYTES}, "warmup":0, "n":$N,
 "loop":[{"exec":["/bin/sync"]},
         {"tag":"sbx","tool":"exec_command","args":{"sandbox_id":"tiny","cmd":"$GEN","yield_time_ms":30000},"until_done":true,"expect":"ok"},
         {"exec":["/bin/sync"]},
         {"tag":"base","exec":["/bin/sh","-c","perl $ROOT/bench/lines.pl $BYTES | cat > $D/transcript-base.out"]}]}
EOF
  cat >"$D/scripts/transcript_yes.json" <<EOF
{"vars":{"bytes":$BYTES}, "warmup":0, "n":1,
 "loop":[{"exec":["/bin/sync"]},
         {"tag":"sbx","tool":"exec_command","args":{"sandbox_id":"tiny","cmd":"$YES","yield_time_ms":30000},"until_done":true,"expect":"ok"},
         {"exec":["/bin/sync"]},
         {"tag":"base","exec":["/bin/sh","-c","$YES | cat > $D/transcript-base.out"]}]}
EOF
  log "transcript: $N x $BYTES bytes, then 1 with yes | head"; drive transcript; drive transcript_yes
  rm -f "$D/transcript-base.out"
  # the GiB transcripts are not needed any more
fi

# ---- 5. paging --------------------------------------------------------------------
# `seq -w` gives lines of one width, so both windows carry the same bytes and the
# ratio measures finding the offset; plain `seq` (lines grow from 2 to 9 bytes, so
# the window at 0.9N carries twice the text of the one at 0) is kept as context.
if want paging; then
  LINES=$(sc 10000000 100000)
  OFF=$(( LINES * 9 / 10 ))
  N=$(sc 300 30)
  cat >"$D/scripts/paging.json" <<EOF
{"setup":[{"tool":"exec_command","args":{"sandbox_id":"tiny","cmd":"seq -w 1 $LINES","yield_time_ms":30000},"until_done":true,"expect":"ok","save":{"cs":"command_session_id"}},
          {"tool":"exec_command","args":{"sandbox_id":"tiny","cmd":"seq 1 $LINES","yield_time_ms":30000},"until_done":true,"expect":"ok","save":{"cs2":"command_session_id"}}],
 "warmup":10, "n":$N,
 "loop":[{"tag":"sbx","tool":"read_command_lines","args":{"sandbox_id":"tiny","command_session_id":"\${cs}","start_offset":$OFF,"limit":1000}},
         {"tag":"base","tool":"read_command_lines","args":{"sandbox_id":"tiny","command_session_id":"\${cs}","start_offset":0,"limit":1000}},
         {"tag":"seq_far","tool":"read_command_lines","args":{"sandbox_id":"tiny","command_session_id":"\${cs2}","start_offset":$OFF,"limit":1000}},
         {"tag":"seq_0","tool":"read_command_lines","args":{"sandbox_id":"tiny","command_session_id":"\${cs2}","start_offset":0,"limit":1000}}]}
EOF
  log "paging: $LINES lines, offset $OFF, $N rounds"; drive paging
fi

# ---- 5b. the artifacts set (issue 19): digest, rare-term query, cursor page ----------
# The digest of a 50 MB go test -v log (and, as context, of 50 MB no parser knows: every
# parser looks, then the generic one reads it all), in-process (bench/digestbench.c);
# runtime_query_output for a term on the last line of a 1 GiB transcript (what it scans,
# per second); the next page of a cursor at 0.9N against one at 0 of an N-line transcript.
if want artifacts; then
  log "artifacts: digest of 50 MB, twice"
  "$DIGEST" $(sc 52428800 5242880) 5 >"$OUT/artifacts_digest.json"
  "$DIGEST" $(sc 52428800 5242880) 5 generic >"$OUT/artifacts_digest_generic.json"
  log "artifacts: scan of zstd frames against the plain file, in-process"
  "$ZSCAN" $(sc 1073741824 16777216) $(sc 5 3) >"$OUT/artifacts_zscan.json"
  QBYTES=$(sc 1073741824 4194304)
  QLINES=$(sc 10000000 100000)
  N=$(sc 5 3)
  NP=$(sc 100 20)
  # query_scripts SUFFIX TOOL ARGS STREAM FIELD STATUS: the rare-term and cursor-page
  # scripts over what TOOL (exec_command or runtime_execute) makes of a command: its
  # handle is FIELD of the result, which has STATUS.
  query_scripts() {
    cat >"$D/scripts/artifacts_query$1.json" <<EOF
{"vars":{"bytes":$QBYTES},
 "setup":[{"tool":"$2","args":{"sandbox_id":"tiny",$3"perl lines.pl $QBYTES; echo rare-needle-q19"},"until_done":true,"expect":"$6","save":{"h":"$5"}}],
 "warmup":1, "n":$N,
 "loop":[{"tag":"sbx","tool":"runtime_query_output","args":{"artifactHandle":"\${h}","queryTerms":["rare-needle-q19"],"contextLines":0}}]}
EOF
    cat >"$D/scripts/artifacts_page$1.json" <<EOF
{"setup":[{"tool":"$2","args":{"sandbox_id":"tiny",$3"seq -w 1 $QLINES"},"until_done":true,"expect":"$6","save":{"h":"$5"}}],
 "warmup":5, "n":$NP,
 "loop":[{"tag":"sbx","tool":"runtime_query_output","args":{"artifactHandle":"\${h}","queryTerms":["5"],"contextLines":0,"cursor":{"stream":"$4","afterLine":$(( QLINES * 9 / 10 ))}}},
         {"tag":"base","tool":"runtime_query_output","args":{"artifactHandle":"\${h}","queryTerms":["5"],"contextLines":0,"cursor":{"stream":"$4","afterLine":0}}}]}
EOF
  }
  query_scripts "" exec_command '"yield_time_ms":30000,"cmd":' both command_session_id ok
  # The same two on persisted artifacts (runtime_execute, compressed at rest in
  # frames, data/zframes.h): the scan decompresses every frame, a page only its own.
  query_scripts _persisted runtime_execute '"runtime":"shell","outputMode":"minimal","code":' stdout artifactHandle success
  log "artifacts: query of $QBYTES bytes, $N rounds; cursor pages of $QLINES lines, $NP rounds; the same persisted"
  for s in artifacts_query artifacts_page artifacts_query_persisted artifacts_page_persisted; do
    drive $s "$BIN/sandbox-mcp" --set runtime,artifacts --socket "$SOCK"
  done
fi

# ---- 6. publish: one changed file, 50,000-file vs 100-file workspace ----------------
if want publish; then
  BIG=$(sc 50000 500)
  N=$(sc 60 10)
  python3 - "$D/src/pubbig" "$BIG" "$D/src/pubsmall" 100 <<'EOF'
import os, sys
for root, n in ((sys.argv[1], int(sys.argv[2])), (sys.argv[3], int(sys.argv[4]))):
    for i in range(n):
        d = os.path.join(root, "src", "d%03d" % (i // 500))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "m%05d.c" % i), "w") as f:
            f.write("/* module %d */\nint f%d(void) { return %d; }\n" % (i, i, i))
    with open(os.path.join(root, "f"), "w") as f:
        f.write("x\n")
EOF
  log "publish: importing $BIG-file and 100-file sandboxes"
  t0=$(date +%s.%N); sandbox pubbig "$D/src/pubbig"; t1=$(date +%s.%N)
  sandbox pubsmall "$D/src/pubsmall"
  echo "{\"import_big_s\": $(python3 -c "print($t1-$t0)"), \"files\": $BIG}" >"$OUT/publish_import.json"
  cat >"$D/scripts/publish.json" <<EOF
{"warmup":3, "n":$N,
 "loop":[{"tag":"exec_big","tool":"exec_command","args":{"sandbox_id":"pubbig","cmd":"echo x >> f"},"expect":"ok"},
         {"tag":"exec_small","tool":"exec_command","args":{"sandbox_id":"pubsmall","cmd":"echo x >> f"},"expect":"ok"},
         {"tag":"write_big","tool":"file_write","args":{"sandbox_id":"pubbig","path":"f","content":"x \${i}\n"}},
         {"tag":"write_small","tool":"file_write","args":{"sandbox_id":"pubsmall","path":"f","content":"x \${i}\n"}}]}
EOF
  log "publish: $N rounds"; drive publish
fi

# ---- 6b. publish_many: one command writes 20,000 small files, published as one layer
if want publish_many; then
  NF=$(sc 20000 1000)
  N=$(sc 5 3)
  sandbox pubmany "$D/src/tiny"
  AWK="awk 'BEGIN{for(i=0;i<$NF;i++){f=\\\"f\\\" i; print i > f; close(f)}}'"
  cat >"$D/scripts/publish_many.json" <<EOF
{"warmup":1, "n":$N,
 "loop":[{"tag":"exec_many","tool":"exec_command","args":{"sandbox_id":"pubmany","cmd":"mkdir m\${i} && cd m\${i} && $AWK"},"expect":"ok"},
         {"tag":"exec_many_tmp","tool":"exec_command","args":{"sandbox_id":"pubmany","cmd":"rm -rf /tmp/m && mkdir /tmp/m && cd /tmp/m && $AWK"},"expect":"ok"}]}
EOF
  echo "{\"files\": $NF}" >"$OUT/publish_many_files.json"
  log "publish_many: $N rounds of $NF files"; drive publish_many
fi

# ---- 7. file ops vs @modelcontextprotocol/server-filesystem -----------------------------
if want fileops; then
  N=$(sc 100 20)
  mkdir -p "$D/src/files" "$D/fsroot"
  python3 - "$D/src/files" <<'EOF'
import os, sys
root = sys.argv[1]
with open(os.path.join(root, "big.txt"), "w") as f:          # 10 MB, 40-byte lines
    for i in range(10 * 1024 * 1024 // 40):
        f.write("%08d the quick brown fox jumps ove\n" % i)
with open(os.path.join(root, "edit.txt"), "w") as f:         # 1 MB, 40-byte lines
    for i in range(1024 * 1024 // 40):
        f.write("|row %d| lorem ipsum dolor sit amet\n" % i)
EOF
  cp "$D/src/files/big.txt" "$D/src/files/edit.txt" "$D/fsroot/"
  sandbox files "$D/src/files"
  MID=$(( 10 * 1024 * 1024 / 40 / 2 ))
  # Reads and edits in separate loops: a publication is followed by the remount
  # of the sandbox's snapshot view, which a read right after an edit waits
  # for; that case is a context row (read_after_edit).
  cat >"$D/scripts/fileops.json" <<EOF
{"warmup":3, "n":$N,
 "loop":[{"tag":"read","tool":"file_read","args":{"sandbox_id":"files","path":"big.txt","offset":$MID,"limit":2000}},
         {"tag":"read_head","tool":"file_read","args":{"sandbox_id":"files","path":"big.txt","offset":1,"limit":2000}}]}
EOF
  cat >"$D/scripts/fileops_edit.json" <<EOF
{"warmup":3, "n":$N,
 "loop":[{"tag":"edit","tool":"file_edit","args":{"sandbox_id":"files","path":"edit.txt","edits":[{"old_string":"|row \${i}|","new_string":"|row \${i}|e"}]}},
         {"tag":"read_after_edit","tool":"file_read","args":{"sandbox_id":"files","path":"big.txt","offset":$MID,"limit":2000}}]}
EOF
  cat >"$D/scripts/fileops_fs.json" <<EOF
{"warmup":3, "n":$N,
 "loop":[{"tag":"read","tool":"read_text_file","args":{"path":"$D/fsroot/big.txt","head":2000}}]}
EOF
  cat >"$D/scripts/fileops_fs_edit.json" <<EOF
{"warmup":3, "n":$N,
 "loop":[{"tag":"edit","tool":"edit_file","args":{"path":"$D/fsroot/edit.txt","edits":[{"oldText":"|row \${i}|","newText":"|row \${i}|e"}]}},
         {"tag":"read_after_edit","tool":"read_text_file","args":{"path":"$D/fsroot/big.txt","head":2000}}]}
EOF
  log "fileops: $N rounds each of reads and edits, sbx and server-filesystem"
  drive fileops
  drive fileops_edit
  drive fileops_fs node "$FS_SERVER" "$D/fsroot" 2>>"$D/fs-server.log"
  drive fileops_fs_edit node "$FS_SERVER" "$D/fsroot" 2>>"$D/fs-server.log"
fi

# ---- 8. layers: after 10,000 single-file publications vs after 1 ---------------------
if want layers; then
  NL=$(sc 10000 100)
  N=$(sc 100 20)
  sandbox lay1 "$D/src/tiny"
  sandbox layn "$D/src/tiny"
  cat >"$D/scripts/layers_fill.json" <<EOF
{"setup":[{"tool":"file_write","args":{"sandbox_id":"lay1","path":"p0.txt","content":"0\n"}}],
 "warmup":0, "n":$NL, "max_seconds":300,
 "loop":[{"tag":"publish","tool":"file_write","args":{"sandbox_id":"layn","path":"p/\${i}.txt","content":"\${i}\n"}}]}
EOF
  log "layers: $NL publications"; drive layers_fill
  # reads and execs in separate loops: a read right after an automatic session
  # would pay for that session's asynchronous teardown (netns, mounts)
  cat >"$D/scripts/layers.json" <<EOF
{"warmup":5, "n":$N,
 "loop":[{"tag":"read_n","tool":"file_read","args":{"sandbox_id":"layn","path":"README.md"}},
         {"tag":"read_1","tool":"file_read","args":{"sandbox_id":"lay1","path":"README.md"}}]}
EOF
  cat >"$D/scripts/layers_exec.json" <<EOF
{"warmup":5, "n":$N,
 "loop":[{"tag":"exec_n","tool":"exec_command","args":{"sandbox_id":"layn","cmd":"true"},"expect":"ok"},
         {"tag":"exec_1","tool":"exec_command","args":{"sandbox_id":"lay1","cmd":"true"},"expect":"ok"}]}
EOF
  log "layers: $N rounds"; drive layers; drive layers_exec
fi

# ---- 9. memory per idle live session --------------------------------------------------
pss_sum() { # sum of Pss and Rss (kB) over sbxd, its spawner and the spawner's sbx-worker children
  local spawner workers
  spawner=$(pgrep -P "$SBXD_PID" -x sbxd-spawner || true)
  workers=$([[ -n $spawner ]] && pgrep -P "$spawner" -d ' ' -f sbx-worker || true)
  python3 - "$SBXD_PID $spawner" "$workers" <<'EOF'
import sys
pss = rss = n = 0
for group, pids in enumerate(sys.argv[1:]):
    for p in pids.split():
        try:
            for l in open("/proc/%s/smaps_rollup" % p):
                k, v = l.split(":", 1)
                if k == "Pss": pss += int(v.split()[0])
                if k == "Rss": rss += int(v.split()[0])
            n += group  # count the workers only
        except OSError:
            pass
print(pss, rss, n)
EOF
}
if want memory; then
  NS=$(sc 500 16)
  NSB=$(( (NS + 59) / 60 ))          # at most 64 live sessions per sandbox
  PER=$(( (NS + NSB - 1) / NSB ))
  steps=()
  for ((k = 0; k < NSB; k++)); do
    sandbox "mem$k" "$D/src/tiny"
    steps+=("{\"tool\":\"create_workspace_session\",\"args\":{\"sandbox_id\":\"mem$k\"},\"allow_error\":true}")
  done
  IFS=,; cat >"$D/scripts/memory.json" <<EOF
{"warmup":0, "n":$PER, "loop":[${steps[*]}]}
EOF
  unset IFS
  sleep 1
  read -r pss0 rss0 w0 < <(pss_sum)
  log "memory: $((PER * NSB)) sessions in $NSB sandboxes"
  drive memory
  for _ in $(seq 100); do
    read -r pss1 rss1 w1 < <(pss_sum)
    (( w1 - w0 >= PER * NSB )) && break
    sleep 0.2
  done
  sleep 2
  read -r pss1 rss1 w1 < <(pss_sum)
  echo "{\"sessions\": $((PER * NSB)), \"workers_before\": $w0, \"workers_after\": $w1, \"pss_kb_before\": $pss0, \"pss_kb_after\": $pss1, \"rss_kb_before\": $rss0, \"rss_kb_after\": $rss1}" >"$OUT/memory_rss.json"
  log "memory: workers $w0 -> $w1, Pss $pss0 -> $pss1 kB"
  # Its 500 live sessions would hold the live-session cap (512) for the rows after it.
  for ((k = 0; k < NSB; k++)); do "$BIN/sbxctl" --socket "$SOCK" sandbox delete "mem$k" >/dev/null; done
fi

# ---- 10. the lifecycle set: create_sandbox warm and cold, execute_command, 64 MiB files
if want lifecycle; then
  LIFE=("$BIN/sandbox-mcp" --set lifecycle --socket "$SOCK")
  N=$(sc 40 8)
  # the warm pool refills in sbxd's tick after each take: 200 ms between creations leave it full
  cat >"$D/scripts/lifecycle_create.json" <<EOF
{"warmup":2, "n":$N,
 "loop":[{"tag":"warm","tool":"create_sandbox","args":{"warmpool":"bench-warm"},"save":{"w":"sandbox_claim_name"}},
         {"tag":"delete","tool":"delete_sandbox","args":{"sandbox_claim_name":"\${w}"}},
         {"tag":"cold","tool":"create_sandbox","args":{"warmpool":"bench-cold"},"save":{"c":"sandbox_claim_name"}},
         {"tool":"delete_sandbox","args":{"sandbox_claim_name":"\${c}"}},
         {"sleep_ms":200}]}
EOF
  log "lifecycle: $N warm and cold creations"; drive lifecycle_create "${LIFE[@]}"
  N=$(sc 300 30)
  cat >"$D/scripts/lifecycle_exec.json" <<EOF
{"setup":[{"tool":"create_sandbox","args":{"warmpool":"bench-warm"},"save":{"c":"sandbox_claim_name"}}],
 "warmup":10, "n":$N,
 "loop":[{"tag":"sbx","tool":"execute_command","args":{"sandbox_claim_name":"\${c}","command":"true"}},
         {"tag":"base","exec":["/bin/true"]}],
 "teardown":[{"tool":"delete_sandbox","args":{"sandbox_claim_name":"\${c}"}}]}
EOF
  log "lifecycle: $N execute_command true / fork+exec pairs"; drive lifecycle_exec "${LIFE[@]}"
  N=$(sc 3 2)
  python3 - "$D/scripts/lifecycle_files.json" "$N" <<'EOF'
import base64, json, os, sys
content = base64.b64encode(os.urandom(64 << 20)).decode()
claim = {"sandbox_claim_name": "${c}"}
json.dump({"setup": [{"tool": "create_sandbox", "args": {"warmpool": "bench-warm"}, "save": {"c": "sandbox_claim_name"}}],
           "warmup": 0, "n": int(sys.argv[2]),
           "loop": [{"tag": "upload", "tool": "upload_file",
                     "args": dict(claim, path="/tmp/f", content=content, binary=True)},
                    {"tag": "download", "tool": "download_file", "args": dict(claim, path="/tmp/f", binary=True)}],
           "teardown": [{"tool": "delete_sandbox", "args": claim}]}, open(sys.argv[1], "w"))
EOF
  log "lifecycle: $N uploads and downloads of 64 MiB"; drive lifecycle_files "${LIFE[@]}"
  rm -f "$D/scripts/lifecycle_files.json"
fi

# ---- 11. peers: whole-process true under other sandboxes --------------------------
if want peers; then
  R=$(sc 100 20)
  B=$D/oci
  mkdir -p "$B/rootfs/bin"
  cp /bin/busybox "$B/rootfs/bin/busybox"
  for a in sh true; do ln -sf busybox "$B/rootfs/bin/$a"; done
  (cd "$B" && crun spec >/dev/null 2>&1 || runc spec)
  python3 - "$B/config.json" <<'EOF'
import json, sys
p = sys.argv[1]; c = json.load(open(p))
c["process"]["terminal"] = False
c["process"]["args"] = ["/bin/true"]
c["root"]["readonly"] = True
json.dump(c, open(p, "w"), indent=1)
EOF
  hf() { # NAME COMMAND...
    local name=$1; shift
    if "$@" >/dev/null 2>"$OUT/peer_$name.err"; then
      hyperfine -N --warmup 5 --runs "$R" --export-json "$OUT/peer_$name.json" "$*" >/dev/null 2>&1 ||
        echo "{\"refused\": \"hyperfine failed\"}" >"$OUT/peer_$name.json"
    else
      python3 -c 'import json,sys; print(json.dumps({"refused": open(sys.argv[1]).read().strip().splitlines()[-1:] }))' \
        "$OUT/peer_$name.err" >"$OUT/peer_$name.json"
    fi
  }
  log "peers: hyperfine, $R runs each"
  hf true /bin/true
  hf bwrap bwrap --unshare-all --die-with-parent --ro-bind / / true
  hf crun crun --root "$D/crun-state" run -b "$B" sbx-bench-crun
  hf runc runc --root "$D/runc-state" run -b "$B" sbx-bench-runc
  fj_mounts=$(grep -c ' /run/firejail' /proc/self/mounts || true)
  hf firejail firejail --quiet --noprofile true
  # firejail leaves its /run/firejail bind mounts behind: undo them if it made them now
  if [[ $fj_mounts == 0 ]]; then
    for m in $(awk '$2 ~ "^/run/firejail" {print $2}' /proc/self/mounts | tac); do umount "$m" || true; done
  fi
  command -v nsjail >/dev/null && hf nsjail nsjail -Mo -q --chroot / -- /bin/true
  # nothing of the OCI runtimes may stay behind
  for c in crun runc; do
    "$c" --root "$D/$c-state" delete -f "sbx-bench-$c" >/dev/null 2>&1 || true
  done
fi

# ---- 12. neighbour: a CPU job beside 60 spinning commands in another sandbox ----------
# The job alone in its sandbox, then again while another sandbox runs 60 busy
# loops, each an automatic session of its own (each had its own cgroup of
# weight 100 before sandboxes had theirs; the sandbox's weight now covers
# them all). Ratio: contended / alone, per job.
if want neighbour; then
  N=$(sc 3 2)
  SPIN=$(sc 60 8)
  WORK=$(sc 25000000 2500000)
  sandbox spin "$D/src/tiny"
  sandbox neigh "$D/src/tiny"
  python3 - "$D/scripts" "$N" "$SPIN" "$WORK" <<'EOF'
import json, sys
out, n, spin, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
job = {"tool": "exec_command", "args": {"sandbox_id": "neigh", "yield_time_ms": 30000, "timeout_ms": 600000,
                                        "cmd": "perl -e '$x = 0; $x += $_ for 1 .. %d'" % work},
       "until_done": True, "expect": "ok"}
json.dump({"warmup": 1, "n": n, "loop": [dict(job, tag="alone")]}, open(out + "/neighbour_alone.json", "w"))
start = [{"tool": "exec_command", "save": {"c%d" % k: "command_session_id"},
          "args": {"sandbox_id": "spin", "cmd": "while :; do :; done", "yield_time_ms": 100, "timeout_ms": 600000}}
         for k in range(spin)]
stop = [{"tool": "cancel_command", "args": {"sandbox_id": "spin", "command_session_id": "${c%d}" % k},
         "allow_error": True} for k in range(spin)]
json.dump({"setup": start + [{"sleep_ms": 2000}], "warmup": 0, "n": n, "loop": [dict(job, tag="contended")],
           "teardown": stop, "vars": {"spinners": spin, "work": work}}, open(out + "/neighbour.json", "w"))
EOF
  log "neighbour: the CPU job $N times alone, then $N times beside $SPIN spinning commands"
  drive neighbour_alone
  drive neighbour
fi

# ---- 15. egress: proxy throughput of a download from a local server (issue 18) -----
# A file of MB MiB served by python's http.server on 127.0.0.2 (no_proxy names
# 127.0.0.1 only), fetched with curl inside a sandbox of policy open through
# sbx-egress, against the same curl on the host without the proxy, interleaved.
if want egress; then
  MB=$(sc 100 10)
  N=$(sc 5 2)
  mkdir -p "$D/www"
  head -c $(( MB << 20 )) /dev/urandom >"$D/www/blob"
  EPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.2", 0)); print(s.getsockname()[1])')
  python3 -m http.server --bind 127.0.0.2 --directory "$D/www" "$EPORT" >/dev/null 2>&1 &
  WWW_PID=$!
  for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.2:$EPORT/" && break; sleep 0.1; done
  "$BIN/sbxctl" --socket "$SOCK" sandbox create egress --source "$D/src/tiny" --egress open >/dev/null
  cat >"$D/scripts/egress.json" <<EOF
{"warmup":1, "n":$N, "vars":{"mib":$MB},
 "loop":[{"tag":"proxy","tool":"exec_command","args":{"sandbox_id":"egress","yield_time_ms":30000,"timeout_ms":600000,
           "cmd":"curl -sSf -o /dev/null http://127.0.0.2:$EPORT/blob"},"until_done":true,"expect":"ok"},
         {"tag":"direct","exec":["/usr/bin/curl","-sSf","--noproxy","*","-o","/dev/null","http://127.0.0.2:$EPORT/blob"]}]}
EOF
  log "egress: $N downloads of $MB MiB through sbx-egress, and without it"
  drive egress
  kill "$WWW_PID"; wait "$WWW_PID" 2>/dev/null || true
  WWW_PID=
fi

# ---- 13. stall: exec_command echo in another sandbox during each attack (issue 15) -----
# Each attack runs in a sandbox of its own: a first drive leaves a managed
# session with the attacking changes (its id in the drive's vars), then the
# attack's drive runs its timed steps while probe drives run `exec_command
# echo` in a live session of sandbox "probe" every 50 ms (with a yield long
# enough that the answer is the command's end), from before the attack until
# it ended. report.py keeps the probes that ended inside the attack (all the
# drives give CLOCK_MONOTONIC times).
if want stall; then
  # BENCH_STALL_FILES: the first attack's file count on its own (at full
  # scale its publication takes minutes while fsync is per file)
  NPUB=${BENCH_STALL_FILES:-$(sc 200000 2000)}
  NPUB50=${BENCH_STALL_FILES_50K:-$(sc 50000 500)}
  ATTACKS=" ${BENCH_STALL_ATTACKS:-pub pub_50k ren shuf read} "
  attack() { [[ $ATTACKS == *" $1 "* ]]; }
  NREN=$(sc 3000 300)
  SHUF_MB=$(sc 16 2)
  BIG_MB=$(sc 1024 64)
  NPROBE=5
  echo "{\"NPUB\": $NPUB, \"NPUB50\": $NPUB50, \"NREN\": $NREN, \"SHUF_MB\": $SHUF_MB, \"BIG_MB\": $BIG_MB}" >"$OUT/stall_sizes.json"
  mkdir -p "$D/src/ren/old" "$D/src/shuf"
  python3 -c '
import sys
for i in range(int(sys.argv[2])):
    open("%s/old/f%05d" % (sys.argv[1], i), "w").write("old content of file %07d\n" % i)
' "$D/src/ren" "$NREN"
  python3 -c '
import sys
with open(sys.argv[1], "w") as f:
    i = n = 0
    line = "line %08d of the file that is shuffled\n" % i
    while n + len(line) <= int(sys.argv[2]) * 1048576 - 1:   # below SBX_FILE_MAX: attributable
        f.write(line); n += len(line); i += 1
        line = "line %08d of the file that is shuffled\n" % i
' "$D/src/shuf/big.txt" "$SHUF_MB"
  for sbn in probe atk_pub atk_pub50; do sandbox "$sbn" "$D/src/tiny"; done
  # the live 1 GiB file is tmpfs memory of its session
  "$BIN/sbxctl" --socket "$SOCK" sandbox create atk_read --source "$D/src/tiny" --memory $(( BIG_MB * 3 + 512 ))M >/dev/null
  sandbox atk_ren "$D/src/ren"
  sandbox atk_shuf "$D/src/shuf"
  # stall_setup NAME SANDBOX CMD: a managed session of SANDBOX that ran CMD
  stall_setup() {
    printf '{"setup":[%s,\n{"tool":"exec_command","args":{"sandbox_id":"%s","workspace_session_id":"${ws}","cmd":%s,"yield_time_ms":600000},"until_done":true,"expect":"ok"}],\n"warmup":0,"n":0,"loop":[]}\n' \
      "$(new_session_steps "$2" ws)" "$2" "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$3")" \
      >"$D/scripts/$1_setup.json"
    drive "$1_setup"
  }
  ws_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vars"]["ws"])' "$OUT/$1_setup.json"; }
  # The probes run in drives of a few each, one after the other, from before
  # the attack starts until it ended: OUT/NAME_probe_K.json.
  probes_start() { # NAME
    rm -f "$D/stop_probes"
    (k=0; while [[ ! -e $D/stop_probes ]]; do
       k=$((k + 1)); cp "$D/scripts/stall_probe.json" "$D/scripts/$1_probe_$k.json"; drive "$1_probe_$k"
     done) & PROBES=$!
    sleep 0.5
  }
  probes_stop() { touch "$D/stop_probes"; wait "$PROBES"; }
  # stall_attack NAME STEPS: the attack's steps, probed
  stall_attack() {
    printf '{"warmup":0,"n":1,"loop":[%s]}\n' "$2" >"$D/scripts/$1.json"
    probes_start "$1"
    drive "$1"
    probes_stop
  }
  finalize_step() { # SANDBOX WS
    printf '{"tag":"attack","tool":"finalize_workspace_session","args":{"sandbox_id":"%s","workspace_session_id":"%s","action":"publish"}}' "$1" "$2"
  }
  printf '{"setup":[%s],"warmup":0,"n":0,"loop":[]}\n' "$(new_session_steps probe ws)" >"$D/scripts/stall_probe_setup.json"
  drive stall_probe_setup
  printf '{"warmup":0,"n":%s,"loop":[{"tag":"probe","tool":"exec_command","args":{"sandbox_id":"probe","workspace_session_id":"%s","cmd":"echo hi","yield_time_ms":600000}},{"sleep_ms":50}]}\n' \
    "$NPROBE" "$(ws_of stall_probe)" >"$D/scripts/stall_probe.json"

  # stall_many NAME SANDBOX N: the publication of N new small files
  stall_many() {
    log "stall: publishing $3 small files"
    stall_setup "$1" "$2" "python3 -c 'import os
os.makedirs(\"many\")
for i in range($3): open(\"many/f%d\" % i, \"w\").write(str(i))'"
    stall_attack "$1" "$(finalize_step "$2" "$(ws_of "$1")")"
  }
  if attack pub; then stall_many stall_pub atk_pub "$NPUB"; fi
  if attack pub_50k; then stall_many stall_pub50 atk_pub50 "$NPUB50"; fi

  if attack ren; then
  log "stall: $NREN published files deleted and $NREN others created"
  # each file deleted on its own (a whiteout each), the directory kept
  stall_setup stall_ren atk_ren "rm old/* && mkdir new && python3 -c 'for i in range($NREN): open(\"new/g%05d\" % i, \"w\").write(\"new content of file %07d\\n\" % i)'"
  stall_attack stall_ren "$(finalize_step atk_ren "$(ws_of stall_ren)")"
  fi

  if attack shuf; then
  log "stall: a $SHUF_MB MiB file with its lines shuffled: diff_workspace_session, then its publication"
  stall_setup stall_shuf atk_shuf "shuf --random-source=big.txt big.txt > big.new && mv big.new big.txt"
  SWS=$(ws_of stall_shuf)
  stall_attack stall_shuf "{\"tag\":\"attack\",\"tool\":\"diff_workspace_session\",\"args\":{\"sandbox_id\":\"atk_shuf\",\"workspace_session_id\":\"$SWS\"}},$(finalize_step atk_shuf "$SWS" | sed 's/"attack"/"attack2"/')"
  fi

  if attack read; then
  log "stall: 40 parallel file_read limit=1 of a $BIG_MB MiB file in a live session"
  stall_setup stall_read atk_read "yes 'a line of the big file, in a live session' | head -c $((BIG_MB * 1048576)) > big.txt"
  READ_STEP="{\"tag\":\"attack\",\"tool\":\"file_read\",\"args\":{\"sandbox_id\":\"atk_read\",\"workspace_session_id\":\"$(ws_of stall_read)\",\"path\":\"big.txt\",\"limit\":1}}"
  pids=()
  printf '{"warmup":0,"n":1,"loop":[%s]}\n' "$READ_STEP" >"$D/scripts/stall_read.json"
  probes_start stall_read
  for k in $(seq 2 40); do
    printf '{"warmup":0,"n":1,"loop":[%s]}\n' "$READ_STEP" >"$D/scripts/stall_readers_$k.json"
    drive "stall_readers_$k" & pids+=($!)
  done
  drive stall_read
  for p in "${pids[@]}"; do wait "$p"; done
  probes_stop
  fi
fi

# ---- 14. images: the lazy build of python, then a session on it vs the default image
if want images; then
  # BENCH_LAZY_IMAGES: the images whose lazy build is timed (python first: the
  # session row below runs on it)
  for img in ${BENCH_LAZY_IMAGES:-python anaconda}; do
    [[ -f $D/images.d/$img.conf ]] || install -m 0644 "dist/images.d/$img.conf" "$D/images.d/$img.conf"
    "$BIN/sbxctl" --socket "$SOCK" sandbox create "lazy$img" --source "$D/src/tiny" --image "$img" >/dev/null
    log "images: lazy build of $img (the first session's wait)"
    # The first command of a session on the sandbox starts the build (it answers
    # "running" after its yield); sbxctl image build then waits for that same build.
    printf '{"n":1, "loop":[{"tag":"first","tool":"exec_command","args":{"sandbox_id":"lazy%s","cmd":"true","yield_time_ms":1}}]}\n' \
      "$img" >"$D/scripts/images_first_$img.json"
    t0=$(date +%s%N)
    drive "images_first_$img"
    "$BIN/sbxctl" --socket "$SOCK" image build "$img" >/dev/null
    t1=$(date +%s%N)
    echo "{\"image\": \"$img\", \"build_ms\": $(( (t1 - t0) / 1000000 ))}" >"$OUT/images_build_$img.json"
  done
  "$BIN/sbxctl" --socket "$SOCK" image list --json >"$OUT/images_list.json"
  N=$(sc 150 20)
  printf '{"warmup":5, "n":%s, "loop":[
 {"tag":"image","tool":"exec_command","args":{"sandbox_id":"lazypython","cmd":"true"},"expect":"ok"},
 {"tag":"default","tool":"exec_command","args":{"sandbox_id":"tiny","cmd":"true"},"expect":"ok"}]}\n' "$N" \
    >"$D/scripts/images.json"
  log "images: $N pairs, automatic sessions on python vs default"; drive images
fi

# ---- 15. script: sandbox_script `true` (a fresh sandbox per call) vs the automatic-session row
if want script; then
  [[ -f $D/images.d/python.conf ]] || install -m 0644 dist/images.d/python.conf "$D/images.d/python.conf"
  log "script: building python if needed"
  "$BIN/sbxctl" --socket "$SOCK" image build python >/dev/null
  N=$(sc 100 20)
  # The untimed pause after each call: the spare it used (a job sandbox, or
  # the automatic session's spare session) is made again after its answer
  # (core/job.h, core/spare.h), which is not the next call's time (an agent's
  # calls are seconds apart); without it the remaking lands in the call that
  # follows, on these two cores (docs/benchmarks.md).
  printf '{"warmup":3, "n":%s, "loop":[
 {"tag":"script","tool":"sandbox_script","args":{"command":"true","image":"python","egress":"none"}},
 {"sleep_ms":100},
 {"tag":"auto","tool":"exec_command","args":{"sandbox_id":"tiny","cmd":"true"},"expect":"ok"},
 {"sleep_ms":100}]}\n' "$N" \
    >"$D/scripts/script.json"
  log "script: $N pairs, sandbox_script vs exec_command in an automatic session"
  drive script "$BIN/sandbox-mcp" --set runtime,script --socket "$SOCK"
fi

# ---- sbx-gateway (issue 20): HTTP against stdio, 100 sessions, idle sessions' memory -------
if want gateway; then
  "$BIN/sbxctl" --socket "$SOCK" sandbox create gwtiny --source "$D/src/tiny" --owner 65534 >/dev/null
  GW_TOKEN=$("$BIN/sbxctl" --socket "$SOCK" token create --owner 65534 --name bench)
  N=$(sc 300 30)
  SECS=$(sc 10 2)
  log "gateway: $N pairs HTTP/stdio, 100 sessions for $SECS s, 200 idle sessions"
  node bench/gateway.mjs "$SOCK" "$BIN" gwtiny "$GW_TOKEN" 65532 "$N" "$SECS" "$OUT/gateway.json"
fi

# The boxes set (issue 21): its own sbxd (bench/boxes.mjs), box_image the default image.
if want boxes; then
  N=$(sc 30 5)
  NT=$(sc 20 3)
  NF=$(sc 100 10)
  log "boxes: $N starts from a spare, $NT thaws, $NF frozen boxes"
  node bench/boxes.mjs "$N" "$NT" "$NF" "$OUT/boxes.json"
fi

# ---- boxes (issue 21 part B): sandbox_start from a version of 100 files and of 10,000 files
# (10 kB each), against one from a spare, interleaved. A box from a version mounts its layers:
# both should cost about what a spare start does, whatever the version's size.
if want boxes_version; then
  N=$(sc 30 5)
  FILES=$(sc 100 10)
  LARGE=$(sc 10000 1000)
  cat >"$D/scripts/boxes_version.json" <<EOF
{"setup":[{"tool":"sandbox_start","args":{},"save":{"src":"id"}},
          {"tool":"sandbox_exec","args":{"id":"\${src}","cmd":"mkdir -p d && cd d && head -c $((FILES * 10000)) /dev/urandom | split -b 10000 -a 5"}},
          {"tool":"sandbox_publish_version","args":{"service":"bench","label":"v1","image":"\${src}"},"save":{"vid":"versionId"}},
          {"tool":"sandbox_stop","args":{"id":"\${src}"}},
          {"tool":"sandbox_start","args":{},"save":{"big":"id"}},
          {"tool":"sandbox_exec","args":{"id":"\${big}","cmd":"mkdir -p d && cd d && head -c $((LARGE * 10000)) /dev/urandom | split -b 10000 -a 5"}},
          {"tool":"sandbox_publish_version","args":{"service":"bench","label":"v2","image":"\${big}"},"save":{"lid":"versionId"}},
          {"tool":"sandbox_stop","args":{"id":"\${big}"}}],
 "warmup":1, "n":$N,
 "loop":[{"tag":"version","tool":"sandbox_start","args":{"version":"\${vid}"},"save":{"v":"id"}},
         {"tag":"stop_v","tool":"sandbox_stop","args":{"id":"\${v}"}},
         {"tag":"pause1","sleep_ms":300},
         {"tag":"spare","tool":"sandbox_start","args":{},"save":{"p":"id"}},
         {"tag":"stop_p","tool":"sandbox_stop","args":{"id":"\${p}"}},
         {"tag":"pause2","sleep_ms":300},
         {"tag":"large","tool":"sandbox_start","args":{"version":"\${lid}"},"save":{"l":"id"}},
         {"tag":"stop_l","tool":"sandbox_stop","args":{"id":"\${l}"}},
         {"tag":"pause3","sleep_ms":300}]}
EOF
  log "boxes_version: $N triples, sandbox_start from a version of $FILES and of $LARGE files (10 kB) vs from a spare"
  drive boxes_version "$BIN/sandbox-mcp" --set boxes --socket "$SOCK"
fi

# ---- stop: SIGTERM with a managed session of 20,000 files (issue 15) ----------------------
# Last, as it restarts sbxd: the time from SIGTERM to sbxd's exit while a managed
# session of NS files is not finalized (kept in place in RUN_DIR/live, sbxd(8),
# where it was copied before), then the next start, which adopts it; it is
# discarded after.
if want stop; then
  NS=$(sc 20000 2000)
  sandbox stop "$D/src/tiny"
  cat >"$D/scripts/stop_fill.json" <<EOF
{"setup":[$(new_session_steps stop ws)], "n":1,
 "loop":[{"tool":"exec_command","args":{"sandbox_id":"stop","workspace_session_id":"\${ws}","yield_time_ms":120000,
          "cmd":"mkdir many && cd many && seq $NS | xargs touch"},"until_done":true,"expect":"ok"}]}
EOF
  cat >"$D/scripts/stop_discard.json" <<EOF
{"setup":[{"tool":"list_workspace_sessions","args":{"sandbox_id":"stop"},"save":{"ws":"sessions.-1.workspace_session_id"}}], "n":1,
 "loop":[{"tool":"finalize_workspace_session","args":{"sandbox_id":"stop","workspace_session_id":"\${ws}","action":"discard"}}]}
EOF
  log "stop: SIGTERM with a managed session of $NS files, then a start"
  drive stop_fill
  t0=$(date +%s.%N)
  kill -TERM "$SBXD_PID"
  wait "$SBXD_PID" || true
  t1=$(date +%s.%N)
  rm -f "$SOCK"
  start_sbxd
  t2=$(date +%s.%N)
  echo "{\"stop_s\": $(python3 -c "print($t1-$t0)"), \"start_s\": $(python3 -c "print($t2-$t1)"), \"files\": $NS}" >"$OUT/stop.json"
  drive stop_discard
fi

# ---- the report ---------------------------------------------------------------------------
"$BIN/sbxctl" --socket "$SOCK" status --json >"$OUT/status.json" 2>/dev/null || true
log "report"
python3 "$ROOT/bench/report.py" "$OUT" "$SCALE" "$ROOT/bench/results/latest.json" "$(( $(date +%s) - T_START ))"
