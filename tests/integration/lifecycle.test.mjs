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
