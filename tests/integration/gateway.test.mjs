// sbx-gateway (issue 20): the broker's tools over MCP Streamable HTTP, with
// the official SDK client's StreamableHTTPClientTransport. Tokens (valid,
// wrong, revoked during a session, expired, another owner's sandbox), every
// tool set and a token's sets, Origin and Host, the body and rate limits,
// 200 concurrent sessions, a client that goes away during a call, and the
// gateway restarted while sbxd keeps the sandboxes. The gateway runs as its
// own unprivileged uid, which sbxd.conf names as gateway_user.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { after } from 'node:test';
import { BIN, ROOT, TMP_PREFIX, useSbx, sbxctl, sleep, tail, waitFor, writeFixture } from './helpers.mjs';

const GATEWAY = path.join(BIN, 'sbx-gateway');
const GW_UID = 65532;
const OWNER = 65534;
const OTHER = 65533;

// The python image for the script set's job notifications (the Last-Event-ID test).
const CACHE = process.env.SBX_IMAGE_CACHE ?? '/var/cache/sbx-ci/images/archives';
fs.mkdirSync(CACHE, { recursive: true });
const IMAGES = fs.mkdtempSync(TMP_PREFIX + 'gateway-images-');
fs.copyFileSync(path.join(ROOT, 'dist/images.d/python.conf'), path.join(IMAGES, 'python.conf'));
fs.chmodSync(path.join(IMAGES, 'python.conf'), 0o644);
after(() => fs.rmSync(IMAGES, { recursive: true, force: true }));

const h = useSbx({ sandboxes: [], world: true, connect: false,
  config: `[sbxd]\ngateway_user = ${GW_UID}\nimages_dir = ${IMAGES}\nimage_cache_dir = ${CACHE}\n` +
    'box_image = default\nbox_spares = 0\n' +
    '[template default]\nwarm = 0\n' });

/* An sbx-gateway on a port the kernel picks, as GW_UID. */
class Gateway {
  constructor(name, conf, listen = ['127.0.0.1:0']) {
    this.name = name;
    this.conf = conf;
    this.listen = listen;
  }

  async start() {
    const dir = h.dir;
    this.confPath = path.join(dir, `${this.name}.conf`);
    fs.writeFileSync(this.confPath, `[gateway]\n${this.conf}`);
    fs.chmodSync(this.confPath, 0o644);
    this.logPath = path.join(h.logDir, `${this.name}.log`);
    const log = fs.openSync(this.logPath, 'a');
    this.proc = spawn(GATEWAY, ['--config', this.confPath, ...this.listen.flatMap((l) => ['--listen', l]),
      '--socket', h.socket, '--log-level', 'debug'], { uid: GW_UID, gid: GW_UID, stdio: ['ignore', log, log] });
    fs.closeSync(log);
    this.exited = new Promise((r) => this.proc.on('exit', (code, signal) => r({ code, signal })));
    const ports = await waitFor(() => {
      const all = [...fs.readFileSync(this.logPath, 'utf8').matchAll(/Listening on 127\.0\.0\.1:(\d+)/g)].map((x) => x[1]);
      return all.length >= this.listen.length && all;
    }, { what: `${this.name} listening` });
    const scheme = /tls_certificate/.test(this.conf) ? 'https' : 'http';
    this.urls = ports.map((port) => `${scheme}://127.0.0.1:${port}/mcp`);
    this.url = this.urls[0];
    return this;
  }

  async stop() {
    if (!this.proc) return null;
    this.proc.kill('SIGTERM');
    const r = await this.exited;
    this.proc = null;
    fs.writeFileSync(this.logPath, fs.readFileSync(this.logPath, 'utf8').replace(/Listening on/g, 'Listened on'));
    return r;
  }
}

let gw;
let rateGw;
const tokens = {};

async function token(args) {
  const r = await sbxctl(h.socket, ['token', 'create', ...args]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim();
}

async function connect(tok, { url = gw.url } = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(url),
    { requestInit: { headers: { Authorization: `Bearer ${tok}` } } });
  const client = new Client({ name: 'gateway-test', version: '0.0.1' }, { capabilities: {} });
  await client.connect(transport);
  const listed = await client.listTools();
  return { client, transport, tools: listed.tools.map((t) => t.name) };
}

async function call(s, name, args) {
  return s.client.callTool({ name, arguments: args }, undefined, { timeout: 90000 });
}

async function sc(s, name, args) {
  const r = await call(s, name, args);
  assert.ok(!r.isError, `${name}: ${JSON.stringify(r.content)}`);
  return r.structuredContent;
}

