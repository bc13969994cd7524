// Crash safety of publication: several concurrent clients publish (automatic
// execs writing files, file_write without a session, file_edit, managed sessions) while sbxd is
// killed with SIGKILL at random points; after each restart on the same state
// directory every layer is wholly present (a directory, or merged into the
// squashed base), no partial layer directory (.tmp-*) remains, everything the
// clients were told was published is there with its content, blame tiles it,
// and at the end nothing of the killed daemons is left (mounts, processes,
// cgroups).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, sbxctl, run, sleep, ROOT, mountsUnder, sandboxDir } from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'crash' }], sets: 'runtime,sessions' });
const SB = 'crash';
const ROUNDS = Number(process.env.SBX_CRASH_ROUNDS || 5);
const WORKERS = 4;
const confirmed = new Map(); // path -> content the client was told is published
const pids = [];
let stats = { ok: 0, failed: 0 };

const body = (tag, n) => Array.from({ length: n }, (_, i) => `${tag} line ${i + 1}`).join('\n') + '\n';

async function worker(mcp, round, w, stop) {
  for (let i = 0; !stop.flag; i++) {
    const tag = `r${round}w${w}i${i}`;
    try {
      if (w === 0 && i % 2 === 1) {
        // worker 0 also publishes managed sessions: create, two commands, finalize
        const p = `crash/${tag}.managed.txt`;
        const content = body(tag, 2);
        const c = await mcp.call('create_workspace_session', { sandbox_id: SB }, { timeout: 20000 });
        if (c.isError) { stats.failed++; continue; }
        const ws = c.structuredContent.workspace_session_id;
        const lines = content.split('\n').filter(Boolean);
        let ok = true;
        for (const l of lines) {
          const e = await mcp.call('exec_command', { sandbox_id: SB, workspace_session_id: ws, cmd: `mkdir -p crash && echo '${l}' >> ${p}` }, { timeout: 20000 });
          if (e.isError || e.structuredContent.status !== 'ok') ok = false;
        }
        if (!ok) { stats.failed++; continue; }
        const f = await mcp.call('finalize_workspace_session', { sandbox_id: SB, workspace_session_id: ws, action: 'publish' }, { timeout: 20000 });
        if (!f.isError && f.structuredContent.action === 'published' && f.structuredContent.publication?.published) {
          confirmed.set(p, content);
          stats.ok++;
        } else stats.failed++;
      } else if (i % 3 === 0) {
        const p = `crash/${tag}.exec.txt`;
        const content = body(tag, 3);
        const r = await mcp.call('exec_command', { sandbox_id: SB, cmd: `mkdir -p crash && printf '${content.replace(/\n/g, '\\n')}' > ${p}` }, { timeout: 20000 });
        if (!r.isError && r.structuredContent.status === 'ok' && r.structuredContent.publication?.published) {
          confirmed.set(p, content);
          stats.ok++;
        } else stats.failed++;
      } else if (i % 3 === 1) {
        const p = `crash/${tag}.write.txt`;
        const content = body(tag, 4);
        const r = await mcp.call('file_write', { sandbox_id: SB, path: p, content }, { timeout: 20000 });
        if (!r.isError && r.structuredContent.publication?.published) {
          confirmed.set(p, content);
          stats.ok++;
        } else stats.failed++;
      } else {
        // edit this worker's previous write (its own file: no other writer)
        const p = `crash/r${round}w${w}i${i - 1}.write.txt`;
        if (!confirmed.has(p)) continue;
        const before = confirmed.get(p);
        const r = await mcp.call('file_edit', { sandbox_id: SB, path: p, edits: [{ old_string: 'line 2\n', new_string: 'EDITED 2\n' }] }, { timeout: 20000 });
        if (!r.isError && r.structuredContent.publication?.published) {
          confirmed.set(p, before.replace('line 2\n', 'EDITED 2\n'));
          stats.ok++;
        } else {
          // unknown outcome: either content is acceptable
          confirmed.set(p, [before, before.replace('line 2\n', 'EDITED 2\n')]);
          stats.failed++;
        }
      }
    } catch {
      stats.failed++;
      if (stop.flag) return;
      await sleep(50);
    }
  }
}

function layersDir() {
  return path.join(sandboxDir(h.stateDir, SB), 'layers');
}

async function squashed() {
  const r = await run('python3', ['-c',
    'import sqlite3,sys; c=sqlite3.connect("file:"+sys.argv[1]+"?mode=ro", uri=True); r=c.execute("select squashed from squashes where sandbox=(select id from sandboxes where name=?)", (sys.argv[2],)).fetchone(); print(r[0] if r else 0)',
    path.join(h.stateDir, 'sbx.db'), SB]);
  assert.equal(r.code, 0, r.stderr);
  return Number(r.stdout.trim());
}

