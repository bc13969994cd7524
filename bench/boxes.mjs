// The boxes set (issue 21 part A): sandbox_start from a spare at the client,
// the thaw of a frozen box, and the memory of frozen boxes. It starts its own
// sbxd like the integration tests (as root), box_image the default image.
//   node bench/boxes.mjs N_START N_THAW N_FROZEN OUT.json
// Samples are microseconds at the client (the SDK client over sandbox-mcp's
// stdio), except thaw_sbxd: the thaw itself as sbxd's log reports it.
import fs from 'node:fs';
import path from 'node:path';
import { Harness, sbxctl, waitFor } from '../tests/integration/helpers.mjs';

const [nStart, nThaw, nFrozen] = process.argv.slice(2, 5).map(Number);
const out = process.argv[5];
const us = (t0) => Number(process.hrtime.bigint() - t0) / 1000;

async function spareReady(h) {
  await waitFor(async () => {
    const r = await sbxctl(h.socket, ['template', 'show', 'box', '--json']);
    return r.code === 0 && JSON.parse(r.stdout).warm_ready >= 1;
  }, { timeout: 60000, interval: 20, what: 'a spare box' });
}

/* The memory cgroups (v1) of the sandboxes named, their usage in bytes summed. */
function memoryOf(sbxdPid, sandboxIds) {
  const want = new Set(sandboxIds);
  let bytes = 0, found = 0;
  const walk = (dir, depth) => {
    if (depth > 8) return;
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const p = path.join(dir, e.name);
      if (want.has(e.name) && p.includes(`sbxd-${sbxdPid}`)) {
        const f = ['memory.usage_in_bytes', 'memory.current'].map((n) => path.join(p, n)).find(fs.existsSync);
        if (f) {
          bytes += Number(fs.readFileSync(f, 'utf8'));
          found++;
        }
        continue;
      }
      walk(p, depth + 1);
    }
  };
  walk(fs.existsSync('/sys/fs/cgroup/memory') ? '/sys/fs/cgroup/memory' : '/sys/fs/cgroup', 0);
  return { bytes, found };
}

const h = await Harness.create({ sandboxes: [], connect: false, sets: 'boxes',
  config: '[sbxd]\nbox_image = default\nbox_spares = 1\nbox_idle_timeout_min = 0\n' });
const res = { start_spare: [], start_cold: [], status: [], thaw_client: [], exec_warm: [], thaw_sbxd: [] };
try {
  const mcp = await h.connect();
  const call = async (name, args) => {
    const r = await mcp.call(name, args);
    if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`);
    return r.structuredContent;
  };
  // sandbox_start from a spare; the first one (cold) and sandbox_status are its baselines.
  let t0 = process.hrtime.bigint();
  const first = await call('sandbox_start', {});
  res.start_cold.push(us(t0));
  for (let i = 0; i < nStart; i++) {
    await spareReady(h);
    t0 = process.hrtime.bigint();
    const b = await call('sandbox_start', {});
    res.start_spare.push(us(t0));
    if (b.startedFrom !== 'spare') throw new Error(`start ${i}: ${b.startedFrom}`);
    t0 = process.hrtime.bigint();
    await call('sandbox_status', { id: b.id });
    res.status.push(us(t0));
    await call('sandbox_stop', { id: b.id });
  }
  await call('sandbox_stop', { id: first.id });
  // Thaw: a box frozen after 0.3 s idle, then sandbox_exec true (thaw + run) against the same on a box never frozen.
  const warm = await call('sandbox_start', { idleTimeoutMin: 0 });
  const cold = await call('sandbox_start', { idleTimeoutMin: 0.005 });
  for (let i = 0; i < nThaw; i++) {
    await waitFor(async () => (await call('sandbox_status', { id: cold.id })).status === 'frozen',
      { timeout: 20000, interval: 20, what: 'frozen' });
    t0 = process.hrtime.bigint();
    await call('sandbox_exec', { id: cold.id, cmd: 'true' });
    res.thaw_client.push(us(t0));
    t0 = process.hrtime.bigint();
    await call('sandbox_exec', { id: warm.id, cmd: 'true' });
    res.exec_warm.push(us(t0));
  }
  for (const m of fs.readFileSync(h.sbxdLog, 'utf8').matchAll(new RegExp(`Box ${cold.id} thawed in (\\d+) us`, 'g')))
    res.thaw_sbxd.push(Number(m[1]));
  await call('sandbox_stop', { id: warm.id });
  await call('sandbox_stop', { id: cold.id });
  // Memory of nFrozen boxes, each with a shell sleeping in the background, all frozen.
  const ids = [];
  for (let i = 0; i < nFrozen; i++) {
    const b = await call('sandbox_start', { idleTimeoutMin: 0.01 });
    await call('sandbox_exec', { id: b.id, cmd: 'sleep 100000', background: true });
    ids.push(b.id);
  }
  for (const id of ids)
    await waitFor(async () => (await call('sandbox_status', { id })).status === 'frozen',
      { timeout: 60000, interval: 50, what: `${id} frozen` });
  const boxes = JSON.parse((await sbxctl(h.socket, ['box', 'list', '--json'])).stdout);
  const sbs = JSON.parse((await sbxctl(h.socket, ['sandbox', 'list', '--json'])).stdout);
  const names = new Set(boxes.filter((b) => ids.includes(b.id)).map((b) => b.sandbox));
  const mem = memoryOf(h.sbxd.pid, sbs.filter((s) => names.has(s.name)).map((s) => s.id));
  res.frozen = { boxes: nFrozen, cgroups: mem.found, bytes: mem.bytes };
  for (const id of ids)
    await call('sandbox_stop', { id });
} finally {
  await h.teardown();
}
fs.writeFileSync(out, JSON.stringify(res));
