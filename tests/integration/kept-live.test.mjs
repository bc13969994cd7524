// Kept sessions in place (issue 15, item 4; sbxd(8) "Stopping"): at SIGTERM
// sbxd mounts each managed session's own tmpfs (and a claim's /tmp) at
// RUN_DIR/live/SANDBOX/WS instead of copying it, and exits; the next sbxd
// adopts them, read in place. `sbxd --save-kept` copies them to the state
// directory (before a reboot) and unmounts them; the next start restores from
// there. The stop bounds below only catch a hang; the times are printed.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, sandboxDir, mountsUnder, waitFor } from './helpers.mjs';

const FILES = 20000;
const h = useSbx({ sandboxes: [{ name: 'big' }], sets: 'runtime,sessions,lifecycle',
  config: '[sbxd]\n[template default]\nwarm = 0\n' });

const sc = (name, args) => h.mcp.sc(name, { sandbox_id: 'big', ...args });
const MAKE = `python3 -c 'import os\nos.makedirs("many")\nfor i in range(${FILES}): open("many/f%d" % i, "w").write("%d\\n" % i)'`;
// Every file back, each with its own content: a count and a checksum of all of them.
const CHECK = 'ls many | wc -l; cat $(seq -f "many/f%g" 0 $((20000 - 1))) | md5sum | cut -d" " -f1';
const expected = async () => (await sc('exec_command', { cmd: `python3 -c 'import hashlib\nprint(hashlib.md5("".join("%d\\n" % i for i in range(${FILES})).encode()).hexdigest())'` })).output.trim();

const liveDir = () => path.join(h.runDir, 'live');
const liveMounts = () => mountsUnder(liveDir());

async function managedWithFiles() {
  const ws = (await sc('create_workspace_session', {})).workspace_session_id;
  const r = await sc('exec_command', { workspace_session_id: ws, yield_time_ms: 120000, cmd: MAKE });
  assert.equal(r.status, 'ok', r.output);
  return ws;
}

async function stopTimed(what) {
  const res = await h.sbxd.stop({ timeout: 60000 });
  process.stdout.write(`# sbxd stopped ${res.ms} ms after SIGTERM with ${what}\n`);
  assert.equal(res.code, 0, JSON.stringify(res));
  return res;
}

async function restart() {
  await h.sbxd.start();
  return h.connect();
}

h.test(`SIGTERM with a managed session of ${FILES} files: kept in place, every file back after the restart`, async () => {
  const want = await expected();
  const ws = await managedWithFiles();
  const id = sandboxDir(h.stateDir, 'big').split('/').pop();
  await stopTimed(`a managed session of ${FILES} files`);
  // Mounted where sbxd(8) says, with its note; nothing copied to the state directory.
  assert.equal(liveMounts().length, 1, `mounted: ${liveMounts().join(', ')}`);
  assert.match(fs.readFileSync(path.join(liveDir(), id, ws, 'meta'), 'utf8'), new RegExp(`^id ${ws}\npolicy publish\n`));
  assert.ok(!fs.existsSync(path.join(h.stateDir, 'sandboxes', id, 'kept', ws)), 'no copy in the state directory');
  const mcp = await restart();
  const listed = (await mcp.sc('list_workspace_sessions', { sandbox_id: 'big' })).sessions.find((s) => s.workspace_session_id === ws);
  assert.ok(listed, `session ${ws} is back`);
  assert.equal(listed.state, 'stopped');
  // A finalize after the adoption publishes the right layer, and the mount goes.
  const f = await mcp.sc('finalize_workspace_session', { sandbox_id: 'big', workspace_session_id: ws, action: 'publish' });
  assert.equal(f.action, 'published');
  assert.equal(f.publication.changed_paths, FILES);
  const c = await mcp.sc('exec_command', { sandbox_id: 'big', cmd: CHECK });
  assert.equal(c.output, `${FILES}\n${want}\n`);
  assert.deepEqual(liveMounts(), [], 'unmounted once finalized');
  assert.deepEqual(fs.readdirSync(path.join(liveDir(), id)), [], 'its directory in RUN_DIR/live is gone');
  await mcp.sc('exec_command', { sandbox_id: 'big', cmd: 'rm -r many' });
});

