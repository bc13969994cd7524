// exec_command, write_command_stdin, read_command_lines: status and exit
// codes, yields, timeouts, stdin, concurrency, cancellation, rendering.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import {
  useSbx, checkShape, outputLines, waitDone, waitFor, hostProcsMatching, readAll, sbxctl, sleep, T,
} from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'exec' }] });
const SB = 'exec';
const exec = (cmd, extra = {}, opts) => h.mcp.sc('exec_command', { sandbox_id: SB, cmd, ...extra }, opts);
const stdin = (command_session_id, text, extra = {}) =>
  h.mcp.sc('write_command_stdin', { sandbox_id: SB, command_session_id, stdin: text, ...extra });
const readLines = (command_session_id, extra = {}) =>
  h.mcp.sc('read_command_lines', { sandbox_id: SB, command_session_id, ...extra });

h.test('exit 0 -> ok, with output, offsets and the automatic session', async () => {
  const sc = checkShape(await exec('echo hello; echo world'));
  assert.equal(sc.status, 'ok');
  assert.equal(sc.exit_code, 0);
  assert.equal(sc.signal ?? null, null);
  assert.equal(sc.end_reason, 'exit');
  assert.equal(sc.output, 'hello\nworld\n');
  assert.equal(sc.start_offset, 0);
  assert.equal(sc.end_offset, 2);
  assert.equal(sc.total_lines, 2);
  assert.equal(typeof sc.workspace_session_id, 'string');
  assert.ok(sc.workspace_session_id.length > 0);
});

h.test('non-zero exit -> error with the exit code; signals are reported', async () => {
  let sc = checkShape(await exec('echo about to fail; exit 3'));
  assert.equal(sc.status, 'error');
  assert.equal(sc.exit_code, 3);
  assert.equal(sc.end_reason, 'exit');
  assert.equal(sc.output, 'about to fail\n');
  sc = checkShape(await exec('false'));
  assert.equal(sc.status, 'error');
  assert.equal(sc.exit_code, 1);
  sc = checkShape(await exec('kill -TERM $$'));
  assert.equal(sc.status, 'error');
  assert.equal(sc.exit_code, null);
  assert.equal(sc.signal, 15);
  assert.equal(sc.end_reason, 'signal');
  sc = checkShape(await exec('no-such-command-here'));
  assert.equal(sc.status, 'error');
  assert.equal(sc.exit_code, 127);
  assert.match(sc.output, /not found/);
});

h.test('commands run with /bin/sh in /workspace and see the repository', async () => {
  const sc = await exec('pwd; ls; cat data/numbers.txt; ./hello.sh');
  assert.equal(sc.status, 'ok', sc.output);
  const lines = outputLines(sc);
  assert.equal(lines[0], '/workspace');
  for (const f of ['README.md', 'hello.sh', 'src', 'data']) assert.ok(lines.includes(f), `ls lacks ${f}: ${sc.output}`);
  assert.ok(sc.output.includes('1\n2\n3\n'));
  assert.ok(sc.output.includes('hello from the fixture'));
});

h.test('the yield returns as soon as the command ends', async () => {
  const t0 = Date.now();
  const sc = await exec('true', { yield_time_ms: 10000 });
  const ms = Date.now() - t0;
  process.stdout.write(`# exec_command true with a 10 s yield answered in ${ms} ms\n`);
  assert.equal(sc.status, 'ok');
  assert.ok(ms < 3000, `took ${ms} ms`);
  // default yield (10 s) too
  const t1 = Date.now();
  await exec('true');
  assert.ok(Date.now() - t1 < 3000);
  // a yield above the 30 s maximum is clamped, not refused
  const sc2 = await exec('echo clamp', { yield_time_ms: 600000 });
  assert.equal(sc2.status, 'ok');
});

