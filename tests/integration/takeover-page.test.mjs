// sbx-gateway's takeover page script (gateway/takeover-page.js) in node:vm
// with a small stand-in for the DOM, EventSource and fetch: what its screen
// shows for a shell's output (text, CR/LF, backspace, tab, cursor moves,
// CSI K/J/H, dropped colours, scrolling), and what it POSTs for keys (Ctrl-C
// included), a resize and the Return form. The page over a real gateway and
// box is in gateway.test.mjs; this checks the rendering it cannot see.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import vm from 'node:vm';
import { ROOT } from './helpers.mjs';

const SOURCE = fs.readFileSync(path.join(ROOT, 'gateway', 'takeover-page.js'), 'utf8');
const ROWS = 10;
const COLS = 40;

class Node {
  constructor(tag) {
    this.tag = tag;
    this.children = [];
    this.listeners = {};
    this.textContent = '';
    this.clientHeight = 8 + 16 * ROWS;
    this.clientWidth = 8 + 8 * COLS;
    this.value = '';
  }

  addEventListener(type, fn) { this.listeners[type] = fn; }
  append(...xs) { this.children.push(...xs); }
  replaceChildren(frag) { this.children = frag ? [...frag.children] : []; }
  remove() {}
  focus() {}
  getBoundingClientRect() { return { width: 8, height: 16 }; }
  get text() { return this.children.map((x) => (typeof x === 'string' ? x : x.textContent)).join(''); }
}

function load() {
  const els = Object.fromEntries(['box', 'status', 'screen', 'return', 'note'].map((id) => [id, new Node(id)]));
  const posts = [];
  let source;
  const ctx = {
    location: { pathname: '/takeover/box-0123456789ab', search: '?c=' + 'a'.repeat(32) },
    document: {
      getElementById: (id) => els[id],
      createElement: (tag) => new Node(tag),
      createDocumentFragment: () => new Node('#fragment'),
    },
    window: { addEventListener() {} },
    EventSource: class {
      constructor(url) { this.url = url; this.listeners = {}; source = this; }
      addEventListener(type, fn) { this.listeners[type] = fn; }
      close() { this.closed = true; }
    },
    fetch: async (url, init) => { posts.push({ url, body: JSON.parse(init.body) }); return { status: 204 }; },
    requestAnimationFrame: (fn) => fn(),
    TextDecoder, URLSearchParams, atob, Uint8Array, String, Math, Number, Array, JSON,
  };
  ctx.EventSource.CLOSED = 2;
  vm.runInNewContext(SOURCE, ctx);
  const out = (text) => source.listeners.output({ data: Buffer.from(text, 'utf8').toString('base64') });
  const lines = () => els.screen.text.split('\n').map((l) => l.trimEnd());
  return { els, posts, source, out, lines };
}

test('the page attaches with its box, capability and size', () => {
  const p = load();
  assert.equal(p.els.box.textContent, 'box-0123456789ab');
  assert.equal(p.source.url, `/takeover/box-0123456789ab/events?c=${'a'.repeat(32)}&rows=${ROWS}&cols=${COLS}`);
  assert.equal(p.lines().length, ROWS);
});

test('text, CR/LF, backspace and tab', () => {
  const p = load();
  p.out('hello\r\nworld\r\nabc\b\bX\r\na\tb\r\n');
  assert.deepEqual(p.lines().slice(0, 4), ['hello', 'world', 'aXc', 'a       b']);
});

test('cursor moves and erasing: CSI H, A-D, K, J; colours dropped', () => {
  const p = load();
  p.out('junk\r\nmore junk\x1b[2J\x1b[H12345\x1b[3D\x1b[K');
  assert.deepEqual(p.lines().slice(0, 2), ['12', '']);
  p.out('\x1b[5;10Hx\x1b[2Ay\x1b[1;1H\x1b[31mred\x1b[0m\x1b[?2004h \x1b]0;title\x07!');
  const l = p.lines();
  assert.equal(l[0], 'red !');
  assert.equal(l[2], '          y');
  assert.equal(l[4], '         x');
  p.out('\x1b[5;1H\x1b[J');
  assert.equal(p.lines()[4], '');
  assert.equal(p.lines()[2], '          y');
  p.out('\x1b[3;11H\x1b[1K');
  assert.equal(p.lines()[2], '');
});

test('a long line wraps, output past the last row scrolls', () => {
  const p = load();
  p.out('x'.repeat(COLS + 3) + '\r\n');
  assert.deepEqual(p.lines().slice(0, 2), ['x'.repeat(COLS), 'xxx']);
  for (let i = 0; i < ROWS + 2; i++) p.out(`line ${i}\r\n`);
  const l = p.lines();
  assert.equal(l[0], 'line 3');
  assert.equal(l[ROWS - 2], `line ${ROWS + 1}`);
  assert.equal(l[ROWS - 1], '');
});

test('UTF-8 split across events is put together', () => {
  const p = load();
  const bytes = Buffer.from('grüße', 'utf8');
  p.source.listeners.output({ data: bytes.subarray(0, 3).toString('base64') });
  p.source.listeners.output({ data: bytes.subarray(3).toString('base64') });
  assert.equal(p.lines()[0], 'grüße');
});

test('keys: text, Enter, Ctrl-C, arrows; the Return form posts the note', async () => {
  const p = load();
  const key = (k, extra = {}) => p.els.screen.listeners.keydown({ key: k, preventDefault() {}, ...extra });
  key('l');
  key('Enter');
  key('c', { ctrlKey: true });
  key('ArrowUp');
  key('Shift'); // nothing
  assert.deepEqual(p.posts.map((x) => x.body.keys), ['l', '\r', '\x03', '\x1b[A']);
  assert.ok(p.posts.every((x) => x.url === `/takeover/box-0123456789ab/input?c=${'a'.repeat(32)}`));
  p.els.note.value = 'all done';
  await p.els.return.listeners.submit({ preventDefault() {} });
  assert.deepEqual(p.posts.at(-1), { url: `/takeover/box-0123456789ab/return?c=${'a'.repeat(32)}`, body: { note: 'all done' } });
  assert.match(p.els.status.textContent, /Returned/);
  p.source.listeners.end({ data: JSON.stringify({ reason: 'returned', exitCode: 0, signal: 0 }) });
  assert.equal(p.source.closed, true);
  assert.match(p.els.status.textContent, /ended: returned/);
});
