// Versions share layers (issue 21; docs/boxes.md, Versions): a box started
// from a version mounts the version's layers read-only as the lowers of its
// /work, so two boxes from one version share them on disk and diverge in
// their own uppers; publishing such a box records only its changes (with
// their whiteouts) as a new layer over its version's, which it refers to;
// a layer goes when no version refers to it, and a version a live box was
// started from is not removed. Boxes here come from a spare (box_spares 1).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, sbxctl, run, waitFor, boxCalls, mountsUnder } from './helpers.mjs';

const h = useSbx({ sandboxes: [], sets: 'boxes',
  config: '[sbxd]\nbox_image = default\nbox_spares = 1\nboxes_per_user = 5\n' });

const { start, exec, stop } = boxCalls(h);
const publish = async (id, label) =>
  (await h.mcp.sc('sandbox_publish_version', { service: 'web', label, image: id })).versionId;
const layerDir = (id, n = 0) => path.join(h.stateDir, 'versions', id, 'layers', String(n));
const duKiB = async (dir) => Number((await run('du', ['-sk', dir])).stdout.split('\t')[0]);
// What /work's own filesystem holds (statfs of an overlay is its upper's).
const workUsedKiB = async (id) => Number((await exec(id, 'df -k --output=used /work | tail -1')).trim());
const MiB = 1024;

let v1;
let v2;

h.test('two boxes from one 10 MB version share its layer on disk and diverge in their uppers', async () => {
  const src = await start();
  await exec(src.id, 'mkdir data && for i in 1 2 3 4 5 6 7 8 9 10; do head -c 1048576 /dev/urandom > data/f$i; done; ' +
    'echo base > shared.txt; echo doomed > doomed.txt; mkdir -p keep/sub && echo k > keep/sub/k');
  v1 = await publish(src.id, 'v1');
  await stop(src.id);
  const before = await duKiB(h.stateDir);
  const b = await start({ version: v1 });
  const c = await start({ version: v1 });
  assert.equal(b.startedFrom, 'snapshot');
  assert.equal(c.startedFrom, 'snapshot');
  // Both see the version's files through its layer: the same inodes as on disk, nothing copied.
  const ino = fs.statSync(path.join(layerDir(v1), 'data/f1')).ino;
  assert.equal(await exec(b.id, 'stat -c %i data/f1'), `${ino}\n`);
  assert.equal(await exec(c.id, 'stat -c %i data/f1'), `${ino}\n`);
  assert.equal(await exec(b.id, 'stat -c %u data/f1; cat data/* | wc -c'), `0\n${10 * 1048576}\n`);
  assert.ok(await workUsedKiB(b.id) < MiB, 'box b holds no copy of the version');
  assert.ok(await workUsedKiB(c.id) < MiB, 'box c holds no copy of the version');
  const grown = await duKiB(h.stateDir) - before;
  assert.ok(grown < 10 * MiB, `the state directory grew by ${grown} KiB for two boxes of a 10 MB version`);
  // They diverge; the version and its layer stay as published.
  await exec(b.id, 'echo b > shared.txt && rm doomed.txt && rm -r keep && mkdir keep && echo new > keep/n');
  await exec(c.id, 'echo c > shared.txt');
  assert.equal(await exec(b.id, 'cat shared.txt; ls; ls keep'), 'b\ndata\nkeep\nshared.txt\nn\n');
  assert.equal(await exec(c.id, 'cat shared.txt; ls; ls keep'), 'c\ndata\ndoomed.txt\nkeep\nshared.txt\nsub\n');
  assert.equal(fs.readFileSync(path.join(layerDir(v1), 'shared.txt'), 'utf8'), 'base\n');
  assert.ok(fs.existsSync(path.join(layerDir(v1), 'doomed.txt')));

  // The second generation: only b's changes, a deletion as a whiteout, a replaced directory opaque.
  v2 = await publish(b.id, 'v2');
  const top = layerDir(v2);
  const wh = fs.statSync(path.join(top, 'doomed.txt'));
  assert.ok(wh.isCharacterDevice() && wh.rdev === 0, 'doomed.txt is a whiteout');
  assert.equal(fs.readFileSync(path.join(top, 'shared.txt'), 'utf8'), 'b\n');
  assert.ok(!fs.existsSync(path.join(top, 'data')), 'the unchanged files are not copied');
  const opaque = await run('python3', ['-c', 'import os,sys; print(os.getxattr(sys.argv[1], "trusted.overlay.opaque"))',
    path.join(top, 'keep')]);
  assert.equal(opaque.stdout, "b'y'\n", 'keep, removed and made again, is opaque');
  assert.deepEqual(fs.readdirSync(path.join(top, 'keep')), ['n']);
  assert.ok(!fs.existsSync(path.join(top, '.sbx')));
  const ctl = JSON.parse((await sbxctl(h.socket, ['--json', 'version', 'list'])).stdout);
  assert.deepEqual(ctl.find((v) => v.id === v2).layers, [`${v1}/0`, `${v2}/0`]);
  const d = await start({ version: v2 });
  assert.equal(await exec(d.id, 'cat shared.txt; ls; ls keep; stat -c %i data/f1'), `b\ndata\nkeep\nshared.txt\nn\n${ino}\n`);
  await stop(b.id);
  await stop(c.id);
  await stop(d.id);
});