/* A raw POST: the status, headers and text of the answer. */
async function post(body, { tok, sid, headers = {}, url = gw.url } = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
      ...(tok ? { Authorization: `Bearer ${tok}` } : {}), ...(sid ? { 'Mcp-Session-Id': sid } : {}), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

async function rawSession(tok) {
  const r = await post(INIT, { tok });
  assert.equal(r.status, 200, r.text);
  return r.headers.get('mcp-session-id');
}

h.test('setup: sandboxes of two owners, tokens, a gateway', async () => {
  for (const [name, owner] of [['mine', OWNER], ['theirs', OTHER]]) {
    const src = path.join(h.dir, `src-${name}`);
    await writeFixture(src);
    const r = await sbxctl(h.socket, ['sandbox', 'create', name, '--source', src, '--owner', String(owner)]);
    assert.equal(r.code, 0, r.stderr);
  }
  tokens.all = await token(['--owner', String(OWNER), '--name', 'all']);
  tokens.runtime = await token(['--owner', String(OWNER), '--name', 'runtime-only', '--sets', 'runtime']);
  assert.match(tokens.all, /^sbx_pat_[0-9a-f]{64}$/);
  const j = await sbxctl(h.socket, ['--json', 'token', 'create', '--owner', String(OWNER), '--name', 'json']);
  assert.deepEqual(Object.keys(JSON.parse(j.stdout)).sort(), ['id', 'name', 'token']);
  // sbx.db keeps the hash, never the secret.
  assert.ok(!fs.readFileSync(path.join(h.stateDir, 'sbx.db')).includes(Buffer.from(tokens.all)));
  gw = await new Gateway('gateway', 'requests_per_second = 2000\nmax_body_bytes = 65536\n').start();
  rateGw = await new Gateway('gateway-rate', 'requests_per_second = 2\n').start();
});

h.test('a valid token: every tool set, a command in the owner\'s sandbox as root inside', async () => {
  const s = await connect(tokens.all);
  for (const t of ['exec_command', 'file_read', 'list_sandboxes', 'create_workspace_session', 'create_sandbox',
    'execute_command']) assert.ok(s.tools.includes(t), `${t} listed`);
  const r = await sc(s, 'exec_command', { sandbox_id: 'mine', cmd: 'echo over-http; id -u' });
  assert.equal(r.output, 'over-http\n0\n');
  const l = await sc(s, 'list_sandboxes', {});
  assert.deepEqual(l.sandboxes.map((x) => x.sandbox_id ?? x.name).sort(), ['mine']);
  const ws = await sc(s, 'create_workspace_session', { sandbox_id: 'mine' });
  assert.ok(ws.workspace_session_id);
  const c = await sc(s, 'create_sandbox', {});
  const e = await sc(s, 'execute_command', { sandbox_claim_name: c.sandbox_claim_name, command: 'echo claimed' });
  assert.equal(e.stdout, 'claimed\n');
  await sc(s, 'delete_sandbox', { sandbox_claim_name: c.sandbox_claim_name });
  await s.transport.terminateSession();
  await s.client.close();
});

h.test('token create refuses sets whose tool names clash, naming the tool, and unknown sets', async () => {
  const clash = await sbxctl(h.socket, ['token', 'create', '--owner', String(OWNER), '--name', 'clash', '--sets',
    'runtime,script,boxes']);
  assert.equal(clash.code, 2, clash.stderr);
  assert.equal(clash.stdout, '');
  assert.match(clash.stderr, /the sets script and boxes both define the tool sandbox_status/);
  const unknown = await sbxctl(h.socket, ['token', 'create', '--owner', String(OWNER), '--sets', 'runtime,nosuch']);
  assert.equal(unknown.code, 2, unknown.stderr);
  assert.match(unknown.stderr, /unknown tool set 'nosuch'/);
  assert.doesNotMatch((await sbxctl(h.socket, ['token', 'list'])).stdout, /clash/);
  // Each of the two alone is taken.
  for (const set of ['script', 'boxes']) {
    const r = await sbxctl(h.socket, ['token', 'create', '--owner', String(OWNER), '--name', `only-${set}`, '--sets', set]);
    assert.equal(r.code, 0, r.stderr);
  }
});

h.test('token list with more tokens than a request owned blocks (sbxd aborted on 7)', async () => {
  for (let i = 0; i < 10; i++)
    assert.equal((await sbxctl(h.socket, ['token', 'create', '--owner', String(OWNER), '--name', `many-${i}`])).code, 0);
  const list = await sbxctl(h.socket, ['--json', 'token', 'list']);
  assert.equal(list.code, 0, list.stderr);
  const names = JSON.parse(list.stdout).map((t) => t.name);
  for (const n of ['all', 'runtime-only', 'only-boxes', 'many-0', 'many-9']) assert.ok(names.includes(n), n);
  for (let i = 0; i < 10; i++) assert.equal((await sbxctl(h.socket, ['token', 'revoke', `many-${i}`])).code, 0);
});

h.test('a token\'s sets: only those tools', async () => {
  const s = await connect(tokens.runtime);
  assert.ok(s.tools.includes('exec_command'));
  assert.ok(!s.tools.includes('list_sandboxes') && !s.tools.includes('create_sandbox'));
  await s.client.close();
});

h.test('another owner\'s sandbox is refused', async () => {
  const s = await connect(tokens.all);
  const r = await call(s, 'exec_command', { sandbox_id: 'theirs', cmd: 'true' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /belongs to another user/);
  await s.client.close();
});

h.test('no token, a wrong token: 401 with WWW-Authenticate: Bearer and nothing else', async () => {
  for (const tok of [null, 'sbx_pat_' + '0'.repeat(64), 'nonsense']) {
    const r = await post(INIT, { tok });
    assert.equal(r.status, 401);
    assert.equal(r.headers.get('www-authenticate'), 'Bearer');
    assert.equal(r.text, '');
  }
  await assert.rejects(connect('sbx_pat_' + '1'.repeat(64)));
});

h.test('a token revoked during a session: its next request gets 401', async () => {
  const tok = await token(['--owner', String(OWNER), '--name', 'revoked']);
  const s = await connect(tok);
  const s2 = await connect(tok);
  // Both sessions' sbxd connections are open: their requests are taken without a TOKEN_CHECK.
  await sc(s, 'exec_command', { sandbox_id: 'mine', cmd: 'true' });
  await sc(s2, 'exec_command', { sandbox_id: 'mine', cmd: 'true' });
  const sid = s.transport.sessionId;
  const before = await post({ jsonrpc: '2.0', id: 8, method: 'ping' }, { tok, sid });
  assert.equal(before.status, 200, before.text);
  assert.equal((await sbxctl(h.socket, ['token', 'revoke', 'revoked'])).code, 0);
  // Requests the gateway answers itself (ping, tools/list, GET) as well as tool calls.
  const r = await post({ jsonrpc: '2.0', id: 9, method: 'ping' }, { tok, sid });
  assert.equal(r.status, 401);
  const l = await post({ jsonrpc: '2.0', id: 10, method: 'tools/list' }, { tok, sid: s2.transport.sessionId });
  assert.equal(l.status, 401);
  const g = await fetch(gw.url, { method: 'GET', headers: { Accept: 'text/event-stream', Authorization: `Bearer ${tok}`,
    'Mcp-Session-Id': s2.transport.sessionId } });
  assert.equal(g.status, 401);
  await g.body?.cancel();
  await assert.rejects(call(s, 'exec_command', { sandbox_id: 'mine', cmd: 'true' }));
  await s.client.close().catch(() => {});
  await s2.client.close().catch(() => {});
});

h.test('a token that expires during a session with an open sbxd connection: its next request gets 401', async () => {
  const tok = await token(['--owner', String(OWNER), '--expires', '3s']);
  const s = await connect(tok);
  await sc(s, 'exec_command', { sandbox_id: 'mine', cmd: 'true' });
  const sid = s.transport.sessionId;
  assert.equal((await post({ jsonrpc: '2.0', id: 1, method: 'ping' }, { tok, sid })).status, 200);
  await waitFor(async () => (await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, { tok, sid })).status === 401,
    { what: 'the token past its expiry refused', timeout: 20000, interval: 200 });
  const list = await sbxctl(h.socket, ['token', 'list']);
  assert.match(list.stdout, /\(expired\)/);
  await s.client.close().catch(() => {});
});

h.test('an expired token: 401', async () => {
  const tok = await token(['--owner', String(OWNER), '--expires', '2s']);
  const sid = await rawSession(tok);
  await sleep(2500);
  assert.equal((await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, { tok, sid })).status, 401);
  assert.equal((await post(INIT, { tok })).status, 401);
  const list = await sbxctl(h.socket, ['token', 'list']);
  assert.match(list.stdout, /\(expired\)/);
});

