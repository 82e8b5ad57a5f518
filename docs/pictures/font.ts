import { readFileSync } from 'node:fs';

/** A TrueType font's advance widths, read from its own tables, so that text can be wrapped before it is drawn. */
export interface FontMetrics {
  /** The file, handed to the rasteriser so that it draws with the font that was measured. */
  file: string;
  /** The family name the SVG asks for. */
  family: string;
  /** Width of `text` at `size` pixels. */
  width(text: string, size: number): number;
  /** Whether the font has a glyph for the character (emoji mostly have none). */
  has(char: string): boolean;
}

/** Reads the `head`, `hhea`, `hmtx` and `cmap` (format 4: the Basic Multilingual Plane) tables of a .ttf file. */
export function loadFont(file: string, family: string): FontMetrics {
  const data = readFileSync(file);
  const tables = new Map<string, number>();
  const count = data.readUInt16BE(4);
  for (let i = 0; i < count; i++) {
    const entry = 12 + i * 16;
    tables.set(data.toString('latin1', entry, entry + 4), data.readUInt32BE(entry + 8));
  }
  const table = (tag: string) => {
    const offset = tables.get(tag);
    if (offset === undefined) throw new Error(`${file}: no ${tag} table`);
    return offset;
  };
  const unitsPerEm = data.readUInt16BE(table('head') + 18);
  const metricsCount = data.readUInt16BE(table('hhea') + 34);
  const hmtx = table('hmtx');
  const advance = (glyph: number) => data.readUInt16BE(hmtx + 4 * Math.min(glyph, metricsCount - 1));

  const cmap = table('cmap');
  let format4: number | undefined;
  for (let i = 0; i < data.readUInt16BE(cmap + 2); i++) {
    const record = cmap + 4 + i * 8;
    const platform = data.readUInt16BE(record);
    const encoding = data.readUInt16BE(record + 2);
    const sub = cmap + data.readUInt32BE(record + 4);
    if (platform === 3 && encoding === 1 && data.readUInt16BE(sub) === 4) format4 = sub;
  }
  if (format4 === undefined) throw new Error(`${file}: no Unicode BMP cmap`);
  const segments = data.readUInt16BE(format4 + 6) / 2;
  const ends = format4 + 14;
  const starts = ends + segments * 2 + 2;
  const deltas = starts + segments * 2;
  const rangeOffsets = deltas + segments * 2;
  const glyphOf = (code: number): number => {
    for (let s = 0; s < segments; s++) {
      if (code > data.readUInt16BE(ends + s * 2)) continue;
      const start = data.readUInt16BE(starts + s * 2);
      if (code < start) return 0;
      const delta = data.readInt16BE(deltas + s * 2);
      const rangeOffset = data.readUInt16BE(rangeOffsets + s * 2);
      if (rangeOffset === 0) return (code + delta) & 0xffff;
      const at = rangeOffsets + s * 2 + rangeOffset + (code - start) * 2;
      const glyph = data.readUInt16BE(at);
      return glyph === 0 ? 0 : (glyph + delta) & 0xffff;
    }
    return 0;
  };

  const widths = new Map<string, number>();
  const unitWidth = (char: string) => {
    let width = widths.get(char);
    if (width === undefined) {
      const code = char.codePointAt(0) ?? 0;
      width = advance(code > 0xffff ? 0 : glyphOf(code));
      widths.set(char, width);
    }
    return width;
  };
  return {
    file,
    family,
    width: (text, size) => ([...text].reduce((sum, char) => sum + unitWidth(char), 0) * size) / unitsPerEm,
    has: (char) => {
      const code = char.codePointAt(0) ?? 0;
      return code <= 0xffff && glyphOf(code) !== 0;
    },
  };
}
