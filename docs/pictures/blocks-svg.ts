/**
 * Block Kit drawn as SVG, the way Slack's desktop client lays it out (light theme): a message in a channel, a modal
 * and an App Home. Only what the bot's builders produce is drawn: header, section (with a button accessory),
 * context, actions, divider and input blocks with text inputs, selects, checkboxes and date pickers. Text is
 * measured with the font's own advance widths and wrapped here, since SVG does not wrap.
 */
import type { FontMetrics } from './font.ts';

/** The three fonts the pictures use. */
export interface Fonts {
  regular: FontMetrics;
  bold: FontMetrics;
  mono: FontMetrics;
}

/** How ids the blocks mention read in Slack (`U0DEV` → `dana`, `C0PROD` → `shop-prod`). */
export type Names = Record<string, string>;

// Slack's light theme.
const INK = '#1d1c1d';
const GREY = '#616061';
const FAINT = '#9a999a';
const LINE = '#dddddd';
const LINK = '#1264a3';
const GREEN = '#007a5a';
const RED = '#e01e5a';

/** Glyphs the fonts have for the emoji the bot writes, drawn in a colour of their own. */
const EMOJI: Record<string, { glyph: string; color: string }> = {
  hourglass_flowing_sand: { glyph: '◷', color: '#d59b27' },
  hourglass: { glyph: '◷', color: '#d59b27' },
  white_check_mark: { glyph: '✔', color: '#2eb67d' },
  heavy_check_mark: { glyph: '✔', color: '#2eb67d' },
  x: { glyph: '✖', color: RED },
  warning: { glyph: '⚠', color: '#e8912d' },
  inbox_tray: { glyph: '↧', color: LINK },
  outbox_tray: { glyph: '↥', color: LINK },
  arrow_up: { glyph: '↑', color: LINK },
  arrow_down: { glyph: '↓', color: LINK },
  zzz: { glyph: '☾', color: GREY },
  no_entry: { glyph: '⊘', color: RED },
  no_entry_sign: { glyph: '⊘', color: RED },
  leftwards_arrow_with_hook: { glyph: '↩', color: LINK },
  calendar: { glyph: '▦', color: GREY },
  alarm_clock: { glyph: '◷', color: RED },
  clock3: { glyph: '◷', color: GREY },
  lock: { glyph: '▣', color: '#d59b27' },
};

type Kind = 'text' | 'bold' | 'italic' | 'code' | 'mention' | 'emoji';

/** A piece of text in one style. */
interface Run {
  text: string;
  kind: Kind;
  bold: boolean;
  italic: boolean;
  color?: string;
}

/** Text with its size and colour, ready to be wrapped. */
interface TextStyle {
  size: number;
  color: string;
  lineHeight: number;
  bold?: boolean;
}

const escapeXml = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** An SVG picture built top to bottom: elements are added at absolute positions, the height known at the end. */
export class Canvas {
  private readonly parts: string[] = [];

  constructor(
    readonly fonts: Fonts,
    readonly names: Names,
    readonly width: number,
  ) {}

  add(svg: string): void {
    this.parts.push(svg);
  }

  rect(x: number, y: number, w: number, h: number, attrs: string): void {
    this.add(`<rect x="${x}" y="${y}" width="${w}" height="${h}" ${attrs}/>`);
  }

  text(
    x: number,
    baseline: number,
    text: string,
    size: number,
    color: string,
    options: TextOptions = {},
  ): void {
    const font = options.mono ? this.fonts.mono : options.bold ? this.fonts.bold : this.fonts.regular;
    const weight = options.bold ? ' font-weight="bold"' : '';
    const style = options.italic ? ' font-style="italic"' : '';
    const anchor = options.anchor ? ` text-anchor="${options.anchor}"` : '';
    this.add(
      `<text x="${x.toFixed(1)}" y="${baseline.toFixed(1)}" font-family="${font.family}" font-size="${size}"${weight}${style}${anchor} fill="${color}" xml:space="preserve">${escapeXml(text)}</text>`,
    );
  }

  measure(text: string, size: number, options: TextOptions = {}): number {
    const font = options.mono ? this.fonts.mono : options.bold ? this.fonts.bold : this.fonts.regular;
    return font.width(text, size);
  }

  /** What was drawn so far, to be placed in another canvas. */
  body(): string {
    return this.parts.join('\n');
  }

