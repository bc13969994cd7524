// The artifacts set (issue 19, seed 004): runtime_execute with inline code,
// args and stdin in the runtimes the test image (the host's default image)
// has, the toolchain and policy errors, the digest of every parser's real
// fixtures (tests/fixtures/digest), and runtime_query_output over artifacts
// and command sessions: terms, cursor paging, line ranges, both streams.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, sbxctl, sleep, Harness, LEAK_MARKER, ROOT } from './helpers.mjs';

const U1 = 65534;
const h = useSbx({
  sandboxes: [{ name: 'art' }], sets: 'runtime,sessions,artifacts', world: true,
  config: '[sbxd]\nruntime_allowed = node python shell c cpp go rust ruby\n' +
    // room for the 10 MB artifact of the compression test
    'runtime_max_artifact_bytes = 32M\n' +
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

h.test('bad input: each an isError naming the argument and the fix', async () => {
  assert.match(await fail({ runtime: 'cobol', code: 'x' }), /runtime: unknown runtime 'cobol'; use one of node/);
  assert.match(await fail({ runtime: 'php', code: 'x' }), /runtime: 'php' is not allowed here; allowed: .*runtime_allowed/);
  assert.match(await fail({ runtime: 'python', executable: 'perl', args: ['-e1'] }),
    /executable: 'perl' is not allowed for runtime python; use python3, python, pytest, or .*runtime_allowed_executables/);
  assert.match(await fail({ runtime: 'python', executable: '/bin/sh' }), /executable: '\/bin\/sh' is not an executable's name/);
  assert.match(await fail({ runtime: 'python', code: '1', stdin: 'x'.repeat(512 * 1024 + 1) }),
    /stdin: 524289 bytes is over 512 KiB/);
  assert.match(await fail({ runtime: 'shell', code: 'true', timeoutMs: 700000 }),
    /timeoutMs: 700000 is over runtime_max_duration_ms \(600000/);
  assert.match(await fail({ runtime: 'shell', code: 'true', outputMode: 'intent' }), /queryTerms: outputMode intent needs/);
  assert.match(await queryErr({ artifactHandle: 'art-0123456789abcdef0123456789abcdef', queryTerms: ['x'] }),
    /artifactHandle: 'art-0123456789abcdef0123456789abcdef' not found/);
  assert.match(await queryErr({ artifactHandle: 'cmd-made-up', queryTerms: ['x'] }), /artifactHandle: 'cmd-made-up' not found/);
  const r = await run({ runtime: 'shell', code: 'seq 1 5' });
  assert.match(await queryErr({ artifactHandle: r.artifactHandle }), /queryTerms: give at least one term, or a lineRange/);
  assert.match(await queryErr({ artifactHandle: r.artifactHandle, queryTerms: [''] }), /queryTerms\[0\]: must not be empty/);
  assert.match(await queryErr({ artifactHandle: r.artifactHandle, lineRange: { stream: 'stdout', startLine: 4, endLine: 9 } }),
    /lineRange: 4-9 is outside stdout, which has lines 1-5/);
  assert.match(await queryErr({ artifactHandle: r.artifactHandle, queryTerms: ['1'], cursor: { stream: 'stdout', afterLine: 99 } }),
    /cursor.afterLine: 99 is past the end of stdout \(5 lines\)/);
  assert.match(await queryErr({ artifactHandle: r.artifactHandle, queryTerms: ['1'], stream: 'stderr',
    cursor: { stream: 'stdout', afterLine: 1 } }), /cursor.stream: stdout is not searched/);
});

// Every fixture replayed in the sandbox (its output, stderr and exit status as
// the real tool made them), with the real command line as args for detection.
const FIX = path.join(ROOT, 'tests', 'fixtures', 'digest');
const fixtures = fs.readdirSync(FIX).filter((f) => f.endsWith('.cmd')).map((f) => f.slice(0, -4)).sort();
h.test(`digests: every parser against its real fixtures (${fixtures.length} runs, a failing and a passing each)`, async () => {
  for (const f of fixtures) {
    for (const ext of ['out', 'err', 'exit']) {
      await h.mcp.sc('file_write', { sandbox_id: SB, path: `fx/${f}.${ext}`, content: fs.readFileSync(path.join(FIX, `${f}.${ext}`), 'utf8') });
    }
  }
  const kinds = new Set();
  for (const f of fixtures) {
    const cmd = fs.readFileSync(path.join(FIX, `${f}.cmd`), 'utf8').trim().split(' ');
    const r = await run({ runtime: 'shell', code: `cat fx/${f}.out; cat fx/${f}.err >&2; exit $(cat fx/${f}.exit)`, args: cmd });
    const passing = f.endsWith('-pass');
    assert.equal(r.digest.ok, passing, `${f}: ${JSON.stringify(r.digest)}`);
    assert.equal(r.status, passing ? 'success' : 'failure', f);
    assert.equal(r.digest.failures.length > 0, !passing, `${f}: ${JSON.stringify(r.digest)}`);
    if (!passing) {
      assert.equal(r.nextAction.action, 'runtime_query_output');
      assert.equal(r.nextAction.artifactHandle, r.artifactHandle);
    } else assert.equal(r.nextAction, null);
    kinds.add(r.digest.parser);
  }
  assert.deepEqual([...kinds].sort(), ['cargo-test', 'eslint', 'gcc', 'generic', 'go-test', 'go-test-json', 'jest',
    'junit-xml', 'make', 'node-test-spec', 'node-test-tap', 'pytest', 'tap', 'tsc', 'vitest']);
});

h.test('digests of real runs here: node --test, pytest and go test, with file and line', async () => {
  await h.mcp.sc('file_write', { sandbox_id: SB, path: 't/a.test.mjs', content:
    "import test from 'node:test';\nimport assert from 'node:assert';\ntest('one', () => assert.equal(1, 2));\ntest('two', () => {});\n" });
  const n = await run({ runtime: 'node', args: ['--test', 't/a.test.mjs'] });
  assert.equal(n.digest.kind, 'node-test');
  assert.deepEqual(n.digest.failures.map((f) => f.name), ['one']);
  assert.equal(n.digest.failures[0].line, 3);
  await h.mcp.sc('file_write', { sandbox_id: SB, path: 'py/test_x.py', content: 'def test_a():\n    assert 1 == 2\n\ndef test_b():\n    pass\n' });
  const p = await run({ runtime: 'python', args: ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'py'] });
  assert.equal(p.digest.parser, 'pytest', JSON.stringify(p));
  assert.equal(p.digest.failures[0].name, 'py/test_x.py::test_a');
  assert.equal(p.digest.failures[0].line, 2);
  // pytest's JUnit XML report, printed by the command that wrote it.
  const j = await run({ runtime: 'shell', code: 'python3 -m pytest -q -p no:cacheprovider --junitxml=r.xml py >/dev/null; ' +
    's=$?; cat r.xml; rm -f r.xml; exit $s' });
  assert.equal(j.digest.parser, 'junit-xml', JSON.stringify(j));
  assert.deepEqual(j.digest.counts, { passed: 1, failed: 1, skipped: 0 });
  assert.equal(j.digest.failures[0].name, 'py.test_x.test_a');
  assert.equal(j.digest.failures[0].line, 2);
  await h.mcp.sc('file_write', { sandbox_id: SB, path: 'g/go.mod', content: 'module example.com/g\n\ngo 1.19\n' });
  await h.mcp.sc('file_write', { sandbox_id: SB, path: 'g/g_test.go', content:
    'package g\n\nimport "testing"\n\nfunc TestX(t *testing.T) {\n\tt.Fatalf("bad %d", 1)\n}\n' });
  const g = await run({ runtime: 'shell', code: 'cd g && go test ./...', args: ['go', 'test'], timeoutMs: 120000 });
  assert.equal(g.digest.parser, 'go-test', JSON.stringify(g));
  assert.deepEqual(g.digest.failures[0], { name: 'TestX', message: 'bad 1', file: 'g_test.go', line: 6 });
});

h.test('JUnit XML files named in the arguments: sbxd reads them in the sandbox, the digest parses them', async () => {
  // -p no:terminal: pytest prints nothing, only the report it writes says what failed (a raise: without
  // its terminal, pytest's assertion rewriting cannot explain a comparison).
  await h.mcp.sc('file_write', { sandbox_id: SB, path: 'pj/test_j.py', content:
    'def test_a():\n    raise ValueError("bad value")\n\ndef test_b():\n    pass\n' });
  const r = await run({ runtime: 'python', args: ['-m', 'pytest', '-p', 'no:terminal', '-p', 'no:cacheprovider',
    '--junitxml', 'rep/r.xml', 'pj'] });
  assert.equal(r.status, 'failure', JSON.stringify(r));
  assert.equal(r.stdoutSummary, '');
  assert.equal(r.digest.parser, 'junit-xml', JSON.stringify(r.digest));
  assert.deepEqual(r.digest.counts, { passed: 1, failed: 1, skipped: 0 });
  assert.equal(r.digest.failures[0].name, 'pj.test_j.test_a');
  assert.equal(r.digest.failures[0].message, 'ValueError: bad value');
  assert.equal(r.digest.failures[0].file, 'pj/test_j.py');
  assert.equal(r.digest.failures[0].line, 2);
  assert.equal(r.digest.reports.length, 1);
  assert.equal(r.digest.reports[0].path, 'rep/r.xml');
  assert.equal(r.digest.reports[0].read, true);
  assert.equal(r.digest.reports[0].truncated, false);

  // A symlink to a host path resolves inside the sandbox's root (there is no such file there), a
  // directory named .xml and a missing file are said so: none is an error of the run.
  const dir = fs.mkdtempSync('/tmp/junit-host-');
  const host = path.join(dir, 'host.xml');
  fs.writeFileSync(host, '<?xml version="1.0"?><testsuite><testcase classname="host" name="secret">' +
    '<failure message="host-only"/></testcase></testsuite>');
  try {
    const l = await run({ runtime: 'shell', args: ['-c', `ln -sf ${host} h.xml && ln -sf /etc/passwd p.xml && ` +
      'mkdir -p d.xml && exit 1', 'sh', '--junit-xml=h.xml', '--junitfile', 'p.xml', 'd.xml', 'missing.xml'] });
    assert.equal(l.status, 'failure', JSON.stringify(l));
    const by = Object.fromEntries(l.digest.reports.map((x) => [x.path, x]));
    assert.deepEqual(Object.keys(by), ['h.xml', 'p.xml', 'd.xml', 'missing.xml']);
    assert.deepEqual([by['h.xml'].read, by['h.xml'].error], [false, 'no such file']);
    assert.deepEqual([by['p.xml'].read, by['p.xml'].error], [false, 'not a JUnit XML report']);
    assert.deepEqual([by['d.xml'].read, by['d.xml'].error], [false, 'a directory, not a file']);
    assert.deepEqual([by['missing.xml'].read, by['missing.xml'].error], [false, 'no such file']);
    assert.notEqual(l.digest.parser, 'junit-xml');
    assert.ok(!JSON.stringify(l).includes('host-only'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }

  // A report over the limit (8 MiB of reports, SBX_DIGEST_JUNIT_FILES_BYTES) is cut, as a printed one
  // is: the cases before the cut count.
  const b = await run({ runtime: 'python', args: ['--junitxml=big.xml'], code: 'import sys\n' +
    'with open(sys.argv[1].split("=")[1], "w") as f:\n' +
    '    f.write(\'<?xml version="1.0"?><testsuite><testcase classname="big" name="first">' +
    '<failure message="early"/></testcase>\')\n' +
    '    i = 0\n' +
    '    while f.tell() < 9 << 20:\n' +
    '        f.write(\'<testcase classname="big" name="t%d"/>\' % i)\n' +
    '        i += 1\n' +
    '    f.write("</testsuite>")\n' +
    'print("cases", i + 1)\nsys.exit(1)\n' });
  assert.equal(b.digest.parser, 'junit-xml', JSON.stringify(b.digest));
  const rep = b.digest.reports[0];
  assert.deepEqual([rep.path, rep.read, rep.truncated, rep.bytes], ['big.xml', true, true, 8 << 20]);
  assert.ok(rep.size >= 9 << 20);
  assert.equal(b.digest.failures[0].name, 'big.first');
  const cases = Number(b.stdoutSummary.split(' ')[1]);
  assert.ok(b.digest.counts.passed > 0 && b.digest.counts.passed + 1 < cases, JSON.stringify(b.digest.counts));
});

// 1000 stdout lines, "hit" on every 100th, and 10 stderr lines, "hit" on the 5th.
const NOISY = 'i=1; while [ $i -le 1000 ]; do if [ $((i % 100)) -eq 0 ]; then echo "line $i hit"; ' +
  'else echo "line $i"; fi; i=$((i+1)); done; i=1; while [ $i -le 10 ]; do if [ $i -eq 5 ]; then ' +
  'echo "err $i HIT" >&2; else echo "err $i" >&2; fi; i=$((i+1)); done; exit 1';
const saved = {};

h.test('queries by terms: excerpts with context, 1-based lines, both streams, the counts', async () => {
  const r = await run({ runtime: 'shell', code: NOISY });
  assert.equal(r.status, 'failure');
  assert.match(r.artifactHandle, /^art-[0-9a-f]{32}$/);
  assert.deepEqual(r.truncation, { stdoutTruncated: false, stderrTruncated: false,
    totalStdoutBytes: 8933, totalStderrBytes: 65 });
  saved.handle = r.artifactHandle;
  saved.command = r.command_session_id;
  const q = await query({ artifactHandle: r.artifactHandle, queryTerms: ['HIT'], contextLines: 1 });
  assert.equal(q.matchStatus, 'matched');
  assert.equal(q.matchCount, 11, 'the page stops at the match after its last excerpt');
  assert.equal(q.matchCountComplete, false);
  assert.deepEqual(q.searchedStreams, ['stdout', 'stderr']);
  assert.equal(q.totalLines, 1010);
  assert.equal(q.excerpts.length, 10, 'maxExcerpts 10 by default');
  assert.deepEqual(q.excerpts[0], { lineStart: 99, lineEnd: 101, source: 'stdout',
    content: '  99| line 99\n 100| line 100 hit\n 101| line 101\n' });
  assert.deepEqual(q.nextCursor, { stream: 'stdout', afterLine: 1000 });
  const next = await query({ artifactHandle: r.artifactHandle, queryTerms: ['HIT'], contextLines: 1, cursor: q.nextCursor });
  assert.equal(next.matchCount, 1);
  assert.equal(next.matchCountComplete, true);
  assert.deepEqual(next.excerpts, [{ lineStart: 4, lineEnd: 6, source: 'stderr', content: '   4| err 4\n   5| err 5 HIT\n   6| err 6\n' }]);
  assert.equal(next.nextCursor, null);
  const err = await query({ artifactHandle: r.artifactHandle, queryTerms: ['hit'], stream: 'stderr', contextLines: 0 });
  assert.deepEqual(err.searchedStreams, ['stderr']);
  assert.equal(err.totalLines, 10);
  assert.deepEqual(err.excerpts.map((e) => [e.lineStart, e.lineEnd]), [[5, 5]]);
  const none = await query({ artifactHandle: r.artifactHandle, queryTerms: ['no such term'] });
  assert.equal(none.matchStatus, 'noMatchFallback');
  assert.equal(none.matchCount, 0);
  assert.deepEqual(none.excerpts.map((e) => [e.source, e.lineStart, e.lineEnd]), [['stdout', 981, 1000], ['stderr', 1, 10]]);
});

h.test('cursor paging to the end: every match once, in order', async () => {
  let cursor;
  const seen = [];
  for (let page = 0; page < 20; page++) {
    const q = await query({ artifactHandle: saved.handle, queryTerms: ['hit'], stream: 'stdout', maxExcerpts: 3,
      contextLines: 0, ...(cursor ? { cursor } : {}) });
    seen.push(...q.excerpts.map((e) => e.lineStart));
    if (!q.nextCursor) break;
    cursor = q.nextCursor;
  }
  assert.deepEqual(seen, [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
});

h.test('line ranges: exact lines, inclusive, of either stream', async () => {
  const q = await query({ artifactHandle: saved.handle, lineRange: { stream: 'stdout', startLine: 1, endLine: 3 } });
  assert.equal(q.matchStatus, 'lineRange');
  assert.deepEqual(q.excerpts, [{ lineStart: 1, lineEnd: 3, source: 'stdout', content: '   1| line 1\n   2| line 2\n   3| line 3\n' }]);
  const e = await query({ artifactHandle: saved.handle, lineRange: { stream: 'stderr', startLine: 10, endLine: 10 } });
  assert.equal(e.excerpts[0].content, '  10| err 10\n');
});

h.test('a command_session_id is a handle too: runtime_execute\'s streams, exec_command\'s merged transcript', async () => {
  const q = await query({ artifactHandle: saved.command, queryTerms: ['line 500'], contextLines: 0 });
  assert.deepEqual(q.excerpts.map((e) => [e.source, e.lineStart]), [['stdout', 500]]);
  const ex = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: 'echo alpha; echo beta >&2; echo gamma' });
  const m = await query({ artifactHandle: ex.command_session_id, queryTerms: ['BETA'], contextLines: 1 });
  assert.deepEqual(m.searchedStreams, ['merged']);
  assert.deepEqual(m.excerpts, [{ lineStart: 1, lineEnd: 3, source: 'merged', content: '   1| alpha\n   2| beta\n   3| gamma\n' }]);
  assert.match(await queryErr({ artifactHandle: ex.command_session_id, queryTerms: ['x'], stream: 'stdout' }),
    /stream: this command kept stdout and stderr together \(exec_command\); use stream both/);
});

h.test('persistOutput false: no artifact handle; outputMode minimal and intent', async () => {
  const r = await run({ runtime: 'shell', code: 'echo one; echo two', persistOutput: false, outputMode: 'minimal' });
  assert.equal(r.artifactHandle, null);
  assert.equal(r.digest, null);
  assert.equal(r.stdoutSummary, '');
  const i = await run({ runtime: 'shell', code: 'echo ok 1; echo PROBLEM here; echo ok 2', outputMode: 'intent', queryTerms: ['PROBLEM'] });
  assert.equal(i.stdoutSummary, 'PROBLEM here');
});

h.test('foreign handles: another user\'s artifact and command session are not found, as a made-up one', async () => {
  const other = await h.connect({ uid: U1, argv: ['--set', 'artifacts', '--socket', h.socket] });
  for (const handle of [saved.handle, saved.command, 'art-ffffffffffffffffffffffffffffffff']) {
    assert.match(await other.err('runtime_query_output', { artifactHandle: handle, queryTerms: ['hit'] }), /not found/);
  }
});

h.test('sbxctl status shows the artifact store', async () => {
  const r = await sbxctl(h.socket, ['status']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^artifacts: \d+ \(\d+ of 1073741824 bytes, runtime_artifacts_max_bytes; \d+ uncompressed\)$/m);
  const j = JSON.parse((await sbxctl(h.socket, ['status', '--json'])).stdout);
  assert.ok(j.artifacts >= 2 && j.artifact_bytes > 0 && j.artifact_raw_bytes >= j.artifact_bytes, JSON.stringify(j));
});

// Compression at rest (data/zframes.h): 260000 numbered lines of one build
// message, about 10.3 MB over 40 frames of 256 KiB, "RARE" on every 50000th.
const FRAME = 262144; // SBX_ARTIFACT_FRAME_BYTES
const BIG_LINES = 260000;
const bigLine = (i) => `line ${i}: compiling module, all fine${i % 50000 === 0 ? ' RARE' : ''}`;
const BIG = `awk 'BEGIN { for (i = 1; i <= ${BIG_LINES}; i++) ` +
  `printf "line %d: compiling module, all fine%s\\n", i, (i % 50000 == 0 ? " RARE" : "") }'`;
// The 1-based lines of BIG whose text holds byte k * FRAME of the stored text: each crosses a frame boundary.
function boundaryLines() {
  const out = [];
  for (let i = 1, off = 0; i <= BIG_LINES; i++) {
    const end = off + bigLine(i).length + 1;
    if (Math.floor(off / FRAME) !== Math.floor((end - 1) / FRAME)) out.push(i);
    off = end;
  }
  return out;
}
const excerptText = (e) => e.content.split('\n').filter(Boolean).map((l) => l.replace(/^ *\d+\| /, ''));

async function checkBig(q) {
  const rare = await q({ artifactHandle: saved.big, queryTerms: ['rare'], contextLines: 1, maxExcerpts: 2 });
  assert.equal(rare.totalLines, BIG_LINES);
  assert.deepEqual(rare.excerpts.map((e) => [e.lineStart, e.lineEnd]), [[49999, 50001], [99999, 100001]]);
  assert.deepEqual(excerptText(rare.excerpts[1]), [bigLine(99999), bigLine(100000), bigLine(100001)]);
  let cursor = rare.nextCursor;
  const seen = rare.excerpts.map((e) => e.lineStart + 1);
  while (cursor) {
    const page = await q({ artifactHandle: saved.big, queryTerms: ['RARE'], contextLines: 0, maxExcerpts: 2, cursor });
    seen.push(...page.excerpts.map((e) => e.lineStart));
    cursor = page.nextCursor;
  }
  assert.deepEqual(seen, [50000, 100000, 150000, 200000, 250000]);
  const lines = boundaryLines();
  assert.ok(lines.length > 30, `${lines.length} lines across frames`);
  for (const b of [lines[0], lines[17], lines[lines.length - 1]]) {
    const r = await q({ artifactHandle: saved.big, lineRange: { stream: 'stdout', startLine: b - 2, endLine: b + 2 } });
    assert.deepEqual(excerptText(r.excerpts[0]), [b - 2, b - 1, b, b + 1, b + 2].map(bigLine));
  }
  const last = await q({ artifactHandle: saved.big, lineRange: { stream: 'stdout', startLine: BIG_LINES, endLine: BIG_LINES } });
  assert.deepEqual(excerptText(last.excerpts[0]), [bigLine(BIG_LINES)]);
}

h.test('persisted artifacts are compressed at rest: 10 MB of repetitive output stores under 1 MB, and reads the same', async () => {
  const r = await run({ runtime: 'shell', code: BIG });
  assert.equal(r.status, 'success');
  assert.ok(r.truncation.totalStdoutBytes > 10e6, JSON.stringify(r.truncation));
  saved.big = r.artifactHandle;
  saved.bigCommand = r.command_session_id;
  // A query waits behind the compression (the sandbox's lane): once it answers, the file is compressed.
  await checkBig(query);
  const dir = path.join(h.stateDir, 'transcripts');
  assert.equal(fs.existsSync(path.join(dir, `${r.command_session_id}.log`)), false, 'the plain text is gone');
  let stored = 0;
  for (const ext of ['zst', 'lix', 'str']) stored += fs.statSync(path.join(dir, `${r.command_session_id}.${ext}`)).size;
  assert.ok(stored < 1e6, `stores ${stored} bytes`);
  const j = JSON.parse((await sbxctl(h.socket, ['status', '--json'])).stdout);
  assert.ok(j.artifact_raw_bytes - j.artifact_bytes > 9e6, JSON.stringify(j));
  // the command session id reads the same compressed transcript
  const c = await query({ artifactHandle: r.command_session_id, lineRange: { stream: 'stdout', startLine: 1, endLine: 2 } });
  assert.deepEqual(excerptText(c.excerpts[0]), [bigLine(1), bigLine(2)]);
});

h.test('artifacts survive an sbxd restart; one left uncompressed is compressed at start', async () => {
  // The big artifact as an sbxd before compression left it: plain text (zstd -d reads the
  // frames and skips the index), not recorded compressed.
  await h.sbxd.stop();
  const dir = path.join(h.stateDir, 'transcripts');
  const file = (ext) => path.join(dir, `${saved.bigCommand}.${ext}`);
  execFileSync('zstd', ['-q', '-d', file('zst'), '-o', file('log')]);
  fs.unlinkSync(file('zst'));
  execFileSync('python3', ['-c', 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); ' +
    'c.execute("delete from artifact_packed where handle=?", (sys.argv[2],)); c.commit()',
  path.join(h.stateDir, 'sbx.db'), saved.big]);
  await h.sbxd.start();
  const s = await h.connect({ argv: ['--set', 'artifacts', '--socket', h.socket] });
  const q = await s.sc('runtime_query_output', { artifactHandle: saved.handle, queryTerms: ['line 700 hit'], contextLines: 0 });
  assert.deepEqual(q.excerpts.map((e) => e.lineStart), [700]);
  await checkBig((args) => s.sc('runtime_query_output', args));
  // its queries waited behind the compression (the sandbox's lane)
  assert.equal(fs.existsSync(file('log')), false);
  assert.ok(fs.statSync(file('zst')).size < 1e6);
});
