// Claims across an sbxd restart, file tools' timeouts and failing warm pools
// (issue 16): a claim's files (/workspace with deletions of its source's
// files, the root's writes in /root and /run, /tmp) are there after a
// restart, its processes are not and get_sandbox_status says so; the file
// tools give up at their timeout when sbxd does not answer and an upload
// never leaves a half-written file; a template whose warm claims fail backs
// off and shows why; a claim whose kept files cannot be put back starts
// without them and says why.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { useSbx, sbxctl, waitFor } from './helpers.mjs';

// The template's source: files the claim deletes (whiteouts) and replaces (an opaque directory).
const SRC = fs.mkdtempSync(path.join(os.tmpdir(), 'sbx-test-claimsrc-'));
fs.writeFileSync(`${SRC}/keep.txt`, 'keep\n');
fs.writeFileSync(`${SRC}/gone.txt`, 'gone\n');
fs.mkdirSync(`${SRC}/sub`);
fs.writeFileSync(`${SRC}/sub/x`, 'x\n');
process.on('exit', () => fs.rmSync(SRC, { recursive: true, force: true }));

const h = useSbx({ sandboxes: [], sets: 'lifecycle',
  config: `[sbxd]\n[template default]\nwarm = 0\n[template quick]\nsource = ${SRC}\nwarm = 0\n` +
    '[template tiny]\ndisk = 8M\nwarm = 0\n' });

const exec = (n, command) => h.mcp.sc('execute_command', { sandbox_claim_name: n, command });

h.test('a claim keeps its files across an sbxd restart; its background processes are gone, and it says so', async () => {
  const { sandbox_claim_name: n } = await h.mcp.sc('create_sandbox', { warmpool: 'quick', shutdown_after_seconds: null });
  const made = await exec(n, [
    'echo ws > /workspace/w.txt', 'mkdir -p /workspace/d/e && echo deep > /workspace/d/e/f',
    'echo tmp > /tmp/t.txt', 'echo home > /root/r.txt', 'mkdir -p /run/k && echo u > /run/k/u',
    'rm /workspace/gone.txt', 'rm -r /workspace/sub', 'mkdir /workspace/sub', 'echo y > /workspace/sub/y',
    'ln -s w.txt /workspace/link',
  ].join(' && ') + '; sleep 1000 >/dev/null 2>&1 & echo $! > /workspace/bg.pid; kill -0 $(cat /workspace/bg.pid) && echo alive');
  assert.equal(made.exit_code, 0, made.stderr);
  assert.equal(made.stdout, 'alive\n');
  const before = await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: n });
  assert.equal(before.message, "the sandbox's session runs");

  await h.restartSbxd();
  await waitFor(async () => (await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: n })).ready,
    { timeout: 30000, what: 'the claim to run again after the restart' });
  const st = await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: n });
  assert.equal(st.status, 'SandboxReady');
  assert.match(st.message, /started again after sbxd restarted: its files were kept, processes started before the restart are gone/);
  const r = await exec(n, [
    'cat /workspace/w.txt /workspace/d/e/f /tmp/t.txt /root/r.txt /run/k/u', 'readlink /workspace/link',
    'cat /workspace/keep.txt', 'ls /workspace/sub', 'test -e /workspace/gone.txt && echo gone-back || echo gone-gone',
    'kill -0 $(cat /workspace/bg.pid) 2>/dev/null && echo bg-alive || echo bg-gone',
  ].join('; '));
  assert.equal(r.stdout, 'ws\ndeep\ntmp\nhome\nu\nw.txt\nkeep\ny\ngone-gone\nbg-gone\n', r.stderr);
  const dl = await h.mcp.sc('download_file', { sandbox_claim_name: n, path: '/tmp/t.txt' });
  assert.equal(dl.content, 'tmp\n');
  // The copy kept at the stop went once the new session ran; a second restart keeps what the claim has now.
  await waitFor(() => fs.readdirSync(`${h.stateDir}/sandboxes`).every((id) =>
    !fs.existsSync(`${h.stateDir}/sandboxes/${id}/kept`) || fs.readdirSync(`${h.stateDir}/sandboxes/${id}/kept`).length === 0),
  { what: 'the kept copy to go' });
  await exec(n, 'echo two > /tmp/second');
  await h.restartSbxd();
  await waitFor(async () => (await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: n })).ready,
    { timeout: 30000, what: 'the claim to run again after the second restart' });
  const r2 = await exec(n, 'cat /tmp/t.txt /tmp/second /workspace/w.txt');
  assert.equal(r2.stdout, 'tmp\ntwo\nws\n');
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: n });
});

