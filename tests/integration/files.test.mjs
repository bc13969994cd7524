// The file tools of the runtime set: file_read (windows, paging, the 52 KiB
// escaped reply budget, what is refused), file_write (create/update, publication), file_edit
// (every error case of the seed, all-or-nothing), file_blame basics, CRLF and
// no-final-newline files, and session-scoped reads/writes/edits that stay
// private until the managed session is finalized.
import assert from 'node:assert/strict';
import { useSbx, sbxctl, waitDone, FIXTURE_FILES } from './helpers.mjs';

const h = useSbx({ sandboxes: [{ name: 'files' }], sets: 'runtime,sessions' });
const SB = 'files';
const sc = (name, args, opts) => h.mcp.sc(name, { sandbox_id: SB, ...args }, opts);
const err = (name, args) => h.mcp.err(name, { sandbox_id: SB, ...args });
const exec = (cmd, extra = {}) => sc('exec_command', { cmd, ...extra });
const read = (path, extra = {}) => sc('file_read', { path, ...extra });
const write = (path, content, extra = {}) => sc('file_write', { path, content, ...extra });
const edit = (path, edits, extra = {}) => sc('file_edit', { path, edits, ...extra });
const blame = (path) => sc('file_blame', { path });

/* Page a file to its end with next_offset; returns the windows. */
async function pageAll(path, { limit, session } = {}) {
  const wins = [];
  let offset = 1;
  for (let i = 0; i < 100; i++) {
    const args = { offset };
    if (limit !== undefined) args.limit = limit;
    if (session) args.workspace_session_id = session;
    const w = await read(path, args);
    wins.push(w);
    assert.equal(w.start_line, offset);
    assert.equal(Buffer.byteLength(w.content), w.bytes_read, 'bytes_read is the byte length of content');
    assert.equal(w.truncated, w.next_offset !== null, 'truncated iff next_offset is set');
    if (w.next_offset === null) return wins;
    assert.equal(w.next_offset, w.start_line + w.num_lines, 'next_offset continues right after the window');
    assert.ok(w.num_lines >= 1, 'a window that continues holds at least one line');
    offset = w.next_offset;
  }
  throw new Error('paging did not reach the end in 100 windows');
}

function checkTiling(ranges, total) {
  let next = 1;
  for (const r of ranges) {
    assert.equal(r.start_line, next, `ranges must be contiguous: ${JSON.stringify(ranges)}`);
    assert.ok(r.line_count >= 1);
    next += r.line_count;
  }
  assert.equal(next - 1, total, `ranges cover ${next - 1} lines, the file has ${total}: ${JSON.stringify(ranges)}`);
}

/* Owner of every line, 1-based (index 0 unused). */
function ownersPerLine(ranges) {
  const out = [null];
  for (const r of ranges) for (let i = 0; i < r.line_count; i++) out.push(r.owner);
  return out;
}

async function layerCount() {
  const r = await sbxctl(h.socket, ['--json', 'layer', 'list', SB]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout).length;
}

h.test('file_read: a whole small file, all result fields; relative and /workspace-absolute paths', async () => {
  const body = FIXTURE_FILES['README.md'];
  const r = await read('README.md');
  assert.deepEqual(r, {
    path: 'README.md', content: body, start_line: 1, num_lines: 3, total_lines: 3,
    bytes_read: Buffer.byteLength(body), total_bytes: Buffer.byteLength(body), next_offset: null, truncated: false,
  });
  const a = await read('/workspace/README.md');
  assert.equal(a.content, body);
  assert.equal(a.path, '/workspace/README.md', 'path is echoed as given');
  const n = await read('./data/../data/numbers.txt');
  assert.equal(n.content, '1\n2\n3\n');
});

