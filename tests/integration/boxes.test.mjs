// The boxes set (issue 21 part A; shared/seeds/003): sandbox_start,
// sandbox_exec, sandbox_status and sandbox_stop through the MCP SDK client,
// against boxes of sbxd (supervisor/core/box.h). box_image is the default
// image here (the browser image is not needed for the box core).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, sbxctl, run, sleep, SANDBOX_MCP, waitFor } from './helpers.mjs';

const U1 = 65534;
const U2 = 65533;
const h = useSbx({ sandboxes: [], sets: 'boxes', world: true,
  config: '[sbxd]\nsocket_mode = 0666\nbox_image = default\nbox_spares = 1\nboxes_per_user = 3\n' });

const start = (args = {}) => h.mcp.sc('sandbox_start', args);
const exec = (id, cmd, extra = {}) => h.mcp.sc('sandbox_exec', { id, cmd, ...extra });
const status = (id) => h.mcp.sc('sandbox_status', { id });
const stop = (id) => h.mcp.sc('sandbox_stop', { id });

h.test('tools/list: the four box tools with titles, schemas and honest annotations', async () => {
  const by = Object.fromEntries(h.mcp.tools.map((t) => [t.name, t]));
  // The box core's four first; the other parts of issue 21 add theirs after them.
  assert.deepEqual(Object.keys(by).slice(0, 4), ['sandbox_start', 'sandbox_exec', 'sandbox_status', 'sandbox_stop']);
  for (const t of h.mcp.tools) {
    assert.ok(t.title && t.description && t.outputSchema, t.name);
    assert.equal(t.inputSchema.type, 'object');
  }
  assert.equal(by.sandbox_status.annotations.readOnlyHint, true);
  assert.equal(by.sandbox_stop.annotations.destructiveHint, true);
  assert.equal(by.sandbox_exec.inputSchema.properties.timeoutSec.default, 60);
  assert.deepEqual(by.sandbox_exec.inputSchema.required, ['id', 'cmd']);
});

h.test('a cold box: start, foreground exec in /work, cwd, stop, then terminated', async () => {
  // The first box since sbxd started is cold: spares are made once boxes are in use.
  const b = await start({ services: [{ name: 'web', port: 8080 }], idleTimeoutMin: 0 });
  assert.match(b.id, /^box-[0-9a-f]{12}$/);
  assert.equal(b.startedFrom, 'cold');
  assert.equal(b.status, 'ready');
  assert.equal(b.takeoverUrl, `sbxctl takeover attach ${b.id}`);
  const r = await exec(b.id, 'echo out; echo err >&2; pwd; exit 3');
  assert.equal(r.exitCode, 3);
  assert.equal(r.stdout, 'out\n/work\n');
  assert.equal(r.stderr, 'err\n');
  assert.equal(r.bgId, null);
  await exec(b.id, 'mkdir -p sub/dir && echo kept > sub/dir/f');
  const c = await exec(b.id, 'pwd; cat f', { cwd: 'sub/dir' });
  assert.equal(c.stdout, '/work/sub/dir\nkept\n');
  assert.equal((await exec(b.id, 'pwd', { cwd: 'sub/dir/../..' })).stdout, '/work\n');
  const esc = await h.mcp.call('sandbox_exec', { id: b.id, cmd: 'pwd', cwd: '../etc' });
  assert.equal(esc.isError, true);
  assert.match(esc.content[0].text, /climbs out of \/work/);
  const missing = await h.mcp.call('sandbox_exec', { id: b.id, cmd: 'pwd', cwd: 'nope' });
  assert.equal(missing.isError, true);
  assert.match(missing.content[0].text, /\/work\/nope is not a directory/);
  const st = await status(b.id);
  assert.equal(st.status, 'ready');
  assert.equal(st.health, 'ok');
  assert.deepEqual(st.services, [{ name: 'web', port: 8080 }]);
  assert.equal(st.interruptedReason, null);
  // The default image has no /usr/bin/Xvfb: no display, no DISPLAY.
  assert.equal(st.display, null);
  assert.equal((await exec(b.id, 'echo ${DISPLAY:-none}')).stdout, 'none\n');
  assert.deepEqual(await stop(b.id), { ok: true, id: b.id });
  assert.equal((await status(b.id)).status, 'terminated');
  const after = await h.mcp.call('sandbox_exec', { id: b.id, cmd: 'true' });
  assert.equal(after.isError, true);
  assert.match(after.content[0].text, /is terminated/);
});