h.test('a session is its token\'s: another token gets 404 for it', async () => {
  const sid = await rawSession(tokens.all);
  const r = await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, { tok: tokens.runtime, sid });
  assert.equal(r.status, 404);
  assert.equal((await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, { tok: tokens.all, sid })).status, 200);
  const del = await fetch(gw.url, { method: 'DELETE', headers: { Authorization: `Bearer ${tokens.all}`, 'Mcp-Session-Id': sid } });
  assert.equal(del.status, 200);
  assert.equal((await post({ jsonrpc: '2.0', id: 3, method: 'ping' }, { tok: tokens.all, sid })).status, 404);
});

h.test('Origin and Host: another site is refused (403), a loopback origin is not', async () => {
  assert.equal((await post(INIT, { tok: tokens.all, headers: { Origin: 'http://evil.example' } })).status, 403);
  // fetch() sets Host itself: node:http sends the one a rebound DNS name would bring.
  const hostStatus = await new Promise((resolve, reject) => {
    const u = new URL(gw.url);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
      headers: { Host: `evil.example:${u.port}`, Authorization: `Bearer ${tokens.all}`, 'Content-Type': 'application/json' } },
    (res) => { res.resume(); resolve(res.statusCode); });
    req.on('error', reject);
    req.end(JSON.stringify(INIT));
  });
  assert.equal(hostStatus, 403);
  assert.equal((await post(INIT, { tok: tokens.all, headers: { Origin: 'http://localhost:3000' } })).status, 200);
});

h.test('the body limit (413) and a bad MCP-Protocol-Version (400)', async () => {
  const sid = await rawSession(tokens.all);
  const big = JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'ping', params: { pad: 'x'.repeat(70000) } });
  assert.equal((await post(big, { tok: tokens.all, sid })).status, 413);
  const r = await post({ jsonrpc: '2.0', id: 6, method: 'ping' },
    { tok: tokens.all, sid, headers: { 'MCP-Protocol-Version': '1999-01-01' } });
  assert.equal(r.status, 400);
  assert.equal((await post({ jsonrpc: '2.0', id: 7, method: 'ping' }, { tok: tokens.all })).status, 400);
});

h.test('the rate limit: 429 with Retry-After', async () => {
  const statuses = [];
  let retry = null;
  for (let i = 0; i < 12; i++) {
    const r = await post(INIT, { tok: tokens.all, url: rateGw.url });
    statuses.push(r.status);
    if (r.status === 429) retry = r.headers.get('retry-after');
  }
  assert.ok(statuses.includes(200) && statuses.includes(429), statuses.join(' '));
  assert.match(retry, /^\d+$/);
});

h.test('sessions_per_token (429 with Retry-After) and session_idle_seconds (an idle session ends)', async () => {
  const lim = await new Gateway('gateway-limits', 'sessions_per_token = 2\nsession_idle_seconds = 2\n').start();
  try {
    const tok = tokens.all;
    const sids = [];
    for (let i = 0; i < 2; i++) {
      const r = await post(INIT, { tok, url: lim.url });
      assert.equal(r.status, 200, r.text);
      sids.push(r.headers.get('mcp-session-id'));
    }
    const third = await post(INIT, { tok, url: lim.url });
    assert.equal(third.status, 429, third.text);
    assert.match(third.headers.get('retry-after'), /^\d+$/);
    assert.match(third.text, /Too many sessions for this token/);
    // Another token has sessions of its own.
    assert.equal((await post(INIT, { tok: tokens.runtime, url: lim.url })).status, 200);
    // Idle for 2 s (no request on them: one would keep them), the two end (404), and the
    // token may open sessions again.
    for (const sid of sids)
      await waitFor(() => new RegExp(`MCP session ${sid} idle for 2 s, ending it`).test(fs.readFileSync(lim.logPath, 'utf8')),
        { what: 'the idle session ended', timeout: 20000, interval: 200 });
    assert.equal((await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, { tok, sid: sids[0], url: lim.url })).status, 404);
    await waitFor(async () => (await post(INIT, { tok, url: lim.url })).status === 200,
      { what: 'a new session once the idle ones ended', timeout: 20000, interval: 500 });
  } finally {
    assert.equal((await lim.stop()).code, 0, tail(lim.logPath));
  }
});

h.test('socket activation: the listening socket from systemd (LISTEN_FDS)', async () => {
  const port = 20000 + (process.pid % 20000);
  const logPath = path.join(h.logDir, 'gateway-activated.log');
  const log = fs.openSync(logPath, 'a');
  const proc = spawn('systemd-socket-activate', ['-l', `127.0.0.1:${port}`, GATEWAY, '--config', gw.confPath,
    '--socket', h.socket, '--log-level', 'debug'], { uid: GW_UID, gid: GW_UID, stdio: ['ignore', log, log] });
  fs.closeSync(log);
  const exited = new Promise((r) => proc.on('exit', (code, signal) => r({ code, signal })));
  try {
    const url = `http://127.0.0.1:${port}/mcp`;
    // systemd-socket-activate listens first, then starts the gateway at the first connection.
    await waitFor(() => /Listening on 127\.0\.0\.1:\d+ as 3/.test(fs.readFileSync(logPath, 'utf8')), { what: 'the activator listening' });
    const r = await post(INIT, { tok: tokens.all, url });
    assert.equal(r.status, 200, r.text);
    assert.match(fs.readFileSync(logPath, 'utf8'), /Serving on 1 socket\(s\) from systemd/);
    const s = await connect(tokens.all, { url });
    assert.equal((await sc(s, 'exec_command', { sandbox_id: 'mine', cmd: 'echo activated' })).output, 'activated\n');
    await s.client.close();
  } finally {
    proc.kill('SIGTERM');
    assert.equal((await exited).code, 0, tail(logPath));
  }
});

h.test('200 concurrent sessions', async () => {
  const sessions = await Promise.all(Array.from({ length: 200 }, () => connect(tokens.all)));
  const reads = await Promise.all(sessions.map((s) => sc(s, 'file_read', { sandbox_id: 'mine', path: 'README.md' })));
  assert.equal(new Set(sessions.map((s) => s.transport.sessionId)).size, 200);
  assert.ok(reads.every((r) => r.content === reads[0].content));
  await Promise.all(sessions.map(async (s) => {
    await s.transport.terminateSession();
    await s.client.close();
  }));
}, { timeout: 300000 });