async function dbLayerIds() {
  const r = await run('python3', ['-c',
    'import sqlite3,sys; c=sqlite3.connect("file:"+sys.argv[1]+"?mode=ro", uri=True); print(" ".join(str(x[0]) for x in c.execute("select seq from layers where sandbox=(select id from sandboxes where name=?) order by seq", (sys.argv[2],))))',
    path.join(h.stateDir, 'sbx.db'), SB]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim().split(' ').map(Number);
}

/* Every listed layer is present; no partial directories; returns a summary. */
async function checkLayers() {
  const r = await sbxctl(h.socket, ['--json', 'layer', 'list', SB]);
  assert.equal(r.code, 0, r.stderr);
  const listed = JSON.parse(r.stdout).map((l) => l.layer);
  // the store is the reference (sbxctl lists at most the newest 1000)
  const layers = await dbLayerIds();
  assert.deepEqual(listed, layers.slice(-listed.length), 'sbxctl layer list disagrees with the store');
  const sq = await squashed();
  const ents = fs.readdirSync(layersDir());
  const tmp = ents.filter((e) => e.startsWith('.tmp'));
  assert.deepEqual(tmp, [], `partial layer directories left: ${tmp.join(', ')}`);
  for (let i = 1; i < layers.length; i++) assert.ok(layers[i] > layers[i - 1], `layer list not increasing: ${layers.join(',')}`);
  const missing = layers.filter((l) => l > sq && !ents.includes(String(l)));
  assert.deepEqual(missing, [], `listed layers without a directory (squashed base ${sq}): ${missing.join(', ')}`);
  if (sq > 0) assert.ok(ents.includes(`squash-${sq}`), `squashed base squash-${sq} missing: ${ents.join(' ')}`);
  else assert.ok(ents.includes('0'), `base layer 0 missing: ${ents.join(' ')}`);
  const orphans = ents.filter((e) => /^\d+$/.test(e) && Number(e) > sq && !layers.includes(Number(e)));
  assert.deepEqual(orphans, [], `layer directories sbxd does not know about: ${orphans.join(', ')}`);
  return { layers: layers.length, top: layers[layers.length - 1], squashed: sq, dirs: ents.length };
}

async function checkConfirmed(mcp) {
  let n = 0;
  for (const [p, want] of confirmed) {
    const r = await mcp.call('file_read', { sandbox_id: SB, path: p });
    assert.equal(r.isError, false, `published ${p} is gone: ${JSON.stringify(r.content)}`);
    const got = r.structuredContent.content;
    if (Array.isArray(want)) {
      assert.ok(want.includes(got), `${p}: ${JSON.stringify(got)} is none of ${JSON.stringify(want)}`);
      confirmed.set(p, got);
    } else {
      assert.equal(got, want, `${p} lost content`);
    }
    const b = await mcp.sc('file_blame', { sandbox_id: SB, path: p });
    let next = 1;
    for (const g of b.ranges) {
      assert.equal(g.start_line, next, `${p}: ranges ${JSON.stringify(b.ranges)}`);
      next += g.line_count;
    }
    assert.equal(next - 1, r.structuredContent.total_lines, `${p}: blame covers ${next - 1} of ${r.structuredContent.total_lines} lines`);
    n++;
  }
  return n;
}

h.test(`${ROUNDS} rounds: concurrent publishers, SIGKILL at a random point, restart, verify`, async () => {
  const summary = [];
  for (let round = 0; round < ROUNDS; round++) {
    const mcp = await h.connect();
    const stop = { flag: false };
    const before = stats.ok;
    const workers = Array.from({ length: WORKERS }, (_, w) => worker(mcp, round, w, stop));
    const delay = 100 + Math.floor(Math.random() * 1900);
    await sleep(delay);
    pids.push(h.sbxd.pid);
    h.sbxd.proc.kill('SIGKILL');
    await h.sbxd.exited;
    stop.flag = true;
    await Promise.all(workers);
    await mcp.close();
    // the killed sbxd left its socket behind: remove it so start() waits for the new one
    fs.rmSync(h.socket, { force: true });
    await h.sbxd.start();
    const mcp2 = await h.connect();
    const lay = await checkLayers();
    const n = await checkConfirmed(mcp2);
    // the sandbox still works: a command sees the published files and can publish
    const some = [...confirmed.keys()].filter((p) => p.endsWith('.exec.txt')).slice(-1)[0];
    const x = await mcp2.sc('exec_command', { sandbox_id: SB, cmd: `echo alive > alive-${round}.txt; ${some ? `cat ${some} | wc -l` : 'echo 3'}` });
    assert.equal(x.status, 'ok', x.output);
    assert.equal(x.output.trim(), '3');
    assert.equal(x.publication.published, true);
    await mcp2.close();
    summary.push(`round ${round}: killed after ${delay} ms, ${stats.ok - before} confirmed publications, ${n} files verified, ${JSON.stringify(lay)}`);
  }
  for (const l of summary) process.stdout.write(`# ${l}\n`);
  const kinds = {};
  for (const p of confirmed.keys()) { const k = p.split('.').slice(-2, -1)[0]; kinds[k] = (kinds[k] ?? 0) + 1; }
  process.stdout.write(`# crash: ${stats.ok} confirmed publications (files by kind ${JSON.stringify(kinds)}), ${stats.failed} failed or interrupted calls\n`);
  assert.ok(confirmed.size > 0, 'no publication was confirmed in any round');
});

h.test('after the crashes: a clean stop leaves nothing behind (mounts, processes, cgroups)', async () => {
  pids.push(h.sbxd.pid);
  for (const s of h.sessions) await s.close(); // sandbox-mcp processes name the test directory too
  const res = await h.sbxd.stop();
  assert.equal(res.code, 0, JSON.stringify(res));
  assert.deepEqual(mountsUnder(h.dir), []);
  const args = ['--dir', h.dir];
  for (const p of pids) args.push('--pid', String(p));
  const l = await run(path.join(ROOT, 'tests', 'leftovers.sh'), args, { timeout: 60000 });
  assert.equal(l.code, 0, `leftovers:\n${l.stdout}${l.stderr}`);
  // start again so the harness can stop it normally and the state stays usable
  await h.sbxd.start();
  const mcp = await h.connect();
  assert.ok((await checkConfirmed(mcp)) === confirmed.size);
  await checkLayers();
});
