// sbxd.conf: the transcript cap (what is dropped is said, not silent), the
// session disk limit, the share of the host all sandboxes keep to; a bad
// configuration, or a worker binary others could replace, stops sbxd at
// start-up.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { useSbx, outputLines, readAll, Sbxd, tail, BIN, T, hostProcsMatching, sleep, sbxctl, waitFor } from './helpers.mjs';

const CAP = 64 * 1024;
const h = useSbx({
  sandboxes: [{ name: 'conf' }],
  config: `# test configuration\n[sbxd]\ntranscript_cap_bytes = ${CAP}\nsession_disk_bytes = 4M\n` +
    'sandboxes_pids_max = 48\nsandboxes_memory_max = 75%\nsandboxes_cpu_weight = 50\n',
});
const SB = 'conf';
const exec = (cmd, extra = {}) => h.mcp.sc('exec_command', { sandbox_id: SB, cmd, ...extra });

h.test('transcript_cap_bytes bounds what is kept, and the transcript says what was dropped', async () => {
  const sc = await exec('seq 1 100000', { yield_time_ms: 30000 });
  assert.equal(sc.status, 'ok');
  assert.equal(sc.exit_code, 0);
  const { output, last } = await readAll(h.mcp, SB, sc.command_session_id);
  process.stdout.write(`# 588,895 bytes of output with a ${CAP}-byte cap: ${output.length} bytes, ${last.total_lines} lines kept\n`);
  assert.ok(output.length <= CAP + 4096, `kept ${output.length} bytes with a cap of ${CAP}`);
  assert.ok(/cap|drop|truncat|omit|discard|limit/i.test(output), 'the transcript does not say that output was dropped');
  assert.ok(sc.original_token_count >= Math.ceil(588895 / 4), `original_token_count ${sc.original_token_count} counts the untruncated output`);
  // offsets stay consistent
  const lines = outputLines({ output });
  assert.equal(lines.length, last.total_lines);
});

h.test('session_disk_bytes bounds what a session may write', async () => {
  const sc = await exec('head -c 8M /dev/zero > big.bin; echo rc=$?; rm -f big.bin', { timeout_ms: 30000 });
  assert.match(sc.output, /No space left on device|rc=1/, sc.output);
  const ok = await exec('head -c 1M /dev/zero > small.bin && echo written');
  assert.equal(ok.output, 'written\n');
});

/* The cgroup of all sandboxes: <root>/<ctrl><sbxd's own>/sbxd-PID on v1,
 * <own>/sandboxes on v2 (docs/cgroups.md). */
function allSandboxesCgroup(ctrl) {
  const lines = fs.readFileSync(`/proc/${h.sbxd.pid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.find((l) => l.split(':')[1]?.split(',').includes(ctrl));
  if (v1) return path.join('/sys/fs/cgroup', ctrl, v1.split(':')[2], `sbxd-${h.sbxd.pid}`);
  return path.join('/sys/fs/cgroup', path.dirname(lines.find((l) => l.startsWith('0::')).slice(3)), 'sandboxes');
}
const cgRead = (ctrl, file) => fs.readFileSync(path.join(allSandboxesCgroup(ctrl), file), 'utf8').trim();

h.test('sandboxes_* keep all sandboxes to their share of the host', async () => {
  const ram = Number(/^MemTotal:\s+(\d+)/m.exec(fs.readFileSync('/proc/meminfo', 'utf8'))[1]) * 1024;
  const memFile = fs.existsSync(path.join(allSandboxesCgroup('memory'), 'memory.max')) ? 'memory.max' : 'memory.limit_in_bytes';
  // 75% of the RAM, which the kernel rounds down to a page.
  const want = Math.floor(ram / 100) * 75 + Math.floor((ram % 100) * 75 / 100);
  const got = Number(cgRead('memory', memFile));
  assert.ok(got <= want && want - got < 4096, `${memFile} ${got}, want ${want}`);
  assert.equal(cgRead('pids', 'pids.max'), '48');
  const cpu = fs.existsSync(path.join(allSandboxesCgroup('cpu'), 'cpu.weight')) ? cgRead('cpu', 'cpu.weight') : cgRead('cpu', 'cpu.shares');
  assert.ok(cpu === '50' || cpu === '512', `cpu weight ${cpu}`);
  // A sandbox of 512 pids (the default) gets only what is left of the 48 of all sandboxes.
  const mark = T(301);
  let peak = 0, stop = false;
  const sampler = (async () => {
    while (!stop) {
      peak = Math.max(peak, hostProcsMatching(`cfgpids-${mark}`).length);
      await sleep(50);
    }
  })();
  // perl: a refused fork is not fatal to it, as it is to sh.
  const sc = await exec(`perl -e '$0 = "cfgpids-${mark}"; for (1 .. 100) { my $p = fork; ` +
    `if (defined $p && !$p) { sleep 3; exit } } sleep 2; exit 1'`, { timeout_ms: 20000, yield_time_ms: 20000 });
  stop = true;
  await sampler;
  process.stdout.write(`# sandboxes_pids_max = 48: a command asking for 100 processes got ${peak}; end_reason ${sc.end_reason}\n`);
  assert.ok(peak > 0 && peak <= 48, `${peak} processes ran`);
  assert.equal(sc.end_reason, 'pids_limit');
});

