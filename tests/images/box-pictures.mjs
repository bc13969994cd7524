// The boxes set's pictures (issue 21; docs/boxes.md "Pictures"), run by
// tests/images/run.sh right after it built the browser image, against its own
// sbxd (box_image = browser): sandbox_shot of a page served inside the box
// (target url: a real PNG of 1280x800 with non-uniform pixels, also as MCP
// image content), of the display :99, and an mp4 recording that ffprobe (in
// the box) accepts. Over the official MCP SDK client and
// `sandbox-mcp --set boxes --socket SOCKET`. Prints one `ok N - name` or
// `not ok N - name` line per check (run.sh counts them), then `# N passed, N failed`.
//
//   node tests/images/box-pictures.mjs SOCKET LOGFILE
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { McpSession, waitFor } from '../integration/helpers.mjs';
import { pngFacts } from '../integration/png.mjs';

const [socket, logPath] = process.argv.slice(2);
if (!socket || !logPath) {
  console.error('usage: box-pictures.mjs SOCKET LOGFILE');
  process.exit(2);
}
const mcp = await McpSession.connect({ socket, logPath, argv: ['--set', 'boxes', '--socket', socket] });
const exec = (id, cmd, extra = {}) => mcp.sc('sandbox_exec', { id, cmd, ...extra }, { timeout: 120000 });
let n = 0, failed = 0, box = null;

async function check(name, fn) {
  n++;
  try {
    await fn();
    console.log(`ok ${n} - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok ${n} - ${name}\n# ${String(e?.stack ?? e).split('\n').join('\n# ')}`);
  }
}

await check('a browser box serves a page on its own port', async () => {
  box = await mcp.sc('sandbox_start', { idleTimeoutMin: 0 }, { timeout: 600000 });
  await exec(box.id, 'cat > page.html <<"E"\n<html><body style="margin:0;background:#2a6"><h1 style="color:#fff;' +
    'font-size:80px">sbx box page</h1><div style="width:300px;height:200px;background:#c22"></div></body></html>\nE\n' +
    'node -e "require(\'http\').createServer((q,s)=>{s.setHeader(\'content-type\',\'text/html\');' +
    's.end(require(\'fs\').readFileSync(\'/work/page.html\'))}).listen(8080)"', { background: true });
  await waitFor(async () => (await exec(box.id, 'node -e "require(\'http\').get(\'http://127.0.0.1:8080/\',' +
    '(r)=>process.exit(r.statusCode===200?0:1)).on(\'error\',()=>process.exit(1))"')).exitCode === 0,
  { timeout: 30000, what: 'the page server in the box' });
});

await check('sandbox_shot target url: a real PNG of the page, as image content and as a file', async () => {
  assert.ok(box, 'no box');
  const r = await mcp.call('sandbox_shot', { id: box.id, target: 'url', url: 'http://127.0.0.1:8080/' }, { timeout: 120000 });
  assert.equal(r.isError, false, JSON.stringify(r.content));
  const sc = r.structuredContent;
  assert.equal(sc.kind, 'png');
  const file = fs.readFileSync(sc.path);
  const img = r.content.find((c) => c.type === 'image');
  assert.equal(img.mimeType, 'image/png');
  assert.ok(Buffer.from(img.data, 'base64').equals(file), 'image content is the file');
  const facts = pngFacts(file);
  assert.equal(facts.width, 1280);
  assert.equal(facts.height, 800);
  assert.ok(facts.distinct > 2, `pixels are not uniform (${facts.distinct} distinct values)`);
});

await check('sandbox_shot of display :99: a PNG with non-uniform pixels', async () => {
  assert.ok(box, 'no box');
  // The display: started by the box when its image has Xvfb; started here if it is not up yet.
  await exec(box.id, '[ -S /tmp/.X11-unix/X99 ] || { Xvfb :99 -screen 0 1280x800x24 -nolisten tcp ' +
    '>/work/.sbx/xvfb.log 2>&1 & sleep 2; }; DISPLAY=:99 setsid -f chromium --no-sandbox --disable-gpu --no-first-run ' +
    '--user-data-dir=/tmp/kiosk --kiosk http://127.0.0.1:8080/ >/dev/null 2>&1; sleep 5');
  const shot = await mcp.sc('sandbox_shot', { id: box.id }, { timeout: 120000 });
  const facts = pngFacts(fs.readFileSync(shot.path));
  assert.ok(facts.width > 0 && facts.height > 0);
  assert.ok(facts.distinct > 2, `the display is not uniform (${facts.distinct} distinct values)`);
});

await check('sandbox_shot record start/stop: an mp4 that ffprobe accepts', async () => {
  assert.ok(box, 'no box');
  const start = await mcp.sc('sandbox_shot', { id: box.id, record: 'start' });
  assert.deepEqual(start, { kind: 'recording', recording: true });
  assert.match(await mcp.err('sandbox_shot', { id: box.id, record: 'start' }), /already runs/);
  await exec(box.id, 'sleep 3');
  const rec = await mcp.sc('sandbox_shot', { id: box.id, record: 'stop' }, { timeout: 120000 });
  assert.equal(rec.kind, 'mp4');
  assert.ok(rec.bytes > 1000);
  // Back into the box for ffprobe (the host need not have it).
  await mcp.sc('sandbox_sync', { id: box.id, localPath: rec.path, dest: 'probe' });
  const probe = await exec(box.id, 'ffprobe -v error -show_entries stream=codec_name,width,height ' +
    '-show_entries format=duration -of default=nw=1 probe/' + path.basename(rec.path));
  assert.equal(probe.exitCode, 0, probe.stderr);
  assert.match(probe.stdout, /codec_name=h264/);
  assert.ok(Number(/duration=([\d.]+)/.exec(probe.stdout)[1]) >= 1, probe.stdout);
});

if (box) await mcp.sc('sandbox_stop', { id: box.id }).catch(() => {});
await mcp.close();
console.log(`# ${n - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
