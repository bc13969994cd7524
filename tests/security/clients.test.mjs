// The isolation battery, part 4: what local users can do to sbxd.sock
// (issue 13 item 8). Idle connections of several users cannot lock root (or
// socket_group) out, sbxd closes connections that send no request, and a
// user's `sbxctl status` shows that user's own figures only.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { run, sbxctl, SBXCTL, sleep } from '../integration/helpers.mjs';
import { useBattery } from './common.mjs';

const IDLE_S = 3;
const GROUP = 1; // daemon: only its members may take the group's reserved slots
const { h, test } = useBattery({
  sandboxes: [{ name: 'own' }],
  world: true,
  config: `[sbxd]\nsocket_group = ${GROUP}\nsocket_mode = 0666\nclient_idle_seconds = ${IDLE_S}\n`,
});

/* Open n connections to sbxd.sock as uid, send nothing, and report when sbxd closes each. */
const HOLDER = `
import json, select, socket, sys, time
path, n, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        socks.append(s)
    except OSError:
        pass
t0 = time.time()
print(json.dumps({"connected": len(socks)}), flush=True)
left, closed = set(socks), []
while left and time.time() - t0 < hold:
    ready, _, _ = select.select(list(left), [], [], 0.1)
    for s in ready:
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:
            left.discard(s)
            closed.append(round(time.time() - t0, 2))
print(json.dumps({"closed": sorted(closed), "open": len(left)}), flush=True)
`;

function holder(uid, n, holdS) {
  const p = spawn('/usr/bin/setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '/usr/bin/python3', '-c', HOLDER,
    h.socket, String(n), String(holdS)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = [];
  const rl = readline.createInterface({ input: p.stdout });
  const next = () => new Promise((resolve, reject) => {
    if (lines.length) return resolve(lines.shift());
    rl.once('line', () => resolve(lines.shift()));
    p.once('exit', (code) => reject(new Error(`holder of uid ${uid} exited ${code}`)));
  });
  rl.on('line', (l) => lines.push(JSON.parse(l)));
  return { p, next };
}

const asUser = (uid, args, groups = ['--clear-groups']) =>
  run('/usr/bin/setpriv', [`--reuid=${uid}`, `--regid=${uid}`, ...groups, SBXCTL, '--socket', h.socket, ...args]);

test('idle connections of local users lock out neither root nor socket_group, and are closed', async () => {
  // four users, 64 idle connections each: more than all the slots (256)
  const uids = [65534, 65533, 65532, 65531];
  const hs = uids.map((u) => holder(u, 64, IDLE_S + 15));
  const connected = await Promise.all(hs.map((x) => x.next()));
  process.stdout.write(`# idle connections opened: ${connected.map((c) => c.connected).join(' ')}\n`);
  // while they are held, root and a member of socket_group still get in
  const t0 = Date.now();
  const root = await sbxctl(h.socket, ['status', '--json']);
  assert.equal(root.code, 0, `root was locked out: ${root.stderr}`);
  assert.ok(JSON.parse(root.stdout).clients >= 200, root.stdout);
  const member = await asUser(65530, ['sandbox', 'list'], [`--groups=${GROUP}`]);
  assert.equal(member.code, 0, `a member of socket_group was locked out: ${member.stderr}`);
  assert.ok(Date.now() - t0 < IDLE_S * 1000, 'too slow to tell: the idle limit passed meanwhile');
  const ends = await Promise.all(hs.map((x) => x.next()));
  for (const [i, e] of ends.entries()) {
    const refused = e.closed.filter((t) => t <= 1).length;
    process.stdout.write(`# uid ${uids[i]}: ${refused} refused, ${e.closed.length - refused} closed when idle (last after ${e.closed.at(-1)} s), ${e.open} still open\n`);
    assert.equal(e.open, 0, `sbxd kept idle connections of uid ${uids[i]} open`);
    // the ones it took were closed once idle, not before
    const taken = e.closed.filter((t) => t > 1);
    assert.ok(taken.length > 0, `none of the connections of uid ${uids[i]} was taken`);
    for (const t of taken) assert.ok(t >= IDLE_S - 0.5 && t < IDLE_S + 10, `closed after ${t} s`);
  }
  assert.ok(h.sbxd.running);
});

test("a user's status shows that user's own figures only", async () => {
  const r = await asUser(65534, ['status', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const st = JSON.parse(r.stdout);
  process.stdout.write(`# status as uid 65534: ${r.stdout.replace(/\s+/g, ' ')}\n`);
  assert.equal(st.caller_only, true);
  assert.equal(st.pid, 0, 'sbxd\'s pid shown to another user');
  assert.equal(st.state_dir, '', 'the state directory shown to another user');
  assert.equal(st.run_dir, '');
  assert.equal(st.sandboxes, 0, "root's sandbox counted for another user");
  assert.equal(st.clients, 1);
  const text = await asUser(65534, ['status']);
  assert.ok(!text.stdout.includes(h.stateDir) && !text.stdout.includes(`${h.sbxd.pid}`), text.stdout);
  // root sees it all
  const all = JSON.parse((await sbxctl(h.socket, ['status', '--json'])).stdout);
  assert.equal(all.caller_only, false);
  assert.equal(all.pid, h.sbxd.pid);
  assert.equal(all.state_dir, h.stateDir);
  assert.equal(all.sandboxes, 1);
});

test('a broker left idle is closed by sbxd and connects again for its next call', async () => {
  const r1 = await h.mcp.sc('exec_command', { sandbox_id: 'own', cmd: 'echo before' });
  assert.equal(r1.output, 'before\n');
  await sleep((IDLE_S + 1.5) * 1000);
  const r2 = await h.mcp.sc('exec_command', { sandbox_id: 'own', cmd: 'echo after' });
  assert.equal(r2.output, 'after\n');
});
