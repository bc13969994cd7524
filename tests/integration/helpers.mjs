// Shared harness for the sbx integration tests (node --test).
//
// Each test file calls useSbx() once: it starts a private sbxd with its own
// state and run directories under /tmp/sbx-test-XXXXXX, creates sandboxes
// from fresh copies of a fixture repository with sbxctl, connects the official
// MCP SDK client to build/bin/sandbox-mcp --set runtime over stdio, calls
// listTools() first (so the SDK validates every structuredContent against the
// tool's outputSchema), and tears everything down afterwards (client close,
// SIGTERM to sbxd by pid, wait, remove the directories). On any failure the
// tails of the sbxd and sandbox-mcp logs are printed.
//
// Environment knobs: SBX_BIN_DIR (default build/bin), SBX_TEST_KEEP=1 keeps
// the temporary directory, SBX_TEST_VERBOSE=1 prints the logs even on success.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = path.resolve(process.env.SBX_BIN_DIR || path.join(ROOT, 'build', 'bin'));
export const SBXD = path.join(BIN, 'sbxd');
export const SBXCTL = path.join(BIN, 'sbxctl');
export const SANDBOX_MCP = path.join(BIN, 'sandbox-mcp');
export const TMP_PREFIX = '/tmp/sbx-test-';
/* Set in the environment of sbxd and sandbox-mcp; must never reach a command. */
export const LEAK_MARKER = 'SBX_TEST_LEAK_MARKER';

/* A number unique to this test process, e.g. `sleep ${T(104)}` -> "sleep 104.31294",
 * so host-side process checks never see another run's commands. */
export const T = (n) => `${n}.${process.pid}`;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/* A sleep that does not keep the process alive (for Promise.race deadlines). */
const timer = (ms) => new Promise((r) => setTimeout(r, ms).unref());

export async function waitFor(fn, { timeout = 10000, interval = 50, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
    await sleep(interval);
  }
}

/* Run a program, never throwing on a non-zero exit. */
export function run(cmd, args, { env, timeout = 30000, input } = {}) {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { env: env ?? process.env, timeout, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        resolve({ code, signal: err?.signal ?? null, stdout, stderr, error: err && code === null ? err : null });
      });
    // A program that exits before reading its input (a usage error) makes the write fail with EPIPE:
    // its exit status is the result, not an exception of the test.
    child.stdin.on('error', (e) => { if (e.code !== 'EPIPE') throw e; });
    if (input !== undefined) child.stdin.end(input);
    else child.stdin.end();
  });
}

export function tail(file, lines = 80) {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return text.split('\n').slice(-lines).join('\n');
  } catch (e) {
    return `(no ${file}: ${e.code ?? e.message})`;
  }
}

/* Host processes whose command line contains needle (a string or RegExp). */
export function hostProcsMatching(needle) {
  const out = [];
  for (const ent of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(ent) || Number(ent) === process.pid) continue;
    let cmdline;
    try {
      cmdline = fs.readFileSync(`/proc/${ent}/cmdline`, 'utf8').replace(/\0+$/, '').split('\0').join(' ');
    } catch {
      continue;
    }
    if (!cmdline) continue;
    const hit = typeof needle === 'string' ? cmdline.includes(needle) : needle.test(cmdline);
    if (hit) out.push({ pid: Number(ent), cmdline });
  }
  return out;
}

/* Mount points (from /proc/self/mounts) at or under dir. */
export function mountsUnder(dir) {
  const text = fs.readFileSync('/proc/self/mounts', 'utf8');
  return text.split('\n').filter(Boolean).map((l) => l.split(' ')[1].replace(/\\040/g, ' '))
    .filter((mp) => mp === dir || mp.startsWith(dir + '/'));
}

/* ---- fixture repository --------------------------------------------------- */

export const FIXTURE_FILES = {
  'README.md': '# fixture\n\nA small repository used by the sbx integration tests.\n',
  'hello.sh': '#!/bin/sh\necho "hello from the fixture"\n',
  'src/lib.sh': 'greet() {\n\techo "hi $1"\n}\n',
  'data/numbers.txt': '1\n2\n3\n',
};

