import {
  CPU_CLASSES,
  type CpuClass,
  ON_OFF,
  type OnOff,
  type ResizeTarget,
  type Violation,
  WAN_MODES,
  type WanMode,
} from './types.ts';

/** The numeric resize fields a requester types. */
export type NumberField = 'cores' | 'ramGb' | 'osDiskGb';

const FIELD_NAME: Record<NumberField, string> = {
  cores: 'Cores',
  ramGb: 'RAM (GB)',
  osDiskGb: 'OS disk (GB)',
};

/** Longest backup slug accepted; the modal's input allows the same. */
export const MAX_SLUG_LENGTH = 128;

/**
 * How many characters the modal's inputs take (their `max_length`). The command line refuses a VM id longer than
 * this, and the policy's `limits` must fit, so nothing typed on the command line is too long for its input.
 */
export const INPUT_MAX_LENGTH = { vmid: 12, cores: 6, ramGb: 6, osDiskGb: 7 } as const;

/** The largest VM id the modal's input can hold. */
export const MAX_VMID = 10 ** INPUT_MAX_LENGTH.vmid - 1;

/** The largest value a modal input of `field` can hold. */
export function largestTypeable(field: NumberField): number {
  return 10 ** INPUT_MAX_LENGTH[field] - 1;
}

/** Shows what was typed inside a message without letting a huge paste through. */
function quoted(raw: string): string {
  const trimmed = raw.trim();
  return `"${trimmed.length > 24 ? `${trimmed.slice(0, 24)}…` : trimmed}"`;
}

/** A positive whole VM id (docs/requests.md#the-rules, rule 6), or why not. */
export function parseVmid(raw: string): number | Violation {
  const trimmed = raw.trim();
  const n = Number(trimmed);
  if (!/^\d+$/.test(trimmed) || n <= 0 || n > MAX_VMID) {
    return {
      field: 'vmid',
      code: 'bad_vmid',
      message: `The VM id is a whole number above 0 of at most ${INPUT_MAX_LENGTH.vmid} digits, such as 101${trimmed ? `, not ${quoted(trimmed)}` : ''}.`,
    };
  }
  return n;
}

/** A whole number from 1 to `limit` for a size field, or why not (`not_integer` or `bounds`). */
export function parseWholeNumber(raw: string, field: NumberField, limit: number): number | Violation {
  const trimmed = raw.trim();
  const name = FIELD_NAME[field];
  if (!/^[+-]?\d+$/.test(trimmed)) {
    return {
      field,
      code: 'not_integer',
      message: `${name} takes a whole number from 1 to ${limit}, not ${quoted(trimmed)}.`,
    };
  }
  const n = Number(trimmed);
  if (!Number.isSafeInteger(n)) {
    return {
      field,
      code: 'bounds',
      message: `${name} must be from 1 to ${limit} (the policy's limit), not ${quoted(trimmed)}.`,
    };
  }
  return checkBounds(n, field, limit) ?? n;
}

