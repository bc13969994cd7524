// The artifact store's limits (issue 19): runtime_artifacts_max_bytes removes
// the oldest artifacts (their transcripts with them), runtime_artifact_ttl_hours
// expires them, runtime_max_concurrent_jobs bounds the jobs of one owner.
import assert from 'node:assert/strict';
import { useSbx, sbxctl, sleep } from './helpers.mjs';

const TTL_MS = 7200; // runtime_artifact_ttl_hours = 0.002
const h = useSbx({
  sandboxes: [{ name: 'st' }], sets: 'artifacts',
  config: '[sbxd]\nruntime_allowed = shell\nruntime_artifact_ttl_hours = 0.002\n' +
    'runtime_artifacts_max_bytes = 1M\nruntime_max_concurrent_jobs = 1\n',
});
const run = (args) => h.mcp.sc('runtime_execute', { sandbox_id: 'st', runtime: 'shell', ...args });
// About 500 KB of output that compresses little (base64 of random bytes, to
// about 390 KB: artifacts count compressed): two fit in 1 MiB, three do not.
const BIG = 'head -c 375000 /dev/urandom | base64 -w 100';

h.test('runtime_artifacts_max_bytes: the oldest artifact goes first, its transcript with it', async () => {
  const a = await run({ code: BIG });
  const b = await run({ code: BIG });
  const c = await run({ code: BIG });
  assert.match(await h.mcp.err('runtime_query_output', { artifactHandle: a.artifactHandle, queryTerms: ['x'] }), /not found/);
  assert.match(await h.mcp.err('runtime_query_output', { artifactHandle: a.command_session_id, queryTerms: ['x'] }),
    /removed to stay within runtime_artifacts_max_bytes = 1048576/);
  for (const r of [b, c]) {
    const q = await h.mcp.sc('runtime_query_output', { artifactHandle: r.artifactHandle, lineRange: { stream: 'stdout', startLine: 1, endLine: 1 } });
    assert.match(q.excerpts[0].content, /^   1\| [A-Za-z0-9+/]{100}\n$/);
  }
  const j = JSON.parse((await sbxctl(h.socket, ['status', '--json'])).stdout);
  assert.equal(j.artifacts, 2);
  assert.ok(j.artifact_bytes <= 1048576, JSON.stringify(j));
});

h.test('runtime_max_concurrent_jobs: a second job of the owner waits for none, it is refused', async () => {
  const slow = run({ code: 'sleep 2; echo done', persistOutput: false });
  await sleep(300);
  assert.match(await h.mcp.err('runtime_execute', { sandbox_id: 'st', runtime: 'shell', code: 'true' }),
    /runtime_max_concurrent_jobs \(1, sbxd.conf\(5\)\) runtime_execute jobs of this owner run already/);
  assert.equal((await slow).stdoutSummary, 'done');
});

h.test('runtime_artifact_ttl_hours: an expired handle is not found, and says it expired', async () => {
  const r = await run({ code: 'echo kept' });
  assert.equal((await h.mcp.sc('runtime_query_output', { artifactHandle: r.artifactHandle, queryTerms: ['kept'] })).matchCount, 1);
  await sleep(TTL_MS + 500);
  assert.match(await h.mcp.err('runtime_query_output', { artifactHandle: r.artifactHandle, queryTerms: ['kept'] }),
    /not found: it expired \(runtime_artifact_ttl_hours\)/);
  const j = JSON.parse((await sbxctl(h.socket, ['status', '--json'])).stdout);
  assert.equal(j.artifacts, 0, 'expired artifacts are removed');
});
