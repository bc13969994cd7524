// The isolation battery, part 1: one test per escape attempt, each made from
// inside a command run through sandbox-mcp, each asserting that the attempt
// fails and that the host is unchanged.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { outputLines, waitDone, run, T } from '../integration/helpers.mjs';
import { useBattery, probeResults, assertFailed, PROBE, PROBE_HOST } from './common.mjs';

const SECRET = `sbx-secret-${process.pid}`;
const { h, test } = useBattery({
  sandboxes: [{ name: 'a' }, { name: 'other', files: { 'secret.txt': `${SECRET}\n` } }],
});
const exec = (cmd, extra = {}, sandbox_id = 'a') =>
  h.mcp.sc('exec_command', { sandbox_id, cmd, timeout_ms: 20000, yield_time_ms: 20000, ...extra });
const probe = async (args, sandbox_id = 'a') => {
  const r = await exec(`${PROBE} ${args}`, {}, sandbox_id);
  return { r, res: probeResults(r.output) };
};

/* A file on the host, in the test's private directory, that must stay unreachable. */
let marker;
const HOST_MARK = `host-only-${process.pid}`;
function hostMarker() {
  if (!marker) {
    marker = path.join(h.dir, 'host-marker.txt');
    fs.writeFileSync(marker, `${HOST_MARK}\n`);
  }
  return marker;
}
const notLeaked = (r, what) => assert.ok(!r.output.includes(HOST_MARK), `${what}: host file read:\n${r.output}`);

test('read /etc/shadow', async () => {
  const host = fs.readFileSync('/etc/shadow', 'utf8').split('\n')[0];
  const r = await exec('cat /etc/shadow 2>&1; ls -l /etc/shadow /etc/gshadow 2>&1; true');
  assert.ok(!r.output.includes(host), `host /etc/shadow readable:\n${r.output}`);
  assert.match(r.output, /No such file/);
});

test("read the supervisor's state directory and socket", async () => {
  const paths = [h.dir, h.stateDir, h.runDir, h.socket, '/run/sbx', '/var/lib/sbx', `${h.stateDir}/sbxd.db`];
  const r = await exec(`for p in ${paths.join(' ')}; do ls -la "$p" 2>&1; done; ` +
    `python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sys.argv[1]); print("CONNECTED")' ${h.socket} 2>&1; ` +
    'ls /run 2>&1; true');
  assert.ok(!r.output.includes('CONNECTED'), `reached sbxd.sock:\n${r.output}`);
  assert.ok(!r.output.includes('sbxd.sock') || /No such file/.test(r.output.split('sbxd.sock')[1] ?? ''), r.output);
  for (const p of [h.dir, h.stateDir, h.runDir]) assert.ok(r.output.includes(`${p}': No such file`) || r.output.includes(`${p}: No such file`), `${p} visible:\n${r.output}`);
});

test("read another sandbox's workspace", async () => {
  // the other sandbox is live (a running command) while this one looks for it
  const other = await exec(`sleep ${T(301)}`, { yield_time_ms: 300, timeout_ms: 8000 }, 'other');
  assert.equal(other.status, 'running');
  const srcOther = h.sandboxes.other.src;
  const r = await exec(`cat ${srcOther}/secret.txt /workspace/secret.txt 2>&1; ` +
    `ls ${h.stateDir}/sandboxes 2>&1; grep -rs ${SECRET} /workspace /tmp /root /var /etc /run 2>/dev/null; ` +
    `for p in /proc/[0-9]*; do cat $p/root/workspace/secret.txt 2>/dev/null; done; true`);
  assert.ok(!r.output.includes(SECRET), `other sandbox's file read:\n${r.output}`);
  // and the other sandbox still sees its own file
  const own = await exec('cat /workspace/secret.txt', {}, 'other');
  assert.equal(own.output, `${SECRET}\n`);
  await h.mcp.call('read_command_lines', { sandbox_id: 'other', command_session_id: other.command_session_id });
});

test('escape via ..', async () => {
  const m = hostMarker();
  const r = await exec(`cd /workspace; cat ../../../../../../../..${m} 2>&1; ls -d ../../../../../../tmp/sbx-test-* 2>&1; ` +
    `cd ../../../../..; pwd; cat .${m} 2>&1; true`);
  notLeaked(r, '..');
  assert.ok(!r.output.includes(h.dir + '\n'), `host test directory listed:\n${r.output}`);
  assert.ok(outputLines(r).includes('/'), r.output);
});

