// What real MCP clients and agents trip on (issue 12), one test per item,
// through the SDK client: result sizes under a token budget, the rendered
// text block, old SDKs, a broken configuration, finding sandbox_id, empty
// publications, edits[N], the in-band cut marker, the documented behaviour,
// and what the rendered text leaves out.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import {
  useSbx, RawMcp, sbxctl, run, SBXCTL, SANDBOX_MCP, writeFixture, resultText, checkShape, readAll, waitDone,
  RESULT_FIELDS, ROOT, sleep, tail,
} from './helpers.mjs';
import { realFiles, resultTokens, tokens } from './tokens.mjs';

const NOBODY = 65534;
const SB = 'agent';
const h = useSbx({ sandboxes: [{ name: SB }], world: true });

// Claude Code's limit for one MCP result (MAX_MCP_OUTPUT_TOKENS) and the
// budget the window bound is meant to give (64 KiB of escaped JSON).
const CLIENT_LIMIT = 25000;
const BUDGET_TOKENS = 20000;
const limits = fs.readFileSync(path.join(ROOT, 'common/sbx-limits.h'), 'utf8');
const BUDGET_BYTES = eval(/#define SBX_RESULT_TEXT_BUDGET \(([^)]*)\)/.exec(limits)[1].replace(/u/g, ''));

function header(result) {
  return resultText(result).split('\n')[0];
}

/* Every text block's and the structuredContent's tokens stay under the budget. */
function checkBudget(what, result) {
  const t = resultTokens(result);
  for (const [reader, counts] of Object.entries(t)) {
    for (const [tok, n] of Object.entries(counts)) {
      assert.ok(n < BUDGET_TOKENS, `${what}: a client reading ${reader} gets ${n} ${tok} tokens (budget ${BUDGET_TOKENS})`);
    }
  }
  assert.ok(Buffer.byteLength(JSON.stringify(result.structuredContent)) < BUDGET_BYTES + 4096, `${what}: escaped size`);
  return t;
}

h.test('1. a file_read window and command windows stay under the token budget (code, prose, JSON)', async () => {
  const files = realFiles();
  for (const [kind, f] of Object.entries(files)) {
    const w = await h.mcp.sc('file_write', { sandbox_id: SB, path: `big/${f.name}`, content: f.text });
    assert.equal(w.bytes_written, Buffer.byteLength(f.text));
    // Page the whole file with the default limit; every window is under the budget.
    let offset = 1;
    let text = '';
    let windows = 0;
    const counts = [];
    for (;;) {
      const r = await h.mcp.call('file_read', { sandbox_id: SB, path: `big/${f.name}`, offset });
      assert.equal(r.isError ?? false, false, resultText(r));
      const t = checkBudget(`file_read ${kind} from line ${offset}`, r);
      counts.push(t);
      const sc = r.structuredContent;
      text += sc.content;
      windows++;
      if (!sc.truncated) break;
      assert.equal(sc.next_offset, sc.start_line + sc.num_lines, 'next_offset follows the window');
      offset = sc.next_offset;
    }
    assert.equal(text, f.text, `${kind}: the windows put together are the file`);
    const escaped = Buffer.byteLength(JSON.stringify(f.text));
    assert.equal(windows > 1, escaped > BUDGET_BYTES, `${kind}: ${escaped} escaped bytes in ${windows} window(s)`);
    process.stdout.write(`# file_read ${kind} (${f.text.split('\n').length - 1} lines, ${Buffer.byteLength(f.text)} bytes, whole file ${JSON.stringify(tokens(f.text))} tokens): ` +
      `${windows} window(s); first: content ${JSON.stringify(counts[0].content)}, structuredContent ${JSON.stringify(counts[0].structured)}\n`);

    // The same text as command output: a yield and read_command_lines windows.
    const y = await h.mcp.call('exec_command', { sandbox_id: SB, cmd: `cat big/${f.name}` });
    const yt = checkBudget(`exec_command cat ${kind}`, y);
    checkShape(y.structuredContent);
    let off = 0;
    let out = '';
    for (let i = 0; i < 100; i++) {
      const r = await h.mcp.call('read_command_lines', { sandbox_id: SB, command_session_id: y.structuredContent.command_session_id, start_offset: off, limit: 1000 });
      checkBudget(`read_command_lines ${kind} at ${off}`, r);
      out += r.structuredContent.output;
      if (r.structuredContent.end_offset >= r.structuredContent.total_lines) break;
      assert.ok(r.structuredContent.end_offset > off, 'read_command_lines moves on');
      off = r.structuredContent.end_offset;
    }
    // The transcript is rendered: C0 controls other than tab and newline (the licences' form feeds) go.
    assert.equal(out, f.text.replace(/[\x00-\x08\x0b-\x1f\x7f]/g, ''), `${kind}: the transcript paged in full`);
    process.stdout.write(`# exec_command cat ${kind}: yield of ${y.structuredContent.end_offset - y.structuredContent.start_offset} lines, content ${JSON.stringify(yt.content)}\n`);
  }
});

h.test('2. the text block is a rendering, not a JSON copy; --content=json and --content=none', async () => {
  const r = await h.mcp.call('exec_command', { sandbox_id: SB, cmd: 'printf \'say "hi"\\n\\tand tab\\n\'; exit 3' });
  const sc = checkShape(r.structuredContent);
  assert.equal(sc.status, 'error');
  assert.equal(r.content.length, 1);
  const text = r.content[0].text;
  assert.throws(() => JSON.parse(text), 'the text block is not JSON');
  assert.match(text, /^error, exit 3, \d+\.\d\d s; 2 lines; nothing to publish \(nothing changed\)\n/);
  assert.ok(text.endsWith('\nsay "hi"\n\tand tab\n'), `output as it is after the header: ${JSON.stringify(text)}`);

  // file_read: the header, then the raw text; file_edit: a diff; file_blame: a line per range.
  await h.mcp.sc('file_write', { sandbox_id: SB, path: 'two.txt', content: 'alpha\nbeta\ngamma\n' });
  const fr = await h.mcp.call('file_read', { sandbox_id: SB, path: 'two.txt' });
  assert.equal(fr.content[0].text, 'two.txt: lines 1-3 of 3\nalpha\nbeta\ngamma\n');
  const fe = await h.mcp.call('file_edit', { sandbox_id: SB, path: 'two.txt', edits: [{ old_string: 'beta', new_string: 'BETA' }] });
  const et = fe.content[0].text;
  assert.match(et, /^edited two\.txt: 1 edit, 1 replacement, 17 bytes now; published layer \d+ \(1 changed path, owner operation:op-[0-9a-f]+\)\n/);
  assert.ok(et.includes('\n-beta\n+BETA\n'), `the diff shows the change: ${et}`);
  assert.ok(et.includes('\n alpha\n') && et.includes('\n gamma\n'), 'with context');
  const fb = await h.mcp.call('file_blame', { sandbox_id: SB, path: 'two.txt' });
  assert.match(fb.content[0].text, /^two\.txt: 3 ranges \(lines, owner\)\n1 operation:op-\w+\n2 operation:op-\w+\n3 operation:op-\w+\n$/);

  // structuredContent is the seed's shape, whatever the content mode.
  const modes = {};
  for (const mode of ['json', 'none', 'text']) {
    const s = await h.connect({ argv: ['--set', 'runtime', '--socket', h.socket, `--content=${mode}`] });
    try {
      modes[mode] = await s.call('file_read', { sandbox_id: SB, path: 'two.txt' });
    } finally {
      await s.close();
    }
  }
  assert.deepEqual(JSON.parse(modes.json.content[0].text), modes.json.structuredContent, '--content=json: the JSON copy');
  assert.deepEqual(modes.none.content, [], '--content=none: the seed\'s empty array');
  assert.deepEqual(modes.none.structuredContent, modes.text.structuredContent);
  assert.deepEqual(modes.json.structuredContent, modes.text.structuredContent);
  const json = resultTokens(modes.json).content.claude, rendered = resultTokens(modes.text).content.claude;
  assert.ok(rendered < json, `rendered ${rendered} tokens, JSON ${json}`);
});

h.test('3. older clients connect: SDK 1.0.4 (protocol 2024-11-05), 1.12 and the current one', async () => {
  for (const sdk of ['1.0.4', '1.12', 'current']) {
    const s = await h.connect({ sdk });
    try {
      const names = s.tools.map((t) => t.name);
      assert.ok(names.includes('exec_command'), `${sdk}: tools/list`);
      const r = await s.call('exec_command', { sandbox_id: SB, cmd: `echo via-sdk-${sdk}` });
      assert.equal(r.isError ?? false, false, `${sdk}: ${resultText(r)}`);
      assert.match(resultText(r), new RegExp(`\\nvia-sdk-${sdk.replace(/\./g, '\\.')}\\n$`));
      process.stdout.write(`# SDK ${sdk}: negotiated ${s.client.getServerVersion ? JSON.stringify(s.client.getServerVersion()) : ''}\n`);
    } finally {
      await s.close();
    }
  }
  const raw = new RawMcp({ socket: h.socket, logPath: h.mcpLog });
  try {
    for (const [asked, answered] of [['2024-11-05', '2024-11-05'], ['2025-03-26', '2025-03-26'], ['2024-10-07', '2025-11-25']]) {
      const r = await raw.request('initialize', { protocolVersion: asked, capabilities: {}, clientInfo: { name: 'v', version: '0' } }, asked);
      assert.equal(r.result.protocolVersion, answered, `${asked} -> ${JSON.stringify(r.result)}`);
    }
  } finally {
    await raw.kill();
  }
});

h.test('4. a broken SBX_SOCKET shows at start-up: one stderr line, the reason and fix in instructions; calls reconnect', async () => {
  const link = path.join(h.dir, 'later', 'sbxd.sock');
  const logPath = path.join(h.logDir, 'broken.log');
  const raw = new RawMcp({ socket: link, logPath, args: ['--set', 'runtime', '--socket', link] });
  try {
    const init = await raw.initialize();
    const ins = init.result.instructions;
    assert.match(ins, new RegExp(`sbxd is not reachable at ${link.replace(/[./]/g, '\\$&')} \\(No such file or directory\\)`));
    assert.match(ins, /start sbxd/);
    assert.match(ins, /SBX_SOCKET/);
    const lines = fs.readFileSync(logPath, 'utf8').split('\n').filter((l) => l.includes('Cannot reach sbxd'));
    assert.equal(lines.length, 1, `one line on stderr: ${tail(logPath)}`);
    const call = { name: 'exec_command', arguments: { sandbox_id: SB, cmd: 'echo back' } };
    const r1 = await raw.request('tools/call', call, 1);
    assert.equal(r1.result.isError, true);
    assert.match(r1.result.content[0].text, /cannot reach sbxd/);
    // The socket appears: the next call connects.
    await fsp.mkdir(path.dirname(link), { recursive: true });
    await fsp.symlink(h.socket, link);
    const r2 = await raw.request('tools/call', call, 2);
    assert.equal(r2.result.isError, false, JSON.stringify(r2));
    assert.equal(r2.result.structuredContent.output, 'back\n');
  } finally {
    await raw.kill();
  }
});

h.test('5. sandbox_id is easy to find: instructions, the unknown-sandbox error, list_sandboxes (only the caller\'s)', async () => {
  const src = path.join(h.dir, 'src-theirs');
  await writeFixture(src);
  const c = await sbxctl(h.socket, ['sandbox', 'create', 'theirs', '--source', src, '--owner', String(NOBODY)]);
  assert.equal(c.code, 0, c.stderr);

  const other = await h.connect({ uid: NOBODY, argv: ['--set', 'runtime,sessions', '--socket', h.socket] });
  try {
    assert.match(other.client.getInstructions(), /Your sandbox \(sandbox_id\): theirs\./);
    const err = await other.err('exec_command', { sandbox_id: 'thiers', cmd: 'true' });
    assert.equal(err, "no sandbox named 'thiers' (yours: theirs)");
    const l = await other.sc('list_sandboxes', {});
    assert.deepEqual(l.sandboxes, [{ sandbox_id: 'theirs', source: src, image: 'default', layers: 1, live_sessions: 0 }]);
    const tl = other.tools.find((t) => t.name === 'list_sandboxes');
    assert.equal(tl.annotations.readOnlyHint, true);
  } finally {
    await other.close();
  }
  // root sees every sandbox, in the instructions too
  assert.match(h.mcp.client.getInstructions(), /Your sandbox(es)? \(sandbox_id\): agent/);
  const err = await h.mcp.err('file_read', { sandbox_id: 'nope', path: 'README.md' });
  assert.match(err, /^no sandbox named 'nope' \(yours: agent, theirs\)$/);
  const d = await sbxctl(h.socket, ['sandbox', 'delete', 'theirs']);
  assert.equal(d.code, 0, d.stderr);
});

async function layerCount() {
  const r = await sbxctl(h.socket, ['layer', 'list', SB, '--json']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout).length;
}

h.test('6. publishing nothing publishes no layer; Python writes no __pycache__', async () => {
  await h.mcp.sc('file_write', { sandbox_id: SB, path: 'same.txt', content: 'one\ntwo\n' });
  const before = await layerCount();
  const w = await h.mcp.call('file_write', { sandbox_id: SB, path: 'same.txt', content: 'one\ntwo\n' });
  assert.equal(w.structuredContent.type, 'update');
  assert.equal(w.structuredContent.publication.published, false);
  assert.equal(w.structuredContent.publication.changed_paths, 0);
  assert.match(header(w), /^same\.txt unchanged: it already has this content \(8 bytes\); nothing written, nothing published$/);
  const e = await h.mcp.call('file_edit', { sandbox_id: SB, path: 'same.txt', edits: [
    { old_string: 'one', new_string: 'ONE' }, { old_string: 'ONE', new_string: 'one' }] });
  assert.equal(e.structuredContent.edits_applied, 2);
  assert.equal(e.structuredContent.publication.published, false);
  assert.match(header(e), /unchanged: the edits leave its content as it was/);
  assert.equal(await layerCount(), before, 'no layer for an unchanged file');

  await h.mcp.sc('file_write', { sandbox_id: SB, path: 'pkg/mod.py', content: 'X = 1\n' });
  const withPy = await layerCount();
  const py = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: 'env | grep PYTHONDONTWRITEBYTECODE; python3 -c "import sys; sys.path.insert(0, \'pkg\'); import mod; print(mod.X)"; ls pkg' });
  assert.equal(py.output, 'PYTHONDONTWRITEBYTECODE=1\n1\nmod.py\n');
  assert.equal(py.publication.published, false, JSON.stringify(py.publication));
  assert.equal(await layerCount(), withPy, 'running Python published nothing');
});

