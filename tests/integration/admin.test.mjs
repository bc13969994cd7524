// sbxctl: sandbox create/list/delete, status; ownership enforced by sbxd
// against the broker's kernel credentials (SO_PEERCRED).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, sbxctl, run, SBXCTL, writeFixture, resultText, hostProcsMatching, sleep } from './helpers.mjs';

// world: the temporary and run directories are traversable so that an
// unprivileged broker can reach the socket and be refused by sbxd itself.
// No warm claim of the built-in template (sbxd.conf(5)): the state directory holds adm's alone.
const h = useSbx({ sandboxes: [{ name: 'adm', memory: 256 * 1024 * 1024, pids: 100 }], world: true,
  config: '[sbxd]\nsocket_mode = 0666\nimport_timeout_seconds = 3\n[template default]\nwarm = 0\n' });
const NOBODY = 65534;

function sandboxesOf(stdout) {
  const j = JSON.parse(stdout);
  const list = Array.isArray(j) ? j : j.sandboxes;
  assert.ok(Array.isArray(list), `sandbox list --json: ${stdout}`);
  return list;
}

h.test('sandbox list --json describes the sandbox', async () => {
  const r = await sbxctl(h.socket, ['sandbox', 'list', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const sb = sandboxesOf(r.stdout).find((s) => s.name === 'adm');
  assert.ok(sb, r.stdout);
  assert.equal(sb.owner_uid, 0);
  assert.equal(sb.memory_bytes, 256 * 1024 * 1024);
  assert.equal(sb.pids_max, 100);
  assert.equal(sb.source_dir, h.sandboxes.adm.src);
  const plain = await sbxctl(h.socket, ['sandbox', 'list']);
  assert.equal(plain.code, 0);
  assert.match(plain.stdout, /adm/);
});

h.test('status --json reports the supervisor', async () => {
  const r = await sbxctl(h.socket, ['status', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout);
  assert.equal(Number(j.pid), h.sbxd.pid);
  assert.ok(['v1', 'v2'].includes(j.cgroup_backend), `cgroup_backend ${j.cgroup_backend}`);
  assert.equal(j.state_dir, h.stateDir);
  assert.equal(j.run_dir, h.runDir);
  assert.ok(j.sandboxes >= 1);
  process.stdout.write(`# sbxd status: ${JSON.stringify(j)}\n`);
  const plain = await sbxctl(h.socket, ['status']);
  assert.equal(plain.code, 0);
});

h.test('SBX_SOCKET is honoured by sbxctl; a wrong socket fails clearly', async () => {
  const r = await run(SBXCTL, ['status', '--json'], { env: { ...process.env, SBX_SOCKET: h.socket } });
  assert.equal(r.code, 0, r.stderr);
  const bad = await run(SBXCTL, ['--socket', path.join(h.dir, 'nope.sock'), 'status']);
  assert.notEqual(bad.code, 0);
  assert.ok(bad.stderr.length > 0, 'an error message on stderr');
});

h.test('create refuses duplicates, missing sources and bad names', async () => {
  let r = await sbxctl(h.socket, ['sandbox', 'create', 'adm', '--source', h.sandboxes.adm.src]);
  assert.notEqual(r.code, 0, 'duplicate name accepted');
  r = await sbxctl(h.socket, ['sandbox', 'create', 'ghost', '--source', path.join(h.dir, 'does-not-exist')]);
  assert.notEqual(r.code, 0, 'missing source accepted');
  r = await sbxctl(h.socket, ['sandbox', 'create', '../evil', '--source', h.sandboxes.adm.src]);
  assert.notEqual(r.code, 0, 'a name with a slash accepted');
  r = await sbxctl(h.socket, ['sandbox', 'list', '--json']);
  const names = sandboxesOf(r.stdout).map((s) => s.name);
  assert.deepEqual(names, ['adm']);
});

// import_timeout_seconds: an import that does not finish (here its helper is
// stopped, as one reading a stalled network filesystem would be) is killed.
h.test('an import past import_timeout_seconds is killed; the sandbox is not made and its name is free', async () => {
  const src = path.join(h.dir, 'src-slow');
  for (let d = 0; d < 30; d++) {
    fs.mkdirSync(path.join(src, `d${d}`), { recursive: true });
    for (let f = 0; f < 1000; f++) fs.writeFileSync(path.join(src, `d${d}`, `f${f}`), 'x');
  }
  const create = sbxctl(h.socket, ['sandbox', 'create', 'slow', '--source', src], { timeout: 120000 });
  const sbxdPid = h.sbxd.proc.pid;
  let helper;
  while (!helper) {
    helper = hostProcsMatching('sbx-worker --import').find((p) =>
      fs.readFileSync(`/proc/${p.pid}/stat`, 'utf8').split(') ')[1].split(' ')[1] === String(sbxdPid));
    if (!helper) await sleep(2);
  }
  process.kill(helper.pid, 'SIGSTOP');
  const r = await create;
  assert.notEqual(r.code, 0, 'the stopped import finished');
  assert.match(r.stderr, /did not finish within 3 s \(import_timeout_seconds in sbxd\.conf\); nothing of it is kept/);
  const list = await sbxctl(h.socket, ['sandbox', 'list', '--json']);
  assert.ok(!sandboxesOf(list.stdout).some((s) => s.name === 'slow'));
  assert.ok(!fs.existsSync(`/proc/${helper.pid}/stat`) || fs.readFileSync(`/proc/${helper.pid}/stat`, 'utf8').includes(') Z'),
    'the helper is gone');
  // The name is free again: a quick import of a small tree takes it.
  fs.rmSync(src, { recursive: true });
  await writeFixture(src);
  const again = await sbxctl(h.socket, ['sandbox', 'create', 'slow', '--source', src]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal((await sbxctl(h.socket, ['sandbox', 'delete', 'slow'])).code, 0);
});

h.test('delete removes a sandbox; its tools then fail cleanly', async () => {
  const src = path.join(h.dir, 'src-tmp');
  await writeFixture(src);
  let r = await sbxctl(h.socket, ['sandbox', 'create', 'tmpbox', '--source', src, '--json']);
  assert.equal(r.code, 0, r.stderr);
  const tmpId = JSON.parse(r.stdout).id;
  const e = await h.mcp.sc('exec_command', { sandbox_id: 'tmpbox', cmd: 'echo x > f; cat README.md' });
  assert.equal(e.status, 'ok');
  r = await sbxctl(h.socket, ['sandbox', 'delete', 'tmpbox']);
  assert.equal(r.code, 0, r.stderr);
  r = await sbxctl(h.socket, ['sandbox', 'list', '--json']);
  assert.ok(!sandboxesOf(r.stdout).some((s) => s.name === 'tmpbox'));
  await h.mcp.err('exec_command', { sandbox_id: 'tmpbox', cmd: 'true' });
  await h.mcp.err('read_command_lines', { sandbox_id: 'tmpbox', command_session_id: e.command_session_id });
  r = await sbxctl(h.socket, ['sandbox', 'delete', 'tmpbox']);
  assert.notEqual(r.code, 0, 'deleting twice succeeded');
  assert.ok(fs.existsSync(path.join(src, 'README.md')), 'delete must not touch the source');
  // its layers are gone from the state directory (sbxd(8): sandboxes/ID/layers/N)
  const adm = sandboxesOf((await sbxctl(h.socket, ['sandbox', 'list', '--json'])).stdout).find((x) => x.name === 'adm');
  assert.match(adm.id, /^sb-[0-9a-f]{16}$/);
  assert.ok(fs.existsSync(path.join(h.stateDir, 'sandboxes', adm.id, 'layers', '0')), 'layout as documented in sbxd(8)');
  assert.ok(!fs.existsSync(path.join(h.stateDir, 'sandboxes', tmpId)), 'the deleted sandbox\'s layers are still on disk');
  assert.deepEqual(fs.readdirSync(path.join(h.stateDir, 'sandboxes')), [adm.id]);
});

h.test('ownership: another uid is refused by sbxd (permission error result)', async () => {
  const own = await h.mcp.sc('exec_command', { sandbox_id: 'adm', cmd: 'echo secret-output' });
  const s = await h.connect({ uid: NOBODY });
  try {
    const r = await s.call('exec_command', { sandbox_id: 'adm', cmd: 'echo should-not-run' });
    assert.equal(r.isError, true, `uid ${NOBODY} ran a command in root's sandbox: ${JSON.stringify(r.structuredContent)}`);
    const text = resultText(r);
    process.stdout.write(`# uid ${NOBODY} got: ${text}\n`);
    assert.match(text, /permission|denied|not permitted|owner|EACCES|EPERM|forbidden|not allowed/i);
    const r2 = await s.call('read_command_lines', { sandbox_id: 'adm', command_session_id: own.command_session_id });
    assert.equal(r2.isError, true, 'another uid read the transcript');
    assert.ok(!resultText(r2).includes('secret-output'));
  } finally {
    await s.close();
  }
  const ctl = await run('/usr/bin/setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', SBXCTL, '--socket', h.socket, 'sandbox', 'delete', 'adm']);
  assert.notEqual(ctl.code, 0, `uid ${NOBODY} deleted root's sandbox`);
  const list = await sbxctl(h.socket, ['sandbox', 'list', '--json']);
  assert.ok(sandboxesOf(list.stdout).some((x) => x.name === 'adm'));
});

h.test('ownership: a sandbox created for another uid (--owner) is usable by that uid and by root', async () => {
  const src = path.join(h.dir, 'src-owned');
  await writeFixture(src);
  let r = await sbxctl(h.socket, ['sandbox', 'create', 'owned', '--source', src, '--owner', String(NOBODY)]);
  assert.equal(r.code, 0, r.stderr);
  r = await sbxctl(h.socket, ['sandbox', 'list', '--json']);
  assert.equal(sandboxesOf(r.stdout).find((s) => s.name === 'owned').owner_uid, NOBODY);
  const s = await h.connect({ uid: NOBODY });
  try {
    const sc = await s.sc('exec_command', { sandbox_id: 'owned', cmd: 'echo by-owner > f; cat f; id -u' });
    assert.equal(sc.output, 'by-owner\n0\n');
    const back = await s.sc('read_command_lines', { sandbox_id: 'owned', command_session_id: sc.command_session_id });
    assert.equal(back.status, 'ok');
    // the owner still cannot use root's sandbox
    await s.err('exec_command', { sandbox_id: 'adm', cmd: 'true' });
  } finally {
    await s.close();
  }
  const byRoot = await h.mcp.sc('exec_command', { sandbox_id: 'owned', cmd: 'cat f' });
  assert.equal(byRoot.output, 'by-owner\n');
  const ctl = await run('/usr/bin/setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', SBXCTL, '--socket', h.socket,
    'sandbox', 'create', 'self-made', '--source', src]);
  assert.notEqual(ctl.code, 0, 'a non-root user created a sandbox');
});
