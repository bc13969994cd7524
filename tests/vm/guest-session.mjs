// Inside the check-vm guest (tests/vm/guest-test.sh), as root: one MCP
// session of a sandbox's owner through the installed sandbox-mcp, which runs
// as that user (setpriv) and reaches sbxd.service on the default socket, with
// the official MCP SDK client, as an agent's MCP host would. It runs a command,
// edits a file, hits the sandbox's memory and pids limits, restarts sbxd with
// `systemctl restart` and reads the first command's transcript again in the
// same session, keeps a managed session's files in place across a restart
// and across a stop followed by `sbxd --save-kept` (keptChecks), kills sbxd
// for systemd to restart, and leaves a command running for the stop that
// follows.
// Prints one line per check: "ok - ..." or "not ok - ..." with "#" lines.
//
// With --leave-managed FILE it only leaves a managed session with a file
// live, for an orderly power-off, and writes its kept directory to FILE.
//
//   node tests/vm/guest-session.mjs --user NAME --sandbox NAME [--broker-log FILE] [--leave-managed FILE]

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const USER = opt('--user');
const SANDBOX = opt('--sandbox');
const BROKER_LOG = opt('--broker-log', '/dev/null');
const LEAVE_MANAGED = opt('--leave-managed');
/* Under software emulation a call takes 10-30 times longer than natively. */
const CALL_TIMEOUT_MS = 300000;

let failures = 0;
function check(cond, what, detail) {
  console.log(`${cond ? 'ok' : 'not ok'} - ${what}`);
  if (!cond) {
    failures += 1;
    if (detail !== undefined) {
      const text = typeof detail === 'string' ? detail : JSON.stringify(detail, null, 1);
      for (const l of text.split('\n').slice(0, 30)) console.log(`#   ${l}`);
    }
  }
  return cond;
}

async function call(client, name, argsObj) {
  const res = await client.callTool({ name, arguments: { sandbox_id: SANDBOX, ...argsObj } }, undefined,
    { timeout: CALL_TIMEOUT_MS });
  return { isError: res.isError === true, ...res.structuredContent, text: res.content?.[0]?.text };
}

const exec = (client, cmd, extra = {}) =>
  call(client, 'exec_command', { cmd, timeout_ms: 120000, yield_time_ms: 30000, ...extra });

function systemctl(...a) {
  return execFileSync('systemctl', a, { encoding: 'utf8', timeout: CALL_TIMEOUT_MS });
}

function sh(script) {
  return execFileSync('sh', ['-c', script], { encoding: 'utf8', timeout: CALL_TIMEOUT_MS });
}

function timedMs(fn) {
  const t0 = Date.now();
  fn();
  return Date.now() - t0;
}

/* systemctl is-active exits non-zero for every state but active. */
function isActive() {
  try {
    return systemctl('is-active', 'sbxd').trim() === 'active';
  } catch {
    return false;
  }
}

/* ---- managed sessions kept in place at a stop (sbxd(8) "Stopping"): the
 * session's own tmpfs is mounted at /run/sbx/live/SANDBOX/WS/s in PID 1's
 * mount namespace (sbxd's own is private under ProtectSystem=), where this
 * script runs, outside the unit. */
const KEPT_FILES = 3000;
const STATE_DIR = '/var/lib/sbx';
const LIVE_DIR = '/run/sbx/live';

/* FSTYPE SOURCE of what is mounted exactly at path in this (the host's)
 * mount namespace, or '' if nothing is. */
function mountedAt(path) {
  try {
    return sh(`findmnt -rn -o FSTYPE,SOURCE --mountpoint '${path}'`).trim();
  } catch {
    return '';
  }
}

/* A managed session with KEPT_FILES files in dir, and their count and checksum. */
async function managedWithFiles(client, dir) {
  const sum = `ls ${dir} | wc -l; cat ${dir}/* | md5sum`;
  const created = await call(client, 'create_workspace_session', {});
  const ws = created.workspace_session_id;
  if (created.isError || !ws) {
    check(false, `a managed session with ${KEPT_FILES} files`, created);
    return { ws, sum, want: null };
  }
  const made = await exec(client, `mkdir ${dir} && awk 'BEGIN { for (i = 0; i < ${KEPT_FILES}; i++) ` +
    `{ f = "${dir}/f" i; print i > f; close(f) } }' && ${sum}`, { workspace_session_id: ws, yield_time_ms: 120000 });
  check(!made.isError && made.status === 'ok' && (made.output ?? '').startsWith(`${KEPT_FILES}\n`),
    `a managed session with ${KEPT_FILES} files`, made);
  return { ws, sum, want: made.output };
}

