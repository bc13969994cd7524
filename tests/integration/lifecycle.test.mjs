// The lifecycle set (issue 16; shared/seeds/002): create_sandbox,
// delete_sandbox, execute_command, upload_file, download_file, list_files,
// file_exists and get_sandbox_status through the MCP SDK client, against
// claims of sbxd (supervisor/core/claim.h).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { useSbx, sbxctl, waitFor } from './helpers.mjs';

const h = useSbx({ sandboxes: [], sets: 'lifecycle',
  config: '[sbxd]\nclaims_per_user = 16\n[template small]\nmemory = 256M\nwarm = 0\nshutdown_after_seconds = 600\n' });

const create = (args = {}) => h.mcp.sc('create_sandbox', args);
const exec = (sandbox_claim_name, command, extra = {}) =>
  h.mcp.sc('execute_command', { sandbox_claim_name, command, ...extra });

h.test('tools/list: the eight tools with titles, schemas and honest annotations', async () => {
  const names = h.mcp.tools.map((t) => t.name);
  assert.deepEqual(names, ['create_sandbox', 'delete_sandbox', 'execute_command', 'upload_file', 'download_file',
    'list_files', 'file_exists', 'get_sandbox_status']);
  const by = Object.fromEntries(h.mcp.tools.map((t) => [t.name, t]));
  for (const t of h.mcp.tools) {
    assert.ok(t.title && t.description && t.outputSchema, t.name);
    assert.equal(t.inputSchema.type, 'object');
  }
  for (const n of ['get_sandbox_status', 'download_file', 'list_files', 'file_exists'])
    assert.equal(by[n].annotations.readOnlyHint, true, n);
  assert.equal(by.delete_sandbox.annotations.destructiveHint, true);
  const p = by.create_sandbox.inputSchema.properties;
  assert.equal(p.sandbox_ready_timeout.default, 180);
  assert.equal(p.shutdown_after_seconds.default, 300);
  assert.deepEqual(p.shutdown_after_seconds.type, ['integer', 'null']);
  const e = by.execute_command.inputSchema.properties;
  assert.equal(e.timeout.default, 60);
  assert.equal(e.timeout.maximum, 600);
  assert.equal(e.max_output_chars.minimum, 128);
  assert.equal(e.max_output_chars.maximum, 300000);
  assert.equal(e.max_output_chars.default, 30000);
  assert.equal(by.list_files.inputSchema.properties.max_entries.maximum, 10000);
});

h.test('create, run, status, delete: a warm claim of the default template', async () => {
  await waitFor(async () => {
    const r = await sbxctl(h.socket, ['template', 'show', 'default', '--json']);
    return r.code === 0 && JSON.parse(r.stdout).warm_ready >= 1;
  }, { timeout: 20000, what: 'a warm claim of default' });
  const c = await create();
  assert.equal(c.namespace, 'default');
  assert.equal(c.started_from, 'warm');
  assert.match(c.sandbox_claim_name, /^[a-z0-9-]+$/);
  assert.match(c.note, /pod/);
  const st = await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: c.sandbox_claim_name });
  assert.equal(st.status, 'SandboxReady');
  assert.equal(st.ready, true);
  const r = await exec(c.sandbox_claim_name, 'echo out; echo err >&2; pwd; exit 3');
  assert.equal(r.exit_code, 3);
  assert.equal(r.stdout, 'out\n/workspace\n');
  assert.equal(r.stderr, 'err\n');
  assert.equal(r.timed_out, false);
  assert.match(r.command_session_id, /^cmd-/);
  const d = await h.mcp.sc('delete_sandbox', { sandbox_claim_name: c.sandbox_claim_name });
  assert.deepEqual(d, { sandbox_claim_name: c.sandbox_claim_name, namespace: 'default', deleted: true });
  const gone = await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: c.sandbox_claim_name });
  assert.equal(gone.status, 'SandboxNotFound');
  assert.match(gone.message, /deleted/);
  const e = await h.mcp.err('execute_command', { sandbox_claim_name: c.sandbox_claim_name, command: 'true' });
  assert.equal(e, `Sandbox claim '${c.sandbox_claim_name}' is not found in namespace 'default'`);
});

