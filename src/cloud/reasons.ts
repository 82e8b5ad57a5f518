/**
 * Turns whatever body the service answered with into one clean sentence a user can read. The API documents
 * no error shape, so every common one is understood: `{"detail": …}`, field lists, `non_field_errors`,
 * `message`, `error`, `errors`, nested objects, plain text, HTML pages and empty bodies.
 */

/** Longest reason shown to a user, in characters. */
export const MAX_REASON_LENGTH = 300;

/** What a body says: one sentence, plus per-field reasons when the body was a field list. */
export interface ParsedReason {
  reason: string;
  fields: Record<string, string[]>;
  /** False when the body said nothing readable and `reason` is the generic "answered HTTP n" sentence. */
  readable: boolean;
}

export interface ReasonOptions {
  /** Strings that must never reach a user (the API key); every occurrence is replaced. */
  secrets?: readonly (string | undefined)[];
}

/** Keys whose value is the message itself, in the order they are preferred. */
const MESSAGE_KEYS = ['detail', 'message', 'error', 'error_description', 'title', 'reason', 'msg'] as const;
/** Keys that carry codes or metadata, never shown as a field reason. */
const IGNORED_KEYS = new Set(['code', 'status', 'status_code', 'type', 'instance', 'request_id', 'trace_id']);

/** One user-facing sentence from an error answer; see {@link parseReason}. */
export function reasonFromBody(
  status: number,
  contentType: string | undefined,
  bodyText: string,
  options: ReasonOptions = {},
): string {
  return parseReason(status, contentType, bodyText, options).reason;
}

/** The sentence and the field list of an error answer. Never throws. */
export function parseReason(
  status: number,
  contentType: string | undefined,
  bodyText: string,
  options: ReasonOptions = {},
): ParsedReason {
  const empty = `The service answered HTTP ${status} with no reason.`;
  const text = bodyText.trim();
  if (text === '') return { reason: empty, fields: {}, readable: false };

  const type = (contentType ?? '').toLowerCase();
  const json = type.includes('json') || /^[[{"]/.test(text) ? tryJson(text) : undefined;
  if (json?.ok) {
    const fields = fieldsOf(json.value);
    const raw = describe(json.value);
    return {
      reason: raw ? sentence(raw, options.secrets) : empty,
      fields: scrubFields(fields, options.secrets),
      readable: raw !== '',
    };
  }
  if (type.includes('html') || /^<(!doctype|html|head|body|h1|title|div|p)\b/i.test(text)) {
    const heading = htmlHeading(text);
    if (!heading) {
      const reason = `The service answered HTTP ${status} with an HTML page and no readable reason.`;
      return { reason, fields: {}, readable: false };
    }
    return { reason: sentence(heading, options.secrets), fields: {}, readable: true };
  }
  return { reason: sentence(text, options.secrets), fields: {}, readable: true };
}

/**
 * Cleans text into one sentence: no markup or control characters, whitespace collapsed, secrets replaced,
 * at most {@link MAX_REASON_LENGTH} characters, ending with a period (or ! ? …).
 */
export function sentence(text: string, secrets: readonly (string | undefined)[] = []): string {
  let out = scrub(text, secrets)
    .replace(/<[^>]*>/g, ' ')
    .replace(/\p{Cc}/gu, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  if (out === '') return 'The service gave no readable reason.';
  if (out.length > MAX_REASON_LENGTH - 1) {
    const cut = out.slice(0, MAX_REASON_LENGTH - 3);
    const space = cut.lastIndexOf(' ');
    out = `${(space > MAX_REASON_LENGTH / 2 ? cut.slice(0, space) : cut).replace(/[\s,;:.]+$/, '')}...`;
  }
  if (!/[.!?]$/.test(out)) out = `${out}.`;
  // A leading field name ("ram_gb: …") keeps its wire spelling; prose starts with a capital.
  return /^[\w.-]+:/.test(out) ? out : out.charAt(0).toUpperCase() + out.slice(1);
}

/** Removes a sentence's final punctuation, to embed it in a longer one. */
export function clause(reason: string): string {
  return reason.replace(/[.!?]+$/, '');
}

function scrub(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret && secret.length >= 4) out = out.split(secret).join('[redacted]');
  }
  // Credentials the service might echo back even when they are not ours (a token holds a digit; prose does not).
  return out
    .replace(/\b([Bb]earer|[Bb]asic)\s+(?=[^\s]*\d)[A-Za-z0-9._~+/=-]{6,}/g, '$1 [redacted]')
    .replace(/\bcloudops_agent_[A-Za-z0-9_-]+/g, '[redacted]');
}

function scrubFields(fields: Record<string, string[]>, secrets: readonly (string | undefined)[] = []) {
  const out: Record<string, string[]> = {};
  for (const [key, values] of Object.entries(fields)) out[key] = values.map((v) => scrub(v, secrets));
  return out;
}

function tryJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false };
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Flattens any JSON value into readable text; '' when it holds nothing readable. */
function describe(value: unknown, depth = 0): string {
  if (depth > 4) return '';
  if (typeof value === 'string') return value.trim();
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) {
    return value
      .map((item) => describe(item, depth + 1))
      .filter((s) => s !== '')
      .map(clause)
      .join('; ');
  }
  if (!isRecord(value)) return '';

  for (const key of MESSAGE_KEYS) {
    const text = key in value ? describe(value[key], depth + 1) : '';
    if (text) return text;
  }
  const parts: string[] = [];
  for (const key of ['non_field_errors', 'errors', '__all__']) {
    const text = key in value ? describe(value[key], depth + 1) : '';
    if (text) parts.push(clause(text));
  }
  for (const [key, item] of Object.entries(value)) {
    if (['non_field_errors', 'errors', '__all__', ...MESSAGE_KEYS].includes(key) || IGNORED_KEYS.has(key))
      continue;
    const text = describe(item, depth + 1);
    if (text) parts.push(`${key}: ${clause(text)}`);
  }
  return parts.join('; ');
}

