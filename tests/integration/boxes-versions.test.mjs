// Versions of the boxes set (issue 21 part B; shared/seeds/003):
// sandbox_publish_version of a box's /work or of box_image, sandbox_versions,
// sandbox_start from a version (startedFrom snapshot: a fork whose /work is
// over the version's layers), forks that diverge, and sbxctl version list|rm
// (boxes-forks.test.mjs: shared layers, whiteouts, disk use, restart).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, sbxctl, boxCalls } from './helpers.mjs';

const U1 = 65534;
const h = useSbx({ sandboxes: [], sets: 'boxes', world: true,
  config: '[sbxd]\nsocket_mode = 0666\nbox_image = default\nbox_spares = 0\nboxes_per_user = 5\n' });

const { start, exec, stop } = boxCalls(h);

let versionId;
let source;

h.test('tools/list: sandbox_publish_version, sandbox_versions; sandbox_start takes version', async () => {
  const by = Object.fromEntries(h.mcp.tools.map((t) => [t.name, t]));
  assert.deepEqual(by.sandbox_publish_version.inputSchema.required, ['image']);
  assert.deepEqual(Object.keys(by.sandbox_versions.inputSchema.properties), []);
  assert.equal(by.sandbox_start.inputSchema.properties.version.type, 'string');
  assert.equal(by.sandbox_versions.annotations.readOnlyHint, true);
});

h.test('a box\'s /work published as a version, listed by the tool and by sbxctl', async () => {
  source = (await start()).id;
  await exec(source, 'mkdir -p app/src && echo v1 > app/src/main.txt && echo keep > top.txt && ' +
    'echo log > .sbx/old.log && ln -s app/src/main.txt link');
  const p = await h.mcp.sc('sandbox_publish_version',
    { service: 'web', label: 'v1', image: source, gitSha: 'abc1234', note: 'first' });
  assert.match(p.versionId, /^ver-[0-9a-f]{12}$/);
  versionId = p.versionId;
  const l = await h.mcp.sc('sandbox_versions', {});
  assert.equal(l.versions.length, 1);
  assert.deepEqual({ ...l.versions[0], createdAt: 0 }, {
    versionId, service: 'web', label: 'v1', image: source, gitSha: 'abc1234', note: 'first',
    boxImage: 'default', fromBox: source, createdAt: 0,
  });
  const ctl = await sbxctl(h.socket, ['--json', 'version', 'list']);
  assert.equal(ctl.code, 0, ctl.stderr);
  const v = JSON.parse(ctl.stdout)[0];
  assert.equal(v.id, versionId);
  assert.equal(v.from_box, source);
  // Its files: root's, under STATE/versions/ID/layers/0, without the box's .sbx logs.
  const layer = path.join(h.stateDir, 'versions', versionId, 'layers', '0');
  assert.equal(fs.readFileSync(path.join(layer, 'app/src/main.txt'), 'utf8'), 'v1\n');
  assert.equal(fs.statSync(path.join(layer, 'top.txt')).uid, 0);
  assert.equal(fs.readlinkSync(path.join(layer, 'link')), 'app/src/main.txt');
  assert.ok(!fs.existsSync(path.join(layer, '.sbx')));
});