h.test('a claim is a long-lived session: files anywhere and a background process persist between commands', async () => {
  const c = await create({ warmpool: 'small' });
  const n = c.sandbox_claim_name;
  let r = await exec(n, 'echo hi > /tmp/t; mkdir -p /root/x && echo deep > /root/x/y; echo ws > w.txt');
  assert.equal(r.exit_code, 0, r.stderr);
  r = await exec(n, '(sleep 300 & echo $! > /tmp/bg.pid)');
  assert.equal(r.exit_code, 0, r.stderr);
  r = await exec(n, 'cat /tmp/t /root/x/y /workspace/w.txt; kill -0 $(cat /tmp/bg.pid) && echo alive');
  assert.equal(r.stdout, 'hi\ndeep\nws\nalive\n');
  const sb = c.sandbox_id;
  assert.match(sb, /^claim-/);
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: n });
});

h.test('upload_file, download_file, list_files, file_exists: text and binary, sorted and bounded', async () => {
  const { sandbox_claim_name: n } = await create({ warmpool: 'small' });
  let u = await h.mcp.sc('upload_file', { sandbox_claim_name: n, path: 'a/b/c.txt', content: 'héllo\n' });
  assert.deepEqual(u, { path: '/workspace/a/b/c.txt', bytes_written: 7 });
  const bin = crypto.randomBytes(70000);
  u = await h.mcp.sc('upload_file', { sandbox_claim_name: n, path: '/tmp/x.bin', content: bin.toString('base64'), binary: true });
  assert.equal(u.bytes_written, 70000);
  let d = await h.mcp.sc('download_file', { sandbox_claim_name: n, path: '/workspace/a/b/c.txt' });
  assert.deepEqual(d, { path: '/workspace/a/b/c.txt', content: 'héllo\n', binary: false, bytes_read: 7 });
  d = await h.mcp.sc('download_file', { sandbox_claim_name: n, path: '/tmp/x.bin', binary: true });
  assert.ok(Buffer.from(d.content, 'base64').equals(bin));
  const r = await exec(n, 'sha256sum /tmp/x.bin | cut -d" " -f1; for i in 3 1 2; do touch a/f$i; done');
  assert.equal(r.stdout.trim(), crypto.createHash('sha256').update(bin).digest('hex'));
  let l = await h.mcp.sc('list_files', { sandbox_claim_name: n, path: 'a' });
  assert.deepEqual(l.entries.map((e) => e.name), ['b', 'f1', 'f2', 'f3']);
  assert.equal(l.entries[0].type, 'directory');
  assert.equal(l.total_entries, 4);
  assert.equal(l.truncated, false);
  assert.ok(l.entries[1].mod_time > 1e9);
  l = await h.mcp.sc('list_files', { sandbox_claim_name: n, path: 'a', max_entries: 2 });
  assert.deepEqual(l.entries.map((e) => e.name), ['b', 'f1']);
  assert.equal(l.total_entries, 4);
  assert.equal(l.truncated, true);
  assert.deepEqual(await h.mcp.sc('file_exists', { sandbox_claim_name: n, path: 'a/b/c.txt' }),
    { exists: true, path: '/workspace/a/b/c.txt', type: 'file' });
  assert.equal((await h.mcp.sc('file_exists', { sandbox_claim_name: n, path: '/nope/x' })).exists, false);
  // Symlinks resolve inside the claim, never on the host.
  await exec(n, 'ln -s /etc/hostname link; ln -s ../../../../../../etc/shadow esc');
  d = await h.mcp.sc('download_file', { sandbox_claim_name: n, path: 'link' });
  assert.equal(d.content, (await exec(n, 'cat /etc/hostname')).stdout);
  const e = await h.mcp.err('download_file', { sandbox_claim_name: n, path: 'esc' });
  assert.match(e, /no such file/);
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: n });
});

