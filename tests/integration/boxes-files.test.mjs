// The boxes set's files and pictures (issue 21 part D; shared/seeds/003):
// sandbox_sync of a local directory with excluded parts and hostile symlinks
// (pointing out of localPath: copied as symlinks, never followed), sandbox_get
// of a file and of a directory (tar.gz) placed where only the caller reads
// it, sandbox_wire in both modes, and sandbox_shot's refusals on an image
// without a display, all on the default image. The pictures themselves (a
// PNG of a page served in the box, of the display :99, an mp4 recording) need
// the browser image, which takes minutes to build: they run in make
// check-images right after it builds it (tests/images/box-pictures.mjs, with
// tests/images/run.sh's sbxd configured box_image = browser), not here. Their PNG
// decoder (png.mjs) is checked here against PNGs of every filter type.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import { after } from 'node:test';
import { useSbx, waitFor, run, TMP_PREFIX } from './helpers.mjs';
import { pngFacts, filterPredict } from './png.mjs';

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
  assert.match(f.path, /\/box-files\/0\/[0-9a-f]{32}-hello\.txt$/);
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
    assert.match(f.path, /\/box-files\/65534\/[0-9a-f]{32}-note\.txt$/);
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

h.test('sandbox_get whose placement directory cannot be made: a clear error, nothing left behind', async () => {
  const uid = 65531;
  const top = path.join(h.stateDir, 'box-files');
  const blocker = path.join(top, String(uid));
  fs.mkdirSync(top, { recursive: true });
  fs.writeFileSync(blocker, ''); // where STATE/box-files/UID/ would be made
  const a = await h.connect({ uid });
  try {
    const b = await a.sc('sandbox_start', { idleTimeoutMin: 0 });
    await exec(a, b.id, 'mkdir -p d && echo one > d/one.txt');
    for (const p of ['d/one.txt', 'd']) {
      assert.match(await a.err('sandbox_get', { id: b.id, path: p }), /^cannot place the file for you: Not a directory$/m);
      // Neither the archive made in the box nor a placed file stays.
      assert.equal((await exec(a, b.id, 'ls -A /work/.sbx')).stdout, '');
      assert.ok(fs.statSync(blocker).isFile());
      assert.equal(fs.statSync(blocker).size, 0);
      assert.deepEqual(fs.readdirSync(top).filter((n) => n.startsWith(String(uid))), [String(uid)]);
    }
    fs.unlinkSync(blocker);
    const f = await a.sc('sandbox_get', { id: b.id, path: 'd' });
    assert.equal(f.kind, 'tar.gz');
    await a.sc('sandbox_stop', { id: b.id });
  } finally {
    await a.close();
    fs.rmSync(blocker, { force: true, recursive: true });
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
  // sandbox_status shows the same table.
  assert.deepEqual((await h.mcp.sc('sandbox_status', { id: b.id })).wiring, both.wiring);
  // This sbxd's boxes have the egress policy none: nothing outside to wire to.
  assert.match(await h.mcp.err('sandbox_wire', { id: b.id, service: 'api', mode: 'external' }),
    /mode external: this box reaches no host outside \(its egress policy is none: box_egress/);
  await h.mcp.sc('sandbox_stop', { id: b.id });
});

// ---- sandbox_wire external: through sbx-egress, under the box's policy ------------

/* The "external" services, on the host's loopback (egress_allow_private = yes). */
function external(addr, name) {
  const seen = [];
  const srv = http.createServer((req, res) => {
    seen.push(`${req.headers.host} ${req.url}`);
    res.end(`${name}-ok ${req.url}\n`);
  });
  return new Promise((resolve) => srv.listen(0, addr, () => resolve({ srv, seen, port: srv.address().port })));
}
const staging = await external('127.0.0.2', 'staging');
const elsewhere = await external('127.0.0.3', 'elsewhere');
after(() => { staging.srv.close(); elsewhere.srv.close(); });
const he = useSbx({ sandboxes: [], sets: 'boxes',
  config: `[sbxd]\nbox_image = default\nbox_spares = 0\nbox_egress = package-managers\negress_user = nobody\n` +
    `egress_allow_private = yes\negress_package_hosts = 127.0.0.2:${staging.port}\n` });
const curl = (url) => `curl -sS -m 10 ${url} 2>&1; echo "rc=$?"`;

he.test('sandbox_wire external: the name reaches externalBaseUrl\'s host through sbx-egress, as the policy allows', async () => {
  const b = await he.mcp.sc('sandbox_start', { idleTimeoutMin: 0, services: [{ name: 'api', port: 8081 }, { name: 'web', port: 8082 }],
    externalBaseUrl: `http://127.0.0.2:${staging.port}/v1` });
  const w = await he.mcp.sc('sandbox_wire', { id: b.id, service: 'api', mode: 'external' });
  assert.deepEqual(w.wiring, [
    { service: 'api', port: 8081, mode: 'external', target: `127.0.0.2:${staging.port}` },
    { service: 'web', port: 8082, mode: null, target: null },
  ]);
  assert.deepEqual((await he.mcp.sc('sandbox_status', { id: b.id })).wiring, w.wiring);
  // The box resolves nothing for it (a comment line): its clients ask the proxy, which aliases it.
  assert.equal((await exec(he.mcp, b.id, 'grep -c "^#\tapi\t# sbx-wire external$" /etc/hosts; getent hosts api; echo $?')).stdout,
    '1\n2\n');
  assert.equal((await exec(he.mcp, b.id, curl('http://api:8081/hello'))).stdout, 'staging-ok /hello\nrc=0\n');
  assert.deepEqual(staging.seen, ['api:8081 /hello']);
  // Only the wired service at its port is aliased: another name is itself, not a package host.
  const refused = "sbx-egress: not allowed by the sandbox's egress policy\nrc=0\n";
  assert.equal((await exec(he.mcp, b.id, curl('http://web:8082/x'))).stdout, refused);
  assert.equal((await exec(he.mcp, b.id, curl('http://api:8082/x'))).stdout, refused);
  // Back to box mode: the alias goes (sbx-egress gets the session again, without it), and the name
  // is in no_proxy: with the proxy variables set, curl reaches the box's own service, not the proxy.
  await exec(he.mcp, b.id, 'mkdir -p srv && echo api-in-box > srv/again && cd srv && ' +
    'exec python3 -m http.server 8081 --bind 127.0.0.1', { background: true });
  await he.mcp.sc('sandbox_wire', { id: b.id, service: 'api', mode: 'box' });
  const env = await exec(he.mcp, b.id, 'echo "$http_proxy|$no_proxy|$NO_PROXY"');
  assert.match(env.stdout, /^http:\/\/[^|]+\|localhost,127\.0\.0\.1,api\|localhost,127\.0\.0\.1,api\n$/);
  await waitFor(async () => (await exec(he.mcp, b.id, curl('http://api:8081/again'))).stdout === 'api-in-box\nrc=0\n',
    { timeout: 20000, what: 'http://api:8081 reaching the box\'s own service' });
  assert.equal((await exec(he.mcp, b.id, curl('http://web:8082/x'))).stdout, refused); // not wired: still the proxy's
  assert.deepEqual(staging.seen, ['api:8081 /hello']);
  await he.mcp.sc('sandbox_stop', { id: b.id });
});

he.test('sbx-egress killed while a box has an external alias: restarted, it has the alias again', async () => {
  const b = await he.mcp.sc('sandbox_start', { idleTimeoutMin: 0, services: [{ name: 'api', port: 8081 }],
    externalBaseUrl: `http://127.0.0.2:${staging.port}/` });
  await he.mcp.sc('sandbox_wire', { id: b.id, service: 'api', mode: 'external' });
  assert.equal((await exec(he.mcp, b.id, curl('http://api:8081/before'))).stdout, 'staging-ok /before\nrc=0\n');
  const started = () => [...fs.readFileSync(he.sbxdLog, 'utf8').matchAll(/Started sbx-egress \(pid (\d+)/g)].map((m) => Number(m[1]));
  const [pid] = started().slice(-1);
  process.kill(pid, 'SIGKILL'); // this sbxd's own sbx-egress, by its pid
  await waitFor(() => started().length >= 2 && started().at(-1) !== pid, { timeout: 30000, what: 'sbx-egress started again' });
  // The alias is sbx-egress's memory only: it came back with the session's EGRESS_ATTACH.
  await waitFor(async () => (await exec(he.mcp, b.id, curl('http://api:8081/after'))).stdout === 'staging-ok /after\nrc=0\n',
    { timeout: 30000, what: 'http://api:8081 through the new sbx-egress' });
  assert.deepEqual(staging.seen.slice(-2), ['api:8081 /before', 'api:8081 /after']);
  await he.mcp.sc('sandbox_stop', { id: b.id });
});

he.test('sandbox_wire external: a host the box\'s policy does not allow is refused by sbx-egress; no externalBaseUrl is refused', async () => {
  const b = await he.mcp.sc('sandbox_start', { idleTimeoutMin: 0, services: [{ name: 'api', port: 8081 }],
    externalBaseUrl: `http://127.0.0.3:${elsewhere.port}/` });
  await he.mcp.sc('sandbox_wire', { id: b.id, service: 'api', mode: 'external' });
  const r = (await exec(he.mcp, b.id, 'curl -sS -m 10 -o /dev/null -w "%{http_code}\n" http://api:8081/ 2>&1')).stdout;
  assert.equal(r, '403\n');
  assert.deepEqual(elsewhere.seen, []);
  await he.mcp.sc('sandbox_stop', { id: b.id });
  const c = await he.mcp.sc('sandbox_start', { idleTimeoutMin: 0, services: [{ name: 'api', port: 8081 }] });
  assert.match(await he.mcp.err('sandbox_wire', { id: c.id, service: 'api', mode: 'external' }), /the box has no externalBaseUrl/);
  await he.mcp.sc('sandbox_stop', { id: c.id });
});

h.test('sandbox_shot on an image without a display says so', async () => {
  const b = await h.mcp.sc('sandbox_start', { idleTimeoutMin: 0 });
  assert.match(await h.mcp.err('sandbox_shot', { id: b.id }), /no display :99/);
  assert.match(await h.mcp.err('sandbox_shot', { id: b.id, target: 'url', url: 'javascript:alert(1)' }),
    /http:\/\/, https:\/\/ or file:\/\//);
  assert.match(await h.mcp.err('sandbox_shot', { id: b.id, record: 'stop' }), /no recording runs/);
  await h.mcp.sc('sandbox_stop', { id: b.id });
});

// ---- the pictures' PNG decoder (the pictures run in make check-images) ----------

/* A PNG of rows (arrays of [r, g, b] pixels), row y filtered with filter y % 5. */
function pngOf(rows) {
  const w = rows[0].length, bpp = 3, stride = w * bpp;
  const raw = [];
  let prev = Buffer.alloc(stride);
  rows.forEach((row, y) => {
    const line = Buffer.from(row.flat()), f = y % 5, out = Buffer.alloc(stride);
    for (let x = 0; x < stride; x++) {
      const a = x >= bpp ? line[x - bpp] : 0, b = prev[x], c = x >= bpp ? prev[x - bpp] : 0;
      out[x] = (line[x] - filterPredict(f, a, b, c)) & 0xff;
    }
    raw.push(Buffer.from([f]), out);
    prev = line;
  });
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    return Buffer.concat([len, Buffer.from(type, 'latin1'), data, Buffer.alloc(4)]); // the CRC is not checked
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(rows.length, 4);
  ihdr[8] = 8; ihdr[9] = 2;
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(Buffer.concat(raw))), chunk('IEND', Buffer.alloc(0))]);
}

h.test('png.mjs: size and distinct colours of PNGs of all five filters; a uniform one and a non-PNG', async () => {
  // 15 pixels wide: the decoder samples pixels 0, 7 and 14 of each row.
  const px = (x, y) => (x % 7 === 0 ? [(x * 17 + y * 40) & 0xff, (y * 90) & 0xff, 200 - x] : [x * 3, 255 - y, x ^ y]);
  const rows = Array.from({ length: 10 }, (_, y) => Array.from({ length: 15 }, (_, x) => px(x, y)));
  const want = new Set(rows.flatMap((row) => [0, 7, 14].map((x) => (row[x][0] << 16) | (row[x][1] << 8) | row[x][2])));
  assert.deepEqual(pngFacts(pngOf(rows)), { width: 15, height: 10, distinct: want.size });
  const flat = Array.from({ length: 6 }, () => Array.from({ length: 9 }, () => [1, 2, 3]));
  assert.deepEqual(pngFacts(pngOf(flat)), { width: 9, height: 6, distinct: 1 });
  assert.throws(() => pngFacts(Buffer.from('GIF89a not a png')), /PNG signature/);
});
