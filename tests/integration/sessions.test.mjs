// The sessions tool set (sandbox-mcp --set runtime,sessions):
// create_workspace_session, finalize_workspace_session (publish, discard, the
// policy default, overwrite after a conflict), list_workspace_sessions,
// diff_workspace_session, list_command_sessions, cancel_command; conflicts of
// managed and automatic sessions; another uid can neither see nor touch them.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import {
  useSbx, waitDone, waitFor, hostProcsMatching, sbxctl, sleep, T, resultText, run as runProgram, SBXCTL,
} from './helpers.mjs';

const NOBODY = 65534;
// world: the socket is reachable by an unprivileged sandbox-mcp
const h = useSbx({ sandboxes: [{ name: 'sess' }], sets: 'runtime,sessions', world: true });
const SB = 'sess';
const sc = (name, args, opts) => h.mcp.sc(name, { sandbox_id: SB, ...args }, opts);
const err = (name, args) => h.mcp.err(name, { sandbox_id: SB, ...args });
const exec = (cmd, extra = {}) => sc('exec_command', { cmd, ...extra });
const read = async (path) => (await sc('file_read', { path })).content;
const create = (extra = {}) => sc('create_workspace_session', extra);
const finalize = (workspace_session_id, extra = {}) => sc('finalize_workspace_session', { workspace_session_id, ...extra });
const listSessions = async () => (await sc('list_workspace_sessions', {})).sessions;
const findSession = async (id) => (await listSessions()).find((s) => s.workspace_session_id === id);

h.test('tools/list has the sessions tools with input and output schemas and annotations', async () => {
  const names = h.mcp.tools.map((t) => t.name);
  for (const n of ['create_workspace_session', 'finalize_workspace_session', 'list_workspace_sessions',
    'diff_workspace_session', 'list_command_sessions', 'cancel_command']) {
    const t = h.mcp.tools.find((x) => x.name === n);
    assert.ok(t, `${n} missing from tools/list: ${names.join(', ')}`);
    assert.ok(t.description && t.description.length > 10, n);
    assert.equal(t.inputSchema.type, 'object');
    assert.ok(t.inputSchema.required.includes('sandbox_id'), n);
    assert.ok(t.outputSchema, `${n} has no outputSchema`);
    assert.ok(t.annotations, `${n} has no annotations`);
  }
  for (const n of ['list_workspace_sessions', 'diff_workspace_session', 'list_command_sessions']) {
    assert.equal(h.mcp.tools.find((x) => x.name === n).annotations.readOnlyHint, true, n);
  }
});

h.test('create_workspace_session: fields; list shows it live; an unknown policy is isError', async () => {
  const t0 = Math.floor(Date.now() / 1000);
  const s = await create();
  assert.match(s.workspace_session_id, /^ws-[0-9a-f]{12}$/);
  assert.equal(s.sandbox_id, SB);
  assert.equal(s.finalize_policy, 'publish_then_destroy');
  assert.equal(s.automatic, false);
  assert.ok(['starting', 'live'].includes(s.state), `state ${s.state}`);
  assert.equal(s.running_commands, 0);
  assert.ok(Number.isInteger(s.base_layer));
  assert.ok(Math.abs(s.created_unix - t0) <= 5, `created_unix ${s.created_unix} vs ${t0}`);
  const l = await findSession(s.workspace_session_id);
  assert.ok(l, 'list_workspace_sessions lacks the new session');
  assert.ok(['starting', 'live'].includes(l.state), `state ${l.state}`);
  assert.equal(l.automatic, false);
  const d = await create({ finalize_policy: 'destroy' });
  assert.equal(d.finalize_policy, 'destroy');
  const r = await h.mcp.call('create_workspace_session', { sandbox_id: SB, finalize_policy: 'keep' });
  assert.equal(r.isError, true);
  // sbxctl sees the same sessions
  const ctl = await sbxctl(h.socket, ['--json', 'session', 'list', SB]);
  assert.equal(ctl.code, 0, ctl.stderr);
  const ids = JSON.parse(ctl.stdout).map((x) => x.workspace_session);
  assert.ok(ids.includes(s.workspace_session_id) && ids.includes(d.workspace_session_id), ctl.stdout);
  await finalize(s.workspace_session_id, { action: 'discard' });
  await finalize(d.workspace_session_id);
  assert.equal(await findSession(s.workspace_session_id), undefined);
});