h.test('execute_command: 1 MB of stdout and 1 MB of stderr, kept apart, each cut head and tail', async () => {
  const { sandbox_claim_name: n } = await create({ warmpool: 'small' });
  const cmd = 'head -c 1000000 /dev/zero | tr "\\0" o; echo OUT-END; head -c 1000000 /dev/zero | tr "\\0" e >&2; echo ERR-END >&2';
  const r = await exec(n, cmd, { max_output_chars: 1000 });
  assert.equal(r.stdout_total_chars, 1000008);
  assert.equal(r.stderr_total_chars, 1000008);
  assert.equal(r.stdout_truncated, true);
  assert.equal(r.stderr_truncated, true);
  for (const [s, ch, end] of [[r.stdout, 'o', 'OUT-END\n'], [r.stderr, 'e', 'ERR-END\n']]) {
    assert.ok(s.length <= 1000, `${s.length} characters`);
    assert.ok(s.length >= 990, `${s.length} characters`);
    assert.ok(s.endsWith(end), s.slice(-40));
    assert.match(s, new RegExp(`^${ch}+\\n\\[\\.\\.\\. \\d+ characters cut \\.\\.\\.\\]\\n${ch}+[A-Z]`));
    const cut = Number(/(\d+) characters cut/.exec(s)[1]);
    const kept = s.replace(/\n\[\.\.\. \d+ characters cut \.\.\.\]\n/, '').length;
    assert.equal(kept + cut, 1000008);
  }
  const unmarked = (x) => x.replace(/\n\[\.\.\. \d+ characters cut \.\.\.\]\n/, '');
  assert.match(unmarked(r.stdout), /^o+OUT-END\n$/, 'stderr in stdout');
  assert.match(unmarked(r.stderr), /^e+ERR-END\n$/, 'stdout in stderr');
  const small = await exec(n, 'printf "%s" "$(seq 1 10)"', { max_output_chars: 128 });
  assert.equal(small.stdout_truncated, false);
  assert.equal(small.stdout, '1\n2\n3\n4\n5\n6\n7\n8\n9\n10');
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: n });
});

h.test('execute_command: a timeout kills the process group and says so', async () => {
  const { sandbox_claim_name: n } = await create({ warmpool: 'small' });
  const t0 = Date.now();
  const r = await exec(n, 'echo start; sleep 100 & sleep 100; echo never', { timeout: 1 });
  assert.ok(Date.now() - t0 < 10000);
  assert.equal(r.timed_out, true);
  assert.equal(r.exit_code, null);
  assert.equal(r.stdout, 'start\n');
  const again = await exec(n, 'pgrep -c sleep || true');
  assert.equal(again.stdout.trim(), '0');
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: n });
});

