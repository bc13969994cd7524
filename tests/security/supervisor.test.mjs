// The isolation battery, part 3: what sbxd does as root on a user's or a
// sandbox's behalf (issue 13): importing a source, keeping records by
// sandbox, the files of published layers, the errors it gives.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { run, outputLines, sbxctl, Sbxd, McpSession } from '../integration/helpers.mjs';
import { useBattery } from './common.mjs';

// No warm claim of the built-in template (sbxd.conf(5)): the state directory holds the tests' sandboxes alone.
const { h, test } = useBattery({ sandboxes: [{ name: 'pub' }], world: true, sets: 'runtime,sessions',
  config: '[sbxd]\nsocket_mode = 0666\n[template default]\nwarm = 0\n' });
const exec = (cmd, extra = {}, sandbox_id = 'pub') =>
  h.mcp.sc('exec_command', { sandbox_id, cmd, timeout_ms: 20000, yield_time_ms: 20000, ...extra });

const U = 65534; // the owner of a user's source tree (nobody)
const U2 = 65533; // the next owner of a reused name
const json = (r) => JSON.parse(r.stdout);
const listed = async () => json(await sbxctl(h.socket, ['sandbox', 'list', '--json'])).map((x) => x.name);

/* A tree owned by uid (world-readable, as a user's project is to its user). */
function userTree(dir, uid, files) {
  fs.mkdirSync(dir, { recursive: true });
  for (const [rel, body] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), body);
  }
  return run('chown', ['-R', `${uid}:${uid}`, dir]);
}

test('sandbox create follows no symlink of the user and imports only what the owner may read', async () => {
  const home = path.join(h.dir, 'home-u');
  const secret = `root-only-${process.pid}`;
  await userTree(path.join(home, 'proj'), U, { 'README.md': 'mine\n', 'src/a.c': 'int a;\n' });
  // what root put in the user's tree, or the user linked there: not the user's to read
  fs.writeFileSync(path.join(home, 'proj', 'root-secret'), `${secret}\n`, { mode: 0o600 });
  fs.mkdirSync(path.join(home, 'proj', 'rootdir'), { mode: 0o700 });
  fs.writeFileSync(path.join(home, 'proj', 'rootdir', 'inner'), `${secret}\n`, { mode: 0o644 });
  fs.symlinkSync('/etc/shadow', path.join(home, 'proj', 'shadow'));
  // sources that are symlinks of the user: to /etc, to sbxd's transcripts, a link on the way
  fs.symlinkSync('/etc', path.join(home, 'etc-link'));
  fs.symlinkSync(path.join(h.stateDir, 'transcripts'), path.join(home, 'transcripts-link'));
  fs.symlinkSync(home, path.join(h.dir, 'home-link'));
  for (const l of ['etc-link', 'transcripts-link']) await run('chown', ['-h', `${U}:${U}`, path.join(home, l)]);
  for (const [name, src] of [['etc', path.join(home, 'etc-link')], ['tx', path.join(home, 'transcripts-link')],
    ['via', path.join(h.dir, 'home-link', 'proj')]]) {
    const r = await sbxctl(h.socket, ['sandbox', 'create', name, '--source', src, '--owner', String(U)]);
    process.stdout.write(`# create --source ${src}: ${(r.stderr || r.stdout).trim()}\n`);
    assert.notEqual(r.code, 0, `a source through a symlink was imported: ${src}`);
    assert.match(r.stderr, /symbolic link/);
  }
  assert.deepEqual(await listed(), ['pub']);
  // sbxd's state directory, or a tree holding it, is never a source, even root's own
  for (const src of [h.stateDir, path.join(h.stateDir, 'transcripts'), h.dir]) {
    const r = await sbxctl(h.socket, ['sandbox', 'create', 'state', '--source', src]);
    process.stdout.write(`# create --source ${src} (owner root): ${r.stderr.trim()}\n`);
    assert.notEqual(r.code, 0, `the state directory was imported from ${src}`);
    assert.match(r.stderr, /state directory/);
  }
  assert.deepEqual(await listed(), ['pub']);
  // the user's real tree: imported without what the owner may not read, and the result says so
  const r = await sbxctl(h.socket, ['sandbox', 'create', 'proj', '--source', path.join(home, 'proj'), '--owner', String(U)]);
  assert.equal(r.code, 0, r.stderr);
  process.stdout.write(`# ${r.stdout.trim().replace(/\n/g, '\n# ')}\n`);
  assert.match(r.stdout, /not imported: 2 entries .* \(uid 65534\) may not read: (root-secret, rootdir|rootdir, root-secret)/);
  const shown = json(await sbxctl(h.socket, ['sandbox', 'show', 'proj', '--json']));
  assert.equal(shown.owner_uid, U);
  const inside = await exec('ls -A /workspace | sort | tr "\\n" " "; echo; cat /workspace/shadow /workspace/root-secret /workspace/rootdir/inner 2>&1; true',
    {}, 'proj');
  assert.ok(!inside.output.includes(secret), `a file the owner may not read was imported:\n${inside.output}`);
  assert.equal(outputLines(inside)[0], 'README.md shadow src ');
  assert.match(inside.output, /shadow: No such file/);
  const host = fs.readFileSync('/etc/shadow', 'utf8').split('\n')[0];
  assert.ok(!inside.output.includes(host));
  // the JSON answer carries the same, naming the first SBX_IMPORT_UNREADABLE_SHOWN (8)
  fs.rmSync(path.join(home, 'proj', 'rootdir'), { recursive: true });
  for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(home, 'proj', 'src', `root-${i}`), `${secret}\n`, { mode: 0o600 });
  const j = await sbxctl(h.socket, ['sandbox', 'create', 'proj2', '--source', path.join(home, 'proj'), '--owner', String(U), '--json']);
  assert.equal(j.code, 0, j.stderr);
  assert.equal(json(j).unreadable, 11);
  assert.equal(json(j).unreadable_paths.length, 8);
  for (const p of json(j).unreadable_paths) assert.match(p, /^(root-secret|src\/root-\d)$/);
  for (const n of ['proj', 'proj2']) assert.equal((await sbxctl(h.socket, ['sandbox', 'delete', n])).code, 0);
});