h.test('diff_workspace_session: added, modified and deleted paths and a unified diff', async () => {
  const s = await create();
  const ws = s.workspace_session_id;
  const e = await exec("echo added > new.txt && printf '1\\nTWO\\n3\\n' > data/numbers.txt && rm hello.sh && mkdir -p nd && echo x > nd/f",
    { workspace_session_id: ws });
  assert.equal(e.status, 'ok', e.output);
  assert.equal(e.publication ?? null, null, 'a command in a managed session publishes nothing by itself');
  const d = await sc('diff_workspace_session', { workspace_session_id: ws });
  assert.equal(d.workspace_session_id, ws);
  const ch = Object.fromEntries(d.changes.map((c) => [c.path, c.change]));
  assert.equal(ch['new.txt'], 'added');
  assert.equal(ch['data/numbers.txt'], 'modified');
  assert.equal(ch['hello.sh'], 'deleted');
  assert.equal(ch['nd/f'] ?? ch.nd, 'added', JSON.stringify(d.changes));
  assert.equal(d.truncated, false);
  assert.match(d.diff, /^--- a\/data\/numbers\.txt\n\+\+\+ b\/data\/numbers\.txt\n@@ -1,3 \+1,3 @@\n 1\n-2\n\+TWO\n 3\n/m);
  assert.match(d.diff, /--- \/dev\/null\n\+\+\+ b\/new\.txt\n@@ -0,0 \+1 @@\n\+added\n/);
  assert.match(d.diff, /--- a\/hello\.sh\n\+\+\+ \/dev\/null\n/);
  // the diff follows later changes, including file tools in the session
  await sc('file_write', { path: 'new.txt', content: 'added\nmore\n', workspace_session_id: ws });
  const d2 = await sc('diff_workspace_session', { workspace_session_id: ws });
  assert.match(d2.diff, /\+more\n/);
  // sbxctl session diff agrees
  const ctl = await sbxctl(h.socket, ['session', 'diff', SB, ws]);
  assert.equal(ctl.code, 0, ctl.stderr);
  assert.match(ctl.stdout, /numbers\.txt/);
  await finalize(ws, { action: 'discard' });
  assert.ok((await err('diff_workspace_session', { workspace_session_id: ws })).length > 0, 'diff of a finalized session');
  assert.ok((await err('diff_workspace_session', { workspace_session_id: 'ws-000000000000' })).length > 0);
});

h.test('diff_workspace_session: a diff over 96 KiB is cut and says so', async () => {
  const s = await create();
  const ws = s.workspace_session_id;
  await exec('seq 1 40000 > many-lines.txt', { workspace_session_id: ws });
  const d = await sc('diff_workspace_session', { workspace_session_id: ws });
  assert.deepEqual(d.changes, [{ path: 'many-lines.txt', change: 'added' }]);
  assert.equal(d.truncated, true);
  assert.ok(Buffer.byteLength(d.diff) <= 96 * 1024, `diff of ${Buffer.byteLength(d.diff)} bytes`);
  assert.ok(d.diff.startsWith('--- /dev/null\n+++ b/many-lines.txt\n'));
  await finalize(ws, { action: 'discard' });
});

