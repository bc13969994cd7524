// Disk use of publications and a full state filesystem (issue 15, items 1
// and 2), at small scale on a 256 MiB ext4 state filesystem of its own
// (stateFsMiB): a 20 GiB sparse file and a file with 40 hard links publish
// what they hold, not what they seem; the layer quotas and the state reserve
// refuse with the limit, its value and how much; and once the filesystem is
// full, reads go on, writes are refused naming it, and sbxd still starts.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, run, sbxctl, sandboxDir } from './helpers.mjs';

const MiB = 1024 * 1024;
const h = useSbx({
  sandboxes: [{ name: 'fill' }, { name: 'mate' }],
  sets: 'runtime,sessions',
  stateFsMiB: 256,
  config: '[sbxd]\nsandbox_layers_max_bytes = 64M\nowner_layers_max_bytes = 80M\n'
    + 'layers_max_inodes = 1000\nstate_reserve = 24M\n',
});
const exec = (cmd, sandbox_id = 'fill') => h.mcp.sc('exec_command', { sandbox_id, cmd, timeout_ms: 120000 });
const freeBytes = () => { const s = fs.statfsSync(h.stateDir); return s.bavail * s.bsize; };
const usedBytes = () => { const s = fs.statfsSync(h.stateDir); return (s.blocks - s.bfree) * s.bsize; };
const layerBytes = async (name) => {
  const r = await run('du', ['-s', '--block-size=1', path.join(sandboxDir(h.stateDir, name), 'layers')]);
  return Number(r.stdout.split('\t')[0]);
};
const show = async (name) => {
  const r = await sbxctl(h.socket, ['--json', 'sandbox', 'show', name]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
};
const figures = {};

h.test('a 20 GiB sparse file publishes its data only', async () => {
  const before = usedBytes();
  const t0 = Date.now();
  const r = await exec('truncate -s 20G sparse && printf data | dd of=sparse bs=1 seek=1000000 conv=notrunc 2>/dev/null');
  figures.sparse = { ms: Date.now() - t0, addedBytes: usedBytes() - before };
  assert.equal(r.status, 'ok', r.output);
  assert.equal(r.publication.published, true, JSON.stringify(r.publication));
  assert.ok(figures.sparse.addedBytes < 4 * MiB, `the state filesystem took ${figures.sparse.addedBytes} bytes`);
  const c = await exec('stat -c %s sparse; dd if=sparse bs=1 skip=1000000 count=4 2>/dev/null; echo');
  assert.equal(c.output, '21474836480\ndata\n');
  const s = await show('fill');
  assert.ok(s.layers_bytes < 1 * MiB, `the sandbox's layers count ${s.layers_bytes} bytes`);
});

h.test('a 20 MiB file with 40 hard links publishes one file', async () => {
  const before = usedBytes();
  const t0 = Date.now();
  const r = await exec('mkdir links && head -c 20M /dev/urandom > links/big && for i in $(seq 40); do ln links/big links/l$i; done');
  figures.links = { ms: Date.now() - t0, addedBytes: usedBytes() - before };
  assert.equal(r.status, 'ok', r.output);
  assert.equal(r.publication.published, true, JSON.stringify(r.publication));
  assert.ok(figures.links.addedBytes < 24 * MiB, `the state filesystem took ${figures.links.addedBytes} bytes`);
  const c = await exec('stat -c "%i %h" links/big links/l40 | sort -u | wc -l; stat -c %h links/l1');
  assert.equal(c.output, '1\n41\n', 'one inode with 41 names');
  const s = await show('fill');
  assert.ok(s.layers_bytes >= 20 * MiB && s.layers_bytes < 21 * MiB, `layers_bytes ${s.layers_bytes}`);
  assert.equal(s.layers_max_bytes, 64 * MiB);
  const text = await sbxctl(h.socket, ['sandbox', 'show', 'fill']);
  assert.match(text.stdout, /^layer disk: 20\.\dM of 64\.0M \(sandbox_layers_max_bytes\), \d+ inodes$/m);
});

h.test('the sandbox layer quota refuses with its name, value and how much', async () => {
  const before = await layerBytes('fill');
  const r = await exec('head -c 50M /dev/urandom > over');
  assert.equal(r.publication.published, false, JSON.stringify(r.publication));
  assert.match(r.publication.error, /sandbox_layers_max_bytes \(67108864 bytes\): \d+ bytes used, this publication adds 52\d{6} bytes/);
  assert.equal(await layerBytes('fill'), before, 'nothing of it was copied');
});

h.test('the owner layer quota counts all sandboxes of the owner', async () => {
  const a = await exec('head -c 30M /dev/urandom > a', 'mate');
  assert.equal(a.publication.published, true, JSON.stringify(a.publication));
  // fill has 20 MiB, mate 30: 31 more passes 80M for the owner, not 64M for mate.
  const b = await exec('head -c 31M /dev/urandom > b', 'mate');
  assert.equal(b.publication.published, false, JSON.stringify(b.publication));
  assert.match(b.publication.error, /owner_layers_max_bytes \(83886080 bytes\): 5\d{7} bytes used, this publication adds 3\d{7} bytes/);
});

h.test('the inode budget of all layers refuses with its name and value', async () => {
  const r = await exec('mkdir many && cd many && seq 1200 | xargs touch');
  assert.equal(r.publication.published, false, JSON.stringify(r.publication));
  assert.match(r.publication.error, /layers_max_inodes \(1000 inodes\): \d+ inodes used, this publication adds 1201 inodes/);
});

/* Leave about `left` bytes free on the state filesystem, as another writer
 * would (left 0: none, the rest filled by dd until ENOSPC). */
async function fillTo(left) {
  const filler = path.join(h.stateDir, `filler-${Date.now()}`);
  const size = Math.max(0, freeBytes() - Math.max(left, 2 * MiB));
  const r = await run('fallocate', ['-l', String(size), filler]);
  assert.equal(r.code, 0, r.stderr);
  if (left === 0) await run('dd', ['if=/dev/zero', `of=${filler}-rest`, 'bs=4k']);
  return filler;
}

h.test('the state reserve refuses a publication that would pass it', async () => {
  const filler = await fillTo(40 * MiB);
  const r = await exec('head -c 20M /dev/urandom > reserve', 'mate');
  assert.equal(r.publication.published, false, JSON.stringify(r.publication));
  assert.match(r.publication.error, new RegExp(`the state filesystem \\(${h.stateDir}\\) would fall below state_reserve \\(25165824 bytes\\): \\d+ bytes free, this publication adds 2\\d{7} bytes`));
  fs.rmSync(filler);
});

/* ---- a full state filesystem ---- */

const full = {};

h.test('a full state filesystem: reads go on', async () => {
  const w = await h.mcp.sc('file_write', { sandbox_id: 'mate', path: 'notes.txt', content: 'one\ntwo\n' });
  assert.equal(w.publication.published, true, JSON.stringify(w.publication));
  const before = await exec('seq 1 500', 'mate');
  assert.equal(before.status, 'ok', before.output);
  full.command = before.command_session_id;
  // A command that ends once the filesystem is full, in a managed session.
  full.ws = (await h.mcp.sc('create_workspace_session', { sandbox_id: 'mate' })).workspace_session_id;
  const slow = await h.mcp.sc('exec_command', { sandbox_id: 'mate', workspace_session_id: full.ws,
    cmd: 'sleep 2; seq 1 500000; echo end', yield_time_ms: 100 });
  assert.equal(slow.status, 'running');
  full.slow = slow.command_session_id;
  // A managed session with changes, not finalized when sbxd stops.
  full.kept = (await h.mcp.sc('create_workspace_session', { sandbox_id: 'mate' })).workspace_session_id;
  const k = await h.mcp.sc('exec_command', { sandbox_id: 'mate', workspace_session_id: full.kept,
    cmd: 'echo kept > kept.txt && truncate -s 1G kept-sparse && rm hello.sh' });
  assert.equal(k.status, 'ok', k.output);
  full.filler = await fillTo(0);
  assert.ok(freeBytes() < 1 * MiB, `${freeBytes()} bytes still free`);
  const r = await h.mcp.sc('file_read', { sandbox_id: 'mate', path: 'notes.txt' });
  assert.match(r.content ?? JSON.stringify(r), /one/);
  const lines = await h.mcp.sc('read_command_lines', { sandbox_id: 'mate', command_session_id: full.command, start_offset: 400, limit: 3 });
  assert.deepEqual(lines.lines ?? lines.output?.split('\n').filter(Boolean), ['401', '402', '403']);
  const b = await h.mcp.sc('file_blame', { sandbox_id: 'mate', path: 'notes.txt' });
  assert.ok(JSON.stringify(b).includes('operation:'), JSON.stringify(b));
  for (const args of [['layer', 'list', 'mate'], ['session', 'list', 'mate'], ['command', 'list', 'mate'], ['sandbox', 'list']]) {
    const l = await sbxctl(h.socket, args);
    assert.equal(l.code, 0, `sbxctl ${args.join(' ')}: ${l.stderr}`);
  }
});

h.test('a full state filesystem: writes are refused naming it', async () => {
  const named = new RegExp(`the state filesystem \\(${h.stateDir}\\) (is full|would fall below state_reserve)`);
  const w = await h.mcp.err('file_write', { sandbox_id: 'mate', path: 'more.txt', content: 'x\n' });
  assert.match(w, named);
  const e = await h.mcp.err('exec_command', { sandbox_id: 'mate', cmd: 'echo out > out.txt' });
  assert.match(e, named);
});

h.test('a command whose end cannot be stored does not read running', async () => {
  const sc = (name, args) => h.mcp.sc(name, { sandbox_id: 'mate', ...args });
  await new Promise((r) => setTimeout(r, 2500));
  await sc('finalize_workspace_session', { workspace_session_id: full.ws, action: 'discard' });
  const r = await sc('read_command_lines', { command_session_id: full.slow });
  assert.equal(r.status, 'ok', JSON.stringify(r));
  assert.equal(r.end_reason, 'exit');
  const l = await sbxctl(h.socket, ['--json', 'command', 'list', 'mate']);
  const listed = JSON.parse(l.stdout).find((c) => c.command_session === full.slow);
  assert.equal(listed?.status, 'ok', l.stdout);
});

h.test('the warnings of a full filesystem do not flood the log', async () => {
  const log = fs.readFileSync(h.sbxdLog, 'utf8').split('\n');
  const stored = log.filter((l) => l.includes(`Failed to store output of ${full.slow}`));
  full.outputWarnings = stored.length;
  assert.ok(stored.length >= 1, 'the output that could not be stored is logged');
  assert.ok(stored.length <= 12, `${stored.length} lines of one warning`);
});

h.test('sbxd starts on a full state filesystem, and reads go on', async () => {
  // whatever the last tests freed (only on this test's filesystem: an earlier failure leaves no filler)
  assert.ok(full.filler, 'the state filesystem was filled by the test before');
  await run('dd', ['if=/dev/zero', `of=${full.filler}-more`, 'bs=4k']);
  const t0 = Date.now();
  await h.restartSbxd();
  full.startMs = Date.now() - t0;
  const mcp = await h.connect();
  const r = await mcp.sc('file_read', { sandbox_id: 'mate', path: 'notes.txt' });
  assert.match(r.content, /one/);
  const log = fs.readFileSync(h.sbxdLog, 'utf8');
  assert.ok(!/Cannot build the default image/.test(log), 'the image was not rebuilt');
  process.stdout.write(`# figures: ${JSON.stringify({ ...figures, outputWarnings: full.outputWarnings, startMs: full.startMs })}\n`);
  full.mcp = mcp;
});

h.test('a managed session not finalized at stop comes back with its changes and publishes later', async () => {
  const sc = (name, args) => full.mcp.sc(name, { sandbox_id: 'mate', ...args });
  const listed = (await sc('list_workspace_sessions', {})).sessions.find((s) => s.workspace_session_id === full.kept);
  assert.ok(listed, `session ${full.kept} is listed after the restart`);
  assert.equal(listed.state, 'stopped');
  // Still full: its publication is refused, and it stays.
  const refused = await full.mcp.call('finalize_workspace_session', { sandbox_id: 'mate', workspace_session_id: full.kept, action: 'publish' });
  assert.match(JSON.stringify(refused), /state filesystem/);
  for (const f of fs.readdirSync(h.stateDir).filter((n) => n.startsWith('filler-'))) fs.rmSync(path.join(h.stateDir, f));
  const f = await sc('finalize_workspace_session', { workspace_session_id: full.kept, action: 'publish' });
  assert.equal(f.publication?.published ?? f.published, true, JSON.stringify(f));
  const c = await sc('exec_command', { cmd: 'cat kept.txt; stat -c %s kept-sparse; test -e hello.sh || echo deleted' });
  assert.equal(c.output, 'kept\n1073741824\ndeleted\n');
  const again = (await sc('list_workspace_sessions', {})).sessions.find((s) => s.workspace_session_id === full.kept);
  assert.equal(again, undefined, 'finalized: it is gone');
  // Kept in place at the stop (its own tmpfs, mounted in RUN_DIR/live: the full state filesystem took nothing).
  assert.deepEqual(fs.readdirSync(path.join(h.runDir, 'live', (await show('mate')).id)), [], 'its kept tmpfs is gone');
});
