// The isolation battery, part 3: what sbxd does as root on a user's or a
// sandbox's behalf (issue 13): importing a source, keeping records by
// sandbox, the files of published layers, the errors it gives.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { run, outputLines, sbxctl } from '../integration/helpers.mjs';
import { useBattery } from './common.mjs';

const { h, test } = useBattery({ sandboxes: [{ name: 'pub' }], world: true, sets: 'runtime,sessions' });
const exec = (cmd, extra = {}, sandbox_id = 'pub') =>
  h.mcp.sc('exec_command', { sandbox_id, cmd, timeout_ms: 20000, yield_time_ms: 20000, ...extra });

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