h.test('finalize publish: one layer owned by the session, visible to the next command; the session is gone', async () => {
  const s = await create();
  const ws = s.workspace_session_id;
  await exec('echo one > pub.txt', { workspace_session_id: ws });
  await exec('echo two >> pub.txt', { workspace_session_id: ws }); // several commands, one session
  assert.match(await h.mcp.err('file_read', { sandbox_id: SB, path: 'pub.txt' }), /no such file/);
  const f = await finalize(ws, { action: 'publish' });
  assert.equal(f.workspace_session_id, ws);
  assert.equal(f.action, 'published');
  assert.equal(f.publication.published, true);
  assert.equal(f.publication.owner, `workspace_session:${ws}`);
  assert.ok(f.publication.layer > s.base_layer);
  assert.ok(f.publication.changed_paths >= 1);
  assert.equal(await read('pub.txt'), 'one\ntwo\n');
  assert.equal((await exec('cat pub.txt')).output, 'one\ntwo\n');
  assert.equal(await findSession(ws), undefined, 'a finalized session is no longer listed');
  assert.ok((await err('exec_command', { cmd: 'true', workspace_session_id: ws })).length > 0);
  assert.ok((await err('finalize_workspace_session', { workspace_session_id: ws })).length > 0, 'finalizing twice');
  const layers = JSON.parse((await sbxctl(h.socket, ['--json', 'layer', 'list', SB])).stdout);
  const mine = layers.find((l) => l.layer === f.publication.layer);
  assert.equal(mine.owner, `workspace_session:${ws}`);
  // an unchanged session publishes nothing
  const e = await create();
  const fe = await finalize(e.workspace_session_id, { action: 'publish' });
  assert.equal(fe.action, 'published');
  assert.equal(fe.publication.published, false);
});

h.test('finalize discard, and the policy defaults (publish_then_destroy publishes, destroy discards)', async () => {
  const a = await create();
  await exec('echo gone > discarded.txt', { workspace_session_id: a.workspace_session_id });
  const fa = await finalize(a.workspace_session_id, { action: 'discard' });
  assert.equal(fa.action, 'discarded');
  assert.equal(fa.publication, null);
  assert.match(await h.mcp.err('file_read', { sandbox_id: SB, path: 'discarded.txt' }), /no such file/);

  const b = await create({ finalize_policy: 'destroy' });
  await exec('echo gone > destroyed.txt', { workspace_session_id: b.workspace_session_id });
  const fb = await finalize(b.workspace_session_id);
  assert.equal(fb.action, 'discarded');
  assert.match(await h.mcp.err('file_read', { sandbox_id: SB, path: 'destroyed.txt' }), /no such file/);

  const c = await create({ finalize_policy: 'publish_then_destroy' });
  await exec('echo kept > by-policy.txt', { workspace_session_id: c.workspace_session_id });
  const fc = await finalize(c.workspace_session_id);
  assert.equal(fc.action, 'published');
  assert.equal(await read('by-policy.txt'), 'kept\n');

  // a destroy-policy session can still be published explicitly
  const d = await create({ finalize_policy: 'destroy' });
  await exec('echo explicit > explicit.txt', { workspace_session_id: d.workspace_session_id });
  assert.equal((await finalize(d.workspace_session_id, { action: 'publish' })).action, 'published');
  assert.equal(await read('explicit.txt'), 'explicit\n');
});

h.test('finalize while a command runs is isError; cancel_command ends it (cancelled) and finalize then works', async () => {
  const s = await create();
  const ws = s.workspace_session_id;
  const r = await exec(`echo started > running.txt; sleep ${T(301)}`, { workspace_session_id: ws, yield_time_ms: 300 });
  assert.equal(r.status, 'running');
  assert.equal((await findSession(ws)).running_commands, 1);
  const t = await err('finalize_workspace_session', { workspace_session_id: ws, action: 'publish' });
  assert.match(t, /running|command|busy/i, t);
  assert.ok(await findSession(ws), 'the refused finalize kept the session');
  const c = await sc('cancel_command', { command_session_id: r.command_session_id });
  assert.equal(c.command_session_id, r.command_session_id);
  process.stdout.write(`# cancel_command replied status ${c.status}, end_reason ${c.end_reason}\n`);
  const done = await waitDone(h.mcp, SB, r.command_session_id, { timeout: 10000 });
  assert.equal(done.status, 'cancelled');
  assert.equal(done.end_reason, 'cancelled');
  await waitFor(() => hostProcsMatching(`sleep ${T(301)}`).length === 0, { timeout: 5000, what: 'the cancelled sleep to be gone' });
  assert.equal((await findSession(ws)).running_commands, 0);
  const f = await finalize(ws, { action: 'publish' });
  assert.equal(f.action, 'published');
  assert.equal(await read('running.txt'), 'started\n');
});

