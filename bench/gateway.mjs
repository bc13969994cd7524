// The sbx-gateway rows of make bench (bench/run.sh): exec_command true in a
// live workspace session over HTTP against the same over stdio
// (sandbox-mcp), interleaved pair by pair, both with the MCP SDK client;
// requests per second of 100 concurrent HTTP sessions (file_read); and the
// gateway's memory (Pss) per idle session, with 200 sessions open (each
// after one call, so with its sbxd connection) and no HTTP connection kept.
//   node bench/gateway.mjs SOCKET BIN_DIR SANDBOX TOKEN GATEWAY_UID N SECONDS OUT.json
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [socket, bin, sandbox, token, gwUid, nArg, secondsArg, out] = process.argv.slice(2);
const N = Number(nArg);
const SECONDS = Number(secondsArg);
const IDLE = 200;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function pss(pid) {
  const m = /^Pss:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
  return Number(m[1]);
}

async function startGateway() {
  const logPath = path.join(path.dirname(out), 'gateway-bench.log');
  const log = fs.openSync(logPath, 'a');
  const conf = path.join(path.dirname(out), 'gateway-bench.conf');
  fs.writeFileSync(conf, '[gateway]\nrequests_per_second = 0\n');
  fs.chmodSync(conf, 0o644);
  const proc = spawn(path.join(bin, 'sbx-gateway'), ['--config', conf, '--listen', '127.0.0.1:0', '--socket', socket,
    '--log-level', 'info'], { uid: Number(gwUid), gid: Number(gwUid), stdio: ['ignore', log, log] });
  fs.closeSync(log);
  for (let i = 0; i < 200; i++) {
    const m = /Listening on 127\.0\.0\.1:(\d+)/.exec(fs.readFileSync(logPath, 'utf8'));
    if (m) return { proc, url: `http://127.0.0.1:${m[1]}/mcp` };
    await sleep(25);
  }
  throw new Error(`sbx-gateway did not start: ${fs.readFileSync(logPath, 'utf8')}`);
}

async function httpClient(url) {
  const c = new Client({ name: 'bench', version: '1' }, { capabilities: {} });
  const t = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await c.connect(t);
  return { c, t };
}

async function timed(c, args) {
  const t0 = process.hrtime.bigint();
  const r = await c.callTool({ name: 'exec_command', arguments: args });
  if (r.isError || r.structuredContent.status !== 'ok') throw new Error(JSON.stringify(r.content));
  return Number(process.hrtime.bigint() - t0) / 1000;
}

const gw = await startGateway();
const res = { exec_http: [], exec_stdio: [] };
try {
  // memory per idle session, first (before other rows' frees are there to reuse): 200
  // sessions opened, every connection closed
  const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } });
  const hdrs = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    Authorization: `Bearer ${token}`, Connection: 'close' };
  const read = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call',
    params: { name: 'file_read', arguments: { sandbox_id: sandbox, path: 'README.md' } } });
  // A session that initialized and made one call (its sbxd connection open), then idles.
  const open = async () => {
    const r = await fetch(gw.url, { method: 'POST', body: init, headers: hdrs });
    await r.text();
    const sid = r.headers.get('mcp-session-id');
    await (await fetch(gw.url, { method: 'POST', body: read, headers: { ...hdrs, 'Mcp-Session-Id': sid } })).text();
    return sid;
  };
  await open();
  await sleep(1500);
  const before = pss(gw.proc.pid);
  const ids = [];
  for (let i = 0; i < IDLE; i++) ids.push(await open());
  await sleep(1500);
  const after = pss(gw.proc.pid);
  res.idle = { sessions: ids.filter(Boolean).length, pss_before_kib: before, pss_after_kib: after,
    per_session_kib: (after - before) / IDLE };
  for (const sid of ids)
    await (await fetch(gw.url, { method: 'DELETE', headers: { ...hdrs, 'Mcp-Session-Id': sid } })).text();
  const h = await httpClient(gw.url);
  const s = new Client({ name: 'bench', version: '1' }, { capabilities: {} });
  await s.connect(new StdioClientTransport({ command: path.join(bin, 'sandbox-mcp'),
    args: ['--set', 'runtime,sessions', '--socket', socket], stderr: 'ignore' }));
  const ws = (await h.c.callTool({ name: 'create_workspace_session', arguments: { sandbox_id: sandbox } }))
    .structuredContent.workspace_session_id;
  await sleep(300);
  const args = { sandbox_id: sandbox, cmd: 'true', workspace_session_id: ws };
  for (let i = 0; i < 10; i++) { await timed(h.c, args); await timed(s, args); }
  for (let i = 0; i < N; i++) {
    res.exec_http.push(await timed(h.c, args));
    res.exec_stdio.push(await timed(s, args));
  }
  await h.c.callTool({ name: 'finalize_workspace_session', arguments: { sandbox_id: sandbox, workspace_session_id: ws,
    action: 'discard' } });
  await s.close();
  await h.t.terminateSession();
  await h.c.close();

  // requests/s: 100 sessions, each calling file_read back to back for SECONDS
  const many = await Promise.all(Array.from({ length: 100 }, () => httpClient(gw.url)));
  let count = 0;
  const end = Date.now() + SECONDS * 1000;
  const t0 = Date.now();
  await Promise.all(many.map(async ({ c }) => {
    while (Date.now() < end) {
      const r = await c.callTool({ name: 'file_read', arguments: { sandbox_id: sandbox, path: 'README.md' } });
      if (r.isError) throw new Error(JSON.stringify(r.content));
      count++;
    }
  }));
  res.rps100 = { requests: count, seconds: (Date.now() - t0) / 1000 };
  await Promise.all(many.map(async ({ c, t }) => { await t.terminateSession(); await c.close(); }));

} finally {
  gw.proc.kill('SIGTERM');
}
fs.writeFileSync(out, JSON.stringify(res) + '\n');
process.exit(0);
