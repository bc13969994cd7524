// The isolation battery, part 2: abuse cases. During each, a second client
// runs `echo probe` in another sandbox over and over; its latency is printed
// and must stay low. Afterwards nothing of the attack may remain.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { outputLines, readAll, waitDone, hostProcsMatching, sbxctl, T } from '../integration/helpers.mjs';
import { useBattery, noneLeft, sleep } from './common.mjs';

const DISK = 64 << 20;
const CAP = 1 << 20;
const { h, test } = useBattery({
  config: `[sbxd]\nsession_disk_bytes = ${DISK}\ntranscript_cap_bytes = ${CAP}\n`,
  sandboxes: [
    { name: 'probe' }, { name: 'bomb', pids: 64 }, { name: 'hog', memory: 64 << 20 }, { name: 'disk' },
    { name: 'flood' }, { name: 'term' }, { name: 'many' }, { name: 'shared', pids: 64, memory: 128 << 20 },
  ],
});
/* Sanitizer builds (make check-sanitize) run several times slower. */
const SLOW = process.env.ASAN_OPTIONS ? 6 : 1;
const LATENCY_MAX_MS = 3000 * SLOW;
let probeClient = null;

const exec = (sandbox_id, cmd, extra = {}) =>
  h.mcp.sc('exec_command', { sandbox_id, cmd, timeout_ms: 20000, yield_time_ms: 20000, ...extra });

/* Run attack() while a second client measures exec_command latency in sandbox "probe". */
async function underAttack(label, attack, { limit = LATENCY_MAX_MS } = {}) {
  probeClient ??= await h.connect();
  const lat = [];
  let stop = false;
  let bad = null;
  const loop = (async () => {
    while (!stop) {
      const t0 = performance.now();
      let r = await probeClient.sc('exec_command', { sandbox_id: 'probe', cmd: 'echo probe', timeout_ms: 120000, yield_time_ms: 30000 });
      if (r.status === 'running') r = await waitDone(probeClient, 'probe', r.command_session_id, { timeout: 120000 });
      lat.push(performance.now() - t0);
      if (r.output !== 'probe\n' || r.status !== 'ok') bad = `probe answered ${JSON.stringify(r)}`;
      await sleep(100);
    }
  })();
  let result;
  try {
    await sleep(50);
    result = await attack();
  } finally {
    stop = true;
    await loop;
  }
  lat.sort((a, b) => a - b);
  const med = lat[Math.floor(lat.length / 2)];
  const max = lat[lat.length - 1];
  process.stdout.write(`# latency of exec_command in another sandbox during ${label}: ` +
    `n=${lat.length} median ${med.toFixed(0)} ms max ${max.toFixed(0)} ms\n`);
  assert.equal(bad, null, bad);
  assert.ok(max < limit, `exec_command in another sandbox took ${max.toFixed(0)} ms during ${label}`);
  assert.ok(h.sbxd.running, `sbxd died during ${label}`);
  return result;
}

test('fork bomb (pids limit)', async () => {
  const mark = T(401);
  const r = await underAttack('a fork bomb', () =>
    exec('bomb', `: ${mark}; bomb() { bomb | bomb & }; bomb; sleep 3`, { timeout_ms: 4000 }));
  process.stdout.write(`# fork bomb: status ${r.status}, end_reason ${r.end_reason}\n`);
  assert.ok(['timed_out', 'error', 'ok'].includes(r.status));
  await noneLeft(mark);
  assert.equal((await exec('bomb', 'echo fine')).output, 'fine\n');
});

test('memory hog (OOM ends the command, the session and other sessions survive)', async () => {
  const keep = T(402);
  const keeper = await exec('hog', `sleep ${keep}`, { yield_time_ms: 300, timeout_ms: 6000 });
  assert.equal(keeper.status, 'running');
  const ws = keeper.workspace_session_id;
  const r = await underAttack('a memory hog', () =>
    exec('hog', "python3 -c \"a = []\nwhile True: a.append(bytearray(1 << 20))\"", { workspace_session_id: ws, timeout_ms: 15000 }));
  process.stdout.write(`# memory hog: status ${r.status}, end_reason ${r.end_reason}, signal ${r.signal ?? 'none'}\n`);
  assert.equal(r.end_reason, 'out_of_memory', JSON.stringify(r));
  assert.notEqual(r.status, 'ok');
  // the worker (PID 1 of the session) was not the victim: the session still runs commands
  const alive = await exec('hog', 'echo alive; cat /proc/self/oom_score_adj', { workspace_session_id: ws });
  assert.deepEqual(outputLines(alive), ['alive', '500']);
  assert.ok(hostProcsMatching(`sleep ${keep}`).length > 0, 'the other command of the session died');
  await h.mcp.call('read_command_lines', { sandbox_id: 'hog', command_session_id: keeper.command_session_id });
  await noneLeft(`sleep ${keep}`, 20000);
});