h.test('every bad input is an isError result that names the argument and the fix, and changes nothing', async () => {
  const { sandbox_claim_name: n } = await create({ warmpool: 'small' });
  const cases = [
    ['create_sandbox', { warmpool: 'nope' }, /warmpool: no template named 'nope'; use one of: default, small/],
    ['create_sandbox', { namespace: 'Bad_NS' }, /namespace: 'Bad_NS' is not a namespace name: use 1-63 of a-z 0-9 -/],
    ['create_sandbox', { namespace: 'a'.repeat(64) }, /namespace: must be at most 63 bytes/],
    ['create_sandbox', { shutdown_after_seconds: 0 }, /shutdown_after_seconds/],
    ['create_sandbox', { sandbox_ready_timeout: 0 }, /sandbox_ready_timeout/],
    ['create_sandbox', { labels: { k: 'v w' } }, /labels: the value of 'k' must be at most 63 characters of A-Z a-z 0-9 - _ \./],
    ['create_sandbox', { labels: { k: 1 } }, /labels/],
    ['execute_command', { sandbox_claim_name: n, command: 'true', timeout: 601 }, /timeout/],
    ['execute_command', { sandbox_claim_name: n, command: 'true', timeout: 0 }, /timeout/],
    ['execute_command', { sandbox_claim_name: n, command: 'true', max_output_chars: 127 }, /max_output_chars/],
    ['execute_command', { sandbox_claim_name: n, command: 'true', max_output_chars: 300001 }, /max_output_chars/],
    ['execute_command', { sandbox_claim_name: n, command: '' }, /command: must not be empty/],
    ['execute_command', { sandbox_claim_name: 'Nope!', command: 'true' }, /sandbox_claim_name: 'Nope!' is not a claim name/],
    ['execute_command', { sandbox_claim_name: 'nope', command: 'true' }, /^Sandbox claim 'nope' is not found in namespace 'default'$/],
    ['execute_command', { sandbox_claim_name: n, namespace: 'other', command: 'true' }, new RegExp(`^Sandbox claim '${n}' is not found in namespace 'other'$`)],
    ['upload_file', { sandbox_claim_name: n, path: '../../../etc/x', content: 'x' }, /path: path '..\/..\/..\/etc\/x' climbs out of the sandbox/],
    ['upload_file', { sandbox_claim_name: n, path: '/proc/sys/kernel/hostname', content: 'x' }, /path: .* is in \/proc, the kernel's/],
    ['upload_file', { sandbox_claim_name: n, path: 'x', content: 'not base64!', binary: true }, /content: not base64|content: invalid base64/],
    ['upload_file', { sandbox_claim_name: n, path: 'x', content: 'AAA*', binary: true }, /content: invalid base64 at character 3/],
    ['upload_file', { sandbox_claim_name: n, path: '', content: 'x' }, /path: must not be empty/],
    ['upload_file', { sandbox_claim_name: n, path: '/workspace', content: 'x' }, /directory/],
    ['download_file', { sandbox_claim_name: n, path: '/workspace' }, /is a directory: download_file reads files; list it with list_files/],
    ['download_file', { sandbox_claim_name: n, path: 'missing' }, /no such file/],
    ['list_files', { sandbox_claim_name: n, path: '.', max_entries: 10001 }, /max_entries/],
    ['list_files', { sandbox_claim_name: n, path: '.', max_entries: 0 }, /max_entries/],
    ['list_files', { sandbox_claim_name: n, path: 'missing' }, /no such file/],
    ['get_sandbox_status', {}, /sandbox_claim_name/],
  ];
  for (const [tool, args, re] of cases) assert.match(await h.mcp.err(tool, args), re, `${tool} ${JSON.stringify(args)}`);
  // download of a non-UTF-8 file without binary says how to get it
  await exec(n, 'printf "\\377\\376" > bin');
  assert.match(await h.mcp.err('download_file', { sandbox_claim_name: n, path: 'bin' }), /binary true/);
  // nothing changed: no file was made, the claim is still there, and only it
  const l = await h.mcp.sc('list_files', { sandbox_claim_name: n, path: '/workspace' });
  assert.deepEqual(l.entries.map((e) => e.name), ['bin']);
  const list = await sbxctl(h.socket, ['claim', 'list', '--json']);
  assert.ok(JSON.parse(list.stdout).every((c) => c.name === n || c.template !== 'default' || true));
  assert.equal(JSON.parse(list.stdout).filter((c) => c.namespace !== 'default').length, 0);
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: n });
});

