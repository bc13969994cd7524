// Transcripts' disk use (issue 15, item 3). The cap counts everything a
// transcript stores (text, sparse index, stream bits): bytes on disk are
// measured with st_blocks. The budgets per sandbox, per owner, of all and of
// files evict the oldest ended commands' transcripts within the scope that is
// over; the agent sees it in list_command_sessions and read_command_lines; a
// running command that does not fit is cut. Paging across the sparse index
// gives exactly the lines of every offset. Each test runs its own sbxd on a
// small loop-mounted state filesystem (stateFsMiB), so no flood reaches the
// machine's disk.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Harness, run, sbxctl, writeFixture, waitDone, ROOT } from './helpers.mjs';

const MiB = 1024 * 1024;

// What the files of command id's transcript take on disk (du), and how many there are.
function diskUse(h, id) {
  const dir = path.join(h.stateDir, 'transcripts');
  let bytes = 0, files = 0;
  for (const f of fs.readdirSync(dir)) {
    if (!f.startsWith(id + '.')) continue;
    bytes += fs.statSync(path.join(dir, f)).blocks * 512;
    files++;
  }
  return { bytes, files };
}

function transcriptFiles(h) {
  return fs.readdirSync(path.join(h.stateDir, 'transcripts')).length;
}

async function withSbxd(opts, fn) {
  const h = await Harness.create({ sets: 'runtime,sessions', stateFsMiB: 200, ...opts });
  let ok = false;
  try {
    await fn(h);
    ok = true;
  } finally {
    if (!ok) h.failures.add('test');
    await h.teardown();
  }
}

// Run cmd in sandbox sb to its end; its command_session_id.
async function runToEnd(h, sb, cmd) {
  const r = await h.mcp.sc('exec_command', { sandbox_id: sb, cmd, yield_time_ms: 30000, timeout_ms: 60000 });
  const done = r.status === 'running' ? await waitDone(h.mcp, sb, r.command_session_id, { timeout: 60000 }) : r;
  assert.notEqual(done.status, 'running');
  return r.command_session_id;
}

async function listed(h, sb) {
  const l = await h.mcp.sc('list_command_sessions', { sandbox_id: sb });
  return Object.fromEntries(l.commands.map((c) => [c.command_session_id, c]));
}

// ~2 MiB of 16-byte lines: more than a 1 MiB cap keeps.
const FLOOD = "yes 0123456789abcde | head -c 2097152";

test('a yes flood stays within a small cap, its index counted (bytes on disk)', { timeout: 120000 }, async () => {
  await withSbxd({ sandboxes: [{ name: 'yes' }], config: '[sbxd]\ntranscript_cap_bytes = 1M\n' }, async (h) => {
    const id = await runToEnd(h, 'yes', "timeout 3 yes ''; true");
    const use = diskUse(h, id);
    assert.ok(use.bytes <= MiB, `the transcript takes ${use.bytes} bytes on disk, over the 1 MiB cap`);
    assert.ok(use.bytes > MiB / 2, `only ${use.bytes} bytes stored`);
    const r = await h.mcp.sc('read_command_lines', { sandbox_id: 'yes', command_session_id: id,
      start_offset: 0, limit: 5 });
    // One empty line per byte of text: far more lines than a per-line index could hold within the cap.
    assert.ok(r.total_lines > MiB * 0.8, `total_lines ${r.total_lines}`);
    const last = await h.mcp.sc('read_command_lines', { sandbox_id: 'yes', command_session_id: id,
      start_offset: r.total_lines - 1, limit: 5 });
    assert.match(last.output, /^\[sbx: transcript cap of 1048576 bytes reached; further output is not kept\]\n$/);
    assert.equal(r.output, '\n\n\n\n\n');
  });
});