h.test('cancel_command: an automatic command ends cancelled and publishes what it changed; errors', async () => {
  const r = await exec(`echo partial > cancelled.txt; sleep ${T(302)} & sleep ${T(303)}`, { yield_time_ms: 300 });
  assert.equal(r.status, 'running');
  const t0 = Date.now();
  await sc('cancel_command', { command_session_id: r.command_session_id });
  const done = await waitDone(h.mcp, SB, r.command_session_id, { timeout: 10000 });
  process.stdout.write(`# cancel_command -> terminal status after ${Date.now() - t0} ms\n`);
  assert.equal(done.status, 'cancelled');
  assert.equal(done.exit_code, null);
  await waitFor(() => hostProcsMatching(`sleep ${T(302)}`).length + hostProcsMatching(`sleep ${T(303)}`).length === 0,
    { timeout: 5000, what: 'the whole process group to be gone' });
  await waitFor(async () => (await h.mcp.call('file_read', { sandbox_id: SB, path: 'cancelled.txt' })).isError === false,
    { timeout: 5000, what: 'the cancelled automatic session to publish' });
  // cancelling a finished command changes nothing (an error, or its terminal state again); an unknown one is an error
  const again = await h.mcp.call('cancel_command', { sandbox_id: SB, command_session_id: r.command_session_id });
  if (!again.isError) assert.equal(again.structuredContent.status, 'cancelled');
  const fin = await exec('echo finished');
  const c2 = await h.mcp.call('cancel_command', { sandbox_id: SB, command_session_id: fin.command_session_id });
  process.stdout.write(`# cancel_command of a finished command: ${c2.isError ? 'isError: ' + resultText(c2) : 'status ' + c2.structuredContent.status}\n`);
  if (!c2.isError) assert.equal(c2.structuredContent.status, 'ok', 'cancelling a finished command must not change its status');
  assert.ok((await err('cancel_command', { command_session_id: 'cmd-000000000000' })).length > 0);
});

h.test('list_command_sessions: every command with its status; filter by workspace session', async () => {
  const s = await create();
  const ws = s.workspace_session_id;
  const a = await exec('echo a; exit 3', { workspace_session_id: ws });
  const b = await exec(`sleep ${T(304)}`, { workspace_session_id: ws, yield_time_ms: 200 });
  const other = await exec('echo auto');
  const all = (await sc('list_command_sessions', {})).commands;
  const byId = Object.fromEntries(all.map((c) => [c.command_session_id, c]));
  assert.equal(byId[a.command_session_id].status, 'error');
  assert.equal(byId[a.command_session_id].exit_code, 3);
  assert.equal(byId[a.command_session_id].end_reason, 'exit');
  assert.equal(byId[a.command_session_id].cmd, 'echo a; exit 3');
  assert.equal(typeof byId[a.command_session_id].ended_unix, 'number');
  assert.equal(byId[b.command_session_id].status, 'running');
  assert.equal(byId[b.command_session_id].ended_unix, null);
  assert.equal(byId[other.command_session_id].status, 'ok');
  const starts = all.map((c) => c.started_unix);
  assert.deepEqual(starts, [...starts].sort((x, y) => x - y), 'oldest first');
  const mine = (await sc('list_command_sessions', { workspace_session_id: ws })).commands;
  assert.deepEqual(mine.map((c) => c.command_session_id), [a.command_session_id, b.command_session_id]);
  assert.ok(mine.every((c) => c.workspace_session_id === ws));
  await sc('cancel_command', { command_session_id: b.command_session_id });
  await waitDone(h.mcp, SB, b.command_session_id);
  const after = (await sc('list_command_sessions', { workspace_session_id: ws })).commands;
  assert.equal(after.find((c) => c.command_session_id === b.command_session_id).status, 'cancelled');
  const ctl = await sbxctl(h.socket, ['--json', 'command', 'list', SB, '--session', ws]);
  assert.equal(ctl.code, 0, ctl.stderr);
  assert.equal(JSON.parse(ctl.stdout).length, 2);
  await finalize(ws, { action: 'discard' });
});