h.test('file_read: offset/limit windows; limit 0 and 2001 are isError; 2000 is fine', async () => {
  const w = await read('data/numbers.txt', { offset: 2, limit: 1 });
  assert.equal(w.content, '2\n');
  assert.equal(w.start_line, 2);
  assert.equal(w.num_lines, 1);
  assert.equal(w.total_lines, 3);
  assert.equal(w.bytes_read, 2);
  assert.equal(w.total_bytes, 6);
  assert.equal(w.next_offset, 3);
  assert.equal(w.truncated, true);
  const last = await read('data/numbers.txt', { offset: 3, limit: 5 });
  assert.equal(last.content, '3\n');
  assert.equal(last.next_offset, null);
  assert.equal(last.truncated, false);
  for (const limit of [0, 2001, 100000]) {
    const t = await err('file_read', { path: 'README.md', limit });
    assert.match(t, /limit/, `limit ${limit}: ${t}`);
  }
  const ok = await read('README.md', { limit: 2000 });
  assert.equal(ok.num_lines, 3);
  // past the end: an empty window, not an error (documented choice)
  const past = await read('data/numbers.txt', { offset: 10 });
  assert.equal(past.num_lines, 0);
  assert.equal(past.content, '');
  assert.equal(past.next_offset, null);
  process.stdout.write(`# file_read offset 0 -> ${JSON.stringify(await h.mcp.call('file_read', { sandbox_id: SB, path: 'data/numbers.txt', offset: 0 }).then((r) => r.isError ? 'isError' : `start_line ${r.structuredContent.start_line}`))}\n`);
});

h.test('file_read: next_offset paging to the end of a 5000-line file (default and odd limits)', async () => {
  const lines = Array.from({ length: 5000 }, (_, i) => `line ${i + 1} ${'x'.repeat(i % 17)}`);
  const content = lines.join('\n') + '\n';
  const wr = await write('big/5000.txt', content);
  assert.equal(wr.type, 'create');
  assert.equal(wr.bytes_written, Buffer.byteLength(content));
  const wins = await pageAll('big/5000.txt');
  assert.deepEqual(wins.map((w) => [w.start_line, w.num_lines, w.next_offset]),
    [[1, 2000, 2001], [2001, 2000, 4001], [4001, 1000, null]]);
  for (const w of wins) {
    assert.equal(w.total_lines, 5000);
    assert.equal(w.total_bytes, Buffer.byteLength(content));
  }
  assert.equal(wins.map((w) => w.content).join(''), content);
  const odd = await pageAll('big/5000.txt', { limit: 777 });
  assert.equal(odd.length, Math.ceil(5000 / 777));
  assert.equal(odd.map((w) => w.content).join(''), content);
  assert.equal(odd.reduce((s, w) => s + w.bytes_read, 0), Buffer.byteLength(content));
});

h.test('file_read: a reply carries at most 52 KiB of escaped text; truncated windows continue with next_offset', async () => {
  const line = 'y'.repeat(199) + '\n'; // 200 bytes, 2000 lines = 400000 bytes
  const content = line.repeat(2000);
  await write('big/wide.txt', content);
  const wins = await pageAll('big/wide.txt');
  assert.ok(wins.length >= 5, `400 kB in ${wins.length} windows`);
  for (const w of wins) assert.ok(Buffer.byteLength(JSON.stringify(w.content)) <= 52 * 1024 + 2, `window of ${w.bytes_read} bytes`);
  assert.equal(wins[0].truncated, true);
  assert.ok(wins[0].num_lines < 2000);
  assert.equal(wins.map((w) => w.content).join(''), content);
  process.stdout.write(`# 2000 lines of 200 bytes came in ${wins.length} windows (${wins.map((w) => w.num_lines).join(', ')} lines)\n`);
});

h.test('file_read: a single line longer than 52 KiB is cut visibly and paging moves on', async () => {
  const e = await exec("head -c 200000 /dev/zero | tr '\\0' a > longline.txt && printf '\\nsecond\\n' >> longline.txt");
  assert.equal(e.status, 'ok', e.output);
  const first = await read('longline.txt', { offset: 1 });
  // The head of the overlong line, cut within the reply bound, reported as truncated
  // (docs/runtime-semantics.md: the rest of such a line is read with a command).
  assert.equal(first.start_line, 1);
  assert.equal(first.num_lines, 1);
  assert.equal(first.bytes_read, 52 * 1024, `bytes_read ${first.bytes_read}`);
  assert.equal(first.content, 'a'.repeat(first.bytes_read));
  assert.equal(first.truncated, true);
  assert.equal(first.next_offset, 2, 'paging always advances past a cut line');
  const second = await read('longline.txt', { offset: first.next_offset });
  assert.equal(second.content, 'second\n');
  assert.equal(second.next_offset, null);
  assert.equal(second.total_lines, 2);
});

