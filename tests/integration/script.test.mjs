// The script set (issue 18 part A, seed 001): sandbox_script in a fresh
// sandbox of the python image (the shipped definition, built lazily by the
// first call; its .deb packages cached in SBX_IMAGE_CACHE), /out kept with
// both logs and the caller's ownership, /in mounts of files and directories
// from descriptors the broker opened (a symlink swapped after the call
// changes nothing), every error row of the seed, the 16 KiB stderr tail
// and the stdout bound, background jobs (status, wait, cancel of a process
// tree, the logging notification), a broker disconnect and an sbxd restart
// (supervisor_lost), and another user's job refused.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after } from 'node:test';
import { useSbx, sbxctl, waitFor, hostProcsMatching, sleep, T, TMP_PREFIX, ROOT } from './helpers.mjs';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const CACHE = process.env.SBX_IMAGE_CACHE ?? '/var/cache/sbx-ci/images/archives';
fs.mkdirSync(CACHE, { recursive: true });
const IMAGES = fs.mkdtempSync(TMP_PREFIX + 'script-images-');
fs.copyFileSync(path.join(ROOT, 'dist/images.d/python.conf'), path.join(IMAGES, 'python.conf'));
fs.chmodSync(path.join(IMAGES, 'python.conf'), 0o644);
const INPUTS = fs.mkdtempSync(TMP_PREFIX + 'script-in-');
fs.chmodSync(INPUTS, 0o755);
const OUTSIDE = fs.mkdtempSync(TMP_PREFIX + 'script-out-');
after(() => {
  for (const d of [IMAGES, INPUTS, OUTSIDE]) fs.rmSync(d, { recursive: true, force: true });
});
const BUILD_MS = 600000;
const USER = 4242; // the unprivileged caller of the ownership and foreign-job tests

const h = useSbx({
  sandboxes: [],
  sets: 'script',
  world: true,
  config: `[sbxd]\nimages_dir = ${IMAGES}\nimage_cache_dir = ${CACHE}\nscript_allowed_paths = ${INPUTS} /nonexistent-root\n` +
    'script_stdout_max = 4096\nowner_sandboxes_max = 64\nowner_sessions_max = 64\n',
});

const script = (args, opts) => h.mcp.call('sandbox_script', { image: 'python', egress: 'none', ...args }, opts);

h.test('tools/list: the four tools, the seed annotations, the roots in the live input schema', async () => {
  const tools = h.mcp.tools;
  assert.deepEqual(tools.map((t) => t.name), ['sandbox_script', 'sandbox_status', 'sandbox_wait', 'sandbox_cancel']);
  const s = tools[0];
  assert.deepEqual(s.annotations, { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true });
  assert.equal(s.inputSchema.properties.image.default, 'anaconda');
  assert.equal(s.inputSchema.properties.egress.default, 'package-managers');
  assert.equal(s.inputSchema.properties.background.default, false);
  assert.deepEqual(s.inputSchema.required, ['command']);
  for (const p of ['files', 'directories']) {
    assert.match(s.inputSchema.properties[p].description, new RegExp(`${INPUTS}, /nonexistent-root`));
  }
  assert.equal(tools[2].inputSchema.properties.timeout_seconds.default, 1800);
  assert.equal(tools[2].inputSchema.properties.timeout_seconds.maximum, 172800);
});

let first;
h.test('the smallest command on python (built lazily): exit code, output_dir with both logs, text payload', async () => {
  const t0 = Date.now();
  const r = await script({ command: 'python3 -c "import sys; print(sys.version)"; echo oops >&2; pwd > where' },
    { timeout: BUILD_MS });
  process.stdout.write(`# first sandbox_script (image build included): ${Date.now() - t0} ms\n`);
  assert.ok(!r.isError, JSON.stringify(r.content));
  const sc = r.structuredContent;
  first = sc;
  assert.equal(sc.exit_code, 0);
  assert.match(sc.job_id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.match(sc.stdout, /^3\.11\.\d+ /);
  assert.equal(sc.stderr, 'oops\n');
  assert.equal(sc.output_dir, path.join(h.stateDir, 'jobs', sc.job_id, 'out'));
  assert.equal(r.content[0].text,
    `exit_code: 0\noutput_dir: ${sc.output_dir}\njob_id: ${sc.job_id}\n---\n${sc.stdout}---stderr---\noops\n\n`);
  assert.equal(fs.readFileSync(path.join(sc.output_dir, 'stdout.log'), 'utf8'), sc.stdout);
  assert.equal(fs.readFileSync(path.join(sc.output_dir, 'stderr.log'), 'utf8'), 'oops\n');
  assert.equal(fs.readFileSync(path.join(sc.output_dir, 'where'), 'utf8'), '/out\n');
  // the sandbox is gone
  const l = await sbxctl(h.socket, ['sandbox', 'list', '--json']);
  assert.deepEqual(JSON.parse(l.stdout), []);
});
