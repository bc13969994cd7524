// The sbx-gateway rows of make bench (bench/run.sh): exec_command true in a
// live workspace session over HTTP against the same over stdio
// (sandbox-mcp), interleaved pair by pair, both with the MCP SDK client;
// a bare ping over the same three ways: sbx-gateway, sandbox-mcp and the
// floors: the SDK's own Streamable HTTP server and a bare node HTTP server
// answering ping (bench/mcp-floor-server.mjs), which is about what the SDK
// client's HTTP costs without anything of ours;
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

async function startFloor() {
  const proc = spawn(process.execPath, [path.join(path.dirname(new URL(import.meta.url).pathname), 'mcp-floor-server.mjs')],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    let text = '';
    proc.stdout.on('data', (d) => {
      text += d;
      const m = /listening (\d+)/.exec(text);
      if (m) resolve(m[1]);
    });
    proc.on('exit', () => reject(new Error('the floor server exited')));
  });
  return { proc, url: `http://127.0.0.1:${port}/sdk`, bare: `http://127.0.0.1:${port}/bare` };
}

/* CPU time of a process so far, in µs: the sum over its threads' schedstat (ns). */
function cpuUs(pid) {
  let ns = 0;
  for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
    } catch { /* the thread ended meanwhile */ }
  }
  return ns / 1000;
}

/* A ping's wall time in µs; its client CPU time is added to cpu[kind]. */
async function timedPing(c, cpu, kind) {
  const u0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await c.ping();
  const t = Number(process.hrtime.bigint() - t0) / 1000;
  const u = process.cpuUsage(u0);
  if (cpu) cpu[kind] = (cpu[kind] ?? 0) + u.user + u.system;
  return t;
}

async function timed(c, args) {
  const t0 = process.hrtime.bigint();
  const r = await c.callTool({ name: 'exec_command', arguments: args });
  if (r.isError || r.structuredContent.status !== 'ok') throw new Error(JSON.stringify(r.content));
  return Number(process.hrtime.bigint() - t0) / 1000;
}

const gw = await startGateway();
const floor = await startFloor();
const res = { exec_http: [], exec_stdio: [], ping_http: [], ping_stdio: [], ping_floor: [], ping_bare: [] };
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
  const stdio = new StdioClientTransport({ command: path.join(bin, 'sandbox-mcp'),
    args: ['--set', 'runtime,sessions', '--socket', socket], stderr: 'ignore' });
  await s.connect(stdio);
  const ws = (await h.c.callTool({ name: 'create_workspace_session', arguments: { sandbox_id: sandbox } }))
    .structuredContent.workspace_session_id;
  await sleep(300);
  const args = { sandbox_id: sandbox, cmd: 'true', workspace_session_id: ws };
  for (let i = 0; i < 10; i++) { await timed(h.c, args); await timed(s, args); }
  for (let i = 0; i < N; i++) {
    res.exec_http.push(await timed(h.c, args));
    res.exec_stdio.push(await timed(s, args));
  }
  const f = await httpClient(floor.url);
  const b = await httpClient(floor.bare);
  for (let i = 0; i < 10; i++) { await timedPing(h.c); await timedPing(s); await timedPing(f.c); await timedPing(b.c); }
  // CPU per ping: the client's own (process.cpuUsage around each ping) and the
  // server's (its threads' schedstat before and after; nothing else talks to it meanwhile)
  const cpu = {};
  const servers = { http: gw.proc.pid, stdio: stdio.pid, floor: floor.proc.pid };
  const cpu0 = Object.fromEntries(Object.entries(servers).map(([k, pid]) => [k, cpuUs(pid)]));
  for (let i = 0; i < N; i++) {
    res.ping_http.push(await timedPing(h.c, cpu, 'http'));
    res.ping_stdio.push(await timedPing(s, cpu, 'stdio'));
    res.ping_floor.push(await timedPing(f.c, cpu, 'floor'));
    res.ping_bare.push(await timedPing(b.c, cpu, 'bare'));
  }
  res.ping_cpu_us = { client: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, v / N])),
    server: Object.fromEntries(Object.entries(servers).map(([k, pid]) => [k, (cpuUs(pid) - cpu0[k]) / N])) };
  await f.c.close();
  await b.c.close();
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
  floor.proc.kill('SIGTERM');
}
fs.writeFileSync(out, JSON.stringify(res) + '\n');
process.exit(0);