h.test('a running command: small yield, then read_command_lines until done', async () => {
  const t0 = Date.now();
  const sc = checkShape(await exec('for i in 1 2 3 4 5; do echo line$i; sleep 0.4; done', { yield_time_ms: 300 }));
  assert.ok(Date.now() - t0 < 2000, 'the yield of 300 ms was honoured');
  assert.equal(sc.status, 'running');
  assert.equal(sc.exit_code, null);
  assert.equal(sc.end_reason ?? null, null);
  const mid = checkShape(await readLines(sc.command_session_id));
  assert.ok(['running', 'ok'].includes(mid.status));
  const done = checkShape(await waitDone(h.mcp, SB, sc.command_session_id));
  assert.equal(done.status, 'ok');
  assert.equal(done.exit_code, 0);
  assert.equal(done.total_lines, 5);
  assert.deepEqual(outputLines(done), ['line1', 'line2', 'line3', 'line4', 'line5']);
  assert.ok(done.command_total_time_seconds >= 1.5, `command_total_time_seconds ${done.command_total_time_seconds}`);
  assert.equal(done.command_session_id, sc.command_session_id);
  assert.equal(done.workspace_session_id, sc.workspace_session_id);
});

h.test('timeout_ms kills the whole process group -> timed_out, output before the kill kept', async () => {
  const t0 = Date.now();
  const sc = checkShape(await exec(`echo before; sleep ${T(101)} & sleep ${T(102)}; echo never`, { timeout_ms: 1500, yield_time_ms: 20000 }));
  const ms = Date.now() - t0;
  process.stdout.write(`# timeout 1500 ms answered after ${ms} ms\n`);
  assert.equal(sc.status, 'timed_out');
  assert.equal(sc.end_reason, 'timeout');
  assert.equal(sc.exit_code, null);
  assert.ok(ms >= 1400 && ms < 10000, `answered after ${ms} ms`);
  assert.ok(sc.output.includes('before'));
  assert.ok(!sc.output.includes('never'));
  await waitFor(() => hostProcsMatching(`sleep ${T(101)}`).length + hostProcsMatching(`sleep ${T(102)}`).length === 0,
    { timeout: 5000, what: 'the background and foreground sleeps to be gone' });
  const again = await readLines(sc.command_session_id);
  assert.equal(again.status, 'timed_out');
  assert.ok(again.output.includes('before'));
});

h.test('timeout_ms applies after the yield has returned', async () => {
  const sc = await exec(`echo start; sleep ${T(103)}`, { timeout_ms: 1000, yield_time_ms: 100 });
  assert.equal(sc.status, 'running');
  const done = await waitDone(h.mcp, SB, sc.command_session_id, { timeout: 10000 });
  assert.equal(done.status, 'timed_out');
  assert.equal(done.end_reason, 'timeout');
  assert.ok(done.output.includes('start'));
  await waitFor(() => hostProcsMatching(`sleep ${T(103)}`).length === 0, { timeout: 5000, what: 'sleep gone' });
});

h.test('stdin: cat echoes what is written, exactly; U+0004 at the end closes stdin', async () => {
  const sc = await exec('cat', { yield_time_ms: 200 });
  assert.equal(sc.status, 'running');
  assert.equal(sc.output, '');
  const id = sc.command_session_id;
  let r = checkShape(await stdin(id, 'one\n', { yield_time_ms: 1000 }));
  assert.equal(r.status, 'running');
  assert.equal(r.output, 'one\n');
  r = checkShape(await stdin(id, 'two  spaces\tand tab\n', { yield_time_ms: 1000 }));
  assert.equal(r.output, 'two  spaces\tand tab\n', 'a yield returns only lines not given yet');
  assert.equal(r.start_offset, 1);
  r = checkShape(await stdin(id, 'héllo ✓ last\u0004', { yield_time_ms: 3000 }));
  assert.equal(r.status, 'ok', `cat should end on EOF: ${JSON.stringify(r)}`);
  assert.equal(r.exit_code, 0);
  const all = await readLines(id);
  // the last line had no newline; a line-oriented transcript may end it with one
  assert.equal(all.output.replace(/\n$/, ''), 'one\ntwo  spaces\tand tab\nhéllo ✓ last');
  assert.equal(all.total_lines, 3);
});

