// The boxes set, part C (issue 21; shared/seeds/003): sandbox_takeover
// through the MCP SDK client, and a person at `sbxctl takeover list|attach|
// return` (supervisor/core/takeover.h). The person's terminal is driven by a
// script under a real pty (python3's pty module): typing a command and seeing
// its output, Ctrl-C interrupting a sleep in the box while sbxctl lives on, a
// resize seen by `stty size`, then `return --note`, whose note is the tool's
// result. box_image is the default image (no browser needed).
import assert from 'node:assert/strict';
import { Harness, useSbx, sbxctl, run, sleep, SBXCTL, waitFor } from './helpers.mjs';

const NOBODY = 65534;
const CONFIG = '[sbxd]\nsocket_mode = 0666\nbox_image = default\nbox_spares = 0\nboxes_per_user = 4\n';
const h = useSbx({ sandboxes: [], sets: 'boxes', world: true, config: CONFIG });

// Runs argv under a new pty of rows x cols and plays steps: {expect} waits for
// text in what the terminal showed, {send} types, {size} resizes the pty
// (the kernel sends SIGWINCH to sbxctl), {mark} names the output so far, which
// a later {expect, after} skips, {run} runs a command aside (its status
// {code}, default 0, and {stderr} text). Prints
// {status, out, error} as JSON at the end (after the program's EOF).
const DRIVER = String.raw`
import fcntl, json, os, pty, select, struct, subprocess, sys, termios, time
steps, rows, cols = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
argv = sys.argv[4:]
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack('HHHH', rows, cols, 0, 0))
    os.execv(argv[0], argv)
buf, error, marks = b'', None, {}
def pump(left):
    global buf
    r, _, _ = select.select([fd], [], [], max(left, 0))
    if not r:
        return True
    try:
        d = os.read(fd, 65536)
    except OSError:
        d = b''
    buf += d
    return bool(d)
try:
    for st in steps:
        if 'expect' in st:
            end = time.time() + st.get('timeout', 60)
            while st['expect'].encode() not in buf[marks.get(st.get('after'), 0):]:
                if time.time() > end or not pump(end - time.time()):
                    raise Exception('waiting for %r' % st['expect'])
        if 'mark' in st:
            marks[st['mark']] = len(buf)
        if 'send' in st:
            os.write(fd, st['send'].encode())
        if 'size' in st:
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', st['size'][0], st['size'][1], 0, 0))
        if 'run' in st:
            p = subprocess.run(st['run'], capture_output=True, text=True, stdin=subprocess.DEVNULL)
            if p.returncode != st.get('code', 0) or st.get('stderr', '') not in p.stderr:
                raise Exception('%r: status %d: %s' % (st['run'], p.returncode, p.stderr))
except Exception as e:
    error = str(e)
end = time.time() + 30
while time.time() < end and pump(end - time.time()):
    pass
try:
    os.kill(pid, 9) if error else None
except ProcessLookupError:
    pass
_, status = os.waitpid(pid, 0)
print(json.dumps({'status': os.waitstatus_to_exitcode(status), 'out': buf.decode('utf-8', 'replace'), 'error': error}))
`;