h.test('a claim that wrote nothing costs no copy at the stop, and after the restart says its processes are gone', async () => {
  const { sandbox_claim_name: n } = await h.mcp.sc('create_sandbox', { warmpool: 'quick', shutdown_after_seconds: null });
  await exec(n, 'sleep 1000 >/dev/null 2>&1 &');
  await h.restartSbxd();
  assert.doesNotMatch(fs.readFileSync(h.sbxdLog, 'utf8').split('sbxd start #').pop(), /is back, stopped, with its kept changes/);
  await waitFor(async () => (await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: n })).ready,
    { timeout: 30000, what: 'the claim to run again after the restart' });
  const st = await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: n });
  assert.match(st.message, /processes started before the restart are gone/);
  assert.equal((await exec(n, 'pgrep -c sleep || true')).stdout.trim(), '0');
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: n });
});

h.test('the file tools give up at their timeout when sbxd does not answer, and change nothing', async () => {
  const { sandbox_claim_name: n } = await h.mcp.sc('create_sandbox', { warmpool: 'quick' });
  await h.mcp.sc('upload_file', { sandbox_claim_name: n, path: 'old.txt', content: 'old\n' });
  const big = Buffer.alloc(8 << 20, 7).toString('base64');
  // sbxd stopped (SIGSTOP) for longer than the timeouts: each call ends at its own.
  process.kill(h.sbxd.pid, 'SIGSTOP');
  let calls;
  const t0 = Date.now();
  try {
    calls = await Promise.all([
      h.mcp.err('upload_file', { sandbox_claim_name: n, path: 'old.txt', content: big, binary: true, timeout: 1 }),
      h.mcp.err('upload_file', { sandbox_claim_name: n, path: 'new/n.txt', content: 'n', timeout: 1 }),
      h.mcp.err('download_file', { sandbox_claim_name: n, path: 'old.txt', timeout: 2 }),
      h.mcp.err('list_files', { sandbox_claim_name: n, path: '.', timeout: 1 }),
      h.mcp.err('file_exists', { sandbox_claim_name: n, path: 'old.txt', timeout: 1 }),
    ]);
  } finally {
    await new Promise((res) => setTimeout(res, Math.max(0, 3500 - (Date.now() - t0))));
    process.kill(h.sbxd.pid, 'SIGCONT');
  }
  assert.ok(Date.now() - t0 < 5000);
  const tools = ['upload_file', 'upload_file', 'download_file', 'list_files', 'file_exists'];
  calls.forEach((text, i) => assert.match(text, new RegExp(`^${tools[i]}: sbxd did not answer within timeout \\(${i === 2 ? 2 : 1} s\\); ` +
    'the request was abandoned and nothing was changed'), text));
  // sbxd, going on, finds their deadlines passed (the requests came before the cancellations):
  // nothing was written, no temporary file is left.
  const d = await h.mcp.sc('download_file', { sandbox_claim_name: n, path: 'old.txt' });
  assert.equal(d.content, 'old\n');
  assert.equal((await h.mcp.sc('file_exists', { sandbox_claim_name: n, path: 'new' })).exists, false);
  const l = await h.mcp.sc('list_files', { sandbox_claim_name: n, path: '.' });
  assert.deepEqual(l.entries.map((e) => e.name), ['gone.txt', 'keep.txt', 'old.txt', 'sub']);
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: n });
});

h.test('an upload that does not fit leaves the file it would replace as it was, and no temporary file', async () => {
  const { sandbox_claim_name: n } = await h.mcp.sc('create_sandbox', { warmpool: 'tiny' });
  await exec(n, 'printf old > f; chmod 600 f');
  const e = await h.mcp.err('upload_file', { sandbox_claim_name: n, path: 'f', content: Buffer.alloc(12 << 20, 1).toString('base64'), binary: true });
  assert.match(e, /cannot write '\/workspace\/f': the sandbox's disk is full/);
  const r = await exec(n, 'cat f; echo; stat -c %a f; ls -A');
  assert.equal(r.stdout, 'old\n600\nf\n');
  // A replacement keeps the file's mode.
  await h.mcp.sc('upload_file', { sandbox_claim_name: n, path: 'f', content: 'new' });
  assert.equal((await exec(n, 'cat f; echo; stat -c %a f; ls -A')).stdout, 'new\n600\nf\n');
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: n });
});

