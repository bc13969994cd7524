// Tokens of a typical four-step agent session through sandbox-mcp, as a
// client that gives its model `content` (the text blocks) and as one that
// gives it `structuredContent` (its JSON) would pay them, counted with
// Claude's tokenizer and with cl100k_base (tests/integration/tokens.mjs):
//   1. run the failing tests, 2. read a 2,000-line file (every window, until
//   truncated is false), 3. fix the bug with file_edit, 4. rerun the tests.
// It starts its own sbxd like the integration tests (as root), with the
// binaries of SBX_BIN_DIR (default build/bin), so that the same script
// measures another build: SBX_BIN_DIR=/path/to/other/build/bin.
//   node bench/tokens.mjs [--file code|prose|json] [--json]
// --file picks the kind of the 2,000-line file of step 2 (default code).
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Harness, sbxctl, BIN } from '../tests/integration/helpers.mjs';
import { realFiles, resultTokens, contentText } from '../tests/integration/tokens.mjs';

const REPO = {
  'calc.py': 'def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n',
  'test_calc.py': [
    'import unittest', '', 'from calc import add, mul', '', '',
    'class CalcTest(unittest.TestCase):',
    '    def test_add(self):', '        self.assertEqual(add(2, 2), 4)', '',
    '    def test_add_negative(self):', '        self.assertEqual(add(-1, -1), -2)', '',
    '    def test_mul(self):', '        self.assertEqual(mul(3, 4), 12)', '', '',
    "if __name__ == '__main__':", '    unittest.main()', '',
  ].join('\n'),
};
const TEST = 'python3 -m unittest -v test_calc 2>&1';
const KIND = process.argv.includes('--file') ? process.argv[process.argv.indexOf('--file') + 1] : 'code';

async function session(h) {
  const src = path.join(h.dir, 'src-bench');
  await fsp.mkdir(src, { recursive: true });
  for (const [name, text] of Object.entries(REPO)) await fsp.writeFile(path.join(src, name), text);
  const big = realFiles()[KIND];
  if (!big) throw new Error(`--file: one of code, prose, json, not ${KIND}`);
  await fsp.writeFile(path.join(src, big.name), big.text);
  const r = await sbxctl(h.socket, ['sandbox', 'create', 'bench', '--source', src]);
  if (r.code !== 0) throw new Error(`sbxctl sandbox create: ${r.stderr}`);
  const mcp = await h.connect();
  const call = async (name, args) => {
    const res = await mcp.call(name, { sandbox_id: 'bench', ...args });
    if (res.isError) throw new Error(`${name}: ${contentText(res)}`);
    return res;
  };
  const steps = [];
  steps.push({ step: '1. run the failing tests', results: [await call('exec_command', { cmd: TEST })] });
  const reads = [];
  for (let offset = 1; ;) {
    const res = await call('file_read', { path: big.name, offset });
    reads.push(res);
    if (!res.structuredContent.truncated) break;
    offset = res.structuredContent.next_offset;
  }
  steps.push({ step: `2. read the 2,000-line ${big.name}`, results: reads });
  steps.push({ step: '3. fix the bug with file_edit', results: [await call('file_edit', { path: 'calc.py', edits: [{ old_string: 'return a - b', new_string: 'return (a + b)' }] })] });
  steps.push({ step: '4. rerun the tests', results: [await call('exec_command', { cmd: TEST })] });
  if (steps[3].results[0].structuredContent.exit_code !== 0) throw new Error('the fix did not make the tests pass');
  return steps.map(({ step, results }) => {
    const sum = { content: { claude: 0, cl100k: 0 }, structured: { claude: 0, cl100k: 0 }, largest: 0 };
    for (const res of results) {
      const t = resultTokens(res);
      for (const reader of ['content', 'structured']) for (const tok of ['claude', 'cl100k']) sum[reader][tok] += t[reader][tok];
      sum.largest = Math.max(sum.largest, t.content.claude, t.structured.claude);
    }
    return { step, calls: results.length, ...sum };
  });
}

const h = await Harness.create({ sandboxes: [], connect: false });
let rows;
try {
  rows = await session(h);
} finally {
  await h.teardown();
}
const total = { step: 'total', calls: 0, content: { claude: 0, cl100k: 0 }, structured: { claude: 0, cl100k: 0 }, largest: 0 };
for (const r of rows) {
  total.calls += r.calls;
  total.largest = Math.max(total.largest, r.largest);
  for (const reader of ['content', 'structured']) for (const tok of ['claude', 'cl100k']) total[reader][tok] += r[reader][tok];
}
rows.push(total);
if (process.argv.includes('--json')) {
  process.stdout.write(JSON.stringify({ bin: BIN, rows }, null, 2) + '\n');
} else {
  process.stdout.write(`binaries: ${BIN}\n\n| step | calls | content (Claude) | content (cl100k) | structuredContent (Claude) | structuredContent (cl100k) | largest result (Claude) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n`);
  for (const r of rows) {
    process.stdout.write(`| ${r.step} | ${r.calls} | ${r.content.claude} | ${r.content.cl100k} | ${r.structured.claude} | ${r.structured.cl100k} | ${r.largest} |\n`);
  }
}
