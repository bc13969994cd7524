// The script set (issue 18 part A, seed 001): sandbox_script in a fresh
// sandbox of the python image (the shipped definition, built lazily by the
// first call; its .deb packages cached in SBX_IMAGE_CACHE), /out kept with
// both logs and the caller's ownership, /in mounts of files and directories
// from descriptors the broker opened (a symlink swapped after the call
// changes nothing), every error row of the seed, the 16 KiB stderr tail
// and the stdout bound, background jobs (status, wait, cancel of a process
// tree, the logging notification), a broker disconnect and an sbxd restart
// (supervisor_lost), and another user's job refused.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after } from 'node:test';
import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { useSbx, sbxctl, waitFor, hostProcsMatching, sleep, T, TMP_PREFIX, ROOT } from './helpers.mjs';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const CACHE = process.env.SBX_IMAGE_CACHE ?? '/var/cache/sbx-ci/images/archives';
fs.mkdirSync(CACHE, { recursive: true });
const IMAGES = fs.mkdtempSync(TMP_PREFIX + 'script-images-');
fs.copyFileSync(path.join(ROOT, 'dist/images.d/python.conf'), path.join(IMAGES, 'python.conf'));
fs.chmodSync(path.join(IMAGES, 'python.conf'), 0o644);
const INPUTS = fs.mkdtempSync(TMP_PREFIX + 'script-in-');
fs.chmodSync(INPUTS, 0o755);
const OUTSIDE = fs.mkdtempSync(TMP_PREFIX + 'script-out-');
after(() => {
  for (const d of [IMAGES, INPUTS, OUTSIDE]) fs.rmSync(d, { recursive: true, force: true });
});
// Egress (issue 18 part C): a fake registry and a fake other host on the
// host's loopback (127.0.0.2, 127.0.0.3: the sandboxes' no_proxy names
// 127.0.0.1 only), reached through sbx-egress with egress_allow_private =
// yes, as egress.test.mjs does; each remembers the paths it was asked.
function server(addr, name) {
  const seen = [];
  const srv = http.createServer((req, res) => {
    seen.push(req.url);
    res.end(`${name}-ok ${req.url}\n`);
  });
  return new Promise((resolve) => srv.listen(0, addr, () => resolve({ srv, seen, port: srv.address().port })));
}
const registry = await server('127.0.0.2', 'registry');
const other = await server('127.0.0.3', 'other');
after(() => { registry.srv.close(); other.srv.close(); });
const REG = `127.0.0.2:${registry.port}`;
const OTHER = `127.0.0.3:${other.port}`;
const BUILD_MS = 600000;
const USER = 4242; // the unprivileged caller of the ownership and foreign-job tests

const h = useSbx({
  sandboxes: [],
  sets: 'script',
  world: true,
  config: `[sbxd]\nimages_dir = ${IMAGES}\nimage_cache_dir = ${CACHE}\nscript_allowed_paths = ${INPUTS} /nonexistent-root\n` +
    'script_stdout_max = 4096\nowner_sandboxes_max = 64\nowner_sessions_max = 64\n' +
    `egress_user = nobody\negress_allow_private = yes\negress_package_hosts = ${REG}\n`,
});

/* The processes that are exactly `sleep TAG` (not the shell that started them). */
const sleeps = (tag) => hostProcsMatching(new RegExp(`^sleep ${String(tag).replace('.', '\\.')}$`));
const script = (args, opts) => h.mcp.call('sandbox_script', { image: 'python', egress: 'none', ...args }, opts);
const jobSandbox = (jobId) => 'job-' + jobId.replaceAll('-', '');
/* The sandboxes sbxctl lists, spare job sandboxes apart (root's job-HEX, made ahead: core/job.h). */
async function sandboxes() {
  const all = JSON.parse((await sbxctl(h.socket, ['sandbox', 'list', '--json'])).stdout);
  const spare = (sb) => sb.owner_uid === 0 && /^job-[0-9a-f]{32}$/.test(sb.name);
  return { others: all.filter((sb) => !spare(sb)), spares: all.filter(spare).map((sb) => sb.name) };
}

