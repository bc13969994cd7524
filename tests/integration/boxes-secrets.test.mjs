// Secrets of the boxes set (issue 21 part B; shared/seeds/003): sbxctl
// secret set|list|rm (value from stdin), sandbox_secrets (names only),
// injection into a box's commands and redaction of every value as
// [secret:NAME] in what they print, also when a value is split across
// writes and output chunks, and when it is longer than one chunk.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { useSbx, sbxctl, run, SBXCTL } from './helpers.mjs';

const U1 = 65534;
const h = useSbx({ sandboxes: [], sets: 'boxes', world: true,
  config: '[sbxd]\nsocket_mode = 0666\nbox_image = default\nbox_spares = 0\nboxes_per_user = 3\n' });

const TOKEN = 'tok-3f9a27c1d8e4b6';
// Longer than what the command below writes at once (1000 bytes): every
// output chunk of it holds only part of it.
const BIG = Array.from({ length: 4000 }, (_, i) => 'abcdefghijklmnopqrstuvwxyz0123456789'[(i * 7) % 36]).join('');
const ctlAs = (uid, args, input) => run('/usr/bin/setpriv',
  [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', SBXCTL, '--socket', h.socket, ...args], { input });
const set = (name, value, extra = []) => sbxctl(h.socket, ['secret', 'set', name, ...extra], { input: value });

h.test('sbxctl secret set|list|rm: value from stdin, one trailing newline dropped, never shown', async () => {
  assert.equal((await set('TOKEN', `${TOKEN}\n`)).code, 0);
  assert.equal((await set('BIG', BIG)).code, 0);
  assert.equal((await set('GONE', 'temporary')).code, 0);
  const l = await sbxctl(h.socket, ['--json', 'secret', 'list']);
  assert.equal(l.code, 0, l.stderr);
  const list = JSON.parse(l.stdout);
  assert.deepEqual(list.map((x) => [x.name, x.bytes]), [['BIG', 4000], ['GONE', 9], ['TOKEN', TOKEN.length]]);
  const text = await sbxctl(h.socket, ['secret', 'list']);
  for (const out of [l.stdout, text.stdout]) {
    assert.ok(!out.includes(TOKEN) && !out.includes(BIG.slice(0, 40)), 'a value was shown');
  }
  assert.equal((await sbxctl(h.socket, ['secret', 'rm', 'GONE'])).code, 0);
  const again = await sbxctl(h.socket, ['secret', 'rm', 'GONE']);
  assert.equal(again.code, 4);
  assert.match(again.stderr, /no secret named 'GONE'/);
  const bad = await set('1BAD', 'value');
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /invalid secret name '1BAD'/);
  const short = await set('SHORT', 'ab\n');
  assert.match(short.stderr, /too short: 4 to 4096 bytes/);
  // Never from argv: there is no such argument.
  assert.equal((await sbxctl(h.socket, ['secret', 'set', 'X', 'value'])).code, 2);
  // Root's alone on disk: sbx.db, where the values are, is 0600 in a 0711 directory.
  assert.equal(fs.statSync(path.join(h.stateDir, 'sbx.db')).mode & 0o077, 0);
});

h.test('each user has their own secrets; only root names another owner', async () => {
  const mine = await ctlAs(U1, ['secret', 'set', 'OWN'], 'nobody-value');
  assert.equal(mine.code, 0, mine.stderr);
  const theirs = await sbxctl(h.socket, ['--json', 'secret', 'list', '--owner', String(U1)]);
  assert.deepEqual(JSON.parse(theirs.stdout).map((x) => x.name), ['OWN']);
  const peek = await ctlAs(U1, ['secret', 'list', '--owner', '0']);
  assert.equal(peek.code, 5);
  assert.match(peek.stderr, /only root may manage another user's secrets/);
  const u = await h.connect({ uid: U1 });
  assert.deepEqual(await u.sc('sandbox_secrets', {}), { secrets: ['OWN'] });
  // Root's TOKEN is not this user's.
  const r = await u.call('sandbox_start', { secrets: ['TOKEN'] });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /no secret named 'TOKEN'/);
  await u.close();
});

h.test('sandbox_secrets lists names, never values; an unknown name fails sandbox_start saying which', async () => {
  const sc = await h.mcp.sc('sandbox_secrets', {});
  assert.deepEqual(sc, { secrets: ['BIG', 'TOKEN'] });
  const r = await h.mcp.call('sandbox_start', { secrets: ['TOKEN', 'NOPE'] });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /no secret named 'NOPE'/);
});

