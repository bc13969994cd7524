// sbxd.conf: the transcript cap (what is dropped is said, not silent) and the
// session disk limit; a bad configuration, or a worker binary others could
// replace, stops sbxd at start-up.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, outputLines, readAll, Sbxd, tail, BIN } from './helpers.mjs';

const CAP = 64 * 1024;
const h = useSbx({
  sandboxes: [{ name: 'conf' }],
  config: `# test configuration\n[sbxd]\ntranscript_cap_bytes = ${CAP}\nsession_disk_bytes = 4M\n`,
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