test("a reused sandbox name does not hand over the previous owner's commands, transcripts or layers", async () => {
  const src = path.join(h.dir, 'src-reuse');
  await userTree(src, 0, { 'README.md': 'shared\n' });
  let r = await sbxctl(h.socket, ['sandbox', 'create', 'reuse', '--source', src, '--owner', String(U), '--json']);
  assert.equal(r.code, 0, r.stderr);
  const firstId = json(r).id;
  const a = await h.connect({ uid: U });
  const mark = `secret-of-${U}-${process.pid}`;
  let cmdA;
  try {
    cmdA = await a.sc('exec_command', { sandbox_id: 'reuse', cmd: `echo ${mark}; echo ${mark} > mine.txt` });
    assert.equal(cmdA.output, `${mark}\n`);
  } finally {
    await a.close();
  }
  const transcript = path.join(h.stateDir, 'transcripts', `${cmdA.command_session_id}.log`);
  assert.ok(fs.existsSync(transcript));
  assert.equal((await sbxctl(h.socket, ['sandbox', 'delete', 'reuse'])).code, 0);
  // deleted with the sandbox: its transcripts and its layers
  assert.ok(!fs.existsSync(transcript), 'the transcript outlived its sandbox');
  assert.ok(!fs.existsSync(path.join(h.stateDir, 'sandboxes', firstId)), "the sandbox's layers outlived it");
  r = await sbxctl(h.socket, ['sandbox', 'create', 'reuse', '--source', src, '--owner', String(U2), '--json']);
  assert.equal(r.code, 0, r.stderr);
  assert.notEqual(json(r).id, firstId, 'the new sandbox got the old id');
  const b = await h.connect({ uid: U2 });
  try {
    const lines = await b.call('read_command_lines', { sandbox_id: 'reuse', command_session_id: cmdA.command_session_id });
    assert.ok(!JSON.stringify(lines).includes(mark), `the new owner read the old owner's output: ${JSON.stringify(lines)}`);
    assert.equal(lines.isError, true);
    const list = await b.sc('list_command_sessions', { sandbox_id: 'reuse' });
    assert.deepEqual(list.commands, [], `the new owner lists the old owner's commands: ${JSON.stringify(list)}`);
    const f = await b.call('file_read', { sandbox_id: 'reuse', path: 'mine.txt' });
    assert.equal(f.isError, true, 'the old owner\'s published file is in the new sandbox');
  } finally {
    await b.close();
  }
  assert.equal((await sbxctl(h.socket, ['sandbox', 'delete', 'reuse'])).code, 0);
});