h.test('sbxctl version rm: refused while a box started from it runs; a layer goes when no version refers to it', async () => {
  const b = await start({ version: v1 });
  const d = await start({ version: v2 });
  const busy = await sbxctl(h.socket, ['version', 'rm', v1]);
  assert.notEqual(busy.code, 0);
  assert.match(busy.stderr, new RegExp(`version ${v1} is in use: box ${b.id} was started from it`));
  await stop(b.id);
  // No box was started from v1 now, but v2 refers to its layer: the record goes, the layer stays.
  const rm = await sbxctl(h.socket, ['version', 'rm', v1]);
  assert.equal(rm.code, 0, rm.stderr);
  assert.ok(!(await h.mcp.sc('sandbox_versions', {})).versions.some((v) => v.versionId === v1));
  assert.ok(fs.existsSync(path.join(layerDir(v1), 'data/f1')));
  assert.equal(await exec(d.id, 'cat data/f10 | wc -c'), '1048576\n');
  assert.match((await sbxctl(h.socket, ['version', 'rm', v2])).stderr, /is in use/);
  await stop(d.id);
  const rm2 = await sbxctl(h.socket, ['version', 'rm', v2]);
  assert.equal(rm2.code, 0, rm2.stderr);
  assert.deepEqual(fs.readdirSync(path.join(h.stateDir, 'versions')), []);
});

h.test('an sbxd restart: versions stay, a box from one gets its layers and its own changes back', async () => {
  const src = await start();
  await exec(src.id, 'echo one > a.txt; echo two > b.txt; echo three > c.txt');
  const v = await publish(src.id, 'r');
  await stop(src.id);
  const b = await start({ version: v });
  await exec(b.id, 'echo mine > mine.txt; rm b.txt; echo changed > a.txt');
  await h.restartSbxd();
  assert.ok((await h.mcp.sc('sandbox_versions', {})).versions.some((x) => x.versionId === v));
  let r;
  await waitFor(async () => {
    r = await h.mcp.call('sandbox_exec', { id: b.id, cmd: 'cat a.txt mine.txt; ls' });
    return !r.isError;
  }, { timeout: 30000, what: 'the box to run again' });
  assert.equal(r.structuredContent.stdout, 'changed\nmine\na.txt\nc.txt\nmine.txt\n');
  // Its /work is again over the version's layer; a new box from it has the version as published.
  const ino = fs.statSync(path.join(layerDir(v), 'c.txt')).ino;
  assert.equal(await exec(b.id, 'stat -c %i c.txt'), `${ino}\n`);
  assert.ok(await workUsedKiB(b.id) < MiB);
  const c = await start({ version: v });
  assert.equal(await exec(c.id, 'cat a.txt b.txt'), 'one\ntwo\n');
  await stop(b.id);
  await stop(c.id);
});