h.test('conflict (managed): refused as a whole, listed, state conflicted; overwrite publishes', async () => {
  await sc('file_write', { path: 'cf/x.txt', content: 'base\n' });
  const s = await create();
  const ws = s.workspace_session_id;
  await exec('echo session > cf/x.txt && echo other > cf/y.txt', { workspace_session_id: ws });
  const op = await sc('file_write', { path: 'cf/x.txt', content: 'operation\n' });
  const f = await finalize(ws, { action: 'publish' });
  assert.equal(f.action, 'conflict');
  assert.equal(f.publication.published, false);
  assert.deepEqual(f.publication.conflicts, ['cf/x.txt']);
  assert.ok(f.publication.error && f.publication.error.length > 0, 'a refused publication says why');
  // refused as a whole: neither path changed
  assert.equal(await read('cf/x.txt'), 'operation\n');
  assert.match(await h.mcp.err('file_read', { sandbox_id: SB, path: 'cf/y.txt' }), /no such file/);
  const l = await findSession(ws);
  assert.equal(l.state, 'conflicted');
  // its changes are still there
  assert.equal((await sc('file_read', { path: 'cf/x.txt', workspace_session_id: ws })).content, 'session\n');
  const d = await sc('diff_workspace_session', { workspace_session_id: ws });
  assert.ok(d.changes.some((c) => c.path === 'cf/x.txt'));
  // a plain retry conflicts again; overwrite publishes
  assert.equal((await finalize(ws, { action: 'publish' })).action, 'conflict');
  const o = await finalize(ws, { action: 'publish', overwrite: true });
  assert.equal(o.action, 'published');
  assert.equal(o.publication.published, true);
  assert.ok(o.publication.layer > op.publication.layer);
  assert.equal(await read('cf/x.txt'), 'session\n');
  assert.equal(await read('cf/y.txt'), 'other\n');
  assert.equal(await findSession(ws), undefined);
  const b = await sc('file_blame', { path: 'cf/x.txt' });
  assert.deepEqual(b.ranges, [{ start_line: 1, line_count: 1, owner: `workspace_session:${ws}` }]);
});

h.test('conflict (managed) then discard: the later layer stays', async () => {
  const s = await create();
  const ws = s.workspace_session_id;
  await exec('echo session > cf/z.txt', { workspace_session_id: ws });
  await sc('file_write', { path: 'cf/z.txt', content: 'winner\n' });
  assert.equal((await finalize(ws)).action, 'conflict');
  const d = await finalize(ws, { action: 'discard' });
  assert.equal(d.action, 'discarded');
  assert.equal(await read('cf/z.txt'), 'winner\n');
  assert.equal(await findSession(ws), undefined);
});

h.test('conflicts on ancestors and descendants; disjoint paths do not conflict', async () => {
  await sc('file_write', { path: 'tree/keep.txt', content: 'k\n' });
  // the session removes the directory; a later layer adds a file inside it
  const a = await create();
  await exec('rm -rf tree', { workspace_session_id: a.workspace_session_id });
  await sc('file_write', { path: 'tree/inner/new.txt', content: 'n\n' });
  const fa = await finalize(a.workspace_session_id);
  assert.equal(fa.action, 'conflict', JSON.stringify(fa));
  assert.ok(fa.publication.conflicts.some((p) => p === 'tree' || p.startsWith('tree/')), JSON.stringify(fa.publication.conflicts));
  process.stdout.write(`# rm -rf tree vs a later tree/inner/new.txt: conflicts ${JSON.stringify(fa.publication.conflicts)}\n`);
  await finalize(a.workspace_session_id, { action: 'discard' });
  // the session writes below a path that a later layer replaced by a file
  await sc('file_write', { path: 'tree2/sub/f.txt', content: 'f\n' });
  const b = await create();
  await exec('echo deeper > tree2/sub/g.txt', { workspace_session_id: b.workspace_session_id });
  await exec('rm -rf tree2/sub && echo file > tree2/sub');
  const fb = await finalize(b.workspace_session_id);
  assert.equal(fb.action, 'conflict', JSON.stringify(fb));
  process.stdout.write(`# tree2/sub/g.txt vs a later tree2/sub (dir -> file): conflicts ${JSON.stringify(fb.publication.conflicts)}\n`);
  await finalize(b.workspace_session_id, { action: 'discard' });
  // disjoint changes publish fine
  const c = await create();
  await exec('echo mine > disjoint-a.txt', { workspace_session_id: c.workspace_session_id });
  await sc('file_write', { path: 'disjoint-b.txt', content: 'theirs\n' });
  await exec('echo also-theirs > tree/keep2.txt');
  const fc = await finalize(c.workspace_session_id);
  assert.equal(fc.action, 'published', JSON.stringify(fc));
  assert.equal(await read('disjoint-a.txt'), 'mine\n');
  assert.equal(await read('disjoint-b.txt'), 'theirs\n');
});