h.test('injected into every command of the box, redacted in stdout, stderr and across chunks', async () => {
  const b = await h.mcp.sc('sandbox_start', { secrets: ['TOKEN', 'BIG'] });
  const exec = (cmd) => h.mcp.sc('sandbox_exec', { id: b.id, cmd });
  try {
    // The command sees the value itself (its length and a checksum prove it).
    const len = await exec('printf %s "$TOKEN" | wc -c; printf %s "$BIG" | wc -c');
    assert.equal(len.stdout, `${TOKEN.length}\n4000\n`);
    const plain = await exec('echo "x $TOKEN y"; echo "e $TOKEN" >&2; env | grep ^TOKEN=');
    assert.equal(plain.stdout, 'x [secret:TOKEN] y\nTOKEN=[secret:TOKEN]\n');
    assert.equal(plain.stderr, 'e [secret:TOKEN]\n');
    // Half, a pause (the worker sends what it has: the value is split across two output chunks), the rest.
    const split = await exec('printf "a=%s" "$(printf %s "$TOKEN" | head -c 7)"; sleep 0.5; ' +
      'printf "%s=b\\n" "$(printf %s "$TOKEN" | tail -c +8)"');
    assert.equal(split.stdout, 'a=[secret:TOKEN]=b\n');
    // 4000 bytes in writes of 1000 with pauses: no chunk holds the whole value.
    const big = await exec('for i in 0 1 2 3; do printf %s "$BIG" | dd bs=1000 skip=$i count=1 status=none; ' +
      'sleep 0.2; done; echo');
    assert.equal(big.stdout, '[secret:BIG]\n');
    // A prefix alone is not a value: it comes out whole at the end.
    const prefix = await exec('printf %s "$TOKEN" | head -c 10');
    assert.equal(prefix.stdout, TOKEN.slice(0, 10));
    // A background command's log is read back through a command: redacted too.
    const bg = await h.mcp.sc('sandbox_exec', { id: b.id, cmd: 'echo "bg $TOKEN"', background: true });
    let log = '';
    for (let i = 0; i < 50 && !log.includes('bg '); i++) {
      log = (await exec(`cat .sbx/${bg.bgId}.log`)).stdout;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(log, 'bg [secret:TOKEN]\n');
    const st = await h.mcp.sc('sandbox_status', { id: b.id });
    assert.deepEqual(st.secrets, ['TOKEN', 'BIG']);
  } finally {
    await h.mcp.sc('sandbox_stop', { id: b.id });
  }
  // Nothing sbxd keeps or logged has a value: its log, its transcripts and its database hold none.
  const logText = fs.readFileSync(h.sbxdLog, 'utf8');
  assert.ok(!logText.includes(TOKEN), 'the value is in sbxd\'s log');
  const tdir = path.join(h.stateDir, 'transcripts');
  for (const f of fs.readdirSync(tdir, { recursive: true })) {
    const p = path.join(tdir, f);
    if (fs.statSync(p).isFile()) assert.ok(!fs.readFileSync(p, 'latin1').includes(TOKEN), `the value is in ${f}`);
  }
});

h.test('a box without secrets gets none in its environment', async () => {
  const b = await h.mcp.sc('sandbox_start', {});
  try {
    const r = await h.mcp.sc('sandbox_exec', { id: b.id, cmd: 'env | grep -c -e ^TOKEN= -e ^BIG= || true' });
    assert.equal(r.stdout, '0\n');
  } finally {
    await h.mcp.sc('sandbox_stop', { id: b.id });
  }
});