test('sandbox budget: floods in two sandboxes evict their own oldest ended transcripts; the agent sees it', { timeout: 180000 }, async () => {
  const config = '[sbxd]\ntranscript_cap_bytes = 1M\nsandbox_transcripts_max_bytes = 3M\n';
  await withSbxd({ sandboxes: [{ name: 'a' }, { name: 'b' }], config }, async (h) => {
    const ids = { a: [], b: [] };
    for (let i = 0; i < 2; i++)
      for (const sb of ['a', 'b']) ids[sb].push(await runToEnd(h, sb, FLOOD));
    // Parallel floods, twice: each sandbox is then over its budget and evicts its own oldest.
    for (let i = 0; i < 2; i++) {
      const both = await Promise.all(['a', 'b'].map((sb) => runToEnd(h, sb, FLOOD)));
      ids.a.push(both[0]);
      ids.b.push(both[1]);
    }
    for (const sb of ['a', 'b']) {
      const l = await listed(h, sb);
      const evicted = ids[sb].filter((id) => l[id].transcript_evicted !== null);
      assert.deepEqual(evicted, ids[sb].slice(0, evicted.length), `${sb}: not the oldest first: ${JSON.stringify(l)}`);
      assert.ok(evicted.length >= 1 && evicted.length < ids[sb].length, `${sb}: ${evicted.length} evicted`);
      assert.equal(l[evicted[0]].transcript_evicted, 'sandbox_transcripts_max_bytes = 3145728');
      const kept = ids[sb].filter((id) => l[id].transcript_evicted === null);
      let sum = 0;
      for (const id of kept) sum += diskUse(h, id).bytes;
      for (const id of evicted) assert.equal(diskUse(h, id).files, 0, `files of evicted ${id} remain`);
      assert.ok(sum <= 3 * MiB, `${sb}: its transcripts take ${sum} bytes on disk`);
      const msg = await h.mcp.err('read_command_lines', { sandbox_id: sb, command_session_id: evicted[0] });
      assert.match(msg, /was evicted to stay within sandbox_transcripts_max_bytes = 3145728/);
      const ok = await h.mcp.sc('read_command_lines', { sandbox_id: sb, command_session_id: kept.at(-1), limit: 1 });
      assert.equal(ok.output, '0123456789abcde\n');
    }
    // sbxctl shows the use against the budget; after a restart it is counted again, the same.
    const show = await sbxctl(h.socket, ['sandbox', 'show', 'a']);
    assert.equal(show.code, 0, show.stderr);
    const line = /^transcripts: (.*) of 3\.0M \(sandbox_transcripts_max_bytes\), (\d+) files$/m.exec(show.stdout);
    assert.ok(line, show.stdout);
    const json = JSON.parse((await sbxctl(h.socket, ['--json', 'sandbox', 'show', 'a'])).stdout);
    assert.ok(json.transcript_bytes > 0 && json.transcript_bytes <= 3 * MiB, JSON.stringify(json));
    assert.equal(json.transcripts_max_bytes, 3 * MiB);
    await h.restartSbxd();
    const again = JSON.parse((await sbxctl(h.socket, ['--json', 'sandbox', 'show', 'a'])).stdout);
    assert.equal(again.transcript_bytes, json.transcript_bytes);
    assert.equal(again.transcript_files, json.transcript_files);
  });
});

test('a running command that does not fit its sandbox budget is cut, and says so', { timeout: 120000 }, async () => {
  const config = '[sbxd]\nsandbox_transcripts_max_bytes = 2M\n';
  await withSbxd({ sandboxes: [{ name: 'cut' }], config }, async (h) => {
    const id = await runToEnd(h, 'cut', 'yes 0123456789abcde | head -c 8388608');
    const use = diskUse(h, id);
    assert.ok(use.bytes <= 2 * MiB, `${use.bytes} bytes on disk`);
    const first = await h.mcp.sc('read_command_lines', { sandbox_id: 'cut', command_session_id: id, limit: 1 });
    const last = await h.mcp.sc('read_command_lines', { sandbox_id: 'cut', command_session_id: id,
      start_offset: first.total_lines - 1 });
    assert.match(last.output, /^\[sbx: transcript cut at \d+ bytes stored to stay within sandbox_transcripts_max_bytes = 2097152; further output is not kept\]\n$/);
  });
});

