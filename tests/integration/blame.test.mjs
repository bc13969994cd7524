// file_blame: ranges tile the published content after a sequence of changes by
// different owners (original, operation:<id>, automatic and managed
// workspace_session:<id>), with the exact owner of every line; a file deleted
// and re-created; a rename; CRLF files and files without a final newline.
import assert from 'node:assert/strict';
import { useSbx } from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'blame' }], sets: 'runtime,sessions' });
const SB = 'blame';
const sc = (name, args) => h.mcp.sc(name, { sandbox_id: SB, ...args });
const err = (name, args) => h.mcp.err(name, { sandbox_id: SB, ...args });
const exec = async (cmd, extra = {}) => {
  const r = await sc('exec_command', { cmd, ...extra });
  assert.equal(r.status, 'ok', `${cmd}: ${r.output}`);
  return r;
};
const wsOwner = (r) => `workspace_session:${r.workspace_session_id}`;

/* Blame the path, check that the ranges tile the current content exactly
 * (contiguous from line 1, covering total_lines, adjacent ranges of different
 * owners) and return the owner of every line (array, line 1 first). */
async function blameLines(path) {
  const b = await sc('file_blame', { path });
  const r = await sc('file_read', { path });
  assert.equal(b.path, path);
  let next = 1;
  const owners = [];
  for (const [i, g] of b.ranges.entries()) {
    assert.equal(g.start_line, next, `ranges not contiguous: ${JSON.stringify(b.ranges)}`);
    assert.ok(g.line_count >= 1);
    assert.match(g.owner, /^(original|unknown|operation:.+|workspace_session:.+)$/);
    if (i > 0) assert.notEqual(g.owner, b.ranges[i - 1].owner, `adjacent ranges with one owner are not merged: ${JSON.stringify(b.ranges)}`);
    for (let k = 0; k < g.line_count; k++) owners.push(g.owner);
    next += g.line_count;
  }
  assert.equal(owners.length, r.total_lines, `blame covers ${owners.length} lines, the file has ${r.total_lines}: ${JSON.stringify(b.ranges)}`);
  return owners;
}

const O = {}; // owners seen, by step

h.test('imported files are owned by original', async () => {
  assert.deepEqual(await blameLines('data/numbers.txt'), ['original', 'original', 'original']);
  assert.deepEqual((await sc('file_blame', { path: 'README.md' })).ranges, [{ start_line: 1, line_count: 3, owner: 'original' }]);
});

h.test('a sequence of writes, edits and command changes: exact owner of every line', async () => {
  // 1. file_write (operation A) appends lines 4, 5
  const a = await sc('file_write', { path: 'data/numbers.txt', content: '1\n2\n3\n4\n5\n' });
  O.A = a.publication.owner;
  assert.match(O.A, /^operation:/);
  assert.deepEqual(await blameLines('data/numbers.txt'), ['original', 'original', 'original', O.A, O.A]);
  // 2. file_edit (operation B) changes line 2
  const b = await sc('file_edit', { path: 'data/numbers.txt', edits: [{ old_string: '2\n', new_string: 'two\n' }] });
  O.B = b.publication.owner;
  assert.notEqual(O.B, O.A);
  assert.deepEqual(await blameLines('data/numbers.txt'), ['original', O.B, 'original', O.A, O.A]);
  // 3. an automatic session (command C) changes line 4 and appends line 6
  const c = await exec("sed -i 's/^4$/four/' data/numbers.txt && echo 6 >> data/numbers.txt");
  O.C = wsOwner(c);
  assert.equal(c.publication.owner, O.C);
  assert.deepEqual(await blameLines('data/numbers.txt'), ['original', O.B, 'original', O.C, O.A, O.C]);
  // 4. another automatic session deletes line 3 (an original line): the others keep their owners
  const d = await exec("sed -i '/^3$/d' data/numbers.txt");
  O.D = wsOwner(d);
  assert.deepEqual(await blameLines('data/numbers.txt'), ['original', O.B, O.C, O.A, O.C]);
  assert.equal((await sc('file_read', { path: 'data/numbers.txt' })).content, '1\ntwo\nfour\n5\n6\n');
  // 5. an edit that changes a line back to an earlier text is still a new change
  const e = await sc('file_edit', { path: 'data/numbers.txt', edits: [{ old_string: 'two', new_string: '2' }] });
  O.E = e.publication.owner;
  assert.deepEqual(await blameLines('data/numbers.txt'), ['original', O.E, O.C, O.A, O.C]);
});