  /** The whole picture, `height` tall, on `background`. */
  svg(height: number, background: string): string {
    return [
      `<svg xmlns="http://www.w3.org/2000/svg" width="${this.width}" height="${Math.ceil(height)}" viewBox="0 0 ${this.width} ${Math.ceil(height)}">`,
      `<rect width="100%" height="100%" fill="${background}"/>`,
      ...this.parts,
      '</svg>',
    ].join('\n');
  }
}

interface TextOptions {
  bold?: boolean;
  italic?: boolean;
  mono?: boolean;
  anchor?: 'end' | 'middle';
}

/** Reads one line of mrkdwn into styled runs: `*bold*`, `_italic_`, `` `code` ``, mentions, dates, `:emoji:`. */
function parseLine(line: string, names: Names): Run[] {
  const runs: Run[] = [];
  let bold = false;
  let italic = false;
  const push = (text: string, kind: Kind, color?: string) => {
    if (text !== '') runs.push({ text, kind, bold, italic, ...(color ? { color } : {}) });
  };
  const token = /`([^`]+)`|<([^>]+)>|:([a-z0-9_+-]+):|\*|(?<![\w])_|_(?![\w])/g;
  let last = 0;
  for (const match of line.matchAll(token)) {
    push(line.slice(last, match.index), 'text');
    last = match.index + match[0].length;
    if (match[1] !== undefined) push(match[1], 'code');
    else if (match[2] !== undefined) {
      const [target = '', label] = match[2].split('|');
      if (target.startsWith('@')) push(`@${names[target.slice(1)] ?? target.slice(1)}`, 'mention');
      else if (target.startsWith('#')) push(`#${names[target.slice(1)] ?? target.slice(1)}`, 'mention');
      else if (target.startsWith('!subteam^')) {
        const id = target.slice('!subteam^'.length);
        push(`@${names[id] ?? id}`, 'mention');
      } else if (target.startsWith('!date^')) push(label ?? target, 'text');
      else if (target.startsWith('!')) push(`@${target.slice(1)}`, 'mention');
      else push(label ?? target, 'text', LINK);
    } else if (match[3] !== undefined) {
      const emoji = EMOJI[match[3]];
      if (emoji) push(emoji.glyph, 'emoji', emoji.color);
      else push(match[0], 'text');
    } else if (match[0] === '*') bold = !bold;
    else italic = !italic;
  }
  push(line.slice(last), 'text');
  return runs;
}

/** A word (or a space) with its style and width. */
interface Piece {
  text: string;
  run: Run;
  width: number;
  space: boolean;
}

/**
 * Draws mrkdwn (or plain text) wrapped to `width` at (x, y); returns the height used. A line starting with "• " wraps
 * under its text, as Slack's lists do; a line starting with "> " is a quote, drawn indented beside a grey bar.
 */
export function drawText(
  canvas: Canvas,
  source: string,
  x: number,
  y: number,
  width: number,
  style: TextStyle,
  mrkdwn = true,
): number {
  let top = y;
  for (const sourceLine of source.split('\n')) {
    const quote = mrkdwn && sourceLine.startsWith('> ') ? QUOTE_INDENT : 0;
    const line = quote ? sourceLine.slice(2) : sourceLine;
    const lineTop = top;
    const runs = (
      mrkdwn
        ? parseLine(line, canvas.names)
        : [{ text: line, kind: 'text' as const, bold: false, italic: false }]
    ).filter((run) => run.kind !== 'emoji' || canvas.fonts.regular.has(run.text));
    const bullet = /^• /.test(line) ? canvas.measure('• ', style.size) : 0;
    const pieces: Piece[] = runs.flatMap((run) =>
      run.text
        .split(/( )/)
        .filter((text) => text !== '')
        .map((text) => ({ text, run, width: pieceWidth(canvas, text, run, style), space: text === ' ' })),
    );
    const lines: Piece[][] = [[]];
    let used = 0;
    for (const piece of pieces) {
      const current = lines[lines.length - 1]!;
      const indent = (lines.length > 1 ? bullet : 0) + quote;
      if (!piece.space && used + piece.width > width - indent && current.length > 0) {
        while (current.length > 0 && current[current.length - 1]!.space) current.pop();
        lines.push([piece]);
        used = piece.width;
      } else if (!(piece.space && current.length === 0 && lines.length > 1)) {
        current.push(piece);
        used += piece.width;
      }
    }
    lines.forEach((pieces, index) => {
      let left = x + quote + (index > 0 ? bullet : 0);
      const baseline = top + style.lineHeight * 0.5 + style.size * 0.36;
      for (const piece of mergePlain(pieces)) {
        drawPiece(canvas, piece, left, baseline, style);
        left += piece.width;
      }
      top += style.lineHeight;
    });
    if (quote) canvas.rect(x, lineTop + 2, 4, top - lineTop - 4, 'rx="2" fill="#DDDDDD"');
  }
  return top - y;
}