h.test('file_write: a large content (over 1 MiB, under the documented 16 MiB) is written; above 16 MiB is isError, not a hang', async () => {
  const big = 'b'.repeat(3 * 1024 * 1024 - 1) + '\n';
  const w = await write('large/3mib.txt', big);
  assert.equal(w.bytes_written, big.length);
  const r = await read('large/3mib.txt', { limit: 1 });
  assert.equal(r.total_bytes, big.length);
  // 6 MiB: within the 16 MiB that file_write documents
  const six = 'c'.repeat(6 * 1024 * 1024);
  const t0 = Date.now();
  let res;
  try {
    res = await h.mcp.call('file_write', { sandbox_id: SB, path: 'large/6mib.txt', content: six }, { timeout: 15000 });
  } catch (e) {
    assert.fail(`file_write of 6 MiB (documented limit 16 MiB) got no answer in ${Date.now() - t0} ms: ${e.message}`);
  }
  assert.equal(res.isError, false, `file_write of 6 MiB failed: ${JSON.stringify(res.content)}`);
  assert.equal(res.structuredContent.bytes_written, six.length);
  // above the limit: a clear error
  let over;
  try {
    over = await h.mcp.call('file_write', { sandbox_id: SB, path: 'large/17mib.txt', content: 'd'.repeat(17 * 1024 * 1024) }, { timeout: 10000 });
  } catch (e) {
    assert.fail(`file_write of 17 MiB got no answer: ${e.message}`);
  }
  assert.equal(over.isError, true);
});

h.test('file_write: content with a lone UTF-16 surrogate (valid JSON, invalid Unicode) gets an answer', async () => {
  // JSON.stringify('x\ud800y') is the valid JSON text "x\ud800y"; the call must answer
  // (an isError result, or a write with U+FFFD), not leave the client waiting.
  let r;
  try {
    r = await h.mcp.call('file_write', { sandbox_id: SB, path: 'surrogate.txt', content: 'x\ud800y\n' }, { timeout: 8000 });
  } catch (e) {
    assert.fail(`file_write with a lone surrogate got no answer: ${e.message}`);
  }
  if (!r.isError) assert.equal((await read('surrogate.txt')).content, 'x\ufffdy\n');
});

h.test('file_read: missing, directory, fifo, non-UTF-8 and NUL-containing files are isError', async () => {
  const e = await exec("printf 'ok\\n\\377\\376 latin\\n' > bad.txt; printf 'a\\000b\\n' > nul.txt; mkfifo fifo; printf 'caf\\303\\251 \\342\\234\\223\\n' > good-utf8.txt");
  assert.equal(e.status, 'ok', e.output);
  assert.match(await err('file_read', { path: 'missing.txt' }), /missing\.txt/);
  assert.ok((await err('file_read', { path: 'src' })).length > 0);
  assert.ok((await err('file_read', { path: 'fifo' })).length > 0);
  const t = await err('file_read', { path: 'bad.txt' });
  assert.match(t, /utf-?8|text|binary/i, t);
  assert.ok((await err('file_read', { path: 'nul.txt' })).length > 0);
  const g = await read('good-utf8.txt');
  assert.equal(g.content, 'café ✓\n');
  assert.equal(g.bytes_read, Buffer.byteLength('café ✓\n'));
  // non-text files are refused by the other file tools too
  assert.ok((await err('file_edit', { path: 'bad.txt', edits: [{ old_string: 'ok', new_string: 'OK' }] })).length > 0);
  assert.ok((await err('file_blame', { path: 'bad.txt' })).length > 0);
  assert.ok((await err('file_blame', { path: 'src' })).length > 0);
  assert.match(await err('file_blame', { path: 'missing.txt' }), /not_found/);
});

