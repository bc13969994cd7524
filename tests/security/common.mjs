// Shared pieces of the isolation battery: a private sbxd (tests/integration/
// helpers.mjs) whose sandboxes carry the probe binary build/bin/tests/sbx-sec-probe
// in their workspace, and helpers to run it and read its "NAME: RESULT" lines.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { useSbx, writeFixture, sbxctl, tail, hostProcsMatching, waitFor, BIN, sleep } from '../integration/helpers.mjs';

export const PROBE_HOST = path.join(BIN, 'tests', 'sbx-sec-probe');
export const PROBE = '/workspace/sbx-sec-probe';

/* useSbx() without sandboxes; the sandboxes, made here from the fixture plus
 * the probe, are created once, by the first test (node runs top-level hooks
 * concurrently, so a second before() could not wait for the harness). */
export function useBattery({ sandboxes, config, world, sets }) {
  const h = useSbx({ sandboxes: [], config, world, sets });
  let made = null;
  async function make() {
    assert.ok(fs.existsSync(PROBE_HOST), `${PROBE_HOST} missing: make build/bin/tests/sbx-sec-probe`);
    for (const sb of sandboxes) {
      const src = path.join(h.dir, 'src-' + sb.name);
      await writeFixture(src);
      await fsp.copyFile(PROBE_HOST, path.join(src, 'sbx-sec-probe'));
      await fsp.chmod(path.join(src, 'sbx-sec-probe'), 0o755);
      for (const [rel, body] of Object.entries(sb.files ?? {})) await fsp.writeFile(path.join(src, rel), body);
      const args = ['sandbox', 'create', sb.name, '--source', src];
      if (sb.memory) args.push('--memory', String(sb.memory));
      if (sb.pids) args.push('--pids', String(sb.pids));
      const r = await sbxctl(h.socket, args);
      if (r.code !== 0) throw new Error(`sbxctl ${args.join(' ')}: ${r.stderr}${r.stdout}\n${tail(h.sbxdLog)}`);
      h.sandboxes[sb.name] = { name: sb.name, src };
    }
  }
  const test = (name, fn, opts) => h.test(name, async (t, hh) => {
    made ??= make();
    await made;
    return fn(t, hh);
  }, opts);
  return { h, test };
}

/* "NAME: RESULT" lines of the probe -> Map. */
export function probeResults(output) {
  const m = new Map();
  for (const line of output.split('\n')) {
    const i = line.lastIndexOf(': ');
    if (i > 0) m.set(line.slice(0, i), line.slice(i + 2));
  }
  return m;
}

/* Assert that each named attempt failed, with one of the errnos given (default: any). */
export function assertFailed(results, names, errnos = null) {
  for (const n of names) {
    const got = results.get(n);
    assert.ok(got !== undefined, `no result for ${n}: ${JSON.stringify([...results])}`);
    assert.notEqual(got, 'ok', `${n} succeeded inside the sandbox`);
    if (errnos) assert.ok(errnos.includes(got), `${n}: ${got}, expected one of ${errnos.join(', ')}`);
  }
}

/* Host processes running as a sandbox uid (>= 100000) whose command line contains needle. */
export function sandboxProcs(needle) {
  return hostProcsMatching(needle).filter((p) => {
    try {
      const st = fs.readFileSync(`/proc/${p.pid}/status`, 'utf8');
      return Number(/^Uid:\s+(\d+)/m.exec(st)[1]) >= 100000;
    } catch {
      return false;
    }
  });
}

export async function noneLeft(needle, timeout = 10000) {
  await waitFor(() => hostProcsMatching(needle).length === 0, { timeout, what: `no process matching "${needle}"` });
}

export { sleep };
