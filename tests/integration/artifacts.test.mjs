// The artifacts set (issue 19, seed 004): runtime_execute with inline code,
// args and stdin in the runtimes the test image (the host's default image)
// has, the toolchain and policy errors, the digest of every parser's real
// fixtures (tests/fixtures/digest), and runtime_query_output over artifacts
// and command sessions: terms, cursor paging, line ranges, both streams.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, sbxctl, sleep, Harness, LEAK_MARKER, ROOT } from './helpers.mjs';

const U1 = 65534;
const h = useSbx({
  sandboxes: [{ name: 'art' }], sets: 'runtime,sessions,artifacts', world: true,
  config: '[sbxd]\nruntime_allowed = node python shell c cpp go rust ruby\n' +
    // sbxd's environment (helpers.mjs) has PATH and this marker only; the marker is let through here
    `runtime_env_allowlist = ${LEAK_MARKER} SBX_NOT_SET\n`,
});
const SB = 'art';
const run = (args) => h.mcp.sc('runtime_execute', { sandbox_id: SB, ...args });
const fail = (args) => h.mcp.err('runtime_execute', { sandbox_id: SB, ...args });
const query = (args) => h.mcp.sc('runtime_query_output', args);
const queryErr = (args) => h.mcp.err('runtime_query_output', args);

h.test('tools/list: runtime_execute and runtime_query_output with schemas and honest annotations', async () => {
  const tools = Object.fromEntries(h.mcp.tools.map((t) => [t.name, t]));
  assert.ok(tools.runtime_execute && tools.runtime_query_output);
  assert.equal(tools.runtime_execute.annotations.readOnlyHint, false);
  assert.equal(tools.runtime_query_output.annotations.readOnlyHint, true);
  assert.deepEqual(tools.runtime_execute.inputSchema.required, ['sandbox_id', 'runtime']);
  for (const k of ['args', 'code', 'stdin', 'outputMode', 'queryTerms', 'timeoutMs', 'persistOutput',
    'maxResponseLines', 'workspace_session_id']) assert.ok(tools.runtime_execute.inputSchema.properties[k], k);
  for (const k of ['artifactHandle', 'queryTerms', 'cursor', 'lineRange', 'maxExcerpts', 'contextLines', 'stream']) {
    assert.ok(tools.runtime_query_output.inputSchema.properties[k], k);
  }
});

h.test('node: inline code runs as ESM (import, top-level await), args reach it', async () => {
  const r = await run({ runtime: 'node', code: "import os from 'node:os';\nawait Promise.resolve();\n" +
    "console.log('esm', typeof os.hostname(), process.argv.slice(2).join(','));", args: ['a', 'b c'] });
  assert.equal(r.status, 'success', JSON.stringify(r));
  assert.equal(r.exitCode, 0);
  assert.match(r.stdoutSummary, /^esm string a,b c$/);
  assert.equal(r.signal, null);
  assert.equal(r.end_reason, 'exit');
  assert.match(r.command_session_id, /^cmd-/);
  assert.ok(r.durationMs >= 0);
});

h.test('node with stdin: a temp .mjs, stdin written and closed, its size and SHA-256 reported, never echoed', async () => {
  const stdin = 'runtime input\nline two é\n';
  const r = await run({ runtime: 'node', code: 'process.stdin.pipe(process.stdout);', stdin });
  assert.equal(r.status, 'success', JSON.stringify(r));
  assert.equal(r.stdoutSummary, stdin.trimEnd());
  assert.equal(r.stdinBytes, Buffer.byteLength(stdin));
  assert.equal(r.stdinSha256, crypto.createHash('sha256').update(stdin).digest('hex'));
  const secret = 'secret-stdin-' + crypto.randomBytes(6).toString('hex');
  const q = await h.mcp.call('runtime_execute', { sandbox_id: SB, runtime: 'python',
    code: 'import sys\ndata = sys.stdin.read()\nprint(len(data))', stdin: secret });
  assert.equal(q.structuredContent.stdoutSummary, String(secret.length));
  assert.ok(!JSON.stringify(q).includes(secret), 'stdin appears in the result');
  assert.ok(!fs.readFileSync(h.sbxdLog, 'utf8').includes(secret), 'stdin appears in the sbxd log');
});