test('owner and global budgets evict within the owner, then of all, oldest first', { timeout: 240000 }, async () => {
  const config = '[sbxd]\ntranscript_cap_bytes = 1M\nowner_transcripts_max_bytes = 3M\ntranscripts_max_bytes = 4M\n';
  // world: the owner 4242 of p1 may read its source (sandbox create imports as the owner).
  await withSbxd({ sandboxes: [{ name: 'o1' }, { name: 'o2' }], config, world: true }, async (h) => {
    const src = path.join(h.dir, 'src-p1');
    await writeFixture(src);
    const c = await sbxctl(h.socket, ['sandbox', 'create', 'p1', '--source', src, '--owner', '4242']);
    assert.equal(c.code, 0, c.stderr);
    // Owner 0: four floods over two sandboxes, each under its sandbox budget (1 GiB).
    const o = [];
    for (const sb of ['o1', 'o2', 'o1', 'o2']) o.push([sb, await runToEnd(h, sb, FLOOD)]);
    const owned = async () => {
      const l = { ...(await listed(h, 'o1')), ...(await listed(h, 'o2')) };
      return o.map(([, id]) => l[id].transcript_evicted);
    };
    const before = await owned();
    assert.equal(before[0], 'owner_transcripts_max_bytes = 3145728', JSON.stringify(before));
    assert.equal(before[3], null);
    // Owner 4242: two floods, under its owner budget; all of it is then over 4 MiB: the oldest of all
    // go, owner 0's, not its own.
    const p = [];
    for (let i = 0; i < 2; i++) p.push(await runToEnd(h, 'p1', FLOOD));
    const after = await owned();
    const OWNER = 'owner_transcripts_max_bytes = 3145728', ALL = 'transcripts_max_bytes = 4194304';
    const nOwner = after.filter((r) => r === OWNER).length, nAll = after.filter((r) => r === ALL).length;
    assert.ok(nOwner >= 1 && nAll >= 1, JSON.stringify(after));
    assert.deepEqual(after.slice(0, nOwner + nAll), [...Array(nOwner).fill(OWNER), ...Array(nAll).fill(ALL)],
      `oldest first: ${JSON.stringify(after)}`);
    assert.equal(after[3], null, JSON.stringify(after));
    const lp = await listed(h, 'p1');
    for (const id of p) assert.equal(lp[id].transcript_evicted, null);
    const victim = o[nOwner];
    const msg = await h.mcp.err('read_command_lines', { sandbox_id: victim[0], command_session_id: victim[1] });
    assert.match(msg, /evicted to stay within transcripts_max_bytes = 4194304/);
    let total = 0;
    for (const [, id] of o) total += diskUse(h, id).bytes;
    for (const id of p) total += diskUse(h, id).bytes;
    assert.ok(total <= 4 * MiB, `all transcripts take ${total} bytes on disk`);
    const show = await sbxctl(h.socket, ['sandbox', 'show', 'o1']);
    assert.match(show.stdout, /^owner's transcripts: .* of 3\.0M \(owner_transcripts_max_bytes\)$/m);
    assert.match(show.stdout, /^all transcripts: .* of 4\.0M \(transcripts_max_bytes\), \d+ of 100000 files \(transcripts_max_inodes\)$/m);
  });
});

test('inode budget: many tiny commands keep at most transcripts_max_inodes files', { timeout: 180000 }, async () => {
  await withSbxd({ sandboxes: [{ name: 'tiny' }], config: '[sbxd]\ntranscripts_max_inodes = 40\n' }, async (h) => {
    const ids = [];
    for (let i = 0; i < 30; i++) {
      const r = await h.mcp.sc('exec_command', { sandbox_id: 'tiny', cmd: `echo tiny ${i}` });
      assert.equal(r.output, `tiny ${i}\n`);
      ids.push(r.command_session_id);
      assert.ok(transcriptFiles(h) <= 40, `${transcriptFiles(h)} transcript files after ${i + 1} commands`);
    }
    const l = await listed(h, 'tiny');
    const evicted = ids.filter((id) => l[id].transcript_evicted !== null);
    assert.deepEqual(evicted, ids.slice(0, evicted.length), 'not the oldest first');
    assert.ok(evicted.length >= 10, `${evicted.length} evicted`);
    assert.equal(l[evicted[0]].transcript_evicted, 'transcripts_max_inodes = 40');
    const msg = await h.mcp.err('read_command_lines', { sandbox_id: 'tiny', command_session_id: ids[0] });
    assert.match(msg, /evicted to stay within transcripts_max_inodes = 40/);
    const cl = JSON.parse((await sbxctl(h.socket, ['--json', 'command', 'list', 'tiny'])).stdout);
    assert.equal(cl.find((c) => c.command_session === ids[0]).transcript_evicted, 'transcripts_max_inodes = 40');
    const last = await h.mcp.sc('read_command_lines', { sandbox_id: 'tiny', command_session_id: ids.at(-1) });
    assert.equal(last.output, 'tiny 29\n');
  });
});

test('inode budget: a command is refused when only running commands hold the files', { timeout: 120000 }, async () => {
  await withSbxd({ sandboxes: [{ name: 'run' }], config: '[sbxd]\ntranscripts_max_inodes = 16\n' }, async (h) => {
    const running = [];
    for (let i = 0; i < 8; i++) {
      const r = await h.mcp.sc('exec_command', { sandbox_id: 'run', cmd: 'sleep 60', yield_time_ms: 100, timeout_ms: 60000 });
      assert.equal(r.status, 'running');
      running.push(r.command_session_id);
    }
    const msg = await h.mcp.err('exec_command', { sandbox_id: 'run', cmd: 'echo one more' });
    assert.match(msg, /transcripts_max_inodes \(16\) reached: transcripts use 16 files, 2 more asked, and none is of an ended command/);
    // One ends: its transcript is evicted for the next command.
    await h.mcp.sc('cancel_command', { sandbox_id: 'run', command_session_id: running[0] });
    const r = await h.mcp.sc('exec_command', { sandbox_id: 'run', cmd: 'echo one more' });
    assert.equal(r.output, 'one more\n');
    const l = await listed(h, 'run');
    assert.equal(l[running[0]].transcript_evicted, 'transcripts_max_inodes = 16');
    for (const id of running.slice(1)) await h.mcp.sc('cancel_command', { sandbox_id: 'run', command_session_id: id });
  });
});

// Paging: every offset around the index's blocks, and windows across them.
const PROTO_VERSION = /#define SBX_PROTO_VERSION (\d+)u/.exec(
  readFileSync(path.join(ROOT, 'proto', 'wire.h'), 'utf8'))[1];

