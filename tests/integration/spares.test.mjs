// Spare sessions (sbxd.conf session_spares, supervisor/core/spare.c): an automatic
// session set up ahead after a read-only automatic command. A command that
// gets a spare must see exactly what a session made on the spot would see:
// the current layers, an empty /tmp, no process of an earlier command. Spares
// are not listed as sessions, never count as live sessions, give way to real
// sessions under the limits, go when a publication makes them stale and when
// they idle.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { useSbx, Harness, sbxctl, waitFor, sleep, T } from './helpers.mjs';

// One spare, so that each test knows which session a command gets; the default
// (two) has a test of its own below.
const h = useSbx({ sandboxes: [{ name: 'spare' }], sets: 'runtime,sessions', config: '[sbxd]\nsession_spares = 1\n' });
const SB = 'spare';
const sc = (name, args) => h.mcp.sc(name, { sandbox_id: SB, ...args });
const exec = (cmd) => sc('exec_command', { cmd });

async function status(socket = h.socket) {
  const r = await sbxctl(socket, ['status', '--json']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}
const spares = async (socket) => (await status(socket)).spare_sessions;
const waitSpares = (n, socket) => waitFor(async () => (await spares(socket)) === n,
  { what: `${n} spare session(s)`, timeout: 15000 });
/* Ids of the spares sbxd made, from its debug log. */
const madeSpares = () => [...fs.readFileSync(h.sbxdLog, 'utf8')
  .matchAll(/Made spare session (ws-[0-9a-f]+) of sandbox 'spare'/g)].map((m) => m[1]);

h.test('a read-only automatic command leaves one spare; it is no live session and not listed', async () => {
  const r = await exec('true');
  assert.equal(r.status, 'ok');
  await waitSpares(1);
  const st = await status();
  assert.equal(st.live_sessions, 0);
  assert.deepEqual((await sc('list_workspace_sessions', {})).sessions, []);
  const show = await sbxctl(h.socket, ['sandbox', 'show', SB, '--json']);
  assert.equal(JSON.parse(show.stdout).live_sessions, 0, show.stdout);
  const plain = await sbxctl(h.socket, ['status']);
  assert.match(plain.stdout, /^spare sessions: 1$/m);
});

h.test('the next automatic command runs in the spare, which starts clean', async () => {
  // Leave traces where a reused session would show them: /tmp, a process, the environment.
  const first = await exec(`echo x > /tmp/trace; (sleep ${T(301)} &) ; export SBX_TRACE=1; true`);
  assert.equal(first.status, 'ok');
  await waitSpares(1);
  const made = madeSpares();
  const second = await exec(`ls -A /tmp; ps -eo args | grep -c "[s]leep ${T(301)}"; echo "env=$SBX_TRACE"`);
  assert.equal(made.at(-1), second.workspace_session_id, 'the command did not get the spare');
  assert.notEqual(first.workspace_session_id, second.workspace_session_id);
  assert.equal(second.output, '0\nenv=\n', `not a clean session: ${JSON.stringify(second.output)}`);
});

h.test('a publication drops stale spares; the next command sees the new layer', async () => {
  await exec('true');
  await waitSpares(1);
  await sc('file_write', { path: 'spare-new.txt', content: 'fresh\n' });
  assert.equal(await spares(), 0, 'a stale spare survived the publication');
  const r = await exec('cat spare-new.txt');
  assert.equal(r.output, 'fresh\n');
  // An automatic command that publishes makes no spare (the next one would be stale).
  await exec('true');
  await waitSpares(1);
  const w = await exec('echo more >> spare-new.txt');
  assert.equal(w.status, 'ok');
  await sleep(300);
  assert.equal(await spares(), 0);
  assert.equal((await exec('cat spare-new.txt')).output, 'fresh\nmore\n');
});

h.test('spares give way: the sandbox still gets its full number of managed sessions', async () => {
  await exec('true');
  await waitSpares(1);
  const ids = [];
  try {
    for (let i = 0; i < 64; i++) ids.push((await sc('create_workspace_session', {})).workspace_session_id);
    assert.equal(await spares(), 0);
    const over = await h.mcp.call('create_workspace_session', { sandbox_id: SB });
    assert.equal(over.isError, true, 'the 65th session was not refused');
  } finally {
    for (const id of ids) await sc('finalize_workspace_session', { workspace_session_id: id, action: 'discard' });
  }
});

h.test('session_spares = 0 makes none; an idle spare goes after session_spare_idle_seconds', async () => {
  for (const [config, want] of [['[sbxd]\nsession_spares = 0\n', 0], ['[sbxd]\nsession_spare_idle_seconds = 1\n', 2]]) {
    const other = await Harness.create({ sandboxes: [{ name: 'spare' }], config });
    try {
      const r = await other.mcp.sc('exec_command', { sandbox_id: 'spare', cmd: 'true' });
      assert.equal(r.status, 'ok');
      if (want === 0) {
        await sleep(500);
        assert.equal(await spares(other.socket), 0);
      } else {
        await waitSpares(want, other.socket);
        await waitSpares(0, other.socket);
      }
    } finally {
      await other.teardown();
    }
  }
});

h.test('by default two spares: two commands at once both get one', async () => {
  const other = await Harness.create({ sandboxes: [{ name: 'spare' }] });
  try {
    const exec2 = (cmd) => other.mcp.sc('exec_command', { sandbox_id: 'spare', cmd });
    assert.equal((await exec2('true')).status, 'ok');
    await waitSpares(2, other.socket);
    const made = [...fs.readFileSync(other.sbxdLog, 'utf8')
      .matchAll(/Made spare session (ws-[0-9a-f]+) of sandbox 'spare'/g)].map((m) => m[1]);
    const [a, b] = await Promise.all([exec2('echo a'), exec2('echo b')]);
    assert.deepEqual([a.output, b.output], ['a\n', 'b\n']);
    assert.notEqual(a.workspace_session_id, b.workspace_session_id);
    for (const r of [a, b]) assert.ok(made.includes(r.workspace_session_id), `${r.workspace_session_id} was no spare`);
  } finally {
    await other.teardown();
  }
});
