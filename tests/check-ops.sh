#!/bin/bash
# Operations checks, TAP on stdout ("ok N - ...", "not ok N - ...",
# "ok N - ... # SKIP reason"):
#   tests/check-ops.sh install   make install into a temporary DESTDIR, list
#                                it, uninstall, prove nothing is left (twice:
#                                default paths and PREFIX=/usr et al.)
#   tests/check-ops.sh [all]     that, then systemd-analyze verify on the
#                                unit, mandoc -Tlint on the installed pages,
#                                sbxd --check-config on the shipped and on
#                                broken files, --log-level and the log format,
#                                socket_group, bash completion, and sbxctl's
#                                commands against a private sbxd (root only).
# Requests the running sbxd does not know yet are skipped with the reason,
# not failed. Everything is made under /tmp/sbx-ops-XXXXXX and removed; the
# only processes started are the private sbxd instances, stopped by pid.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
MODE=${1:-all}
MAKE=${MAKE:-make}
BIN=$ROOT/build/bin
SBXD=$BIN/sbxd
SBXCTL=$BIN/sbxctl

N=0
FAILS=0
ok() { N=$((N + 1)); echo "ok $N - $1"; }
notok() { N=$((N + 1)); FAILS=$((FAILS + 1)); echo "not ok $N - $1"; shift; for l in "$@"; do printf '%s\n' "$l" | sed 's/^/#   /'; done; }
skip() { N=$((N + 1)); echo "ok $N - $1 # SKIP $2"; }
# check DESCRIPTION COMMAND... : ok if the command succeeds
check() { local d=$1 out; shift; if out=$("$@" 2>&1); then ok "$d"; else notok "$d" "$out"; fi; }
# expect_out DESCRIPTION WANT-RC TEXT COMMAND... : ok if the command exits
# WANT-RC and what it prints (stdout and stderr) holds TEXT
expect_out() {
  local d=$1 want=$2 text=$3 out rc
  shift 3
  out=$("$@" 2>&1)
  rc=$?
  if ((rc == want)) && grep -qF -- "$text" <<<"$out"; then ok "$d"; else notok "$d" "rc=$rc (want $want)" "$out"; fi
}

