// The boxes set's files and pictures (issue 21 part D; shared/seeds/003):
// sandbox_sync of a local directory with excluded parts and hostile symlinks
// (pointing out of localPath: copied as symlinks, never followed), sandbox_get
// of a file and of a directory (tar.gz) placed where only the caller reads
// it, and sandbox_shot: a PNG of a page served inside the box (a real PNG of
// the right size with non-uniform pixels, also MCP image content), of the
// display :99, and an mp4 recording that ffprobe (in the box) accepts. The
// files part runs on the default image; the pictures need the browser image
// (Xvfb, ffmpeg, chromium), built here by sbxd from dist/images.d/browser.conf
// with its .debs cached in SBX_IMAGE_CACHE; without it (no network, say)
// those tests skip and say why.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { after } from 'node:test';
import { useSbx, sbxctl, waitFor, run, TMP_PREFIX, ROOT } from './helpers.mjs';

const h = useSbx({ sandboxes: [], sets: 'boxes', world: true, config: '[sbxd]\nbox_image = default\nbox_spares = 0\n' });

const LOCAL = fs.mkdtempSync(TMP_PREFIX + 'boxsync-');
const OUTSIDE = fs.mkdtempSync(TMP_PREFIX + 'boxsync-outside-');
after(() => {
  for (const d of [LOCAL, OUTSIDE]) fs.rmSync(d, { recursive: true, force: true });
});
const put = (rel, content, mode = 0o644) => {
  fs.mkdirSync(path.dirname(path.join(LOCAL, rel)), { recursive: true });
  fs.writeFileSync(path.join(LOCAL, rel), content, { mode });
};
put('a.txt', 'alpha\n');
put('src/b.txt', 'beta\n');
put('src/run.sh', '#!/bin/sh\necho ran\n', 0o755);
put('node_modules/dep/index.js', 'excluded\n');
put('src/node_modules/x.js', 'excluded\n');
put('.git/config', 'excluded\n');
put('dist/out.js', 'excluded\n');
put('build/o.o', 'excluded\n');
fs.writeFileSync(path.join(OUTSIDE, 'secret.txt'), 'OUTSIDE-SECRET\n');
fs.symlinkSync('a.txt', path.join(LOCAL, 'inside-link'));
fs.symlinkSync(path.join(OUTSIDE, 'secret.txt'), path.join(LOCAL, 'evil-file'));
fs.symlinkSync(OUTSIDE, path.join(LOCAL, 'src', 'evil-dir'));
fs.symlinkSync('../../' + path.basename(OUTSIDE), path.join(LOCAL, 'src', 'evil-rel'));

const exec = (mcp, id, cmd, extra = {}) => mcp.sc('sandbox_exec', { id, cmd, ...extra });

h.test('tools/list: sandbox_sync, sandbox_get, sandbox_wire, sandbox_shot after the core tools', async () => {
  const by = Object.fromEntries(h.mcp.tools.map((t) => [t.name, t]));
  for (const n of ['sandbox_sync', 'sandbox_get', 'sandbox_wire', 'sandbox_shot']) assert.ok(by[n]?.outputSchema, n);
  assert.deepEqual(by.sandbox_sync.inputSchema.required, ['id', 'localPath']);
  assert.deepEqual(by.sandbox_get.inputSchema.required, ['id', 'path']);
  assert.deepEqual(by.sandbox_shot.inputSchema.properties.target.enum, ['screen', 'url']);
  assert.deepEqual(by.sandbox_shot.inputSchema.properties.record.enum, ['start', 'stop']);
  assert.equal(by.sandbox_get.annotations.readOnlyHint, true);
});