/** How far a quoted line ("> …") stands in from its bar, as Slack draws block quotes. */
const QUOTE_INDENT = 16;

/** Neighbouring words of the same plain style as one piece, so the rasteriser spaces and kerns them itself. */
function mergePlain(pieces: Piece[]): Piece[] {
  const merged: Piece[] = [];
  for (const piece of pieces) {
    const last = merged[merged.length - 1];
    const plain = (p: Piece) =>
      p.run.kind === 'text' || (p.space && p.run.kind !== 'code' && p.run.kind !== 'mention');
    if (
      last &&
      plain(last) &&
      plain(piece) &&
      last.run.bold === piece.run.bold &&
      last.run.italic === piece.run.italic &&
      last.run.color === piece.run.color
    )
      merged[merged.length - 1] = { ...last, text: last.text + piece.text, width: last.width + piece.width };
    else merged.push(piece);
  }
  return merged;
}

function pieceWidth(canvas: Canvas, text: string, run: Run, style: TextStyle): number {
  if (run.kind === 'code')
    return canvas.measure(text, style.size * 0.85, { mono: true }) + (text === ' ' ? 0 : 6);
  return canvas.measure(text, style.size, { bold: run.bold || style.bold === true });
}

function drawPiece(canvas: Canvas, piece: Piece, x: number, baseline: number, style: TextStyle): void {
  const { run } = piece;
  const bold = run.bold || style.bold === true;
  if (run.kind === 'code') {
    if (!piece.space)
      canvas.rect(
        x,
        baseline - style.size * 0.95,
        piece.width,
        style.size * 1.3,
        'rx="3" fill="#f8f8f8" stroke="#e0e0e0"',
      );
    canvas.text(x + 3, baseline, piece.text, style.size * 0.85, RED, { mono: true });
    return;
  }
  if (run.kind === 'mention' && !piece.space) {
    canvas.rect(
      x - 1,
      baseline - style.size * 0.95,
      piece.width + 2,
      style.size * 1.3,
      'rx="3" fill="#e8f5fa"',
    );
    canvas.text(x, baseline, piece.text, style.size, LINK, { bold });
    return;
  }
  canvas.text(x, baseline, piece.text, style.size, run.color ?? style.color, { bold, italic: run.italic });
}

/** Block Kit as the bot builds it (a loose shape: only what is drawn is read). */
export interface Block {
  type: string;
  text?: { type: string; text: string };
  fields?: { type: string; text: string }[];
  accessory?: Element;
  elements?: Element[];
  label?: { text: string };
  element?: Element;
  hint?: { text: string };
  optional?: boolean;
}

interface Element {
  type: string;
  text?: { type?: string; text: string } | string;
  style?: string;
  placeholder?: { text: string };
  initial_value?: string;
  initial_option?: { text: { text: string } };
  initial_date?: string;
  options?: { text: { text: string } }[];
  initial_options?: { text: { text: string } }[];
  multiline?: boolean;
}

const BODY: TextStyle = { size: 15, color: INK, lineHeight: 22 };
const SMALL: TextStyle = { size: 13, color: GREY, lineHeight: 18 };
const HEADER: TextStyle = { size: 18, color: INK, lineHeight: 26, bold: true };

const elementText = (element: Element) =>
  typeof element.text === 'string' ? element.text : (element.text?.text ?? '');

/** A button as Slack draws it; returns its width. */
export function drawButton(canvas: Canvas, element: Element, x: number, y: number): number {
  const label = elementText(element);
  const width = buttonWidth(canvas, element);
  const fill = element.style === 'primary' ? GREEN : element.style === 'danger' ? RED : '#ffffff';
  const ink = element.style ? '#ffffff' : INK;
  const stroke = element.style ? '' : ' stroke="#c4c4c4"';
  canvas.rect(x, y, width, 32, `rx="4" fill="${fill}"${stroke}`);
  canvas.text(x + width / 2, y + 21, label, 14, ink, { bold: true, anchor: 'middle' });
  return width;
}