TMP=$(mktemp -d /tmp/sbx-ops-XXXXXX)
chmod 0755 "$TMP"   # other users reach the private socket in the socket_group tests
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null && { for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; }
    kill -KILL "$p" 2>/dev/null
  done
  # sessions an sbxd kept in place at its stop (sbxd(8)): copied out and unmounted
  for r in "$TMP"/*/run; do
    [[ -d $r/live ]] && "$SBXD" --state-dir "${r%/run}/state" --run-dir "$r" --save-kept >/dev/null 2>&1
  done
  rm -rf "$TMP"
}
trap cleanup EXIT

for b in sbxd sbxctl sandbox-mcp sbx-worker sbx-egress; do
  [[ -x $BIN/$b ]] || { echo "Bail out! $BIN/$b missing: make all"; exit 1; }
done
[[ -f build/gen/sbxctl.bash-completion ]] || { echo "Bail out! build/gen/sbxctl.bash-completion missing: make all"; exit 1; }
VERSION=$("$SBXD" --version | awk '{print $2}')

# ---- install / uninstall -----------------------------------------------------

# install_cycle NAME EXPECTED-FILES-FILE MAKE-VARS...
install_cycle() {
  local name=$1 expect=$2 dest=$TMP/dest-$1 out
  shift 2
  if out=$($MAKE --no-print-directory -s install DESTDIR="$dest" "$@" 2>&1); then
    ok "install ($name) into a temporary DESTDIR"
  else
    notok "install ($name) into a temporary DESTDIR" "$out"
    return
  fi
  echo "# installed ($name):"
  (cd "$dest" && find . -not -type d -printf '%m %p\n' | sort | sed 's/^/#   /')
  local got
  got=$(cd "$dest" && find . -not -type d -printf '%m %P\n' | sort)
  if [[ $got == "$(sort "$expect")" ]]; then
    ok "install ($name) puts exactly the expected files, with the expected modes"
  else
    notok "install ($name) puts exactly the expected files, with the expected modes" \
      "$(diff <(sort "$expect") <(printf '%s\n' "$got"))"
  fi
  # The version in every installed page, the configured paths in the unit.
  local bad=""
  for m in "$dest"/"${MANDIR_REL[$name]}"/man*/*; do
    grep -qx "\.Os sbx $VERSION" "$m" || bad+=" ${m##*/}"
  done
  [[ -z $bad ]] && ok "man pages ($name) carry '.Os sbx $VERSION'" || notok "man pages ($name) carry '.Os sbx $VERSION'" "missing in:$bad"
  local unit=$dest/${UNIT_REL[$name]}
  if grep -qx "ExecStart=${EXEC_EXPECT[$name]}" "$unit"; then
    ok "unit ($name) starts ${EXEC_EXPECT[$name]}"
  else
    notok "unit ($name) starts ${EXEC_EXPECT[$name]}" "$(grep ExecStart "$unit")"
  fi
  INSTALLED_UNIT=$unit INSTALLED_MAN=$dest/${MANDIR_REL[$name]} INSTALLED_CONF=$dest/${CONF_REL[$name]}
  # An administrator's edit survives reinstall and uninstall.
  echo "log_level = debug" >>"$INSTALLED_CONF"
  $MAKE --no-print-directory -s install DESTDIR="$dest" "$@" >/dev/null 2>&1
  if grep -qx "log_level = debug" "$INSTALLED_CONF"; then
    ok "install ($name) keeps an existing, edited sbxd.conf"
  else
    notok "install ($name) keeps an existing, edited sbxd.conf"
  fi
  cp "$INSTALLED_CONF" "$TMP/edited.conf"
  out=$($MAKE --no-print-directory -s uninstall DESTDIR="$dest" "$@" 2>&1)
  if [[ -f $INSTALLED_CONF ]] && grep -q "keeping" <<<"$out"; then
    ok "uninstall ($name) keeps the edited sbxd.conf and says so"
  else
    notok "uninstall ($name) keeps the edited sbxd.conf and says so" "$out"
  fi
  # Now the unedited file: install it again and uninstall everything.
  rm -f "$INSTALLED_CONF"
  $MAKE --no-print-directory -s install DESTDIR="$dest" "$@" >/dev/null 2>&1
  # keep copies for the later checks
  mkdir -p "$TMP/keep-$name"
  cp -r "$INSTALLED_MAN" "$TMP/keep-$name/man"
  cp "$INSTALLED_UNIT" "$INSTALLED_CONF" "$TMP/keep-$name/"
  if out=$($MAKE --no-print-directory -s uninstall DESTDIR="$dest" "$@" 2>&1); then
    ok "uninstall ($name)"
  else
    notok "uninstall ($name)" "$out"
  fi
  local left
  left=$(cd "$dest" && { find . -not -type d; find . -type d -name 'sbx*'; })
  if [[ -z $left ]]; then
    ok "nothing of sbx is left after uninstall ($name)"
  else
    notok "nothing of sbx is left after uninstall ($name)" "$left"
  fi
  echo "# directories left ($name), created by install -d and shared with other software:"
  (cd "$dest" && find . -mindepth 1 -type d | sort | sed 's/^/#   /')
}

declare -A MANDIR_REL UNIT_REL EXEC_EXPECT CONF_REL
MANDIR_REL[default]=usr/local/share/man
UNIT_REL[default]=lib/systemd/system/sbxd.service
CONF_REL[default]=etc/sbx/sbxd.conf
EXEC_EXPECT[default]="/usr/local/sbin/sbxd --config /etc/sbx/sbxd.conf"
cat >"$TMP/expect-default" <<'EOF'
755 usr/local/sbin/sbxd
755 usr/local/bin/sbxctl
755 usr/local/bin/sandbox-mcp
755 usr/local/bin/sbx-gateway
644 lib/systemd/system/sbx-gateway.service
644 lib/systemd/system/sbx-gateway.socket
644 etc/sbx/gateway.conf
755 usr/local/libexec/sbx/sbx-worker
755 usr/local/libexec/sbx/sbx-image-build
755 usr/local/libexec/sbx/sbx-egress
644 usr/local/share/bash-completion/completions/sbxctl
644 lib/systemd/system/sbxd.service
644 usr/lib/sysusers.d/sbx.conf
644 usr/lib/tmpfiles.d/sbx.conf
644 etc/sbx/sbxd.conf
EOF
# every page of man/ (sandbox-mcp.1, sbxd.conf.5, sbx.7, sbxd.8, sbxctl.8, sbx-worker.8, ...)
for m in man/*.[1-9]; do echo "644 usr/local/share/man/man${m##*.}/${m#man/}"; done >>"$TMP/expect-default"
# every shipped image definition (sbx-images(7))
for f in dist/images.d/*.conf; do echo "644 etc/sbx/images.d/${f##*/}"; done >>"$TMP/expect-default"
install_cycle default "$TMP/expect-default"