h.test('sandbox_sync: excluded parts left out, symlinks kept as symlinks and never followed', async () => {
  const b = await h.mcp.sc('sandbox_start', { idleTimeoutMin: 0 });
  const r = await h.mcp.sc('sandbox_sync', { id: b.id, localPath: LOCAL, dest: 'app' });
  assert.equal(r.ok, true);
  assert.equal(r.dest, '/work/app');
  assert.equal(r.excluded, 5); // node_modules twice, .git, dist, build
  assert.ok(r.bytes > 0);
  const find = await exec(h.mcp, b.id, 'cd /work/app && find . | sort');
  assert.equal(find.stdout, ['.', './a.txt', './evil-file', './inside-link', './src', './src/b.txt',
    './src/evil-dir', './src/evil-rel', './src/run.sh'].join('\n') + '\n');
  const links = await exec(h.mcp, b.id,
    'cd /work/app && for l in inside-link evil-file src/evil-dir src/evil-rel; do printf "%s " "$(readlink $l)"; done; echo; ' +
    'cat inside-link; ./src/run.sh; stat -c %a src/run.sh; cat evil-file 2>&1; grep -rs OUTSIDE-SECRET . ; echo grep=$?');
  const [targets, ...rest] = links.stdout.split('\n');
  assert.equal(targets, `a.txt ${OUTSIDE}/secret.txt ${OUTSIDE} ../../${path.basename(OUTSIDE)} `);
  assert.equal(rest[0], 'alpha');
  assert.equal(rest[1], 'ran');
  assert.equal(rest[2], '755');
  assert.match(rest[3], /No such file or directory/); // the host's file is not there
  assert.ok(!links.stdout.includes('OUTSIDE-SECRET'), links.stdout);
  assert.match(links.stdout, /grep=1/);
  // Again over it (a changed file), and one file alone into /work itself.
  fs.writeFileSync(path.join(LOCAL, 'a.txt'), 'alpha 2\n');
  await h.mcp.sc('sandbox_sync', { id: b.id, localPath: LOCAL, dest: '/work/app' });
  await h.mcp.sc('sandbox_sync', { id: b.id, localPath: path.join(LOCAL, 'src', 'b.txt') });
  assert.equal((await exec(h.mcp, b.id, 'cat app/a.txt b.txt')).stdout, 'alpha 2\nbeta\n');
  fs.writeFileSync(path.join(LOCAL, 'a.txt'), 'alpha\n');
  // Refused: a dest out of /work, a localPath that is not there, an unknown box.
  assert.match(await h.mcp.err('sandbox_sync', { id: b.id, localPath: LOCAL, dest: '../etc' }), /dest: .*climbs out of \/work/);
  assert.match(await h.mcp.err('sandbox_sync', { id: b.id, localPath: LOCAL, dest: '/etc' }), /outside \/work/);
  assert.match(await h.mcp.err('sandbox_sync', { id: b.id, localPath: path.join(LOCAL, 'nope') }),
    /localPath: cannot open .*No such file or directory/);
  assert.match(await h.mcp.err('sandbox_sync', { id: 'box-000000000000', localPath: LOCAL }), /not found/);
  // Nothing of the temporary tar is left in the box.
  assert.equal((await exec(h.mcp, b.id, 'ls -A /work/.sbx 2>/dev/null | grep -c "^.sbx-" || true')).stdout, '0\n');
  await h.mcp.sc('sandbox_stop', { id: b.id });
});

h.test('sandbox_get: a file and a directory (tar.gz), placed for the caller only, for one hour', async () => {
  const b = await h.mcp.sc('sandbox_start', { idleTimeoutMin: 0 });
  await exec(h.mcp, b.id, 'mkdir -p out/deep && printf "hello\\n" > out/hello.txt && printf "x\\n" > out/deep/x && ' +
    'head -c 300000 /dev/urandom > out/blob.bin');
  const t0 = Date.now() / 1000;
  const f = await h.mcp.sc('sandbox_get', { id: b.id, path: 'out/hello.txt' });
  assert.equal(f.kind, 'file');
  assert.equal(f.boxPath, '/work/out/hello.txt');
  assert.equal(f.bytes, 6);
  assert.equal(f.url, `file://${f.path}`);
  assert.match(f.path, /\/box-files\/0\/[0-9a-f]{12}-hello\.txt$/);
  assert.equal(fs.readFileSync(f.path, 'utf8'), 'hello\n');
  const exp = Date.parse(f.expiresAt) / 1000;
  assert.ok(exp >= t0 + 3590 && exp <= t0 + 3610, f.expiresAt);
  const st = fs.statSync(f.path);
  assert.equal(st.mode & 0o777, 0o444);
  const dir = fs.statSync(path.dirname(f.path));
  assert.equal(dir.mode & 0o777, 0o700);
  assert.equal(dir.uid, 0);
  assert.equal(fs.statSync(path.dirname(path.dirname(f.path))).mode & 0o777, 0o711);
  // A binary file, byte for byte (compared in the box with sha256sum).
  const bin = await h.mcp.sc('sandbox_get', { id: b.id, path: '/work/out/blob.bin' });
  assert.equal(bin.bytes, 300000);
  const sum = (await exec(h.mcp, b.id, 'sha256sum < out/blob.bin')).stdout.split(' ')[0];
  const { createHash } = await import('node:crypto');
  assert.equal(createHash('sha256').update(fs.readFileSync(bin.path)).digest('hex'), sum);
  // A directory: a tar.gz of its contents, made in the box.
  const d = await h.mcp.sc('sandbox_get', { id: b.id, path: 'out' });
  assert.equal(d.kind, 'tar.gz');
  assert.match(d.path, /-out\.tar\.gz$/);
  const list = (await import('node:child_process')).spawnSync('tar', ['-tzf', d.path], { encoding: 'utf8' });
  assert.equal(list.status, 0, list.stderr);
  assert.deepEqual(list.stdout.split('\n').filter(Boolean).sort(),
    ['./', './blob.bin', './deep/', './deep/x', './hello.txt']);
  // The whole of /work: its own archive (made in /work/.sbx) is not in it.
  const all = await h.mcp.sc('sandbox_get', { id: b.id, path: '.' });
  const names = (await import('node:child_process')).spawnSync('tar', ['-tzf', all.path], { encoding: 'utf8' }).stdout;
  assert.match(names, /\.\/out\/hello\.txt/);
  assert.doesNotMatch(names, /\.sbx-[0-9a-f]+\.tar\.gz/);
  assert.match(await h.mcp.err('sandbox_get', { id: b.id, path: 'out/none' }), /no such file or directory/);
  assert.match(await h.mcp.err('sandbox_get', { id: b.id, path: '../etc/passwd' }), /climbs out of \/work/);
  await h.mcp.sc('sandbox_stop', { id: b.id });
});

