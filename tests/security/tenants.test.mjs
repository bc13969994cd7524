// The isolation battery, part 3 (issue 13, items 3 to 6): what one sandbox
// shares with the host and with other sandboxes through the kernel. Per-user
// kernel budgets, host ids, host information in /proc and statfs, the
// kernel's device events, and the inodes of the host's /usr. Each test makes
// the attempt from inside a sandbox and checks the host and another sandbox.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { outputLines, waitDone, waitFor, run, sbxctl, hostProcsMatching, sandboxDir, T } from '../integration/helpers.mjs';
import { useBattery, probeResults, assertFailed, PROBE, PROBE_HOST } from './common.mjs';

const { h, test } = useBattery({ sandboxes: [{ name: 'a' }, { name: 'b' }] });
let client = null; // a client of its own after sbxd restarts
const mcp = () => client ?? h.mcp;
const exec = (sandbox_id, cmd, extra = {}) =>
  mcp().sc('exec_command', { sandbox_id, cmd, timeout_ms: 60000, yield_time_ms: 20000, ...extra });
const read = (sandbox_id, command_session_id) =>
  mcp().sc('read_command_lines', { sandbox_id, command_session_id, start_offset: 0, limit: 1000 });
async function restart(fn = async () => {}) {
  await h.sbxd.stop();
  await fn();
  await h.sbxd.start();
  client = await h.connect();
}

/* Start a probe that prints `ready` and then waits for a line on stdin;
 * returns its command and its output so far. */
async function startHolding(sandbox_id, cmd, ready) {
  const r = await exec(sandbox_id, cmd, { yield_time_ms: 300 });
  let out = r.output;
  await waitFor(async () => {
    const sc = await read(sandbox_id, r.command_session_id);
    out = sc.output;
    if (sc.status !== 'running' && !out.includes(ready)) throw new Error(`${cmd} ended: ${JSON.stringify(sc)}`);
    return out.includes(ready);
  }, { timeout: 60000, interval: 100, what: `"${ready}" from ${cmd}` });
  return { id: r.command_session_id, out };
}

async function release(sandbox_id, id) {
  await mcp().sc('write_command_stdin', { sandbox_id, command_session_id: id, stdin: '\n', yield_time_ms: 0 });
  const done = await waitDone(mcp(), sandbox_id, id, { timeout: 60000 });
  assert.equal(done.status, 'ok', JSON.stringify(done));
  return done.output;
}

/* The host ids of a sandbox, from inside: "0 BASE COUNT" of its maps. */
async function hostIds(sandbox_id) {
  const r = await exec(sandbox_id, 'cat /proc/self/uid_map /proc/self/gid_map');
  const maps = outputLines(r).map((l) => l.trim().split(/\s+/).map(Number));
  assert.equal(maps.length, 2, r.output);
  assert.deepEqual(maps[0], maps[1], `uid and gid maps differ: ${r.output}`);
  assert.equal(maps[0][0], 0, r.output);
  return { base: maps[0][1], count: maps[0][2] };
}

const sysUser = (name) => Number(fs.readFileSync(`/proc/sys/user/${name}`, 'utf8'));
const BUDGET_FDS = 1024; // what the probe opens at most of one kind

