// Isolation as seen from inside a command: no host secrets, not root on the
// host, no network but lo, only the session's own processes, limits.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { useSbx, outputLines, waitDone, hostProcsMatching, waitFor, T } from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'iso' }, { name: 'small', memory: 64 * 1024 * 1024, pids: 32 }] });
const SB = 'iso';
const exec = (cmd, extra = {}, sandbox_id = SB) => h.mcp.sc('exec_command', { sandbox_id, cmd, ...extra });

h.test('host secrets are not readable: /etc/shadow, /root, /home, sbx state', async () => {
  let r = await exec('cat /etc/shadow');
  assert.equal(r.status, 'error', `/etc/shadow readable:\n${r.output}`);
  assert.ok(!/^root:/m.test(r.output));
  for (const dir of ['/root', '/home']) {
    let hostNames = [];
    try {
      hostNames = fs.readdirSync(dir);
    } catch {}
    r = await exec(`ls -A ${dir} 2>&1; true`);
    const inside = outputLines(r).filter((l) => !/No such file|cannot access|Permission denied/.test(l));
    const leaked = hostNames.filter((n) => inside.includes(n));
    assert.deepEqual(leaked, [], `${dir} host entries visible inside: ${r.output}`);
  }
  r = await exec(`ls ${h.dir} 2>&1; ls /run/sbx 2>&1; ls /var/lib/sbx 2>&1; true`);
  assert.ok(!r.output.includes('sbxd.sock') && !r.output.includes('state'), `sbx state visible:\n${r.output}`);
  r = await exec('ls /etc/ssh/ 2>/dev/null | grep -c _key || true');
  assert.equal(r.output.trim(), '0', 'ssh host keys visible');
});

h.test('uid 0 inside, mapped to a non-zero host uid; no_new_privs; system directories read-only', async () => {
  const r = await exec('id -u; cat /proc/self/uid_map; grep NoNewPrivs /proc/self/status; touch /usr/sbx-probe 2>&1; echo rc=$?');
  const lines = outputLines(r);
  assert.equal(lines[0], '0');
  const maps = lines.slice(1).filter((l) => /^\s*\d+\s+\d+\s+\d+\s*$/.test(l)).map((l) => l.trim().split(/\s+/).map(Number));
  assert.ok(maps.length >= 1, `uid_map: ${r.output}`);
  for (const [inside, outside, count] of maps) {
    if (inside <= 0 && 0 < inside + count) assert.notEqual(outside + (0 - inside), 0, 'uid 0 inside maps to host root');
    assert.ok(!(outside <= 0 && 0 < outside + count), `host uid 0 is mapped: ${r.output}`);
  }
  assert.match(r.output, /NoNewPrivs:\s+1/);
  assert.ok(!r.output.includes('rc=0'), `/usr is writable: ${r.output}`);
  assert.ok(!fs.existsSync('/usr/sbx-probe'));
  // processes of the sandbox run as a non-root host uid, without capabilities
  const s = await exec(`sleep ${T(105)}`, { yield_time_ms: 200, timeout_ms: 1500 });
  assert.equal(s.status, 'running');
  const [p] = await waitFor(() => { const l = hostProcsMatching(`sleep ${T(105)}`); return l.length ? l : null; }, { what: 'sleep' });
  const status = fs.readFileSync(`/proc/${p.pid}/status`, 'utf8');
  const uid = Number(/^Uid:\s+(\d+)/m.exec(status)[1]);
  process.stdout.write(`# a sandbox process runs as host uid ${uid}\n`);
  assert.notEqual(uid, 0);
  // capabilities it may hold are those of its own user namespace, not the host's
  assert.notEqual(fs.readlinkSync(`/proc/${p.pid}/ns/user`), fs.readlinkSync('/proc/self/ns/user'),
    'the command runs in the host user namespace');
  const done = await waitDone(h.mcp, SB, s.command_session_id);
  assert.equal(done.status, 'timed_out');
});

