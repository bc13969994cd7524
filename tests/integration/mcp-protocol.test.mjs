// sandbox-mcp as an MCP server: tools/list, schemas, lifecycle, JSON-RPC
// errors, argument validation, bounded input lines, exit on stdin EOF.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { useSbx, RawMcp, McpSession, EXPECTED_INPUT_SCHEMAS, resultText, checkShape, LEAK_MARKER } from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'proto' }] });
const SB = 'proto';
const COMMAND_TOOLS = ['exec_command', 'write_command_stdin', 'read_command_lines'];
const FILE_TOOLS = ['file_read', 'file_write', 'file_edit', 'file_blame'];
const TOOLS = [...COMMAND_TOOLS, ...FILE_TOOLS];
// The file tools' input schemas as the seed publishes them (extracted verbatim).
const SEED_SCHEMAS = {
  ...EXPECTED_INPUT_SCHEMAS,
  ...JSON.parse(readFileSync(new URL('./seed-file-schemas.json', import.meta.url), 'utf8')),
};

async function withRaw(fn) {
  const raw = new RawMcp({ socket: h.socket, logPath: h.mcpLog });
  try {
    return await fn(raw);
  } finally {
    await raw.kill();
  }
}

h.test('tools/list (SDK) names the seven runtime tools with the seed input schemas', async () => {
  const names = h.mcp.tools.map((t) => t.name);
  for (const n of TOOLS) assert.ok(names.includes(n), `tools/list lacks ${n}: ${names}`);
  assert.deepEqual([...names].sort(), [...TOOLS].sort(), '--set runtime publishes exactly the seed\'s seven tools');
  for (const t of h.mcp.tools) {
    assert.deepEqual(t.inputSchema, SEED_SCHEMAS[t.name], `inputSchema of ${t.name}`);
    assert.equal(typeof t.description, 'string');
    assert.ok(t.description.length > 10, `${t.name} needs a description`);
    assert.ok(t.outputSchema, `${t.name} has no outputSchema`);
    assert.equal(t.outputSchema.type, 'object');
    const fields = COMMAND_TOOLS.includes(t.name)
      ? ['command_session_id', 'status', 'exit_code', 'start_offset', 'end_offset', 'total_lines', 'output']
      : { file_read: ['path', 'content', 'start_line', 'num_lines', 'total_lines', 'bytes_read', 'total_bytes', 'next_offset', 'truncated'],
          file_write: ['type', 'path', 'bytes_written'],
          file_edit: ['type', 'path', 'edits_applied', 'replacements', 'bytes_written'],
          file_blame: ['path', 'ranges'] }[t.name];
    for (const f of fields) assert.ok(t.outputSchema.properties?.[f], `${t.name} outputSchema lacks ${f}`);
    assert.ok(t.annotations && typeof t.annotations === 'object', `${t.name} has no annotations`);
  }
  const rl = h.mcp.tools.find((t) => t.name === 'read_command_lines');
  assert.equal(rl.annotations.readOnlyHint, true, 'read_command_lines is read-only');
});

h.test('tools/list (raw JSON) carries the input schemas byte-for-byte equal as JSON values', async () => {
  await withRaw(async (raw) => {
    await raw.initialize();
    const r = await raw.request('tools/list', {}, 1);
    assert.ok(r.result, JSON.stringify(r));
    const byName = Object.fromEntries(r.result.tools.map((t) => [t.name, t]));
    for (const n of TOOLS) assert.deepEqual(byName[n].inputSchema, SEED_SCHEMAS[n], n);
    assert.equal(r.result.nextCursor, undefined);
  });
});

for (const [asked, answered] of [['2025-11-25', '2025-11-25'], ['2025-06-18', '2025-06-18'], ['2024-11-05', '2024-11-05'], ['1999-01-01', '2025-11-25']]) {
  h.test(`initialize negotiates: ${asked} -> ${answered}`, async () => {
    await withRaw(async (raw) => {
      const r = await raw.initialize(asked, 1);
      assert.ok(r.result, `initialize failed: ${JSON.stringify(r)}`);
      assert.equal(r.result.protocolVersion, answered);
      assert.ok(r.result.capabilities?.tools, 'capabilities.tools');
      assert.equal(typeof r.result.serverInfo?.name, 'string');
      assert.equal(typeof r.result.serverInfo?.version, 'string');
      const p = await raw.request('ping', undefined, 2);
      assert.deepEqual(p.result, {});
    });
  });
}

