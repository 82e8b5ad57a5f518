import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { Block } from '../../docs/pictures/blocks-svg.ts';
import { appHome, requestMessage, resizeForm, verifiedMessage } from '../../docs/pictures/fixtures.ts';
import { dejaVu, pictures, png } from '../../docs/pictures/render.ts';

// The README's pictures are drawn from the bot's own Block Kit output (docs/pictures/render.ts,
// `npm run docs:pictures`): every label, title and button the builders produce is in the picture, and the PNGs
// checked in are the size a fresh drawing has (a stale picture of a changed message is caught).
const dir = new URL('../../docs/pictures/', import.meta.url);
const fontsHere = existsSync('/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf');

/** The short texts a person reads on each surface: headers, field labels, chosen options, buttons. */
function shortTexts(blocks: Block[]): string[] {
  return blocks.flatMap((block) => [
    ...(block.type === 'header' && block.text ? [block.text.text] : []),
    ...(block.label ? [block.label.text] : []),
    ...(block.element?.initial_option ? [block.element.initial_option.text.text] : []),
    ...(block.element?.initial_value ? [block.element.initial_value] : []),
    ...[...(block.elements ?? []), ...(block.accessory ? [block.accessory] : [])]
      .filter((element) => element.type === 'button')
      .map((element) => (typeof element.text === 'string' ? element.text : (element.text?.text ?? ''))),
  ]);
}

/** The text an SVG draws, element by element. */
const drawn = (svg: string) =>
  [...svg.matchAll(/<text [^>]*>([^<]*)<\/text>/g)]
    .map((match) => match[1]!.replace(/&amp;/g, '&').replace(/&lt;/g, '<').replace(/&gt;/g, '>'))
    .join('\n');

/** A PNG's width and height, from its header. */
function size(bytes: Buffer): { width: number; height: number } {
  expect(bytes.subarray(1, 4).toString('latin1')).toBe('PNG');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

describe.skipIf(!fontsHere)('docs/pictures', () => {
  const fonts = dejaVu();
  const drawnNow = pictures(fonts);
  const sources: Record<string, Block[]> = {
    'request-message': requestMessage().blocks as Block[],
    'resize-modal': resizeForm().blocks as Block[],
    'app-home': appHome().blocks as Block[],
    'verified-message': verifiedMessage().blocks as Block[],
  };

  it('draws the request message, the resize modal, the App Home and a verified approval', () => {
    expect(drawnNow.map((picture) => picture.name)).toEqual(Object.keys(sources));
  });

  it.each(Object.keys(sources))(
    '%s shows every header, label, chosen value and button the builders made',
    (name) => {
      const texts = shortTexts(sources[name]!);
      expect(texts.length).toBeGreaterThan(2);
      const svg = drawnNow.find((picture) => picture.name === name)!.svg;
      for (const text of texts) expect(drawn(svg), text).toContain(text);
    },
  );

  it('the modal shows its title and both of its buttons', () => {
    const view = resizeForm();
    const text = drawn(drawnNow[1]!.svg);
    for (const label of [view.title.text, view.submit?.text, view.close?.text]) expect(text).toContain(label);
  });

  it.each(Object.keys(sources))('docs/pictures/%s.png is the picture drawn now (same size)', (name) => {
    const checkedIn = readFileSync(fileURLToPath(new URL(`${name}.png`, dir)));
    const fresh = png(drawnNow.find((picture) => picture.name === name)!.svg, fonts);
    expect(size(checkedIn)).toEqual(size(fresh));
  });
});