test('escape via symlinks (in a command and through the file tools)', async () => {
  const m = hostMarker();
  const r = await exec(`ln -sfn / /workspace/rootlink; ln -sfn ${path.dirname(m)} /workspace/dirlink; ` +
    `ln -sfn /etc/shadow /workspace/shadowlink; cat /workspace/rootlink${m} /workspace/dirlink/${path.basename(m)} 2>&1; true`);
  notLeaked(r, 'symlink');
  // the links are published now; the file tools resolve them inside the sandbox
  const tools = new Set(h.mcp.tools.map((t) => t.name));
  if (!tools.has('file_read')) return;
  const hostShadow = fs.readFileSync('/etc/shadow', 'utf8').split('\n')[0];
  for (const p of ['shadowlink', `dirlink/${path.basename(m)}`, `rootlink${m}`, '../../../etc/shadow', `/workspace/../..${m}`]) {
    const fr = await h.mcp.call('file_read', { sandbox_id: 'a', path: p });
    const text = JSON.stringify(fr);
    assert.ok(!text.includes(HOST_MARK) && !text.includes(hostShadow), `file_read ${p} reached the host: ${text.slice(0, 300)}`);
  }
});

test('escape via /proc/*/root', async () => {
  const m = hostMarker();
  const r = await exec(`for p in /proc/[0-9]* /proc/self /proc/thread-self; do cat $p/root${m} 2>/dev/null; ` +
    `cat $p/root/../../..${m} 2>/dev/null; done; ls /proc/1/root/ 2>/dev/null | tr '\\n' ' '; echo; ls / | tr '\\n' ' '; echo`);
  notLeaked(r, '/proc/*/root');
  const lines = outputLines(r);
  // The worker is not dumpable: its root cannot be listed at all, or it is the sandbox's.
  assert.ok(['', lines[lines.length - 1]].includes(lines[lines.length - 2]), "the worker's root is not the sandbox root");
});

test('escape via /proc/*/cwd', async () => {
  const m = hostMarker();
  const r = await exec(`for p in /proc/[0-9]*; do cat $p/cwd/../../../../..${m} 2>/dev/null; ls $p/cwd/ >/dev/null 2>&1; done; ` +
    'readlink /proc/1/cwd /proc/self/cwd; true');
  notLeaked(r, '/proc/*/cwd');
  for (const l of outputLines(r)) assert.ok(l === '/workspace' || l === '/', `cwd outside the sandbox: ${l}`);
});

test('escape via open file descriptors (only stdin, stdout, stderr are inherited)', async () => {
  const { r } = await probe('fds');
  const line = outputLines(r).find((l) => l.startsWith('fds:'));
  const fds = line.slice(4).trim().split(' ').filter(Boolean).map((e) => e.split('=')[0]);
  assert.deepEqual(fds.sort(), ['0', '1', '2'], `inherited fds: ${line}`);
  for (const e of line.split(' ').slice(1)) assert.match(e, /=(pipe:|\/dev\/null)/, `fd ${e} is not a pipe`);
});

test('escape via chroot', async () => {
  const { res } = await probe('chroot');
  assertFailed(res, ['chroot(/tmp/sbx-chroot)', 'chroot(.) after walking up'], ['EPERM']);
});

test('escape via pivot_root', async () => {
  const { res } = await probe('syscalls');
  assertFailed(res, ['pivot_root'], ['EPERM']);
  const r = await exec('mkdir -p /tmp/new/old && unshare -m sh -c "mount --bind /tmp/new /tmp/new && cd /tmp/new && pivot_root . old" 2>&1; echo rc=$?');
  assert.ok(!r.output.includes('rc=0'), r.output);
});

test('escape via unshare and setns', async () => {
  const { res } = await probe('syscalls');
  assertFailed(res, ['unshare(CLONE_NEWNS)', 'unshare(CLONE_NEWNET)', 'unshare(CLONE_NEWPID)', 'unshare(CLONE_NEWTIME)', 'setns'], ['EPERM']);
  assert.equal(res.get('unshare(CLONE_FILES)'), 'ok', 'unshare without namespace flags must stay allowed');
  const s = await probe('setns 1');
  for (const [k, v] of s.res) if (k.startsWith('setns')) assert.notEqual(v, 'ok', `${k} succeeded`);
  const u = await exec('unshare -m true 2>&1; echo rc=$?; unshare -n true 2>&1; echo rc=$?; nsenter -t 1 -m true 2>&1; echo rc=$?');
  assert.ok(!u.output.includes('rc=0'), u.output);
});

