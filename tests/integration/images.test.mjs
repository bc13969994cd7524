// Images (issue 17, sbx-images(7)): a real build of the shipped python
// definition from the host's apt sources (mmdebstrap --mode=unshare), built
// lazily by the first sessions that need it (concurrent callers share one
// build), reused by the next, listed with its version, read-only and without
// setuid bits inside; a broken definition fails clearly and leaves nothing;
// refused definitions; image rm and gc.
//
// The .deb packages are kept in SBX_IMAGE_CACHE (default
// /var/cache/sbx-ci/images/archives) so that reruns download nothing.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { after } from 'node:test';
import { useSbx, sbxctl, run, waitDone, waitFor, TMP_PREFIX } from './helpers.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const CACHE = process.env.SBX_IMAGE_CACHE ?? '/var/cache/sbx-ci/images/archives';
fs.mkdirSync(CACHE, { recursive: true });
const IMAGES = fs.mkdtempSync(TMP_PREFIX + 'images-');
fs.copyFileSync(path.join(ROOT, 'dist/images.d/python.conf'), path.join(IMAGES, 'python.conf'));
fs.copyFileSync(path.join(ROOT, 'dist/images.d/twine.conf'), path.join(IMAGES, 'twine.conf'));
fs.writeFileSync(path.join(IMAGES, 'broken.conf'),
  '[image]\ndescription = a package that does not exist\nsuite = bookworm\npackages = python3 sbx-no-such-package\n');
fs.writeFileSync(path.join(IMAGES, 'loose.conf'), '[image]\nsuite = bookworm\npackages = python3\n');
fs.chmodSync(path.join(IMAGES, 'loose.conf'), 0o666); // writable by others: refused
for (const f of ['python.conf', 'twine.conf', 'broken.conf']) fs.chmodSync(path.join(IMAGES, f), 0o644);
after(() => fs.rmSync(IMAGES, { recursive: true, force: true }));

const h = useSbx({
  sandboxes: [],
  config: `[sbxd]\nimages_dir = ${IMAGES}\nimage_cache_dir = ${CACHE}\n[template py]\nimage = python\nwarm = 0\n`,
});
const BUILD_MS = 600000;