h.test('file_write: create then update, bytes_written, publication by operation:<id>, parent dirs created', async () => {
  const body = 'héllo ✓\nsecond\n';
  const c = await write('new/deep/dir/file.txt', body);
  assert.equal(c.type, 'create');
  assert.equal(c.path, 'new/deep/dir/file.txt');
  assert.equal(c.bytes_written, Buffer.byteLength(body));
  assert.equal(c.publication.published, true);
  assert.ok(Number.isInteger(c.publication.layer));
  assert.match(c.publication.owner, /^operation:op-[0-9a-f]+$/);
  assert.ok(c.publication.changed_paths >= 1);
  const u = await write('/workspace/new/deep/dir/file.txt', 'replaced');
  assert.equal(u.type, 'update');
  assert.equal(u.bytes_written, 8);
  assert.ok(u.publication.layer > c.publication.layer);
  assert.notEqual(u.publication.owner, c.publication.owner, 'each operation has its own id');
  assert.equal((await read('new/deep/dir/file.txt')).content, 'replaced');
  const x = await exec('cat new/deep/dir/file.txt; echo; ls -ld new/deep/dir | cut -c1');
  assert.equal(x.output, 'replaced\nd\n');
  // an empty file is fine
  const z = await write('empty.txt', '');
  assert.equal(z.bytes_written, 0);
  const zr = await read('empty.txt');
  assert.equal(zr.total_lines, 0);
  assert.equal(zr.content, '');
  // a directory cannot be overwritten
  assert.ok((await err('file_write', { path: 'src', content: 'x' })).length > 0);
});

h.test('file_edit: ordered replacements, replace_all, counts and publication', async () => {
  await write('edit/a.txt', 'alpha beta\ngamma beta\ndelta\n');
  const r = await edit('edit/a.txt', [
    { old_string: 'alpha', new_string: 'ALPHA' },
    { old_string: 'beta', new_string: 'b', replace_all: true },
    { old_string: 'ALPHA b', new_string: 'first' }, // sees the result of the earlier edits
  ]);
  assert.equal(r.type, 'edit');
  assert.equal(r.edits_applied, 3);
  assert.equal(r.replacements, 4);
  const now = 'first\ngamma b\ndelta\n';
  assert.equal(r.bytes_written, Buffer.byteLength(now));
  assert.match(r.publication.owner, /^operation:op-/);
  assert.equal(r.publication.published, true);
  assert.equal((await read('edit/a.txt')).content, now);
  // multi-line old_string and deleting text
  const m = await edit('edit/a.txt', [{ old_string: 'gamma b\ndelta\n', new_string: '' }]);
  assert.equal(m.replacements, 1);
  assert.equal((await read('edit/a.txt')).content, 'first\n');
  assert.ok((await err('file_edit', { path: 'edit/none.txt', edits: [{ old_string: 'a', new_string: 'b' }] })).length > 0,
    'editing a missing file fails');
  assert.ok((await err('file_edit', { path: 'edit/a.txt', edits: [] })).length > 0, 'an empty edit list fails');
});

h.test('file_edit: empty, missing, ambiguous and no-op edits name the edit; nothing changes after a failing multi-edit', async () => {
  const body = 'one\nrepeat\nrepeat\nrepeat\nrepeat\ntwo\n';
  await write('edit/errs.txt', body);
  const before = await blame('edit/errs.txt');
  const layers = await layerCount();
  const cases = [
    [[{ old_string: 'one', new_string: 'ONE' }, { old_string: '', new_string: 'x' }], /edits\[1\]: old_string is empty/],
    [[{ old_string: 'absent', new_string: 'x' }, { old_string: 'one', new_string: 'ONE' }], /edits\[0\]: old_string not found in the file/],
    [[{ old_string: 'one', new_string: 'ONE' }, { old_string: 'two', new_string: 'TWO' }, { old_string: 'repeat', new_string: 'r' }],
      /edits\[2\]: old_string occurs 4 times; add context to make it unique or set replace_all/],
    [[{ old_string: 'two', new_string: 'two' }], /edits\[0\]: old_string and new_string are identical \(no-op\)/],
    // an earlier edit removes what a later one needs
    [[{ old_string: 'one\n', new_string: '' }, { old_string: 'one', new_string: 'x' }], /edits\[1\]: old_string not found/],
  ];
  for (const [edits, re] of cases) {
    const t = await err('file_edit', { path: 'edit/errs.txt', edits });
    assert.match(t, re);
    assert.equal((await read('edit/errs.txt')).content, body, `file changed after failing edits ${JSON.stringify(edits)}`);
  }
  assert.deepEqual(await blame('edit/errs.txt'), before, 'attribution changed after failing edits');
  assert.equal(await layerCount(), layers, 'a failing edit published a layer');
  // replace_all makes the ambiguous one fine
  const ok = await edit('edit/errs.txt', [{ old_string: 'repeat', new_string: 'r', replace_all: true }]);
  assert.equal(ok.replacements, 4);
  // a replace_all no-op and a replace_all of a missing string also fail
  assert.match(await err('file_edit', { path: 'edit/errs.txt', edits: [{ old_string: 'r', new_string: 'r', replace_all: true }] }), /edits\[0\]/);
  assert.match(await err('file_edit', { path: 'edit/errs.txt', edits: [{ old_string: 'zzz', new_string: 'y', replace_all: true }] }), /edits\[0\]: old_string not found/);
});