h.test('a spare box starts at once; background exec logs under /work/.sbx and outlives the call', async () => {
  await waitFor(async () => {
    const r = await sbxctl(h.socket, ['template', 'show', 'box', '--json']);
    return r.code === 0 && JSON.parse(r.stdout).warm_ready >= 1;
  }, { timeout: 30000, what: 'a spare box' });
  const b = await start();
  assert.equal(b.startedFrom, 'spare');
  const bg = await exec(b.id, 'echo started; sleep 1; echo done', { background: true });
  assert.match(bg.bgId, /^bg-[0-9a-f]{12}$/);
  assert.equal(bg.exitCode, null);
  await waitFor(async () => (await exec(b.id, `cat .sbx/${bg.bgId}.log`)).stdout === 'started\ndone\n',
    { timeout: 10000, what: 'the background log' });
  await stop(b.id);
});

/* The host pids in the box's session cgroups (pids hierarchy, v1; or the v2 tree), by its sandbox's id. */
async function boxPids(id) {
  const show = JSON.parse((await sbxctl(h.socket, ['box', 'show', id, '--json'])).stdout);
  const sbs = JSON.parse((await sbxctl(h.socket, ['sandbox', 'list', '--json'])).stdout);
  const sb = sbs.find((x) => x.name === show.sandbox);
  assert.ok(sb, `sandbox ${show.sandbox} of ${id}`);
  const roots = ['/sys/fs/cgroup/pids', '/sys/fs/cgroup'].filter((r) => fs.existsSync(path.join(r, 'cgroup.procs')));
  const pids = [];
  const walk = (dir, depth, inside) => {
    if (depth > 9) return;
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const p = path.join(dir, e.name), here = inside || e.name === sb.id;
      if (here)
        for (const l of fs.readFileSync(path.join(p, 'cgroup.procs'), 'utf8').split('\n'))
          if (l) pids.push(Number(l));
      walk(p, depth + 1, here);
    }
  };
  walk(roots[0], 0, false);
  return pids;
}

/* utime + stime of the processes, in clock ticks (the box's CPU time). */
function cpuTicks(pids) {
  let t = 0;
  for (const pid of pids) {
    try {
      const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').slice(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').lastIndexOf(')') + 2).split(' ');
      t += Number(f[11]) + Number(f[12]);
    } catch {}
  }
  return t;
}

h.test('idle freeze: a busy loop stops using CPU; status says frozen without thawing; the next call thaws it, the loop alive', async () => {
  const b = await start({ idleTimeoutMin: 0.02 });
  const bg = await exec(b.id, 'echo $$ > /work/loop.pid; exec sh -c "while :; do :; done"', { background: true });
  assert.ok(bg.bgId);
  await waitFor(async () => (await status(b.id)).status === 'frozen', { timeout: 20000, what: 'the box frozen' });
  const pids = await boxPids(b.id);
  assert.ok(pids.length > 0, 'processes in the box');
  const t0 = cpuTicks(pids);
  await sleep(1500);
  const t1 = cpuTicks(pids);
  assert.ok(t1 - t0 <= 1, `frozen: CPU ticks grew ${t0} -> ${t1}`);
  const st = await status(b.id);
  assert.equal(st.status, 'frozen', 'sandbox_status does not thaw');
  assert.match(st.health, /frozen/);
  // The next call thaws it first: the loop is still there and runs again.
  const r = await exec(b.id, 'kill -0 $(cat /work/loop.pid) && echo alive');
  assert.equal(r.stdout, 'alive\n');
  const t2 = cpuTicks(pids);
  await sleep(700);
  assert.ok(cpuTicks(pids) > t2, 'the loop uses CPU again after the thaw');
  // sandbox_stop works on a frozen box too.
  await waitFor(async () => (await status(b.id)).status === 'frozen', { timeout: 20000, what: 'frozen again' });
  await stop(b.id);
  assert.equal((await status(b.id)).status, 'terminated');
});