export async function writeFixture(dir) {
  for (const [rel, body] of Object.entries(FIXTURE_FILES)) {
    const p = path.join(dir, rel);
    await fsp.mkdir(path.dirname(p), { recursive: true });
    await fsp.writeFile(p, body);
  }
  await fsp.chmod(path.join(dir, 'hello.sh'), 0o755);
}

/* ---- sbxd ------------------------------------------------------------------ */

export class Sbxd {
  /* env: variables sbxd gets besides PATH (such as a test hook's, sbxd(8)). */
  constructor({ stateDir, runDir, logPath, extraArgs = [], env = {} }) {
    this.env = env;
    this.stateDir = stateDir;
    this.runDir = runDir;
    this.logPath = logPath;
    this.extraArgs = extraArgs;
    this.wrap = []; // argv that execs sbxd (such as unshare --mount): sbxd's pid stays the child's
    this.socket = path.join(runDir, 'sbxd.sock');
    this.proc = null;
    this.exit = null;
    this.starts = 0;
  }

  async start({ timeout = 15000 } = {}) {
    assert.ok(fs.existsSync(SBXD), `${SBXD} missing: run make all first`);
    const log = fs.openSync(this.logPath, 'a');
    fs.writeSync(log, `==== sbxd start #${++this.starts} at ${new Date().toISOString()}\n`);
    const args = ['--state-dir', this.stateDir, '--run-dir', this.runDir, '--log-level', 'debug', ...this.extraArgs];
    const [cmd, ...argv] = [...this.wrap, SBXD, ...args];
    this.proc = spawn(cmd, argv, {
      stdio: ['ignore', log, log],
      env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', [LEAK_MARKER]: 'sbxd-env', ...this.env },
    });
    fs.closeSync(log);
    this.exit = null;
    this.exited = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve(this.exit);
      });
      this.proc.on('error', (err) => {
        this.exit = { code: null, signal: null, error: err };
        resolve(this.exit);
      });
    });
    const t0 = Date.now();
    for (;;) {
      if (this.exit) {
        throw new Error(`sbxd exited during start-up (${JSON.stringify(this.exit)}); log:\n${tail(this.logPath)}`);
      }
      // Ready when it answers: a socket file alone may be the stale one of a killed sbxd.
      if (fs.existsSync(this.socket) && (await run(SBXCTL, ['--socket', this.socket, 'status'])).code === 0) break;
      if (Date.now() - t0 > timeout) {
        await this.stop().catch(() => {});
        throw new Error(`sbxd at ${this.socket} did not answer within ${timeout} ms; log:\n${tail(this.logPath)}`);
      }
      await sleep(25);
    }
    this.readyMs = Date.now() - t0;
    return this;
  }

  get pid() {
    return this.proc?.pid;
  }

  get running() {
    return this.proc !== null && this.exit === null;
  }

  /* SIGTERM by pid, wait for exit; SIGKILL (and an error) after `timeout`. */
  async stop({ timeout = 20000 } = {}) {
    if (!this.proc) return null;
    if (this.exit) {
      const e = this.exit;
      this.proc = null;
      return { ...e, already: true };
    }
    const t0 = Date.now();
    this.proc.kill('SIGTERM');
    const res = await Promise.race([this.exited, timer(timeout).then(() => null)]);
    if (!res) {
      const pid = this.proc.pid;
      this.proc.kill('SIGKILL');
      await this.exited;
      this.proc = null;
      throw new Error(`sbxd (pid ${pid}) did not exit within ${timeout} ms of SIGTERM (killed)`);
    }
    this.proc = null;
    return { ...res, ms: Date.now() - t0 };
  }

  /* sbxd --save-kept with these directories (sbxd stopped): the sessions it
   * kept in place in RUN_DIR/live copied to the state directory and unmounted. */
  async saveKept() {
    const r = await run(SBXD, ['--state-dir', this.stateDir, '--run-dir', this.runDir, '--save-kept'], { timeout: 120000 });
    fs.appendFileSync(this.logPath, `==== sbxd --save-kept (${r.code})\n${r.stdout}${r.stderr}`);
    return r;
  }
}

/* STATE/sandboxes/ID, the directory of the sandbox called name (sbxd(8)), its id read from sbx.db. */
export function sandboxDir(stateDir, name) {
  const id = execFileSync('python3', ['-c',
    'import sqlite3,sys; c=sqlite3.connect("file:"+sys.argv[1]+"?mode=ro", uri=True); print(c.execute("select id from sandboxes where name=?", (sys.argv[2],)).fetchone()[0])',
    path.join(stateDir, 'sbx.db'), name]).toString().trim();
  return path.join(stateDir, 'sandboxes', id);
}

