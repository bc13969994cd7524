// sbx-gateway's takeover page: a terminal on the box's takeover pty.
// Output comes as server-sent events (base64 of the pty's bytes), keys and
// sizes go out as POSTs, and the form hands the box back with a note. The
// screen renders text, CR, LF, backspace, tab, cursor moves (CSI A B C D E F
// G H d f) and erasing (CSI J K X, P, @, L, M); colours and other attributes
// (CSI m), the alternate screen, scroll regions and OSC titles are dropped.
'use strict';

const parts = location.pathname.split('/');
const box = decodeURIComponent(parts[2] || '');
const cap = new URLSearchParams(location.search).get('c') || '';
const base = '/takeover/' + encodeURIComponent(box);
const q = '?c=' + encodeURIComponent(cap);
const screenEl = document.getElementById('screen');
const statusEl = document.getElementById('status');
document.getElementById('box').textContent = box;

let rows = 24;
let cols = 80;
let grid = [];
let cr = 0;
let cc = 0;
let esc = '';           // an escape sequence being read
let wrapNext = false;

function blank() {
  return new Array(cols).fill(' ');
}

function reset() {
  grid = [];
  for (let i = 0; i < rows; i++) grid.push(blank());
  cr = 0;
  cc = 0;
}

function clamp() {
  cr = Math.max(0, Math.min(rows - 1, cr));
  cc = Math.max(0, Math.min(cols - 1, cc));
  wrapNext = false;
}

function lineFeed() {
  if (cr === rows - 1) {
    grid.shift();
    grid.push(blank());
  } else {
    cr++;
  }
}

function put(ch) {
  if (wrapNext) {
    cc = 0;
    lineFeed();
    wrapNext = false;
  }
  grid[cr][cc] = ch;
  if (cc === cols - 1) wrapNext = true;
  else cc++;
}

function eraseLine(mode) {
  const row = grid[cr];
  const [from, to] = mode === 1 ? [0, cc + 1] : mode === 2 ? [0, cols] : [cc, cols];
  for (let i = from; i < to; i++) row[i] = ' ';
}

function eraseDisplay(mode) {
  if (mode === 2 || mode === 3) {
    for (let r = 0; r < rows; r++) grid[r] = blank();
    return;
  }
  eraseLine(mode);
  const [from, to] = mode === 1 ? [0, cr] : [cr + 1, rows];
  for (let r = from; r < to; r++) grid[r] = blank();
}

function csi(seq) {
  const final = seq[seq.length - 1];
  if (seq[0] === '?' || seq[0] === '>' || seq[0] === '=') return; // private modes: not rendered
  const args = seq.slice(0, -1).split(';').map((x) => parseInt(x, 10));
  const n = (i, d) => (Number.isFinite(args[i]) && args[i] > 0 ? args[i] : d);
  const row = grid[cr];
  switch (final) {
    case 'A': cr -= n(0, 1); break;
    case 'B': cr += n(0, 1); break;
    case 'C': cc += n(0, 1); break;
    case 'D': cc -= n(0, 1); break;
    case 'E': cr += n(0, 1); cc = 0; break;
    case 'F': cr -= n(0, 1); cc = 0; break;
    case 'G': cc = n(0, 1) - 1; break;
    case 'd': cr = n(0, 1) - 1; break;
    case 'H': case 'f': cr = n(0, 1) - 1; cc = n(1, 1) - 1; break;
    case 'J': eraseDisplay(Number.isFinite(args[0]) ? args[0] : 0); return;
    case 'K': eraseLine(Number.isFinite(args[0]) ? args[0] : 0); return;
    case 'X': for (let i = 0; i < n(0, 1) && cc + i < cols; i++) row[cc + i] = ' '; return;
    case 'P': row.splice(cc, n(0, 1)); while (row.length < cols) row.push(' '); return;
    case '@': for (let i = 0; i < n(0, 1); i++) row.splice(cc, 0, ' '); row.length = cols; return;
    case 'L': for (let i = 0; i < n(0, 1); i++) { grid.splice(cr, 0, blank()); grid.pop(); } return;
    case 'M': for (let i = 0; i < n(0, 1); i++) { grid.splice(cr, 1); grid.push(blank()); } return;
    default: return; // m (colours) and the rest: dropped
  }
  clamp();
}

// One character of output (a decoded code point).
function feed(ch) {
  if (esc) {
    esc += ch;
    if (esc[1] === '[') {
      if (esc.length > 2 && ch >= '@' && ch <= '~') { csi(esc.slice(2)); esc = ''; }
    } else if (esc[1] === ']') {
      if (ch === '\x07' || esc.endsWith('\x1b\\')) esc = ''; // OSC (window title): dropped
    } else if (esc.length >= 2 && !(esc[1] === '(' || esc[1] === ')' || esc[1] === '#') || esc.length >= 3) {
      esc = ''; // a two- or three-character escape: dropped
    }
    if (esc.length > 256) esc = '';
    return;
  }
  switch (ch) {
    case '\x1b': esc = ch; return;
    case '\r': cc = 0; wrapNext = false; return;
    case '\n': case '\x0b': case '\x0c': lineFeed(); wrapNext = false; return;
    case '\b': if (cc > 0) cc--; wrapNext = false; return;
    case '\t': cc = Math.min(cols - 1, (Math.floor(cc / 8) + 1) * 8); return;
    case '\x07': return;
    default:
      if (ch < ' ' || ch === '\x7f') return;
      put(ch);
  }
}