h.test('python, shell and args-only runs', async () => {
  const p = await run({ runtime: 'python', code: 'import sys\nprint("py", sys.argv[1:])\nsys.exit(3)', args: ['x'] });
  assert.equal(p.status, 'failure');
  assert.equal(p.exitCode, 3);
  assert.match(p.stdoutSummary, /py \['x'\]/);
  const s = await run({ runtime: 'shell', code: 'echo "sh $1"; echo oops >&2', args: ['one'] });
  assert.equal(s.stdoutSummary, 'sh one');
  assert.equal(s.stderrSummary, 'oops');
  const a = await run({ runtime: 'python', args: ['-c', 'print(6 * 7)'] });
  assert.equal(a.stdoutSummary, '42');
  assert.equal(a.executable, 'python3');
});

h.test('compiled runtimes: c, cpp, go and rust compile, run and clean up their binary', async () => {
  const ws = await h.mcp.sc('create_workspace_session', { sandbox_id: SB });
  const c = await run({ runtime: 'c', workspace_session_id: ws.workspace_session_id,
    code: '#include <stdio.h>\nint main(int argc, char **argv) { printf("c %s %s\\n", argv[0], argv[1]); return 0; }',
    args: ['arg1'] });
  assert.equal(c.status, 'success', JSON.stringify(c));
  const [, bin, arg] = c.stdoutSummary.split(' ');
  assert.equal(arg, 'arg1');
  const gone = await run({ runtime: 'shell', workspace_session_id: ws.workspace_session_id,
    code: `test -e '${bin}' && echo present || echo gone; test -e '${path.dirname(bin)}' && echo dir || echo nodir` });
  assert.equal(gone.stdoutSummary, 'gone\nnodir');
  const cpp = await run({ runtime: 'cpp', code: '#include <iostream>\nint main() { std::cout << "cpp " << 6 * 7 << std::endl; }' });
  assert.equal(cpp.stdoutSummary, 'cpp 42', JSON.stringify(cpp));
  const go = await run({ runtime: 'go', timeoutMs: 120000,
    code: 'package main\nimport ("fmt"; "os")\nfunc main() { fmt.Println("go", os.Args[1]) }', args: ['gopher'] });
  assert.equal(go.stdoutSummary, 'go gopher', JSON.stringify(go));
  const rs = await run({ runtime: 'rust', code: 'fn main() { println!("rust {}", std::env::args().nth(1).unwrap()); }',
    args: ['crab'] });
  assert.equal(rs.stdoutSummary, 'rust crab', JSON.stringify(rs));
  await h.mcp.sc('finalize_workspace_session', { sandbox_id: SB, workspace_session_id: ws.workspace_session_id, action: 'discard' });
});

h.test('the environment: the runtime set\'s clean one plus runtime_env_allowlist', async () => {
  const r = await run({ runtime: 'shell', code: `echo "$${LEAK_MARKER}" "$HOME" "\${SBX_NOT_SET-unset}"; env | wc -l` });
  assert.equal(r.stdoutSummary.split('\n')[0], 'sbxd-env /root unset');
  const plain = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: `echo "\${${LEAK_MARKER}-absent}"` });
  assert.equal(plain.output, 'absent\n', 'exec_command keeps its clean environment');
});

h.test('a missing toolchain: an error naming the executable and the image that has it', async () => {
  const t = await fail({ runtime: 'ruby', code: 'puts 1' });
  assert.match(t, /runtime ruby: executable 'ruby' not found in this sandbox's image/);
  assert.match(t, /Debian package ruby/);
});
