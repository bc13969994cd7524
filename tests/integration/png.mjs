// The PNG decoder of the picture checks (tests/images/box-pictures.mjs, run by
// make check-images; docs/boxes.md): no image library, node's zlib only.
import assert from 'node:assert/strict';
import zlib from 'node:zlib';

/* What PNG filter f (0-4) predicts a byte from: a to its left, b above, c above a. */
export function filterPredict(f, a, b, c) {
  const pa = Math.abs(b - c), pb = Math.abs(a - c), pc = Math.abs(a + b - 2 * c);
  return [0, a, b, (a + b) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? b : c][f];
}

/* The PNG's width, height and how many distinct colours its pixels have
 * (8-bit RGB or RGBA, non-interlaced: what Chromium and ffmpeg write),
 * decoded with the five PNG filters. */
export function pngFacts(buf) {
  assert.deepEqual([...buf.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
  let off = 8, width = 0, height = 0, bpp = 0;
  const idat = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off), type = buf.toString('latin1', off + 4, off + 8);
    const data = buf.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0); height = data.readUInt32BE(4);
      assert.equal(data[8], 8, 'bit depth');
      assert.equal(data[12], 0, 'not interlaced');
      bpp = { 2: 3, 6: 4 }[data[9]];
      assert.ok(bpp, `colour type ${data[9]}`);
    }
    if (type === 'IDAT') idat.push(data);
    off += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * bpp;
  let prev = Buffer.alloc(stride);
  const colours = new Set();
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)], line = Buffer.from(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)));
    for (let x = 0; x < stride; x++) {
      const a = x >= bpp ? line[x - bpp] : 0, b = prev[x], c = x >= bpp ? prev[x - bpp] : 0;
      line[x] = (line[x] + filterPredict(f, a, b, c)) & 0xff;
    }
    for (let x = 0; x < stride && colours.size < 1000; x += bpp * 7) colours.add(line.readUIntBE(x, 3));
    prev = line;
  }
  return { width, height, distinct: colours.size };
}
