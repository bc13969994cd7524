// The isolation battery, egress (docs/egress.md, sbx-egress(8)): a sandbox's
// DNS and raw sockets get no way out whatever its policy; the proxy cannot be
// used to scan the host's ports (open and closed ports of the host look the
// same: refused, before any connection); and clients that send their request
// one byte a second are dropped after the handshake time without holding up
// another sandbox's egress.
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { Harness, sbxctl, writeFixture, tail } from '../integration/helpers.mjs';
import { useBattery } from './common.mjs';

const target = await new Promise((resolve) => {
  const seen = [];
  const srv = http.createServer((req, res) => { seen.push(req.url); res.end('target-ok\n'); });
  srv.on('connection', () => seen.push('connection'));
  srv.listen(0, '127.0.0.2', () => resolve({ srv, seen, port: srv.address().port }));
});
const TARGET = `127.0.0.2:${target.port}`;

const { h, test } = useBattery({
  sandboxes: [],
  config: '[sbxd]\negress_user = nobody\negress_allow_private = yes\n',
});

async function createSandbox(hh, name, egress) {
  const src = `${hh.dir}/src-${name}`;
  await writeFixture(src);
  const r = await sbxctl(hh.socket, ['sandbox', 'create', name, '--source', src, '--egress', egress]);
  assert.equal(r.code, 0, `${r.stderr}\n${tail(hh.sbxdLog)}`);
}

const py = (code) => `python3 - <<'EOF'\n${code}\nEOF`;

test('DNS and raw sockets have no way out, whatever the policy', async () => {
  await createSandbox(h, 'sec-open', 'open');
  const sc = await h.mcp.sc('exec_command', { sandbox_id: 'sec-open', yield_time_ms: 30000, cmd: py(`
import socket
def attempt(name, f):
    try:
        f()
        print(name, "reached")
    except OSError as e:
        print(name, "failed", e.errno)
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(b"\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01", ("1.1.1.1", 53))
    s.recvfrom(512)
def tcp53():
    socket.create_connection(("8.8.8.8", 53), timeout=2)
def raw():
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.sendto(b"\\x08\\x00\\xf7\\xff\\x00\\x00\\x00\\x00", ("1.1.1.1", 0))
def packet():
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0x0300)
    s.bind(("eth0", 0))
def name():
    socket.getaddrinfo("example.com", 80)
for n, f in [("udp53", udp), ("tcp53", tcp53), ("raw", raw), ("packet", packet), ("name", name)]:
    attempt(n, f)
`) });
  for (const n of ['udp53', 'tcp53', 'raw', 'packet', 'name']) assert.match(sc.output, new RegExp(`^${n} failed`, 'm'), sc.output);
  assert.doesNotMatch(sc.output, /reached/);
  // The proxy refuses to be a way to the sandbox's own (other) loopback ports or to anything but TCP.
  assert.deepEqual(sc.egress, { policy: 'open', contacted: [], refused: [] });
});

test('the proxy is no port scanner of the host: open and closed ports look the same, nothing is connected', async () => {
  const d = await Harness.create({ sandboxes: [], config: '[sbxd]\negress_user = nobody\n' });
  try {
    await createSandbox(d, 'sec-scan', 'open');
    const closed = await new Promise((resolve) => {
      const s = net.createServer();
      s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
    });
    const own = Object.values(os.networkInterfaces()).flat()
      .find((i) => i.family === 'IPv4' && !i.internal)?.address;
    const ports = [`127.0.0.2:${target.port}`, `127.0.0.1:${closed}`, '127.0.0.1:22', '[::1]:22',
      ...(own ? [`${own}:${target.port}`, `${own}:22`] : [])];
    const before = target.seen.length;
    const sc = await d.mcp.sc('exec_command', { sandbox_id: 'sec-scan', yield_time_ms: 30000, cmd: py(`
import socket
for t in ${JSON.stringify(ports)}:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    s.sendall(("CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n" % (t, t)).encode())
    print(t, s.recv(4096).split(b"\\r\\n")[0].decode(), s.recv(4096) == b"" or "more")
`) });
    const lines = sc.output.trim().split('\n');
    assert.equal(lines.length, ports.length, sc.output);
    for (const l of lines) assert.match(l, / HTTP\/1\.1 403 Forbidden True$/, sc.output);
    assert.equal(target.seen.length, before, 'the host service saw a connection');
    assert.deepEqual(sc.egress.contacted, []);
    assert.equal(sc.egress.refused.length, ports.length);
  } finally {
    await d.teardown();
  }
});

test('slowloris: one byte a second is dropped at the handshake time and never stalls another sandbox', async () => {
  await createSandbox(h, 'sec-slow', 'open');
  await createSandbox(h, 'sec-fast', 'open');
  const slow = h.mcp.sc('exec_command', { sandbox_id: 'sec-slow', yield_time_ms: 30000, timeout_ms: 60000, cmd: py(`
import socket, threading, time
head = b"GET http://${TARGET}/slow HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"
dropped = []
def client(i):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    for n, b in enumerate(head):
        try:
            s.sendall(bytes([b]))
        except OSError:
            dropped.append(n); return
        s.settimeout(1.0)
        try:
            if s.recv(1) == b"":
                dropped.append(n); return
        except socket.timeout:
            pass
        except OSError:  # reset by the proxy: dropped too
            dropped.append(n); return
    dropped.append(None)
ts = [threading.Thread(target=client, args=(i,)) for i in range(32)]
[t.start() for t in ts]
[t.join() for t in ts]
print("dropped", sum(1 for d in dropped if d is not None), "of", len(dropped), "max bytes", max(d or 0 for d in dropped))
`) });
  // Meanwhile another sandbox's requests go through, several times.
  await new Promise((r) => setTimeout(r, 2000));
  for (let i = 0; i < 5; i++) {
    const fast = await h.mcp.sc('exec_command', { sandbox_id: 'sec-fast', yield_time_ms: 30000,
      cmd: `curl -sS -m 5 http://${TARGET}/fast${i}` });
    assert.equal(fast.output, 'target-ok\n', fast.output);
  }
  const s = await slow;
  assert.match(s.output, /^dropped 32 of 32 max bytes (\d+)$/m, s.output);
  const sent = Number(/max bytes (\d+)/.exec(s.output)[1]);
  assert.ok(sent < 30, `a slow client sent ${sent} bytes before it was dropped`);
  assert.ok(!target.seen.includes('/slow'));
});

test('after all: the target server goes', async () => {
  target.srv.close();
});