MANDIR_REL[usr]=usr/share/man
UNIT_REL[usr]=usr/lib/systemd/system/sbxd.service
CONF_REL[usr]=etc/alt/sbx/sbxd.conf
EXEC_EXPECT[usr]="/usr/sbin/sbxd --config /etc/alt/sbx/sbxd.conf"
sed -e 's|usr/local/|usr/|' -e 's|^644 lib/systemd|644 usr/lib/systemd|' -e 's| etc/sbx/| etc/alt/sbx/|' \
  "$TMP/expect-default" >"$TMP/expect-usr"
install_cycle usr "$TMP/expect-usr" PREFIX=/usr SYSCONFDIR=/etc/alt UNITDIR=/usr/lib/systemd/system
if grep -q "^# worker_path = /usr/libexec/sbx/sbx-worker$" "$TMP/keep-usr/sbxd.conf"; then
  ok "the installed sbxd.conf names LIBEXECDIR's sbx-worker"
else
  notok "the installed sbxd.conf names LIBEXECDIR's sbx-worker" "$(grep worker_path "$TMP/keep-usr/sbxd.conf")"
fi

[[ $MODE == install ]] && { echo "1..$N"; exit $((FAILS > 0)); }

# ---- systemd unit ---------------------------------------------------------------

if ! command -v systemd-analyze >/dev/null; then
  skip "systemd-analyze verify sbxd.service" "systemd-analyze not installed (tests/deps.sh installs systemd)"
else
  # verify wants ExecStart= to exist: point it at the built sbxd. MANPATH lets
  # it find the Documentation= pages in the installed copy.
  sed "s|^ExecStart=/usr/local/sbin/sbxd|ExecStart=$SBXD|" "$TMP/keep-default/sbxd.service" >"$TMP/sbxd.service"
  man_opt=()
  if ! command -v man >/dev/null; then
    man_opt=(--man=no)
    echo "# no man(1) here: Documentation= is not checked by verify (mandoc checks the pages below)"
  fi
  out=$(MANPATH=$TMP/keep-default/man SYSTEMD_LOG_LEVEL=notice systemd-analyze verify "${man_opt[@]}" "$TMP/sbxd.service" 2>&1)
  rc=$?
  if ((rc == 0)) && [[ -z $out ]]; then
    ok "systemd-analyze verify sbxd.service: no error, no warning"
  else
    notok "systemd-analyze verify sbxd.service: no error, no warning" "rc=$rc" "$out"
  fi
  out=$(systemd-analyze verify --man=no dist/sbxd.service 2>&1)
  if [[ $out == "sbxd.service: Command /usr/local/sbin/sbxd is not executable: No such file or directory" || -z $out ]]; then
    ok "systemd-analyze verify dist/sbxd.service as shipped (only the missing binary, if not installed)"
  else
    notok "systemd-analyze verify dist/sbxd.service as shipped" "$out"
  fi
  out=$(systemd-analyze security --offline=yes "$TMP/sbxd.service" 2>&1 | tail -1)
  [[ -n $out ]] && echo "# systemd-analyze security: $out"
fi

# sbx-egress holds no privilege: as root it refuses to run (sbxd starts it as egress_user).
out=$("$BIN/sbx-egress" 2>&1 3</dev/null); rc=$?
if [[ $(id -u) -eq 0 && $rc -eq 1 && $out == *"must not run as root"* ]]; then
  ok "sbx-egress refuses to run as root"
elif [[ $(id -u) -ne 0 ]]; then
  skip "sbx-egress refuses to run as root" "not root"
else
  notok "sbx-egress refuses to run as root" "exit $rc: $out"
fi

# sbx-gateway's units (issue 20): verify the installed service (pointed at
# the built binary) and the socket; no error, no warning.
if command -v systemd-analyze >/dev/null; then
  sed "s|^ExecStart=/usr/local/bin/sbx-gateway|ExecStart=$ROOT/build/bin/sbx-gateway|" \
    dist/sbx-gateway.service >"$TMP/sbx-gateway.service"
  cp dist/sbx-gateway.socket "$TMP/sbx-gateway.socket"
  out=$(SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no "$TMP/sbx-gateway.service" "$TMP/sbx-gateway.socket" 2>&1)
  rc=$?
  if ((rc == 0)) && [[ -z $out ]]; then
    ok "systemd-analyze verify sbx-gateway.service and .socket: no error, no warning"
  else
    notok "systemd-analyze verify sbx-gateway.service and .socket: no error, no warning" "rc=$rc" "$out"
  fi
  out=$(systemd-analyze security --offline=yes "$TMP/sbx-gateway.service" 2>&1 | tail -1)
  [[ -n $out ]] && echo "# systemd-analyze security sbx-gateway.service: $out"