test('mount and umount', async () => {
  const before = await exec('cat /proc/self/mounts');
  const r = await exec('mount -t tmpfs none /mnt 2>&1; echo rc=$?; mount --bind /usr /workspace 2>&1; echo rc=$?; ' +
    'umount /proc/kcore 2>&1; echo rc=$?; umount -l /workspace 2>&1; echo rc=$?; umount /proc 2>&1; echo rc=$?; ' +
    'mount -o remount,rw /usr 2>&1; echo rc=$?');
  assert.ok(!r.output.includes('rc=0'), r.output);
  const { res } = await probe('syscalls');
  assertFailed(res, ['mount', 'umount2', 'move_mount', 'open_tree', 'fsopen', 'fsmount', 'fsconfig', 'fspick', 'mount_setattr'], ['EPERM']);
  const after = await exec('cat /proc/self/mounts');
  assert.equal(after.output, before.output);
  const hostMounts = fs.readFileSync('/proc/self/mounts', 'utf8');
  assert.ok(!/ \/mnt tmpfs /.test(hostMounts));
});

test('new user namespaces with mappings', async () => {
  const { res } = await probe('userns');
  assertFailed(res, ['unshare(CLONE_NEWUSER)', 'unshare(CLONE_NEWUSER|CLONE_NEWNS)', 'clone(CLONE_NEWUSER)'], ['EPERM']);
  const r = await exec('unshare -Ur id 2>&1; echo rc=$?');
  assert.ok(!r.output.includes('rc=0'), r.output);
});

test('ptrace of processes outside the sandbox', async () => {
  const host = spawn('sleep', [T(302)], { stdio: 'ignore' });
  try {
    const pids = [h.sbxd.pid, process.pid, host.pid, 1].filter(Boolean);
    const { res } = await probe(`ptrace ${pids.slice(0, 3).join(' ')}`);
    for (const p of pids.slice(0, 3)) assert.notEqual(res.get(`ptrace ${p}`), 'ok', `ptrace of host pid ${p}`);
    assert.equal(host.exitCode, null, 'the host process was disturbed');
  } finally {
    host.kill('SIGKILL');
  }
});

test('kernel module and kexec calls', async () => {
  const { res } = await probe('syscalls');
  assertFailed(res, ['init_module', 'finit_module', 'delete_module', 'kexec_load', 'kexec_file_load'], ['EPERM']);
  const r = await exec('modprobe dummy 2>&1; echo rc=$?; insmod /nonexistent.ko 2>&1; echo rc=$?');
  assert.ok(!r.output.includes('rc=0'), r.output);
});

/* What the kernel itself answers an unprivileged host process (nobody, no
 * capabilities): a family it lacks says EAFNOSUPPORT, one that wants a
 * capability EPERM, one open to all "ok". */
async function kernelAnswers(mode) {
  const r = await run('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all',
    '--bounding-set=-all', PROBE_HOST, mode]);
  assert.equal(r.code, 0, `host probe ${mode} as nobody: ${r.signal ?? r.code} ${r.stderr}`);
  return probeResults(r.stdout);
}

/* The attempts in names must fail with sbx's filter's errno, and the filter,
 * not the kernel, must be what answers: at least one of them is a call the
 * kernel would answer otherwise (so a filter missing these rules fails the
 * test on every kernel that has one such family, whatever the others say). */
function assertFilterAnswered(res, kernel, names, errno, t) {
  assertFailed(res, names, [errno]);
  const telling = names.filter((n) => kernel.get(n) !== errno);
  assert.ok(telling.length > 0, `the kernel itself answers ${errno} to all of ${names.join(', ')}: ` +
    `the filter cannot be told apart from it here (${JSON.stringify([...kernel])})`);
  t.diagnostic(`answered by the filter, not the kernel: ${telling.map((n) => `${n} (kernel: ${kernel.get(n)})`).join(', ')}`);
}