h.test('an sbxd restart interrupts a box (supervisor_lost): said once, then it runs with its files, without its processes', async () => {
  const b = await start({ idleTimeoutMin: 0, services: [{ name: 'api', port: 3000 }] });
  await exec(b.id, 'echo kept > /work/f; mkdir -p /work/d');
  await exec(b.id, 'sleep 1000', { background: true });
  await h.restartSbxd();
  const st = await status(b.id);
  assert.equal(st.status, 'interrupted');
  assert.match(st.interruptedReason, /^supervisor_lost: /);
  assert.deepEqual(st.services, [{ name: 'api', port: 3000 }]);
  const once = await h.mcp.call('sandbox_exec', { id: b.id, cmd: 'true' });
  assert.equal(once.isError, true);
  assert.match(once.content[0].text, /was interrupted: supervisor_lost/);
  let r;
  await waitFor(async () => {
    r = await h.mcp.call('sandbox_exec', { id: b.id, cmd: 'cat f; pgrep -c sleep || true', cwd: 'd/..' });
    return !r.isError;
  }, { timeout: 30000, what: 'the box to run again' });
  assert.equal(r.structuredContent.stdout, 'kept\n0\n');
  assert.equal((await status(b.id)).status, 'ready');
  await stop(b.id);
});

h.test('another MCP session does not find the box; a bad id is refused', async () => {
  const b = await start();
  const other = await h.connect();
  try {
    const r = await other.call('sandbox_status', { id: b.id });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, new RegExp(`Box '${b.id}' is not found`));
  } finally {
    await other.close();
  }
  const bad = await h.mcp.call('sandbox_exec', { id: 'nope', cmd: 'true' });
  assert.equal(bad.isError, true);
  assert.match(bad.content[0].text, /is not a box id/);
  await stop(b.id);
});

h.test('boxes_per_user: the fourth box of a user is refused until one stops; another user is not blocked', async () => {
  const a = await h.connect({ uid: U1 });
  const b = await h.connect({ uid: U2 });
  const ids = [];
  for (let i = 0; i < 3; i++)
    ids.push((await a.sc('sandbox_start', {})).id);
  const r = await a.call('sandbox_start', {});
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /too many boxes: this user runs 3 boxes, the limit \(boxes_per_user/);
  const other = await b.sc('sandbox_start', {});
  assert.match((await a.call('sandbox_status', { id: other.id })).content[0].text, /is not found/);
  await a.sc('sandbox_stop', { id: ids[0] });
  ids[0] = (await a.sc('sandbox_start', {})).id;
  for (const id of ids)
    await a.sc('sandbox_stop', { id });
  await b.sc('sandbox_stop', { id: other.id });
});

h.test('sbxctl box list|show|stop: root sees every box and stops one', async () => {
  const b = await start({ services: [{ name: 'web', port: 8080 }] });
  const list = JSON.parse((await sbxctl(h.socket, ['box', 'list', '--json'])).stdout);
  const mine = list.find((x) => x.id === b.id);
  assert.equal(mine.status, 'ready');
  assert.match(mine.sandbox, /^claim-/);
  const show = await sbxctl(h.socket, ['box', 'show', b.id]);
  assert.equal(show.code, 0, show.stderr);
  assert.match(show.stdout, /status: ready\n/);
  assert.match(show.stdout, /service: web port 8080\n/);
  const st = await sbxctl(h.socket, ['box', 'stop', b.id]);
  assert.equal(st.code, 0, st.stderr);
  assert.equal(st.stdout, `stopped box ${b.id}\n`);
  assert.equal((await status(b.id)).status, 'terminated');
  const none = await sbxctl(h.socket, ['box', 'show', 'box-000000000000']);
  assert.notEqual(none.code, 0);
  assert.match(none.stderr, /is not found/);
});

h.test('--set refuses two sets that define the same tool and names it', async () => {
  const r = await run(SANDBOX_MCP, ['--set', 'script,boxes'], { input: '' });
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /the sets script and boxes both define the tool sandbox_status/);
});