test('per-user kernel budgets: a sandbox that spends all of its own leaves host root and other sandboxes theirs', async (t) => {
  if (sysUser('max_inotify_instances') >= BUDGET_FDS || sysUser('max_fanotify_groups') >= BUDGET_FDS) {
    t.skip(`this host allows ${BUDGET_FDS} or more inotify or fanotify instances per user: more than a command may open`);
    return;
  }
  const spend = await startHolding('a', `${PROBE} budgets-spend ${sysUser('max_inotify_watches')} ${sysUser('max_fanotify_marks')}`,
    'holding\n');
  let host, other;
  try {
    host = probeResults((await run(PROBE_HOST, ['budgets', h.dir])).stdout);
    other = probeResults((await exec('b', `${PROBE} budgets /tmp`)).output);
  } finally {
    await release('a', spend.id);
  }
  const spent = probeResults(spend.out);
  process.stdout.write(`# sandbox a spent: ${JSON.stringify(Object.fromEntries(spent))}\n`);
  // The attack worked: each budget the sandbox can use, it used up (mq_open
  // may meet the queue count of its own ipc namespace first, ENOSPC, where
  // RLIMIT_MSGQUEUE was raised; sigqueue a bound of the probe on a big host).
  for (const [what, limit] of [['inotify_init1', 'EMFILE'], ['inotify_add_watch', 'ENOSPC'], ['mq_open', 'EMFILE|ENOSPC'],
    ['sigqueue', 'EAGAIN|no limit met'], ['fanotify_init', 'EMFILE'], ['fanotify_mark', 'ENOSPC']]) {
    assert.match(spent.get(what) ?? '', new RegExp(`^\\d+ held \\((${limit})\\)$`), `${what}: ${spend.out}`);
  }
  for (const [who, res] of [['host root', host], ['sandbox b', other]]) {
    for (const what of ['inotify_init1', 'inotify_add_watch', 'fanotify_init', 'fanotify_mark', 'mq_open', 'sigqueue']) {
      assert.equal(res.get(what), 'ok', `${what} failed for ${who} while sandbox a held its budgets: ${JSON.stringify([...res])}`);
    }
  }
  // The namespace budgets of /proc/sys/user: a sandbox cannot spend them at all.
  const ns = probeResults((await exec('a', `${PROBE} syscalls; ${PROBE} userns`)).output);
  assertFailed(ns, ['unshare(CLONE_NEWNS)', 'unshare(CLONE_NEWNET)', 'unshare(CLONE_NEWPID)', 'unshare(CLONE_NEWUSER)',
    'clone(CLONE_NEWUSER)'], ['EPERM']);
});

test('each sandbox has host ids of its own: recorded, kept by its published files, free again only with the sandbox', async () => {
  const a = await hostIds('a');
  const b = await hostIds('b');
  assert.equal(a.count, 65536);
  assert.ok(a.base >= 100000 && b.base >= 100000, JSON.stringify({ a, b }));
  assert.ok(a.base + a.count <= b.base || b.base + b.count <= a.base, `ranges overlap: ${JSON.stringify({ a, b })}`);

  // The session's processes run as it on the host, its published files carry it.
  const sleeper = await exec('a', `touch /workspace/owned && chown 1000:1000 /workspace/owned && sleep ${T(2)}`,
    { yield_time_ms: 500 });
  await waitFor(() => hostProcsMatching(`sleep ${T(2)}`).length > 0, { what: 'the sleep on the host' });
  for (const p of hostProcsMatching(`sleep ${T(2)}`)) {
    const status = fs.readFileSync(`/proc/${p.pid}/status`, 'utf8');
    assert.match(status, new RegExp(`^Uid:\\s+${a.base}\\s`, 'm'), status);
  }
  await waitDone(mcp(), 'a', sleeper.command_session_id, { timeout: 60000 });
  const layers = path.join(sandboxDir(h.stateDir, 'a'), 'layers');
  const owned = fs.readdirSync(layers).map((l) => path.join(layers, l, 'owned')).filter((f) => fs.existsSync(f));
  assert.equal(owned.length, 1, `published 'owned' not found in ${fs.readdirSync(layers)}`);
  const st = fs.lstatSync(owned[0]);
  assert.deepEqual([st.uid, st.gid], [a.base + 1000, a.base + 1000], `${owned[0]} on the host`);
  for (const f of fs.readdirSync(path.join(layers, '0'))) {
    assert.equal(fs.lstatSync(path.join(layers, '0', f)).uid, a.base, `imported ${f}`);
  }

  // The image is every sandbox's (host root's); /root and /run are the sandbox's root's in each session.
  const dirs = await exec('b', 'stat -c "%u:%g %a %n" /root /run /tmp /workspace && touch /root/x /run/x /tmp/x && echo writable');
  for (const l of ['0:0 700 /root', '0:0 755 /run', '0:0 1777 /tmp', 'writable']) assert.ok(outputLines(dirs).includes(l), dirs.output);

  // Recorded: shown by sbxctl, the same after a restart.
  const show = JSON.parse((await sbxctl(h.socket, ['--json', 'sandbox', 'show', 'b'])).stdout);
  assert.deepEqual([show.uid_base, show.uid_count], [b.base, b.count], JSON.stringify(show));
  await restart();
  assert.deepEqual(await hostIds('a'), a);
  assert.deepEqual(await hostIds('b'), b);

  // A range is given again only once its sandbox and all its files are gone.
  const src = path.join(h.dir, 'src-a');
  const make = async (name) => {
    const r = await sbxctl(h.socket, ['sandbox', 'create', name, '--source', src]);
    assert.equal(r.code, 0, r.stderr);
    return hostIds(name);
  };
  const c = await make('c');
  const d = await make('d');
  assert.notEqual(c.base, d.base);
  const cDir = sandboxDir(h.stateDir, 'c');
  assert.equal((await sbxctl(h.socket, ['sandbox', 'delete', 'c'])).code, 0);
  assert.ok(!fs.existsSync(cDir));
  const e = await make('e');
  assert.equal(e.base, c.base, 'the freed range is the lowest free one');
  for (const name of ['d', 'e']) assert.equal((await sbxctl(h.socket, ['sandbox', 'delete', name])).code, 0);
});