async function underPty(socket, args, steps, { rows = 30, cols = 100 } = {}) {
  const r = await run('python3', ['-c', DRIVER, JSON.stringify(steps), String(rows), String(cols), SBXCTL,
    '--socket', socket, ...args], { timeout: 180000 });
  assert.equal(r.code, 0, `pty driver: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const start = (mcp) => mcp.sc('sandbox_start', { idleTimeoutMin: 0 });
const listed = async (socket, opts = {}) => JSON.parse((await sbxctl(socket, ['--json', 'takeover', 'list'], opts)).stdout);

async function waitTakenOver(socket, id) {
  await waitFor(async () => (await listed(socket)).some((t) => t.box === id), { timeout: 20000, what: `${id} listed` });
}

h.test('tools/list: sandbox_takeover with its schema and honest annotations', async () => {
  const t = h.mcp.tools.find((x) => x.name === 'sandbox_takeover');
  assert.ok(t && t.title && t.description && t.outputSchema);
  assert.deepEqual(t.inputSchema.required, ['id']);
  assert.equal(t.inputSchema.properties.note.maxLength, 4096);
  assert.deepEqual(t.outputSchema.required, ['note', 'expired']);
  assert.equal(t.annotations.readOnlyHint, false);
  assert.match(t.description, /30 minutes/);
});

h.test('a person takes over through a terminal: keys, Ctrl-C, resize, then return --note is the result', async () => {
  const b = await start(h.mcp);
  const pending = h.mcp.call('sandbox_takeover', { id: b.id, note: 'please log in to the shop' }, { timeout: 170000 });
  await waitTakenOver(h.socket, b.id);
  const [t] = (await listed(h.socket)).filter((x) => x.box === b.id);
  assert.equal(t.note, 'please log in to the shop');
  assert.equal(t.owner_uid, 0);
  assert.equal(t.attached, false);
  assert.ok(t.expires_unix - t.since_unix === 1800, JSON.stringify(t));
  const text = (await sbxctl(h.socket, ['takeover', 'list'])).stdout;
  assert.match(text, /^BOX\s+OWNER\s+SINCE\s+EXPIRES\s+ATTACHED\s+NOTE/m);
  assert.match(text, new RegExp(`${b.id}\\s+0\\s.*please log in to the shop`));

  // Meanwhile the agent's commands are locked, and the box says so.
  const locked = await h.mcp.err('sandbox_exec', { id: b.id, cmd: 'true' });
  assert.match(locked, new RegExp(`locked: a person has taken over box '${b.id}'; wait and retry`));
  assert.equal((await h.mcp.sc('sandbox_status', { id: b.id })).status, 'takeover');
  assert.match(await h.mcp.err('sandbox_takeover', { id: b.id, note: 'again' }), /taken over already/);

  const ret = [SBXCTL, '--socket', h.socket, 'takeover', 'return', b.id, '--note', 'done: logged in as alice'];
  const r = await underPty(h.socket, ['takeover', 'attach', b.id], [
    { send: 'echo hel""lo-$((6*7)) $TERM; p""wd\r' },
    { expect: 'hello-42 xterm-256color' },
    { expect: '/work' },
    { send: 'stty size\r' },
    { expect: '30 100' },
    // The box's sleep gets SIGINT from the box's pty; sbxctl reads Ctrl-C as a byte and lives on.
    { send: "sh -c 'echo sle\"\"eping; exec sleep 600'\r" },
    { expect: 'sleeping' },
    { send: '\x03' },
    { mark: 'interrupted' },
    { send: 'echo aft""er-$?\r' },
    { expect: 'after-130', after: 'interrupted' },
    { size: [40, 120] },
    { mark: 'resized' },
    { send: 'stty size\r' },
    { expect: '40 120', after: 'resized' },
    { run: ret },
    { expect: 'closed: returned' },
  ]);
  assert.equal(r.error, null, `${r.error}\n--- terminal ---\n${r.out}`);
  assert.equal(r.status, 0, r.out);

  const res = await pending;
  assert.notEqual(res.isError, true, JSON.stringify(res));
  assert.deepEqual({ note: res.structuredContent.note, expired: res.structuredContent.expired },
    { note: 'done: logged in as alice', expired: false });
  assert.ok(res.structuredContent.seconds > 0);
  // The box is the agent's again.
  assert.equal((await h.mcp.sc('sandbox_status', { id: b.id })).status, 'ready');
  assert.equal((await h.mcp.sc('sandbox_exec', { id: b.id, cmd: 'echo back' })).stdout, 'back\n');
  assert.deepEqual((await listed(h.socket)).filter((x) => x.box === b.id), []);
  await h.mcp.sc('sandbox_stop', { id: b.id });
});

h.test('Ctrl-] detaches (the takeover stays); the shell exiting ends the terminal; one terminal at a time', async () => {
  const b = await start(h.mcp);
  const pending = h.mcp.call('sandbox_takeover', { id: b.id, note: 'look' }, { timeout: 170000 });
  await waitTakenOver(h.socket, b.id);
  let r = await underPty(h.socket, ['takeover', 'attach', b.id], [
    { send: 'echo fi""rst\r' },
    { expect: 'first' },
    { run: [SBXCTL, '--socket', h.socket, 'takeover', 'attach', b.id], code: 1, stderr: 'attached to box' },
    { send: '\x1d' },
    { expect: 'detached' },
  ]);
  assert.equal(r.error, null, `${r.error}\n${r.out}`);
  assert.equal(r.status, 0);
  await waitFor(async () => (await listed(h.socket)).some((t) => t.box === b.id && !t.attached),
    { timeout: 20000, what: 'detached' });
  r = await underPty(h.socket, ['takeover', 'attach', b.id], [
    { send: 'echo sec""ond\r' },
    { expect: 'second' },
    { send: 'exit 3\r' },
    { expect: 'the shell exited with status 3' },
  ]);
  assert.equal(r.error, null, `${r.error}\n${r.out}`);
  assert.equal(r.status, 0);
  assert.equal((await h.mcp.sc('sandbox_status', { id: b.id })).status, 'takeover');
  await sbxctl(h.socket, ['takeover', 'return', b.id]);
  const res = await pending;
  assert.equal(res.structuredContent.note, '');
  assert.equal(res.structuredContent.expired, false);
  await h.mcp.sc('sandbox_stop', { id: b.id });
});

h.test('who may: root and the owner attach and return; others see nothing and are refused', async () => {
  const b = await start(h.mcp);
  const pending = h.mcp.call('sandbox_takeover', { id: b.id, note: 'secret plan' }, { timeout: 170000 });
  await waitTakenOver(h.socket, b.id);
  const as = (args) => run('/usr/bin/setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', SBXCTL,
    '--socket', h.socket, ...args]);
  const l = await as(['--json', 'takeover', 'list']);
  assert.equal(l.code, 0, l.stderr);
  assert.deepEqual(JSON.parse(l.stdout), []);
  for (const args of [['takeover', 'return', b.id, '--note', 'x'], ['takeover', 'attach', b.id]]) {
    const r = await as(args);
    assert.equal(r.code, 5, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, /only root and the owner of box .* \(uid 0\)/);
  }
  const none = await sbxctl(h.socket, ['takeover', 'return', 'box-000000000000']);
  assert.equal(none.code, 4);
  assert.match(none.stderr, /is not taken over/);
  assert.match(await h.mcp.err('sandbox_takeover', { id: 'box-000000000000' }), /not found/);
  assert.ok((await sbxctl(h.socket, ['takeover', 'return', b.id, '--note', 'ok'])).code === 0);
  assert.equal((await pending).structuredContent.note, 'ok');
  await h.mcp.sc('sandbox_stop', { id: b.id });
});

h.test('the agent cancels: the takeover ends, the box is unlocked; a stopped box ends its takeover', async () => {
  const b = await start(h.mcp);
  const ac = new AbortController();
  const pending = h.mcp.call('sandbox_takeover', { id: b.id }, { signal: ac.signal, timeout: 170000 });
  await waitTakenOver(h.socket, b.id);
  ac.abort();
  await assert.rejects(pending);
  await waitFor(async () => !(await listed(h.socket)).some((t) => t.box === b.id), { timeout: 20000, what: 'ended' });
  assert.equal((await h.mcp.sc('sandbox_exec', { id: b.id, cmd: 'echo free' })).stdout, 'free\n');

  const second = h.mcp.call('sandbox_takeover', { id: b.id }, { timeout: 170000 });
  await waitTakenOver(h.socket, b.id);
  await h.mcp.sc('sandbox_stop', { id: b.id });
  const res = await second;
  assert.equal(res.isError, true);
  assert.match(res.content[0].text, /ended/);
  assert.deepEqual((await listed(h.socket)).filter((x) => x.box === b.id), []);
});

h.test('a box held by a person is not frozen for idleness, however long they take', async () => {
  const b = await h.mcp.sc('sandbox_start', { idleTimeoutMin: 0.02 });      // 1.2 s
  const pending = h.mcp.call('sandbox_takeover', { id: b.id }, { timeout: 170000 });
  await waitTakenOver(h.socket, b.id);
  await sleep(3000);
  assert.equal((await h.mcp.sc('sandbox_status', { id: b.id })).status, 'takeover');
  const r = await underPty(h.socket, ['takeover', 'attach', b.id], [
    { send: 'echo wa""rm\r' },
    { expect: 'warm' },
    { run: [SBXCTL, '--socket', h.socket, 'takeover', 'return', b.id, '--note', 'thanks'] },
    { expect: 'closed: returned' },
  ]);
  assert.equal(r.error, null, `${r.error}\n${r.out}`);
  assert.equal((await pending).structuredContent.note, 'thanks');
  await h.mcp.sc('sandbox_stop', { id: b.id });
});

h.test('nobody hands it back: after takeover_max_seconds (2 here) the result says expired', async () => {
  const h2 = await Harness.create({ sandboxes: [], sets: 'boxes', config: `${CONFIG}takeover_max_seconds = 2\n` });
  try {
    const b = await start(h2.mcp);
    const res = await h2.mcp.sc('sandbox_takeover', { id: b.id, note: 'n' }, { timeout: 170000 });
    assert.equal(res.expired, true);
    assert.equal(res.note, '');
    assert.ok(res.seconds >= 2, JSON.stringify(res));
    assert.equal((await h2.mcp.sc('sandbox_status', { id: b.id })).status, 'ready');
    assert.equal((await h2.mcp.sc('sandbox_exec', { id: b.id, cmd: 'echo mine' })).stdout, 'mine\n');
  } finally {
    await h2.teardown();
  }
});