h.test('stdin: read gets a line; wc -c counts exactly the bytes written', async () => {
  let sc = await exec('read line; echo "got:[$line]"', { yield_time_ms: 200 });
  assert.equal(sc.status, 'running');
  let r = await stdin(sc.command_session_id, 'abc def\n', { yield_time_ms: 3000 });
  assert.equal(r.status, 'ok');
  assert.equal(r.output, 'got:[abc def]\n');

  sc = await exec('wc -c', { yield_time_ms: 200 });
  r = await stdin(sc.command_session_id, '12345', { yield_time_ms: 200 });
  assert.equal(r.status, 'running', 'stdin stays open without U+0004');
  r = await stdin(sc.command_session_id, 'é\u0004', { yield_time_ms: 3000 });
  assert.equal(r.status, 'ok');
  assert.equal(r.output.trim(), '7', 'five ASCII bytes + two UTF-8 bytes, no added newline, no U+0004');

  // only U+0004: close without writing anything
  sc = await exec('wc -l', { yield_time_ms: 200 });
  r = await stdin(sc.command_session_id, '\u0004', { yield_time_ms: 3000 });
  assert.equal(r.status, 'ok');
  assert.equal(r.output.trim(), '0');
});

h.test('stdin to a finished command and to an unknown command are isError results', async () => {
  const sc = await exec('true');
  const t1 = await h.mcp.err('write_command_stdin', { sandbox_id: SB, command_session_id: sc.command_session_id, stdin: 'x' });
  assert.ok(t1.length > 0);
  const t2 = await h.mcp.err('write_command_stdin', { sandbox_id: SB, command_session_id: 'no-such-command', stdin: 'x' });
  assert.ok(t2.length > 0);
});

h.test('concurrency: three 1 s commands in parallel', async () => {
  const t0 = Date.now();
  const rs = await Promise.all([1, 2, 3].map((i) => exec(`sleep 1; echo done${i}`)));
  const s = (Date.now() - t0) / 1000;
  process.stdout.write(`# three parallel "sleep 1" calls took ${s.toFixed(2)} s\n`);
  rs.forEach((r, i) => {
    assert.equal(r.status, 'ok');
    assert.equal(r.output, `done${i + 1}\n`);
  });
  assert.equal(new Set(rs.map((r) => r.command_session_id)).size, 3);
  assert.equal(new Set(rs.map((r) => r.workspace_session_id)).size, 3);
  assert.ok(s < 2.9, `took ${s} s: calls were serialized`);
});

h.test('a long yield does not block other calls on the same connection', async () => {
  const slow = exec('sleep 2; echo slow', { yield_time_ms: 10000 });
  await sleep(200);
  const t0 = Date.now();
  const fast = await exec('echo fast');
  const ms = Date.now() - t0;
  assert.equal(fast.output, 'fast\n');
  assert.ok(ms < 1500, `fast call waited ${ms} ms behind the slow one`);
  assert.equal((await slow).output, 'slow\n');
});

/* Command ids in the order sbxd logged their start ("Command <id> started"). */
function startedIds() {
  const log = fs.readFileSync(h.sbxdLog, 'utf8');
  return [...log.matchAll(/Command (\S+) started/g)].map((m) => m[1]);
}

h.test('cancellation (AbortSignal -> notifications/cancelled) kills a waiting exec_command', async () => {
  const before = await exec('true');
  const ac = new AbortController();
  const p = exec(`echo started; sleep ${T(104)}; echo not-reached`, { yield_time_ms: 30000 }, { signal: ac.signal });
  await waitFor(() => hostProcsMatching(`sleep ${T(104)}`).length > 0, { timeout: 10000, what: 'the command to start' });
  const t0 = Date.now();
  ac.abort('test cancels');
  await assert.rejects(p);
  await waitFor(() => hostProcsMatching(`sleep ${T(104)}`).length === 0, { timeout: 5000, what: 'the cancelled command to be killed' });
  process.stdout.write(`# cancelled command gone ${Date.now() - t0} ms after abort\n`);
  // the connection keeps working
  const afterSc = await exec('echo after-cancel');
  assert.equal(afterSc.output, 'after-cancel\n');
  // The cancelled call never returned its id: take it from sbxd's log, where
  // it is the command started between the two others.
  const ids = startedIds();
  const i = ids.indexOf(before.command_session_id);
  if (i >= 0 && ids[i + 2] === afterSc.command_session_id) {
    const c = await readLines(ids[i + 1]);
    assert.equal(c.status, 'cancelled', `read_command_lines(${ids[i + 1]}): ${JSON.stringify(c)}`);
    assert.equal(c.end_reason, 'cancelled');
    assert.ok(c.output.includes('started'));
  } else {
    process.stdout.write('# the cancelled command\'s id is not in the sbxd log: its status was not checked\n');
  }
  const st = await sbxctl(h.socket, ['status', '--json']);
  if (st.code === 0) {
    const j = JSON.parse(st.stdout);
    if ('running_commands' in j) assert.equal(j.running_commands, 0, st.stdout);
  }
});

