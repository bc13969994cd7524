// Durability: transcripts and published layers survive an sbxd restart;
// SIGTERM stops sbxd cleanly with every session's processes and mounts gone.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, outputLines, hostProcsMatching, mountsUnder, waitFor, sbxctl, T } from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'dur' }] });
const SB = 'dur';
const saved = {};

h.test('before the restart: commands, a transcript and a publication', async () => {
  const a = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: 'seq 1 2500; echo "durable data" > kept.txt' });
  assert.equal(a.status, 'ok');
  assert.equal(a.total_lines, 2500);
  saved.seq = a.command_session_id;
  const b = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: 'echo failing; exit 4' });
  saved.fail = b.command_session_id;
  const c = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: `echo running; sleep ${T(107)}`, yield_time_ms: 300 });
  assert.equal(c.status, 'running');
  saved.running = c.command_session_id;
});

h.test('SIGTERM stops sbxd cleanly: exit 0, no session process or mount left', async () => {
  const t0 = Date.now();
  const res = await h.sbxd.stop();
  process.stdout.write(`# sbxd stopped ${Date.now() - t0} ms after SIGTERM: ${JSON.stringify(res)}\n`);
  assert.equal(res.code, 0, `sbxd exit: ${JSON.stringify(res)}`);
  await waitFor(() => hostProcsMatching(`sleep ${T(107)}`).length === 0, { timeout: 5000, what: 'the running command to be gone' });
  assert.deepEqual(hostProcsMatching('sbx-worker').filter((p) => p.cmdline.includes(h.dir) || p.cmdline.includes('/build/bin/')), []);
  assert.deepEqual(mountsUnder(h.dir), []);
  // the broker still runs without a supervisor: a call fails cleanly
  const r = await h.mcp.call('exec_command', { sandbox_id: SB, cmd: 'true' });
  assert.equal(r.isError, true);
});

h.test('after a restart on the same state dir: transcripts, statuses and layers are intact', async () => {
  await h.sbxd.start();
  // A new client as an MCP host would start; the old one may reconnect by itself.
  const mcp = await h.connect();
  const all = [];
  for (let off = 0; off < 2500; off += 1000) {
    const p = await mcp.sc('read_command_lines', { sandbox_id: SB, command_session_id: saved.seq, start_offset: off, limit: 1000 });
    assert.equal(p.status, 'ok');
    assert.equal(p.exit_code, 0);
    assert.equal(p.total_lines, 2500);
    all.push(...outputLines(p));
  }
  assert.deepEqual(all, Array.from({ length: 2500 }, (_, i) => String(i + 1)));
  const f = await mcp.sc('read_command_lines', { sandbox_id: SB, command_session_id: saved.fail });
  assert.equal(f.status, 'error');
  assert.equal(f.exit_code, 4);
  assert.equal(f.output, 'failing\n');
  const r = await mcp.sc('read_command_lines', { sandbox_id: SB, command_session_id: saved.running });
  assert.notEqual(r.status, 'running', 'a command that was running when sbxd stopped is terminal afterwards');
  assert.ok(r.output.startsWith('running\n'));
  process.stdout.write(`# interrupted command after restart: status ${r.status}, end_reason ${r.end_reason}\n`);
  assert.ok(['supervisor_lost', 'cancelled', 'signal'].includes(r.end_reason), `end_reason ${r.end_reason}`);
  const k = await mcp.sc('exec_command', { sandbox_id: SB, cmd: 'cat kept.txt' });
  assert.equal(k.output, 'durable data\n');
  const list = await sbxctl(h.socket, ['sandbox', 'list', '--json']);
  assert.equal(list.code, 0, list.stderr);
  assert.ok(list.stdout.includes(SB));
});

h.test('the first client reconnects to the restarted supervisor or fails cleanly', async () => {
  const r = await h.mcp.call('exec_command', { sandbox_id: SB, cmd: 'echo again' });
  if (r.isError) process.stdout.write('# the old broker does not reconnect after an sbxd restart\n');
  else assert.equal(r.structuredContent.output, 'again\n');
});

function cgroupsOf(pid) {
  const out = [];
  const walk = (dir, depth) => {
    if (depth > 6) return;
    let ents;
    try {
      ents = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of ents) {
      if (!e.isDirectory()) continue;
      const p = path.join(dir, e.name);
      if (e.name === `sbxd-${pid}`) out.push(p);
      else walk(p, depth + 1);
    }
  };
  walk('/sys/fs/cgroup', 1);
  return out;
}

h.test('after sbxd is killed (SIGKILL): its commands die, a restart cleans up and reports them lost', async () => {
  const a = await h.mcp.sc('exec_command', { sandbox_id: SB, cmd: `echo before-kill; sleep ${T(111)}`, yield_time_ms: 300 });
  assert.equal(a.status, 'running');
  const oldPid = h.sbxd.pid;
  h.sbxd.proc.kill('SIGKILL');
  await h.sbxd.exited;
  h.sbxd.proc = null;
  await waitFor(() => hostProcsMatching(`sleep ${T(111)}`).length === 0, { timeout: 5000, what: 'the command to die with sbxd' });
  await h.sbxd.start();
  await waitFor(() => cgroupsOf(oldPid).length === 0, { timeout: 5000, what: `the cgroups of the killed sbxd ${oldPid} to be removed` });
  assert.deepEqual(mountsUnder(h.dir), []);
  const mcp = await h.connect();
  const r = await mcp.sc('read_command_lines', { sandbox_id: SB, command_session_id: a.command_session_id });
  assert.equal(r.status, 'error');
  assert.equal(r.end_reason, 'supervisor_lost');
  assert.equal(r.output, 'before-kill\n');
  const k = await mcp.sc('exec_command', { sandbox_id: SB, cmd: 'cat kept.txt' });
  assert.equal(k.output, 'durable data\n');
});