h.test('JSON-RPC errors: -32700, -32600, -32601, -32602; the broker survives each and exits on stdin EOF', async () => {
  await withRaw(async (raw) => {
    await raw.initialize();
    let pid = 100;
    const alive = async () => {
      const id = ++pid;
      const p = await raw.request('ping', undefined, id);
      assert.deepEqual(p.result, {}, `ping after error: ${JSON.stringify(p)}`);
    };
    const errorReply = (pred) => raw.next((m) => 'error' in m && pred(m));

    // -32700: unparsable JSON, answered with id null
    await raw.send('{"jsonrpc":"2.0","id":7,"method":');
    let e = await errorReply(() => true);
    assert.equal(e.error.code, -32700, JSON.stringify(e));
    assert.equal(e.id, null);
    await alive();
    await raw.send('this is not json at all');
    e = await errorReply(() => true);
    assert.equal(e.error.code, -32700, JSON.stringify(e));
    await alive();

    // -32600: valid JSON, not a valid request
    const invalid = [
      ['no method', { jsonrpc: '2.0', id: 20 }, 20],
      ['jsonrpc 1.0', { jsonrpc: '1.0', id: 21, method: 'ping' }, 21],
      ['method not a string', { jsonrpc: '2.0', id: 22, method: 5 }, 22],
      ['missing jsonrpc', { id: 23, method: 'ping' }, 23],
      ['not an object', 42, null],
    ];
    for (const [what, msg, id] of invalid) {
      await raw.send(msg);
      e = await errorReply(() => true);
      assert.equal(e.error.code, -32600, `${what}: ${JSON.stringify(e)}`);
      if (id !== null) assert.equal(e.id, id, `${what}: id echoed`);
      assert.equal(typeof e.error.message, 'string');
      await alive();
    }

    // -32601: unknown methods are answered, never silently dropped
    for (const [id, method] of [[30, 'no/such'], [31, 'resources/list'], [32, 'prompts/get']]) {
      const r = await raw.request(method, {}, id);
      assert.equal(r.error?.code, -32601, `${method}: ${JSON.stringify(r)}`);
    }
    // a string id keeps its type
    const rs = await raw.request('no/such', {}, 'abc');
    assert.equal(rs.id, 'abc');
    assert.equal(rs.error?.code, -32601);

    // -32602: unknown tool
    const rt = await raw.request('tools/call', { name: 'no_such_tool', arguments: {} }, 40);
    assert.equal(rt.error?.code, -32602, JSON.stringify(rt));

    // an unknown notification gets no reply
    await raw.send({ jsonrpc: '2.0', method: 'notifications/whatever' });
    const idp = ++pid;
    await raw.send({ jsonrpc: '2.0', id: idp, method: 'ping' });
    const nxt = await raw.next();
    assert.equal(nxt.id, idp, `the next message after a notification is the ping reply: ${JSON.stringify(nxt)}`);

    // stdout carried only JSON
    assert.deepEqual(raw.badLines, [], 'non-JSON lines on stdout');

    // stdin EOF ends the process
    await raw.closeStdin();
    const ex = await raw.waitExit(5000);
    assert.ok(ex, 'sandbox-mcp did not exit within 5 s of stdin EOF');
    assert.equal(ex.code, 0, `exit status on EOF: ${JSON.stringify(ex)}`);
  });
});

// The broker's bound on one input line, from the one place it is defined.
const LINE_MAX = eval(/#define SBX_MCP_LINE_MAX \(([^)]*)\)/.exec(
  readFileSync(new URL('../../common/sbx-limits.h', import.meta.url), 'utf8'))[1].replace(/u/g, ''));

h.test('an oversize input line (over SBX_MCP_LINE_MAX) is rejected with an error naming the request, not a crash', async () => {
  await withRaw(async (raw) => {
    await raw.initialize();
    const pad = 'a'.repeat(LINE_MAX + 1024);
    const t0 = Date.now();
    // Key order as the SDK client writes it: "id" last.
    await raw.write(`{"method":"ping","params":{"pad":"${pad}"},"jsonrpc":"2.0","id":50}\n`);
    const e = await raw.next((m) => 'error' in m, 30000);
    assert.ok([-32700, -32600].includes(e.error.code), `code ${e.error.code}: ${e.error.message}`);
    assert.equal(e.id, 50, 'the id, written last, is recovered from the end of the discarded line');
    // and a huge line that is not JSON at all, without a newline for a while
    await raw.write('x'.repeat(LINE_MAX + 1024));
    await raw.write('\n');
    const e2 = await raw.next((m) => 'error' in m, 30000);
    assert.ok([-32700, -32600].includes(e2.error.code), `code ${e2.error.code}`);
    const p = await raw.request('ping', undefined, 51);
    assert.deepEqual(p.result, {});
    assert.equal(raw.exit, null, 'still running');
    process.stdout.write(`# oversize lines rejected in ${Date.now() - t0} ms\n`);
  });
});