h.test('tools/list: the four tools, the seed annotations, the roots in the live input schema', async () => {
  const tools = h.mcp.tools;
  assert.deepEqual(tools.map((t) => t.name), ['sandbox_script', 'sandbox_status', 'sandbox_wait', 'sandbox_cancel']);
  const s = tools[0];
  assert.deepEqual(s.annotations, { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true });
  assert.equal(s.inputSchema.properties.image.default, 'anaconda');
  assert.equal(s.inputSchema.properties.egress.default, 'package-managers');
  assert.equal(s.inputSchema.properties.background.default, false);
  assert.deepEqual(s.inputSchema.required, ['command']);
  for (const p of ['files', 'directories']) {
    assert.match(s.inputSchema.properties[p].description, new RegExp(`${INPUTS}, /nonexistent-root`));
  }
  assert.deepEqual(h.mcp.client.getServerCapabilities().logging, {}, 'the logging capability is declared');
  assert.equal(tools[2].inputSchema.properties.timeout_seconds.default, 1800);
  assert.equal(tools[2].inputSchema.properties.timeout_seconds.maximum, 172800);
});

let first;
h.test('the smallest command on python (built lazily): exit code, output_dir with both logs, text payload', async () => {
  const t0 = Date.now();
  const r = await script({ command: 'python3 -c "import sys; print(sys.version)"; echo oops >&2; pwd > where' },
    { timeout: BUILD_MS });
  process.stdout.write(`# first sandbox_script (image build included): ${Date.now() - t0} ms\n`);
  assert.ok(!r.isError, JSON.stringify(r.content));
  const sc = r.structuredContent;
  first = sc;
  assert.equal(sc.exit_code, 0);
  assert.match(sc.job_id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.match(sc.stdout, /^3\.11\.\d+ /);
  assert.equal(sc.stderr, 'oops\n');
  assert.equal(sc.output_dir, path.join(h.stateDir, 'jobs', sc.job_id, 'out'));
  assert.equal(r.content[0].text,
    `exit_code: 0\noutput_dir: ${sc.output_dir}\njob_id: ${sc.job_id}\n---\n${sc.stdout}---stderr---\noops\n\n`);
  assert.equal(fs.readFileSync(path.join(sc.output_dir, 'stdout.log'), 'utf8'), sc.stdout);
  assert.equal(fs.readFileSync(path.join(sc.output_dir, 'stderr.log'), 'utf8'), 'oops\n');
  assert.equal(fs.readFileSync(path.join(sc.output_dir, 'where'), 'utf8'), '/out\n');
  // the sandbox is gone; only spares for the next calls are left
  const l = await sandboxes();
  assert.deepEqual(l.others, []);
  assert.ok(!l.spares.includes(jobSandbox(sc.job_id)));
}, { timeout: BUILD_MS });

h.test('a spare sandbox is used once: the next call gets a fresh one (no file, no process of the last)', async () => {
  const tag = T(316);
  // spares of python/none are made after the last call ended (the loop's next pass)
  await waitFor(async () => (await sandboxes()).spares.length >= 1, { timeout: 30000, what: 'a spare' });
  const before = (await sandboxes()).spares;
  const a = (await script({ command: `echo one > /tmp/mark; echo one > /root/mark; setsid sleep ${tag} >/dev/null 2>&1 & ` +
    'echo $$ > /out/pid' })).structuredContent;
  assert.equal(a.exit_code, 0, a.stderr);
  assert.ok(before.includes(jobSandbox(a.job_id)), 'the call took a spare made ahead');
  // its sandbox went with every process of it, the one it left behind included
  await waitFor(() => sleeps(tag).length === 0, { timeout: 30000, what: 'the left-behind sleep to go' });
  assert.ok(!(await sandboxes()).spares.includes(jobSandbox(a.job_id)), 'a used spare is not offered again');
  await waitFor(async () => (await sandboxes()).spares.length >= 1, { timeout: 30000, what: 'another spare' });
  const b = (await script({ command: 'cat /tmp/mark /root/mark 2>&1; ls /out; ' +
    'for p in /proc/[0-9]*/cmdline; do tr "\\0" " " < $p; echo; done | grep "^sleep " || echo no-sleep' }))
    .structuredContent;
  assert.notEqual(b.job_id, a.job_id);
  assert.notEqual(jobSandbox(b.job_id), jobSandbox(a.job_id));
  assert.match(b.stdout, /No such file or directory\n.*No such file or directory\n/);
  assert.doesNotMatch(b.stdout, /one|pid/);
  assert.match(b.stdout, /stderr\.log\nstdout\.log\nno-sleep\n$/);
});

h.test('/in: files and directories read-only at /in/<basename>, mounted from the descriptor (a swapped symlink changes nothing)', async () => {
  fs.writeFileSync(path.join(INPUTS, 'data.csv'), 'a,b\n1,2\n');
  fs.mkdirSync(path.join(INPUTS, 'tree/sub'), { recursive: true });
  fs.writeFileSync(path.join(INPUTS, 'tree/sub/x.txt'), 'deep\n');
  fs.writeFileSync(path.join(OUTSIDE, 'secret'), 'not for the sandbox\n');
  fs.symlinkSync(path.join(INPUTS, 'data.csv'), path.join(INPUTS, 'link.csv'));
  const sc = (await script({
    command: 'cat /in/data.csv /in/tree/sub/x.txt; ls /in | sort | tr "\\n" " "; echo; ' +
      'touch /in/data.csv 2>/dev/null && echo WRITABLE; touch /in/tree/new 2>/dev/null && echo WRITABLE; exit 0',
    files: [path.join(INPUTS, 'data.csv')], directories: [path.join(INPUTS, 'tree')],
  })).structuredContent;
  assert.equal(sc.exit_code, 0, sc.stderr);
  assert.equal(sc.stdout, 'a,b\n1,2\ndeep\ndata.csv tree \n');
  // background: the broker opened link.csv (-> data.csv) before it answered; swapping the link
  // to a file outside script_allowed_paths now changes nothing of what the job reads
  const bg = (await script({ command: 'sleep 1; cat /in/data.csv', files: [path.join(INPUTS, 'link.csv')], background: true }))
    .structuredContent;
  fs.unlinkSync(path.join(INPUTS, 'link.csv'));
  fs.symlinkSync(path.join(OUTSIDE, 'secret'), path.join(INPUTS, 'link.csv'));
  const w = await h.mcp.sc('sandbox_wait', { job_id: bg.job_id, timeout_seconds: 60 });
  assert.equal(w.status, 'exited');
  assert.equal(w.stdout, 'a,b\n1,2\n', 'what the broker opened is what was mounted');
});

h.test('every error row of the seed, with its wording', async () => {
  const err = async (args) => {
    const r = await script({ command: 'true', ...args });
    assert.equal(r.isError, true, JSON.stringify(r.structuredContent));
    return r.content[0].text;
  };
  assert.equal(await err({ image: 'nope' }),
    'image "nope" is not in the allowlist (node, python, anaconda, go, browser, media, twine, webgamedev)');
  assert.equal(await err({ egress: 'wide' }), 'egress mode "wide" is not in the allowlist (none, package-managers, open)');
  assert.equal(await err({ files: ['rel/data.csv'] }), 'mount path must be absolute: rel/data.csv');
  assert.equal(await err({ files: [path.join(OUTSIDE, 'secret')] }),
    `mount path ${path.join(OUTSIDE, 'secret')} is not within script_allowed_paths`);
  // link.csv now leads outside: resolved, it is refused too
  assert.equal(await err({ files: [path.join(INPUTS, 'link.csv')] }),
    `mount path ${path.join(INPUTS, 'link.csv')} is not within script_allowed_paths`);
  fs.symlinkSync(path.join(INPUTS, 'gone'), path.join(INPUTS, 'dangling'));
  assert.equal(await err({ files: [path.join(INPUTS, 'dangling')] }),
    `resolve mount path ${path.join(INPUTS, 'dangling')}: No such file or directory`);
  assert.equal(await err({ directories: [''] }), 'mount path is empty');
  fs.mkdirSync(path.join(INPUTS, 'other'));
  fs.writeFileSync(path.join(INPUTS, 'other/data.csv'), 'x\n');
  assert.equal(await err({ files: [path.join(INPUTS, 'data.csv'), path.join(INPUTS, 'other/data.csv')] }),
    `mount basename "data.csv" would collide: ${path.join(INPUTS, 'data.csv')} and ${path.join(INPUTS, 'other/data.csv')}`);
  assert.equal(await err({ files: [path.join(INPUTS, 'tree')] }), `${path.join(INPUTS, 'tree')} is not a regular file`);
  assert.equal(await err({ directories: [path.join(INPUTS, 'data.csv')] }), `${path.join(INPUTS, 'data.csv')} is not a directory`);
  // nothing of a refused call stays
  assert.deepEqual((await sandboxes()).others, []);
});

h.test('stderr is the last 16 KiB, stdout is bounded (head and tail), the logs are complete', async () => {
  const sc = (await script({
    command: "python3 -c \"import sys; sys.stderr.write('e' * 20000 + 'END')\"; seq 1 5000",
  })).structuredContent;
  assert.equal(sc.exit_code, 0);
  assert.equal(sc.stderr.length, 16384);
  assert.ok(sc.stderr.endsWith('eeeEND'));
  assert.equal(fs.statSync(path.join(sc.output_dir, 'stderr.log')).size, 20003);
  const full = Array.from({ length: 5000 }, (_, i) => `${i + 1}\n`).join('');
  assert.equal(fs.readFileSync(path.join(sc.output_dir, 'stdout.log'), 'utf8'), full);
  assert.ok(sc.stdout.length <= 4096, `stdout ${sc.stdout.length} bytes, script_stdout_max 4096`);
  assert.ok(sc.stdout.startsWith('1\n2\n3\n'));
  assert.ok(sc.stdout.endsWith('4999\n5000\n'));
  assert.match(sc.stdout, /\n\[\.\.\. \d+ bytes cut \.\.\.\]\n/);
});

h.test("/out is the caller's: owner and mode 0700, files the command wrote included", async () => {
  const user = await h.connect({ uid: USER, argv: ['--set', 'script', '--socket', h.socket] });
  const sc = await user.sc('sandbox_script', { command: 'echo hi > made.txt; mkdir d; echo x > d/y', image: 'python', egress: 'none' });
  assert.equal(sc.exit_code, 0, sc.stderr);
  for (const p of ['', 'made.txt', 'd', 'd/y', 'stdout.log', 'stderr.log']) {
    const st = fs.lstatSync(path.join(sc.output_dir, p));
    assert.equal(st.uid, USER, `${p || 'out'} owner`);
    assert.equal(st.gid, USER, `${p || 'out'} group`);
  }
  assert.equal(fs.statSync(sc.output_dir).mode & 0o777, 0o700);
  assert.equal(fs.statSync(path.dirname(sc.output_dir)).mode & 0o777, 0o700);
  // the owner reaches it through the state directory (0711); nothing else of that is reachable
  const asUser = (cmd) => spawnSync('/bin/sh', ['-c', cmd], { uid: USER, gid: USER, encoding: 'utf8' });
  assert.equal(fs.statSync(h.stateDir).mode & 0o777, 0o711);
  assert.equal(asUser(`cat ${sc.output_dir}/made.txt && ls ${sc.output_dir}`).stdout, 'hi\nd\nmade.txt\nstderr.log\nstdout.log\n');
  for (const p of ['', 'jobs', 'sandboxes', 'transcripts', 'staging', 'images', 'image-default']) {
    assert.notEqual(asUser(`ls ${path.join(h.stateDir, p)}`).status, 0, `${p || 'the state directory'} is listable`);
  }
  for (const p of ['sbx.db', 'image-default.stamp']) {
    assert.notEqual(asUser(`cat ${path.join(h.stateDir, p)}`).status, 0, `${p} is readable`);
  }
  assert.equal(fs.readdirSync(h.stateDir).filter((n) => n !== 'jobs' &&
    (fs.lstatSync(path.join(h.stateDir, n)).mode & 0o077)).length, 0, 'an entry with group or other bits');
  // another user (and root's own jobs) stay out of reach: not found
  const t = await user.call('sandbox_status', { job_id: first.job_id });
  assert.equal(t.isError, true);
  assert.match(t.content[0].text, new RegExp(`^job "${first.job_id}" not found`));
  const mine = await user.sc('sandbox_status', { job_id: sc.job_id });
  assert.equal(mine.status, 'exited');
  // a path the caller cannot open never reaches sbxd
  fs.writeFileSync(path.join(INPUTS, 'private'), 'root only\n', { mode: 0o600 });
  const r = await user.call('sandbox_script', { command: 'true', image: 'python', files: [path.join(INPUTS, 'private')] });
  assert.equal(r.isError, true);
  assert.equal(r.content[0].text, `open mount path ${path.join(INPUTS, 'private')}: Permission denied`);
  await user.close();
});

h.test('background: running at once, status, a wait that runs out, cancel of a process tree, the logging notification', async () => {
  const notes = [];
  h.mcp.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => notes.push(n.params));
  const tag = T(311);
  const r = await script({ command: `sleep ${tag} & (sleep ${tag} &) ; sleep ${tag}; wait`, background: true });
  assert.deepEqual(Object.keys(r.structuredContent).sort(), ['job_id', 'status']);
  assert.equal(r.structuredContent.status, 'running');
  const id = r.structuredContent.job_id;
  await waitFor(() => sleeps(tag).length === 3, { timeout: 30000, what: 'three sleeps' });
  const s = await h.mcp.sc('sandbox_status', { job_id: id });
  assert.equal(s.status, 'running');
  assert.equal(s.exit_code, null);
  assert.equal(s.stdout, undefined);
  const w = await h.mcp.sc('sandbox_wait', { job_id: id, timeout_seconds: 1 });
  assert.equal(w.status, 'running');
  const c = await h.mcp.sc('sandbox_cancel', { job_id: id });
  assert.equal(c.status, 'cancelled');
  assert.deepEqual(sleeps(tag), [], 'the whole tree is gone when cancel answers');
  // a job that ends by itself: one notification, with its status and exit code
  const e = (await script({ command: 'exit 3', background: true })).structuredContent;
  const done = await h.mcp.sc('sandbox_wait', { job_id: e.job_id, timeout_seconds: 60 });
  assert.equal(done.status, 'exited');
  assert.equal(done.exit_code, 3);
  await waitFor(() => notes.some((n) => n.data?.job_id === e.job_id), { timeout: 10000, what: 'the notification' });
  await sleep(300);
  const mine = notes.filter((n) => n.data?.job_id === e.job_id);
  assert.deepEqual(mine, [{ level: 'info', logger: 'sandbox_script', data: { job_id: e.job_id, status: 'exited', exit_code: 3 } }]);
  assert.equal(notes.filter((n) => n.data?.job_id === id).length, 1, 'the cancelled one was announced once too');
});