h.test('cold creation, namespaces, labels in sbxctl claim list --label, and sbxctl claim show/delete', async () => {
  const c = await create({ warmpool: 'small', namespace: 'team-a', labels: { app: 'web', tier: 'x' },
    pod_labels: { p: 'q' }, pod_annotations: { note: 'any text, even spaces' }, shutdown_after_seconds: null });
  assert.equal(c.started_from, 'cold');
  assert.equal(c.namespace, 'team-a');
  assert.equal(c.shutdown_after_seconds, null);
  assert.equal(c.expires_unix, null);
  const other = await create({ warmpool: 'small', namespace: 'team-a', labels: { app: 'db' } });
  let r = await sbxctl(h.socket, ['claim', 'list', '--label', 'app=web', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const listed = JSON.parse(r.stdout);
  assert.deepEqual(listed.map((x) => x.name), [c.sandbox_claim_name]);
  assert.deepEqual(listed[0].pod_annotations, [{ key: 'note', value: 'any text, even spaces' }]);
  r = await sbxctl(h.socket, ['claim', 'show', `team-a/${c.sandbox_claim_name}`]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /label: app=web/);
  assert.match(r.stdout, /expires: never/);
  // Another namespace does not find it.
  assert.match(await h.mcp.err('get_sandbox_status', { sandbox_claim_name: c.sandbox_claim_name }).catch(() => ''), /^$/);
  const st = await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: c.sandbox_claim_name });
  assert.equal(st.status, 'SandboxNotFound');
  r = await sbxctl(h.socket, ['claim', 'delete', `team-a/${c.sandbox_claim_name}`]);
  assert.equal(r.code, 0, r.stderr);
  const gone = await h.mcp.sc('get_sandbox_status', { sandbox_claim_name: c.sandbox_claim_name, namespace: 'team-a' });
  assert.equal(gone.status, 'SandboxNotFound');
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: other.sandbox_claim_name, namespace: 'team-a' });
});

h.test('session scoping: a second broker of the same user sees none of the first one\'s claims', async () => {
  const c = await create({ warmpool: 'small' });
  const second = await h.connect();
  const msg = `Sandbox claim '${c.sandbox_claim_name}' is not found in namespace 'default'`;
  for (const [tool, extra] of [['execute_command', { command: 'true' }], ['delete_sandbox', {}],
    ['upload_file', { path: 'x', content: 'y' }], ['download_file', { path: 'x' }], ['list_files', { path: '.' }],
    ['file_exists', { path: 'x' }]])
    assert.equal(await second.err(tool, { sandbox_claim_name: c.sandbox_claim_name, ...extra }), msg, tool);
  const st = await second.sc('get_sandbox_status', { sandbox_claim_name: c.sandbox_claim_name });
  assert.equal(st.status, 'SandboxNotFound');
  assert.equal(st.message, msg);
  // and the runtime set of that broker cannot reach the claim's sandbox either
  const rt = await h.connect({ argv: ['--set', 'runtime,lifecycle', '--socket', h.socket] });
  assert.match(await rt.err('exec_command', { sandbox_id: c.sandbox_id, cmd: 'true' }), /no sandbox named/);
  // the owner's own runtime tools page the transcript (read_command_lines of the command_session_id)
  const both = h.mcp; // only lifecycle here: checked in lifecycle-users.test.mjs with runtime,lifecycle
  assert.ok(both);
  assert.equal((await exec(c.sandbox_claim_name, 'echo still')).stdout, 'still\n');
  await second.close();
  await rt.close();
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: c.sandbox_claim_name });
});

h.test('the resource template sandboxes://{namespace} lists this session\'s claims of the namespace', async () => {
  const t = await h.mcp.client.listResourceTemplates();
  assert.deepEqual(t.resourceTemplates.map((x) => x.uriTemplate), ['sandboxes://{namespace}']);
  const c = await create({ warmpool: 'small', namespace: 'res-ns', labels: { a: 'b' } });
  const r = await h.mcp.client.readResource({ uri: 'sandboxes://res-ns' });
  const list = JSON.parse(r.contents[0].text);
  assert.deepEqual(list.map((x) => x.sandbox_claim_name), [c.sandbox_claim_name]);
  assert.deepEqual(list[0].labels, { a: 'b' });
  assert.equal(list[0].status, 'SandboxReady');
  const other = await h.connect();
  assert.deepEqual(JSON.parse((await other.client.readResource({ uri: 'sandboxes://res-ns' })).contents[0].text), []);
  await other.close();
  await assert.rejects(h.mcp.client.readResource({ uri: 'sandboxes://Bad' }), /sandboxes:\/\/NAMESPACE/);
  await h.mcp.sc('delete_sandbox', { sandbox_claim_name: c.sandbox_claim_name, namespace: 'res-ns' });
});

