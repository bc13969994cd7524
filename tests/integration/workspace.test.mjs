// Automatic sessions publish their workspace changes; writes elsewhere vanish
// with the session; the host source is never modified; workspace_session_id.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, outputLines, waitDone, FIXTURE_FILES } from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'ws' }, { name: 'other' }] });
const SB = 'ws';
const exec = (cmd, extra = {}, sandbox_id = SB) => h.mcp.sc('exec_command', { sandbox_id, cmd, ...extra });

h.test('publish-then-visible: a file written by one command is seen by the next', async () => {
  const w = await exec('echo "published content" > note.txt; mkdir -p sub/dir; echo deep > sub/dir/f');
  assert.equal(w.status, 'ok', w.output);
  assert.ok(w.publication, 'a terminal automatic command carries its publication');
  assert.equal(w.publication.published, true);
  assert.ok(Number.isInteger(w.publication.layer), `layer ${w.publication.layer}`);
  assert.match(w.publication.owner, /^workspace_session:/);
  assert.ok(w.publication.owner.endsWith(w.workspace_session_id), `owner ${w.publication.owner} vs ${w.workspace_session_id}`);
  assert.ok(w.publication.changed_paths >= 2, `changed_paths ${w.publication.changed_paths}`);
  assert.ok(!w.publication.error, w.publication.error);
  const r = await exec('cat note.txt sub/dir/f');
  assert.equal(r.status, 'ok', r.output);
  assert.equal(r.output, 'published content\ndeep\n');
  assert.notEqual(r.workspace_session_id, w.workspace_session_id, 'each automatic command gets its own session');
});

h.test('layers stack: later publications see earlier ones; deletions and renames publish', async () => {
  const a = await exec('echo v1 > stack.txt');
  const b = await exec('echo v2 >> stack.txt; rm README.md; mv data/numbers.txt data/renamed.txt');
  assert.equal(b.status, 'ok', b.output);
  assert.ok(b.publication.layer > a.publication.layer, `layers ${a.publication.layer} then ${b.publication.layer}`);
  const c = await exec('cat stack.txt; ls; ls data');
  const lines = outputLines(c);
  assert.deepEqual(lines.slice(0, 2), ['v1', 'v2']);
  assert.ok(!lines.includes('README.md'), `README.md was deleted: ${c.output}`);
  assert.ok(lines.includes('renamed.txt') && !lines.includes('numbers.txt'), c.output);
  const d = await exec('test ! -e README.md && echo gone');
  assert.equal(d.output, 'gone\n');
});

h.test('a command that changes nothing publishes nothing', async () => {
  const r = await exec('cat hello.sh > /dev/null');
  assert.equal(r.status, 'ok');
  if (r.publication) assert.equal(r.publication.published, false, JSON.stringify(r.publication));
});

h.test('a failing command still publishes its workspace changes', async () => {
  const r = await exec('echo partial > failed-run.txt; exit 2');
  assert.equal(r.status, 'error');
  const c = await exec('cat failed-run.txt');
  assert.equal(c.output, 'partial\n');
});

h.test('writes outside /workspace are private to the session', async () => {
  const w = await exec('echo x > /tmp/outside.txt && cat /tmp/outside.txt; mkdir -p /var/tmp/sbxprobe && echo y > /var/tmp/sbxprobe/f');
  assert.equal(w.output.split('\n')[0], 'x', 'the session itself can write /tmp');
  const r = await exec('cat /tmp/outside.txt; ls /var/tmp/sbxprobe');
  assert.equal(r.status, 'error', `/tmp leaked into the next session: ${r.output}`);
  assert.ok(!r.output.split('\n').includes('x'));
  assert.ok(!fs.existsSync('/tmp/outside.txt') || fs.readFileSync('/tmp/outside.txt', 'utf8') !== 'x\n',
    'the sandbox wrote into the host /tmp');
  assert.ok(!fs.existsSync('/var/tmp/sbxprobe'), 'the sandbox wrote into the host /var/tmp');
});

h.test('the host source directory is never modified', async () => {
  const src = h.sandboxes[SB].src;
  await exec('echo changed > hello.sh; echo new > brand-new.txt; rm -f src/lib.sh');
  assert.equal(fs.readFileSync(path.join(src, 'hello.sh'), 'utf8'), FIXTURE_FILES['hello.sh']);
  assert.equal(fs.readFileSync(path.join(src, 'src/lib.sh'), 'utf8'), FIXTURE_FILES['src/lib.sh']);
  assert.ok(!fs.existsSync(path.join(src, 'brand-new.txt')));
  assert.ok(!fs.existsSync(path.join(src, 'note.txt')));
  const c = await exec('cat hello.sh');
  assert.equal(c.output, 'changed\n');
});

h.test('sandboxes are separate: one sandbox never sees another one\'s files', async () => {
  await exec('echo mine > only-in-ws.txt');
  const r = await exec('ls; test -e only-in-ws.txt && echo LEAK || echo absent', {}, 'other');
  assert.ok(r.output.includes('absent'), r.output);
  assert.ok(r.output.includes('README.md'));
});

h.test('exec_command inside a live workspace session (workspace_session_id) shares its files', async () => {
  const a = await exec('echo from-a > shared.txt; sleep 2; echo a-done', { yield_time_ms: 500 });
  assert.equal(a.status, 'running');
  const ws = a.workspace_session_id;
  const b = await exec('cat shared.txt; echo from-b > b.txt', { workspace_session_id: ws });
  assert.equal(b.status, 'ok', b.output);
  assert.equal(b.workspace_session_id, ws);
  assert.equal(b.output, 'from-a\n');
  // snapshot isolation: a sibling automatic session does not see uncommitted changes
  const sib = await exec('test -e shared.txt && echo visible || echo invisible');
  assert.equal(sib.output, 'invisible\n');
  const done = await waitDone(h.mcp, SB, a.command_session_id);
  assert.equal(done.status, 'ok');
  // once the automatic session finished, both files are published
  const c = await exec('cat shared.txt b.txt');
  assert.equal(c.output, 'from-a\nfrom-b\n');
});

h.test('an unknown or finished workspace_session_id is an isError result', async () => {
  const t = await h.mcp.err('exec_command', { sandbox_id: SB, cmd: 'true', workspace_session_id: 'no-such-session' });
  assert.match(t, /session/i);
  const done = await exec('true');
  const t2 = await h.mcp.err('exec_command', { sandbox_id: SB, cmd: 'true', workspace_session_id: done.workspace_session_id });
  assert.ok(t2.length > 0);
});