h.test('a synchronous call cancelled with notifications/cancelled kills its process tree', async () => {
  const tag = T(312);
  const ac = new AbortController();
  const p = script({ command: `sleep ${tag} & sleep ${tag}` }, { signal: ac.signal }).catch((e) => e);
  await waitFor(() => sleeps(tag).length === 2, { timeout: 30000, what: 'two sleeps' });
  ac.abort();
  await p;
  await waitFor(() => sleeps(tag).length === 0, { timeout: 10000, what: 'the sleeps to be killed' });
  const l = JSON.parse((await sbxctl(h.socket, ['job', 'list', '--json'])).stdout);
  assert.equal(l.find((j) => j.command.includes(tag)).status, 'cancelled');
});

// python's urllib, configured by the proxy variables alone: one line per URL, "ok BODY" or "fail WHY".
const fetchAll = (...urls) => 'for u in ' + urls.join(' ') + '; do python3 -c "import sys, urllib.request as u\n' +
  'try: print(\'ok\', u.urlopen(sys.argv[1], timeout=10).read().decode().strip())\n' +
  'except Exception as e: print(\'fail\', e)" "$u"; done';

h.test('egress none: neither host is reached, no proxy variables, no audit', async () => {
  const before = registry.seen.length + other.seen.length;
  const r = await script({ command: `env | grep -ci proxy; ${fetchAll(`http://${REG}/n1`, `http://${OTHER}/n2`)}` });
  const sc = r.structuredContent;
  assert.equal(sc.exit_code, 0, sc.stderr);
  assert.match(sc.stdout, /^0\nfail .*\nfail .*\n$/, sc.stdout);
  assert.equal(registry.seen.length + other.seen.length, before);
  assert.equal(sc.egress, undefined);
});

let egressJob;
h.test('egress package-managers: the registry only; the audit in the result, not in the text payload', async () => {
  const r = await script({ command: fetchAll(`http://${REG}/p1`, `http://${OTHER}/p2`), egress: 'package-managers' });
  const sc = r.structuredContent;
  assert.equal(sc.exit_code, 0, sc.stderr);
  assert.match(sc.stdout, /^ok registry-ok \/p1\nfail .*403.*\n$/, sc.stdout);
  assert.ok(registry.seen.includes('/p1'));
  assert.ok(!other.seen.includes('/p2'), 'the other host was reached');
  assert.deepEqual(sc.egress, { policy: 'package-managers', contacted: [REG], refused: [OTHER] });
  assert.equal(r.content[0].text,
    `exit_code: 0\noutput_dir: ${sc.output_dir}\njob_id: ${sc.job_id}\n---\n${sc.stdout}---stderr---\n${sc.stderr}\n`);
  const show = await sbxctl(h.socket, ['job', 'show', sc.job_id]);
  assert.match(show.stdout, new RegExp(`^egress: package-managers\n  contacted: ${REG}\n  refused: ${OTHER}\ncommand: `, 'm'));
  const json = JSON.parse((await sbxctl(h.socket, ['--json', 'job', 'show', sc.job_id])).stdout);
  assert.deepEqual(json.egress_audit, { policy: 'package-managers', contacted: [REG], refused: [OTHER], truncated: false });
});

h.test('egress open: both hosts, the audit lists exactly what was contacted', async () => {
  const sc = (await script({ command: fetchAll(`http://${REG}/o1`, `http://${OTHER}/o2`, `http://${OTHER}/o3`),
    egress: 'open' })).structuredContent;
  assert.match(sc.stdout, /^ok registry-ok \/o1\nok other-ok \/o2\nok other-ok \/o3\n$/, sc.stdout);
  assert.deepEqual(sc.egress, { policy: 'open', contacted: [REG, OTHER], refused: [] });
});

h.test('egress of a background job: sandbox_status and sandbox_wait show its audit', async () => {
  const bg = await h.mcp.sc('sandbox_script', { command: `${fetchAll(`http://${OTHER}/b1`, `http://${REG}/b2`)}; sleep 1`,
    image: 'python', egress: 'package-managers', background: true });
  assert.equal(bg.egress, undefined);
  const w = await h.mcp.sc('sandbox_wait', { job_id: bg.job_id, timeout_seconds: 60 });
  assert.equal(w.status, 'exited');
  const audit = { policy: 'package-managers', contacted: [REG], refused: [OTHER] };
  assert.deepEqual(w.egress, audit);
  assert.deepEqual((await h.mcp.sc('sandbox_status', { job_id: bg.job_id })).egress, audit);
  egressJob = { id: bg.job_id, audit };
});

let lost;
h.test('jobs survive a broker disconnect; sbxctl job list|show|rm', async () => {
  const other = await h.connect({ argv: ['--set', 'script', '--socket', h.socket] });
  const bg = await other.sc('sandbox_script', { command: 'sleep 2; echo survived', image: 'python', egress: 'none', background: true });
  await other.close();
  const w = await h.mcp.sc('sandbox_wait', { job_id: bg.job_id, timeout_seconds: 60 });
  assert.equal(w.status, 'exited');
  assert.equal(w.stdout, 'survived\n');
  const show = await sbxctl(h.socket, ['job', 'show', bg.job_id]);
  assert.equal(show.code, 0, show.stderr);
  assert.match(show.stdout, /status: exited\nexit code: 0\n/);
  const rm = await sbxctl(h.socket, ['job', 'rm', bg.job_id]);
  assert.equal(rm.code, 0, rm.stderr);
  assert.equal(fs.existsSync(path.dirname(w.output_dir)), false);
  const again = await h.mcp.call('sandbox_status', { job_id: bg.job_id });
  assert.equal(again.isError, true);
  lost = (await script({ command: `sleep ${T(313)}`, background: true })).structuredContent;
  await waitFor(() => sleeps(T(313)).length === 1, { timeout: 30000, what: 'the sleep' });
});

h.test('after an sbxd restart: a job that ran reads supervisor_lost, its sandbox and processes are gone', async () => {
  await h.restartSbxd();
  const mcp = await h.connect({ argv: ['--set', 'script', '--socket', h.socket] });
  const s = await mcp.sc('sandbox_status', { job_id: lost.job_id });
  assert.equal(s.status, 'supervisor_lost');
  assert.equal(s.exit_code, null);
  const f = await mcp.sc('sandbox_status', { job_id: first.job_id });
  assert.equal(f.status, 'exited');
  assert.equal(f.stdout, first.stdout);
  assert.equal(f.egress, undefined);
  assert.deepEqual((await mcp.sc('sandbox_status', { job_id: egressJob.id })).egress, egressJob.audit,
    'the audit is kept with the job record');
  assert.deepEqual(sleeps(T(313)), []);
  const l = await sbxctl(h.socket, ['sandbox', 'list', '--json']);
  assert.deepEqual(JSON.parse(l.stdout), []);
  // the spares' job directories went with their sandboxes: only the jobs' own are left
  const jobs = await sbxctl(h.socket, ['job', 'list', '--json']);
  assert.equal(jobs.code, 0, jobs.stderr);
  const ids = JSON.parse(jobs.stdout).map((j) => j.job_id).sort();
  assert.deepEqual(fs.readdirSync(path.join(h.stateDir, 'jobs')).sort(), ids);
});

h.test('sbxd in a mount namespace of its own (ProtectSystem=): inputs reopened by their real path, same inode only', async () => {
  fs.writeFileSync(path.join(INPUTS, 'ns.txt'), 'from the host\n');
  h.sbxd.wrap = ['unshare', '--mount', '--propagation', 'slave'];
  try {
    await h.restartSbxd();
    const mcp = await h.connect({ argv: ['--set', 'script', '--socket', h.socket] });
    const args = { image: 'python', egress: 'none', files: [path.join(INPUTS, 'ns.txt')], directories: [path.join(INPUTS, 'tree')] };
    // open_tree cannot clone the broker's descriptors (a mount of the host's namespace): sbxd opens the same inodes here
    const sc = await mcp.sc('sandbox_script', { command: 'cat /in/ns.txt /in/tree/sub/x.txt', ...args });
    assert.equal(sc.exit_code, 0, sc.stderr);
    assert.equal(sc.stdout, 'from the host\ndeep\n');
    // in sbxd's namespace alone the path now names another file: refused, not mounted
    const bind = spawnSync('nsenter', ['-t', String(h.sbxd.pid), '-m', 'mount', '--bind', path.join(OUTSIDE, 'secret'),
      path.join(INPUTS, 'ns.txt')]);
    assert.equal(bind.status, 0, String(bind.stderr));
    const r = await mcp.call('sandbox_script', { command: 'cat /in/ns.txt', ...args });
    assert.equal(r.isError, true, JSON.stringify(r.structuredContent));
    assert.match(r.content[0].text, /mount path .*ns\.txt: cannot mount it: Stale file handle/);
    assert.equal(fs.readFileSync(path.join(INPUTS, 'ns.txt'), 'utf8'), 'from the host\n', 'the host sees no bind mount');
    await mcp.close();
  } finally {
    h.sbxd.wrap = [];
    await h.restartSbxd();
  }
});

h.test("the owner deleting a job's sandbox ends the job; sbxd stays up", async () => {
  const tag = T(314);
  const bg = (await h.mcp.sc('sandbox_script', { command: `sleep ${tag}`, image: 'python', egress: 'none', background: true }));
  await waitFor(() => sleeps(tag).length === 1, { timeout: 30000, what: 'the sleep' });
  const name = jobSandbox(bg.job_id);
  const d = await sbxctl(h.socket, ['sandbox', 'delete', name]);
  assert.equal(d.code, 0, d.stderr);
  const w = await h.mcp.sc('sandbox_wait', { job_id: bg.job_id, timeout_seconds: 30 });
  assert.equal(w.status, 'exited');
  assert.equal(w.exit_code, 137);
  assert.deepEqual(sleeps(tag), []);
  assert.equal((await h.mcp.sc('sandbox_status', { job_id: bg.job_id })).status, 'exited');
});