h.test('7. edits are numbered edits[N] from 0, in argument errors and in failures while applying', async () => {
  await h.mcp.sc('file_write', { sandbox_id: SB, path: 'num.txt', content: 'a b c\n' });
  const arg = await h.mcp.err('file_edit', { sandbox_id: SB, path: 'num.txt', edits: [{ old_string: 'a', new_string: 'A' }, { old_string: 'b' }] });
  assert.match(arg, /edits\[1\]\.new_string: is required/);
  const apply = await h.mcp.err('file_edit', { sandbox_id: SB, path: 'num.txt', edits: [{ old_string: 'a', new_string: 'A' }, { old_string: 'zz', new_string: 'y' }] });
  assert.match(apply, /^num\.txt: edits\[1\]: old_string not found in the file$/);
  const man = fs.readFileSync(path.join(ROOT, 'man/sandbox-mcp.1'), 'utf8');
  assert.ok(!/edit [0-9]+:/.test(man), 'the man page uses edits[N] only');
});

h.test('8. a cut command window says so in words, with how to read the rest', async () => {
  const r = await h.mcp.call('exec_command', { sandbox_id: SB, cmd: 'seq 1 300' });
  const sc = checkShape(r.structuredContent);
  assert.equal(sc.start_offset, 100);
  assert.equal(sc.end_offset, 300);
  const head = header(r);
  assert.match(head, /; lines 100-300 of 300 shown; 100 earlier lines not shown; read_command_lines start_offset=0; whole output ~\d+ tokens; /);
  assert.ok(head.includes(`command_session_id ${sc.command_session_id}`), head);
  const rl = await h.mcp.call('read_command_lines', { sandbox_id: SB, command_session_id: sc.command_session_id, limit: 50 });
  assert.match(header(rl), /; lines 0-50 of 300 shown; 250 later lines not shown; read_command_lines start_offset=50; /);
});

