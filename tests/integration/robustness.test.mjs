// Bad input never takes the supervisor down: unknown sandbox, unknown command
// session, malformed frames on sbxd.sock, peers that disconnect mid-request.
import assert from 'node:assert/strict';
import fs, { readFileSync } from 'node:fs';
import path from 'node:path';
import { useSbx, Harness, run, sbxctl, hostProcsMatching, waitFor, sleep, T } from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'rob' }] });
const SB = 'rob';
const exec = (cmd, extra = {}) => h.mcp.sc('exec_command', { sandbox_id: SB, cmd, ...extra });

async function stillServing(what) {
  assert.ok(h.sbxd.running, `sbxd died after ${what}`);
  const r = await exec('echo alive');
  assert.equal(r.output, 'alive\n', `after ${what}`);
}

h.test('an unknown sandbox is an isError result for every tool', async () => {
  const t1 = await h.mcp.err('exec_command', { sandbox_id: 'no-such-sandbox', cmd: 'true' });
  assert.match(t1, /no-such-sandbox|sandbox/i);
  await h.mcp.err('read_command_lines', { sandbox_id: 'no-such-sandbox', command_session_id: 'x' });
  await h.mcp.err('write_command_stdin', { sandbox_id: 'no-such-sandbox', command_session_id: 'x', stdin: 'y' });
  await stillServing('unknown sandbox');
});

h.test('an unknown command_session_id is an isError result', async () => {
  for (const id of ['no-such-command', '999999', '', '../../etc/passwd', 'x'.repeat(300)]) {
    const t = await h.mcp.err('read_command_lines', { sandbox_id: SB, command_session_id: id });
    assert.ok(t.length > 0);
  }
  await stillServing('unknown command');
});

h.test('hostile sandbox names and huge commands are refused cleanly', async () => {
  for (const name of ['../etc', 'a/b', '', 'x'.repeat(1000), 'name\nwith-newline']) {
    await h.mcp.err('exec_command', { sandbox_id: name, cmd: 'true' });
  }
  const big = await h.mcp.call('exec_command', { sandbox_id: SB, cmd: `echo ${'y'.repeat(200 * 1024)}` });
  assert.equal(big.isError, true, 'a cmd over the 64 KiB limit is refused');
  await stillServing('hostile names');
});

// Hand-made frames on sbxd.sock (SOCK_SEQPACKET) from a raw Python client:
// 16-byte little-endian header {magic_version, len, type, flags, seq} + body.
// The protocol version the build speaks, from the one place it is defined.
const PROTO_VERSION = /#define SBX_PROTO_VERSION (\d+)u/.exec(
  readFileSync(new URL('../../proto/wire.h', import.meta.url), 'utf8'))[1];

const RAW_CLIENT = String.raw`
import socket, struct, sys, os, time
path = sys.argv[1]
MAGIC = 0x53425800 | int(os.environ['SBX_PROTO_VERSION'])
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    s.settimeout(5)
    return s
def frame(body, type_, seq=1, magic=MAGIC, length=None, flags=0):
    return struct.pack('<IIHHI', magic, len(body) if length is None else length, type_, flags, seq) + body
def varint(n):
    out = b''
    while True:
        b = n & 0x7f; n >>= 7
        if n: out += bytes([b | 0x80])
        else: return out + bytes([b])
def field(num, wt, payload):
    tag = varint((num << 3) | wt)
    return tag + (varint(payload) if wt == 0 else varint(len(payload)) + payload)
def msg(type_, body_field, body):
    return field(1, 0, type_) + field(body_field, 2, body)
hello = msg(1, 10, field(1, 2, b'raw-test'))
results = []
def attempt(name, frames, read=True):
    try:
        s = conn()
        for f in frames:
            s.send(f)
        if read:
            try:
                data = s.recv(1 << 20)
                results.append('%s: reply %d bytes' % (name, len(data)))
            except socket.timeout:
                results.append('%s: no reply (timeout)' % name)
            except OSError as e:
                results.append('%s: %s' % (name, e))
        s.close()
    except OSError as e:
        results.append('%s: %s' % (name, e))
which = sys.argv[2]
sandbox = sys.argv[3].encode()
if which == 'malformed':
    attempt('empty datagram', [b''])
    attempt('short header', [b'\x01\x02\x03'])
    attempt('random bytes', [os.urandom(64)])
    attempt('bad magic', [frame(hello, 1, magic=0xdeadbeef)])
    attempt('future version', [frame(hello, 1, magic=0x53425800 | 99)])
    attempt('len larger than datagram', [frame(hello, 1, length=100000)])
    attempt('len over the frame cap', [frame(b'x' * 16, 1, length=0xffffffff)])
    attempt('garbage body', [frame(b'\xff' * 40, 1)])
    attempt('type/body mismatch', [frame(hello, 6)])
    attempt('unknown type', [frame(hello, 999)])
    attempt('fd count claimed, none sent', [frame(hello, 1, flags=2)])
    attempt('worker message from a client', [frame(hello, 1), frame(msg(201, 41, field(1, 0, 1) + field(2, 2, b'x')), 201, seq=2)])
    attempt('exec before hello', [frame(msg(6, 15, field(1, 2, sandbox) + field(3, 2, b'true')), 6)])
    big = b'\x00' * (200 * 1024)
    attempt('oversize datagram', [frame(big, 1)])
    attempt('hello then garbage', [frame(hello, 1), b'\x00' * 16, os.urandom(100)])
    attempt('connect and close', [], read=False)
elif which == 'disconnect':
    # a valid hello, then an exec of a long command, then hang up at once
    ex = msg(6, 15, field(1, 2, sandbox) + field(3, 2, b'echo raw; sleep ' + sys.argv[4].encode()) + field(6, 0, 1) + field(7, 0, 20000))
    s = conn()
    s.send(frame(hello, 1, seq=1))
    try:
        s.recv(1 << 20)
    except OSError:
        pass
    s.send(frame(ex, 6, seq=2))
    time.sleep(0.5)
    s.close()
    results.append('disconnected mid-request')
    # many connections at once, all closed without a word
    socks = [conn() for _ in range(50)]
    for x in socks: x.close()
    results.append('50 idle connections closed')
print('\n'.join(results))
`;