fi

# sysusers.d and tmpfiles.d entries, applied to a scratch root as systemd would.
if command -v systemd-sysusers >/dev/null && command -v systemd-tmpfiles >/dev/null; then
  R=$TMP/sysroot
  mkdir -p "$R/etc" "$R/usr/lib/sysusers.d" "$R/usr/lib/tmpfiles.d"
  cp dist/sbx.sysusers.conf "$R/usr/lib/sysusers.d/sbx.conf"
  cp dist/sbx.tmpfiles.conf "$R/usr/lib/tmpfiles.d/sbx.conf"
  out=$(systemd-sysusers --root="$R" sbx.conf 2>&1)
  if grep -q '^sbx:x:[0-9]*:' "$R/etc/group" 2>/dev/null; then
    ok "systemd-sysusers creates the group sbx from sbx.sysusers.conf"
  else
    notok "systemd-sysusers creates the group sbx from sbx.sysusers.conf" "$out"
  fi
  # sbx-egress's own system user (sbx-egress(8)): not root, no login shell, no home of its own
  if grep -Eq '^sbx-egress:x:[1-9][0-9]*:[1-9][0-9]*:[^:]*:/:(/usr/sbin/nologin|/sbin/nologin|/bin/false)$' \
      "$R/etc/passwd" 2>/dev/null; then
    ok "systemd-sysusers creates the system user sbx-egress (not root, no login)"
  else
    notok "systemd-sysusers creates the system user sbx-egress" "$(grep sbx-egress "$R/etc/passwd" 2>&1)" "$out"
  fi
  if grep -q '^sbx-gateway:x:[0-9]*:[0-9]*:' "$R/etc/passwd" 2>/dev/null &&
     grep -q '^sbx:x:[0-9]*:sbx-gateway$' "$R/etc/group"; then
    ok "systemd-sysusers creates the system user sbx-gateway, a member of sbx"
  else
    notok "systemd-sysusers creates the system user sbx-gateway, a member of sbx" "$out" "$(cat "$R/etc/group")"
  fi
  out=$(systemd-tmpfiles --create --root="$R" sbx.conf 2>&1)
  got=$(stat -c '%a %U:%G' "$R/var/lib/sbx" "$R/run/sbx" 2>&1 | tr '\n' ' ')
  if [[ $got == "711 root:root 755 root:root " ]]; then
    ok "systemd-tmpfiles creates /var/lib/sbx 0711 and /run/sbx 0755 from sbx.tmpfiles.conf"
  else
    notok "systemd-tmpfiles creates /var/lib/sbx 0711 and /run/sbx 0755" "$got" "$out"
  fi
else
  skip "sysusers.d and tmpfiles.d entries" "systemd-sysusers or systemd-tmpfiles not installed"
fi

# ---- man pages ---------------------------------------------------------------------

if ! command -v mandoc >/dev/null; then
  skip "mandoc -Tlint on the installed man pages" "mandoc not installed"
else
  for m in "$TMP"/keep-default/man/man*/*; do
    if out=$(mandoc -Tlint -Wwarning "$m" 2>&1) && [[ -z $out ]]; then
      ok "mandoc -Tlint -Wwarning installed ${m##*/}"
    else
      notok "mandoc -Tlint -Wwarning installed ${m##*/}" "$out"
    fi
  done
fi

# ---- configuration -------------------------------------------------------------------

CONF=$TMP/keep-default/sbxd.conf
sg_line=$(grep -n '^socket_group = sbx$' "$CONF" | cut -d: -f1)
if getent group sbx >/dev/null; then
  check "sbxd --check-config accepts the installed sbxd.conf" "$SBXD" --config "$CONF" --check-config
else
  expect_out "without the sbx group, --check-config refuses the installed sbxd.conf at line $sg_line, saying why" \
    1 "$CONF:$sg_line: socket_group: no such group 'sbx'" "$SBXD" --config "$CONF" --check-config
fi
sed 's/^socket_group = sbx$/socket_group = daemon/' "$CONF" >"$TMP/c-daemon.conf"
out=$("$SBXD" --config "$TMP/c-daemon.conf" --check-config 2>&1)
if [[ $out == "$TMP/c-daemon.conf: configuration OK" ]]; then
  ok "sbxd --check-config accepts the installed sbxd.conf (socket_group = daemon)"
else
  notok "sbxd --check-config accepts the installed sbxd.conf (socket_group = daemon)" "$out"