h.test('CRLF file: read keeps CR LF, edit, blame counts lines', async () => {
  const crlf = 'first\r\nsecond\r\nthird\r\n';
  const w = await write('crlf.txt', crlf);
  const r = await read('crlf.txt');
  assert.equal(r.content, crlf);
  assert.equal(r.total_lines, 3);
  assert.equal(r.bytes_read, Buffer.byteLength(crlf));
  const w2 = await read('crlf.txt', { offset: 2, limit: 1 });
  assert.equal(w2.content, 'second\r\n');
  const e = await edit('crlf.txt', [{ old_string: 'second\r\n', new_string: 'SECOND\r\n' }]);
  assert.equal((await read('crlf.txt')).content, 'first\r\nSECOND\r\nthird\r\n');
  const b = await blame('crlf.txt');
  checkTiling(b.ranges, 3);
  assert.deepEqual(ownersPerLine(b.ranges).slice(1), [w.publication.owner, e.publication.owner, w.publication.owner]);
});

h.test('file without a final newline: read, edit of the last line, blame', async () => {
  const body = 'x\ny\nz';
  const w = await write('nonl.txt', body);
  const r = await read('nonl.txt');
  assert.equal(r.content, body);
  assert.equal(r.total_lines, 3);
  assert.equal(r.total_bytes, 5);
  assert.equal((await read('nonl.txt', { offset: 3 })).content, 'z');
  const e = await edit('nonl.txt', [{ old_string: 'z', new_string: 'Z' }]);
  assert.equal((await read('nonl.txt')).content, 'x\ny\nZ');
  let b = await blame('nonl.txt');
  checkTiling(b.ranges, 3);
  assert.deepEqual(ownersPerLine(b.ranges).slice(1), [w.publication.owner, w.publication.owner, e.publication.owner]);
  // adding the final newline changes the last line only
  const e2 = await edit('nonl.txt', [{ old_string: 'Z', new_string: 'Z\n' }]);
  assert.equal((await read('nonl.txt')).total_lines, 3);
  b = await blame('nonl.txt');
  checkTiling(b.ranges, 3);
  assert.deepEqual(ownersPerLine(b.ranges).slice(1), [w.publication.owner, w.publication.owner, e2.publication.owner]);
});