h.test('a client that goes away during a call: the call is cancelled, the gateway serves on', async () => {
  const sid = await rawSession(tokens.all);
  const ac = new AbortController();
  const p = fetch(gw.url, {
    method: 'POST', signal: ac.signal,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${tokens.all}`, 'Mcp-Session-Id': sid },
    body: JSON.stringify({ jsonrpc: '2.0', id: 11, method: 'tools/call',
      params: { name: 'exec_command', arguments: { sandbox_id: 'mine', cmd: 'sleep 20', yield_time_ms: 30000 } } }),
  });
  await sleep(700);
  ac.abort();
  await assert.rejects(p);
  await waitFor(() => /the client of a call went away/.test(fs.readFileSync(gw.logPath, 'utf8')),
    { timeout: 5000, what: 'the cancellation' });
  const r = await post({ jsonrpc: '2.0', id: 12, method: 'ping' }, { tok: tokens.all, sid });
  assert.equal(r.status, 200);
});

h.test('sbx-gateway restarted while sbxd keeps the sandboxes', async () => {
  const s = await connect(tokens.all);
  await sc(s, 'exec_command', { sandbox_id: 'mine', cmd: 'echo kept > kept.txt' });
  const oldSid = s.transport.sessionId;
  await s.client.close();
  const stopped = await gw.stop();
  assert.equal(stopped.code, 0, tail(gw.logPath));
  await gw.start();
  assert.equal((await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, { tok: tokens.all, sid: oldSid })).status, 404);
  const s2 = await connect(tokens.all);
  const r = await sc(s2, 'exec_command', { sandbox_id: 'mine', cmd: 'cat kept.txt' });
  assert.equal(r.output, 'kept\n');
  await s2.client.close();
});

/* A self-signed certificate for 127.0.0.1: [certPath, keyPath, its SHA-256 fingerprint as Node prints it]. */
function makeCert(name) {
  const cert = path.join(h.dir, `${name}.crt`);
  const key = path.join(h.dir, `${name}.key`);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-subj', `/CN=${name}`, '-days', '1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
  const fp = execFileSync('openssl', ['x509', '-in', cert, '-noout', '-fingerprint', '-sha256']).toString()
    .trim().replace(/^.*=/, '');
  return [cert, key, fp];
}

/* A POST over TLS (any certificate): status, body and the server certificate's fingerprint. */
function tlsPost(url, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = https.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', rejectUnauthorized: false,
      agent: false, headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers } },
    (res) => {
      const fp = res.socket.getPeerCertificate().fingerprint256;
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text, fp }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

h.test('TLS in the gateway: served with the configured certificate, reloaded on SIGHUP, sessions kept', async () => {
  const [certA, keyA, fpA] = makeCert('tls-a');
  const [certB, keyB, fpB] = makeCert('tls-b');
  const cert = path.join(h.dir, 'gateway.crt');
  const key = path.join(h.dir, 'gateway.key');
  fs.copyFileSync(certA, cert);
  fs.copyFileSync(keyA, key);
  fs.chmodSync(cert, 0o644);
  fs.chmodSync(key, 0o644);
  const tls = await new Gateway('gateway-tls', `tls_certificate = ${cert}\ntls_key = ${key}\n`).start();
  try {
    assert.match(tls.url, /^https:/);
    const auth = { Authorization: `Bearer ${tokens.all}` };
    const r = await tlsPost(tls.url, INIT, auth);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.fp, fpA);
    const sid = r.headers['mcp-session-id'];
    fs.copyFileSync(certB, cert);
    fs.copyFileSync(keyB, key);
    fs.chmodSync(key, 0o644);
    tls.proc.kill('SIGHUP');
    await waitFor(() => /SIGHUP: reloaded/.test(fs.readFileSync(tls.logPath, 'utf8')), { what: 'the reload' });
    const r2 = await tlsPost(tls.url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { ...auth, 'Mcp-Session-Id': sid });
    assert.equal(r2.status, 200, r2.text);
    assert.equal(r2.fp, fpB);
    assert.equal((await tlsPost(tls.url, INIT)).status, 401);
  } finally {
    assert.equal((await tls.stop()).code, 0, tail(tls.logPath));
  }
});

/* The SSE events of a GET stream as they come: {id, data}. */
async function* sseEvents(res) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const id = /^id: (.*)$/m.exec(block);
        const data = /^data: (.*)$/m.exec(block);
        if (data) yield { id: id ? id[1] : null, data: JSON.parse(data[1]) };
      }
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

const getStream = (tok, sid, headers = {}) => fetch(gw.url, { method: 'GET',
  headers: { Accept: 'text/event-stream', Authorization: `Bearer ${tok}`, 'Mcp-Session-Id': sid, ...headers } });

h.test('SSE answers to POST: a tools/call with a progressToken gets its progress, then its answer, as events', async () => {
  const src = path.join(h.dir, 'src-py');
  await writeFixture(src);
  const made = await sbxctl(h.socket, ['sandbox', 'create', 'py', '--source', src, '--image', 'python', '--owner', String(OWNER)]);
  assert.equal(made.code, 0, made.stderr);
  // The SDK client accepts both; its POSTs' answers are recorded by type.
  const types = [];
  const transport = new StreamableHTTPClientTransport(new URL(gw.url), {
    requestInit: { headers: { Authorization: `Bearer ${tokens.all}` } },
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      if (init?.method === 'POST') types.push(JSON.parse(init.body).method + ' ' + res.headers.get('content-type'));
      return res;
    },
  });
  const client = new Client({ name: 'gateway-sse', version: '0.0.1' }, { capabilities: {} });
  await client.connect(transport);
  try {
    // The first command in a sandbox of the python image waits for its build, whose steps are progress.
    const progress = [];
    const t0 = Date.now();
    const r = await client.callTool({ name: 'exec_command', arguments: { sandbox_id: 'py', cmd: 'true', yield_time_ms: 30000 } },
      undefined, { timeout: 600000, resetTimeoutOnProgress: true, onprogress: (p) => progress.push(p) });
    process.stdout.write(`# the python image built during a streamed call in ${Date.now() - t0} ms, ${progress.length} progress events\n`);
    assert.ok(!r.isError, JSON.stringify(r.content));
    assert.ok(progress.length >= 1, 'progress during the build');
    assert.match(progress[0].message, /^image 'python': building, step [a-z]+$/);
    const plain = await client.callTool({ name: 'exec_command', arguments: { sandbox_id: 'py', cmd: 'true' } });
    assert.ok(!plain.isError, JSON.stringify(plain.content));
    assert.deepEqual(types.filter((t) => t.startsWith('tools/call')),
      ['tools/call text/event-stream', 'tools/call application/json'], 'SSE only for the call with a progressToken');
    for (const t of types.filter((x) => !x.startsWith('tools/call'))) assert.doesNotMatch(t, /event-stream/);
  } finally {
    await client.close();
  }
  // (that call may have yielded before the build ended: wait for it)
  const built = await sbxctl(h.socket, ['image', 'build', 'python'], { timeout: 600000 });
  assert.equal(built.code, 0, built.stderr);
  // Raw: the same call accepting JSON only gets JSON; accepting both, one event with an id, then the end.
  const tok = tokens.all;
  const sid = await rawSession(tok);
  const callMsg = (id) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'exec_command',
    arguments: { sandbox_id: 'py', cmd: 'echo sse', yield_time_ms: 30000 }, _meta: { progressToken: `p${id}` } } });
  const json = await post(callMsg(2), { tok, sid, headers: { Accept: 'application/json' } });
  assert.equal(json.status, 200, json.text);
  assert.match(json.headers.get('content-type'), /^application\/json/);
  assert.equal(JSON.parse(json.text).id, 2);
  const res = await fetch(gw.url, { method: 'POST', body: JSON.stringify(callMsg(3)), headers: { 'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream', Authorization: `Bearer ${tok}`, 'Mcp-Session-Id': sid } });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const events = [];
  for await (const ev of sseEvents(res)) events.push(ev);
  assert.equal(events.length, 1, JSON.stringify(events));
  assert.match(events[0].id, /^[0-9]+$/);
  assert.equal(events[0].data.id, 3);
  assert.match(events[0].data.result.structuredContent.output, /sse/);
  // Its id is a point in the session's one sequence: a GET may resume from it.
  const resumed = await getStream(tok, sid, { 'Last-Event-ID': events[0].id });
  assert.equal(resumed.status, 200);
  await resumed.body.cancel();
  const del = await fetch(gw.url, { method: 'DELETE', headers: { Authorization: `Bearer ${tok}`, 'Mcp-Session-Id': sid } });
  assert.equal(del.status, 200);
}, { timeout: 900000 });

