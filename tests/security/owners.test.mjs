// Per-owner quotas below the global caps (issue 15, item 7): the sandboxes
// one uid owns hold at most owner_sandboxes_max sandboxes,
// owner_sessions_max live workspace sessions and owner_commands_max running
// commands together, so that one owner with many sandboxes cannot take what
// the global caps leave to everyone (a second owner still gets sessions and
// commands). Refusals name the quota, its value, the use and the owner;
// sbxctl owner list / show give each owner's use against each quota, root
// every owner, anyone else their own. Root is exempt.
import assert from 'node:assert/strict';
import path from 'node:path';
import { useSbx, writeFixture, sbxctl, run, waitFor, resultText, SBXCTL } from '../integration/helpers.mjs';

const ALICE = 61001;
const BOB = 61002;
const QUOTAS = { sessions: 4, sandboxes: 3, commands: 3 };
const h = useSbx({
  sandboxes: [],
  sets: 'runtime,sessions',
  world: true,
  config: `[sbxd]\nowner_sessions_max = ${QUOTAS.sessions}\nowner_sandboxes_max = ${QUOTAS.sandboxes}\n`
    + `owner_commands_max = ${QUOTAS.commands}\nsession_spares = 0\n`
    // no warm claim: root's line counts the sandboxes and sessions made here only
    + '[template default]\nwarm = 0\n',
});

async function create(name, owner) {
  const src = path.join(h.dir, 'src-' + name);
  await writeFixture(src);
  const args = ['sandbox', 'create', name, '--source', src, ...(owner === null ? [] : ['--owner', String(owner)])];
  return sbxctl(h.socket, args);
}

