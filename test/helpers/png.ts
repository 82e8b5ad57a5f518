import { inflateSync } from 'node:zlib';

/** The eight bytes every PNG file starts with. */
export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** A decoded picture: RGBA, row by row. */
export interface Pixels {
  width: number;
  height: number;
  pixels: Buffer;
}

/** The IHDR of a PNG: size, bit depth and colour type (6 = RGBA, 2 = RGB). */
export function pngHeader(png: Buffer): {
  width: number;
  height: number;
  bitDepth: number;
  colorType: number;
} {
  if (!png.subarray(0, 8).equals(PNG_SIGNATURE)) throw new Error('not a PNG: wrong signature');
  if (png.toString('latin1', 12, 16) !== 'IHDR') throw new Error('not a PNG: IHDR is not the first chunk');
  return {
    width: png.readUInt32BE(16),
    height: png.readUInt32BE(20),
    bitDepth: png.readUInt8(24),
    colorType: png.readUInt8(25),
  };
}

/** Decodes an 8-bit, non-interlaced RGB or RGBA PNG (what resvg writes) into RGBA pixels. */
export function decodePng(png: Buffer): Pixels {
  const { width, height, bitDepth, colorType } = pngHeader(png);
  if (bitDepth !== 8 || (colorType !== 6 && colorType !== 2)) throw new Error('only 8-bit RGB(A) PNGs');
  const channels = colorType === 6 ? 4 : 3;
  const idat: Buffer[] = [];
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    if (type === 'IDAT') idat.push(png.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const out = Buffer.alloc(width * height * 4);
  let prev = Buffer.alloc(stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)] ?? 0;
    const line = Buffer.from(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)));
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? (line[i - channels] ?? 0) : 0;
      const b = prev[i] ?? 0;
      const c = i >= channels ? (prev[i - channels] ?? 0) : 0;
      let add = 0;
      if (filter === 1) add = a;
      else if (filter === 2) add = b;
      else if (filter === 3) add = (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        add = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      line[i] = ((line[i] ?? 0) + add) & 0xff;
    }
    for (let x = 0; x < width; x++) {
      for (let k = 0; k < 4; k++)
        out[(y * width + x) * 4 + k] = k < channels ? (line[x * channels + k] ?? 0) : 255;
    }
    prev = line;
  }
  return { width, height, pixels: out };
}

/** Pixels whose colour differs by more than `tolerance` in any channel, with the box around them. */
export function pixelDiff(
  a: Pixels,
  b: Pixels,
  tolerance = 48,
): { count: number; share: number; box?: { x0: number; y0: number; x1: number; y1: number } } {
  if (a.width !== b.width || a.height !== b.height) throw new Error('pictures of different sizes');
  let count = 0;
  let box: { x0: number; y0: number; x1: number; y1: number } | undefined;
  for (let y = 0; y < a.height; y++) {
    for (let x = 0; x < a.width; x++) {
      const i = (y * a.width + x) * 4;
      let differs = false;
      for (let k = 0; k < 4; k++) {
        if (Math.abs((a.pixels[i + k] ?? 0) - (b.pixels[i + k] ?? 0)) > tolerance) differs = true;
      }
      if (!differs) continue;
      count++;
      box = box
        ? {
            x0: Math.min(box.x0, x),
            y0: Math.min(box.y0, y),
            x1: Math.max(box.x1, x),
            y1: Math.max(box.y1, y),
          }
        : { x0: x, y0: y, x1: x, y1: y };
    }
  }
  return { count, share: count / (a.width * a.height), box };
}
