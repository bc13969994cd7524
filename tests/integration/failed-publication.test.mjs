// A failed publication (issue 15, item 6): an automatic session whose
// publication failed for another reason than a conflict (a tree too deep, a
// path too long) keeps its changes in its tmpfs for
// failed_session_grace_seconds, for inspection or a retry, and then it goes
// with its tmpfs; the result of the command that ended it says what happened,
// where the changes are and how to get them. A conflict keeps its session.
// What stopped sessions hold in memory counts against their sandbox's limit.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { useSbx, waitFor, sbxctl, sleep, resultText } from './helpers.mjs';

const GRACE_S = 4;
// no spares: the only tmpfs sbxd holds is that of the sessions a test makes
const h = useSbx({
  sandboxes: [{ name: 'fp' }, { name: 'mem', memory: 64 << 20 }],
  sets: 'runtime,sessions',
  config: `[sbxd]\nfailed_session_grace_seconds = ${GRACE_S}\nsession_spares = 0\n`,
});
const SB = 'fp';
const sc = (name, args, opts) => h.mcp.sc(name, { sandbox_id: SB, ...args }, opts);
const TMPFS_MAGIC = 0x01021994;

/* sbxd's descriptors on a tmpfs: a session's upper directory is one, and
 * keeps the tmpfs (and its memory) alive after the session's processes. */
function tmpfsFds() {
  let n = 0;
  for (const fd of fs.readdirSync(`/proc/${h.sbxd.pid}/fd`)) {
    try {
      if (fs.statfsSync(`/proc/${h.sbxd.pid}/fd/${fd}`).type === TMPFS_MAGIC) n++;
    } catch {}
  }
  return n;
}