h.test('a managed session publishes with its own owner; its lines interleave with the others', async () => {
  const s = await sc('create_workspace_session', {});
  const ws = s.workspace_session_id;
  const r = await exec("sed -i '1i zero' data/numbers.txt && echo 7 >> data/numbers.txt", { workspace_session_id: ws });
  assert.equal(r.workspace_session_id, ws);
  // also a session-scoped file_edit, same owner
  await sc('file_edit', { path: 'data/numbers.txt', edits: [{ old_string: '5\n', new_string: 'five\n' }], workspace_session_id: ws });
  // nothing published yet
  assert.deepEqual(await blameLines('data/numbers.txt'), ['original', O.E, O.C, O.A, O.C]);
  const f = await sc('finalize_workspace_session', { workspace_session_id: ws, action: 'publish' });
  assert.equal(f.action, 'published');
  O.M = `workspace_session:${ws}`;
  assert.equal(f.publication.owner, O.M);
  assert.equal((await sc('file_read', { path: 'data/numbers.txt' })).content, 'zero\n1\n2\nfour\nfive\n6\n7\n');
  assert.deepEqual(await blameLines('data/numbers.txt'), [O.M, 'original', O.E, O.C, O.M, O.C, O.M]);
});

h.test('a file deleted and re-created: not_found while deleted, then owned by the re-creator', async () => {
  await exec("printf 'keep\\nsame\\n' > recreate.txt");
  const del = await exec('rm recreate.txt');
  assert.equal(del.publication.published, true);
  assert.match(await err('file_blame', { path: 'recreate.txt' }), /not_found/);
  // re-created with the same text: a new file, every line by the re-creator
  const w = await sc('file_write', { path: 'recreate.txt', content: 'keep\nsame\n' });
  assert.equal(w.type, 'create');
  assert.deepEqual(await blameLines('recreate.txt'), [w.publication.owner, w.publication.owner]);
  // an original file deleted and re-created by a command
  await exec('rm hello.sh');
  const re = await exec("printf '#!/bin/sh\\necho \"hello from the fixture\"\\nnew\\n' > hello.sh");
  const owners = await blameLines('hello.sh');
  process.stdout.write(`# hello.sh deleted, then re-created with its old 2 lines + 1: owners ${JSON.stringify(owners)}\n`);
  assert.deepEqual(owners, [wsOwner(re), wsOwner(re), wsOwner(re)], 'a re-created file does not inherit the deleted file\'s attribution');
  // deleted and re-created inside one session is a modification: unchanged lines keep their owners
  const one = await exec("rm src/lib.sh; printf 'greet() {\\n\\techo \"hello $1\"\\n}\\n' > src/lib.sh");
  const o2 = await blameLines('src/lib.sh');
  process.stdout.write(`# src/lib.sh rm + re-create in one session: owners ${JSON.stringify(o2)}\n`);
  assert.deepEqual(o2, ['original', wsOwner(one), 'original']);
});

