// The boxes set (issue 21 part A; shared/seeds/003): sandbox_start,
// sandbox_exec, sandbox_status and sandbox_stop through the MCP SDK client,
// against boxes of sbxd (supervisor/core/box.h). box_image is the default
// image here (the browser image is not needed for the box core).
import assert from 'node:assert/strict';
import { useSbx, sbxctl, run, SANDBOX_MCP, waitFor } from './helpers.mjs';

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

h.test('--set refuses two sets that define the same tool and names it', async () => {
  const r = await run(SANDBOX_MCP, ['--set', 'script,boxes'], { input: '' });
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /the sets script and boxes both define the tool sandbox_status/);
});