test('raw and packet sockets', async (t) => {
  const { res } = await probe('sockets');
  assertFilterAnswered(res, await kernelAnswers('sockets'), ['socket(AF_PACKET, SOCK_RAW)', 'socket(AF_PACKET, SOCK_DGRAM)',
    'socket(AF_VSOCK)', 'socket(AF_ALG)', 'socket(AF_KEY)', 'socket(AF_BLUETOOTH)'], 'EAFNOSUPPORT', t);
  assertFailed(res, ['socket(AF_INET, SOCK_RAW, ICMP)', 'socket(AF_INET6, SOCK_RAW, ICMPV6)', 'socket(AF_INET, SOCK_PACKET)'], ['EPERM']);
  for (const ok of ['socket(AF_INET, SOCK_STREAM) (allowed)', 'socket(AF_UNIX, SOCK_STREAM) (allowed)', 'socket(AF_NETLINK, NETLINK_ROUTE) (allowed)']) {
    assert.equal(res.get(ok), 'ok', `${ok}: ${res.get(ok)}`);
  }
});

test('reaching any address but loopback', async () => {
  const server = net.createServer((c) => c.end(`${HOST_MARK}\n`));
  await new Promise((r) => server.listen(0, '0.0.0.0', r));
  const port = server.address().port;
  try {
    const addrs = ['1.1.1.1', '8.8.8.8', '10.0.2.2', '169.254.169.254', '192.168.0.1', '127.0.0.1'];
    for (const list of Object.values(os.networkInterfaces())) {
      for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) addrs.push(a.address);
    }
    const cmd = addrs.map((a) => `timeout 3 bash -c 'exec 3<>/dev/tcp/${a}/${port}; cat <&3' 2>&1; echo "${a} rc=$?"`).join('; ') +
      `; timeout 3 bash -c 'exec 3<>/dev/tcp/::1/${port}' 2>&1; echo "::1 rc=$?"`;
    const r = await exec(cmd);
    notLeaked(r, 'network');
    for (const a of [...addrs, '::1']) assert.ok(!r.output.includes(`${a} rc=0`), `${a}:${port} reached:\n${r.output}`);
    assert.match(r.output, /unreachable|refused/i);
  } finally {
    server.close();
  }
});

test('writing to cgroup files', async () => {
  const r = await exec('ls /sys/fs/cgroup 2>&1; echo rc=$?; echo 1000000 > /sys/fs/cgroup/pids/pids.max 2>&1; echo rc=$?; ' +
    'mkdir -p /tmp/cg && mount -t cgroup2 none /tmp/cg 2>&1; echo rc=$?; mount -t cgroup -o memory none /tmp/cg 2>&1; echo rc=$?; ' +
    'cat /proc/self/cgroup');
  assert.ok(!r.output.includes('rc=0'), r.output);
  for (const l of outputLines(r).filter((x) => /^\d+:/.test(x))) assert.match(l, /:\/$/, `cgroup path visible: ${l}`);
});

test('changing the hostname of the host', async () => {
  const hostBefore = os.hostname();
  const { res } = await probe(`hostname evil-${process.pid}`);
  assertFailed(res, ['sethostname'], ['EPERM']);
  const r = await exec(`hostname evil2-${process.pid} 2>&1; echo rc=$?; hostname`);
  assert.ok(!r.output.includes('rc=0'), r.output);
  assert.equal(outputLines(r).at(-1), 'sbx');
  assert.equal(os.hostname(), hostBefore);
});

test('sysrq and the masked /proc paths', async () => {
  const r = await exec('echo h > /proc/sysrq-trigger; echo rc=$?; echo 1 > /proc/sys/kernel/sysrq; echo rc=$?; ' +
    'echo 1 > /proc/sys/vm/drop_caches; echo rc=$?; ' +
    'for f in kcore keys timer_list sched_debug sysrq-trigger kmsg; do printf "%s=%s\\n" $f "$(head -c 64 /proc/$f 2>/dev/null | wc -c)"; done; ' +
    'ls -A /proc/acpi /proc/scsi 2>/dev/null | grep -v : | grep -c . ; ls /sys 2>&1 | head -1');
  const lines = outputLines(r);
  assert.ok(!r.output.includes('rc=0'), r.output);
  for (const f of ['kcore', 'keys', 'timer_list', 'sched_debug', 'sysrq-trigger', 'kmsg']) {
    const l = lines.find((x) => x.startsWith(`${f}=`));
    if (l) assert.equal(l, `${f}=0`, `/proc/${f} not masked: ${r.output}`);
  }
  assert.match(r.output, /No such file/, '/sys is present');
});