h.test('9. documented behaviour: a pipeline is answered before EOF exits; 96 MiB; publication of read_command_lines; revisions; stale socket', async () => {
  // The man page's pipeline: the calls in flight when stdin ends are answered.
  const input = [
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'exec_command', arguments: { sandbox_id: SB, cmd: 'sleep 1; echo made' } } },
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'file_read', arguments: { sandbox_id: SB, path: 'README.md' } } },
  ].map((m) => JSON.stringify(m) + '\n').join('');
  const p = await run(SANDBOX_MCP, ['--set', 'runtime', '--socket', h.socket], { input });
  assert.equal(p.code, 0, p.stderr);
  const replies = p.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(replies.map((m) => m.id).sort(), [1, 2], p.stdout);
  assert.equal(replies.find((m) => m.id === 1).result.structuredContent.output, 'made\n');

  const man = fs.readFileSync(path.join(ROOT, 'man/sandbox-mcp.1'), 'utf8');
  assert.match(man, /100663296 bytes \(96 MiB/);
  assert.ok(!/4194304 bytes/.test(man));
  const versions = [...fs.readFileSync(path.join(ROOT, 'broker/mcp.c'), 'utf8').matchAll(/^\s+"(\d{4}-\d\d-\d\d)",$/gm)].map((m) => m[1]);
  assert.deepEqual(versions, ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']);
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  for (const v of versions) {
    assert.ok(readme.includes(v), `README names ${v}`);
    assert.ok(man.includes(v), `sandbox-mcp(1) names ${v}`);
  }

  // read_command_lines of an ended automatic command carries its publication.
  const ex = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: 'echo x > pub.txt' });
  assert.equal(ex.publication.published, true);
  const back = await h.mcp.sc('read_command_lines', { sandbox_id: SB, command_session_id: ex.command_session_id });
  assert.deepEqual(back.publication, { published: true, layer: ex.publication.layer, owner: ex.publication.owner, changed_paths: 1 });

  // A SIGKILL leaves the socket file; sbxctl status says sbxd is not there, and the next sbxd removes it first.
  h.sbxd.proc.kill('SIGKILL');
  await h.sbxd.exited;
  h.sbxd.proc = null;
  assert.ok(fs.existsSync(h.socket), 'the stale socket file is left');
  const st = await run(SBXCTL, ['--socket', h.socket, 'status']);
  assert.equal(st.code, 3, `sbxctl status on a stale socket: ${st.code} ${st.stderr}`);
  await h.sbxd.start();
  assert.match(fs.readFileSync(h.sbxdLog, 'utf8'), /Removed the stale socket/);
  const after = await h.mcp.sc('read_command_lines', { sandbox_id: SB, command_session_id: ex.command_session_id });
  assert.deepEqual(after.publication, back.publication, 'the publication survives a restart');
});