h.test('rendering: CR overwrites, backspace, ANSI and OSC removed', async () => {
  let sc = await exec("printf 'abc\\rX\\n'");
  assert.equal(sc.output, 'Xbc\n');
  sc = await exec("printf '\\033[31mred\\033[0m \\033[1;32mgreen\\033[0m plain\\n'");
  assert.equal(sc.output, 'red green plain\n');
  sc = await exec("printf 'abc\\bd\\n'");
  assert.equal(sc.output, 'abd\n');
  sc = await exec("printf '10%%\\r50%%\\r100%%\\n'");
  assert.equal(sc.output, '100%\n');
  assert.equal(sc.total_lines, 1, 'a progress bar is one line');
  sc = await exec("printf '\\033]0;a title\\007text\\n'");
  assert.equal(sc.output, 'text\n');
  sc = await exec("printf 'one\\r\\ntwo\\r\\n'");
  assert.equal(sc.output, 'one\ntwo\n', 'CRLF is a plain line end');
});

h.test('stdout and stderr are merged in arrival order', async () => {
  const sc = await exec('echo out1; echo err1 >&2; echo out2; echo err2 >&2');
  assert.equal(sc.output, 'out1\nerr1\nout2\nerr2\n');
});

h.test('original_token_count is ceil(bytes/4)', async () => {
  let sc = await exec("printf 'abcdefghi\\n'");
  assert.equal(sc.original_token_count, 3);
  sc = await exec("printf 'abcdefg\\n'");
  assert.equal(sc.original_token_count, 2);
  sc = await exec('true');
  assert.equal(sc.original_token_count, 0);
});

h.test('a 100,000-line transcript pages in 1000-line windows with stable offsets', async () => {
  const t0 = Date.now();
  const sc = checkShape(await exec('seq 1 100000', { yield_time_ms: 30000 }));
  assert.equal(sc.status, 'ok');
  assert.equal(sc.total_lines, 100000);
  assert.equal(sc.end_offset, 100000);
  assert.ok(sc.start_offset >= 100000 - 1000, `yield window starts at ${sc.start_offset}`);
  const lines = outputLines(sc);
  lines.forEach((l, i) => assert.equal(l, String(sc.start_offset + i + 1)));
  const id = sc.command_session_id;
  for (let off = 0; off < 100000; off += 1000) {
    const page = await readLines(id, { start_offset: off, limit: 1000 });
    assert.equal(page.start_offset, off);
    assert.equal(page.end_offset, off + 1000);
    assert.equal(page.total_lines, 100000);
    assert.equal(page.status, 'ok');
    const pl = outputLines(page);
    assert.equal(pl.length, 1000, `page at ${off}`);
    for (let i = 0; i < 1000; i++) {
      if (pl[i] !== String(off + i + 1)) assert.fail(`line ${off + i} is "${pl[i]}", expected ${off + i + 1}`);
    }
  }
  // defaults: start 0, limit 200
  const d = await readLines(id);
  assert.equal(d.start_offset, 0);
  assert.equal(d.end_offset, 200);
  assert.equal(outputLines(d)[199], '200');
  // an odd window and the end
  const odd = await readLines(id, { start_offset: 99990, limit: 1000 });
  assert.equal(odd.end_offset, 100000);
  assert.deepEqual(outputLines(odd), Array.from({ length: 10 }, (_, i) => String(99991 + i)));
  const past = await readLines(id, { start_offset: 100000 });
  assert.equal(past.output, '');
  assert.equal(past.start_offset, past.end_offset);
  const zero = await readLines(id, { start_offset: 5, limit: 0 });
  assert.equal(zero.output, '');
  // limit 1001 is refused
  const text = await h.mcp.err('read_command_lines', { sandbox_id: SB, command_session_id: id, limit: 1001 });
  assert.match(text, /limit/);
  process.stdout.write(`# 100,000 lines produced and paged in ${Date.now() - t0} ms\n`);
});