/** Per-field reasons of a field-list body such as `{"cores": ["…"]}`; empty for other shapes. */
function fieldsOf(value: unknown): Record<string, string[]> {
  const fields: Record<string, string[]> = {};
  if (!isRecord(value)) return fields;
  const source = isRecord(value.errors) ? value.errors : value;
  for (const [key, item] of Object.entries(source)) {
    if ((MESSAGE_KEYS as readonly string[]).includes(key) || IGNORED_KEYS.has(key) || key === 'errors')
      continue;
    const list = Array.isArray(item) ? item : [item];
    const texts = list.map((entry) => describe(entry)).filter((s) => s !== '');
    if (texts.length > 0) fields[key] = texts;
  }
  return fields;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

/** The `<title>` or first `<h1>` of an HTML page, decoded; never the markup. */
function htmlHeading(html: string): string | undefined {
  const stripped = html.replace(/<(script|style)\b[\s\S]*?<\/\1>/gi, ' ');
  for (const tag of ['title', 'h1']) {
    const match = new RegExp(`<${tag}\\b[^>]*>([\\s\\S]*?)</${tag}>`, 'i').exec(stripped);
    const text = match?.[1]
      ?.replace(/<[^>]*>/g, ' ')
      .replace(/&(#\d+|#x[0-9a-f]+|[a-z]+);/gi, (entity, name: string) => decodeEntity(entity, name))
      .replace(/\s+/g, ' ')
      .trim();
    if (text) return text;
  }
  return undefined;
}

function decodeEntity(entity: string, name: string): string {
  if (!name.startsWith('#')) return ENTITIES[name.toLowerCase()] ?? entity;
  const code = /^#x/i.test(name) ? Number.parseInt(name.slice(2), 16) : Number.parseInt(name.slice(1), 10);
  return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : ' ';
}