h.test('Last-Event-ID: a dropped GET stream resumes with the notifications it missed', async () => {
  const tok = tokens.all;
  const sid = await rawSession(tok);
  assert.equal((await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, { tok, sid })).status, 202);
  const t0 = Date.now();
  const built = await sbxctl(h.socket, ['image', 'build', 'python'], { timeout: 600000 });
  assert.equal(built.code, 0, built.stderr);
  process.stdout.write(`# the python image built in ${Date.now() - t0} ms\n`);
  let nextId = 10;
  const job = async (command) => {
    const r = await post({ jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: 'sandbox_script',
      arguments: { command, image: 'python', egress: 'none', background: true } } }, { tok, sid });
    assert.equal(r.status, 200, r.text);
    const res = JSON.parse(r.text).result;
    assert.ok(!res.isError, r.text);
    return res.structuredContent.job_id;
  };
  // The gateway reads a session's sbxd connection while a call of it waits: sandbox_wait
  // until the job ended, then sandbox_status, before whose answer sbxd sent the job's end.
  const wait = async (jobId) => {
    for (const [name, args] of [['sandbox_wait', { job_id: jobId, timeout_seconds: 120 }], ['sandbox_status', { job_id: jobId }]]) {
      const w = await post({ jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } },
        { tok, sid });
      assert.equal(w.status, 200, w.text);
    }
  };
  const ended = (ev, jobId) => ev.data.method === 'notifications/message' && ev.data.params.data.job_id === jobId;

  // The first stream sees job A's notification, with an event id; then the client drops it.
  const first = await getStream(tok, sid);
  assert.equal(first.status, 200);
  const a = await job('echo a');
  await wait(a);
  let seen;
  for await (const ev of sseEvents(first)) {
    assert.match(ev.id, /^[0-9]+$/);
    if (ended(ev, a)) { seen = ev; break; }
  }
  assert.ok(seen, 'job A ended on the first stream');
  // Job B ends while no stream reads.
  const b = await job('echo b');
  await wait(b);
  // Bad ids are refused; the right one replays job B's notification, and not job A's again.
  assert.equal((await getStream(tok, sid, { 'Last-Event-ID': 'x1' })).status, 400);
  assert.equal((await getStream(tok, sid, { 'Last-Event-ID': String(Number(seen.id) + 1000) })).status, 400);
  const second = await getStream(tok, sid, { 'Last-Event-ID': seen.id });
  assert.equal(second.status, 200);
  // It took the stream over: another plain GET is still one too many.
  const third = await getStream(tok, sid);
  assert.equal(third.status, 409);
  await third.body?.cancel();
  let replayed;
  for await (const ev of sseEvents(second)) {
    assert.ok(Number(ev.id) > Number(seen.id), `event ${ev.id} after ${seen.id}`);
    assert.ok(!ended(ev, a), 'job A is not replayed');
    if (ended(ev, b)) { replayed = ev; break; }
  }
  assert.ok(replayed, 'job B replayed');
  const del = await fetch(gw.url, { method: 'DELETE', headers: { Authorization: `Bearer ${tok}`, 'Mcp-Session-Id': sid } });
  assert.equal(del.status, 200);
}, { timeout: 900000 });

h.test('a job that ends between calls: its notification reaches the GET stream without another request', async () => {
  const tok = tokens.all;
  const sid = await rawSession(tok);
  assert.equal((await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, { tok, sid })).status, 202);
  const stream = await getStream(tok, sid);
  assert.equal(stream.status, 200);
  // (the python image was built by the Last-Event-ID test)
  const r = await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'sandbox_script',
    arguments: { command: 'sleep 2; echo late', image: 'python', egress: 'none', background: true } } }, { tok, sid });
  assert.equal(r.status, 200, r.text);
  const res = JSON.parse(r.text).result;
  assert.ok(!res.isError, r.text);
  const jobId = res.structuredContent.job_id;
  // No request from here on: only the gateway's event loop reads the session's sbxd
  // connection. Without it the stream sees keepalives only, and the test times out.
  let ended;
  for await (const ev of sseEvents(stream)) {
    if (ev.data.method === 'notifications/message' && ev.data.params.data.job_id === jobId) {
      ended = ev.data.params.data;
      break;
    }
  }
  assert.equal(ended.status, 'exited', JSON.stringify(ended));
  assert.equal(ended.exit_code, 0);
  const del = await fetch(gw.url, { method: 'DELETE', headers: { Authorization: `Bearer ${tok}`, 'Mcp-Session-Id': sid } });
  assert.equal(del.status, 200);
}, { timeout: 120000 });
// ---- the boxes set over the gateway (issue 21): sandbox_get's files ----