/* Bytes sbx keeps on the host disk (the machine is shared: free space moves on its own). */
function usedBytes(dir) {
  let n = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    try {
      if (e.isFile()) n += fs.lstatSync(path.join(e.path ?? e.parentPath, e.name)).size;
    } catch {}
  }
  return n;
}

test('disk filler (the session tmpfs and /tmp are capped)', async () => {
  const before = usedBytes(h.stateDir);
  const r = await underAttack('a disk filler', () =>
    exec('disk', 'for f in /workspace/fill /tmp/fill /root/fill; do dd if=/dev/zero of=$f bs=1M count=512 2>&1 | grep -E "No space|copied"; done; ' +
      'du -sm /workspace/fill /tmp/fill 2>/dev/null; rm -f /workspace/fill; echo end'));
  assert.match(r.output, /No space left on device/, r.output);
  for (const l of outputLines(r).filter((x) => /^\d+\s+\//.test(x))) {
    assert.ok(Number(l.split(/\s+/)[0]) <= DISK >> 20, `more than the session's disk was written: ${l}`);
  }
  const after = usedBytes(h.stateDir);
  process.stdout.write(`# disk filler: sbx's state on the host grew by ${((after - before) / 1048576).toFixed(1)} MiB\n`);
  assert.ok(after - before < 8 << 20, `sbx's state grew by ${after - before} bytes`);
});

test('output flood (the transcript cap holds, sbxd memory stays bounded)', async () => {
  const rss = () => Number(/^VmRSS:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${h.sbxd.pid}/status`, 'utf8'))[1]) * 1024;
  const rss0 = rss();
  const r = await underAttack('an output flood', () =>
    exec('flood', 'yes "flood line flood line flood line flood line"', { timeout_ms: 4000, yield_time_ms: 1000 })
      .then((sc) => (sc.status === 'running' ? waitDone(h.mcp, 'flood', sc.command_session_id) : sc)));
  assert.equal(r.status, 'timed_out');
  const file = path.join(h.stateDir, 'transcripts', `${r.command_session_id}.log`);
  const size = fs.existsSync(file) ? fs.statSync(file).size : null;
  const rss1 = rss();
  process.stdout.write(`# output flood: ${r.total_lines} lines kept, transcript ${size} bytes on disk (cap ${CAP}), ` +
    `original_token_count ${r.original_token_count}, sbxd RSS ${(rss0 / 1048576).toFixed(1)} -> ${(rss1 / 1048576).toFixed(1)} MiB\n`);
  if (size !== null) assert.ok(size <= CAP + 8192, `transcript is ${size} bytes, over the cap`);
  assert.ok(r.original_token_count * 4 > CAP, 'the flood was smaller than the cap');
  const last = await h.mcp.sc('read_command_lines', { sandbox_id: 'flood', command_session_id: r.command_session_id,
    start_offset: Math.max(0, r.total_lines - 3), limit: 10 });
  assert.match(last.output, /transcript cap of \d+ bytes reached/);
  assert.ok(rss1 - rss0 < (64 << 20) * SLOW, `sbxd grew by ${rss1 - rss0} bytes`);
});

test('a command that ignores SIGTERM is killed at its timeout', async () => {
  const mark = T(403);
  const t0 = Date.now();
  const r = await underAttack('a SIGTERM-ignoring command', () =>
    exec('term', `trap '' TERM INT HUP; sleep ${mark}`, { timeout_ms: 1000 }));
  const ms = Date.now() - t0;
  assert.equal(r.status, 'timed_out');
  assert.ok(ms < 6000, `took ${ms} ms`);
  await noneLeft(`sleep ${mark}`);
});

test('a double fork does not escape the timeout', async () => {
  const esc = T(404);
  const r = await underAttack('a double-forking command', () =>
    exec('term', `(setsid sh -c 'trap "" TERM HUP; exec sleep ${esc}' </dev/null >/dev/null 2>&1 &); sleep ${T(405)}`,
      { timeout_ms: 1000 }));
  assert.equal(r.status, 'timed_out');
  await noneLeft(`sleep ${esc}`, 8000);
  await noneLeft(`sleep ${T(405)}`);
});

test('100 commands at once', async () => {
  const mark = T(406);
  const rs = await underAttack('100 simultaneous commands', () => Promise.all(
    Array.from({ length: 100 }, (_, i) => h.mcp.call('exec_command', {
      sandbox_id: 'many', cmd: `echo n${i} ${mark}; sleep 0.5`, timeout_ms: 30000, yield_time_ms: 30000,
    }))), { limit: 10000 * SLOW }); // sessions start one after another in sbxd's loop (about 15-30 ms each here)
  let ok = 0, refused = 0;
  rs.forEach((r, i) => {
    if (r.isError) {
      refused++;
      const text = (r.content ?? []).map((c) => c.text ?? '').join(' ');
      assert.match(text, /too many|limit|busy|try again/i, `call ${i} failed oddly: ${text}`);
    } else {
      ok++;
      assert.equal(r.structuredContent.output, `n${i} ${mark}\n`);
      assert.equal(r.structuredContent.status, 'ok');
    }
  });
  process.stdout.write(`# 100 commands at once: ${ok} ran, ${refused} refused with a clear error\n`);
  assert.ok(ok >= 50, `only ${ok} of 100 commands ran`);
  await noneLeft(mark);
  assert.equal((await exec('many', 'echo after')).output, 'after\n');
});

/* Sample fn() every 50 ms while run() goes; the largest value seen. */
async function peakDuring(fn, run) {
  let peak = 0, stop = false;
  const sampler = (async () => {
    while (!stop) {
      peak = Math.max(peak, fn());
      await sleep(50);
    }
  })();
  let result;
  try {
    result = await run();
  } finally {
    stop = true;
    await sampler;
  }
  return { peak, result };
}

/* 16 commands at once in one sandbox, each in its own automatic session. */
const sixteen = (cmd, timeout_ms) => Promise.all(Array.from({ length: 16 }, () =>
  h.mcp.call('exec_command', { sandbox_id: 'shared', cmd, timeout_ms, yield_time_ms: 30000 })));

const sandboxShow = async (name) => JSON.parse((await sbxctl(h.socket, ['--json', 'sandbox', 'show', name])).stdout);
const sandboxId = async (name) => (await sandboxShow(name)).id;

/* A file of the sandbox's cgroup (docs/cgroups.md: v1 <ctrl><own>/sbxd-PID/ID,
 * v2 <own>/sandboxes/ID), or null if there is no such file. */
function sandboxCgroupFile(ctrl, file, id) {
  const lines = fs.readFileSync(`/proc/${h.sbxd.pid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.find((l) => l.split(':')[1]?.split(',').includes(ctrl));
  const v2 = lines.find((l) => l.startsWith('0::'));
  const candidates = [];
  if (v1) candidates.push(path.join('/sys/fs/cgroup', ctrl, v1.split(':')[2], `sbxd-${h.sbxd.pid}`, id, file));
  if (v2) candidates.push(path.join('/sys/fs/cgroup', path.dirname(v2.slice(3)), 'sandboxes', id, file));
  for (const p of candidates) {
    try {
      return { path: p, value: fs.readFileSync(p, 'utf8') };
    } catch {}
  }
  return null;
}

/* Host processes running as one of the sandbox's host ids. */
async function sandboxProcCount(name) {
  const { uid_base, uid_count } = await sandboxShow(name);
  return () => {
    let n = 0;
    for (const ent of fs.readdirSync('/proc')) {
      try {
        const uid = Number(/^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${ent}/status`, 'utf8'))[1]);
        if (uid >= uid_base && uid < uid_base + uid_count) n++;
      } catch {}
    }
    return n;
  };
}