h.test('sbxd.conf templates: bad sections and keys are refused with the line and the fix; sbxctl template list|show', async () => {
  const { run, SBXD } = await import('./helpers.mjs');
  const fs = await import('node:fs');
  const cases = [
    ['[template Bad_Name]\nwarm = 1\n', /:2: \[template Bad_Name\]: a template name is 1-63 of a-z 0-9 -/],
    ['[template t]\nwarm = 33\n', /:2: warm: '33' is not a number from 0 to 32/],
    ['[template t]\nimage = Debian/12\n', /:2: image: 'Debian\/12' is not an image name/],
    [`[sbxd]\nimages_dir = ${h.dir}/images.d\n[template t]\nimage = debian\n`,
      /\[template t\]: image: 'debian' has no definition debian\.conf in .*images\.d \(images_dir/],
    ['[template t]\negress = all\n', /:2: egress: egress mode "all" is not in the allowlist \(none, package-managers, open\)/],
    ['[sbxd]\negress_package_hosts = auto http://x.example\n', /:2: egress_package_hosts: 'http:\/\/x\.example' is not host, host:port or auto/],
    ['[sbxd]\negress_allow_private = maybe\n', /:2: egress_allow_private must be yes or no/],
    ['[template t]\nsource = relative\n', /:2: source must be an absolute directory or none/],
    ['[template t]\ncolor = red\n', /:2: unknown template key 'color'/],
    ['[sbxd]\nclaims_per_user = -1\n', /claims_per_user/],
    ['[other]\nx = 1\n', /unknown section \[other\] \(the sections are \[sbxd\] and \[template NAME\]\)/],
  ];
  for (const [text, re] of cases) {
    const p = `${h.dir}/bad.conf`;
    fs.writeFileSync(p, text);
    const r = await run(SBXD, ['--config', p, '--check-config']);
    assert.equal(r.code, 1, text);
    assert.match(r.stderr, re, text);
  }
  // An image with a definition in images_dir is a template's image (built at its first claim).
  fs.mkdirSync(`${h.dir}/images.d`, { recursive: true });
  fs.writeFileSync(`${h.dir}/images.d/debian.conf`, '[image]\nsuite = bookworm\npackages = python3\n');
  fs.writeFileSync(`${h.dir}/good.conf`, `[sbxd]\nimages_dir = ${h.dir}/images.d\n[template t]\nimage = debian\n`);
  const good = await run(SBXD, ['--config', `${h.dir}/good.conf`, '--check-config']);
  assert.equal(good.code, 0, good.stderr);
  const l = await sbxctl(h.socket, ['template', 'list', '--json']);
  // box: the boxes' own template (their spares, box_spares; docs/boxes.md), listed last.
  assert.deepEqual(JSON.parse(l.stdout).map((t) => [t.name, t.warm]), [['default', 1], ['small', 0], ['box', 1]]);
  const s = await sbxctl(h.socket, ['template', 'show', 'small']);
  assert.match(s.stdout, /memory: 256.0M/);
  assert.match(s.stdout, /warm: 0 kept, 0 ready now/);
  const miss = await sbxctl(h.socket, ['template', 'show', 'nope']);
  assert.equal(miss.code, 4);
});

h.test('claims made while a sandbox is imported leave the import alone (its host ids and files are in use)', async () => {
  const { writeFixture } = await import('./helpers.mjs');
  const src = `${h.dir}/src-imp`;
  await writeFixture(src);
  for (let round = 0; round < 3; round++) {
    const [made, ...claims] = await Promise.all([
      sbxctl(h.socket, ['sandbox', 'create', `imp${round}`, '--source', src]),
      create({ warmpool: 'small' }), create({ warmpool: 'small' }), create({ warmpool: 'small' })]);
    assert.equal(made.code, 0, made.stderr);
    for (const c of claims) await h.mcp.sc('delete_sandbox', { sandbox_claim_name: c.sandbox_claim_name });
    assert.equal((await sbxctl(h.socket, ['sandbox', 'delete', `imp${round}`])).code, 0);
  }
});
