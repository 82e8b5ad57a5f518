/**
 * Draws the README's pictures from the bot's real Block Kit output: the request message, the resize modal and the
 * App Home, each built by the builders in src/slack/blocks/ from fixtures.ts, drawn as SVG (blocks-svg.ts) and
 * rasterised by resvg. `npm run docs:pictures` writes docs/pictures/*.png; it needs the DejaVu fonts
 * (Debian/Ubuntu: fonts-dejavu-core).
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Resvg } from '@resvg/resvg-js';
import { type Block, type Fonts, homePicture, messagePicture, modalPicture } from './blocks-svg.ts';
import { appHome, NAMES, requestMessage, resizeForm, verifiedMessage } from './fixtures.ts';
import { loadFont } from './font.ts';

const FONT_DIRS = ['/usr/share/fonts/truetype/dejavu', '/usr/share/fonts/dejavu', '/usr/local/share/fonts'];

/** DejaVu Sans (regular and bold) and DejaVu Sans Mono, from the first folder that has them. */
export function dejaVu(): Fonts {
  const dir = FONT_DIRS.find((d) => existsSync(join(d, 'DejaVuSans.ttf')));
  if (!dir) throw new Error(`DejaVu fonts not found in ${FONT_DIRS.join(', ')}: install fonts-dejavu-core`);
  return {
    regular: loadFont(join(dir, 'DejaVuSans.ttf'), 'DejaVu Sans'),
    bold: loadFont(join(dir, 'DejaVuSans-Bold.ttf'), 'DejaVu Sans'),
    mono: loadFont(join(dir, 'DejaVuSansMono.ttf'), 'DejaVu Sans Mono'),
  };
}

/** Each picture's file name and its SVG. */
export function pictures(fonts: Fonts): { name: string; svg: string }[] {
  const blocks = <T>(view: T) => view as T & { blocks: Block[] };
  return [
    {
      name: 'request-message',
      svg: messagePicture(fonts, NAMES, blocks(requestMessage()), 'shop-prod', '09:02'),
    },
    { name: 'resize-modal', svg: modalPicture(fonts, NAMES, blocks(resizeForm())) },
    { name: 'app-home', svg: homePicture(fonts, NAMES, blocks(appHome())) },
    {
      name: 'verified-message',
      svg: messagePicture(fonts, NAMES, blocks(verifiedMessage()), 'shop-prod', '09:02'),
    },
  ];
}

/** The SVG as a PNG at twice its size (sharp on high-density screens), drawn with exactly the measured fonts. */
export function png(svg: string, fonts: Fonts): Buffer {
  const resvg = new Resvg(svg, {
    fitTo: { mode: 'zoom', value: 2 },
    font: {
      loadSystemFonts: false,
      fontFiles: [fonts.regular.file, fonts.bold.file, fonts.mono.file],
      defaultFontFamily: 'DejaVu Sans',
    },
  });
  return resvg.render().asPng();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const fonts = dejaVu();
  const out = fileURLToPath(new URL('./', import.meta.url));
  for (const { name, svg } of pictures(fonts)) {
    const file = join(out, `${name}.png`);
    const bytes = png(svg, fonts);
    writeFileSync(file, bytes);
    console.log(`${file}: ${bytes.length} bytes`);
  }
}
