// image_disk_max (sbxd.conf(5), sbx-images(7)): a build that would pass it is
// refused, naming the key, before anything is built. No real build here: the
// builds already on disk (one planted, as sbx-image-build leaves them) use the
// budget up.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { after } from 'node:test';
import { useSbx, sbxctl, TMP_PREFIX } from './helpers.mjs';

const IMAGES = fs.mkdtempSync(TMP_PREFIX + 'images-');
fs.writeFileSync(path.join(IMAGES, 'small.conf'), '[image]\nsuite = bookworm\npackages = python3\n');
fs.chmodSync(path.join(IMAGES, 'small.conf'), 0o644);
after(() => fs.rmSync(IMAGES, { recursive: true, force: true }));

const h = useSbx({ sandboxes: [], connect: false, config: `[sbxd]\nimages_dir = ${IMAGES}\nimage_disk_max = 1M\n` });

h.test('a build past image_disk_max is refused before it starts; gc frees the room', async () => {
  const old = path.join(h.stateDir, 'images', 'cd'.repeat(20));
  await fsp.mkdir(path.join(old, 'root'), { recursive: true });
  await fsp.writeFile(path.join(old, 'built'), `size_bytes=${2 * 1024 * 1024}\nbuilt_unix=1\n`);
  const r = await sbxctl(h.socket, ['image', 'build', 'small']);
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stderr, /image_disk_max \(1048576 bytes\) is used up by the builds there \(2097152 bytes\)/);
  assert.equal(fs.readFileSync(h.sbxdLog, 'utf8').includes("Building image 'small'"), false);
  const list = JSON.parse((await sbxctl(h.socket, ['image', 'list', '--json'])).stdout);
  assert.equal(list.find((i) => i.name === 'small').state, 'absent');
  const gc = await sbxctl(h.socket, ['gc', '--json']);
  assert.equal(JSON.parse(gc.stdout).images_removed, 1);
});

h.test('the default image is built in: nothing to build or remove', async () => {
  const b = await sbxctl(h.socket, ['image', 'build', 'default']);
  assert.equal(b.code, 1, b.stdout);
  assert.match(b.stderr, /image 'default' is built into sbxd: there is nothing to build/);
  const r = await sbxctl(h.socket, ['image', 'rm', 'default']);
  assert.equal(r.code, 4, r.stdout);
  assert.match(r.stderr, /image 'default' is built into sbxd and cannot be removed/);
});