h.test('a sandbox\'s cgroup is made for its first session and goes when the sandbox is deleted', async () => {
  const src = path.join(h.dir, 'src-gone');
  fs.mkdirSync(src, { recursive: true });
  fs.writeFileSync(path.join(src, 'f'), 'x\n');
  assert.equal((await sbxctl(h.socket, ['sandbox', 'create', 'gone', '--source', src, '--pids', '40', '--cpu-weight', '300'])).code, 0);
  const id = JSON.parse((await sbxctl(h.socket, ['--json', 'sandbox', 'show', 'gone'])).stdout).id;
  const dir = (ctrl) => path.join(allSandboxesCgroup(ctrl), id);
  assert.ok(!fs.existsSync(dir('pids')), 'a cgroup for a sandbox without sessions');
  assert.equal((await h.mcp.sc('exec_command', { sandbox_id: 'gone', cmd: 'echo hi' })).output, 'hi\n');
  // one lower for a moment while a (spare) session's first process is moved in (os/cgroup.c)
  const pidsMax = () => fs.readFileSync(path.join(dir('pids'), 'pids.max'), 'utf8').trim();
  await waitFor(() => pidsMax() === '40', { timeout: 10000, what: `pids.max 40 (it reads ${pidsMax()})` });
  const cpu = fs.existsSync(path.join(dir('cpu'), 'cpu.weight')) ? 'cpu.weight' : 'cpu.shares';
  assert.match(fs.readFileSync(path.join(dir('cpu'), cpu), 'utf8').trim(), /^(300|3072)$/);
  assert.equal((await sbxctl(h.socket, ['sandbox', 'delete', 'gone'])).code, 0);
  for (const c of ['memory', 'pids', 'cpu']) assert.ok(!fs.existsSync(dir(c)), `${dir(c)} is left`);
});

h.test('sandboxes_* values out of range are refused with the key, the value and what is allowed', async () => {
  const conf = path.join(h.dir, 'shares.conf');
  const check = (body) => {
    fs.writeFileSync(conf, `[sbxd]\n${body}\n`);
    try {
      execFileSync(path.join(BIN, 'sbxd'), ['--config', conf, '--check-config'], { encoding: 'utf8', stdio: 'pipe' });
      return null;
    } catch (e) {
      return `${e.stdout}${e.stderr}`;
    }
  };
  for (const ok of ['sandboxes_memory_max = max', 'sandboxes_memory_max = 2G', 'sandboxes_memory_max = 100%',
    'sandboxes_pids_max = 1%', 'sandboxes_pids_max = 4096', 'sandboxes_cpu_weight = 10000'])
    assert.equal(check(ok), null, ok);
  for (const [bad, want] of [
    ['sandboxes_memory_max = 0%', /sandboxes_memory_max: '0%' is not max, 1% to 100% or a number of at least 16777216/],
    ['sandboxes_memory_max = 101%', /sandboxes_memory_max: '101%'/],
    ['sandboxes_memory_max = 1M', /sandboxes_memory_max: '1M' is not max/],
    ['sandboxes_pids_max = 7', /sandboxes_pids_max: '7' is not max, 1% to 100% or a number of at least 8/],
    ['sandboxes_pids_max = lots', /sandboxes_pids_max: 'lots'/],
    ['sandboxes_cpu_weight = 0', /sandboxes_cpu_weight: 0 is out of range \(1 to 10000\)/],
    ['sandboxes_cpu_weight = 10001', /sandboxes_cpu_weight: 10001 is out of range/],
  ])
    assert.match(check(bad) ?? 'accepted', want, bad);
});

h.test('a configuration error stops sbxd at start-up with a message', async () => {
  const dir = path.join(h.dir, 'badconf');
  fs.mkdirSync(path.join(dir, 'run'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'state'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'sbxd.conf'), '[sbxd]\nno_such_key = 1\n');
  const log = path.join(h.logDir, 'sbxd-badconf.log');
  const d = new Sbxd({ stateDir: path.join(dir, 'state'), runDir: path.join(dir, 'run'), logPath: log,
    extraArgs: ['--config', path.join(dir, 'sbxd.conf')] });
  await assert.rejects(d.start({ timeout: 5000 }), /exited during start-up/);
  assert.notEqual(d.exit.code, 0);
  assert.match(tail(log), /no_such_key/);
  assert.ok(!fs.existsSync(path.join(dir, 'run', 'sbxd.sock')));
});

/* sbx-worker runs as root while it sets a session up: sbxd refuses one that
 * someone other than root could replace. */
h.test('a worker binary others could replace stops sbxd at start-up', async () => {
  const worker = path.join(BIN, 'sbx-worker');
  for (const [what, dirMode, fileMode, want] of [
    ['a world-writable directory', 0o777, 0o755, /Refusing the worker binary .*its directory .* writable by others/],
    ['a group-writable file', 0o755, 0o775, /Refusing the worker binary .*not a regular file owned by root/],
  ]) {
    const dir = path.join(h.dir, `badworker-${dirMode.toString(8)}-${fileMode.toString(8)}`);
    for (const sub of ['run', 'state', 'bin']) fs.mkdirSync(path.join(dir, sub), { recursive: true });
    fs.copyFileSync(worker, path.join(dir, 'bin', 'sbx-worker'));
    fs.chmodSync(path.join(dir, 'bin', 'sbx-worker'), fileMode);
    fs.chmodSync(path.join(dir, 'bin'), dirMode);
    fs.writeFileSync(path.join(dir, 'sbxd.conf'), `[sbxd]\nworker_path = ${path.join(dir, 'bin', 'sbx-worker')}\n`);
    const log = path.join(h.logDir, `sbxd-badworker-${dirMode.toString(8)}.log`);
    const d = new Sbxd({ stateDir: path.join(dir, 'state'), runDir: path.join(dir, 'run'), logPath: log,
      extraArgs: ['--config', path.join(dir, 'sbxd.conf')] });
    await assert.rejects(d.start({ timeout: 5000 }), /exited during start-up/, what);
    assert.notEqual(d.exit.code, 0, what);
    assert.match(tail(log), want, what);
  }
});