h.test('sbxd --save-kept copies what was kept in place to the state directory; the next start restores from there', async () => {
  const want = await expected();
  const ws = await managedWithFiles();
  const id = sandboxDir(h.stateDir, 'big').split('/').pop();
  await stopTimed(`a managed session of ${FILES} files`);
  const t0 = Date.now();
  const saved = await h.sbxd.saveKept();
  process.stdout.write(`# sbxd --save-kept took ${Date.now() - t0} ms for ${FILES} files\n`);
  assert.equal(saved.code, 0, saved.stderr);
  assert.deepEqual(liveMounts(), [], 'nothing left mounted');
  assert.deepEqual(fs.readdirSync(liveDir()), []);
  assert.ok(fs.existsSync(path.join(h.stateDir, 'sandboxes', id, 'kept', ws, 'upper', 'many', 'f0')));
  const mcp = await restart();
  const f = await mcp.sc('finalize_workspace_session', { sandbox_id: 'big', workspace_session_id: ws, action: 'publish' });
  assert.equal(f.publication.changed_paths, FILES);
  const c = await mcp.sc('exec_command', { sandbox_id: 'big', cmd: CHECK });
  assert.equal(c.output, `${FILES}\n${want}\n`);
  assert.ok(!fs.existsSync(path.join(h.stateDir, 'sandboxes', id, 'kept', ws)), 'the kept copy went with the finalize');
  await mcp.sc('exec_command', { sandbox_id: 'big', cmd: 'rm -r many' });
});

h.test('SIGTERM with a claim: its /workspace, root upper and /tmp kept in place and back after the restart', async () => {
  const { sandbox_claim_name: n } = await h.mcp.sc('create_sandbox', { shutdown_after_seconds: null });
  const exec = (mcp, command) => mcp.sc('execute_command', { sandbox_claim_name: n, command });
  const made = await exec(h.mcp, `cd /workspace && ${MAKE} && echo tmp > /tmp/t.txt && echo home > /root/r.txt && echo ok`);
  assert.equal(made.stdout, 'ok\n', made.stderr);
  await stopTimed(`a claim of ${FILES} files`);
  assert.equal(liveMounts().length, 2, `the session tmpfs and /tmp: ${liveMounts().join(', ')}`);
  await restart();
  const mcp = h.mcp;
  await waitFor(async () => (await mcp.sc('get_sandbox_status', { sandbox_claim_name: n })).ready,
    { timeout: 60000, what: 'the claim to run again after the restart' });
  const r = await exec(mcp, `cd /workspace && cat /tmp/t.txt /root/r.txt && ${CHECK}`);
  assert.equal(r.stdout, `tmp\nhome\n${FILES}\n${await expected()}\n`, r.stderr);
  // The kept tmpfs went once the claim's new session ran from it.
  await waitFor(() => liveMounts().length === 0, { what: 'the claim\'s kept mounts to go' });
  await mcp.sc('delete_sandbox', { sandbox_claim_name: n });
});

h.test('sbxd --save-kept refuses to run under a running sbxd, and copies nothing', async () => {
  const ws = (await sc('create_workspace_session', {})).workspace_session_id;
  await sc('exec_command', { workspace_session_id: ws, cmd: 'echo x > x.txt' });
  const r = await h.sbxd.saveKept();
  assert.equal(r.code, 1);
  assert.match(r.stderr, /Another sbxd is serving .*sbxd\.sock/);
  const id = sandboxDir(h.stateDir, 'big').split('/').pop();
  assert.ok(!fs.existsSync(path.join(h.stateDir, 'sandboxes', id, 'kept', ws)));
  await sc('finalize_workspace_session', { workspace_session_id: ws, action: 'discard' });
});