fi
# Every default shown in the file, uncommented, is itself valid.
sed -e 's/^# \([a-z_]* =.*\)$/\1/' -e '/^socket_group = sbx$/d' -e '/^gateway_user = /d' "$CONF" >"$TMP/c-defaults.conf"
n_keys=$(grep -c '^[a-z_]* =' "$TMP/c-defaults.conf")
out=$("$SBXD" --config "$TMP/c-defaults.conf" --check-config --run-dir "$TMP/never" 2>&1)
if [[ $out == *"configuration OK" && ! -e $TMP/never ]]; then
  ok "the $n_keys defaults shown in sbxd.conf, uncommented, are accepted; --check-config starts nothing"
else
  notok "the defaults shown in sbxd.conf, uncommented, are accepted" "$out"
fi
# Every key of sbxd.conf(5) is in the example, and the other way round.
man_keys=$(sed -n 's/^\.It Cm \([a-z_]*\) No = .*/\1/p' man/sbxd.conf.5 | sort)
conf_keys=$(sed -n 's/^# \([a-z_]*\) =.*/\1/p' dist/sbxd.conf | sort -u)
if [[ $man_keys == "$conf_keys" && -n $man_keys ]]; then
  ok "sbxd.conf(5) and dist/sbxd.conf document the same $(wc -l <<<"$man_keys") keys"
else
  notok "sbxd.conf(5) and dist/sbxd.conf document the same keys" "$(diff <(echo "$man_keys") <(echo "$conf_keys"))"
fi