h.test('sandbox_get as an unprivileged caller: its own 0700 directory, unreadable by another user', async () => {
  const a = await h.connect({ uid: 65534 });
  try {
    const b = await a.sc('sandbox_start', { idleTimeoutMin: 0 });
    await exec(a, b.id, 'echo mine > note.txt');
    const f = await a.sc('sandbox_get', { id: b.id, path: 'note.txt' });
    assert.match(f.path, /\/box-files\/65534\/[0-9a-f]{12}-note\.txt$/);
    const d = fs.statSync(path.dirname(f.path));
    assert.equal(d.uid, 65534);
    assert.equal(d.mode & 0o777, 0o700);
    const as = (uid) => run('/usr/bin/setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'cat', f.path]);
    assert.equal((await as(65534)).stdout, 'mine\n');
    assert.notEqual((await as(65533)).code, 0);
    await a.sc('sandbox_stop', { id: b.id });
  } finally {
    await a.close();
  }
});

h.test('sandbox_wire box: the service name resolves to the box itself, to a local HTTP service on its port', async () => {
  const b = await h.mcp.sc('sandbox_start', { idleTimeoutMin: 0, services: [{ name: 'api', port: 8081 }, { name: 'web', port: 8082 }],
    externalBaseUrl: 'http://127.0.0.2:9/' });
  await exec(h.mcp, b.id, 'mkdir -p srv && echo api-in-box > srv/index.html && cd srv && ' +
    'exec python3 -m http.server 8081 --bind 127.0.0.1', { background: true });
  const w = await h.mcp.sc('sandbox_wire', { id: b.id, service: 'api', mode: 'box' });
  assert.deepEqual(w.wiring, [
    { service: 'api', port: 8081, mode: 'box', target: '127.0.0.1:8081' },
    { service: 'web', port: 8082, mode: null, target: null },
  ]);
  const fetch = 'python3 -c "import socket,urllib.request as u; print(socket.gethostbyname(\'api\')); ' +
    'print(u.urlopen(\'http://api:8081/index.html\', timeout=5).read().decode().strip())"';
  await waitFor(async () => (await exec(h.mcp, b.id, fetch)).exitCode === 0, { timeout: 20000, what: 'http://api:8081 in the box' });
  assert.equal((await exec(h.mcp, b.id, fetch)).stdout, '127.0.0.1\napi-in-box\n');
  // Wiring again keeps one line; the other service joins the table.
  await h.mcp.sc('sandbox_wire', { id: b.id, service: 'api', mode: 'box' });
  const both = await h.mcp.sc('sandbox_wire', { id: b.id, service: 'web', mode: 'box' });
  assert.deepEqual(both.wiring.map((r) => r.mode), ['box', 'box']);
  assert.equal((await exec(h.mcp, b.id, 'grep -c "sbx-wire" /etc/hosts')).stdout, '2\n');
  assert.match(await h.mcp.err('sandbox_wire', { id: b.id, service: 'nope', mode: 'box' }), /not one of the box's services/);
  assert.match(await h.mcp.err('sandbox_wire', { id: b.id, service: 'api', mode: 'external' }), /mode external is not available/);
  await h.mcp.sc('sandbox_stop', { id: b.id });
});

h.test('sandbox_shot on an image without a display says so', async () => {
  const b = await h.mcp.sc('sandbox_start', { idleTimeoutMin: 0 });
  assert.match(await h.mcp.err('sandbox_shot', { id: b.id }), /no display :99/);
  assert.match(await h.mcp.err('sandbox_shot', { id: b.id, target: 'url', url: 'javascript:alert(1)' }),
    /http:\/\/, https:\/\/ or file:\/\//);
  assert.match(await h.mcp.err('sandbox_shot', { id: b.id, record: 'stop' }), /no recording runs/);
  await h.mcp.sc('sandbox_stop', { id: b.id });
});

// ---- pictures: the browser image -------------------------------------------------

const CACHE = process.env.SBX_IMAGE_CACHE ?? '/var/cache/sbx-ci/images/archives';
fs.mkdirSync(CACHE, { recursive: true });
const IMAGES = fs.mkdtempSync(TMP_PREFIX + 'boxshot-images-');
fs.copyFileSync(path.join(ROOT, 'dist/images.d/browser.conf'), path.join(IMAGES, 'browser.conf'));
fs.chmodSync(IMAGES, 0o755);
fs.chmodSync(path.join(IMAGES, 'browser.conf'), 0o644);
after(() => fs.rmSync(IMAGES, { recursive: true, force: true }));
const hb = useSbx({ sandboxes: [], sets: 'boxes',
  config: `[sbxd]\nimages_dir = ${IMAGES}\nimage_cache_dir = ${CACHE}\nbox_image = browser\nbox_spares = 0\n` });
const BUILD_MS = 1800000;
let browserMissing = null; // why the picture tests skip
let shotBox = null;

/* The PNG's width, height and how many distinct colours its pixels have
 * (8-bit RGB or RGBA, non-interlaced: what Chromium and ffmpeg write),
 * decoded with the five PNG filters. */
function pngFacts(buf) {
  assert.deepEqual([...buf.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
  let off = 8, width = 0, height = 0, bpp = 0;
  const idat = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off), type = buf.toString('latin1', off + 4, off + 8);
    const data = buf.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0); height = data.readUInt32BE(4);
      assert.equal(data[8], 8, 'bit depth');
      assert.equal(data[12], 0, 'not interlaced');
      bpp = { 2: 3, 6: 4 }[data[9]];
      assert.ok(bpp, `colour type ${data[9]}`);
    }
    if (type === 'IDAT') idat.push(data);
    off += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * bpp;
  let prev = Buffer.alloc(stride);
  const colours = new Set();
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)], line = Buffer.from(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)));
    for (let x = 0; x < stride; x++) {
      const a = x >= bpp ? line[x - bpp] : 0, b = prev[x], c = x >= bpp ? prev[x - bpp] : 0;
      const pa = Math.abs(b - c), pb = Math.abs(a - c), pc = Math.abs(a + b - 2 * c);
      const pred = [0, a, b, (a + b) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? b : c][f];
      line[x] = (line[x] + pred) & 0xff;
    }
    for (let x = 0; x < stride && colours.size < 1000; x += bpp * 7) colours.add(line.readUIntBE(x, 3));
    prev = line;
  }
  return { width, height, distinct: colours.size };
}