/* ---- sbxctl ------------------------------------------------------------------ */

export async function sbxctl(socket, args, opts = {}) {
  return run(SBXCTL, ['--socket', socket, ...args], opts);
}

/* ---- MCP over the SDK ------------------------------------------------------- */

/* The SDK client versions the tests connect with: the current one and two
 * older releases installed as npm aliases (package.json). */
export const SDKS = {
  current: { client: '@modelcontextprotocol/sdk/client/index.js', stdio: '@modelcontextprotocol/sdk/client/stdio.js' },
  '1.12': { client: 'sdk-1.12/client/index.js', stdio: 'sdk-1.12/client/stdio.js' },
  '1.0.4': { client: 'sdk-1.0.4/client/index.js', stdio: 'sdk-1.0.4/client/stdio.js' },
};

async function sdkClasses(sdk) {
  if (sdk === 'current') return { Client, StdioClientTransport, getDefaultEnvironment };
  const m = SDKS[sdk];
  const [c, t] = await Promise.all([import(m.client), import(m.stdio)]);
  return { Client: c.Client, StdioClientTransport: t.StdioClientTransport, getDefaultEnvironment: t.getDefaultEnvironment };
}

export class McpSession {
  /* maxBufferSize: the SDK client's longest line (default 10 MiB), for download_file of large files. */
  static async connect({ socket, logPath, argv, env = {}, useEnvSocket = false, uid = null, name = 'sbx-test', sdk = 'current',
    maxBufferSize = undefined }) {
    const { Client, StdioClientTransport, getDefaultEnvironment } = await sdkClasses(sdk);
    const s = new McpSession();
    const mcpArgs = argv ?? ['--set', 'runtime', ...(useEnvSocket ? [] : ['--socket', socket])];
    let command = SANDBOX_MCP;
    let args = mcpArgs;
    if (uid !== null) {
      command = '/usr/bin/setpriv';
      args = [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', SANDBOX_MCP, ...mcpArgs];
    }
    const log = fs.openSync(logPath, 'a');
    fs.writeSync(log, `==== sandbox-mcp ${args.join(' ')} at ${new Date().toISOString()}\n`);
    s.transport = new StdioClientTransport({
      command,
      args,
      env: { ...getDefaultEnvironment(), SBX_SOCKET: socket, [LEAK_MARKER]: 'broker-env', ...env },
      stderr: log,
      cwd: '/',
      ...(maxBufferSize ? { maxBufferSize } : {}),
    });
    s.client = new Client({ name, version: '0.0.1' }, { capabilities: {} });
    s.client.onerror = (e) => {
      try {
        fs.appendFileSync(logPath, `[sdk client error] ${e?.message ?? e}\n`);
      } catch {}
    };
    try {
      await s.client.connect(s.transport);
      fs.closeSync(log);
      const listed = await s.client.listTools(); // caches outputSchema validators
      s.tools = listed.tools;
    } catch (e) {
      try { fs.closeSync(log); } catch {}
      await s.close().catch(() => {});
      throw e;
    }
    return s;
  }

  get serverPid() {
    return this.transport?.pid ?? null;
  }

  /* The full CallToolResult (validated by the SDK against outputSchema). */
  async call(name, args, { signal, timeout = 90000 } = {}) {
    return this.client.callTool({ name, arguments: args }, undefined, { signal, timeout });
  }

  /* structuredContent of a successful result; throws on isError. */
  async sc(name, args, opts) {
    const r = await this.call(name, args, opts);
    if (r.isError) throw new Error(`${name} ${JSON.stringify(args)} returned isError: ${resultText(r)}`);
    assert.ok(r.structuredContent && typeof r.structuredContent === 'object', `${name}: no structuredContent`);
    return r.structuredContent;
  }

  /* The text of an isError result; throws if the call succeeded. */
  async err(name, args, opts) {
    const r = await this.call(name, args, opts);
    assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} should fail, got ${JSON.stringify(r.structuredContent ?? r.content)}`);
    return resultText(r);
  }

  async close() {
    try {
      await this.client?.close();
    } catch {}
  }
}

export function resultText(r) {
  return (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

export function outputLines(sc) {
  if (!sc.output) return [];
  const lines = sc.output.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/* Read the complete transcript of a command with read_command_lines. */
export async function readAll(mcp, sandbox_id, command_session_id, { limit = 1000 } = {}) {
  let off = 0;
  let out = '';
  let last;
  for (let i = 0; i < 10000; i++) {
    last = await mcp.sc('read_command_lines', { sandbox_id, command_session_id, start_offset: off, limit });
    out += last.output;
    if (last.end_offset >= last.total_lines || last.end_offset === off) break;
    off = last.end_offset;
  }
  return { output: out, last };
}

/* Poll read_command_lines until the command is no longer running. */
export async function waitDone(mcp, sandbox_id, command_session_id, { timeout = 30000 } = {}) {
  let sc;
  await waitFor(async () => {
    sc = await mcp.sc('read_command_lines', { sandbox_id, command_session_id, start_offset: 0, limit: 1000 });
    return sc.status !== 'running';
  }, { timeout, interval: 100, what: `command ${command_session_id} to finish` });
  return sc;
}

/* ---- the per-file harness ------------------------------------------------- */

export class Harness {
  constructor() {
    this.failures = new Set();
    this.running = new Set();
    this.sandboxes = {};
    this.sessions = [];
  }

  /* sets: the tool sets for sandbox-mcp --set (default "runtime"), e.g. 'runtime,sessions'.
   * stateFsMiB: the state directory is a fresh ext4 filesystem of that many MiB
   * on a loop device (disk-filling tests never fill the machine's own disk).
   * sbxdEnv: sbxd's environment besides PATH (Sbxd). */
  static async create({ sandboxes = [{ name: 'test' }], connect = true, world = false, config = null, sets = null,
    stateFsMiB = 0, sbxdEnv = {} } = {}) {
    const h = new Harness();
    h.sets = sets;
    h.dir = await fsp.mkdtemp(TMP_PREFIX);
    if (world) await fsp.chmod(h.dir, 0o755); // lets an unprivileged broker reach the socket
    h.stateDir = path.join(h.dir, 'state');
    h.runDir = path.join(h.dir, 'run');
    h.logDir = path.join(h.dir, 'logs');
    for (const d of [h.stateDir, h.runDir, h.logDir]) await fsp.mkdir(d, { recursive: true });
    if (stateFsMiB) await h.mountStateFs(stateFsMiB);
    if (world) await fsp.chmod(h.runDir, 0o755);
    h.sbxdLog = path.join(h.logDir, 'sbxd.log');
    h.mcpLog = path.join(h.logDir, 'sandbox-mcp.log');
    const extraArgs = [];
    // sbxd.sock is root's alone by default (sbxd.conf(5)); these tests connect as other users
    // (in the [sbxd] section, which may be followed by [template NAME] ones)
    if (world && !/^socket_mode\s*=/m.test(config ?? '')) {
      config = /^\[sbxd\]$/m.test(config ?? '') ? config.replace(/^\[sbxd\]$/m, '[sbxd]\nsocket_mode = 0666')
        : `[sbxd]\nsocket_mode = 0666\n${config ?? ''}`;
    }
    if (config !== null) {
      h.configPath = path.join(h.dir, 'sbxd.conf');
      await fsp.writeFile(h.configPath, config);
      extraArgs.push('--config', h.configPath);
    }
    h.sbxd = new Sbxd({ stateDir: h.stateDir, runDir: h.runDir, logPath: h.sbxdLog, extraArgs, env: sbxdEnv });
    h.socket = h.sbxd.socket;
    try {
      await h.sbxd.start();
      for (const sb of sandboxes) await h.createSandbox(sb);
      if (connect) h.mcp = await h.connect();
    } catch (e) {
      // No teardown follows a failed create: stop what started, leave no loop mount behind.
      for (const s of h.sessions) await s.close();
      await h.sbxd.stop().catch(() => {});
      await h.unmountStateFs();
      throw e;
    }
    return h;
  }

  /* A small ext4 filesystem (image file in h.dir, sparse) mounted on stateDir;
   * teardown unmounts it after sbxd stopped. */
  async mountStateFs(mib) {
    this.stateFsImage = path.join(this.dir, 'state.img');
    await fsp.writeFile(this.stateFsImage, '');
    await fsp.truncate(this.stateFsImage, mib * 1024 * 1024);
    const mk = await run('mkfs.ext4', ['-q', '-F', '-m', '0', this.stateFsImage]);
    if (mk.code !== 0) throw new Error(`mkfs.ext4 failed: ${mk.stderr}`);
    const mt = await run('mount', ['-o', 'loop', this.stateFsImage, this.stateDir]);
    if (mt.code !== 0) throw new Error(`mount -o loop failed: ${mt.stderr}`);
    this.stateFsMounted = true;
  }

  async unmountStateFs() {
    if (!this.stateFsMounted) return null;
    // mount -o loop set the loop device to autoclear: unmounting detaches it
    const r = await run('umount', [this.stateDir]);
    if (r.code !== 0) return `umount ${this.stateDir}: ${r.stderr.trim()}`;
    this.stateFsMounted = false;
    return null;
  }

  async createSandbox({ name, memory, pids }) {
    const src = path.join(this.dir, 'src-' + name);
    await writeFixture(src);
    const args = ['sandbox', 'create', name, '--source', src];
    if (memory) args.push('--memory', String(memory));
    if (pids) args.push('--pids', String(pids));
    const r = await sbxctl(this.socket, args);
    if (r.code !== 0) {
      throw new Error(`sbxctl ${args.join(' ')} failed (${r.code}): ${r.stderr}${r.stdout}\nsbxd log:\n${tail(this.sbxdLog)}`);
    }
    this.sandboxes[name] = { name, src };
    return src;
  }

  async connect(opts = {}) {
    const setArgs = this.sets && !opts.argv
      ? { argv: ['--set', this.sets, ...(opts.useEnvSocket ? [] : ['--socket', this.socket])] } : {};
    const s = await McpSession.connect({ socket: this.socket, logPath: this.mcpLog, ...setArgs, ...opts });
    this.sessions.push(s);
    return s;
  }

  async restartSbxd() {
    const res = await this.sbxd.stop();
    await this.sbxd.start();
    return res;
  }

  printLogs(why) {
    const msg = [
      `---- ${why}: logs kept in ${this.dir} ----`,
      `---- tail of ${this.sbxdLog} ----`, tail(this.sbxdLog, 120),
      `---- tail of ${this.mcpLog} ----`, tail(this.mcpLog, 60),
      '---- end of logs ----',
    ].join('\n');
    process.stderr.write(msg + '\n');
  }

  async teardown() {
    const problems = [];
    for (const s of this.sessions) await s.close();
    let res = null;
    const unexpected = this.sbxd.exit && this.sbxd.proc ? this.sbxd.exit : null;
    try {
      res = await this.sbxd.stop();
    } catch (e) {
      problems.push(e.message);
    }
    if (unexpected) problems.push(`sbxd died during the tests: ${JSON.stringify(unexpected)}`);
    // What sbxd kept in place at its stop (sbxd(8)): saved, so that nothing stays mounted.
    if (fs.existsSync(path.join(this.runDir, 'live'))) {
      const saved = await this.sbxd.saveKept();
      if (saved.code !== 0) problems.push(`sbxd --save-kept failed (${saved.code}): ${saved.stderr}`);
    }
    const unmountProblem = await this.unmountStateFs();
    if (unmountProblem) problems.push(unmountProblem);
    const failed = this.failures.size > 0 || this.running.size > 0 || problems.length > 0;
    if (failed || process.env.SBX_TEST_VERBOSE) {
      this.printLogs(failed ? `failed: ${[...this.failures, ...this.running, ...problems].join('; ')}` : 'verbose');
    }
    const mounted = mountsUnder(this.dir);
    if (mounted.length) problems.push(`still mounted after sbxd stopped: ${mounted.join(', ')}`);
    if (!process.env.SBX_TEST_KEEP && !failed && mounted.length === 0) {
      // --one-file-system: never descend into anything mounted below.
      await run('rm', ['-rf', '--one-file-system', this.dir]);
    } else if (!process.env.SBX_TEST_KEEP && mounted.length === 0) {
      // keep only the logs of a failed run
      for (const d of fs.readdirSync(this.dir)) {
        if (d !== 'logs') await run('rm', ['-rf', '--one-file-system', path.join(this.dir, d)]);
      }
      process.stderr.write(`logs kept in ${this.logDir}\n`);
    }
    if (problems.length) throw new Error(problems.join('\n'));
    return res;
  }
}

/*
 * Register before/after hooks for this file and return an object whose
 * fields are filled in by before(): h.mcp, h.socket, h.sbxd, ... Use
 * h.test(name, fn, opts) instead of test() so failures print the logs.
 */
export function useSbx(options = {}) {
  const state = { h: null };
  const proxy = new Proxy({}, {
    get(_, prop) {
      if (prop === 'test') return sbxTest;
      if (!state.h) throw new Error(`harness not started (reading ${String(prop)})`);
      const v = state.h[prop];
      return typeof v === 'function' ? v.bind(state.h) : v;
    },
  });
  before(async () => {
    state.h = await Harness.create(options);
  }, { timeout: 60000 });
  after(async () => {
    if (state.h) await state.h.teardown();
  }, { timeout: 60000 });

  function sbxTest(name, fn, opts = {}) {
    test(name, { timeout: 120000, ...opts }, async (t) => {
      const h = state.h;
      assert.ok(h, 'harness failed to start');
      h.running.add(name);
      try {
        await fn(t, h);
        h.running.delete(name);
      } catch (e) {
        h.running.delete(name);
        h.failures.add(name);
        throw e;
      }
    });
  }
  return proxy;
}

// The boxes set's calls of the box tests (h: a useSbx harness with --set boxes): start,
// exec (its exit code 0 asserted; its stdout) and stop.
export function boxCalls(h) {
  return {
    start: (args = {}) => h.mcp.sc('sandbox_start', args),
    exec: async (id, cmd) => {
      const r = await h.mcp.sc('sandbox_exec', { id, cmd });
      assert.equal(r.exitCode, 0, `${cmd}: ${r.stderr}`);
      return r.stdout;
    },
    stop: (id) => h.mcp.sc('sandbox_stop', { id }),
  };
}

/* ---- raw stdio JSON-RPC to sandbox-mcp ---------------------------------------- */

export class RawMcp {
  constructor({ socket, logPath, args = ['--set', 'runtime', '--socket', socket] }) {
    const log = fs.openSync(logPath, 'a');
    fs.writeSync(log, `==== raw sandbox-mcp ${args.join(' ')} at ${new Date().toISOString()}\n`);
    this.proc = spawn(SANDBOX_MCP, args, { stdio: ['pipe', 'pipe', log], env: { PATH: process.env.PATH, SBX_SOCKET: socket } });
    fs.closeSync(log);
    this.messages = [];
    this.waiters = [];
    this.badLines = [];
    this.exit = null;
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => {
      this.exit = { code, signal };
      resolve(this.exit);
      this._wake();
    }));
    this.proc.stdin.on('error', () => {});
    const rl = readline.createInterface({ input: this.proc.stdout, crlfDelay: Infinity });
    rl.on('line', (line) => {
      if (line.trim() === '') return;
      try {
        this.messages.push(JSON.parse(line));
      } catch {
        this.badLines.push(line.slice(0, 200));
      }
      this._wake();
    });
  }

  _wake() {
    for (const w of this.waiters.splice(0)) w();
  }

  async write(text) {
    if (!this.proc.stdin.write(text)) await new Promise((r) => this.proc.stdin.once('drain', r));
  }

  async send(obj) {
    await this.write((typeof obj === 'string' ? obj : JSON.stringify(obj)) + '\n');
  }

  /* Wait for the first unconsumed message satisfying pred; removes it. */
  async next(pred = () => true, timeout = 10000) {
    const deadline = Date.now() + timeout;
    for (;;) {
      const i = this.messages.findIndex(pred);
      if (i >= 0) return this.messages.splice(i, 1)[0];
      if (this.exit) throw new Error(`sandbox-mcp exited (${JSON.stringify(this.exit)}) while a reply was awaited`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching message within ${timeout} ms; got ${JSON.stringify(this.messages).slice(0, 500)}`);
      await Promise.race([new Promise((r) => this.waiters.push(r)), timer(Math.min(left, 200))]);
    }
  }

  async request(method, params, id, timeout) {
    const msg = { jsonrpc: '2.0', id, method };
    if (params !== undefined) msg.params = params;
    await this.send(msg);
    return this.next((m) => m.id === id && ('result' in m || 'error' in m), timeout);
  }

  async initialize(protocolVersion = '2025-11-25', id = 0) {
    const r = await this.request('initialize', {
      protocolVersion, capabilities: {}, clientInfo: { name: 'raw-test', version: '0' },
    }, id);
    await this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return r;
  }

  async closeStdin() {
    this.proc.stdin.end();
  }

  async waitExit(timeout = 5000) {
    return Promise.race([this.exited, timer(timeout).then(() => null)]);
  }

  async kill() {
    if (!this.exit) {
      this.proc.stdin.destroy();
      this.proc.kill('SIGTERM');
      const r = await this.waitExit(3000);
      if (!r) {
        this.proc.kill('SIGKILL');
        await this.exited;
      }
    }
  }
}