h.test('notifications/cancelled: the cancelled request gets no reply, others do', async () => {
  await withRaw(async (raw) => {
    await raw.initialize();
    await raw.send({ jsonrpc: '2.0', id: 60, method: 'tools/call',
      params: { name: 'exec_command', arguments: { sandbox_id: SB, cmd: 'sleep 5', yield_time_ms: 10000 } } });
    await new Promise((r) => setTimeout(r, 500));
    await raw.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 60, reason: 'test' } });
    const p = await raw.request('ping', undefined, 61, 5000);
    assert.deepEqual(p.result, {});
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(raw.messages.filter((m) => m.id === 60).length, 0, `a reply to the cancelled request: ${JSON.stringify(raw.messages)}`);
    // cancelling an unknown or finished request is ignored
    await raw.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 999 } });
    const p2 = await raw.request('ping', undefined, 62, 5000);
    assert.deepEqual(p2.result, {});
  });
});

h.test('a tools/call result carries structuredContent and a text block: rendered, or with --content=json the same JSON', async () => {
  const r = await h.mcp.call('exec_command', { sandbox_id: SB, cmd: 'echo hi' });
  assert.equal(r.isError ?? false, false, resultText(r));
  checkShape(r.structuredContent);
  const texts = r.content.filter((c) => c.type === 'text');
  assert.equal(texts.length, 1, 'one text block');
  assert.match(texts[0].text, /^ok, exit 0, .*\nhi\n$/);
  const s = await h.connect({ argv: ['--set', 'runtime', '--socket', h.socket, '--content', 'json'] });
  try {
    const j = await s.call('exec_command', { sandbox_id: SB, cmd: 'echo hi' });
    assert.deepEqual(JSON.parse(j.content[0].text), j.structuredContent);
  } finally {
    await s.close();
  }
});

h.test('unknown tool through the SDK rejects with McpError -32602', async () => {
  await assert.rejects(h.mcp.call('no_such_tool', {}), (e) => e.code === -32602);
});

const violations = [
  ['exec_command', {}, 'sandbox_id'],
  ['exec_command', { sandbox_id: SB }, 'cmd'],
  ['exec_command', { sandbox_id: SB, cmd: 'true', bogus: 1 }, 'bogus'],
  ['exec_command', { sandbox_id: SB, cmd: 42 }, 'cmd'],
  ['exec_command', { sandbox_id: SB, cmd: 'true', timeout_ms: '1000' }, 'timeout_ms'],
  ['exec_command', { sandbox_id: SB, cmd: 'true', timeout_ms: 1.5 }, 'timeout_ms'],
  ['exec_command', { sandbox_id: SB, cmd: 'true', yield_time_ms: -1 }, 'yield_time_ms'],
  ['exec_command', { sandbox_id: SB, cmd: 'true', workspace_session_id: 7 }, 'workspace_session_id'],
  ['write_command_stdin', { sandbox_id: SB, command_session_id: 'x' }, 'stdin'],
  ['write_command_stdin', { sandbox_id: SB, stdin: 'x' }, 'command_session_id'],
  ['write_command_stdin', { sandbox_id: SB, command_session_id: 'x', stdin: 'y', yield_time_ms: -5 }, 'yield_time_ms'],
  ['read_command_lines', { sandbox_id: SB }, 'command_session_id'],
  ['read_command_lines', { sandbox_id: SB, command_session_id: 'x', limit: 1001 }, 'limit'],
  ['read_command_lines', { sandbox_id: SB, command_session_id: 'x', start_offset: -1 }, 'start_offset'],
  ['read_command_lines', { sandbox_id: SB, command_session_id: 'x', limit: 'ten' }, 'limit'],
];

h.test('argument violations are isError results naming the argument', async () => {
  for (const [tool, args, arg] of violations) {
    const text = await h.mcp.err(tool, args);
    assert.match(text, new RegExp(arg), `${tool} ${JSON.stringify(args)} -> "${text}" should name ${arg}`);
  }
});

h.test('ping and concurrent requests through the SDK', async () => {
  assert.deepEqual(await h.mcp.client.ping(), {});
});

h.test('SBX_SOCKET alone (no --socket) is enough', async () => {
  const s = await h.connect({ useEnvSocket: true });
  try {
    const sc = await s.sc('exec_command', { sandbox_id: SB, cmd: 'echo via-env' });
    assert.equal(sc.output, 'via-env\n');
  } finally {
    await s.close();
  }
});

h.test('the client environment does not reach commands', async () => {
  const sc = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: 'env' });
  assert.equal(sc.status, 'ok');
  assert.ok(!sc.output.includes(LEAK_MARKER), `environment leaked into the command:\n${sc.output}`);
  for (const kv of ['LANG=C.UTF-8', 'TERM=dumb', 'NO_COLOR=1', 'PAGER=cat', 'GIT_PAGER=cat']) {
    assert.ok(sc.output.split('\n').includes(kv), `env lacks ${kv}:\n${sc.output}`);
  }
  assert.match(sc.output, /^PATH=/m);
  assert.match(sc.output, /^HOME=/m);
});