test('/proc shows no host information: boot command line, boot id, disks, the paths OCI runtimes mask', async () => {
  const hostBoot = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  const masked = ['cmdline', 'partitions', 'diskstats', 'swaps', 'modules', 'kallsyms', 'interrupts', 'kcore', 'keys',
    'timer_list', 'sched_debug', 'latency_stats', 'kmsg'];
  const r = await exec('a', 'cat /proc/sys/kernel/random/boot_id; echo ===; ' +
    `for f in ${masked.join(' ')}; do printf "%s=%s\\n" $f "$(cat /proc/$f 2>&1 | wc -c)"; done; echo ===; ` +
    'grep -c ^processor /proc/cpuinfo; grep ^MemTotal /proc/meminfo');
  const [bootId, masks, kept] = r.output.split('===\n');
  assert.match(bootId.trim(), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, bootId);
  assert.notEqual(bootId.trim(), hostBoot, 'the host boot id is visible');
  for (const f of masked) {
    const l = masks.split('\n').find((x) => x.startsWith(`${f}=`));
    if (fs.existsSync(`/proc/${f}`)) assert.equal(l, `${f}=0`, `/proc/${f} is not masked (empty and readable):\n${masks}`);
  }
  // What tools need stays: the CPUs and the memory they may use.
  assert.match(kept, /^[1-9]\d*\nMemTotal:/, kept);
  // A mask cannot be written to or changed.
  const w = await exec('a', 'for f in cmdline sys/kernel/random/boot_id; do echo x > /proc/$f; echo "write $f rc=$?"; ' +
    'chmod 666 /proc/$f; echo "chmod $f rc=$?"; done 2>/dev/null');
  assert.ok(!/rc=0/.test(w.output), w.output);
  // Each session has a boot id of its own.
  assert.notEqual((await exec('a', 'cat /proc/sys/kernel/random/boot_id')).output.trim(), bootId.trim());
});

test('the mount table and statfs show no host path, device or disk size', async () => {
  const hostRoot = (await run('findmnt', ['-n', '-o', 'SOURCE', '/'])).stdout.trim();
  const hostSizes = new Set();
  for (const dir of ['/', '/usr', h.stateDir, h.runDir]) {
    hostSizes.add((await run('df', ['-B1', '--output=size', dir])).stdout.split('\n')[1]?.trim());
  }
  const r = await exec('a', 'cat /proc/self/mountinfo; echo ===; df -B1 --output=size,target 2>/dev/null | tail -n +2');
  const [mountinfo, df] = r.output.split('===\n');
  for (const hostPath of [h.dir, 'session-root', hostRoot]) {
    assert.ok(!mountinfo.includes(hostPath), `mountinfo shows ${hostPath}:\n${mountinfo}`);
  }
  assert.ok(df.trim().split('\n').length >= 3, df);
  for (const l of df.trim().split('\n')) {
    const [size, target] = l.trim().split(/\s+/);
    assert.ok(!hostSizes.has(size), `df shows the size of a host filesystem at ${target}: ${size}\n${df}`);
  }
});

test("no socket for the kernel's device events (NETLINK_KOBJECT_UEVENT), on either system call ABI", async () => {
  const s = probeResults((await exec('a', `${PROBE} sockets`)).output);
  assertFailed(s, ['socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)', 'socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT, upper bits set)'],
    ['EPROTONOSUPPORT']);
  assert.equal(s.get('socket(AF_NETLINK, NETLINK_ROUTE) (allowed)'), 'ok');
  const c = probeResults((await exec('a', `${PROBE} compat`)).output);
  assertFailed(c, ['i386 socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)'], ['EPROTONOSUPPORT']);
});