const sha256 = (buf) => crypto.createHash('sha256').update(buf).digest('hex');
const getFile = (url, tok) => fetch(url, { headers: tok ? { Authorization: `Bearer ${tok}` } : {} });

/* Tokens with the boxes set (which a token without --sets lacks), of the owner and of the other. */
async function boxTokens() {
  tokens.boxes ??= await token(['--owner', String(OWNER), '--name', 'boxes', '--sets', 'boxes']);
  tokens.boxesOther ??= await token(['--owner', String(OTHER), '--name', 'boxes-other', '--sets', 'boxes']);
}

h.test('boxes files: sandbox_get gives a gateway URL that the owner\'s tokens download, others get 404', async () => {
  await boxTokens();
  const s = await connect(tokens.boxes);
  const b = await sc(s, 'sandbox_start', { idleTimeoutMin: 0 });
  const made = await sc(s, 'sandbox_exec', { id: b.id, cmd: 'head -c 3000000 /dev/urandom >big.bin && ' +
    'mkdir -p d/sub && echo why >d/sub/y && echo top >d/t && sha256sum big.bin' });
  assert.equal(made.exitCode, 0, made.stderr);
  const f = await sc(s, 'sandbox_get', { id: b.id, path: 'big.bin' });
  const base = gw.url.replace(/\/mcp$/, '');
  assert.match(f.url, new RegExp(`^${base}/files/[0-9a-f]{32}$`));
  assert.equal(f.kind, 'file');
  assert.equal(f.bytes, 3000000);
  const res = await getFile(f.url, tokens.boxes);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-disposition'), 'attachment; filename="big.bin"');
  assert.equal(res.headers.get('cache-control'), 'no-store');
  const body = Buffer.from(await res.arrayBuffer());
  assert.equal(body.length, 3000000);
  assert.equal(sha256(body), made.stdout.split(' ')[0]);
  // Another token of the same owner downloads it too; the other owner's, none and a wrong one do not.
  const same = await getFile(f.url, tokens.all);
  assert.equal(same.status, 200);
  assert.equal(sha256(Buffer.from(await same.arrayBuffer())), sha256(body));
  const foreign = await getFile(f.url, tokens.boxesOther);
  assert.equal(foreign.status, 404);
  const unknown = await getFile(`${base}/files/${'0'.repeat(32)}`, tokens.boxes);
  assert.equal(unknown.status, 404);
  const notFound = await unknown.text();
  assert.equal(await foreign.text(), notFound); // nothing tells them apart
  assert.equal((await getFile(`${base}/files/nothex`, tokens.boxes)).status, 404);
  assert.equal((await getFile(f.url)).status, 401);
  assert.equal((await getFile(f.url, 'sbx_pat_' + '2'.repeat(64))).status, 401);
  assert.equal((await fetch(f.url, { method: 'POST', headers: { Authorization: `Bearer ${tokens.boxes}` } })).status, 405);
  // A directory: a tar.gz of it.
  const d = await sc(s, 'sandbox_get', { id: b.id, path: '/work/d' });
  assert.equal(d.kind, 'tar.gz');
  const dres = await getFile(d.url, tokens.boxes);
  assert.equal(dres.status, 200);
  assert.equal(dres.headers.get('content-type'), 'application/gzip');
  const tgz = path.join(h.dir, 'got.tar.gz');
  fs.writeFileSync(tgz, Buffer.from(await dres.arrayBuffer()));
  assert.deepEqual(execFileSync('tar', ['-tzf', tgz], { encoding: 'utf8' }).split('\n').filter(Boolean).sort(),
    ['./', './sub/', './sub/y', './t']);
  assert.equal(execFileSync('tar', ['-xzOf', tgz, './sub/y'], { encoding: 'utf8' }), 'why\n');
  // Past its hour (its mtime, which sbxd set, moved back): 404 like any other, before the sweep removes it.
  fs.utimesSync(f.path, new Date(Date.now() - 3601000), new Date(Date.now() - 3601000));
  const expired = await getFile(f.url, tokens.boxes);
  assert.equal(expired.status, 404);
  assert.equal(await expired.text(), notFound);
  await sc(s, 'sandbox_stop', { id: b.id });
  await s.client.close();
});

h.test('boxes files: public_url in gateway.conf is the base of the files URL', async () => {
  const pub = await new Gateway('gateway-public', 'public_url = https://sbx.example.test/gw\n').start();
  try {
    await boxTokens();
    const s = await connect(tokens.boxes, { url: pub.url });
    const b = await sc(s, 'sandbox_start', { idleTimeoutMin: 0 });
    await sc(s, 'sandbox_exec', { id: b.id, cmd: 'echo hi >h.txt' });
    const f = await sc(s, 'sandbox_get', { id: b.id, path: 'h.txt' });
    assert.match(f.url, /^https:\/\/sbx\.example\.test\/gw\/files\/[0-9a-f]{32}$/);
    // Served by the gateway under /files/ whatever public_url's path (a proxy in front strips it).
    const res = await getFile(pub.url.replace(/\/mcp$/, '') + f.url.slice(f.url.indexOf('/files/')), tokens.boxes);
    assert.equal(await res.text(), 'hi\n');
    await sc(s, 'sandbox_stop', { id: b.id });
    await s.client.close();
  } finally {
    assert.equal((await pub.stop()).code, 0, tail(pub.logPath));
  }
});

// ---- the boxes set over the gateway (issue 21): takeoverUrl, a person's page ----

/* The page's event stream of a takeover, read as it comes: output decoded, the end kept. */
async function attachPage(url, { rows = 30, cols = 100 } = {}) {
  const res = await fetch(`${url.replace('?', '/events?')}&rows=${rows}&cols=${cols}`);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  const t = { out: '', end: null, marks: {} };
  t.done = (async () => {
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = Object.fromEntries(buf.slice(0, i).split('\n').filter((l) => !l.startsWith(':'))
          .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2)]));
        buf = buf.slice(i + 2);
        if (ev.event === 'output') t.out += Buffer.from(ev.data, 'base64').toString('utf8');
        if (ev.event === 'end') t.end = JSON.parse(ev.data);
      }
    }
  })();
  t.expect = (text, after = 0) => waitFor(() => t.out.indexOf(text, after) >= 0,
    { what: `${JSON.stringify(text)} on the page's terminal; it shows ${JSON.stringify(t.out.slice(-400))}`, timeout: 60000 });
  return t;
}

