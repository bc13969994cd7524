// The owner layer quota across sandboxes published side by side: each
// sandbox's publication is built off the loop in its own lane
// (common/workpool.h), so two of the same owner may be built at once. Of two
// whose layers together pass owner_layers_max_bytes exactly one is recorded,
// the other is refused naming the quota (checked before the copy, and again
// when it is recorded: core/layerquota.h), and its layer is removed.
import assert from 'node:assert/strict';
import path from 'node:path';
import { useSbx, run, sandboxDir } from './helpers.mjs';

const MiB = 1024 * 1024;
const h = useSbx({
  sandboxes: [{ name: 'qa' }, { name: 'qb' }],
  sets: 'runtime,sessions',
  config: '[sbxd]\nsandbox_layers_max_bytes = 1G\nowner_layers_max_bytes = 40M\n',
});
const layersBytes = async (name) => {
  const r = await run('du', ['-s', '--block-size=1', path.join(sandboxDir(h.stateDir, name), 'layers')]);
  return Number(r.stdout.split('\t')[0]);
};

h.test('two sandboxes of one owner publishing at once: one layer recorded, the other refused', async () => {
  // Both commands wait for the same moment, so that their publications overlap.
  const at = Math.ceil(Date.now() / 1000) + 3;
  const cmd = `head -c ${24 * MiB} /dev/urandom > big.bin && while [ $(date +%s) -lt ${at} ]; do sleep 0.01; done`;
  const results = await Promise.all(['qa', 'qb'].map((sandbox_id) =>
    h.mcp.sc('exec_command', { sandbox_id, cmd, timeout_ms: 60000, yield_time_ms: 60000 })));
  for (const r of results) assert.equal(r.status, 'ok', JSON.stringify(r));
  const published = results.filter((r) => r.publication.published);
  const refused = results.filter((r) => !r.publication.published);
  assert.equal(published.length, 1, JSON.stringify(results.map((r) => r.publication)));
  assert.equal(refused.length, 1);
  assert.match(refused[0].publication.error,
    /owner_layers_max_bytes \(41943040 bytes\): \d+ bytes used, this publication adds 2\d{7} bytes/,
    refused[0].publication.error);
  // The refused layer was removed: only one sandbox's layers hold the file.
  const sizes = await Promise.all(['qa', 'qb'].map(layersBytes));
  assert.equal(sizes.filter((b) => b >= 24 * MiB).length, 1, `layers: ${sizes}`);
});