h.test('10. the rendered text trims noise; structuredContent keeps every field of the seed', async () => {
  const r = await h.mcp.call('exec_command', { sandbox_id: SB, cmd: 'echo quiet' });
  const sc = checkShape(r.structuredContent);
  for (const f of RESULT_FIELDS) assert.ok(f in sc, f);
  assert.equal(typeof sc.original_token_count, 'number');
  const head = header(r);
  assert.match(head, /^ok, exit 0, \d+\.\d\d s; 1 line; /);
  assert.ok(!/\d\.\d{3}/.test(head), `no six-decimal times: ${head}`);
  assert.ok(!head.includes('token'), `no token estimate when nothing was cut: ${head}`);
  assert.ok(!head.includes(sc.workspace_session_id), `no id of the ended automatic session: ${head}`);
  assert.ok(!head.includes(sc.command_session_id), `no command id when nothing is left to page: ${head}`);
  // A managed session's id stays: it still exists.
  const s = await h.connect({ argv: ['--set', 'runtime,sessions', '--socket', h.socket] });
  try {
    const ws = await s.sc('create_workspace_session', { sandbox_id: SB });
    const m = await s.call('exec_command', { sandbox_id: SB, cmd: 'true', workspace_session_id: ws.workspace_session_id });
    assert.ok(header(m).endsWith(`; workspace_session_id ${ws.workspace_session_id}`), header(m));
    await s.sc('finalize_workspace_session', { sandbox_id: SB, workspace_session_id: ws.workspace_session_id, action: 'discard' });
  } finally {
    await s.close();
  }
});