h.test('conflicts are still found after the layers between base and top were compacted', async () => {
  const a = await create();
  const b = await create();
  await exec('echo a > compact-x.txt', { workspace_session_id: a.workspace_session_id });
  await exec('echo b > compact-y.txt', { workspace_session_id: b.workspace_session_id });
  await sc('file_write', { path: 'compact-x.txt', content: 'operation\n' });
  // more than the 48-layer stack limit of publications after both bases
  for (let i = 0; i < 60; i++) await sc('file_write', { path: `compact-fill/${i % 5}.txt`, content: `${i}\n` });
  const fa = await finalize(a.workspace_session_id);
  assert.equal(fa.action, 'conflict', JSON.stringify(fa));
  assert.deepEqual(fa.publication.conflicts, ['compact-x.txt']);
  const fb = await finalize(b.workspace_session_id);
  assert.equal(fb.action, 'published', JSON.stringify(fb));
  assert.equal(await read('compact-y.txt'), 'b\n');
  assert.equal(await read('compact-fill/4.txt'), '59\n', 'the publication over a compacted stack kept the later layers');
  assert.equal((await finalize(a.workspace_session_id, { overwrite: true })).action, 'published');
  assert.equal(await read('compact-x.txt'), 'a\n');
});

/* An automatic command that changes `path` while a file_write publishes it first. */
async function automaticConflict(path, text) {
  const slow = exec(`echo ${text} > ${path}; sleep 1.5`, { yield_time_ms: 20000 });
  await sleep(500);
  const op = await sc('file_write', { path, content: 'operation\n' });
  const r = await slow;
  return { r, op };
}

h.test('conflict (automatic): exec_command reports it; the session stays conflicted; overwrite publishes', async () => {
  const { r } = await automaticConflict('auto-cf.txt', 'automatic');
  assert.equal(r.status, 'ok');
  assert.ok(r.publication, 'the terminal automatic command carries its publication');
  assert.equal(r.publication.published, false);
  assert.deepEqual(r.publication.conflicts, ['auto-cf.txt']);
  assert.ok(r.publication.error && r.publication.error.length > 0);
  assert.equal(await read('auto-cf.txt'), 'operation\n');
  const l = await findSession(r.workspace_session_id);
  assert.ok(l, 'the conflicted automatic session is kept');
  assert.equal(l.state, 'conflicted');
  assert.equal(l.automatic, true);
  const f = await finalize(r.workspace_session_id, { action: 'publish', overwrite: true });
  assert.equal(f.action, 'published');
  assert.equal(await read('auto-cf.txt'), 'automatic\n');
  assert.equal(await findSession(r.workspace_session_id), undefined);
});

h.test('conflict (automatic) then discard', async () => {
  const { r } = await automaticConflict('auto-cf2.txt', 'automatic');
  assert.equal(r.publication.published, false);
  assert.equal((await finalize(r.workspace_session_id, { action: 'discard' })).action, 'discarded');
  assert.equal(await read('auto-cf2.txt'), 'operation\n');
  // two automatic commands racing on one path: the later one conflicts
  const first = exec('echo first > race.txt; sleep 1', { yield_time_ms: 20000 });
  const second = exec('echo second > race.txt; sleep 2', { yield_time_ms: 20000 });
  const [a, b] = await Promise.all([first, second]);
  assert.equal(a.publication.published, true);
  assert.equal(b.publication.published, false);
  assert.deepEqual(b.publication.conflicts, ['race.txt']);
  assert.equal(await read('race.txt'), 'first\n');
  await finalize(b.workspace_session_id, { action: 'discard' });
});