test('a sandbox\'s pids limit holds for all its sessions together (16 commands, --pids 64)', async () => {
  const mark = T(407);
  const count = await sandboxProcCount('shared');
  // Each command asks for 60 processes: 960 in all; each session alone may have 64.
  const { peak, result } = await peakDuring(count, () =>
    underAttack('16 commands forking in one sandbox', () =>
      sixteen(`sleep 3 & f=$!; for i in $(seq 60); do sleep ${mark} & done 2>/dev/null; wait $f; false`, 8000), { limit: 10000 * SLOW }));
  const ends = result.map((r) => r.structuredContent?.end_reason ?? 'isError');
  process.stdout.write(`# 16 commands x 60 processes in a sandbox with --pids 64: at most ${peak} processes of the sandbox ` +
    `(its sessions' workers included) ran at once; ` +
    `end reasons ${JSON.stringify(ends)}\n`);
  assert.ok(peak <= 64, `${peak} processes of the sandbox ran at once, over its limit of 64`);
  // The kernel's own count, where it keeps one (pids.peak, Linux 6.1 and later on v1).
  const cg = sandboxCgroupFile('pids', 'pids.peak', await sandboxId('shared'));
  if (cg) {
    process.stdout.write(`# the sandbox's cgroup counted at most ${cg.value.trim()} processes (${cg.path})\n`);
    assert.ok(Number(cg.value) <= 64, `the sandbox's pids.peak is ${cg.value}`);
  }
  assert.ok(peak >= 16, `only ${peak} processes ran: the attack did not run`);
  assert.ok(ends.includes('pids_limit'), 'no command says it hit the pids limit');
  // A session that would not fit any more is refused, with the limit and the count.
  for (const r of result.filter((x) => x.isError)) {
    const text = (r.content ?? []).map((c) => c.text ?? '').join(' ');
    process.stdout.write(`# refused: ${text}\n`);
    assert.match(text, /at its pids limit: \d+ of 64 processes|at their pids limit/);
  }
  await noneLeft(`sleep ${mark}`);
  assert.equal((await exec('shared', 'echo fine')).output, 'fine\n');
});

