import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Resvg, type ResvgRenderOptions, renderAsync } from '@resvg/resvg-js';

/** The PNG is drawn at this multiple of the SVG's size: sharp on high-density screens, still small (~40 KB). */
export const PNG_ZOOM = 1.5;

/** The fonts the charts are drawn with, shipped in the repository so every machine draws the same picture. */
const FONT_FILES = ['DejaVuSans-subset.ttf', 'DejaVuSans-Bold-subset.ttf'];

/** `assets/fonts` of the repository, from `src/charts/` or from the compiled `dist/src/charts/`. */
function fontDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let up = 0; up < 5; up++) {
    const candidate = join(dir, 'assets', 'fonts');
    if (existsSync(join(candidate, FONT_FILES[0] ?? ''))) return candidate;
    dir = dirname(dir);
  }
  throw new Error('chart fonts not found: assets/fonts is missing from the installation');
}

let options: ResvgRenderOptions | undefined;

function renderOptions(): ResvgRenderOptions {
  if (options) return options;
  const dir = fontDir();
  options = {
    fitTo: { mode: 'zoom', value: PNG_ZOOM },
    background: '#ffffff',
    // System fonts are not scanned: that costs tens of milliseconds per picture and differs between machines.
    font: {
      loadSystemFonts: false,
      fontFiles: FONT_FILES.map((f) => join(dir, f)),
      defaultFontFamily: 'DejaVu Sans',
      sansSerifFamily: 'DejaVu Sans',
    },
    logLevel: 'off',
  };
  return options;
}

/** A drawn picture: the PNG file and its size in pixels. */
export interface RenderedPng {
  png: Buffer;
  width: number;
  height: number;
}

/** SVG to PNG on libuv's thread pool (resvg, Rust), so the event loop keeps serving while it draws. */
export async function renderPng(svg: string): Promise<RenderedPng> {
  const image = await renderAsync(svg, renderOptions());
  return { png: image.asPng(), width: image.width, height: image.height };
}

/** SVG to raw RGBA pixels, row by row (for comparing pictures in tests). */
export function renderPixels(svg: string): { pixels: Buffer; width: number; height: number } {
  const image = new Resvg(svg, renderOptions()).render();
  return { pixels: image.pixels, width: image.width, height: image.height };
}