/* ---- the seed's input schemas, verbatim ---------------------------------- */

export const EXPECTED_INPUT_SCHEMAS = JSON.parse(`{
  "exec_command": {
    "type": "object",
    "properties": {
      "sandbox_id": { "type": "string", "description": "Target sandbox id (selects the daemon to query)." },
      "workspace_session_id": { "type": "string", "description": "Existing workspace session id to run inside. Omit to create a session with finalize policy publish_then_destroy." },
      "cmd": { "type": "string", "description": "Shell command text." },
      "timeout_ms": { "type": "integer", "description": "Command timeout in milliseconds.", "minimum": 0 },
      "yield_time_ms": { "type": "integer", "description": "Initial output wait in milliseconds.", "minimum": 0 }
    },
    "required": ["sandbox_id", "cmd"],
    "additionalProperties": false
  },
  "write_command_stdin": {
    "type": "object",
    "properties": {
      "sandbox_id": { "type": "string", "description": "Target sandbox id (selects the daemon to query)." },
      "command_session_id": { "type": "string", "description": "Command session id returned by exec_command." },
      "stdin": { "type": "string", "description": "Text to write to stdin." },
      "yield_time_ms": { "type": "integer", "description": "Output wait after writing stdin.", "minimum": 0 }
    },
    "required": ["sandbox_id", "command_session_id", "stdin"],
    "additionalProperties": false
  },
  "read_command_lines": {
    "type": "object",
    "properties": {
      "sandbox_id": { "type": "string", "description": "Target sandbox id (selects the daemon to query)." },
      "command_session_id": { "type": "string", "description": "Command session id returned by exec_command." },
      "start_offset": { "type": "integer", "description": "First transcript line offset. Defaults to 0.", "minimum": 0, "default": 0 },
      "limit": { "type": "integer", "description": "Maximum transcript rows to return. Defaults to 200; maximum 1000.", "minimum": 0, "default": 200 }
    },
    "required": ["sandbox_id", "command_session_id"],
    "additionalProperties": false
  }
}`);