/* Anonymous memory (no shared library pages) of the processes matching needle, in bytes. */
function anonBytes(needle) {
  let n = 0;
  for (const p of hostProcsMatching(needle)) {
    try {
      n += Number(/^RssAnon:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${p.pid}/status`, 'utf8'))[1]) * 1024;
    } catch {}
  }
  return n;
}

test('a sandbox\'s memory limit holds for all its sessions together (16 commands, --memory 128M)', async () => {
  const mark = T(408);
  // Each command holds 48 MiB: 768 MiB in all; each session alone may have 128 MiB.
  const { peak, result } = await peakDuring(() => anonBytes(`sleep(${mark})`), () =>
    underAttack('16 commands filling memory in one sandbox', () =>
      sixteen(`python3 -c "import time; b = b'x' * (48 << 20); time.sleep(${mark})"`, 6000), { limit: 10000 * SLOW }));
  const ends = result.map((r) => r.structuredContent?.end_reason ?? 'isError');
  process.stdout.write(`# 16 commands x 48 MiB in a sandbox with --memory 128M: at most ${(peak / 1048576).toFixed(0)} MiB ` +
    `held at once; end reasons ${JSON.stringify(ends)}\n`);
  assert.ok(peak <= 128 << 20, `${peak} bytes held by the sandbox's commands at once, over its limit of 128 MiB`);
  const cg = sandboxCgroupFile('memory', 'memory.max_usage_in_bytes', await sandboxId('shared')) ??
    sandboxCgroupFile('memory', 'memory.peak', await sandboxId('shared'));
  if (cg) {
    process.stdout.write(`# the sandbox's cgroup counted at most ${(Number(cg.value) / 1048576).toFixed(0)} MiB (${cg.path})\n`);
    assert.ok(Number(cg.value) <= 128 << 20, `the sandbox's memory peak is ${cg.value}`);
  }
  assert.ok(peak >= 48 << 20, `only ${peak} bytes were held: the attack did not run`);
  assert.ok(ends.includes('out_of_memory'), 'no command says it ran out of memory');
  await noneLeft(`sleep(${mark})`);
  assert.equal((await exec('shared', 'echo fine')).output, 'fine\n');
});

test('afterwards nothing of the attacks remains', async () => {
  await sleep(200);
  const left = hostProcsMatching(new RegExp(`\\b(${[401, 402, 403, 404, 405, 406, 407, 408].map((n) => T(n).replace('.', '\\.')).join('|')})\\b`));
  assert.deepEqual(left, []);
  const st = await h.mcp.call('exec_command', { sandbox_id: 'probe', cmd: 'echo done' });
  assert.equal(st.structuredContent.output, 'done\n');
});