hb.test('the browser image builds (or the picture tests skip)', async (t) => {
  const r = await sbxctl(hb.socket, ['image', 'build', 'browser'], { timeout: BUILD_MS, allowFail: true });
  if (r.code !== 0) {
    browserMissing = `the browser image did not build here: ${(r.stderr || r.stdout).trim().split('\n').pop()}`;
    t.skip(browserMissing);
    return;
  }
  shotBox = await hb.mcp.sc('sandbox_start', { idleTimeoutMin: 0 }, { timeout: BUILD_MS });
  // A page served inside the box, on its own port.
  await exec(hb.mcp, shotBox.id, 'cat > page.html <<"E"\n<html><body style="margin:0;background:#2a6"><h1 style="color:#fff;' +
    'font-size:80px">sbx box page</h1><div style="width:300px;height:200px;background:#c22"></div></body></html>\nE\n' +
    'node -e "require(\'http\').createServer((q,s)=>{s.setHeader(\'content-type\',\'text/html\');' +
    's.end(require(\'fs\').readFileSync(\'/work/page.html\'))}).listen(8080)"', { background: true });
  await waitFor(async () => (await exec(hb.mcp, shotBox.id, 'node -e "require(\'http\').get(\'http://127.0.0.1:8080/\',' +
    '(r)=>process.exit(r.statusCode===200?0:1)).on(\'error\',()=>process.exit(1))"')).exitCode === 0,
  { timeout: 30000, what: 'the page server in the box' });
}, { timeout: BUILD_MS + 120000 });

