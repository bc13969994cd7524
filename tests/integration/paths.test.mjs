// Hostile paths: symlinks planted from inside a command (absolute and relative
// pointing out, to /, symlinked parent directories, /proc/self/root), "..",
// absolute paths outside /workspace. Every file tool (read, write, edit,
// blame), with and without a workspace session, refuses or stays inside the
// workspace: host file content never comes back, no host file is created or
// modified. Also a check-vs-use race: a command swaps a directory and a
// symlink to /etc while the file tools run.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, run, waitDone } from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'paths' }], sets: 'runtime,sessions' });
const SB = 'paths';
const MARK = `sbx-pwn-${process.pid}`;
const call = (name, args) => h.mcp.call(name, { sandbox_id: SB, ...args });
const sc = (name, args) => h.mcp.sc(name, { sandbox_id: SB, ...args });
const exec = async (cmd, extra = {}) => {
  const r = await sc('exec_command', { cmd, ...extra });
  assert.equal(r.status, 'ok', `${cmd}: ${r.output}`);
  return r;
};

const HOST_WATCH = ['/etc/passwd', '/etc/shadow', '/etc/hostname', '/etc/hosts', '/etc/group'];
const hash = (p) => { try { return crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex') + ' ' + fs.statSync(p).mtimeMs; } catch (e) { return e.code; } };
const HOST_PASSWD = fs.readFileSync('/etc/passwd', 'utf8');
const HOST_LINES = HOST_PASSWD.split('\n').filter((l) => l.length > 8);
let hostBefore;
let imagePasswd = null;

function assertNoHostContent(text, what) {
  assert.notEqual(text, HOST_PASSWD, `${what}: returned the host's /etc/passwd`);
  for (const l of HOST_LINES.slice(0, 5)) assert.ok(!text.includes(l), `${what}: returned a line of the host /etc/passwd: ${l}`);
  if (imagePasswd) assert.ok(!text.includes(imagePasswd.split('\n')[0]), `${what}: returned the sandbox image's /etc/passwd`);
}

/* Targets (inside the workspace) of the planted links. */
const PLANT = [
  'ln -s /etc/passwd leak',
  'ln -s ../../../../etc/passwd leakrel',
  'ln -s ../../../../etc escape',
  'ln -s / rootlink',
  'ln -s /etc etcdir',
  'ln -s /proc/self/root procroot',
  'ln -s /proc/self/root/etc/passwd procleak',
  'mkdir -p sub && ln -s ../../../etc sub/up',
  'ln -s data/numbers.txt inlink', // points inside: reads may follow it
  "mkdir -p etc && echo 'workspace-etc-passwd' > etc/passwd", // where /etc/passwd resolves to when kept inside the root
].join(' && ');

const HOSTILE = [
  'leak', 'leakrel', 'escape/passwd', `escape/${MARK}`, 'rootlink/etc/passwd', `rootlink/${MARK}`, `rootlink/tmp/${MARK}`,
  'etcdir/passwd', `etcdir/${MARK}`, 'procroot/etc/passwd', `procroot/etc/${MARK}`, 'procleak', 'sub/up/passwd', `sub/up/${MARK}`,
  '/proc/self/root/etc/passwd', `/proc/self/root/etc/${MARK}`, 'proc/self/root/etc/passwd',
  `../${MARK}`, '../../../../etc/passwd', '/etc/passwd', `/etc/${MARK}`, '/workspace/../etc/passwd', `/workspace/../etc/${MARK}`,
  '/workspace/etcdir/passwd', '/workspace/leak', 'leak/', 'etcdir/../etcdir/passwd', '/', '', '.', '/workspace', '/workspace/',
  `/tmp/${MARK}`, `sub/../../${MARK}`,
];

/* Plain relative paths among HOSTILE: no symlink on the way, so they are just workspace paths. */
const INSIDE = ['proc/self/root/etc/passwd'];

/* Every file tool on every hostile path; returns a summary of what each did. */
async function probeAll(session) {
  const extra = session ? { workspace_session_id: session } : {};
  const summary = [];
  for (const p of HOSTILE) {
    const rd = await call('file_read', { path: p, ...extra });
    if (!rd.isError) {
      assertNoHostContent(rd.structuredContent.content, `file_read ${p}`);
      // the only things a hostile path may read are workspace files
      // (symlinks resolve as if the workspace were the root: /etc/passwd -> WORKSPACE/etc/passwd)
      assert.ok(['workspace-etc-passwd\n', `${MARK}\n`].includes(rd.structuredContent.content),
        `file_read ${JSON.stringify(p)} read ${JSON.stringify(rd.structuredContent.content.slice(0, 80))}`);
    }
    const wr = await call('file_write', { path: p, content: `${MARK}\n`, ...extra });
    if (INSIDE.includes(p) && !wr.isError) {
      // a plain relative path: the write lands inside the workspace
      const c = await exec(`cat '${p}'`, extra);
      assert.equal(c.output, `${MARK}\n`);
    } else {
      assert.equal(wr.isError, true, `file_write ${JSON.stringify(p)} succeeded: ${JSON.stringify(wr.structuredContent)}`);
    }
    const ed = await call('file_edit', { path: p, edits: [{ old_string: 'root', new_string: MARK }], ...extra });
    assert.equal(ed.isError, true, `file_edit ${JSON.stringify(p)} succeeded: ${JSON.stringify(ed.structuredContent)}`);
    let bl = null;
    if (!session) {
      bl = await call('file_blame', { path: p });
      if (!bl.isError) assert.ok(bl.structuredContent.ranges.length <= 1, `file_blame ${p}: ${JSON.stringify(bl.structuredContent)}`);
    }
    const txt = (r) => (r.isError ? 'E' : 'ok');
    summary.push(`${p || '""'}:${txt(rd)}${txt(wr)}${txt(ed)}${bl ? txt(bl) : ''}`);
  }
  return summary;
}

function checkHostUntouched() {
  for (const p of HOST_WATCH) assert.equal(hash(p), hostBefore[p], `host ${p} changed`);
  for (const d of ['/', '/etc', '/tmp', '/root', '/var/tmp', h.dir, h.stateDir, path.join(h.stateDir, 'image-default'),
    path.join(h.stateDir, 'image-default', 'etc'), path.join(h.stateDir, 'image-default', 'tmp')]) {
    let ents = [];
    try { ents = fs.readdirSync(d); } catch {}
    assert.deepEqual(ents.filter((e) => e.includes(MARK)), [], `a file named ${MARK} appeared in ${d}`);
  }
  if (imagePasswd !== null) assert.equal(fs.readFileSync(path.join(h.stateDir, 'image-default/etc/passwd'), 'utf8'), imagePasswd);
}

h.test('plant symlinks from inside a command (published)', async () => {
  hostBefore = Object.fromEntries(HOST_WATCH.map((p) => [p, hash(p)]));
  try { imagePasswd = fs.readFileSync(path.join(h.stateDir, 'image-default/etc/passwd'), 'utf8'); } catch {}
  const r = await exec(`${PLANT} && ls -l | grep -c -- '->'`);
  assert.ok(Number(r.output.trim()) >= 8, r.output);
  assert.equal(r.publication.published, true);
});

h.test('without a session: every file tool refuses or stays inside the workspace', async () => {
  const s = await probeAll(null);
  process.stdout.write(`# snapshot (read/write/edit/blame, E = isError): ${s.join(' ')}\n`);
  checkHostUntouched();
});

h.test('symlinks inside the workspace: reads follow them inside, writes and edits refuse them', async () => {
  const r = await sc('file_read', { path: 'inlink' });
  assert.equal(r.content, '1\n2\n3\n');
  // /etc/passwd through the absolute link resolves inside the workspace root, never to the host
  const l = await call('file_read', { path: 'leak' });
  process.stdout.write(`# file_read leak (-> /etc/passwd): ${l.isError ? 'isError: ' + l.content?.[0]?.text : JSON.stringify(l.structuredContent.content)}\n`);
  assert.equal((await call('file_write', { path: 'inlink', content: 'x' })).isError, true);
  assert.equal((await call('file_edit', { path: 'inlink', edits: [{ old_string: '1', new_string: 'x' }] })).isError, true);
  assert.equal((await sc('file_read', { path: 'data/numbers.txt' })).content, '1\n2\n3\n', 'a refused write changed the link target');
  // the refused writes did not replace the links either
  const ls = await exec('for f in leak escape rootlink etcdir procroot inlink sub/up; do test -L $f && echo L || echo X; done | sort -u');
  assert.equal(ls.output, 'L\n');
});

h.test('in a managed session (links planted in the session only): same refusals', async () => {
  const s = await sc('create_workspace_session', {});
  const ws = s.workspace_session_id;
  await exec(`rm -rf leak leakrel escape rootlink etcdir procroot procleak sub inlink etc && ${PLANT}`, { workspace_session_id: ws });
  const sum = await probeAll(ws);
  process.stdout.write(`# managed session (read/write/edit): ${sum.join(' ')}\n`);
  checkHostUntouched();
  const f = await sc('finalize_workspace_session', { workspace_session_id: ws, action: 'discard' });
  assert.equal(f.action, 'discarded');
});

h.test('in a running automatic session: same refusals', async () => {
  const a = await sc('exec_command', { cmd: `ln -s /etc sessetc && ln -s /etc/passwd sessleak && echo ready && sleep 30`, yield_time_ms: 1000 });
  assert.equal(a.status, 'running');
  const ws = a.workspace_session_id;
  for (const p of ['sessetc/passwd', 'sessleak', `sessetc/${MARK}`]) {
    const rd = await call('file_read', { path: p, workspace_session_id: ws });
    if (!rd.isError) assertNoHostContent(rd.structuredContent.content, `file_read ${p}`);
    assert.equal((await call('file_write', { path: p, content: MARK, workspace_session_id: ws })).isError, true, p);
    assert.equal((await call('file_edit', { path: p, edits: [{ old_string: 'root', new_string: MARK }], workspace_session_id: ws })).isError, true, p);
  }
  await probeAll(ws);
  checkHostUntouched();
  await sc('cancel_command', { command_session_id: a.command_session_id }).catch(async () => {
    await exec(`pkill -f 'sleep 30' || true`, { workspace_session_id: ws });
  });
  await waitDone(h.mcp, SB, a.command_session_id, { timeout: 40000 });
});

h.test('race: a command swaps a directory and a symlink to /etc while the file tools run', async () => {
  await exec("mkdir -p race && echo 'inside' > race/passwd");
  const a = await sc('exec_command', {
    // rm -rf: a file_write that recreated race/ between the steps does not stop the loop
    cmd: "end=$(($(date +%s)+6)); while [ $(date +%s) -lt $end ]; do rm -rf race; mkdir race; echo inside > race/passwd; rm -rf race; ln -s /etc race; done; echo swapped",
    yield_time_ms: 100, timeout_ms: 20000,
  });
  const ws = a.workspace_session_id;
  let reads = 0, inside = 0, writesOk = 0;
  const kinds = {};
  const t0 = Date.now();
  while (Date.now() - t0 < 5000) {
    const rd = await call('file_read', { path: 'race/passwd', workspace_session_id: ws });
    reads++;
    const k = rd.isError ? 'isError: ' + (rd.content?.[0]?.text ?? '').replace(/sbx-pwn-\d+/g, 'MARK').slice(0, 90) : JSON.stringify(rd.structuredContent.content);
    kinds[k] = (kinds[k] ?? 0) + 1;
    if (!rd.isError) {
      assertNoHostContent(rd.structuredContent.content, 'racing file_read');
      // the directory (its file possibly still empty), or the symlink resolved inside the workspace root (WORKSPACE/etc/passwd)
      assert.ok(['inside\n', '', 'workspace-etc-passwd\n'].includes(rd.structuredContent.content), rd.structuredContent.content);
      if (rd.structuredContent.content === 'inside\n') inside++;
    }
    const wr = await call('file_write', { path: `race/${MARK}`, content: `${MARK}\n`, workspace_session_id: ws });
    if (!wr.isError) writesOk++;
    const ed = await call('file_edit', { path: 'race/passwd', edits: [{ old_string: 'root', new_string: MARK }], workspace_session_id: ws });
    assert.equal(ed.isError, true); // "root" is not in the workspace file; must never edit the host's
  }
  process.stdout.write(`# race: ${reads} reads (${inside} read race/passwd, the others WORKSPACE/etc/passwd or were refused), ${writesOk} writes landed inside; reads: ${JSON.stringify(kinds)}\n`);
  const done = await waitDone(h.mcp, SB, a.command_session_id, { timeout: 20000 });
  assert.equal(done.status, 'ok', done.output);
  checkHostUntouched();
  // whatever the writes created is inside the workspace
  const c = await exec(`ls race; cat race/${MARK} 2>/dev/null || true`);
  assert.ok(!c.output.includes('shadow'), c.output);
});

h.test('nothing outside the workspace carries the marker (host /etc, /, /tmp; sandbox image)', async () => {
  checkHostUntouched();
  const f = await run('find', ['/etc', '/tmp', '/root', '/var/tmp', '-xdev', '-maxdepth', '4', '-name', `${MARK}*`, '-not', '-path', `${h.dir}/*`], { timeout: 60000 });
  assert.equal(f.stdout.trim(), '', `host files created: ${f.stdout}`);
  const g = await run('grep', ['-rl', MARK, '/etc'], { timeout: 60000 });
  assert.equal(g.stdout.trim(), '', `host files modified: ${g.stdout}`);
  // the sandbox's own /etc is untouched too
  const r = await exec(`grep -c ${MARK} /etc/passwd || true; ls / /etc | grep -c ${MARK} || true`);
  assert.equal(r.output, '0\n0\n');
});
