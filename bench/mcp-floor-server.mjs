// The client-side floor of the gateway rows (bench/gateway.mjs), in a
// process of its own, with no tool and no sbxd: on /sdk the MCP SDK's own
// Streamable HTTP server (StreamableHTTPServerTransport, one stateful
// session per initialize, JSON responses as sbx-gateway gives); on /bare
// node's HTTP server answering initialize, notifications and ping itself,
// the least a server can do, so a ping to it costs the SDK client's HTTP
// and little more. It prints "listening PORT" on stdout and serves until
// SIGTERM.
//   node bench/mcp-floor-server.mjs
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

const transports = new Map();

async function body(req) {
  const parts = [];
  for await (const p of req) parts.push(p);
  return parts.length ? JSON.parse(Buffer.concat(parts).toString('utf8')) : undefined;
}

const INIT_RESULT = { protocolVersion: '2025-11-25', capabilities: {}, serverInfo: { name: 'bare', version: '1' } };

function bare(req, res, msg) {
  if (req.method !== 'POST') {
    res.writeHead(405).end();
    return;
  }
  if (msg.id === undefined) {
    res.writeHead(202).end();
    return;
  }
  const result = msg.method === 'initialize' ? INIT_RESULT : {};
  res.writeHead(200, { 'Content-Type': 'application/json', 'Mcp-Session-Id': 'bare' })
    .end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
}

const server = http.createServer(async (req, res) => {
  try {
    if (req.url === '/bare') {
      bare(req, res, await body(req));
      return;
    }
    const sid = req.headers['mcp-session-id'];
    const parsed = req.method === 'POST' ? await body(req) : undefined;
    let t = sid ? transports.get(sid) : undefined;
    if (!t && !sid && parsed?.method === 'initialize') {
      t = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), enableJsonResponse: true,
        onsessioninitialized: (id) => transports.set(id, t) });
      t.onclose = () => transports.delete(t.sessionId);
      await new Server({ name: 'floor', version: '1' }, { capabilities: {} }).connect(t);
    }
    if (!t) {
      res.writeHead(sid ? 404 : 400).end();
      return;
    }
    await t.handleRequest(req, res, parsed);
  } catch (e) {
    if (!res.headersSent) res.writeHead(500).end(String(e));
  }
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${server.address().port}\n`));
process.on('SIGTERM', () => process.exit(0));
