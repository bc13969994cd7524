// Separate streams (issue 14, item 7): a command started with separate_streams
// (a supervisor request the MCP runtime set does not make: tests/integration/
// raw-client.py makes it) keeps stdout and stderr apart. Its merged view is
// what the runtime set gives, as before; each stream reads alone with its own
// offsets, live, finished and after an sbxd restart. A command started without
// them (every runtime-set command) refuses a single-stream read clearly.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { useSbx, run, sbxctl, ROOT } from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'str' }] });
const SB = 'str';
const MERGED = 0, STDOUT = 1, STDERR = 2;
const ENODATA = -61, EINVAL = -22;
const PROTO_VERSION = /#define SBX_PROTO_VERSION (\d+)u/.exec(
  readFileSync(path.join(ROOT, 'proto', 'wire.h'), 'utf8'))[1];

// Requests in order on one connection; the answers, parsed.
async function raw(requests) {
  const r = await run('python3', [path.join(ROOT, 'tests', 'integration', 'raw-client.py'), h.socket], {
    timeout: 60000,
    input: requests.map((q) => JSON.stringify({ sandbox: SB, ...q })).join('\n') + '\n',
    env: { ...process.env, SBX_PROTO_VERSION: PROTO_VERSION },
  });
  assert.equal(r.code, 0, `raw client failed: ${r.stderr}`);
  return r.stdout.trim().split('\n').map((l) => JSON.parse(l));
}

const read = (cs, stream, extra = {}) => ({ op: 'read', command_session: cs, stream, limit: 1000, ...extra });

// Writes each argument ("1:text" to stdout, "2:text" to stderr, \n escapes) and
// waits until sbx-worker has read it before the next (FIONREAD on the pipe is 0),
// so the order of the pieces is known; "hold" sleeps at the end.
const PUT_PY = String.raw`import fcntl, os, struct, sys, termios, time
for a in sys.argv[1:]:
    if a == 'hold':
        time.sleep(60)
        continue
    fd, text = int(a[0]), a[2:].encode().decode('unicode_escape').encode()
    os.write(fd, text)
    while struct.unpack('i', fcntl.ioctl(fd, termios.FIONREAD, b'\0\0\0\0'))[0]:
        time.sleep(0.001)
`;
const BOTH = "python3 put.py 1:'out1\\n' 2:'err1\\n' 1:'out2\\n' 2:'err2\\n'";
const saved = {};

h.test('setup: put.py in the workspace', async () => {
  const w = await h.mcp.sc('file_write', { sandbox_id: SB, path: 'put.py', content: PUT_PY });
  assert.equal(w.type, 'create');
});

h.test('separate streams: the merged view as the runtime set gives it, each stream alone with its own offsets', async () => {
  const runtime = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: BOTH });
  assert.equal(runtime.output, 'out1\nerr1\nout2\nerr2\n', 'the runtime set merges in write order');

  const [ex, done, merged, out, err, page] = await raw([
    { op: 'exec', cmd: BOTH, separate_streams: true },
    { op: 'wait', command_session: '$last' },
    read('$last', MERGED),
    read('$last', STDOUT),
    read('$last', STDERR),
    read('$last', STDERR, { start_offset: 1, limit: 1 }),
  ]);
  assert.equal(ex.err, 0, ex.errmsg);
  assert.equal(done.status, 'ok');
  saved.apart = ex.command_session;
  assert.equal(merged.output, runtime.output, 'merged view as before');
  assert.equal(merged.total_lines, 4);
  assert.equal(out.output, 'out1\nout2\n');
  assert.deepEqual([out.start_offset, out.end_offset, out.total_lines], [0, 2, 2]);
  assert.equal(err.output, 'err1\nerr2\n');
  assert.deepEqual([err.start_offset, err.end_offset, err.total_lines], [0, 2, 2]);
  assert.equal(page.output, 'err2\n');
  assert.deepEqual([page.start_offset, page.end_offset, page.total_lines], [1, 2, 2]);

  // The runtime set reads any command's merged view, with the same fields as for its own.
  const rl = await h.mcp.sc('read_command_lines', { sandbox_id: SB, command_session_id: saved.apart });
  assert.equal(rl.output, runtime.output);
  assert.equal(rl.total_lines, runtime.total_lines);
  assert.equal(rl.original_token_count, runtime.original_token_count);
});