h.test('read_command_lines pages while the command is still running', async () => {
  const sc = await exec('seq 1 50; sleep 1.5; seq 51 60', { yield_time_ms: 500 });
  assert.equal(sc.status, 'running');
  const r1 = await readLines(sc.command_session_id, { start_offset: 10, limit: 5 });
  assert.deepEqual(outputLines(r1), ['11', '12', '13', '14', '15']);
  assert.equal(r1.status, 'running');
  const done = await waitDone(h.mcp, SB, sc.command_session_id);
  assert.equal(done.total_lines, 60);
  const { output } = await readAll(h.mcp, SB, sc.command_session_id, { limit: 7 });
  assert.equal(output, Array.from({ length: 60 }, (_, i) => `${i + 1}\n`).join(''));
});

h.test('a long yield window holds the most recent lines and start_offset says what was skipped', async () => {
  const sc = checkShape(await exec('seq 1 5000'));
  assert.equal(sc.total_lines, 5000);
  assert.equal(sc.end_offset, 5000);
  assert.ok(sc.start_offset > 0, 'window is bounded');
  assert.equal(outputLines(sc)[0], String(sc.start_offset + 1));
});

h.test('odd output: invalid UTF-8, NUL bytes, a 10,000-character line', async () => {
  let sc = await exec("printf 'ok\\377\\376 after\\n'; printf 'a\\000b\\n'; head -c 3000 /dev/urandom; echo; echo end");
  assert.equal(sc.status, 'ok');
  const lines = outputLines(sc);
  assert.ok(lines[0].startsWith('ok') && lines[0].endsWith(' after'), JSON.stringify(lines[0]));
  assert.equal(lines[lines.length - 1], 'end');
  sc = await exec("head -c 10000 /dev/zero | tr '\\0' a; echo");
  const parts = outputLines(sc);
  assert.equal(parts.join(''), 'a'.repeat(10000), 'a long line is kept whole (maybe wrapped)');
  for (const p of parts) assert.ok(p.length <= 4096, `a rendered line of ${p.length} characters`);
  assert.equal(sc.total_lines, parts.length);
});

h.test('a daemonized process does not outlive its automatic session', async () => {
  const t0 = Date.now();
  const sc = await exec(`setsid sleep ${T(110)} </dev/null >/dev/null 2>&1 & echo started`);
  assert.equal(sc.status, 'ok');
  assert.equal(sc.output, 'started\n');
  assert.ok(Date.now() - t0 < 3000);
  await waitFor(() => hostProcsMatching(`sleep ${T(110)}`).length === 0,
    { timeout: 5000, what: 'the daemonized sleep to be killed with its session' });
});

h.test('a background job holding stdout: the command still ends', async () => {
  const t0 = Date.now();
  const sc = await exec(`sleep ${T(2)} & echo foreground-done`, { yield_time_ms: 10000 });
  const ms = Date.now() - t0;
  process.stdout.write(`# "sleep 2 & echo" answered after ${ms} ms with status ${sc.status}\n`);
  assert.ok(sc.output.startsWith('foreground-done'));
  const done = sc.status === 'running' ? await waitDone(h.mcp, SB, sc.command_session_id) : sc;
  assert.equal(done.status, 'ok');
  await waitFor(() => hostProcsMatching(`sleep ${T(2)}`).length === 0, { timeout: 5000, what: 'the background sleep to end' });
});