h.test('session-scoped write/edit/read: visible in the session, invisible in the snapshot until finalize', async () => {
  const s = await sc('create_workspace_session', {});
  const ws = s.workspace_session_id;
  const w = await write('sess/new.txt', 'in session\n', { workspace_session_id: ws });
  assert.equal(w.type, 'create');
  assert.equal(w.bytes_written, 11);
  assert.ok(w.publication === undefined || w.publication === null, `a session-scoped write publishes nothing: ${JSON.stringify(w.publication)}`);
  const e = await edit('README.md', [{ old_string: '# fixture', new_string: '# session fixture' }], { workspace_session_id: ws });
  assert.equal(e.edits_applied, 1);
  assert.ok(e.publication === undefined || e.publication === null);
  // the session sees its changes: file_read and a command in the session
  assert.equal((await read('sess/new.txt', { workspace_session_id: ws })).content, 'in session\n');
  assert.match((await read('README.md', { workspace_session_id: ws })).content, /^# session fixture\n/);
  const c = await exec('cat sess/new.txt; head -1 README.md; echo more >> sess/new.txt', { workspace_session_id: ws });
  assert.equal(c.output, 'in session\n# session fixture\n');
  // a command's change is seen by file_read in the session
  assert.equal((await read('sess/new.txt', { workspace_session_id: ws })).content, 'in session\nmore\n');
  // the snapshot does not
  assert.match(await err('file_read', { path: 'sess/new.txt' }), /no such file|not found/i);
  assert.equal((await read('README.md')).content.split('\n')[0], '# fixture');
  const auto = await exec('test -e sess/new.txt && echo visible || echo invisible; head -1 README.md');
  assert.equal(auto.output, 'invisible\n# fixture\n');
  assert.match(await err('file_blame', { path: 'sess/new.txt' }), /not_found/);
  // finalize: now published
  const f = await sc('finalize_workspace_session', { workspace_session_id: ws, action: 'publish' });
  assert.equal(f.action, 'published');
  assert.equal(f.publication.published, true);
  assert.equal(f.publication.owner, `workspace_session:${ws}`);
  assert.equal((await read('sess/new.txt')).content, 'in session\nmore\n');
  assert.equal((await read('README.md')).content.split('\n')[0], '# session fixture');
  const b = await blame('sess/new.txt');
  assert.deepEqual(b.ranges, [{ start_line: 1, line_count: 2, owner: `workspace_session:${ws}` }]);
  // the finalized session cannot be used any more
  assert.ok((await err('file_read', { path: 'README.md', workspace_session_id: ws })).length > 0);
  assert.ok((await err('file_write', { path: 'x.txt', content: 'x', workspace_session_id: ws })).length > 0);
});

h.test('session-scoped file tools inside an automatic session that is still running', async () => {
  const a = await exec('echo from-cmd > auto-sess.txt; sleep 2', { yield_time_ms: 300 });
  assert.equal(a.status, 'running');
  const ws = a.workspace_session_id;
  assert.equal((await read('auto-sess.txt', { workspace_session_id: ws })).content, 'from-cmd\n');
  await edit('auto-sess.txt', [{ old_string: 'from-cmd', new_string: 'edited' }], { workspace_session_id: ws });
  assert.match(await err('file_read', { path: 'auto-sess.txt' }), /no such file|not found/i);
  await waitDone(h.mcp, SB, a.command_session_id);
  assert.equal((await read('auto-sess.txt')).content, 'edited\n');
});

h.test('read_command_lines says an automatic command is done only once its changes are published', async () => {
  // 3,000 files publish off sbxd's loop for a while after the command ended
  const a = await exec('mkdir pubwait && for i in $(seq 3000); do echo $i > pubwait/f$i; done; echo last > pubwait/last.txt',
    { yield_time_ms: 0 });
  const done = await waitDone(h.mcp, SB, a.command_session_id);
  assert.equal(done.status, 'ok');
  assert.equal((await read('pubwait/last.txt')).content, 'last\n');
});

h.test('a trailing slash names a directory (as in POSIX): no file is read or created through "name/"', async () => {
  const w = await h.mcp.call('file_write', { sandbox_id: SB, path: 'slashdir/', content: 'q' });
  assert.equal(w.isError, true, `file_write "slashdir/" created ${JSON.stringify(w.structuredContent)}`);
  const r = await h.mcp.call('file_read', { sandbox_id: SB, path: 'README.md/' });
  assert.equal(r.isError, true, 'file_read "README.md/" read a regular file');
});

h.test('unknown workspace_session_id is isError for every file tool', async () => {
  const bogus = 'ws-000000000000';
  assert.ok((await err('file_read', { path: 'README.md', workspace_session_id: bogus })).length > 0);
  assert.ok((await err('file_write', { path: 'x.txt', content: 'x', workspace_session_id: bogus })).length > 0);
  assert.ok((await err('file_edit', { path: 'README.md', edits: [{ old_string: 'fixture', new_string: 'f' }], workspace_session_id: bogus })).length > 0);
  assert.match(await err('file_read', { path: 'x.txt' }), /no such file|not found/i);
});