function buttonWidth(canvas: Canvas, element: Element): number {
  return Math.round(canvas.measure(elementText(element), 14, { bold: true }) + 28);
}

/** Draws the blocks from top to bottom at `x`, `width` wide; returns the height used. */
export function drawBlocks(canvas: Canvas, blocks: Block[], x: number, y: number, width: number): number {
  let top = y;
  for (const block of blocks) {
    top += drawBlock(canvas, block, x, top, width) + 8;
  }
  return top - y - 8;
}

function drawBlock(canvas: Canvas, block: Block, x: number, y: number, width: number): number {
  switch (block.type) {
    case 'header':
      return drawText(canvas, block.text?.text ?? '', x, y + 2, width, HEADER, false) + 2;
    case 'divider':
      canvas.rect(x, y + 8, width, 1, `fill="${LINE}"`);
      return 17;
    case 'context': {
      const text = (block.elements ?? []).map((element) => elementText(element)).join('  ');
      return drawText(canvas, text, x, y, width, SMALL);
    }
    case 'actions': {
      let left = x;
      for (const element of block.elements ?? []) {
        if (element.type === 'button') left += drawButton(canvas, element, left, y + 4) + 8;
      }
      return 40;
    }
    case 'section': {
      const accessory = block.accessory?.type === 'button' ? block.accessory : undefined;
      const room = accessory ? width - buttonWidth(canvas, accessory) - 16 : width;
      let height = block.text
        ? drawText(canvas, block.text.text, x, y, room, BODY, block.text.type === 'mrkdwn')
        : 0;
      for (const field of block.fields ?? [])
        height += drawText(canvas, field.text, x, y + height, room, BODY);
      if (accessory) drawButton(canvas, accessory, x + width - buttonWidth(canvas, accessory), y);
      return Math.max(height, accessory ? 36 : 0);
    }
    case 'input':
      return drawInput(canvas, block, x, y, width);
    default:
      return 0;
  }
}

/** A form field: its label, the element, and the hint under it. */
function drawInput(canvas: Canvas, block: Block, x: number, y: number, width: number): number {
  let top = y + 4;
  const label = block.label?.text ?? '';
  canvas.text(x, top + 15, label, 15, INK, { bold: true });
  if (block.optional)
    canvas.text(x + canvas.measure(`${label} `, 15, { bold: true }), top + 15, '(optional)', 14, FAINT);
  top += 28;
  const element = block.element ?? { type: 'plain_text_input' };
  switch (element.type) {
    case 'checkboxes':
    case 'radio_buttons':
      for (const option of element.options ?? []) {
        const checked = (element.initial_options ?? []).some((o) => o.text.text === option.text.text);
        const shape = element.type === 'checkboxes' ? 'rx="4"' : 'rx="9"';
        canvas.rect(
          x,
          top + 2,
          18,
          18,
          `${shape} fill="${checked ? LINK : '#ffffff'}" stroke="${checked ? LINK : '#8d8d8d'}"`,
        );
        if (checked) canvas.text(x + 9, top + 16, '✓', 14, '#ffffff', { bold: true, anchor: 'middle' });
        top += drawText(canvas, option.text.text, x + 28, top, width - 28, BODY, false) + 4;
      }
      break;
    case 'datepicker': {
      const value = element.initial_date ?? 'Select a date';
      canvas.rect(x, top, 220, 40, 'rx="6" fill="#ffffff" stroke="#bcbcbc"');
      canvas.text(x + 12, top + 25, '▦', 15, GREY);
      canvas.text(x + 36, top + 25, value, 15, element.initial_date ? INK : FAINT);
      top += 44;
      break;
    }
    default: {
      const height = element.multiline ? 84 : 40;
      canvas.rect(x, top, width, height, 'rx="6" fill="#ffffff" stroke="#bcbcbc"');
      const select = element.type === 'static_select';
      const value = select ? element.initial_option?.text.text : element.initial_value;
      const shown = value ?? element.placeholder?.text ?? '';
      canvas.text(x + 12, top + 25, shown, 15, value ? INK : FAINT);
      if (select) canvas.text(x + width - 14, top + 25, '▾', 15, GREY, { anchor: 'end' });
      top += height + 4;
    }
  }
  if (block.hint) top += drawText(canvas, block.hint.text, x, top + 2, width, SMALL, false) + 2;
  return top - y;
}