# broken configurations: "content|line|reason (grep -F)"
broken=(
  $'[sbxd]\nno_such_key = 1|2|unknown key \'no_such_key\''
  $'[sbxd]\nlog_level = info\ntranscript_cap_bytes = 10|3|transcript_cap_bytes: 10 is out of range (at least 4096)'
  $'[sbxd]\ndefault_pids_max = lots|2|default_pids_max: \'lots\' is not a number'
  $'[sbxd]\ndefault_pids_max = 5000000|2|default_pids_max: 5000000 is out of range (8 to 4194304)'
  $'[sbxd]\nuid_count = 0|2|uid_count: 0 is out of range (1 to 65536)'
  $'[sbxd]\nstate_dir = var/lib/sbx|2|state_dir must be an absolute path'
  $'[sbxd]\nlog_level = loud|2|log_level must be one of'
  $'[sbxd]\nsocket_group = no-such-group-sbx|2|socket_group: no such group \'no-such-group-sbx\''
  $'[sbx]\nlog_level = info|2|unknown section [sbx]'
  $'[sbxd]\n# a comment\nthis line is wrong\nalso_unknown = 1|3|syntax error'
  $'[sbxd]\nlog_level = info # not a comment|2|log_level must be one of'
  $'[sbxd]\nsession_disk_bytes = 99999999999G|2|session_disk_bytes: \'99999999999G\' is not a number'
  $'[sbxd]\nsocket_mode = 0644|2|socket_mode: \'0644\' is not 0600, 0660 or 0666'
  $'[sbxd]\nclient_idle_seconds = 0|2|client_idle_seconds: 0 is out of range (1 to 86400)'
  $'[sbxd]\nowner_sessions_max = 513|2|owner_sessions_max: 513 is out of range (1 to 512)'
  $'[sbxd]\nowner_sandboxes_max = 0|2|owner_sandboxes_max: 0 is out of range (1 to 1024)'
  $'[sbxd]\nowner_commands_max = 32769|2|owner_commands_max: 32769 is out of range (1 to 32768)'
  $'[sbxd]\nfailed_session_grace_seconds = 86401|2|failed_session_grace_seconds: 86401 is out of range (0 to 86400)'
  $'[sbxd]\ngateway_user = root|2|gateway_user: no such user \'root\' (or root, which may not be it)'
)
i=0
for b in "${broken[@]}"; do
  i=$((i + 1))
  content=${b%%|*}
  rest=${b#*|}
  line=${rest%%|*}
  reason=${rest#*|}
  f=$TMP/broken-$i.conf
  printf '%s\n' "$content" >"$f"
  expect_out "broken config $i refused as FILE:$line: $reason" 1 "<3>sbxd: $f:$line: $reason" \
    "$SBXD" --config "$f" --check-config
done
expect_out "a missing --config file is an error naming it" 1 "$TMP/absent.conf: cannot read: No such file or directory" \
  "$SBXD" --config "$TMP/absent.conf" --check-config
out=$("$SBXD" --log-level loud --check-config --config "$TMP/c-daemon.conf" 2>&1)
[[ $out == *"configuration OK"* ]] && ok "--check-config checks the file only" || notok "--check-config checks the file only" "$out"

# ---- sbxctl's tables, its page and its --help ------------------------------------------

# Every command and option of sbxctl's tables is in sbxctl(8) and in --help.
missing=""
while read -r w; do
  if [[ $w == --* ]]; then
    grep -q "Fl -${w#--}\b" man/sbxctl.8 || missing+=" sbxctl.8:$w"
    grep -q -- "$w\b" <<<"$("$SBXCTL" --help)" || missing+=" --help:$w"
  else
    grep -qx "\.Cm $w" man/sbxctl.8 || missing+=" sbxctl.8:'$w'"
    grep -q "^  $w\b" <<<"$("$SBXCTL" --help)" || missing+=" --help:'$w'"
  fi
done < <(build/tools/sbxctl-completion --list)
[[ -z $missing ]] && ok "every command and option of sbxctl's tables is in sbxctl(8) and in --help" \
  || notok "every command and option of sbxctl's tables is in sbxctl(8) and in --help" "missing:$missing"

# ---- bash completion -------------------------------------------------------------------

complete_words() { # words... (the last is the one being completed)
  bash -c '
    _init_completion() { words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; }
    _filedir() { :; }
    source "$0"
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    PATH=/nonexistent _sbxctl
    printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' build/gen/sbxctl.bash-completion "$@" 2>&1
}
cmp_case() { local want=$1; shift; local got; got=$(complete_words "$@"); got=${got% }
  [[ $got == "$want" ]] && ok "bash completion: '$*' -> $want" || notok "bash completion: '$*' -> $want" "got: $got"; }
cmp_case "sandbox secret session status" sbxctl s
cmp_case "create diff finalize list" sbxctl session ''
cmp_case "--discard" sbxctl session finalize web ws-1 --d
cmp_case "--policy" sbxctl --json session create web --p
cmp_case "destroy publish_then_destroy" sbxctl session create web --policy ''
cmp_case "--cpu-weight" sbxctl sandbox create web --source . --cp
cmp_case "create delete list show" sbxctl sandbox --cpu-weight 5 ''

# ---- a private sbxd ------------------------------------------------------------------------

if [[ $(id -u) -ne 0 ]]; then
  skip "sbxctl against a private sbxd" "sbxd needs root"
  echo "1..$N"
  exit $((FAILS > 0))
fi

# start_sbxd NAME ARGS... : sets SOCK, LOG; returns 1 if it did not come up
start_sbxd() {
  local name=$1
  shift
  LOG=$TMP/$name.log
  SOCK=$TMP/$name/run/sbxd.sock
  mkdir -p "$TMP/$name"
  "$SBXD" --state-dir "$TMP/$name/state" --run-dir "$TMP/$name/run" "$@" >"$LOG" 2>&1 &
  SBXD_PID=$!
  PIDS+=("$SBXD_PID")
  for _ in $(seq 200); do
    [[ -S $SOCK ]] && return 0
    kill -0 "$SBXD_PID" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
stop_sbxd() { # -> exit status of sbxd
  kill -TERM "$SBXD_PID" 2>/dev/null
  wait "$SBXD_PID"
}

# --log-level warning: nothing below warning is written.
if start_sbxd quiet --log-level warning; then
  # without socket_group (and socket_mode), only root may connect
  st=$(stat -c '%a %U' "$SOCK")
  [[ $st == "600 root" ]] && ok "no socket_group: sbxd.sock is 0600 root" || notok "no socket_group: sbxd.sock is 0600 root" "$st"
  stop_sbxd
  if grep -q '^<[5-7]>' "$LOG"; then notok "--log-level warning writes no notice, info or debug line" "$(head "$LOG")"
  else ok "--log-level warning writes no notice, info or debug line"; fi
else
  notok "sbxd --log-level warning starts" "$(tail "$LOG")"
fi
expect_out "--log-level with an unknown level is a usage error (2) naming the levels" 2 "log_level must be one of" \
  "$SBXD" --log-level loud --state-dir "$TMP/x/state" --run-dir "$TMP/x/run"

printf '[sbxd]\nsocket_group = daemon\n' >"$TMP/group.conf"
if ! start_sbxd main --config "$TMP/group.conf" --log-level debug; then
  notok "private sbxd starts" "$(tail -20 "$LOG")"
  echo "1..$N"
  exit 1
fi
ok "private sbxd starts with --log-level debug and socket_group = daemon"
export SBX_SOCKET=$SOCK

st=$(stat -c '%a %U %G' "$SOCK")
[[ $st == "660 root daemon" ]] && ok "socket_group: sbxd.sock is 0660 root:daemon" || notok "socket_group: sbxd.sock is 0660 root:daemon" "$st"
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$SBXCTL" status 2>&1)
rc=$?
((rc == 3)) && grep -q "not allowed to connect.*group" <<<"$out" \
  && ok "a user outside socket_group cannot connect: exit 3 and what to do" \
  || notok "a user outside socket_group cannot connect: exit 3 and what to do" "rc=$rc" "$out"
out=$(setpriv --reuid=65534 --regid=65534 --groups=1 "$SBXCTL" sandbox list 2>&1)
rc=$?
((rc == 0)) && ok "a member of socket_group connects (sandbox list as nobody in group daemon)" \
  || notok "a member of socket_group connects" "rc=$rc" "$out"

FIX=$TMP/fixture
mkdir -p "$FIX/src"
printf 'hello\n' >"$FIX/README"
printf 'int main(void) { return 0; }\n' >"$FIX/src/main.c"

# run_ctl DESC EXPECTED-RC ARGS... : runs sbxctl, keeps stdout in OUT; a
# request this sbxd does not know yet is skipped with the reason.
run_ctl() {
  local d=$1 want=$2
  shift 2
  OUT=$("$SBXCTL" "$@" 2>"$TMP/err")
  RC=$?
  ERR=$(cat "$TMP/err")
  if [[ $ERR == *"closed the connection before answering"* ]] || grep -qiE "not (yet )?(supported|implemented)|unknown request|Operation not supported|Function not implemented" <<<"$ERR"; then
    skip "$d" "sbxd does not handle '$*' yet: $ERR"
    return 2
  fi
  if ((RC == want)); then
    ok "$d"
    return 0
  fi
  notok "$d" "sbxctl $* -> rc=$RC (want $want)" "$OUT" "$ERR"
  return 1
}
json_ok() { python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if eval(sys.argv[1]) else 1)' "$1" <<<"$OUT"; }
jcheck() { if json_ok "$2"; then ok "$1"; else notok "$1" "$OUT"; fi; }

run_ctl "sandbox create ops" 0 sandbox create ops --source "$FIX"
run_ctl "sandbox list shows it" 0 sandbox list && { grep -q "^ops " <<<"$OUT" && ok "sandbox list: a row for ops" || notok "sandbox list: a row for ops" "$OUT"; }
run_ctl "sandbox list --json" 0 sandbox list --json && jcheck "sandbox list --json is an array holding ops" "any(s['name']=='ops' and s['layer_count']==1 for s in d)"
run_ctl "sandbox show ops" 0 sandbox show ops && { grep -q "^name: ops$" <<<"$OUT" && grep -q "^layers: 1$" <<<"$OUT" && ok "sandbox show: key: value lines" || notok "sandbox show: key: value lines" "$OUT"; }
run_ctl "sandbox show ops --json" 0 sandbox show ops --json && jcheck "sandbox show --json is the sandbox object" "d['name']=='ops' and d['source_dir']=='$FIX'"
run_ctl "sandbox show of an unknown sandbox exits 4" 4 sandbox show no-such-sandbox
run_ctl "sandbox delete of an unknown sandbox exits 4" 4 sandbox delete no-such-sandbox
run_ctl "image list" 0 image list && { grep -q "^default  *built " <<<"$OUT" && ok "image list: the default image, built" || notok "image list: the default image, built" "$OUT"; }
run_ctl "image list --json" 0 image list --json && jcheck "image list --json names default first, with the keys of sbxctl(8)" "d[0]['name']=='default' and sorted(d[0])==['built_unix','description','digest','name','size_bytes','state','versions']"
run_ctl "an unreachable socket exits 3" 3 --socket "$TMP/nowhere.sock" status
run_ctl "a usage error exits 2" 2 session finalize ops
run_ctl "status --json" 0 status --json && jcheck "status --json has the pid of the private sbxd" "d['pid']==$SBXD_PID"
run_ctl "owner list" 0 owner list && { grep -qE "^0 +root +[0-9]+/- +[0-9]+/- +0/- +[0-9.]+[BKMG]/- +[0-9.]+[BKMG]/- +0/-$" <<<"$OUT" && ok "owner list: root's use, no limit (exempt)" || notok "owner list: root's use, no limit (exempt)" "$OUT"; }
run_ctl "owner show root --json" 0 owner show root --json && jcheck "owner show --json: exempt, a row per quota" "d['uid']==0 and d['exempt'] and [q['name'] for q in d['quotas']]==['owner_sessions_max','owner_sandboxes_max','owner_commands_max','owner_transcripts_max_bytes','owner_layers_max_bytes','owner_jobs_max']"
run_ctl "owner show of a bad user is a usage error" 2 owner show no-such-user-sbx

if run_ctl "layer list ops" 0 layer list ops; then
  grep -qE "^0 +original " <<<"$OUT" && ok "layer list: layer 0 is owned by original" || notok "layer list: layer 0 is owned by original" "$OUT"
  run_ctl "layer list ops --json" 0 layer list ops --json && jcheck "layer list --json: layer 0, original" "d[0]['layer']==0 and d[0]['owner']=='original'"
fi
run_ctl "layer list of an unknown sandbox exits 4" 4 layer list no-such-sandbox
if run_ctl "gc" 0 gc; then
  grep -q "^removed [0-9]* transcript(s), [0-9]* layer(s), [0-9]* image build(s) and the files of [0-9]* deleted sandbox(es), freed " <<<"$OUT" && ok "gc says what it removed" || notok "gc says what it removed" "$OUT"
  run_ctl "gc --json" 0 gc --json && jcheck "gc --json has the five counts" "set(d)=={'transcripts_removed','layers_removed','sandboxes_removed','images_removed','bytes_freed'}"
fi
run_ctl "session list ops" 0 session list ops && { head -1 <<<"$OUT" | grep -q "^ID  *STATE  *POLICY" && ok "session list: a table" || notok "session list: a table" "$OUT"; }
run_ctl "session list ops --json" 0 session list ops --json && jcheck "session list --json is an array" "isinstance(d, list)"
if run_ctl "session create ops --policy destroy" 0 session create ops --policy destroy; then
  WS=$OUT
  run_ctl "session list shows the new session" 0 session list ops --json && jcheck "session list --json: $WS is live, managed, policy destroy" \
    "any(s['workspace_session']=='$WS' and not s['automatic'] and s['finalize_policy']=='destroy' for s in d)"
  run_ctl "session diff of an unchanged session" 0 session diff ops "$WS" && { [[ -z $OUT ]] && ok "session diff: nothing changed" || notok "session diff: nothing changed" "$OUT"; }
  run_ctl "command list --session" 0 command list ops --session "$WS" --json && jcheck "command list --session --json: no command yet" "d==[]"
  run_ctl "session diff --json" 0 session diff ops "$WS" --json && jcheck "session diff --json: no change, an empty diff" \
    "d=={'changes':[],'diff':'','truncated':False}"
  run_ctl "session finalize --discard" 0 session finalize ops "$WS" --discard
fi
if run_ctl "session create ops --json" 0 session create ops --json; then
  WS2=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["workspace_session"])' <<<"$OUT")
  run_ctl "session finalize --json" 0 session finalize ops "$WS2" --json && jcheck "session finalize --json: the session, published, nothing changed" \
    "d['session']['workspace_session']=='$WS2' and d['action']=='published' and d['publication']['changed_paths']==0 and d['publication']['conflicts']==[]"
fi
run_ctl "session finalize of an unknown session exits 4" 4 session finalize ops ws-000000000000 --discard
run_ctl "command list ops" 0 command list ops && { head -1 <<<"$OUT" | grep -q "^ID  *SESSION  *STATUS" && ok "command list: a table" || notok "command list: a table" "$OUT"; }
run_ctl "command list ops --json" 0 command list ops --json && jcheck "command list --json is an array" "isinstance(d, list)"
run_ctl "command cancel of an unknown command exits 4" 4 command cancel ops c-000000000000
run_ctl "sandbox delete ops" 0 sandbox delete ops

# The log: one event per line, "<N>sbxd[context]: message", debug included.
bad=$(grep -vE '^<[0-7]>sbxd(\[[^]]*\])?: ' "$LOG" | head -5)
[[ -z $bad ]] && ok "every log line is '<N>sbxd[context]: message'" || notok "every log line is '<N>sbxd[context]: message'" "$bad"
grep -q '^<7>' "$LOG" && ok "--log-level debug writes debug lines" || notok "--log-level debug writes debug lines" "$(head "$LOG")"

stop_sbxd
rc=$?
((rc == 0)) && [[ ! -e $SOCK ]] && ok "SIGTERM: sbxd exits 0 and removes its socket" \
  || notok "SIGTERM: sbxd exits 0 and removes its socket" "rc=$rc" "$(tail -5 "$LOG")"
PIDS=()
echo "1..$N"
exit $((FAILS > 0))