async function rawClient(which) {
  const r = await run('python3', ['-c', RAW_CLIENT, h.socket, which, SB, T(108)],
    { timeout: 60000, env: { ...process.env, SBX_PROTO_VERSION: PROTO_VERSION } });
  process.stdout.write(r.stdout.split('\n').filter(Boolean).map((l) => `# ${l}\n`).join(''));
  assert.equal(r.code, 0, `raw client failed: ${r.stderr}`);
  return r;
}

h.test('malformed frames on sbxd.sock drop that peer, never the supervisor', async () => {
  await rawClient('malformed');
  await stillServing('malformed frames');
  const st = await sbxctl(h.socket, ['status', '--json']);
  assert.equal(st.code, 0, st.stderr);
});

h.test('a client that disconnects mid-request does not hurt sbxd', async () => {
  await rawClient('disconnect');
  await stillServing('a disconnect mid-request');
  // whatever sbxd decides for the orphaned command, it must not run forever
  // beyond its yield: it is either still tracked or gone; make sure sbxd stays sane
  const st = await sbxctl(h.socket, ['status']);
  assert.equal(st.code, 0, st.stderr);
});

h.test('a broker killed mid-call does not hurt sbxd', async () => {
  const s = await h.connect();
  const p = s.call('exec_command', { sandbox_id: SB, cmd: `sleep ${T(109)}`, yield_time_ms: 20000 }).catch(() => 'rejected');
  await waitFor(() => hostProcsMatching(`sleep ${T(109)}`).length > 0, { what: 'the command to start' });
  const pid = s.serverPid;
  assert.ok(pid, 'broker pid');
  process.kill(pid, 'SIGKILL');
  assert.equal(await p, 'rejected');
  await s.close();
  await sleep(200);
  await stillServing('a killed broker');
});

h.test('many brokers at once', async () => {
  const sessions = await Promise.all([1, 2, 3, 4, 5].map(() => h.connect()));
  try {
    const rs = await Promise.all(sessions.map((s, i) => s.sc('exec_command', { sandbox_id: SB, cmd: `echo b${i}` })));
    rs.forEach((r, i) => assert.equal(r.output, `b${i}\n`));
  } finally {
    for (const s of sessions) await s.close();
  }
  await stillServing('many brokers');
});

/* sbxd's spawner (supervisor/os/spawner.c): its child named sbxd-spawner. */
function spawnerPid() {
  for (const ent of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue;
    try {
      const stat = readFileSync(`/proc/${ent}/stat`, 'utf8');
      const m = /^\d+ \((.*)\) \S (\d+)/.exec(stat);
      if (m && m[1] === 'sbxd-spawner' && Number(m[2]) === h.sbxd.pid) return Number(ent);
    } catch { /* gone meanwhile */ }
  }
  return null;
}

h.test('the spawner killed: its sessions end, sbxd lives on and starts a new one', async () => {
  const before = spawnerPid();
  assert.ok(before, 'sbxd has no spawner child');
  const r = await h.mcp.sc('exec_command', { sandbox_id: 'rob', cmd: `sleep ${T(77)}`, yield_time_ms: 300 });
  assert.equal(r.status, 'running');
  process.kill(before, 'SIGKILL');
  const done = await waitFor(async () => {
    const x = await h.mcp.sc('read_command_lines', { sandbox_id: 'rob', command_session_id: r.command_session_id });
    return x.status !== 'running' && x;
  }, { what: 'the command to end with its session' });
  assert.equal(done.status, 'error');
  assert.equal(hostProcsMatching(`sleep ${T(77)}`).length, 0, 'the command outlived its session');
  const again = await h.mcp.sc('exec_command', { sandbox_id: 'rob', cmd: 'echo alive' });
  assert.equal(again.output, 'alive\n');
  assert.ok(h.sbxd.running, 'sbxd died');
  const after = spawnerPid();
  assert.ok(after && after !== before, `no new spawner (${before} -> ${after})`);
});

/* The session's own set-up (sbx-worker --session-init) fails at a step: the
 * command says which, sbxd lives on, and the next session works. The mount
 * point of the session tmpfs is taken away for one command (no spares, so the
 * command needs a new session). */
h.test('a session set-up that fails names its step; sbxd lives on, the next one works', async () => {
  const other = await Harness.create({ sandboxes: [{ name: 'setup' }], config: '[sbxd]\nsession_spares = 0\n' });
  try {
    const mountPoint = path.join(other.runDir, 'session-root');
    fs.rmdirSync(mountPoint);
    let r;
    try {
      r = await other.mcp.sc('exec_command', { sandbox_id: 'setup', cmd: 'echo never' });
    } finally {
      fs.mkdirSync(mountPoint, { mode: 0o700 });
    }
    assert.equal(r.status, 'error', JSON.stringify(r));
    assert.match(r.output, /cannot start the workspace session: mount session tmpfs: No such file or directory/);
    assert.ok(other.sbxd.running, 'sbxd died');
    const again = await other.mcp.sc('exec_command', { sandbox_id: 'setup', cmd: 'echo fine; grep -c . /proc/mounts >/dev/null' });
    assert.equal(again.status, 'ok');
    assert.equal(again.output, 'fine\n');
  } finally {
    await other.teardown();
  }
});