/** A message in a channel, as Slack shows it: the channel's name above, the app's avatar, name and time. */
export function messagePicture(
  fonts: Fonts,
  names: Names,
  message: { blocks: Block[] },
  channel: string,
  time: string,
): string {
  const canvas = new Canvas(fonts, names, 760);
  canvas.rect(0, 0, 760, 52, 'fill="#ffffff"');
  canvas.text(20, 32, `# ${channel}`, 17, INK, { bold: true });
  canvas.rect(0, 52, 760, 1, `fill="${LINE}"`);
  const top = 72;
  canvas.rect(20, top, 36, 36, 'rx="6" fill="#1d3557"');
  canvas.text(38, top + 26, '☁', 22, '#ffffff', { anchor: 'middle' });
  canvas.text(68, top + 14, 'cloudops', 15, INK, { bold: true });
  const nameWidth = canvas.measure('cloudops', 15, { bold: true });
  canvas.rect(68 + nameWidth + 6, top + 2, 30, 15, 'rx="3" fill="#e8e8e8"');
  canvas.text(68 + nameWidth + 21, top + 13, 'APP', 10, GREY, { bold: true, anchor: 'middle' });
  canvas.text(68 + nameWidth + 44, top + 14, time, 12, GREY);
  const height = drawBlocks(canvas, message.blocks, 68, top + 26, 660);
  return canvas.svg(top + 26 + height + 24, '#ffffff');
}

/** A modal over a dimmed client: its title, close cross, blocks and the submit and close buttons. */
export function modalPicture(
  fonts: Fonts,
  names: Names,
  view: { title?: { text: string }; submit?: { text: string }; close?: { text: string }; blocks: Block[] },
): string {
  const width = 600;
  const canvas = new Canvas(fonts, names, width);
  const left = 30;
  const inner = width - 2 * left;
  const parts = new Canvas(fonts, names, width);
  const bodyHeight = drawBlocks(parts, view.blocks, left + 24, 30 + 64 + 20, inner - 48);
  const panelHeight = 64 + 20 + bodyHeight + 24 + 72;
  canvas.rect(left, 30, inner, panelHeight, 'rx="10" fill="#ffffff" stroke="#c8c8c8"');
  canvas.text(left + 24, 30 + 40, view.title?.text ?? '', 20, INK, { bold: true });
  canvas.text(left + inner - 24, 30 + 40, '✕', 18, GREY, { anchor: 'end' });
  canvas.rect(left, 30 + 64, inner, 1, `fill="${LINE}"`);
  canvas.add(parts.body());
  const footer = 30 + panelHeight - 72;
  canvas.rect(left, footer, inner, 1, `fill="${LINE}"`);
  const submit = { type: 'button', text: view.submit?.text ?? 'Submit', style: 'primary' };
  const close = { type: 'button', text: view.close?.text ?? 'Cancel' };
  const submitWidth = buttonWidth(canvas, submit);
  const closeWidth = buttonWidth(canvas, close);
  drawButton(canvas, submit, left + inner - 24 - submitWidth, footer + 20);
  drawButton(canvas, close, left + inner - 24 - submitWidth - 10 - closeWidth, footer + 20);
  return canvas.svg(30 + panelHeight + 30, '#8b8a8b');
}

/** The app's Home tab: its name and tabs above the page the bot published. */
export function homePicture(fonts: Fonts, names: Names, view: { blocks: Block[] }): string {
  const canvas = new Canvas(fonts, names, 760);
  canvas.rect(0, 0, 760, 96, 'fill="#ffffff"');
  canvas.rect(20, 16, 36, 36, 'rx="6" fill="#1d3557"');
  canvas.text(38, 42, '☁', 22, '#ffffff', { anchor: 'middle' });
  canvas.text(68, 40, 'cloudops', 18, INK, { bold: true });
  canvas.text(20, 84, 'Home', 15, INK, { bold: true });
  canvas.rect(20, 93, canvas.measure('Home', 15, { bold: true }), 3, `fill="${GREEN}"`);
  canvas.text(84, 84, 'About', 15, GREY);
  canvas.rect(0, 96, 760, 1, `fill="${LINE}"`);
  const height = drawBlocks(canvas, view.blocks, 24, 116, 712);
  return canvas.svg(116 + height + 28, '#ffffff');
}