// At SIGTERM sbxd keeps a box's /work upper tmpfs in place beside its session
// tmpfs (RUN_DIR/live/SANDBOX/WS/work, sbxd(8)), copying nothing; the next
// sbxd puts it back under /work. sbxd --save-kept copies it as a stop's copy
// fallback does (STATE/sandboxes/SANDBOX/kept/WS/work).
const liveWork = () => {
  const live = path.join(h.runDir, 'live');
  if (!fs.existsSync(live)) return [];
  return fs.readdirSync(live).flatMap((sb) => fs.readdirSync(path.join(live, sb))
    .map((ws) => path.join(live, sb, ws, 'work')).filter((d) => fs.existsSync(d)));
};
const keptCopies = () => {
  const sbs = path.join(h.stateDir, 'sandboxes');
  return fs.readdirSync(sbs).flatMap((sb) => {
    const kept = path.join(sbs, sb, 'kept');
    return fs.existsSync(kept) ? fs.readdirSync(kept).map((ws) => path.join(kept, ws)) : [];
  });
};

async function backAfterRestart(id, cmd) {
  await h.sbxd.start();
  let r;
  await waitFor(async () => {
    r = await h.mcp.call('sandbox_exec', { id, cmd });
    return !r.isError;
  }, { timeout: 60000, what: 'the box to run again' });
  return r.structuredContent.stdout;
}

h.test('SIGTERM: a box from a version keeps its /work upper in place, no copy, and has it back after the start', async () => {
  const src = await start();
  await exec(src.id, 'echo one > a.txt; echo two > b.txt; echo three > c.txt');
  const v = await publish(src.id, 'live');
  await stop(src.id);
  const b = await start({ version: v });
  await exec(b.id, 'echo over > a.txt; rm b.txt; echo new > n.txt');
  const res = await h.sbxd.stop({ timeout: 60000 });
  assert.equal(res.code, 0, JSON.stringify(res));
  const [work] = liveWork();
  assert.ok(work, 'its /work upper is mounted in RUN_DIR/live');
  assert.ok(mountsUnder(path.join(h.runDir, 'live')).includes(work), `${work} is a mount`);
  // The upper as the overlay left it: the file written over the layer, a whiteout for the removed one.
  assert.equal(fs.readFileSync(path.join(work, 'upper', 'a.txt'), 'utf8'), 'over\n');
  const wh = fs.statSync(path.join(work, 'upper', 'b.txt'));
  assert.ok(wh.isCharacterDevice() && wh.rdev === 0, 'b.txt is a whiteout');
  assert.deepEqual(keptCopies(), [], 'nothing copied to the state directory');
  assert.equal(await backAfterRestart(b.id, 'cat a.txt n.txt; ls'), 'over\nnew\na.txt\nc.txt\nn.txt\n');
  // That tmpfs is the upper of its /work again: not copied at the start either.
  assert.match(fs.readFileSync(h.sbxdLog, 'utf8'),
    new RegExp(`Box ${b.id}: /work over the layers of version ${v} in \\d+ us, its upper the one kept in place`));
  const ino = fs.statSync(path.join(layerDir(v), 'c.txt')).ino;
  assert.equal(await exec(b.id, 'stat -c %i c.txt'), `${ino}\n`, 'over the version\'s layer again');
  await waitFor(() => liveWork().length === 0, { what: 'the kept /work mount to go once the box runs' });

  // sbxd --save-kept copies it to the state directory; the start after restores /work from that copy.
  await exec(b.id, 'echo again > a.txt; rm c.txt');
  const res2 = await h.sbxd.stop({ timeout: 60000 });
  assert.equal(res2.code, 0, JSON.stringify(res2));
  assert.equal(liveWork().length, 1);
  const saved = await h.sbxd.saveKept();
  assert.equal(saved.code, 0, saved.stderr);
  assert.deepEqual(liveWork(), []);
  const [copy] = keptCopies();
  assert.ok(copy && fs.readFileSync(path.join(copy, 'work', 'a.txt'), 'utf8') === 'again\n', 'kept/WS/work holds /work');
  const logged = fs.readFileSync(h.sbxdLog, 'utf8').length;
  assert.equal(await backAfterRestart(b.id, 'cat a.txt n.txt; ls'), 'again\nnew\na.txt\nn.txt\n');
  assert.doesNotMatch(fs.readFileSync(h.sbxdLog, 'utf8').slice(logged), /its upper the one kept in place/);
  await stop(b.id);
});
