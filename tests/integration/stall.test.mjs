// Issue 15, item 4: publication, diffs and file indexing run off sbxd's event
// loop, one lane per sandbox. A long publication in one sandbox does not
// delay a call of another sandbox (checked by order of answers, not by wall
// clock); SIGTERM during a long publication ends sbxd promptly and leaves
// nothing half-published; past the attribution diff budget, a shuffled
// region is the publisher's as a whole and blame still tiles the file.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, Harness, sandboxDir, sleep, run, waitFor } from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'slow' }, { name: 'other' }], sets: 'runtime,sessions' });
const sc = (sandbox_id, name, args) => h.mcp.sc(name, { sandbox_id, ...args });
// Enough files that their publication (a copy and an fsync each, a manifest
// row each) takes far longer than an exec_command echo.
const FILES = 20000;

/* A managed session of sandbox sb in which dir/ holds FILES new files. */
async function sessionWithFiles(sb, dir) {
  const s = await sc(sb, 'create_workspace_session', {});
  const ws = s.workspace_session_id;
  const r = await sc(sb, 'exec_command', {
    workspace_session_id: ws, yield_time_ms: 120000,
    cmd: `python3 -c 'import os\nos.makedirs("${dir}")\nfor i in range(${FILES}): open("${dir}/f%d" % i, "w").write("%d\\n" % i)'`,
  });
  assert.equal(r.status, 'ok', r.output);
  return ws;
}

h.test('a long publication in one sandbox does not delay an exec_command in another', async () => {
  const ws = await sessionWithFiles('slow', 'many');
  const order = [];
  const pub = sc('slow', 'finalize_workspace_session', { workspace_session_id: ws, action: 'publish' })
    .then((r) => { order.push('publication'); return r; });
  // Sent after the finalize, on the same connection: sbxd reads it second.
  const other = await sc('other', 'exec_command', { cmd: 'echo hi' });
  order.push('exec');
  assert.equal(other.status, 'ok');
  assert.equal(other.output, 'hi\n');
  const p = await pub;
  assert.equal(p.action, 'published');
  assert.equal(p.publication.changed_paths, FILES);
  assert.deepEqual(order, ['exec', 'publication'], 'the other sandbox was answered first');
  // The lane keeps one sandbox's calls in order: a read after the publication sees it.
  const f = await sc('slow', 'file_read', { path: `many/f${FILES - 1}` });
  assert.equal(f.content, `${FILES - 1}\n`);
});

h.test('SIGTERM during a long publication: sbxd ends, nothing is half-published', async () => {
  const ws = await sessionWithFiles('slow', 'more');
  const layersDir = path.join(sandboxDir(h.stateDir, 'slow'), 'layers');
  const before = (await sc('slow', 'exec_command', { cmd: 'true' })).publication.layer;
  const pub = h.mcp.call('finalize_workspace_session', { sandbox_id: 'slow', workspace_session_id: ws, action: 'publish' })
    .catch((e) => ({ isError: true, error: e }));
  await sleep(300);
  // It ends: the copy stops at its next file, the session's changes are kept
  // (core/kept.h). The bound only catches a hang (stop() kills sbxd and fails
  // after it); how long it took is printed, as wall clock is no test here.
  const res = await h.sbxd.stop({ timeout: 60000 });
  process.stdout.write(`# sbxd stopped ${res.ms} ms after SIGTERM during a publication of ${FILES} files\n`);
  assert.equal(res.code, 0, JSON.stringify(res));
  const answer = await pub;
  await h.sbxd.start();
  const mcp = await h.connect();
  // Either the layer is whole (it finished just before the signal) or it is not there at all.
  const probe = await mcp.sc('exec_command', { sandbox_id: 'slow', cmd: 'ls more 2>/dev/null | wc -l' });
  assert.equal(probe.status, 'ok');
  const seen = Number(probe.output.trim());
  if (answer.isError || answer.structuredContent?.action !== 'published') {
    assert.equal(seen, 0, 'an abandoned publication left no file in the snapshot');
    assert.equal(probe.publication.layer, before, 'no layer was recorded');
  } else {
    assert.equal(seen, FILES);
  }
  // No build directory and no unrecorded layer is left on disk.
  const top = probe.publication.layer;
  for (const name of fs.readdirSync(layersDir)) {
    assert.ok(!name.startsWith('.tmp'), `left in layers/: ${name}`);
    if (/^\d+$/.test(name)) assert.ok(Number(name) <= top, `unrecorded layer ${name} (top ${top})`);
  }
  h.mcp = mcp;
});

h.test('past the attribution diff budget a shuffled region is the publisher\'s as a whole; blame tiles', async () => {
  // 60,000 lines shuffled between a first and a last line that stay: a
  // changed region of 120,000 lines (old and new), above the budget of
  // SBX_BLAME_DIFF_LINES_MAX = 100,000 (common/sbx-limits.h).
  const N = 60000;
  const lines = ['first line'];
  for (let i = 0; i < N; i++) lines.push(`line ${i} of the shuffled region`);
  lines.push('last line');
  const w = await sc('other', 'file_write', { path: 'shuffled.txt', content: lines.join('\n') + '\n' });
  const writer = w.publication.owner;
  const r = await sc('other', 'exec_command', {
    cmd: "{ head -n 1 shuffled.txt; sed '1d;$d' shuffled.txt | shuf; tail -n 1 shuffled.txt; } > s.new && mv s.new shuffled.txt",
  });
  assert.equal(r.status, 'ok', r.output);
  assert.equal(r.publication.published, true);
  const b = await sc('other', 'file_blame', { path: 'shuffled.txt' });
  assert.deepEqual(b.ranges, [
    { start_line: 1, line_count: 1, owner: writer },
    { start_line: 2, line_count: N, owner: `workspace_session:${r.workspace_session_id}` },
    { start_line: N + 2, line_count: 1, owner: writer },
  ]);
});