// SBX_ENDED_COMMANDS_KEPT (256): beyond it the oldest ended commands of a
// long-lived session leave sbxd's memory (each held its transcript's 2 fds).
h.test('a long-lived session\'s ended commands do not pin sbxd\'s descriptors; the oldest are read from disk', async () => {
  const ws = (await create()).workspace_session_id;
  const fds = () => fs.readdirSync(`/proc/${h.sbxd.proc.pid}/fd`).length;
  const ids = [];
  let at300 = 0;
  for (let i = 0; i < 600; i++) {
    ids.push((await exec(`echo out ${i}; echo err ${i} >&2`, { workspace_session_id: ws })).command_session_id);
    if (i === 299) at300 = fds();
  }
  // The next 300 commands' transcripts replaced older ones in memory: no more descriptors.
  assert.ok(fds() - at300 < 40, `sbxd's descriptors grew from ${at300} to ${fds()} over 300 ended commands`);
  const first = await sc('read_command_lines', { command_session_id: ids[0] });
  assert.equal(first.output, 'out 0\nerr 0\n');
  assert.equal(first.status, 'ok');
  assert.equal(first.exit_code, 0);
  const listed = (await sc('list_command_sessions', { workspace_session_id: ws })).commands;
  assert.equal(listed.length, 500); // SBX_COMMANDS_LISTED, the newest
  assert.ok(listed.every((c) => c.status === 'ok'), JSON.stringify(listed.find((c) => c.status !== 'ok')));
  const again = await sc('cancel_command', { command_session_id: ids[1] });
  assert.equal(again.output, 'out 1\nerr 1\n');
  await finalize(ws, { action: 'discard' });
});

h.test('another uid can neither see nor touch the sandbox\'s sessions or commands', async () => {
  const s = await create();
  const ws = s.workspace_session_id;
  await exec('echo secret > secret.txt', { workspace_session_id: ws });
  const run = await exec(`sleep ${T(305)}`, { workspace_session_id: ws, yield_time_ms: 200 });
  const other = await h.connect({ uid: NOBODY });
  try {
    const calls = [
      ['list_workspace_sessions', {}],
      ['create_workspace_session', {}],
      ['diff_workspace_session', { workspace_session_id: ws }],
      ['finalize_workspace_session', { workspace_session_id: ws, action: 'discard' }],
      ['finalize_workspace_session', { workspace_session_id: ws, action: 'publish' }],
      ['list_command_sessions', {}],
      ['list_command_sessions', { workspace_session_id: ws }],
      ['cancel_command', { command_session_id: run.command_session_id }],
      ['file_read', { path: 'secret.txt', workspace_session_id: ws }],
      ['file_write', { path: 'x.txt', content: 'x', workspace_session_id: ws }],
      ['exec_command', { cmd: 'cat secret.txt', workspace_session_id: ws }],
    ];
    for (const [name, args] of calls) {
      const r = await other.call(name, { sandbox_id: SB, ...args });
      assert.equal(r.isError, true, `uid ${NOBODY}: ${name} succeeded: ${JSON.stringify(r.structuredContent)}`);
      const t = resultText(r);
      assert.ok(!t.includes('secret'), t);
      assert.match(t, /permission|denied|not permitted|owner|forbidden|not allowed/i, `${name}: ${t}`);
    }
    const ctl = await runProgram('/usr/bin/setpriv',
      [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', SBXCTL, '--socket', h.socket, '--json', 'session', 'list', SB]);
    assert.notEqual(ctl.code, 0, `sbxctl session list as ${NOBODY}: ${ctl.stdout}`);
  } finally {
    await other.close();
  }
  // untouched: still live, the command still runs
  const l = await findSession(ws);
  assert.equal(l.state, 'live');
  assert.equal(l.running_commands, 1);
  await sc('cancel_command', { command_session_id: run.command_session_id });
  await waitDone(h.mcp, SB, run.command_session_id);
  assert.equal((await finalize(ws)).action, 'published');
  assert.equal(await read('secret.txt'), 'secret\n');
});