/* sbxctl as uid. */
const sbxctlAs = (uid, args) => run('/usr/bin/setpriv',
  [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', SBXCTL, '--socket', h.socket, ...args]);

let alice = null;
let bob = null;
let made = null;
async function setup() {
  for (const [name, owner] of [['a1', ALICE], ['a2', ALICE], ['a3', ALICE], ['b1', BOB], ['r1', null]]) {
    const r = await create(name, owner);
    assert.equal(r.code, 0, `${name}: ${r.stderr}`);
  }
  alice = await h.connect({ uid: ALICE });
  bob = await h.connect({ uid: BOB });
}
const test = (name, fn) => h.test(name, async () => {
  made ??= setup();
  await made;
  await fn();
});

test('owner_sandboxes_max: a fourth sandbox of one owner is refused by name; another owner and root still get one', async () => {
  const r = await create('a4', ALICE);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, new RegExp(`owner quota owner_sandboxes_max reached: the sandboxes of owner uid ${ALICE} `
    + `have 3 sandboxes, 1 more asked \\(limit 3\\)`), r.stderr);
  assert.match(r.stderr, /raise owner_sandboxes_max in sbxd\.conf/);
  const b = await create('b2', BOB);
  assert.equal(b.code, 0, b.stderr);
  for (const n of ['r2', 'r3', 'r4']) assert.equal((await create(n, null)).code, 0, `root is exempt (${n})`);
  assert.equal((await sbxctl(h.socket, ['sandbox', 'delete', 'b2'])).code, 0);
});

test('owner_sessions_max: one owner with many sandboxes cannot take all sessions; a second owner still gets them', async () => {
  const ids = [];
  for (const sb of ['a1', 'a2', 'a1', 'a2']) {
    ids.push([sb, (await alice.sc('create_workspace_session', { sandbox_id: sb })).workspace_session_id]);
  }
  for (const [call, args] of [['create_workspace_session', { sandbox_id: 'a3' }],
    ['exec_command', { sandbox_id: 'a3', cmd: 'echo no' }]]) {
    const e = await alice.err(call, args);
    assert.match(e, new RegExp(`owner quota owner_sessions_max reached: the sandboxes of owner uid ${ALICE} have 4 live `
      + 'workspace sessions, 1 more asked \\(limit 4\\); finalize or discard some'), e);
  }
  // the other owner is not affected
  const other = await bob.sc('exec_command', { sandbox_id: 'b1', cmd: 'echo bob' });
  assert.equal(other.output, 'bob\n');
  const bs = await bob.sc('create_workspace_session', { sandbox_id: 'b1' });
  // root (exempt) may hold more than the quota
  const rootIds = [];
  for (let i = 0; i < QUOTAS.sessions + 1; i++) {
    rootIds.push((await h.mcp.sc('create_workspace_session', { sandbox_id: 'r1' })).workspace_session_id);
  }
  // what sbxctl owner list shows meanwhile (root: every owner)
  const list = await sbxctl(h.socket, ['owner', 'list']);
  assert.equal(list.code, 0, list.stderr);
  const rows = list.stdout.trim().split('\n').map((l) => l.trim().split(/\s+/));
  assert.deepEqual(rows[0], ['OWNER', 'USER', 'SESSIONS', 'SANDBOXES', 'COMMANDS', 'TRANSCRIPTS', 'LAYERS', 'JOBS']);
  const row = (uid) => rows.find((x) => x[0] === String(uid));
  assert.deepEqual(row(ALICE).slice(2, 5), ['4/4', '3/3', '0/3'], list.stdout);
  assert.deepEqual(row(BOB).slice(2, 5), ['1/4', '1/3', '0/3'], list.stdout);
  assert.deepEqual(row(0).slice(2, 5), [`${QUOTAS.sessions + 1}/-`, '4/-', '0/-'], list.stdout);
  const json = JSON.parse((await sbxctl(h.socket, ['--json', 'owner', 'list'])).stdout);
  assert.deepEqual(json.map((o) => o.uid), [0, ALICE, BOB]);
  const a = json.find((o) => o.uid === ALICE);
  assert.equal(a.exempt, false);
  assert.deepEqual(a.quotas.slice(0, 3).map((q) => [q.name, q.used, q.limit]),
    [['owner_sessions_max', 4, 4], ['owner_sandboxes_max', 3, 3], ['owner_commands_max', 0, 3]]);
  // transcripts: bytes stored (whole blocks) against owner_transcripts_max_bytes
  assert.deepEqual(a.quotas.slice(3).map((q) => q.name), ['owner_transcripts_max_bytes', 'owner_layers_max_bytes', 'owner_jobs_max']);
  assert.ok(a.quotas[3].used % 4096 === 0 && a.quotas[3].used < a.quotas[3].limit, JSON.stringify(a.quotas[3]));
  assert.equal(json.find((o) => o.uid === 0).exempt, true);
  const show = await sbxctl(h.socket, ['owner', 'show', String(ALICE)]);
  assert.equal(show.code, 0, show.stderr);
  assert.equal(show.stdout, `owner: ${ALICE}\nowner_sessions_max: 4 of 4 live workspace sessions\n`
    + 'owner_sandboxes_max: 3 of 3 sandboxes\nowner_commands_max: 0 of 3 running commands\n'
    + 'owner_transcripts_max_bytes: 0B of 4.0G transcripts\n'
    + 'owner_layers_max_bytes: 0B of 32.0G published layers\nowner_jobs_max: 0 of 8 running jobs (sandbox_script)\n');
  const root = await sbxctl(h.socket, ['owner', 'show', 'root']);
  assert.match(root.stdout, /^owner: 0 \(root\), exempt from the quotas\nowner_sessions_max: 5 live workspace sessions \(limit 4, not applied\)\n/);
  // finalizing one gives the place back
  await alice.sc('finalize_workspace_session', { sandbox_id: ids[0][0], workspace_session_id: ids[0][1], action: 'discard' });
  const again = await alice.sc('exec_command', { sandbox_id: 'a3', cmd: 'echo again' });
  assert.equal(again.output, 'again\n');
  for (const [sb, id] of ids.slice(1)) {
    await alice.sc('finalize_workspace_session', { sandbox_id: sb, workspace_session_id: id, action: 'discard' });
  }
  await bob.sc('finalize_workspace_session', { sandbox_id: 'b1', workspace_session_id: bs.workspace_session_id, action: 'discard' });
  for (const id of rootIds) {
    await h.mcp.sc('finalize_workspace_session', { sandbox_id: 'r1', workspace_session_id: id, action: 'discard' });
  }
});

test('owner_commands_max: a fourth running command of one owner is refused by name; another owner still runs', async () => {
  const running = [];
  for (const sb of ['a1', 'a2', 'a3']) {
    const r = await alice.sc('exec_command', { sandbox_id: sb, cmd: 'sleep 60', yield_time_ms: 0 });
    assert.equal(r.status, 'running');
    running.push([sb, r.command_session_id]);
  }
  const e = await alice.err('exec_command', { sandbox_id: 'a1', cmd: 'echo no' });
  assert.match(e, new RegExp(`cannot start the command: owner quota owner_commands_max reached: the sandboxes of owner `
    + `uid ${ALICE} have 3 running commands, 1 more asked \\(limit 3\\)`), e);
  assert.equal((await bob.sc('exec_command', { sandbox_id: 'b1', cmd: 'echo bob' })).output, 'bob\n');
  const show = await sbxctl(h.socket, ['owner', 'show', String(ALICE)]);
  assert.match(show.stdout, /owner_commands_max: 3 of 3 running commands/);
  for (const [sb, id] of running) await alice.sc('cancel_command', { sandbox_id: sb, command_session_id: id });
  await waitFor(async () => (await alice.call('exec_command', { sandbox_id: 'a1', cmd: 'true' })).isError !== true,
    { timeout: 20000, interval: 200, what: 'a command of alice runs again' });
});

test('sbxctl owner list / show as another user: their own use only; another owner is refused', async () => {
  const list = await sbxctlAs(BOB, ['owner', 'list']);
  assert.equal(list.code, 0, list.stderr);
  const rows = list.stdout.trim().split('\n');
  assert.equal(rows.length, 2, list.stdout);
  assert.match(rows[1], new RegExp(`^${BOB}\\s+\\S+\\s+0/4\\s+1/3\\s+0/3\\s+\\S+/4\\.0G\\s+0B/32\\.0G\\s+0/8$`));
  const mine = await sbxctlAs(BOB, ['owner', 'show', String(BOB)]);
  assert.equal(mine.code, 0, mine.stderr);
  const other = await sbxctlAs(BOB, ['owner', 'show', String(ALICE)]);
  assert.equal(other.code, 5, other.stdout + other.stderr);
  assert.match(other.stderr, new RegExp(`only root may see the quotas of another owner \\(uid ${ALICE}\\)`));
  const bad = await sbxctl(h.socket, ['owner', 'show', 'no-such-user-15e']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /invalid owner 'no-such-user-15e'/);
});