h.test('a claim whose kept files cannot be put back (a smaller session disk now) starts empty and says why', async () => {
  const { sandbox_claim_name: n } = await h.mcp.sc('create_sandbox', { shutdown_after_seconds: null });
  const made = await exec(n, 'head -c 24M /dev/urandom > /workspace/big && echo small > /workspace/s.txt && echo ok');
  assert.equal(made.stdout, 'ok\n', made.stderr);
  const saved = fs.readFileSync(h.configPath, 'utf8');
  // The claim's sessions now get an 8 MiB tmpfs: its 24 MiB kept copy cannot go back in.
  fs.writeFileSync(h.configPath, saved.replace('[sbxd]\n', '[sbxd]\nsession_disk_bytes = 8M\n'));
  try {
    await h.restartSbxd();
    await waitFor(async () => (await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: n })).ready,
      { timeout: 60000, what: 'the claim to run again, without its files' });
    const st = await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: n });
    assert.equal(st.status, 'SandboxReady');
    assert.match(st.message, /started again after sbxd restarted, without its files: the copy kept at the stop could not be put back \(No space left on device\) and was removed/);
    assert.equal((await exec(n, 'ls -A /workspace; echo end')).stdout, 'end\n');
    assert.match(fs.readFileSync(h.sbxdLog, 'utf8'), /Claim default\/[a-z0-9-]+ starts without its kept files: they could not be put back: No space left on device/);
    // Tried once: the copy is gone, and the claim works.
    await waitFor(() => fs.readdirSync(`${h.stateDir}/sandboxes`).every((id) =>
      !fs.existsSync(`${h.stateDir}/sandboxes/${id}/kept`) || fs.readdirSync(`${h.stateDir}/sandboxes/${id}/kept`).length === 0),
    { what: 'the kept copy to go' });
    assert.equal((await exec(n, 'echo again > a && cat a')).stdout, 'again\n');
  } finally {
    fs.writeFileSync(h.configPath, saved);
  }
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: n });
  await h.restartSbxd();
});

h.test('a template whose warm claims fail backs off (doubling from 5 s) and sbxctl template show says why', async () => {
  // A definition sbxd refuses to build (writable by others): each warm claim fails at once.
  const images = `${h.dir}/images.d`;
  fs.mkdirSync(images, { recursive: true });
  fs.writeFileSync(`${images}/loose.conf`, '[image]\nsuite = bookworm\npackages = python3\n');
  fs.chmodSync(`${images}/loose.conf`, 0o666);
  const conf = fs.readFileSync(h.configPath, 'utf8').replace('[sbxd]\n', `[sbxd]\nimages_dir = ${images}\n`) +
    '[template broken]\nimage = loose\nwarm = 1\n';
  fs.writeFileSync(h.configPath, conf);
  await h.restartSbxd();
  const show = async () => (await sbxctl(h.socket, ['template', 'show', 'broken', '--json']));
  await waitFor(async () => JSON.parse((await show()).stdout).warm_failures >= 2,
    { timeout: 20000, what: 'two warm claims of broken to fail' });
  const t = JSON.parse((await show()).stdout);
  assert.match(t.warm_error, /loose/);
  // The second failure waits 10 s, the third 20 s: no third within 8 s of the second.
  const retryIn = Number(t.warm_retry_unix) - Math.floor(Date.now() / 1000);
  assert.ok(retryIn >= 7 && retryIn <= 11, `next try in ${retryIn} s after the second failure`);
  await new Promise((res) => setTimeout(res, 6000));
  assert.equal(JSON.parse((await show()).stdout).warm_failures, 2);
  const text = await sbxctl(h.socket, ['template', 'show', 'broken']);
  assert.match(text.stdout, /warm claims failing: 2 in a row, next try in \d+ s\nlast error: .*loose/);
  const log = fs.readFileSync(h.sbxdLog, 'utf8');
  assert.match(log, /A warm claim of template 'broken' failed \(2 in a row\): .*; trying again in 10 s/);
});