test('sbxctl gc finishes a delete that a crash interrupted', async () => {
  // what a crash between the delete's commit and the removal of its files leaves
  const tdir = path.join(h.stateDir, 'transcripts');
  const orphan = 'cmd-0123456789abcdef0123456789abcdef'.slice(0, 32);
  fs.writeFileSync(path.join(tdir, `${orphan}.log`), 'old output\n');
  fs.writeFileSync(path.join(tdir, `${orphan}.idx`), Buffer.alloc(8));
  const gone = path.join(h.stateDir, 'sandboxes', 'sb-00000000deadbeef');
  fs.mkdirSync(path.join(gone, 'layers', '0'), { recursive: true });
  fs.writeFileSync(path.join(gone, 'layers', '0', 'file'), 'x\n');
  const live = fs.readdirSync(path.join(h.stateDir, 'sandboxes')).filter((d) => d !== 'sb-00000000deadbeef');
  const liveTranscripts = fs.readdirSync(tdir).filter((f) => !f.startsWith(orphan));
  const r = await sbxctl(h.socket, ['gc', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const g = json(r);
  process.stdout.write(`# gc: ${JSON.stringify(g)}\n`);
  assert.equal(g.sandboxes_removed, 1, JSON.stringify(g));
  assert.ok(g.transcripts_removed >= 1, JSON.stringify(g));
  assert.ok(!fs.existsSync(gone), 'the deleted sandbox\'s directory stayed');
  assert.ok(!fs.existsSync(path.join(tdir, `${orphan}.log`)) && !fs.existsSync(path.join(tdir, `${orphan}.idx`)));
  // nothing live was touched
  assert.deepEqual(fs.readdirSync(path.join(h.stateDir, 'sandboxes')).sort(), live.sort());
  assert.deepEqual(fs.readdirSync(tdir).sort(), liveTranscripts.sort());
  assert.equal((await exec('cat README.md')).output, '# fixture\n\nA small repository used by the sbx integration tests.\n');
});

/* A state directory as an sbxd before schema versions left it: records keyed by
 * the name, the layers in sandboxes/NAME, and a command of an earlier sandbox of
 * the same name (deleted, then created again) still recorded. */
const SCHEMA_1 = `
CREATE TABLE sandboxes (name TEXT PRIMARY KEY, owner_uid INTEGER NOT NULL, source_dir TEXT NOT NULL,
  memory_bytes INTEGER NOT NULL, pids_max INTEGER NOT NULL, created_unix INTEGER NOT NULL, cpu_weight INTEGER NOT NULL DEFAULT 100);
CREATE TABLE layers (sandbox TEXT NOT NULL REFERENCES sandboxes(name) ON DELETE CASCADE, seq INTEGER NOT NULL,
  owner TEXT NOT NULL, changed_paths INTEGER NOT NULL, created_unix INTEGER NOT NULL, PRIMARY KEY (sandbox, seq));
CREATE TABLE commands (id TEXT PRIMARY KEY, sandbox TEXT NOT NULL, workspace_session TEXT NOT NULL, status TEXT NOT NULL,
  exit_code INTEGER, signal INTEGER NOT NULL DEFAULT 0, end_reason TEXT NOT NULL DEFAULT '', started_usec INTEGER NOT NULL,
  ended_usec INTEGER NOT NULL DEFAULT 0, raw_bytes INTEGER NOT NULL DEFAULT 0, cmd TEXT NOT NULL DEFAULT '');
CREATE INDEX commands_by_sandbox ON commands(sandbox, started_usec);
CREATE TABLE layer_paths (sandbox TEXT NOT NULL, seq INTEGER NOT NULL, path TEXT NOT NULL,
  FOREIGN KEY (sandbox, seq) REFERENCES layers(sandbox, seq) ON DELETE CASCADE);
CREATE TABLE blame (sandbox TEXT NOT NULL REFERENCES sandboxes(name) ON DELETE CASCADE, path TEXT NOT NULL,
  ranges TEXT NOT NULL, PRIMARY KEY (sandbox, path));
CREATE TABLE squashes (sandbox TEXT PRIMARY KEY REFERENCES sandboxes(name) ON DELETE CASCADE, squashed INTEGER NOT NULL);
`;

test("an sbx.db of an older sbxd is migrated: records follow the sandbox's id, an earlier owner's do not", async () => {
  const dir = path.join(h.dir, 'old');
  const state = path.join(dir, 'state');
  const created = Math.floor(Date.now() / 1000) - 100;
  fs.mkdirSync(path.join(state, 'sandboxes', 'proj', 'layers', '0'), { recursive: true });
  fs.writeFileSync(path.join(state, 'sandboxes', 'proj', 'layers', '0', 'README.md'), 'from the old layer\n');
  fs.mkdirSync(path.join(state, 'transcripts'));
  const idx = Buffer.alloc(8);
  idx.writeBigUInt64LE(BigInt('earlier owner\n'.length));
  fs.writeFileSync(path.join(state, 'transcripts', 'cmd-earlier.log'), 'earlier owner\n');
  fs.writeFileSync(path.join(state, 'transcripts', 'cmd-earlier.idx'), idx);
  const idx2 = Buffer.alloc(8);
  idx2.writeBigUInt64LE(BigInt('this owner\n'.length));
  fs.writeFileSync(path.join(state, 'transcripts', 'cmd-current.log'), 'this owner\n');
  fs.writeFileSync(path.join(state, 'transcripts', 'cmd-current.idx'), idx2);
  const rows = `INSERT INTO sandboxes VALUES ('proj', 0, '/src', 1073741824, 512, ${created}, 100);
INSERT INTO layers VALUES ('proj', 0, 'original', 0, ${created});
INSERT INTO commands (id, sandbox, workspace_session, status, exit_code, end_reason, started_usec, ended_usec, raw_bytes, cmd) VALUES
  ('cmd-earlier', 'proj', 'ws-1', 'ok', 0, 'exit', ${(created - 50) * 1e6}, ${(created - 49) * 1e6}, 14, 'echo earlier owner'),
  ('cmd-current', 'proj', 'ws-2', 'ok', 0, 'exit', ${(created + 10) * 1e6}, ${(created + 11) * 1e6}, 11, 'echo this owner');`;
  const py = await run('python3', ['-c', 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.executescript(sys.argv[3]); c.commit()',
    path.join(state, 'sbx.db'), SCHEMA_1, rows]);
  assert.equal(py.code, 0, py.stderr);
  fs.writeFileSync(path.join(dir, 'sbxd.conf'), '[template default]\nwarm = 0\n'); // no warm claim's directory
  const old = new Sbxd({ stateDir: state, runDir: path.join(dir, 'run'), logPath: path.join(h.logDir, 'sbxd-old.log'),
    extraArgs: ['--config', path.join(dir, 'sbxd.conf')] });
  await old.start();
  let mcp;
  try {
    const shown = await sbxctl(old.socket, ['sandbox', 'show', 'proj', '--json']);
    assert.equal(shown.code, 0, shown.stderr);
    const id = json(shown).id;
    assert.match(id, /^sb-[0-9a-f]{16}$/);
    assert.deepEqual(fs.readdirSync(path.join(state, 'sandboxes')), [id], 'the directory was not renamed to the id');
    mcp = await McpSession.connect({ socket: old.socket, logPath: path.join(h.logDir, 'sandbox-mcp-old.log') });
    const cur = await mcp.sc('read_command_lines', { sandbox_id: 'proj', command_session_id: 'cmd-current' });
    assert.equal(cur.output, 'this owner\n');
    const earlier = await mcp.call('read_command_lines', { sandbox_id: 'proj', command_session_id: 'cmd-earlier' });
    assert.equal(earlier.isError, true, `the earlier sandbox's command was handed over: ${JSON.stringify(earlier)}`);
    const r = await mcp.sc('exec_command', { sandbox_id: 'proj', cmd: 'cat README.md', timeout_ms: 20000, yield_time_ms: 20000 });
    assert.equal(r.output, 'from the old layer\n');
    const g = json(await sbxctl(old.socket, ['gc', '--json']));
    assert.equal(g.transcripts_removed, 1, JSON.stringify(g));
    assert.ok(!fs.existsSync(path.join(state, 'transcripts', 'cmd-earlier.log')));
    assert.ok(fs.existsSync(path.join(state, 'transcripts', 'cmd-current.log')));
    assert.match(fs.readFileSync(path.join(h.logDir, 'sbxd-old.log'), 'utf8'), /Migrated .*sbx\.db from schema 1/);
  } finally {
    await mcp?.close();
    await old.stop();
  }
});

test('published layers keep no setuid or setgid bit, and every mount of a layer is nosuid', async () => {
  const r = await exec('cp /usr/bin/id /workspace/suid-id && chmod 6755 /workspace/suid-id && ' +
    'mkdir -p /workspace/shared && chmod 2775 /workspace/shared && ls -l /workspace/suid-id');
  assert.equal(r.publication?.published, true, JSON.stringify(r));
  // on the host: no set-id file anywhere in sbx's state, whatever its owner
  const found = await run('find', [h.stateDir, '-perm', '/6000', '-type', 'f']);
  assert.equal(found.code, 0, found.stderr);
  assert.equal(found.stdout.trim(), '', `set-id files in the state directory:\n${found.stdout}`);
  // inside, the next session sees the file without the bits, the directory keeps setgid
  const look = await exec('stat -c "%a %n" /workspace/suid-id /workspace/shared');
  assert.deepEqual(outputLines(look), ['755 /workspace/suid-id', '2775 /workspace/shared']);
  // the workspace overlay (every layer of the stack) and the root are mounted nosuid; sbxd's own
  // detached views of the snapshot (snapshot.c) are made with MOUNT_ATTR_NOSUID
  const m = await exec('awk \'$5 == "/workspace" || $5 == "/" { print $5, $6 }\' /proc/self/mountinfo');
  const mounts = outputLines(m);
  assert.ok(mounts.length >= 2, m.output);
  for (const l of mounts) assert.match(l, /(^|,)nosuid(,|$)/, `mounted without nosuid: ${l}`);
});

test('a tree deeper than the layer depth limit: the error names the limit and the path', async () => {
  const deep = Array.from({ length: 300 }, () => 'd').join('/');
  const r = await exec(`mkdir -p /workspace/deep/${deep} && echo made`);
  assert.equal(r.output, 'made\n');
  assert.equal(r.publication?.published, false, JSON.stringify(r.publication));
  const err = r.publication?.error ?? '';
  process.stdout.write(`# publication error: ${err}\n`);
  assert.doesNotMatch(err, /symbolic links/, 'the depth limit reported as a symlink loop');
  assert.match(err, /256/, `the limit is not named: ${err}`);
  assert.match(err, /deep\/d\/d\/d/, `the path is not named: ${err}`);
  // the session stays; discard it
  const list = await h.mcp.sc('list_workspace_sessions', { sandbox_id: 'pub' });
  for (const s of list.sessions) {
    await h.mcp.sc('finalize_workspace_session', { sandbox_id: 'pub', workspace_session_id: s.workspace_session_id, action: 'discard' });
  }
  // importing such a tree is refused the same way
  const src = path.join(h.dir, 'src-deep');
  fs.mkdirSync(path.join(src, 'top', deep), { recursive: true });
  const c = await sbxctl(h.socket, ['sandbox', 'create', 'deep', '--source', src]);
  process.stdout.write(`# sandbox create: ${c.stderr.trim()}\n`);
  assert.notEqual(c.code, 0, 'a tree deeper than the limit was imported');
  assert.doesNotMatch(c.stderr, /symbolic links/);
  assert.match(c.stderr, /256/);
  assert.match(c.stderr, /top\/d\/d\/d/);
});