const USR_FILE = '/usr/lib/os-release';

test("the host's /usr: an inotify watch on one of its files sees neither the host nor another sandbox", async () => {
  assert.ok(fs.statSync(USR_FILE).isFile());
  const watch = await startHolding('a', `${PROBE} inotify-hold ${USR_FILE}`, 'watching\n');
  try {
    for (let i = 0; i < 5; i++) fs.readFileSync(USR_FILE);
    await exec('b', `cat ${USR_FILE} >/dev/null`);
  } finally {
    const out = probeResults(await release('a', watch.id));
    assert.equal(out.get('inotify events of others'), '0', 'the host or sandbox b opening the file showed in sandbox a');
    assert.notEqual(out.get('inotify events of its own'), '0', 'the watch does not work at all');
  }
});

test("the host's /usr: a lock on one of its files blocks neither the host nor another sandbox", async () => {
  const lock = await startHolding('a', `${PROBE} flock-hold ${USR_FILE}`, 'flock: ok\n');
  let host, other;
  try {
    host = probeResults((await run(PROBE_HOST, ['flock-try', USR_FILE])).stdout);
    other = probeResults((await exec('b', `${PROBE} flock-try ${USR_FILE}`)).output);
  } finally {
    await release('a', lock.id);
  }
  assert.equal(host.get('flock(LOCK_NB)'), 'ok', "sandbox a's lock blocked the host");
  assert.equal(other.get('flock(LOCK_NB)'), 'ok', "sandbox a's lock blocked sandbox b");
});

test('sandboxes made before host ids were recorded keep working: one keeps the first range, the others move', async () => {
  const ids = { a: await hostIds('a'), b: await hostIds('b') };
  await exec('b', 'echo moved > /workspace/later && chown 1000:2000 /workspace/later');
  // What an sbxd without the record left: every sandbox's files in the pool's first range, no rows.
  const legacy = 100000;
  const py = `
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1]); c.execute("DELETE FROM uid_ranges"); c.commit()
for d, base in zip(sys.argv[2::2], sys.argv[3::2]):
    base = int(base)
    mv = lambda i: ${legacy} + i - base if base <= i < base + 65536 else i
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            p = os.path.join(root, n); st = os.lstat(p)
            os.lchown(p, mv(st.st_uid), mv(st.st_gid))
`;
  const args = [];
  for (const [name, r] of Object.entries(ids)) args.push(sandboxDir(h.stateDir, name), String(r.base));
  await restart(async () => {
    const p = await run('python3', ['-c', py, path.join(h.stateDir, 'sbx.db'), ...args]);
    assert.equal(p.code, 0, p.stderr);
  });
  const now = { a: await hostIds('a'), b: await hostIds('b') };
  assert.equal(now.a.base, legacy, 'the first sandbox keeps the first range');
  assert.notEqual(now.b.base, legacy, 'the others get one of their own');
  assert.match(fs.readFileSync(h.sbxdLog, 'utf8'), /Moving the files of sandbox 'b' from host ids 100000-165535/);
  const r = await exec('b', 'stat -c "%u:%g %n" /workspace/later /workspace/README.md; cat /workspace/later; ' +
    'echo more >> /workspace/README.md && echo appended');
  assert.match(r.output, /^1000:2000 \/workspace\/later$/m, r.output);
  assert.match(r.output, /^0:0 \/workspace\/README.md$/m, r.output);
  assert.match(r.output, /^moved$/m);
  assert.match(r.output, /^appended$/m);
  // Everything in the layers (not the layer directories, sbxd's) is in the sandbox's range.
  const walk = (d) => fs.readdirSync(d).flatMap((n) => {
    const f = path.join(d, n);
    const st = fs.lstatSync(f);
    return [[f, st], ...(st.isDirectory() ? walk(f) : [])];
  });
  for (const [name, ids2] of Object.entries(now)) {
    const layers = path.join(sandboxDir(h.stateDir, name), 'layers');
    for (const layer of fs.readdirSync(layers)) {
      for (const [f, st] of walk(path.join(layers, layer))) {
        for (const id of [st.uid, st.gid]) {
          assert.ok(id >= ids2.base && id < ids2.base + ids2.count, `${f}: host id ${id}, not in ${JSON.stringify(ids2)}`);
        }
      }
    }
  }
});