test('TIOCSTI and TIOCLINUX', async () => {
  const { res } = await probe('tiocsti');
  assertFailed(res, ['TIOCSTI on stdin', 'TIOCLINUX on stdin', 'TIOCSTI on a pty', 'TIOCSTI on a pty (upper bits set)'], ['EPERM']);
  assertFailed(res, ['open /dev/tty (controlling terminal)']);
});

test('device nodes (mknod)', async () => {
  const { res } = await probe('mknod /tmp');
  assertFailed(res, ['mknod block 8:0', 'mknod char 1:1 (/dev/mem)', 'mknod char 1:11 (/dev/kmsg)'], ['EPERM']);
  const w = await probe('mknod /workspace');
  assertFailed(w.res, ['mknod block 8:0', 'mknod char 1:1 (/dev/mem)']);
  const r = await exec('mknod /tmp/x c 1 1 2>&1; echo rc=$?; ls /dev');
  assert.ok(!r.output.includes('rc=0'), r.output);
});

test('setuid binaries inside the workspace gain nothing', async () => {
  const r = await exec('cp /usr/bin/id /workspace/suid-id && chmod 4755 /workspace/suid-id && ls -l /workspace/suid-id && ' +
    'setpriv --reuid=1000 --regid=1000 --clear-groups /workspace/suid-id -u; grep NoNewPrivs /proc/self/status');
  const lines = outputLines(r);
  assert.match(r.output, /NoNewPrivs:\s+1/);
  assert.ok(lines.includes('1000'), `the setuid binary ran as: ${r.output}`);
  assert.ok(!lines.includes('0'), `setuid root took effect inside:\n${r.output}`);
  // on the host, no published file is setuid or setgid root
  const found = await run('find', [h.stateDir, '-perm', '/6000', '-uid', '0', '-type', 'f']);
  assert.equal(found.stdout.trim(), '', `setuid-root files on the host:\n${found.stdout}`);
});

test('signals to processes outside the sandbox', async () => {
  const host = spawn('sleep', [T(303)], { stdio: 'ignore' });
  try {
    const { res } = await probe(`kill ${host.pid} ${h.sbxd.pid} ${process.pid}`);
    for (const p of [host.pid, h.sbxd.pid, process.pid]) assert.notEqual(res.get(`kill ${p}`), 'ok');
    await exec(`kill -9 ${host.pid} ${h.sbxd.pid} ${process.pid} 2>/dev/null; kill -9 -1; true`);
    assert.equal(host.exitCode, null, 'the host process was killed');
    assert.equal(host.signalCode, null);
    assert.ok(h.sbxd.running);
  } finally {
    host.kill('SIGKILL');
  }
});

test('the seccomp table: every listed call fails inside, with the documented errno', async () => {
  const { r, res } = await probe('syscalls');
  const eperm = ['bpf', 'perf_event_open', 'keyctl', 'add_key', 'request_key', 'userfaultfd', 'open_by_handle_at', 'reboot',
    'swapon', 'swapoff', 'settimeofday', 'clock_settime', 'clock_adjtime', 'adjtimex', 'acct', 'syslog', 'quotactl', 'iopl',
    'ioperm', 'lookup_dcookie', 'chroot'];
  assertFailed(res, eperm, ['EPERM']);
  assertFailed(res, ['clone3', 'io_uring_setup', 'io_uring_enter', 'io_uring_register', 'uselib', 'ustat', 'sysfs'], ['ENOSYS']);
  assertFailed(res, ['name_to_handle_at'], ['EOPNOTSUPP']);
  assert.equal(res.get('personality(query)'), 'ok');
  assert.equal(res.get('personality(PER_LINUX)'), 'ok');
  assertFailed(res, ['personality(ADDR_NO_RANDOMIZE)', 'personality(READ_IMPLIES_EXEC|bit31)'], ['EPERM']);
  // everyday programs are unaffected
  const ok = await exec('python3 -c "import os, threading, subprocess; t = threading.Thread(target=print); t.start(); t.join(); print(subprocess.run([\'true\']).returncode)" && git --version >/dev/null && echo fine');
  assert.equal(outputLines(ok).at(-1), 'fine', ok.output);
  assert.equal(r.status, 'ok');
});