/* Layers whose record is being written (sbx.db's layers_pending), read as another process would. */
async function pendingRecords(stateDir) {
  const r = await run('python3', ['-c', `import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
print(db.execute("SELECT count(*) FROM layers_pending").fetchone()[0])`, path.join(stateDir, 'sbx.db')]);
  return r.code === 0 ? Number(r.stdout.trim()) : 0;
}

/* fn({ x, xs, hold }) with a private sbxd of sandboxes pub and probe whose
 * publication records wait while the file hold exists (SBX_TEST_HOLD_RECORD). */
async function withHeldRecords(fn) {
  const holdDir = fs.mkdtempSync('/tmp/sbx-test-hold-');
  const hold = path.join(holdDir, 'hold');
  fs.writeFileSync(hold, '');
  const x = await Harness.create({ sandboxes: [{ name: 'pub' }, { name: 'probe' }], sets: 'runtime,sessions',
    sbxdEnv: { SBX_TEST_HOLD_RECORD: hold } });
  try {
    await fn({ x, xs: (sandbox_id, name, args) => x.mcp.sc(name, { sandbox_id, ...args }), hold });
  } finally {
    fs.rmSync(holdDir, { recursive: true, force: true });
    await x.teardown();
  }
}

// The record of a publication (a row per path, its attribution) is written
// off the loop in short transactions: while the test holds it before its
// commit (SBX_TEST_HOLD_RECORD, sbxd(8)), another sandbox's exec_command,
// which writes its own command records, is answered; the publication then
// completes, whole. Before, the record was one transaction on the loop.
h.test('the loop serves another sandbox while a publication\'s record is being written', async () => {
  await withHeldRecords(async ({ x, xs, hold }) => {
    const s = await xs('pub', 'create_workspace_session', {});
    const ws = s.workspace_session_id;
    const w = await xs('pub', 'exec_command', {
      workspace_session_id: ws, yield_time_ms: 120000,
      cmd: `python3 -c 'import os\nos.makedirs("held")\nfor i in range(5000): open("held/f%d" % i, "w").write("%d\\n" % i)'`,
    });
    assert.equal(w.status, 'ok', w.output);
    const order = [];
    const pub = xs('pub', 'finalize_workspace_session', { workspace_session_id: ws, action: 'publish' })
      .then((r) => { order.push('publication'); return r; });
    await waitFor(async () => (await pendingRecords(x.stateDir)) === 1,
      { timeout: 60000, what: 'the publication\'s record to be written, held before its commit' });
    const e = await xs('probe', 'exec_command', { cmd: 'echo hi' });
    order.push('exec');
    assert.equal(e.output, 'hi\n');
    assert.equal(await pendingRecords(x.stateDir), 1, 'the record was still held');
    fs.unlinkSync(hold);
    const p = await pub;
    assert.equal(p.action, 'published');
    assert.equal(p.publication.changed_paths, 5000);
    assert.deepEqual(order, ['exec', 'publication']);
    assert.equal(await pendingRecords(x.stateDir), 0);
    const f = await xs('pub', 'file_read', { path: 'held/f4999' });
    assert.equal(f.content, '4999\n');
    const b = await xs('pub', 'file_blame', { path: 'held/f4999' });
    assert.deepEqual(b.ranges, [{ start_line: 1, line_count: 1, owner: `workspace_session:${ws}` }]);
  });
});

// A small publication (a file_write: paths and attribution changes within
// SBX_STORE_WRITE_ROWS) is recorded in one durable transaction, without the
// pauses of a large one; held before that transaction (its layer built, not
// recorded), another sandbox is still served, and the layer then counts whole.
h.test('a small publication held before its one transaction: another sandbox is served, then it counts whole', async () => {
  await withHeldRecords(async ({ x, xs, hold }) => {
    const layersDir = path.join(sandboxDir(x.stateDir, 'pub'), 'layers');
    const built = () => fs.readdirSync(layersDir).filter((n) => /^\d+$/.test(n)).map(Number);
    const top = Math.max(...built());
    const order = [];
    const pub = xs('pub', 'file_write', { path: 'small.txt', content: 'one\ntwo\n' })
      .then((r) => { order.push('publication'); return r; });
    await waitFor(async () => built().includes(top + 1),
      { timeout: 60000, what: 'the small publication\'s layer to be built, its record held' });
    assert.equal(await pendingRecords(x.stateDir), 0, 'nothing of a small record is written before its transaction');
    const e = await xs('probe', 'exec_command', { cmd: 'echo hi' });
    order.push('exec');
    assert.equal(e.output, 'hi\n');
    fs.unlinkSync(hold);
    const p = await pub;
    assert.equal(p.publication.layer, top + 1);
    assert.deepEqual(order, ['exec', 'publication']);
    const b = await xs('pub', 'file_blame', { path: 'small.txt' });
    assert.deepEqual(b.ranges, [{ start_line: 1, line_count: 2, owner: p.publication.owner }]);
  });
});
