// Egress policies (docs/egress.md): none, package-managers and open, through
// sbx-egress, against a fake registry and a fake other host that this test
// starts on the host's loopback (127.0.0.2 and 127.0.0.3: the sandboxes'
// no_proxy names 127.0.0.1 only), with egress_allow_private = yes; then a
// second sbxd with the default settings, which refuses loopback, link-local
// and private addresses. Clients inside: curl (plain HTTP and CONNECT),
// python's urllib, npm view and pip index, configured by the proxy variables alone.
import assert from 'node:assert/strict';
import http from 'node:http';
import { Harness, useSbx, sbxctl, writeFixture, tail } from './helpers.mjs';

// The fake registry answers npm's package document and any other path; the
// other host answers anything. Each remembers what it was asked.
function server(addr, name) {
  const seen = [];
  const srv = http.createServer((req, res) => {
    seen.push(req.url);
    if (name === 'registry' && req.url === '/demo-pkg') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ name: 'demo-pkg', 'dist-tags': { latest: '1.2.3' },
        versions: { '1.2.3': { name: 'demo-pkg', version: '1.2.3' } } }));
      return;
    }
    if (name === 'registry' && req.url === '/simple/demo-pkg/') {
      res.setHeader('content-type', 'text/html');
      res.end('<html><body><a href="/files/demo_pkg-1.2.3.tar.gz">demo_pkg-1.2.3.tar.gz</a></body></html>\n');
      return;
    }
    res.end(`${name}-ok ${req.url}\n`);
  });
  return new Promise((resolve) => srv.listen(0, addr, () => resolve({ srv, seen, port: srv.address().port })));
}

const registry = await server('127.0.0.2', 'registry');
const other = await server('127.0.0.3', 'other');
const REG = `127.0.0.2:${registry.port}`;
const OTHER = `127.0.0.3:${other.port}`;

const h = useSbx({
  sandboxes: [],
  config: `[sbxd]\negress_user = nobody\negress_allow_private = yes\negress_package_hosts = ${REG}\n` +
    '[template pm]\negress = package-managers\n',
});

async function createSandbox(hh, name, egress) {
  const src = `${hh.dir}/src-${name}`;
  await writeFixture(src);
  const args = ['sandbox', 'create', name, '--source', src, ...(egress ? ['--egress', egress] : [])];
  const r = await sbxctl(hh.socket, args);
  assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}\n${tail(hh.sbxdLog)}`);
}

const exec = (sandbox_id, cmd) => h.mcp.sc('exec_command', { sandbox_id, cmd, yield_time_ms: 30000 });
const curl = (url, extra = '') => `curl -sS -m 10 ${extra} ${url} 2>&1; echo "rc=$?"`;

h.test('sandbox create --egress: the policy is shown; an unknown one gets the allowlist error', async () => {
  await createSandbox(h, 'eg-none');
  await createSandbox(h, 'eg-pm', 'package-managers');
  await createSandbox(h, 'eg-open', 'open');
  const show = await sbxctl(h.socket, ['sandbox', 'show', 'eg-pm']);
  assert.match(show.stdout, /^egress: package-managers$/m);
  const json = JSON.parse((await sbxctl(h.socket, ['--json', 'sandbox', 'show', 'eg-none'])).stdout);
  assert.equal(json.egress, 'none');
  const bad = await sbxctl(h.socket, ['sandbox', 'create', 'eg-bad', '--source', `${h.dir}/src-eg-none`,
    '--egress', 'everything']);
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /egress mode "everything" is not in the allowlist \(none, package-managers, open\)/);
});

h.test('none: no proxy variables, and neither host is reachable', async () => {
  const before = registry.seen.length + other.seen.length;
  const sc = await exec('eg-none', `env | grep -ci proxy; ${curl(`http://${REG}/a`)}; ` +
    `${curl(`http://${OTHER}/b`)}; ${curl(`http://${REG}/c`, '-x http://127.0.0.1:3128')}`);
  const lines = sc.output.trim().split('\n');
  assert.equal(lines[0], '0', sc.output);
  assert.equal((sc.output.match(/rc=0/g) ?? []).length, 0, sc.output);
  assert.equal(registry.seen.length + other.seen.length, before);
  assert.equal(sc.egress ?? null, null);
});

h.test('package-managers: the registry only, by curl, CONNECT, urllib, npm and pip; the audit lists both', async () => {
  const sc = await exec('eg-pm', [
    'echo "proxy=$http_proxy"',
    curl(`http://${REG}/simple/`),
    curl(`http://${REG}/tunnel`, '-p'),
    `python3 -c "import urllib.request; print(urllib.request.urlopen('http://${REG}/py').read().decode().strip())"`,
    `npm view demo-pkg version --registry http://${REG}/ 2>&1 | tail -1`,
    `pip index versions demo-pkg --index-url http://${REG}/simple/ --trusted-host 127.0.0.2 --no-cache-dir ` +
      '--disable-pip-version-check 2>&1 | grep -v WARNING | head -1',
    curl(`http://${OTHER}/nope`, '-f'),
  ].join('; '));
  assert.match(sc.output, /^proxy=http:\/\/127\.0\.0\.1:3128$/m);
  assert.match(sc.output, /registry-ok \/simple\/\nrc=0/);
  assert.match(sc.output, /registry-ok \/tunnel\nrc=0/);
  assert.match(sc.output, /registry-ok \/py/);
  assert.match(sc.output, /^1\.2\.3$/m);
  assert.match(sc.output, /^demo-pkg \(1\.2\.3\)$/m);
  assert.match(sc.output, /403/);
  assert.ok(!other.seen.includes('/nope'), 'the other host was reached');
  assert.deepEqual(sc.egress, { policy: 'package-managers', contacted: [REG], refused: [OTHER] });
});