const pagePost = (url, action, body) => fetch(url.replace('?', `/${action}?`), {
  method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

h.test('takeover page: the gateway\'s takeoverUrl, a terminal over SSE and POST, Ctrl-C, return with a note', async () => {
  await boxTokens();
  const s = await connect(tokens.boxes);
  const b = await sc(s, 'sandbox_start', { idleTimeoutMin: 0 });
  const base = gw.url.replace(/\/mcp$/, '');
  assert.match(b.takeoverUrl, new RegExp(`^${base}/takeover/${b.id}\\?c=[0-9a-f]{32}$`));
  assert.equal((await sc(s, 'sandbox_status', { id: b.id })).takeoverUrl, b.takeoverUrl);
  // Not taken over yet: 404, like a wrong capability.
  assert.equal((await fetch(b.takeoverUrl)).status, 404);
  const pending = call(s, 'sandbox_takeover', { id: b.id, note: 'please look' });
  await waitFor(async () => (await fetch(b.takeoverUrl)).status === 200, { what: 'the takeover page', timeout: 30000 });
  const page = await fetch(b.takeoverUrl);
  const csp = page.headers.get('content-security-policy');
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self'/);
  assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
  const html = await page.text();
  assert.match(html, /<script src="\/takeover-page\.js" defer><\/script>/);
  assert.ok(!/<script>|\son[a-z]+=|https?:\/\//.test(html), 'no inline or external script');
  const js = await fetch(`${base}/takeover-page.js`);
  assert.equal(js.status, 200);
  assert.match(await js.text(), /EventSource/);
  // Wrong capabilities, another box, the other owner's token: nothing.
  const [, cap] = /\?c=([0-9a-f]{32})$/.exec(b.takeoverUrl);
  const wrong = b.takeoverUrl.replace(cap, cap.replace(/^./, (x) => (x === '0' ? '1' : '0')));
  for (const u of [wrong, b.takeoverUrl.replace(/\?c=.*/, ''), b.takeoverUrl.replace(/\?c=.*/, '?c=abc'),
    b.takeoverUrl.replace(b.id, 'box-000000000000')]) {
    assert.equal((await fetch(u)).status, 404, u);
    assert.equal((await fetch(u.replace('?', '/events?').replace(/\/events$/, '/events?'))).status, 404, u);
  }
  assert.equal((await pagePost(wrong, 'return', { note: 'not me' })).status, 404);
  assert.equal((await pagePost(wrong, 'input', { keys: 'x' })).status, 404); // and no terminal either
  // The agent's commands are locked meanwhile.
  const locked = await call(s, 'sandbox_exec', { id: b.id, cmd: 'true' });
  assert.equal(locked.isError, true);
  assert.match(locked.content[0].text, /locked/);

  const t = await attachPage(b.takeoverUrl);
  const keys = async (k) => assert.equal((await pagePost(b.takeoverUrl, 'input', { keys: k })).status, 204);
  await waitFor(async () => (await pagePost(b.takeoverUrl, 'input', { keys: '' })).status === 204,
    { what: 'the page\'s terminal attached' });
  await keys('echo an""swer-$((6*7))\r');
  await t.expect('answer-42');
  await keys('stty size\r');
  await t.expect('30 100');
  assert.equal((await pagePost(b.takeoverUrl, 'input', { rows: 40, cols: 120 })).status, 204);
  await keys('stty size\r');
  await t.expect('40 120');
  await keys("sh -c 'echo sle\"\"eping; exec sleep 600'\r");
  await t.expect('sleeping');
  const mark = t.out.length;
  await keys('\x03'); // Ctrl-C reaches the box's sleep, not the gateway
  await keys('echo aft""er-$?\r');
  await t.expect('after-130', mark);
  assert.equal((await pagePost(b.takeoverUrl, 'input', { rows: 5 })).status, 400);
  assert.equal((await pagePost(b.takeoverUrl, 'input', { keys: 'x'.repeat(5000) })).status, 400); // over a frame's keys
  assert.equal((await pagePost(b.takeoverUrl, 'input', { keys: 'x'.repeat(70000) })).status, 413); // over max_body_bytes
  assert.equal((await fetch(b.takeoverUrl.replace('?', '/input?'))).status, 405);
  assert.equal((await fetch(b.takeoverUrl.replace('?', '/nothing?'))).status, 404);

  assert.equal((await pagePost(b.takeoverUrl, 'return', { note: 'done from the page' })).status, 204);
  const r = await pending;
  assert.ok(!r.isError, JSON.stringify(r.content));
  assert.equal(r.structuredContent.note, 'done from the page');
  await t.done;
  assert.equal(t.end.reason, 'returned');
  // That takeover's URL is dead now, and the box is the agent's again with a new one.
  assert.equal((await fetch(b.takeoverUrl)).status, 404);
  const after = await sc(s, 'sandbox_status', { id: b.id });
  assert.notEqual(after.takeoverUrl, b.takeoverUrl);
  assert.equal((await sc(s, 'sandbox_exec', { id: b.id, cmd: 'echo free' })).stdout, 'free\n');
  await sc(s, 'sandbox_stop', { id: b.id });
  await s.client.close();
});

h.test('more than one --listen: both addresses serve', async () => {
  const two = await new Gateway('gateway-two', '', ['127.0.0.1:0', '127.0.0.1:0']).start();
  try {
    assert.equal(new Set(two.urls).size, 2, two.urls.join(' '));
    for (const url of two.urls) {
      const s = await connect(tokens.all, { url });
      assert.equal((await sc(s, 'exec_command', { sandbox_id: 'mine', cmd: 'echo listened' })).output, 'listened\n');
      await s.transport.terminateSession();
      await s.client.close();
    }
  } finally {
    assert.equal((await two.stop()).code, 0, tail(two.logPath));
  }
});

h.test('slowloris: headers a byte at a time, and a client that never reads, do not stall another client', async () => {
  const u = new URL(gw.url);
  const hostile = await token(['--owner', String(OWNER), '--name', 'hostile']);
  const sockets = [];
  const open = () => new Promise((resolve, reject) => {
    const sock = net.connect({ host: u.hostname, port: Number(u.port) }, () => resolve(sock));
    sock.on('error', () => {});
    sock.once('error', reject);
    sockets.push(sock);
  });
  const drip = [];
  try {
    // 50 connections, each sending its request's headers one byte every 100 ms.
    const head = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${hostile}\r\nX-Pad: ${'p'.repeat(400)}\r\n`;
    for (let i = 0; i < 50; i++) {
      const sock = await open();
      let at = 0;
      drip.push(setInterval(() => { if (at < head.length && !sock.destroyed) sock.write(head[at++]); }, 100));
    }
    // One that sends 3000 pipelined pings of a session and never reads the answers (about
    // 1 MB: more than the socket buffers hold, so its connection's thread blocks writing).
    const sid = await rawSession(hostile);
    const reader = await open();
    reader.pause();
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const one = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${hostile}\r\nMcp-Session-Id: ${sid}\r\n` +
      `Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: ${ping.length}\r\n\r\n${ping}`;
    reader.write(one.repeat(3000));
    await sleep(1000);
    // Meanwhile another client's calls complete (the test's timeout is only a hang guard).
    const t0 = Date.now();
    const s = await connect(tokens.all);
    for (let i = 0; i < 5; i++)
      assert.equal((await sc(s, 'exec_command', { sandbox_id: 'mine', cmd: `echo call-${i}` })).output, `call-${i}\n`);
    process.stdout.write(`# 5 calls beside 51 hostile connections: ${Date.now() - t0} ms\n`);
    assert.ok(!reader.destroyed && sockets.every((x) => !x.destroyed), 'the hostile connections were open meanwhile');
    await s.transport.terminateSession();
    await s.client.close();
  } finally {
    drip.forEach(clearInterval);
    sockets.forEach((x) => x.destroy());
  }
  // The gateway serves on once they are gone.
  assert.equal((await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, { tok: tokens.all, sid: await rawSession(tokens.all) })).status, 200);
}, { timeout: 120000 });

h.test('the artifacts and boxes sets over HTTP: tools/list and a real call each', async () => {
  const art = await connect(await token(['--owner', String(OWNER), '--name', 'artifacts-only', '--sets', 'artifacts']));
  try {
    assert.ok(art.tools.includes('runtime_execute') && art.tools.includes('runtime_query_output'), art.tools.join(' '));
    assert.ok(!art.tools.includes('exec_command') && !art.tools.includes('sandbox_start'), art.tools.join(' '));
    const r = await sc(art, 'runtime_execute', { sandbox_id: 'mine', runtime: 'shell', code: 'echo from-artifacts' });
    assert.match(r.stdoutSummary, /from-artifacts/, JSON.stringify(r));
  } finally {
    await art.transport.terminateSession();
    await art.client.close();
  }
  const box = await connect(await token(['--owner', String(OWNER), '--name', 'boxes-only', '--sets', 'boxes']));
  try {
    assert.deepEqual(box.tools.slice(0, 4), ['sandbox_start', 'sandbox_exec', 'sandbox_status', 'sandbox_stop']);
    assert.ok(!box.tools.includes('exec_command'), box.tools.join(' '));
    const b = await sc(box, 'sandbox_start', { idleTimeoutMin: 0 });
    assert.match(b.id, /^box-[0-9a-f]{12}$/);
    const e = await sc(box, 'sandbox_exec', { id: b.id, cmd: 'echo from-box; pwd' });
    assert.equal(e.exitCode, 0);
    assert.equal(e.stdout, 'from-box\n/work\n');
    await sc(box, 'sandbox_stop', { id: b.id });
  } finally {
    await box.transport.terminateSession();
    await box.client.close();
  }
}, { timeout: 300000 });

const claimNames = async () => JSON.parse((await sbxctl(h.socket, ['claim', 'list', '--json'])).stdout).map((x) => x.name);

h.test('a lifecycle claim made over HTTP survives its session\'s DELETE and idle expiry, then its shutdown_after_seconds', async () => {
  // DELETE
  const s = await connect(tokens.all);
  const c = await sc(s, 'create_sandbox', { shutdown_after_seconds: 6 });
  await s.transport.terminateSession();
  await s.client.close();
  assert.ok((await claimNames()).includes(c.sandbox_claim_name), 'the claim outlives the DELETE');
  // idle expiry (session_idle_seconds = 2)
  const lim = await new Gateway('gateway-idle', 'session_idle_seconds = 2\n').start();
  let d;
  try {
    const t = await connect(tokens.all, { url: lim.url });
    d = await sc(t, 'create_sandbox', { shutdown_after_seconds: 30 });
    const sid = t.transport.sessionId;
    await t.client.close();
    // (the SDK's GET stream, gone with the close, no longer holds the session: the gateway
    // looks at its client every second, not only at its keepalive write, every 15 s)
    await waitFor(() => new RegExp(`MCP session ${sid} idle for 2 s, ending it`).test(fs.readFileSync(lim.logPath, 'utf8')),
      { what: 'the idle session ended', timeout: 20000, interval: 200 });
    assert.ok((await claimNames()).includes(d.sandbox_claim_name), 'the claim outlives the idle expiry');
  } finally {
    assert.equal((await lim.stop()).code, 0, tail(lim.logPath));
  }
  // then each goes after its shutdown_after_seconds
  for (const n of [c.sandbox_claim_name, d.sandbox_claim_name])
    await waitFor(async () => !(await claimNames()).includes(n), { what: `claim ${n} expired`, timeout: 60000, interval: 500 });
  for (const n of [c.sandbox_claim_name, d.sandbox_claim_name])
    assert.match(fs.readFileSync(h.sbxdLog, 'utf8'), new RegExp(`Sandbox claim '${n}' in namespace 'default' expired`));
}, { timeout: 180000 });

h.test('X-Forwarded-For, -Host and -Proto change nothing by default', async () => {
  // The rate limit is the token's, whatever address a header claims (rateGw: 2 per second, bursts of 4).
  const statuses = [];
  for (let i = 0; i < 12; i++) {
    const r = await post(INIT, { tok: tokens.runtime, url: rateGw.url, headers: { 'X-Forwarded-For': `198.51.100.${i + 1}` } });
    statuses.push(r.status);
  }
  assert.ok(statuses.includes(429), statuses.join(' '));
  // No URL is built from them, and they admit nothing: a refused Origin stays refused.
  const fwd = { 'X-Forwarded-Host': 'evil.example', 'X-Forwarded-Proto': 'https', 'X-Forwarded-For': '203.0.113.9' };
  const r = await post(INIT, { tok: tokens.all, headers: fwd });
  assert.equal(r.status, 200, r.text);
  assert.ok(![...r.headers.values(), r.text].some((v) => /evil\.example|203\.0\.113/.test(v)), r.text);
  assert.equal((await post(INIT, { tok: tokens.all, headers: { ...fwd, Origin: 'http://evil.example' } })).status, 403);
  assert.equal((await post(INIT, { headers: fwd })).status, 401);
});

h.test('teardown: the gateways stop cleanly', async () => {
  for (const g of [gw, rateGw]) {
    const r = await g.stop();
    assert.equal(r.code, 0, tail(g.logPath));
  }
});