h.test('two boxes from one version start with its files (snapshot) and diverge', async () => {
  const b = await start({ version: versionId });
  const c = await start({ version: versionId });
  try {
    assert.equal(b.startedFrom, 'snapshot');
    assert.equal(c.startedFrom, 'snapshot');
    // The source box goes on; the version stays as it was published.
    await exec(source, 'echo v2 > app/src/main.txt');
    assert.equal(await exec(b.id, 'cat app/src/main.txt top.txt; readlink link'), 'v1\nkeep\napp/src/main.txt\n');
    // The box's root owns its copy and may change it; .sbx is the box's own.
    assert.equal(await exec(b.id, 'stat -c %u top.txt; ls .sbx | wc -l'), '0\n0\n');
    await exec(b.id, 'echo b > app/src/main.txt && rm top.txt && echo new > b-only.txt');
    await exec(c.id, 'echo c > app/src/main.txt');
    assert.equal(await exec(b.id, 'cat app/src/main.txt; ls'), 'b\napp\nb-only.txt\nlink\n');
    assert.equal(await exec(c.id, 'cat app/src/main.txt; ls'), 'c\napp\nlink\ntop.txt\n');
    assert.equal(await exec(source, 'cat app/src/main.txt'), 'v2\n');
    // A fork of a fork: the second generation has the first's changes.
    const v2 = (await h.mcp.sc('sandbox_publish_version', { service: 'web', label: 'v1-b', image: b.id })).versionId;
    const d = await start({ version: v2 });
    assert.equal(await exec(d.id, 'cat app/src/main.txt b-only.txt'), 'b\nnew\n');
    await stop(d.id);
    const st = await h.mcp.sc('sandbox_status', { id: b.id });
    assert.equal(st.startedFrom, 'snapshot');
  } finally {
    await stop(b.id);
    await stop(c.id);
  }
});

h.test('a version of box_image alone: an empty /work; other images and ids are refused', async () => {
  const p = await h.mcp.sc('sandbox_publish_version', { service: 'api', label: 'base', image: 'default' });
  const l = (await h.mcp.sc('sandbox_versions', {})).versions.find((v) => v.versionId === p.versionId);
  assert.equal(l.fromBox, null);
  const b = await start({ version: p.versionId });
  try {
    assert.equal(await exec(b.id, 'ls -A'), '.sbx\n');
  } finally {
    await stop(b.id);
  }
  const other = await h.mcp.call('sandbox_publish_version', { image: 'browser' });
  assert.equal(other.isError, true);
  assert.match(other.content[0].text, /neither a box id nor box_image 'default'/);
  const gone = await h.mcp.call('sandbox_publish_version', { image: 'box-000000000000' });
  assert.equal(gone.isError, true);
  assert.match(gone.content[0].text, /is not found/);
  const unknown = await h.mcp.call('sandbox_start', { version: 'ver-000000000000' });
  assert.equal(unknown.isError, true);
  assert.match(unknown.content[0].text, /no version 'ver-000000000000'/);
});

h.test('a version is its publisher\'s: another user neither lists nor starts from it', async () => {
  const u = await h.connect({ uid: U1 });
  try {
    assert.deepEqual(await u.sc('sandbox_versions', {}), { versions: [] });
    const r = await u.call('sandbox_start', { version: versionId });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /no version/);
  } finally {
    await u.close();
  }
});

h.test('sbxctl version rm: refused while a box started from it runs, then gone with its files', async () => {
  const b = await start({ version: versionId });
  try {
    const busy = await sbxctl(h.socket, ['version', 'rm', versionId]);
    assert.equal(busy.code, 1);
    assert.match(busy.stderr, new RegExp(`in use: box ${b.id} was started from it.*sbxctl box stop ${b.id}`));
    assert.equal(await exec(b.id, 'cat top.txt'), 'keep\n');
  } finally {
    await stop(b.id);
  }
  // The second-generation version of the fork test refers to this one's layer: that stays until it goes too.
  const rm = await sbxctl(h.socket, ['version', 'rm', versionId]);
  assert.equal(rm.code, 0, rm.stderr);
  assert.ok(!(await h.mcp.sc('sandbox_versions', {})).versions.some((v) => v.versionId === versionId));
  assert.ok(fs.existsSync(path.join(h.stateDir, 'versions', versionId, 'layers', '0')));
  for (const v of (await h.mcp.sc('sandbox_versions', {})).versions) {
    const r = await sbxctl(h.socket, ['version', 'rm', v.versionId]);
    assert.equal(r.code, 0, r.stderr);
  }
  assert.ok(!fs.existsSync(path.join(h.stateDir, 'versions', versionId)));
  const again = await sbxctl(h.socket, ['version', 'rm', versionId]);
  assert.equal(again.code, 4);
  await stop(source);
});