h.test('open: both hosts; the audit lists exactly what was contacted', async () => {
  const sc = await exec('eg-open', `${curl(`http://${REG}/r`)}; ${curl(`http://${OTHER}/o`)}; ` +
    `${curl(`http://${OTHER}/o2`)}`);
  assert.match(sc.output, /registry-ok \/r\nrc=0/);
  assert.match(sc.output, /other-ok \/o\nrc=0/);
  assert.deepEqual(sc.egress, { policy: 'open', contacted: [REG, OTHER], refused: [] });
  // Kept with the command's record once its (automatic) session is gone: sbxctl command show.
  const show = await sbxctl(h.socket, ['--json', 'command', 'show', 'eg-open', sc.command_session_id]);
  assert.equal(show.code, 0, show.stderr);
  assert.deepEqual(JSON.parse(show.stdout).egress, { policy: 'open', contacted: [REG, OTHER], refused: [], truncated: false });
  const text = await sbxctl(h.socket, ['command', 'show', 'eg-open', sc.command_session_id]);
  assert.match(text.stdout, new RegExp(`^egress: open\n  contacted: ${REG} ${OTHER}\n  refused:$`, 'm'));
  const none = await exec('eg-none', 'true');
  const ns = await sbxctl(h.socket, ['--json', 'command', 'show', 'eg-none', none.command_session_id]);
  assert.equal(JSON.parse(ns.stdout).egress, undefined);
});

h.test('lifecycle set: a template\'s egress policy, and execute_command\'s audit; sbxctl template show', async () => {
  const lc = await h.connect({ argv: ['--set', 'lifecycle', '--socket', h.socket] });
  const t = await sbxctl(h.socket, ['template', 'show', 'pm', '--json']);
  assert.equal(JSON.parse(t.stdout).egress, 'package-managers');
  const c = await lc.sc('create_sandbox', { warmpool: 'pm' });
  const r = await lc.sc('execute_command', { sandbox_claim_name: c.sandbox_claim_name,
    command: `${curl(`http://${REG}/lc`)}; ${curl(`http://${OTHER}/lc`, '-f')}` });
  assert.match(r.stdout, /registry-ok \/lc\nrc=0/);
  assert.match(r.stdout, /rc=22/);
  assert.deepEqual(r.egress, { policy: 'package-managers', contacted: [REG], refused: [OTHER] });
  await lc.sc('delete_sandbox', { sandbox_claim_name: c.sandbox_claim_name });
});

h.test('default settings: the host\'s loopback services, link-local and private addresses are refused', async () => {
  const d = await Harness.create({ sandboxes: [], config: '[sbxd]\negress_user = nobody\n' });
  try {
    await createSandbox(d, 'eg-default', 'open');
    const mcp = d.mcp;
    const targets = [`http://${REG}/x`, 'http://169.254.169.254/latest/meta-data/', 'http://10.1.2.3/',
      'http://192.168.1.1/', 'http://[::1]:22/'];
    const sc = await mcp.sc('exec_command', { sandbox_id: 'eg-default', yield_time_ms: 30000,
      cmd: targets.map((u) => curl(u, '-f')).join('; ') });
    assert.equal((sc.output.match(/rc=22/g) ?? []).length, targets.length, sc.output);
    assert.ok(!registry.seen.includes('/x'));
    assert.deepEqual(sc.egress.contacted, []);
    assert.deepEqual(sc.egress.refused.sort(),
      [REG, '169.254.169.254:80', '10.1.2.3:80', '192.168.1.1:80', '[::1]:22'].sort());
  } finally {
    await d.teardown();
  }
});

h.test('after all: the servers go', async () => {
  registry.srv.close();
  other.srv.close();
});
