/** Block Kit as a person reads it in Slack, in plain text: for the demo's printed conversation. */

interface TextObject {
  type?: string;
  text?: string;
}

interface Element {
  type?: string;
  text?: TextObject | string;
  value?: string;
  action_id?: string;
  alt_text?: string;
  initial_value?: string;
  initial_option?: { text?: TextObject };
  initial_options?: { text?: TextObject }[];
  options?: { text?: TextObject }[];
  elements?: Element[];
  url?: string;
}

interface Block {
  type?: string;
  text?: TextObject;
  fields?: TextObject[];
  accessory?: Element;
  elements?: Element[];
  label?: TextObject;
  element?: Element;
  hint?: TextObject;
  optional?: boolean;
  alt_text?: string;
}

const EMOJI: Record<string, string> = {
  white_check_mark: '✅',
  heavy_check_mark: '✔',
  warning: '⚠️',
  x: '❌',
  heavy_multiplication_x: '✖',
  zzz: '💤',
  no_entry: '⛔',
  no_entry_sign: '🚫',
  hourglass: '⏳',
  inbox_tray: '📥',
  outbox_tray: '📤',
  leftwards_arrow_with_hook: '↩',
  arrows_counterclockwise: '🔄',
  hourglass_flowing_sand: '⏳',
  clock3: '🕒',
  alarm_clock: '⏰',
  calendar: '📅',
  arrow_up: '⬆',
  arrow_down: '⬇',
  arrow_up_small: '🔼',
  arrow_down_small: '🔽',
  new: '🆕',
  moneybag: '💰',
  money_with_wings: '💸',
  heavy_dollar_sign: '💲',
  star: '⭐',
  information_source: 'ℹ️',
  lock: '🔒',
  recycle: '♻️',
  rocket: '🚀',
  wastebasket: '🗑',
  raising_hand: '🙋',
  memo: '📝',
  bar_chart: '📊',
  chart_with_upwards_trend: '📈',
  chart_with_downwards_trend: '📉',
  gear: '⚙️',
  question: '❓',
  robot_face: '🤖',
};

/** Slack's mrkdwn as read: mentions by name, links by their label, bold/italic markers and emoji codes resolved. */
export function readMrkdwn(text: string, names: Record<string, string> = {}): string {
  return text
    .replace(/<@([UW][A-Z0-9]+)(?:\|[^>]*)?>/g, (_m, id: string) => `@${names[id] ?? id}`)
    .replace(
      /<#([CG][A-Z0-9]+)(?:\|([^>]*))?>/g,
      (_m, id: string, label?: string) => `#${label || names[id] || id}`,
    )
    .replace(/<!date\^\d+\^[^|>]*\|([^>]*)>/g, '$1')
    .replace(/<!(here|channel|everyone)>/g, '@$1')
    .replace(/<([^|>]+)\|([^>]+)>/g, '$2')
    .replace(/<(https?:[^>]+)>/g, '$1')
    .replace(/(^|[\s(])\*([^*\n]+)\*(?=[\s).,:;!?]|$)/gm, '$1$2')
    .replace(/(^|[\s(])_([^_\n]+)_(?=[\s).,:;!?]|$)/gm, '$1$2')
    .replace(/(^|[\s(])~([^~\n]+)~(?=[\s).,:;!?]|$)/gm, '$1$2')
    .replace(/:([a-z0-9_+-]+):/g, (m, name: string) => EMOJI[name] ?? m)
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

function textOf(value: TextObject | string | undefined, names: Record<string, string>): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return readMrkdwn(value, names);
  return value.type === 'plain_text' ? (value.text ?? '') : readMrkdwn(value.text ?? '', names);
}

/** A button, a select or another interactive element as it shows on screen. */
function elementOf(element: Element, names: Record<string, string>): string {
  switch (element.type) {
    case 'button':
      return `[${textOf(element.text, names)}]`;
    case 'image':
      return `[image: ${element.alt_text ?? ''}]`;
    case 'static_select':
    case 'radio_buttons':
      return element.initial_option ? `▾ ${textOf(element.initial_option.text, names)}` : '▾ (choose)';
    case 'checkboxes': {
      const ticked = new Set((element.initial_options ?? []).map((o) => textOf(o.text, names)));
      return (element.options ?? [])
        .map((o) => `${ticked.has(textOf(o.text, names)) ? '☑' : '☐'} ${textOf(o.text, names)}`)
        .join('  ');
    }
    case 'plain_text_input':
      return `[ ${element.initial_value ?? ''} ]`;
    case 'rich_text_section':
    case 'rich_text_preformatted':
    case 'rich_text_quote':
    case 'rich_text_list':
      return (element.elements ?? []).map((e) => elementOf(e, names)).join('');
    case 'text':
      return typeof element.text === 'string' ? element.text : '';
    case 'link':
      return typeof element.text === 'string' ? element.text : (element.url ?? '');
    case 'user':
      return `@${names[(element as { user_id?: string }).user_id ?? ''] ?? 'someone'}`;
    case 'emoji':
      return EMOJI[(element as { name?: string }).name ?? ''] ?? '';
    default:
      return textOf(element.text, names);
  }
}

/** One block as lines of text. */
function blockLines(block: Block, names: Record<string, string>): string[] {
  switch (block.type) {
    case 'header':
      return [textOf(block.text, names).toUpperCase()];
    case 'section': {
      const lines = block.text ? textOf(block.text, names).split('\n') : [];
      for (const field of block.fields ?? []) lines.push(`  ${textOf(field, names).replace(/\n/g, ' ')}`);
      if (block.accessory) lines.push(`  ${elementOf(block.accessory, names)}`);
      return lines;
    }
    case 'context':
      return [(block.elements ?? []).map((e) => elementOf(e, names)).join('  ·  ')];
    case 'divider':
      return ['────────'];
    case 'actions':
      return [(block.elements ?? []).map((e) => elementOf(e, names)).join(' ')];
    case 'input': {
      const label = `${textOf(block.label, names)}${block.optional ? '' : ' *'}`;
      const lines = [`${label}: ${block.element ? elementOf(block.element, names) : ''}`];
      if (block.hint) lines.push(`  (${textOf(block.hint, names)})`);
      return lines;
    }
    case 'image':
      return [`[image: ${block.alt_text ?? ''}]`];
    case 'rich_text':
      return (block.elements ?? []).map((e) => elementOf(e, names));
    default:
      return block.text ? [textOf(block.text, names)] : [];
  }
}

/** A message's blocks as text; the fallback `text` when it has none. */
export function renderMessage(
  message: { text?: string; blocks?: unknown },
  names: Record<string, string> = {},
): string {
  const blocks = Array.isArray(message.blocks) ? (message.blocks as Block[]) : [];
  if (blocks.length === 0) return readMrkdwn(message.text ?? '', names);
  return blocks.flatMap((block) => blockLines(block, names)).join('\n');
}

/** A modal: its title, then its blocks. */
export function renderModal(view: Record<string, unknown>, names: Record<string, string> = {}): string {
  const title = textOf(view.title as TextObject | undefined, names);
  const submit = view.submit ? `   [${textOf(view.submit as TextObject, names)}]` : '';
  return [
    `┌ ${title}${submit}`,
    ...renderMessage({ blocks: view.blocks }, names)
      .split('\n')
      .map((l) => `│ ${l}`),
  ].join('\n');
}