export const RESULT_FIELDS = [
  'command_session_id', 'workspace_session_id', 'status', 'exit_code', 'wall_time_seconds',
  'command_total_time_seconds', 'start_offset', 'end_offset', 'total_lines',
  'original_token_count', 'output',
];

/* Field-by-field checks of a command-output result beyond what outputSchema says. */
export function checkShape(sc) {
  for (const f of RESULT_FIELDS) assert.ok(f in sc, `result lacks ${f}: ${JSON.stringify(sc)}`);
  assert.ok(['running', 'ok', 'error', 'timed_out', 'cancelled'].includes(sc.status), `status ${sc.status}`);
  assert.equal(typeof sc.command_session_id, 'string');
  assert.ok(sc.command_session_id.length > 0);
  assert.ok(Number.isInteger(sc.start_offset) && Number.isInteger(sc.end_offset) && Number.isInteger(sc.total_lines));
  assert.ok(sc.start_offset <= sc.end_offset && sc.end_offset <= sc.total_lines,
    `offsets ${sc.start_offset}..${sc.end_offset} of ${sc.total_lines}`);
  assert.equal(outputLines(sc).length, sc.end_offset - sc.start_offset,
    `output holds ${outputLines(sc).length} lines for offsets ${sc.start_offset}..${sc.end_offset}`);
  assert.equal(typeof sc.wall_time_seconds, 'number');
  assert.ok(sc.wall_time_seconds >= 0);
  return sc;
}