function render() {
  const frag = document.createDocumentFragment();
  for (let r = 0; r < rows; r++) {
    const line = grid[r];
    if (r === cr) {
      frag.append(line.slice(0, cc).join(''));
      const cur = document.createElement('span');
      cur.className = 'cursor';
      cur.textContent = line[cc];
      frag.append(cur, line.slice(cc + 1).join(''));
    } else {
      frag.append(line.join(''));
    }
    if (r < rows - 1) frag.append('\n');
  }
  screenEl.replaceChildren(frag);
}

let pendingRender = false;
function scheduleRender() {
  if (pendingRender) return;
  pendingRender = true;
  requestAnimationFrame(() => { pendingRender = false; render(); });
}

async function post(action, body) {
  const res = await fetch(base + '/' + action + q, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return res.status;
}

// The screen's size in characters, from a measured character.
function measure() {
  const probe = document.createElement('span');
  probe.textContent = 'M';
  screenEl.append(probe);
  const w = probe.getBoundingClientRect().width || 8;
  const h = probe.getBoundingClientRect().height || 16;
  probe.remove();
  const r = Math.max(4, Math.min(200, Math.floor((screenEl.clientHeight - 8) / h)));
  const c = Math.max(20, Math.min(500, Math.floor((screenEl.clientWidth - 8) / w)));
  return [r, c];
}

function resize() {
  const [r, c] = measure();
  if (r === rows && c === cols) return;
  const old = grid;
  rows = r;
  cols = c;
  reset();
  for (let i = 0; i < Math.min(rows, old.length); i++) {
    const src = old[old.length - Math.min(rows, old.length) + i];
    for (let j = 0; j < Math.min(cols, src.length); j++) grid[i][j] = src[j];
  }
  render();
  post('input', { rows, cols });
}

const KEYS = {
  Enter: '\r', Backspace: '\x7f', Tab: '\t', Escape: '\x1b',
  ArrowUp: '\x1b[A', ArrowDown: '\x1b[B', ArrowRight: '\x1b[C', ArrowLeft: '\x1b[D',
  Home: '\x1b[H', End: '\x1b[F', Delete: '\x1b[3~', PageUp: '\x1b[5~', PageDown: '\x1b[6~',
};

screenEl.addEventListener('keydown', (e) => {
  let keys = KEYS[e.key];
  if (!keys && e.key.length === 1) {
    if (e.ctrlKey && !e.altKey) {
      const code = e.key.toUpperCase().charCodeAt(0);
      if (code < 0x40 || code > 0x5f) return;
      keys = String.fromCharCode(code & 0x1f); // Ctrl-C is \x03: the box's pty makes it SIGINT
    } else if (!e.metaKey) {
      keys = (e.altKey ? '\x1b' : '') + e.key;
    }
  }
  if (!keys) return;
  e.preventDefault();
  post('input', { keys });
});

screenEl.addEventListener('paste', (e) => {
  e.preventDefault();
  post('input', { keys: e.clipboardData.getData('text').replace(/\r?\n/g, '\r') });
});

document.getElementById('return').addEventListener('submit', async (e) => {
  e.preventDefault();
  const status = await post('return', { note: document.getElementById('note').value });
  statusEl.textContent = status === 204 ? 'Returned to the agent. You may close this page.'
    : 'Could not return the box (HTTP ' + status + '): the takeover may have ended.';
});

function start() {
  [rows, cols] = measure();
  reset();
  render();
  const decoder = new TextDecoder();
  const events = new EventSource(base + '/events' + q + '&rows=' + rows + '&cols=' + cols);
  events.addEventListener('open', () => { statusEl.textContent = 'Attached: type in the terminal.'; screenEl.focus(); });
  events.addEventListener('output', (e) => {
    const bytes = Uint8Array.from(atob(e.data), (x) => x.charCodeAt(0));
    for (const ch of decoder.decode(bytes, { stream: true })) feed(ch);
    scheduleRender();
  });
  events.addEventListener('end', (e) => {
    events.close();
    const end = JSON.parse(e.data);
    statusEl.textContent = 'The terminal ended' + (end.reason ? ': ' + end.reason : '') + '.';
  });
  events.addEventListener('error', () => {
    if (events.readyState === EventSource.CLOSED) statusEl.textContent = 'The terminal is closed.';
  });
  window.addEventListener('resize', resize);
}

start();