hb.test('sandbox_shot target url: a real PNG of the page, as image content and as a file', async (t) => {
  if (!shotBox) return t.skip(browserMissing ?? 'no box');
  const r = await hb.mcp.call('sandbox_shot', { id: shotBox.id, target: 'url', url: 'http://127.0.0.1:8080/' },
    { timeout: 120000 });
  assert.equal(r.isError, false, JSON.stringify(r.content));
  const sc = r.structuredContent;
  assert.equal(sc.kind, 'png');
  const file = fs.readFileSync(sc.path);
  const img = r.content.find((c) => c.type === 'image');
  assert.equal(img.mimeType, 'image/png');
  assert.ok(Buffer.from(img.data, 'base64').equals(file), 'image content is the file');
  const facts = pngFacts(file);
  assert.equal(facts.width, 1280);
  assert.equal(facts.height, 800);
  assert.ok(facts.distinct > 2, `pixels are not uniform (${facts.distinct} distinct values)`);
}, { timeout: 300000 });

hb.test('sandbox_shot of display :99 and an mp4 recording that ffprobe accepts', async (t) => {
  if (!shotBox) return t.skip(browserMissing ?? 'no box');
  // The display: started by the box when its image has Xvfb; started here if it is not up yet.
  await exec(hb.mcp, shotBox.id, '[ -S /tmp/.X11-unix/X99 ] || { Xvfb :99 -screen 0 1280x800x24 -nolisten tcp ' +
    '>/work/.sbx/xvfb.log 2>&1 & sleep 2; }; DISPLAY=:99 setsid -f chromium --no-sandbox --disable-gpu --no-first-run ' +
    '--user-data-dir=/tmp/kiosk --kiosk http://127.0.0.1:8080/ >/dev/null 2>&1; sleep 5');
  const shot = await hb.mcp.sc('sandbox_shot', { id: shotBox.id }, { timeout: 120000 });
  const facts = pngFacts(fs.readFileSync(shot.path));
  assert.ok(facts.width > 0 && facts.height > 0);
  assert.ok(facts.distinct > 2, `the display is not uniform (${facts.distinct} distinct values)`);
  const start = await hb.mcp.sc('sandbox_shot', { id: shotBox.id, record: 'start' });
  assert.deepEqual(start, { kind: 'recording', recording: true });
  assert.match(await hb.mcp.err('sandbox_shot', { id: shotBox.id, record: 'start' }), /already runs/);
  await exec(hb.mcp, shotBox.id, 'sleep 3');
  const rec = await hb.mcp.sc('sandbox_shot', { id: shotBox.id, record: 'stop' }, { timeout: 120000 });
  assert.equal(rec.kind, 'mp4');
  assert.ok(rec.bytes > 1000);
  // Back into the box for ffprobe (the host need not have it).
  await hb.mcp.sc('sandbox_sync', { id: shotBox.id, localPath: rec.path, dest: 'probe' });
  const probe = await exec(hb.mcp, shotBox.id, 'ffprobe -v error -show_entries stream=codec_name,width,height ' +
    '-show_entries format=duration -of default=nw=1 probe/' + path.basename(rec.path));
  assert.equal(probe.exitCode, 0, probe.stderr);
  assert.match(probe.stdout, /codec_name=h264/);
  assert.ok(Number(/duration=([\d.]+)/.exec(probe.stdout)[1]) >= 1, probe.stdout);
  await hb.mcp.sc('sandbox_stop', { id: shotBox.id });
}, { timeout: 300000 });