async function sessionsJson() {
  const r = await sbxctl(h.socket, ['--json', 'session', 'list', SB]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/* Run cmd (which writes 8 MiB and a tree that cannot be published) through
 * exec_command; check the result, the kept session, its release. */
async function failedPublication(cmd, reason) {
  const before = tmpfsFds();
  const call = await h.mcp.call('exec_command', { sandbox_id: SB, cmd, yield_time_ms: 30000 });
  assert.notEqual(call.isError, true, resultText(call));
  const r = call.structuredContent;
  assert.equal(r.status, 'ok', JSON.stringify(r));
  assert.equal(r.publication.published, false);
  const e = r.publication.error;
  const ws = r.workspace_session_id;
  assert.match(e, /^publication failed: /, e);
  assert.match(e, reason, e);
  assert.match(e, new RegExp(`changes of workspace session ${ws} are kept for inspection until \\d{4}-\\d\\d-\\d\\dT`), e);
  assert.match(e, new RegExp(`failed_session_grace_seconds = ${GRACE_S}\\), then discarded`), e);
  assert.ok(e.includes(`sbxctl session diff ${SB} ${ws}`), e);
  assert.ok(e.includes(`sbxctl session finalize ${SB} ${ws} --publish`), e);
  assert.ok(resultText(call).includes('kept for inspection'), resultText(call));
  // kept, stopped, with its changes in memory, counted and shown
  const kept = (await sessionsJson()).find((s) => s.workspace_session === ws);
  assert.ok(kept, 'the session is kept during the grace time');
  assert.equal(kept.state, 'stopped');
  assert.ok(kept.memory_bytes >= 8 << 20, `memory_bytes ${kept.memory_bytes}`);
  assert.ok(Math.abs(kept.discard_unix - (Date.now() / 1000 + GRACE_S)) <= 3, `discard_unix ${kept.discard_unix}`);
  assert.ok(tmpfsFds() > before, 'its tmpfs is held while it is kept');
  const t0 = Date.now();
  await waitFor(async () => !(await sessionsJson()).some((s) => s.workspace_session === ws),
    { timeout: (GRACE_S + 10) * 1000, interval: 200, what: `session ${ws} discarded after the grace time` });
  const took = (Date.now() - t0) / 1000;
  process.stdout.write(`# session ${ws} discarded ${took.toFixed(1)} s after the result (grace ${GRACE_S} s)\n`);
  await waitFor(() => tmpfsFds() <= before, { timeout: 5000, what: 'its tmpfs released' });
  // read_command_lines still answers; the workspace has none of it
  const l = await sc('read_command_lines', { command_session_id: r.command_session_id });
  assert.equal(l.status, 'ok');
  const ls = await sc('exec_command', { cmd: 'ls big.bin 2>&1; true' });
  assert.match(ls.output, /No such file/);
  // that command's session closes its tmpfs off the loop, after the answer:
  // the next caller's count starts once it has
  await waitFor(() => tmpfsFds() <= before, { timeout: 5000, what: 'the last session\'s tmpfs released' });
}

h.test('a tree deeper than the depth limit: kept for the grace time, then discarded with its tmpfs', async () => {
  await failedPublication('head -c 8M /dev/zero > big.bin && d=deep; for i in $(seq 300); do d=$d/d; done; mkdir -p $d',
    /deeper than the layer depth limit of 256 directory levels/);
});

h.test('a path longer than the path limit: kept for the grace time, then discarded with its tmpfs', async () => {
  const name = 'n'.repeat(250);
  // 15 levels entered (the shell's cd stops near PATH_MAX), 2 more below: 4265 bytes
  await failedPublication(`head -c 8M /dev/zero > big.bin && for i in $(seq 15); do mkdir ${name} && cd ${name} || exit 1; done && mkdir -p ${name}/${name}`,
    /a changed path is longer than the path limit of 4096 bytes/);
});

h.test('within the grace time the session can be inspected and discarded at once', async () => {
  const r = await sc('exec_command', { cmd: 'd=x; for i in $(seq 300); do d=$d/d; done; mkdir -p $d' });
  assert.equal(r.publication.published, false);
  const ws = r.workspace_session_id;
  const diff = await sbxctl(h.socket, ['session', 'diff', SB, ws]);
  assert.notEqual(diff.code, 0);
  assert.match(diff.stderr, /deeper than the layer depth limit/, diff.stderr);
  const again = await h.mcp.call('exec_command', { sandbox_id: SB, workspace_session_id: ws, cmd: 'true' });
  assert.equal(again.isError, true);
  assert.match(resultText(again), /stopped after a failed publication/);
  const f = await sc('finalize_workspace_session', { workspace_session_id: ws, action: 'discard' });
  assert.equal(f.action, 'discarded');
  assert.ok(!(await sessionsJson()).some((s) => s.workspace_session === ws));
});

h.test('a conflict keeps its session past the grace time, to be finalized', async () => {
  const slow = sc('exec_command', { cmd: 'echo automatic > cf.txt; sleep 1.5', yield_time_ms: 20000 });
  await sleep(500);
  await sc('file_write', { path: 'cf.txt', content: 'operation\n' });
  const r = await slow;
  assert.deepEqual(r.publication.conflicts, ['cf.txt']);
  assert.doesNotMatch(r.publication.error, /kept for inspection until/);
  await sleep((GRACE_S + 2) * 1000);
  const l = (await sessionsJson()).find((s) => s.workspace_session === r.workspace_session_id);
  assert.ok(l, 'the conflicted session outlives failed_session_grace_seconds');
  assert.equal(l.state, 'conflicted');
  assert.equal(l.discard_unix ?? 0, 0);
  await sc('finalize_workspace_session', { workspace_session_id: r.workspace_session_id, action: 'discard' });
});

h.test("stopped sessions' memory counts against the sandbox: no new session while it fills the limit", async () => {
  const deep = 'd=x; for i in $(seq 300); do d=$d/d; done; mkdir -p $d';
  const r = await h.mcp.sc('exec_command', { sandbox_id: 'mem', cmd: `head -c 50M /dev/zero > big.bin && ${deep}` });
  assert.equal(r.status, 'ok', r.output);
  assert.match(r.publication.error, /kept for inspection/);
  // 50 MiB of changes held in memory by a stopped session, against a 64 MiB limit: no room for a session
  const e = await h.mcp.err('exec_command', { sandbox_id: 'mem', cmd: 'echo no' });
  assert.match(e, /sandbox 'mem' has no memory left for a session: its stopped workspace sessions hold \d+ bytes of unpublished changes, its memory limit is 67108864 bytes and a session needs 16777216 more/, e);
  // another sandbox is not affected
  assert.equal((await sc('exec_command', { cmd: 'echo yes' })).output, 'yes\n');
  // once the grace time passed, the memory is back
  await waitFor(async () => (await h.mcp.call('exec_command', { sandbox_id: 'mem', cmd: 'echo back' })).isError !== true,
    { timeout: (GRACE_S + 10) * 1000, interval: 250, what: 'a session of mem once the failed ones are discarded' });
});