async function images() {
  const r = await sbxctl(h.socket, ['image', 'list', '--json']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

async function image(name) {
  const im = (await images()).find((i) => i.name === name);
  assert.ok(im, `image ${name} not listed`);
  return im;
}

async function sandboxWith(name, img) {
  const src = path.join(h.dir, 'src-' + name);
  await fsp.mkdir(src, { recursive: true });
  await fsp.writeFile(path.join(src, 'hello.py'), 'print("hello from", __import__("sys").version.split()[0])\n');
  const r = await sbxctl(h.socket, ['sandbox', 'create', name, '--source', src, '--image', img]);
  assert.equal(r.code, 0, r.stderr + r.stdout);
}

/* A command through the MCP client, waited for past the yield limit; with
 * onprogress the SDK sends a progressToken, and sbx's progress notifications
 * come to it. */
async function execWait(sandbox, cmd, onprogress) {
  const r = await h.mcp.client.callTool({ name: 'exec_command', arguments: { sandbox_id: sandbox, cmd, yield_time_ms: 30000 } },
    undefined, { timeout: 60000, ...(onprogress ? { onprogress } : {}) });
  assert.ok(!r.isError, JSON.stringify(r.content));
  const sc = r.structuredContent;
  if (sc.status !== 'running') return sc;
  return waitDone(h.mcp, sandbox, sc.command_session_id, { timeout: BUILD_MS });
}

function buildsStarted(name) {
  return fs.readFileSync(h.sbxdLog, 'utf8').split('\n').filter((l) => l.includes(`Building image '${name}'`)).length;
}

function buildDirs() {
  return fs.readdirSync(path.join(h.stateDir, 'images')).filter((d) => /^[0-9a-f]{40}$/.test(d));
}

h.test('image list: the default, absent images, a refused and an unavailable definition', async () => {
  const list = await images();
  assert.deepEqual(list.map((i) => i.name), ['default', 'broken', 'loose', 'python', 'twine']);
  assert.equal(list[0].state, 'built');
  const py = list.find((i) => i.name === 'python');
  assert.equal(py.state, 'absent');
  assert.match(py.digest, /^[0-9a-f]{40}$/);
  assert.deepEqual(Object.keys(py).sort(), ['built_unix', 'description', 'digest', 'name', 'size_bytes', 'state', 'versions']);
  const show = await sbxctl(h.socket, ['image', 'show', 'loose', '--json']);
  assert.equal(show.code, 0, show.stderr);
  const loose = JSON.parse(show.stdout);
  assert.equal(loose.state, 'failed');
  assert.match(loose.error, /refused: not a regular file owned by root and writable only by it/);
  const twine = await sbxctl(h.socket, ['image', 'build', 'twine']);
  assert.notEqual(twine.code, 0);
  assert.match(twine.stderr, /image 'twine' cannot be built: Tweego .* packaged neither in Debian nor on npm/);
  const missing = await sbxctl(h.socket, ['sandbox', 'create', 'x', '--source', h.dir, '--image', 'nope']);
  assert.equal(missing.code, 4, missing.stderr);
  assert.match(missing.stderr, /image 'nope' has no definition/);
});

h.test('the first sessions build python once, lazily; python3 --version matches image list', async () => {
  await sandboxWith('py1', 'python');
  await sandboxWith('py2', 'python');
  assert.equal((await image('python')).state, 'absent', 'sandbox create only records the name');
  const t0 = Date.now();
  // Two callers at once, in two sandboxes: one build, both wait for it; the
  // first asked for progress (a progressToken) and is told the build's steps.
  const progress = [];
  const [a, b] = await Promise.all([execWait('py1', 'python3 --version', (p) => progress.push(p)),
    execWait('py2', 'python3 hello.py')]);
  const ms = Date.now() - t0;
  assert.equal(a.exit_code, 0, a.output);
  assert.equal(b.exit_code, 0, b.output);
  assert.equal(buildsStarted('python'), 1, 'concurrent callers share one build');
  assert.ok(progress.length >= 1, 'progress notifications during the build');
  assert.match(progress[0].message, /^image 'python': building, step [a-z]+$/);
  assert.deepEqual(progress.map((p) => p.progress), progress.map((_, i) => i + 1));
  const py = await image('python');
  assert.equal(py.state, 'built');
  assert.ok(py.size_bytes > 50e6, `size ${py.size_bytes}`);
  assert.ok(py.built_unix > 0);
  assert.ok(py.versions.python, JSON.stringify(py.versions));
  assert.equal(a.output.trim(), py.versions.python);
  assert.match(b.output, new RegExp(`hello from ${py.versions.python.replace('Python ', '').replace(/\./g, '\\.')}`));
  assert.deepEqual(buildDirs(), [py.digest]);
  process.stderr.write(`# lazy build of python: ${ms} ms, ${py.size_bytes} bytes\n`);
}, { timeout: BUILD_MS + 60000 });

h.test('a second session reuses the build', async () => {
  const t0 = Date.now();
  const sc = await execWait('py1', 'python3 -c "import sys; print(sys.prefix)"');
  assert.equal(sc.exit_code, 0, sc.output);
  assert.equal(sc.output.trim(), '/usr');
  assert.ok(Date.now() - t0 < 30000, 'no rebuild');
  assert.equal(buildsStarted('python'), 1);
});

h.test('a template naming python gives claims on its build (the lifecycle set)', async () => {
  const t = JSON.parse((await sbxctl(h.socket, ['template', 'show', 'py', '--json'])).stdout);
  assert.equal(t.image, 'python');
  const life = await h.connect({ argv: ['--set', 'lifecycle', '--socket', h.socket] });
  try {
    const c = await life.sc('create_sandbox', { warmpool: 'py' });
    const r = await life.sc('execute_command', { sandbox_claim_name: c.sandbox_claim_name, command: 'python3 --version' });
    assert.equal(r.exit_code, 0, r.stderr);
    assert.equal(r.stdout.trim(), (await image('python')).versions.python);
    assert.equal(buildsStarted('python'), 1, 'the claim mounts the same build');
    await life.sc('delete_sandbox', { sandbox_claim_name: c.sandbox_claim_name });
  } finally {
    await life.close();
  }
});

h.test('the build is read-only and has no working setuid or file capability inside', async () => {
  const py = await image('python');
  const root = path.join(h.stateDir, 'images', py.digest, 'root');
  const suid = await run('find', [root, '-xdev', '-perm', '/6000', '-type', 'f']);
  assert.equal(suid.stdout.trim(), '', 'setuid/setgid bits stripped');
  const caps = await run('python3', ['-c', `
import os, sys
n = 0
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        p = os.path.join(d, f)
        try:
            if 'security.capability' in os.listxattr(p, follow_symlinks=False): n += 1
        except OSError: pass
print(n)`, root]);
  assert.equal(caps.stdout.trim(), '0', 'no file capabilities');
  const sc = await execWait('py1', [
    'grep NoNewPrivs /proc/self/status',
    'awk \'$2 == "/" { print $4 }\' /proc/mounts',
    'ls -l /usr/bin/passwd | cut -c1-10',
    '(echo x > /usr/bin/sbx-written) 2>/dev/null || echo write-refused',
    'echo y > /tmp/sbx-written && echo tmp-ok',
  ].join('; '));
  assert.equal(sc.exit_code, 0, sc.output);
  assert.match(sc.output, /NoNewPrivs:\s+1/);
  assert.match(sc.output, /(^|,)nosuid(,|$)/m);
  assert.match(sc.output, /^-rwxr-xr-x/m, 'passwd is not setuid inside');
  assert.match(sc.output, /write-refused/, 'the image is root\'s on the host, not the sandbox root\'s');
  assert.match(sc.output, /tmp-ok/);
  assert.equal(fs.existsSync(path.join(root, 'usr/bin/sbx-written')), false, 'a session never writes into the build');
});

h.test('a broken definition fails naming the image and step, leaves no half build, and is retried', async () => {
  const before = buildDirs();
  const r = await sbxctl(h.socket, ['image', 'build', 'broken'], { timeout: BUILD_MS });
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stderr, /image 'broken': the build failed at step mmdebstrap: .*sbx-no-such-package/);
  const im = await image('broken');
  assert.equal(im.state, 'failed');
  assert.deepEqual(buildDirs(), before);
  assert.deepEqual(fs.readdirSync(path.join(h.stateDir, 'images')).filter((d) => /\.tmp$|\.spec$/.test(d)), []);
  // A session on it gets the reason; the next call builds again.
  await sandboxWith('bad', 'broken');
  const sc = await execWait('bad', 'true');
  assert.equal(sc.exit_code, 127);
  assert.match(sc.output, /cannot start the workspace session: image 'broken': the build failed at step mmdebstrap/);
  assert.equal(buildsStarted('broken'), 2, 'a failed build is retried by the next caller');
  const del = await sbxctl(h.socket, ['sandbox', 'delete', 'bad']);
  assert.equal(del.code, 0, del.stderr);
}, { timeout: BUILD_MS });

h.test('gc removes builds no definition names and keeps the used one', async () => {
  const py = await image('python');
  const stale = path.join(h.stateDir, 'images', 'ab'.repeat(20));
  await fsp.mkdir(path.join(stale, 'root'), { recursive: true });
  await fsp.writeFile(path.join(stale, 'built'), 'size_bytes=4096\nbuilt_unix=1\n');
  const r = await sbxctl(h.socket, ['gc', '--json']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).images_removed, 1);
  await waitFor(() => buildDirs().join() === py.digest, { what: 'the stale build to go', timeout: 10000 });
  await waitFor(() => !fs.readdirSync(path.join(h.stateDir, 'images')).some((d) => d.startsWith('trash-')),
    { what: 'the removal to finish', timeout: 10000 });
});

h.test('image rm is refused while sandboxes use the image, naming them, and works after', async () => {
  const r = await sbxctl(h.socket, ['image', 'rm', 'python']);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /image 'python' is used by sandbox\(es\) py1, py2/);
  for (const sb of ['py1', 'py2']) {
    const d = await sbxctl(h.socket, ['sandbox', 'delete', sb]);
    assert.equal(d.code, 0, d.stderr);
  }
  const ok = await sbxctl(h.socket, ['image', 'rm', 'python']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal((await image('python')).state, 'absent');
  await waitFor(() => buildDirs().length === 0 &&
    !fs.readdirSync(path.join(h.stateDir, 'images')).some((d) => d.startsWith('trash-')),
  { what: 'the build to be removed', timeout: 20000 });
});