/** Refuses a number outside 1..limit (or not whole); undefined when it is fine. */
export function checkBounds(n: number, field: NumberField, limit: number): Violation | undefined {
  const name = FIELD_NAME[field];
  if (!Number.isSafeInteger(n)) {
    return {
      field,
      code: 'not_integer',
      message: `${name} takes a whole number from 1 to ${limit}, not ${n}.`,
    };
  }
  if (n < 1 || n > limit) {
    return {
      field,
      code: 'bounds',
      message: `${name} must be from 1 to ${limit} (the policy's limit), not ${n}.`,
    };
  }
  return undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `raw` is a UUID in the 8-4-4-4-12 hex form the API uses for projects. */
export function isUuid(raw: string): boolean {
  return UUID.test(raw);
}

/** A project UUID, lower-cased, or why not. */
export function parseProjectUuid(raw: string): string | Violation {
  const trimmed = raw.trim();
  if (!isUuid(trimmed)) {
    return {
      field: 'project',
      code: 'bad_uuid',
      message: `A project UUID looks like 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10, not ${quoted(trimmed)}.`,
    };
  }
  return trimmed.toLowerCase();
}

/**
 * Whether `raw` is a backup slug: letters, digits, '.', '_' and '-' only, 1 to {@link MAX_SLUG_LENGTH}
 * characters, and not '.' or '..' (which would change the meaning of the URL path).
 */
export function isBackupSlug(raw: string): boolean {
  return new RegExp(`^[A-Za-z0-9._-]{1,${MAX_SLUG_LENGTH}}$`).test(raw) && raw !== '.' && raw !== '..';
}

/** Refuses a malformed backup slug; undefined when it is fine. */
export function checkBackupSlug(raw: string): Violation | undefined {
  if (isBackupSlug(raw)) return undefined;
  const why =
    raw === ''
      ? 'Give the backup slug from the portal’s backup list.'
      : raw === '.' || raw === '..'
        ? `${quoted(raw)} is not a backup slug.`
        : raw.length > MAX_SLUG_LENGTH
          ? `A backup slug has at most ${MAX_SLUG_LENGTH} characters.`
          : `${quoted(raw)} is not a backup slug.`;
  return {
    field: 'backupSlug',
    code: 'bad_slug',
    message: `${why} A backup slug has only letters, digits, ".", "_" and "-", as in the portal’s backup list.`,
  };
}

function choice<T extends string>(
  raw: string,
  allowed: readonly T[],
  field: 'wanMode' | 'cpuClass' | 'privateNetwork',
  name: string,
): T | Violation {
  const value = raw.trim().toLowerCase();
  const found = allowed.find((a) => a === value);
  if (found !== undefined) return found;
  return {
    field,
    code: 'bad_value',
    message: `${name} is one of ${allowed.join(', ')}, not ${quoted(raw)}.`,
  };
}

/** `off`, `ipv4`, `ipv6` or `dual` (case-insensitive), or why not. */
export function parseWanMode(raw: string): WanMode | Violation {
  return choice(raw, WAN_MODES, 'wanMode', 'WAN mode');
}

/** `regular` or `light` (case-insensitive), or why not. */
export function parseCpuClass(raw: string): CpuClass | Violation {
  return choice(raw, CPU_CLASSES, 'cpuClass', 'CPU class');
}

/** `off` or `on` (case-insensitive), or why not. */
export function parseOnOff(raw: string): OnOff | Violation {
  return choice(raw, ON_OFF, 'privateNetwork', 'Private network');
}

/** Whether a parse result is a refusal. */
export function isViolation(value: unknown): value is Violation {
  return (
    typeof value === 'object' && value !== null && 'code' in value && 'message' in value && 'field' in value
  );
}

/** The `key=value` words of a resize typed on a command line (`/cloud resize`, `cloudops plan`), and what each sets. */
export const TARGET_WORDS = {
  cores: 'cores',
  ram: 'ramGb',
  disk: 'osDiskGb',
  cpu: 'cpuClass',
  wan: 'wanMode',
  private: 'privateNetwork',
} as const satisfies Record<string, keyof ResizeTarget>;

/** Why a word of a typed resize was not taken; each surface words it its own way. */
export type TargetWordProblem<E> =
  | { code: 'not_key_value'; word: string }
  | { code: 'unknown_key'; key: string }
  | { code: 'twice'; key: string }
  | { code: 'bad_value'; key: string; error: E };

/**
 * Reads `key=value` words into a resize target: keys case-insensitive, each at most once; `value` parses one
 * field's text (a surface's own limits and wording) and returns the value or its error.
 */
export function readTargetWords<E>(
  words: string[],
  value: (
    field: keyof ResizeTarget,
    raw: string,
    key: string,
  ) => ResizeTarget[keyof ResizeTarget] | { error: E },
): { target: ResizeTarget } | { problem: TargetWordProblem<E> } {
  const target: ResizeTarget = {};
  for (const word of words) {
    const eq = word.indexOf('=');
    if (eq <= 0) return { problem: { code: 'not_key_value', word } };
    const key = word.slice(0, eq).toLowerCase();
    const field = Object.hasOwn(TARGET_WORDS, key)
      ? TARGET_WORDS[key as keyof typeof TARGET_WORDS]
      : undefined;
    if (field === undefined) return { problem: { code: 'unknown_key', key } };
    if (target[field] !== undefined) return { problem: { code: 'twice', key } };
    const parsed = value(field, word.slice(eq + 1), key);
    if (typeof parsed === 'object' && parsed !== null && 'error' in parsed)
      return { problem: { code: 'bad_value', key, error: parsed.error } };
    Object.assign(target, { [field]: parsed });
  }
  return { target };
}

/**
 * Characters a reason never needs and that change what it shows: Unicode's format characters (bidi controls: an RTL
 * override reorders the text around it; zero-width spaces and joiners) and control characters (line breaks and tabs
 * are kept).
 */
const INVISIBLE_IN_REASON = /(?![\n\t])[\p{Cc}\p{Cf}]/gu;

/** A typed reason as it is kept and shown: without invisible characters, line breaks as `\n`, trimmed. */
export function cleanReason(typed: string): string {
  return typed.replace(/\r\n?/g, '\n').replace(INVISIBLE_IN_REASON, '').trim();
}

/** The field error for a reason with nothing readable in it. */
export const EMPTY_REASON =
  'Say why in words: this reason has only spaces, line breaks or invisible characters.';

/**
 * The problem with a typed reason, or undefined when it may be kept: something was typed (an optional reason may be
 * left out) yet nothing readable remains once spaces, line breaks and invisible characters are taken away.
 */
export function reasonProblem(typed: string | undefined): string | undefined {
  if (typed === undefined || typed === '') return undefined;
  return cleanReason(typed) === '' ? EMPTY_REASON : undefined;
}