h.test('network: only lo, no route out, the host loopback is unreachable', async () => {
  // A listener on the host's 127.0.0.1: reachable from the host, not from the sandbox.
  const server = net.createServer((c) => { c.end('host-secret\n'); });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const port = server.address().port;
  try {
    const r = await exec([
      'cat /proc/net/dev',
      'echo ROUTES; tail -n +2 /proc/net/route; tail -n +2 /proc/net/ipv6_route 2>/dev/null | grep -v " lo$"; echo END',
      'command -v ip >/dev/null && ip -o link',
    ].join('; '), { timeout_ms: 20000 });
    // /dev/tcp is a bash feature; /bin/sh may be dash, so use bash explicitly too
    const b = await exec(`bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3' 2>&1; echo rc=$?`, { timeout_ms: 20000 });
    const ifaces = outputLines(r).filter((l) => /^\s*[\w.@-]+:\s*\d+\s+\d+\s+\d+/.test(l)).map((l) => l.trim().split(':')[0]);
    assert.deepEqual(ifaces, ['lo'], `interfaces: ${r.output}`);
    const routes = r.output.split('ROUTES\n')[1].split('END')[0].trim();
    assert.equal(routes, '', `routes inside: ${routes}`);
    assert.ok(!r.output.includes('host-secret') && !b.output.includes('host-secret'), 'reached a host listener');
    assert.ok(!b.output.includes('rc=0'), b.output);
    const links = outputLines(r).filter((l) => /^\d+: /.test(l));
    if (links.length) {
      assert.equal(links.length, 1, links.join('\n'));
      assert.match(links[0], /^1: lo: .*UP/, 'lo is up');
    }
    // loopback inside works
    const lo = await exec("bash -c 'exec 3<>/dev/tcp/127.0.0.1/9 2>&1' 2>&1; grep -c . /proc/net/dev");
    assert.ok(lo.output.includes('refused') || lo.output.includes('Connection refused'), `lo up: ${lo.output}`);
  } finally {
    server.close();
  }
});

h.test('processes: a private pid namespace without host or other sessions\' processes', async () => {
  const other = await exec(`sleep ${T(106)}`, { yield_time_ms: 200, timeout_ms: 5000 });
  assert.equal(other.status, 'running');
  const r = await exec('echo pid=$$; for p in /proc/[0-9]*; do echo "$(basename $p) $(tr "\\0" " " < $p/cmdline 2>/dev/null)"; done; command -v ps >/dev/null && ps -eo pid,comm');
  const pid = Number(/pid=(\d+)/.exec(r.output)[1]);
  process.stdout.write(`# shell pid inside: ${pid}\n`);
  assert.ok(pid < 50, `shell pid ${pid} is not in a fresh pid namespace`);
  const procLines = outputLines(r).filter((l) => /^\d+ /.test(l));
  assert.ok(procLines.length < 20, `too many processes visible:\n${r.output}`);
  for (const bad of ['sbxd', 'sandbox-mcp', 'node ', T(106), 'systemd']) {
    assert.ok(!r.output.includes(bad), `visible inside: ${bad}\n${r.output}`);
  }
  const hostPids = fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e)).length;
  assert.ok(hostPids > procLines.length);
  // the other session's command is still there
  assert.ok(hostProcsMatching(`sleep ${T(106)}`).length > 0);
  // kill -9 -1 inside one session reaches nothing outside it
  await h.mcp.call('exec_command', { sandbox_id: SB, cmd: 'kill -9 -1 2>&1; true' });
  assert.ok(hostProcsMatching(`sleep ${T(106)}`).length > 0, 'kill -1 inside one session reached another session');
  const ok = await exec('echo still-serving');
  assert.equal(ok.output, 'still-serving\n');
  const done = await waitDone(h.mcp, SB, other.command_session_id, { timeout: 30000 });
  assert.equal(done.status, 'timed_out');
});

h.test('/dev is minimal: no host block devices, no kmsg or mem', async () => {
  const r = await exec('ls /dev; test -w /dev/null && echo null-ok');
  assert.ok(r.output.includes('null-ok'), r.output);
  assert.ok(!/\bsd[a-z]\b|\bnvme|\bvd[a-z]\b|\bmem\b|\bkmsg\b/.test(r.output), `host devices in /dev: ${r.output}`);
});

h.test('pids limit: a fork bomb is contained', async () => {
  const r = await exec('i=0; while [ $i -lt 100 ]; do sleep 2 & i=$((i+1)); done 2>&1 | head -3; wait; echo survived',
    { timeout_ms: 30000, yield_time_ms: 30000 }, 'small');
  assert.ok(/fork|Resource temporarily unavailable|Cannot fork|retry/i.test(r.output) || r.end_reason === 'pids_limit',
    `100 processes started with pids=32: ${JSON.stringify(r)}`);
  const after = await exec('echo fine', {}, 'small');
  assert.equal(after.output, 'fine\n');
});

h.test('memory limit: a hog is killed with end_reason out_of_memory', async () => {
  const r = await exec("awk 'BEGIN { s = \"xxxxxxxxxxxxxxxx\"; while (1) { s = s s } }'", { timeout_ms: 30000, yield_time_ms: 30000 }, 'small');
  process.stdout.write(`# memory hog: status ${r.status} end_reason ${r.end_reason} signal ${r.signal}\n`);
  assert.notEqual(r.status, 'ok');
  assert.notEqual(r.status, 'timed_out', 'the hog ran until the timeout');
  assert.ok(r.end_reason === 'out_of_memory' || r.signal === 9, JSON.stringify(r));
  const after = await exec('echo fine', {}, 'small');
  assert.equal(after.output, 'fine\n');
});
