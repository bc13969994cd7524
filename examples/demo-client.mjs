#!/usr/bin/env node
// A scripted MCP session against `sandbox-mcp --set runtime`, using the
// official MCP TypeScript SDK client over stdio, as an agent's MCP host would.
// Started by examples/run-demo.sh (make run) with a private sbxd and a sandbox
// named "demo" created from examples/demo-repo.
//
//   node examples/demo-client.mjs --socket RUN_DIR/sbxd.sock [--sandbox demo] [--source DIR]
//
// Each step prints the call and a readable rendering of its result, and checks
// what it expects; the exit status is 1 if any step did not go as expected.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const SOCKET = opt('--socket', process.env.SBX_SOCKET || '/run/sbx/sbxd.sock');
const SANDBOX = opt('--sandbox', 'demo');
const SOURCE = opt('--source', path.join(ROOT, 'examples', 'demo-repo'));
const MCP = process.env.SANDBOX_MCP || path.join(ROOT, 'build', 'bin', 'sandbox-mcp');
const LOG = opt('--broker-log', null);
const SBXD_PID = Number(opt('--sbxd-pid', 0));

/* The host's view of sbxd's process tree, like ps --forest (from /proc). */
function hostTree(root) {
  const kids = new Map();
  const info = new Map();
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const uid = /^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${e}/status`, 'utf8'))[1];
      const args = fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').replace(/\0+$/, '').split('\0').join(' ').trim();
      info.set(Number(e), { uid, args });
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(e));
    } catch {}
  }
  const out = [];
  const walk = (pid, depth) => {
    const i = info.get(pid);
    if (!i) return;
    out.push(`${i.uid.padEnd(7)} ${String(pid).padStart(7)}  ${'  '.repeat(depth)}${depth ? '\\_ ' : ''}${i.args}`);
    for (const k of (kids.get(pid) ?? []).sort((a, b) => a - b)) walk(k, depth + 1);
  };
  walk(root, 0);
  return out;
}

const tty = process.stdout.isTTY;
const c = (code, s) => (tty ? `\x1b[${code}m${s}\x1b[0m` : s);
const bold = (s) => c('1', s);
const dim = (s) => c('2', s);
const green = (s) => c('32', s);
const red = (s) => c('31', s);
const cyan = (s) => c('36', s);

let failures = 0;
let step = 0;

function heading(text) {
  step += 1;
  console.log(`\n${bold(`[${step}] ${text}`)}`);
}

function expect(cond, what) {
  if (cond) {
    console.log(`    ${green('✓')} ${what}`);
  } else {
    console.log(`    ${red('✗')} ${what}`);
    failures += 1;
  }
}

function showCall(name, a) {
  const shown = Object.entries(a)
    .filter(([k]) => k !== 'sandbox_id')
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(' ');
  console.log(`  ${cyan('→')} ${name} ${shown}`);
}

function showOutput(output, { head = 12, tail = 4 } = {}) {
  const lines = output.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const pr = (l) => console.log(`    ${dim('│')} ${l}`);
  if (lines.length <= head + tail + 1) lines.forEach(pr);
  else {
    lines.slice(0, head).forEach(pr);
    console.log(`    ${dim(`│ … ${lines.length - head - tail} more lines …`)}`);
    lines.slice(-tail).forEach(pr);
  }
}

function showResult(r, showOut = {}) {
  if (r.isError) {
    const text = (r.content || []).map((b) => b.text).join(' ');
    console.log(`  ${red('←')} isError: ${text}`);
    return r;
  }
  const s = r.structuredContent;
  const st = s.status === 'ok' ? green(s.status) : s.status === 'running' ? cyan(s.status) : red(s.status);
  const end = s.exit_code !== null ? `exit ${s.exit_code}` : s.signal ? `signal ${s.signal}` : '';
  console.log(`  ${cyan('←')} ${st} ${end} ${dim(`(${s.end_reason ?? 'still running'})`)} ` +
    `lines ${s.start_offset}..${s.end_offset} of ${s.total_lines}, ` +
    `${s.wall_time_seconds.toFixed(3)} s, command ${s.command_session_id} in ${s.workspace_session_id}`);
  if (showOut !== false && s.output) showOutput(s.output, showOut);
  if (s.publication) {
    const p = s.publication;
    console.log(`    ${dim('publication:')} ` + (p.error ? red(`refused: ${p.error}`)
      : p.published ? `layer ${p.layer} by ${p.owner}, ${p.changed_paths} changed path(s)` : 'nothing changed'));
  }
  return r;
}

async function main() {
  console.log(bold('sbx demo: an MCP client drives sandbox-mcp --set runtime'));
  console.log(dim(`  broker ${MCP}\n  socket ${SOCKET}\n  sandbox ${SANDBOX} (source ${SOURCE})`));

  const stderr = LOG ? fs.openSync(LOG, 'a') : 'inherit';
  const transport = new StdioClientTransport({
    command: MCP,
    args: ['--set', 'runtime'],
    env: { ...getDefaultEnvironment(), SBX_SOCKET: SOCKET },
    stderr,
  });
  const client = new Client({ name: 'sbx-demo', version: '0.1.0' });

  const call = async (name, a, show, opts) => {
    const full = { sandbox_id: SANDBOX, ...a };
    showCall(name, full);
    const r = await client.callTool({ name, arguments: full }, undefined, opts);
    return showResult(r, show);
  };

  try {
    heading('connect: initialize over stdio, then tools/list');
    await client.connect(transport);
    const v = client.getServerVersion();
    console.log(`  server ${v?.name} ${v?.version}`);
    const { tools } = await client.listTools();
    for (const t of tools) {
      console.log(`  - ${bold(t.name)}: ${t.description.split('\n')[0]}`);
      console.log(dim(`      arguments: ${Object.keys(t.inputSchema.properties).join(', ')} (required: ${t.inputSchema.required.join(', ')})`));
    }
    expect(['exec_command', 'write_command_stdin', 'read_command_lines'].every((n) => tools.some((t) => t.name === n)),
      'the three command tools are listed');

    heading('look around the workspace');
    let r = await call('exec_command', { cmd: 'pwd; ls -l; id' });
    expect(r.structuredContent?.status === 'ok', 'ls runs in /workspace');

    heading('run the project\'s tests: they fail (mul adds instead of multiplying)');
    r = await call('exec_command', { cmd: './test.sh' });
    expect(r.structuredContent?.status === 'error' && r.structuredContent.exit_code === 1, 'test.sh exits 1');

    heading('fix the bug with sed -i, run as a command (an automatic session publishes the change)');
    r = await call('exec_command', { cmd: "sed -i '/^mul()/,/^}/ s/+/*/' calc.sh && sed -n '/^mul()/,/^}/p' calc.sh" });
    const pub = r.structuredContent?.publication;
    expect(r.structuredContent?.status === 'ok', 'sed succeeded');
    expect(pub?.published === true && pub.changed_paths >= 1, 'the change was published as a new layer');

    heading('rerun the tests in a fresh session: they see the published fix');
    r = await call('exec_command', { cmd: './test.sh' });
    expect(r.structuredContent?.status === 'ok' && r.structuredContent.exit_code === 0, 'test.sh passes');

    heading('a command reading stdin: start it, answer its prompt, close stdin with U+0004');
    r = await call('exec_command', { cmd: './greet.sh', yield_time_ms: 500 });
    const greetId = r.structuredContent?.command_session_id;
    expect(r.structuredContent?.status === 'running', 'greet.sh waits for input');
    if (SBXD_PID) {
      console.log(dim('  meanwhile on the host (uid, pid, command), sbxd\'s process tree:'));
      for (const l of hostTree(SBXD_PID)) console.log(`    ${dim('│')} ${l}`);
    }
    r = await call('write_command_stdin', { command_session_id: greetId, stdin: 'sbx\n', yield_time_ms: 1000 });
    expect(/Hello, sbx!/.test(r.structuredContent?.output ?? ''), 'it greets us');
    r = await call('write_command_stdin', { command_session_id: greetId, stdin: 'one\ntwo\n\u0004', yield_time_ms: 3000 });
    expect(r.structuredContent?.status === 'ok', 'U+0004 closed stdin and the command finished');

    heading('a long output: the yield returns the latest lines, read_command_lines pages the rest');
    r = await call('exec_command', { cmd: './squares.sh 450', yield_time_ms: 20000 }, { head: 2, tail: 2 });
    const sq = r.structuredContent;
    expect(sq?.status === 'ok' && sq.total_lines === 450, '450 lines in the transcript');
    let off = 0;
    let seen = 0;
    while (sq && off < sq.total_lines) {
      const page = await call('read_command_lines', { command_session_id: sq.command_session_id, start_offset: off, limit: 200 }, { head: 1, tail: 1 });
      const n = page.structuredContent.end_offset - page.structuredContent.start_offset;
      if (n === 0) break;
      seen += n;
      off = page.structuredContent.end_offset;
    }
    expect(seen === 450, 'every line read back in pages of 200 with stable offsets');

    heading('a runaway command is stopped by timeout_ms');
    r = await call('exec_command', { cmd: 'echo working; sleep 30', timeout_ms: 1000 });
    expect(r.structuredContent?.status === 'timed_out', 'timed_out after 1 s, output kept');

    heading('the host\'s copy of the repository was never modified');
    const hostCalc = fs.readFileSync(path.join(SOURCE, 'calc.sh'), 'utf8');
    const bug = /mul\(\) \{\n\techo \$\(\(\$1 \+ \$2\)\)/.test(hostCalc);
    console.log(`  ${SOURCE}/calc.sh still has mul() adding: ${bug}`);
    expect(bug, 'the fix lives only in the sandbox\'s published layers');
  } catch (e) {
    console.log(red(`\ndemo step failed: ${e?.stack ?? e}`));
    failures += 1;
  } finally {
    await client.close().catch(() => {});
  }

  console.log(failures === 0 ? green(bold('\ndemo: every step went as expected'))
    : red(bold(`\ndemo: ${failures} step(s) did not go as expected`)));
  process.exit(failures === 0 ? 0 : 1);
}

main();