test('capabilities: a reduced bounding set, no ambient set, none on the host', async () => {
  const r = await exec('grep -E "^Cap(Inh|Prm|Eff|Bnd|Amb)" /proc/self/status');
  const caps = Object.fromEntries(outputLines(r).map((l) => l.split(/:\s+/)));
  assert.equal(caps.CapBnd, '00000000800405fb', r.output);
  assert.equal(caps.CapAmb, '0000000000000000');
  assert.equal(caps.CapEff, caps.CapBnd, 'root inside holds the kept set in its own user namespace');
});

test('the worker (PID 1) is out of its commands\' reach; commands may still debug their own', async () => {
  // Its fds are its socket to sbxd and the stderr it shares with sbxd.
  const r = await exec([
    'for f in /proc/1/fd/2 /proc/1/fd/3 /proc/1/environ /proc/1/mem; do head -c 1 $f >/dev/null 2>&1 && echo "read $f"; done',
    'ls /proc/1/fd >/dev/null 2>&1 && echo "listed /proc/1/fd"',
    'python3 -c "import ctypes; l = ctypes.CDLL(None); print(\'attach1\', l.ptrace(16, 1, 0, 0))"',
    'sleep 5 & python3 -c "import ctypes, sys; l = ctypes.CDLL(None); print(\'attach-own\', l.ptrace(16, int(sys.argv[1]), 0, 0))" $!; kill $!',
    'cat /proc/self/oom_score_adj /proc/1/oom_score_adj',
  ].join('; '));
  const lines = outputLines(r);
  assert.ok(!lines.some((l) => l.startsWith('read ') || l.startsWith('listed ')), r.output);
  assert.ok(lines.includes('attach1 -1'), `ptrace of the worker: ${r.output}`);
  assert.ok(lines.includes('attach-own 0'), `ptrace of a command's own child: ${r.output}`);
  assert.deepEqual(lines.slice(-2), ['500', '0'], 'commands, not the worker, go first on OOM');
});

test('foreign system call ABIs: x32 kills the process, the 32-bit ABI is filtered', async (t) => {
  const r = await exec(`${PROBE} x32; echo "status=$?"`);
  assert.ok(!r.output.includes('survived'), `an x32 system call went through:\n${r.output}`);
  assert.match(r.output, /status=159/, `expected death by SIGSYS: ${r.output}`);
  // int $0x80 from a 64-bit process reaches the i386 ABI, where the machine allows it
  const hostTry = await run(PROBE_HOST, ['compat']);
  if (hostTry.signal || hostTry.code !== 0) {
    t.skip(`int $0x80 is not usable on this machine (host probe: ${hostTry.signal ?? hostTry.code}); the x86 ABI rules are untested here`);
    return;
  }
  const { res } = await probe('compat');
  assert.equal(res.get('i386 getpid (allowed)'), 'ok');
  assertFailed(res, ['i386 mount', 'i386 unshare(CLONE_NEWUSER)', 'i386 kexec_load', 'i386 bpf', 'i386 init_module'], ['EPERM']);
  assertFailed(res, ['i386 socketcall'], ['ENOSYS']);
  assertFilterAnswered(res, await kernelAnswers('compat'), ['i386 socket(AF_PACKET)', 'i386 socket(AF_VSOCK)',
    'i386 socket(AF_ALG)', 'i386 socket(AF_KEY)', 'i386 socket(AF_BLUETOOTH)'], 'EAFNOSUPPORT', t);
  assert.equal(res.get('i386 socket(AF_UNIX) (allowed)'), 'ok');
});

test('a fresh /tmp (tmpfs), /proc of the pid namespace, no /sys, a new session without a terminal', async () => {
  const r = await exec('grep -E " /tmp | /proc | /sys " /proc/self/mounts; touch /tmp/x && echo tmp-ok; ' +
    'python3 -c "import os; print(\'sid\', os.getsid(0) == os.getpid() or os.getsid(0))"; ' +
    'readlink /proc/self/fd/0; tty 2>&1; true');
  assert.match(r.output, /^sbx-tmp \/tmp tmpfs /m, r.output);
  assert.match(r.output, /^proc \/proc proc /m);
  assert.ok(!/ \/sys /.test(r.output));
  assert.match(r.output, /tmp-ok/);
  assert.match(r.output, /not a tty/);
  const w = await waitDone(h.mcp, 'a', r.command_session_id);
  assert.equal(w.status, 'ok');
});