h.test('a rename (mv): the old path is not_found; the new path tiles (owners documented)', async () => {
  const w = await sc('file_write', { path: 'ren/a.txt', content: 'l1\nl2\nl3\n' });
  const edited = await sc('file_edit', { path: 'ren/a.txt', edits: [{ old_string: 'l2', new_string: 'L2' }] });
  const mv = await exec('mv ren/a.txt ren/b.txt');
  assert.match(await err('file_blame', { path: 'ren/a.txt' }), /not_found/);
  const owners = await blameLines('ren/b.txt');
  process.stdout.write(`# after mv ren/a.txt ren/b.txt: owners ${JSON.stringify(owners)} (writer ${w.publication.owner}, mover ${wsOwner(mv)})\n`);
  // Observed: the rename is detected, every line keeps its owner (the mover owns none).
  assert.deepEqual(owners, [w.publication.owner, edited.publication.owner, w.publication.owner]);
  // an original file renamed by a command
  const mv2 = await exec('mv README.md README.txt');
  const o2 = await blameLines('README.txt');
  process.stdout.write(`# after mv README.md README.txt: owners ${JSON.stringify(o2)} (mover ${wsOwner(mv2)})\n`);
  assert.deepEqual(o2, ['original', 'original', 'original']);
  // a rename plus a change in one session: at least the changed line is the mover's
  const mv3 = await exec("mv ren/b.txt ren/c.txt && sed -i 's/l3/L3/' ren/c.txt");
  const o3 = await blameLines('ren/c.txt');
  assert.equal(o3[2], wsOwner(mv3));
});

h.test('CRLF files: line diff by CRLF lines; a CR-only change and an LF->CRLF change are line changes', async () => {
  const w = await sc('file_write', { path: 'crlf.txt', content: 'a\r\nb\r\nc\r\nd\r\n' });
  const x = await exec("sed -i 's/^c/C/' crlf.txt");
  assert.deepEqual(await blameLines('crlf.txt'), [w.publication.owner, w.publication.owner, wsOwner(x), w.publication.owner]);
  // convert line 1 to LF only: that line changes owner
  const e = await sc('file_edit', { path: 'crlf.txt', edits: [{ old_string: 'a\r\n', new_string: 'a\n' }] });
  assert.deepEqual(await blameLines('crlf.txt'), [e.publication.owner, w.publication.owner, wsOwner(x), w.publication.owner]);
  assert.equal((await sc('file_read', { path: 'crlf.txt' })).total_lines, 4);
});

h.test('files without a final newline: appending to the last line, adding lines after it', async () => {
  const w = await sc('file_write', { path: 'nonl.txt', content: 'p\nq' });
  assert.deepEqual(await blameLines('nonl.txt'), [w.publication.owner, w.publication.owner]);
  // echo >> appends after "q" with no newline: line 2 becomes "qr" (changed)
  const x = await exec("printf 'r' >> nonl.txt");
  assert.equal((await sc('file_read', { path: 'nonl.txt' })).content, 'p\nqr');
  assert.deepEqual(await blameLines('nonl.txt'), [w.publication.owner, wsOwner(x)]);
  // adding a newline and a line after the last one
  const y = await exec("printf '\\ns' >> nonl.txt");
  const owners = await blameLines('nonl.txt');
  process.stdout.write(`# 'p\\nqr' + '\\ns': owners ${JSON.stringify(owners)}\n`);
  assert.equal(owners[0], w.publication.owner);
  assert.equal(owners[2], wsOwner(y));
  assert.ok([wsOwner(x), wsOwner(y)].includes(owners[1]));
  // an empty file has no ranges
  await sc('file_write', { path: 'nonl.txt', content: '' });
  assert.deepEqual((await sc('file_blame', { path: 'nonl.txt' })).ranges, []);
});

h.test('blame after a big rewrite and many small publications still tiles', async () => {
  const lines = Array.from({ length: 300 }, (_, i) => `row ${i}`);
  const w = await sc('file_write', { path: 'many.txt', content: lines.join('\n') + '\n' });
  const owners = Array(300).fill(w.publication.owner);
  for (const i of [0, 17, 150, 151, 299]) {
    const e = await sc('file_edit', { path: 'many.txt', edits: [{ old_string: `row ${i}\n`, new_string: `ROW ${i}\n` }] });
    owners[i] = e.publication.owner;
  }
  const x = await exec("sed -i 's/^row 200$/ROW 200/; 100d' many.txt");
  owners[200] = wsOwner(x); // "row 200" is line 201; line 100 is "row 99"
  owners.splice(99, 1);
  assert.deepEqual(await blameLines('many.txt'), owners);
});
