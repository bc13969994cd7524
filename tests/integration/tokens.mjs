// Token counts of what MCP clients pass to a model, with two real tokenizers
// from npm: Claude's (@anthropic-ai/tokenizer) and OpenAI's cl100k_base
// (gpt-tokenizer). Also the three kinds of real text the token budget is
// measured on, about 2,000 lines each, taken from files every Debian host has:
// code (the head of the Python standard library's argparse.py), prose (the
// licence texts in /usr/share/common-licenses) and JSON (the installed
// packages of /var/lib/dpkg/status as pretty-printed records).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { countTokens as cl100kCount } from 'gpt-tokenizer/encoding/cl100k_base';

const require = createRequire(import.meta.url);
const { countTokens: claudeCount } = require('@anthropic-ai/tokenizer');

/* Tokens of a text with each tokenizer. */
export function tokens(text) {
  return { claude: claudeCount(text), cl100k: cl100kCount(text) };
}

/* What a client that reads `content` gives the model: its text blocks. */
export function contentText(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

/* What a client that reads `structuredContent` gives the model: its JSON. */
export function structuredText(result) {
  return result.structuredContent ? JSON.stringify(result.structuredContent) : contentText(result);
}

export function resultTokens(result) {
  return { content: tokens(contentText(result)), structured: tokens(structuredText(result)) };
}

export const LINES = 2000;

function headLines(text, n) {
  return text.split('\n').slice(0, n).join('\n') + '\n';
}

function pythonLib() {
  const dirs = fs.readdirSync('/usr/lib').filter((d) => /^python3\.\d+$/.test(d)).sort();
  for (const d of dirs.reverse()) {
    const p = path.join('/usr/lib', d, 'argparse.py');
    if (fs.existsSync(p)) return p;
  }
  throw new Error('no /usr/lib/python3.*/argparse.py on this host');
}

function code() {
  return headLines(fs.readFileSync(pythonLib(), 'utf8'), LINES);
}

function prose() {
  const dir = '/usr/share/common-licenses';
  const names = ['GPL-3', 'LGPL-2.1', 'MPL-2.0', 'GPL-2', 'Apache-2.0', 'Artistic', 'GFDL-1.3', 'MPL-1.1'];
  const text = names.filter((n) => fs.existsSync(path.join(dir, n)))
    .map((n) => fs.readFileSync(path.join(dir, n), 'utf8')).join('\n');
  if (text.split('\n').length < LINES) throw new Error(`fewer than ${LINES} lines of licences in ${dir}`);
  return headLines(text, LINES);
}

/* The installed packages as records, as many as fit in LINES lines of
 * JSON.stringify(records, null, 2): a valid JSON file of about LINES lines. */
function json() {
  const stanzas = fs.readFileSync('/var/lib/dpkg/status', 'utf8').split(/\n\n+/);
  const records = [];
  let text = '[]\n';
  for (const st of stanzas) {
    const f = {};
    for (const m of st.matchAll(/^([A-Za-z-]+): (.*)$/gm)) f[m[1]] = m[2];
    if (!f.Package) continue;
    records.push({
      package: f.Package, version: f.Version ?? '', architecture: f.Architecture ?? '',
      section: f.Section ?? '', priority: f.Priority ?? '', installed_size_kib: Number(f['Installed-Size'] ?? 0),
      maintainer: f.Maintainer ?? '', homepage: f.Homepage ?? '', description: f.Description ?? '',
      depends: (f.Depends ?? '').split(', ').filter(Boolean).slice(0, 6),
    });
    const next = JSON.stringify(records, null, 2) + '\n';
    if (next.split('\n').length - 1 > LINES) break;
    text = next;
  }
  return text;
}

/* {code, prose, json}: file name and text of each kind. */
export function realFiles() {
  return {
    code: { name: 'argparse_head.py', text: code() },
    prose: { name: 'licences.txt', text: prose() },
    json: { name: 'packages.json', text: json() },
  };
}