/* Finalize ws with publish: its KEPT_FILES files published, the next command sees them. */
async function publishedBack(client, kept, what) {
  const f = await call(client, 'finalize_workspace_session', { workspace_session_id: kept.ws, action: 'publish' });
  const seen = await exec(client, kept.sum);
  check(!f.isError && f.action === 'published' && f.publication?.changed_paths === KEPT_FILES && seen.output === kept.want,
    `${what}: its finalize publishes every file, the next command sees them`, { f, seen, want: kept.want });
}

async function keptChecks(client) {
  const id = JSON.parse(execFileSync('sbxctl', ['--json', 'sandbox', 'show', SANDBOX], { encoding: 'utf8' })).id;
  const live = (ws) => `${LIVE_DIR}/${id}/${ws}/s`;

  const one = await managedWithFiles(client, 'kept1');
  const restartMs = timedMs(() => systemctl('restart', 'sbxd'));
  console.log(`# systemctl restart sbxd with a managed session of ${KEPT_FILES} files: ${restartMs} ms`);
  const ns = sh('readlink /proc/self/ns/mnt /proc/1/ns/mnt /proc/$(systemctl show -p MainPID --value sbxd)/ns/mnt').trim().split('\n');
  const m = mountedAt(live(one.ws));
  check(isActive() && /^tmpfs /.test(m) && ns[0] === ns[1] && ns[2] !== ns[1],
    'after systemctl restart sbxd the managed session\'s tmpfs is mounted in /run/sbx/live in the host\'s mount namespace ' +
    '(sbxd\'s own is private)', { mounted: m, ns });
  const listed = (await call(client, 'list_workspace_sessions', {})).sessions?.find((s) => s.workspace_session_id === one.ws);
  check(listed?.state === 'stopped', 'after the restart the managed session is listed, stopped', listed);
  await publishedBack(client, one, 'the session kept across the restart');
  check(mountedAt(live(one.ws)) === '', 'its live mount is gone once it is finalized', mountedAt(live(one.ws)));

  const two = await managedWithFiles(client, 'kept2');
  const stopMs = timedMs(() => systemctl('stop', 'sbxd'));
  const result = systemctl('show', '-p', 'Result', '--value', 'sbxd').trim();
  const m2 = mountedAt(live(two.ws));
  check(result === 'success' && /^tmpfs /.test(m2), 'systemctl stop sbxd leaves the managed session mounted in the host\'s ' +
    '/run/sbx/live', { result, mounted: m2 });
  let saved = '';
  const saveMs = timedMs(() => {
    try {
      saved = execFileSync('sbxd', ['--config', '/etc/sbx/sbxd.conf', '--save-kept'], { encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      saved = `failed: ${e.message}\n${e.stderr ?? ''}`;
    }
  });
  console.log(`# systemctl stop sbxd with a managed session of ${KEPT_FILES} files: ${stopMs} ms; ` +
    `sbxd --save-kept (the copy a stop made before): ${saveMs} ms`);
  const keptDir = `${STATE_DIR}/sandboxes/${id}/kept/${two.ws}`;
  const left = sh(`ls -A ${LIVE_DIR}; grep -c ' ${LIVE_DIR}/' /proc/self/mounts || true`);
  check(!saved.startsWith('failed') && fs.existsSync(`${keptDir}/upper/kept2/f0`) && left === '0\n',
    'sbxd --save-kept by hand moves it to the state directory and unmounts it', { saved, keptDir, left });
  systemctl('start', 'sbxd');
  await publishedBack(client, two, 'the session saved by sbxd --save-kept, after the next start');
  check(!fs.existsSync(keptDir), 'its saved copy in the state directory goes with the finalize', keptDir);
}

/* For an orderly power-off (VM_POWEROFF=clean): a managed session with a
 * file, left live; its kept directory in the state directory goes to file. */
async function leaveManaged(client, file) {
  const id = JSON.parse(execFileSync('sbxctl', ['--json', 'sandbox', 'show', SANDBOX], { encoding: 'utf8' })).id;
  const ws = (await call(client, 'create_workspace_session', {})).workspace_session_id;
  const r = await exec(client, 'echo kept at the power-off > poweroff.txt', { workspace_session_id: ws });
  if (check(r.status === 'ok', 'a managed session with a file is live for the power-off', r))
    fs.writeFileSync(file, `${STATE_DIR}/sandboxes/${id}/kept/${ws}\n`);
}

async function main() {
  const log = fs.openSync(BROKER_LOG, 'a');
  const transport = new StdioClientTransport({
    command: 'setpriv',
    args: ['--reuid', USER, '--regid', USER, '--init-groups', '--reset-env', '--',
      'sandbox-mcp', '--set', 'runtime,sessions'],
    stderr: log,
  });
  const client = new Client({ name: 'sbx-check-vm', version: '1' });
  await client.connect(transport, { timeout: CALL_TIMEOUT_MS });
  if (LEAVE_MANAGED) {
    await leaveManaged(client, LEAVE_MANAGED);
    await client.close();
    return failures;
  }
  const tools = (await client.listTools(undefined, { timeout: CALL_TIMEOUT_MS })).tools.map((t) => t.name);
  check(['exec_command', 'read_command_lines', 'file_edit', 'file_read'].every((t) => tools.includes(t)),
    `sandbox-mcp as ${USER} lists the runtime tools`, tools);

  const first = await exec(client, 'echo "hello from $(hostname)"; id -u; ls; echo done');
  check(!first.isError && first.status === 'ok' && first.exit_code === 0 && /hello from/.test(first.output) &&
    /^0$/m.test(first.output), 'exec_command runs a command in the sandbox (uid 0 inside)', first);

  const edit = await call(client, 'file_edit', {
    path: 'README.md', edits: [{ old_string: '# ', new_string: '# edited in the VM: ', replace_all: false }],
  });
  const seen = await exec(client, 'head -n 1 README.md');
  check(!edit.isError && /^# edited in the VM: /.test(seen.output ?? ''),
    'file_edit publishes a change the next command sees', { edit, seen });

  /* Each write publishes a layer: the snapshot the file tools read is then an
   * overlay of 14 layers. Debian 12's kernel has no "lowerdir+", and their
   * full paths in one lowerdir string are more than the 255 bytes fsconfig()
   * takes (sbxd passes the layers' names instead). */
  for (let i = 0; i < 12; i++) await call(client, 'file_write', { path: `notes/${i}.txt`, content: `note ${i}\n` });
  const deep = await call(client, 'file_read', { path: 'notes/0.txt' });
  const top = await call(client, 'file_read', { path: 'README.md', limit: 1 });
  check(!deep.isError && deep.content === 'note 0\n' && !top.isError && /^# edited in the VM: /.test(top.content ?? ''),
    'file_read reads a snapshot of 14 layers', { deep, top });

  const blame = await call(client, 'file_blame', { path: 'README.md' });
  check(!blame.isError && /^operation:/.test(blame.ranges?.[0]?.owner ?? '') &&
    blame.ranges.some((r) => r.owner === 'original'), 'file_blame names the edit\'s operation and the original lines', blame);

  const mainPid = () => systemctl('show', '-p', 'MainPID', '--value', 'sbxd').trim();
  const pidBefore = mainPid();
  const oom = await exec(client, "awk 'BEGIN { s = \"xxxxxxxxxxxxxxxx\"; while (1) { s = s s } }'");
  check(oom.status === 'error' && oom.end_reason === 'out_of_memory',
    'a command over the 64M memory limit ends with end_reason out_of_memory (memory.events)', oom);

  const pids = await exec(client, 'i=0; while [ $i -lt 100 ]; do sleep 5 & i=$((i+1)); done; wait');
  check(pids.status === 'error' && pids.end_reason === 'pids_limit',
    'a command over the 32 pids limit ends with end_reason pids_limit (pids.events)', pids);

  /* The sandbox's pids limit (32) holds for two sessions together, each of
   * which may have 32 itself: counted on the host while their processes run
   * (perl, for which a refused fork is not fatal, as it is for sh). */
  const both = await Promise.all([1, 2].map((k) =>
    exec(client, `perl -e '$0 = "sbxvm-pids-${k}"; for (1 .. 30) { my $p = fork; if (defined $p && !$p) { sleep 20; exit } } sleep 20'`,
      { yield_time_ms: 8000, timeout_ms: 60000 })));
  const counted = execFileSync('sh', ['-c', 'p=$(pgrep -f "^sbxvm-pids-[12]" | head -1); ' +
    'b=/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/$p/cgroup); b=${b%/*}; ' +
    'echo "$(pgrep -fc "^sbxvm-pids-[12]") $(cat $b/pids.current) $(cat $b/pids.max) $b"'], { encoding: 'utf8' }).trim().split(' ');
  check(both.every((r) => r.status === 'running') && Number(counted[0]) >= 20 && Number(counted[0]) <= 32 &&
    Number(counted[1]) <= 32 && counted[2] === '32' && /\/sandboxes\/sb-[0-9a-f]+$/.test(counted[3]),
    'two sessions of a sandbox with --pids 32 run at most 32 processes together (the sandbox\'s cgroup pids.max)',
    { both, counted });
  execFileSync('sh', ['-c', 'pkill -f "^sbxvm-pids-[12]" || true']);
  for (const r of both)
    for (let i = 0; i < 120; i++) {
      const st = await call(client, 'read_command_lines', { command_session_id: r.command_session_id, limit: 0 });
      if (st.status !== 'running') break;
      await new Promise((res) => setTimeout(res, 500));
    }

  const after = await exec(client, 'echo fine');
  check(after.status === 'ok' && after.output === 'fine\n', 'the sandbox works after both limits were hit', after);
  check(mainPid() === pidBefore, 'the OOM kill in a session did not stop or restart sbxd.service',
    { before: pidBefore, after: mainPid() });

  let restarted = true;
  try {
    systemctl('restart', 'sbxd');
  } catch (e) {
    restarted = false;
    check(false, 'systemctl restart sbxd', `${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
  if (restarted) check(isActive(), 'systemctl restart sbxd: active again');

  const again = await call(client, 'read_command_lines', { command_session_id: first.command_session_id, start_offset: 0 });
  const lines = (again.output ?? '');
  check(!again.isError && again.status === 'ok' && lines === first.output && again.total_lines === first.total_lines,
    'after the restart, read_command_lines in the same session returns the first transcript unchanged',
    { before: first.output, after: again });

  const kept = await call(client, 'file_read', { path: 'README.md', limit: 1 });
  check(!kept.isError && /^# edited in the VM: /.test(kept.content ?? kept.text ?? ''),
    'after the restart, file_read sees the layer file_edit published', kept);

  await keptChecks(client);

  /* A crash: systemd kills what is left in the unit and starts sbxd again
   * (Restart=on-failure), which reports the command it lost. */
  const lost = await exec(client, 'echo before-crash; sleep 3601', { yield_time_ms: 5000, timeout_ms: 0 });
  const crashedPid = mainPid();
  systemctl('kill', '--kill-who=main', '--signal=SIGKILL', 'sbxd');
  let back = false;
  for (let i = 0; i < 600 && !back; i++) {
    await new Promise((r) => setTimeout(r, 200));
    const pid = mainPid();
    back = pid !== '0' && pid !== crashedPid && isActive();
  }
  check(lost.status === 'running' && back, 'after a SIGKILL of sbxd, systemd starts it again (Restart=on-failure)',
    { lost, crashedPid, now: mainPid() });
  const reported = await call(client, 'read_command_lines', { command_session_id: lost.command_session_id });
  const fresh = await exec(client, 'echo fine');
  check(reported.status === 'error' && reported.end_reason === 'supervisor_lost' && reported.output === 'before-crash\n' &&
    fresh.status === 'ok', 'the command running at the crash is reported supervisor_lost, new commands run', { reported, fresh });

  const running = await exec(client, "trap '' TERM; echo started; sleep 3600", { yield_time_ms: 5000, timeout_ms: 0 });
  check(running.status === 'running' && /started/.test(running.output ?? ''),
    'a command that ignores SIGTERM is left running for the stop', running);

  await client.close();
  return failures;
}

main().then(
  (f) => process.exit(f ? 1 : 0),
  (e) => {
    check(false, 'the MCP session ran to its end', e.stack ?? String(e));
    process.exit(1);
  },
);