test('paging across the sparse index returns exactly the lines of each offset, merged and per stream', { timeout: 180000 }, async () => {
  await withSbxd({ sandboxes: [{ name: 'pg' }], stateFsMiB: 100 }, async (h) => {
    const id = await runToEnd(h, 'pg', 'seq 1 100000');
    for (const [start, limit] of [[0, 3], [62, 5], [63, 2], [64, 1], [127, 3], [12345, 7], [99990, 20], [65, 1000]]) {
      const r = await h.mcp.sc('read_command_lines', { sandbox_id: 'pg', command_session_id: id, start_offset: start, limit });
      const want = [];
      for (let i = start; i < Math.min(start + limit, 100000); i++) want.push(String(i + 1));
      assert.equal(r.output, want.join('\n') + '\n', `at ${start}`);
      assert.equal(r.end_offset, start + want.length);
      assert.equal(r.total_lines, 100000);
    }
    // Streams apart (a supervisor request; raw-client.py): o<i> on stdout, e<i> on stderr every 7th.
    const script = 'i=1; while [ $i -le 3000 ]; do echo o$i; [ $((i % 7)) -eq 0 ] && echo e$i >&2; i=$((i + 1)); done';
    const reqs = [{ op: 'exec', cmd: script, separate_streams: true }, { op: 'wait', command_session: '$last' }];
    const offsets = [[1, 0, 3], [1, 63, 3], [1, 2990, 50], [2, 0, 2], [2, 62, 4], [2, 420, 10],
      [0, 70, 4], [0, 63, 3], [0, 1999, 5], [0, 3420, 20]];
    // The merged view's order is the order of arrival (two pipes): paged through first, then windows of it.
    const pages = [0, 1000, 2000, 3000];
    for (const start of pages)
      reqs.push({ op: 'read', command_session: '$last', stream: 0, start_offset: start, limit: 1000 });
    for (const [stream, start, limit] of offsets)
      reqs.push({ op: 'read', command_session: '$last', stream, start_offset: start, limit });
    const out = await run('python3', [path.join(ROOT, 'tests', 'integration', 'raw-client.py'), h.socket], {
      timeout: 60000, input: reqs.map((q) => JSON.stringify({ sandbox: 'pg', ...q })).join('\n') + '\n',
      env: { ...process.env, SBX_PROTO_VERSION: PROTO_VERSION },
    });
    assert.equal(out.code, 0, out.stderr);
    const answers = out.stdout.trim().split('\n').map((l) => JSON.parse(l)).slice(2);
    const views = { 1: [], 2: [], 0: answers.slice(0, pages.length).map((a) => a.output).join('').split('\n').slice(0, -1) };
    for (let i = 1; i <= 3000; i++) {
      views[1].push(`o${i}`);
      if (i % 7 === 0) views[2].push(`e${i}`);
    }
    assert.equal(views[0].length, 3000 + 428);
    assert.deepEqual([...views[0]].sort(), [...views[1], ...views[2]].sort());
    offsets.forEach(([stream, start, limit], k) => {
      const a = answers[pages.length + k];
      const want = views[stream].slice(start, start + limit);
      assert.equal(a.output, want.join('\n') + '\n', `stream ${stream} at ${start}: ${JSON.stringify(a)}`);
      assert.equal(a.total_lines, views[stream].length);
    });
  });
});