h.test('separate streams, live: each stream shows its pending line; the merged view the one begun first', async () => {
  const [ex] = await raw([
    { op: 'exec', cmd: "python3 put.py 1:'build\\n' 1:'prog 10%' 2:'Password: ' hold", separate_streams: true, yield_ms: 300 },
  ]);
  assert.equal(ex.status, 'running');
  // Each piece is written once the one before was read: when the last is in, all are.
  let err;
  for (let i = 0; i < 200; i++) {
    [err] = await raw([read(ex.command_session, STDERR)]);
    if (err.output === 'Password: \n') break;
  }
  assert.equal(err.output, 'Password: \n');
  assert.equal(err.total_lines, 1);
  const [merged, out] = await raw([read(ex.command_session, MERGED), read(ex.command_session, STDOUT)]);
  assert.equal(merged.output, 'build\nprog 10%\n');
  assert.equal(merged.total_lines, 2, 'one pending line in the merged view, the older one');
  assert.equal(out.output, 'build\nprog 10%\n');
  const c = await sbxctl(h.socket, ['command', 'cancel', SB, ex.command_session]);
  assert.equal(c.code, 0, c.stderr);
  const [end, eo, ee] = await raw([{ op: 'wait', command_session: ex.command_session },
    read(ex.command_session, STDOUT), read(ex.command_session, STDERR)]);
  assert.equal(end.status, 'cancelled');
  assert.equal(end.output, 'build\nprog 10%\nPassword: \n', 'the pending lines are committed at the end, older first');
  assert.equal(eo.output, 'build\nprog 10%\n');
  assert.equal(ee.output, 'Password: \n');
});

h.test('without separate streams one stream alone is refused with a clear message; a bad stream too', async () => {
  const runtime = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: 'echo merged; echo also >&2' });
  saved.merged = runtime.command_session_id;
  const [out, err, bad, ok] = await raw([
    read(saved.merged, STDOUT), read(saved.merged, STDERR), read(saved.merged, 7), read(saved.merged, MERGED),
  ]);
  assert.equal(out.err, ENODATA);
  assert.match(out.errmsg, /did not keep stdout and stderr apart/);
  assert.equal(err.err, ENODATA);
  assert.equal(bad.err, EINVAL);
  assert.match(bad.errmsg, /stream must be merged, stdout or stderr/);
  assert.equal(ok.output, 'merged\nalso\n');
});

h.test('sbxctl command lines prints the whole output, paged, and each stream alone', async () => {
  const long = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: 'seq 2500; echo tail >&2' });
  const all = await sbxctl(h.socket, ['command', 'lines', SB, long.command_session_id]);
  assert.equal(all.code, 0, all.stderr);
  // Three pages of SBX_READ_MAX_LINES (1000), in order, nothing twice.
  const want = Array.from({ length: 2500 }, (_, i) => `${i + 1}\n`).join('') + 'tail\n';
  assert.equal(all.stdout, want);
  const err = await sbxctl(h.socket, ['command', 'lines', SB, saved.apart, '--stream', 'stderr']);
  assert.equal(err.stdout, 'err1\nerr2\n');
  const out = await sbxctl(h.socket, ['command', 'lines', SB, saved.apart, '--stream', 'stdout']);
  assert.equal(out.stdout, 'out1\nout2\n');
  const refused = await sbxctl(h.socket, ['command', 'lines', SB, saved.merged, '--stream', 'stdout']);
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /did not keep stdout and stderr apart/);
  const bad = await sbxctl(h.socket, ['command', 'lines', SB, saved.apart, '--stream', 'both']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /invalid --stream 'both': expected merged stdout stderr/);
});

h.test('after an sbxd restart both kinds read from disk as before', async () => {
  await h.restartSbxd();
  const [merged, out, err, old] = await raw([
    read(saved.apart, MERGED), read(saved.apart, STDOUT), read(saved.apart, STDERR), read(saved.merged, STDOUT),
  ]);
  assert.equal(merged.output, 'out1\nerr1\nout2\nerr2\n');
  assert.equal(out.output, 'out1\nout2\n');
  assert.equal(err.output, 'err1\nerr2\n');
  assert.deepEqual([err.start_offset, err.end_offset, err.total_lines], [0, 2, 2]);
  assert.equal(old.err, ENODATA);
});
