import { type Document, isNode, type LineCounter } from 'yaml';
import { z } from 'zod';

/** At most this many problems are listed at once; the rest are counted. */
export const MAX_PROBLEMS = 20;

/** One problem of a policy file: the line (absent for the file as a whole), the field and what is wrong, in words. */
export interface PolicyProblem {
  line?: number;
  field?: string;
  message: string;
}

/** `file:line: field: message`, one line. */
export function problemLine(file: string, problem: PolicyProblem): string {
  return `${file}${problem.line === undefined ? '' : `:${problem.line}`}: ${problem.field === undefined ? '' : `${problem.field}: `}${problem.message}`;
}

/** How a schema is named in a message: one of it ("a whole number") and several ("whole numbers"). */
export interface Nouns {
  one: string;
  many: string;
}

/**
 * A schema's name in messages, given as its metadata: `.meta(nouns('a channel id', 'channel ids'))`. A schema
 * without one is named by its type.
 */
export function nouns(one: string, many: string): Nouns & Record<string, unknown> {
  return { one, many };
}

const clip = (text: string) => (text.length > 40 ? `${text.slice(0, 40)}…` : text);

/** A schema as a person says it, looking through optional, default and transform wrappers. */
export function nounsOf(schema: z.core.$ZodType): Nouns {
  const meta = z.globalRegistry.get(schema) as Partial<Nouns> | undefined;
  if (meta?.one && meta.many) return { one: meta.one, many: meta.many };
  const def = schema._zod.def;
  switch (def.type) {
    case 'optional':
    case 'default':
    case 'nullable':
    case 'prefault':
    case 'readonly':
      return nounsOf((def as z.core.$ZodOptionalDef).innerType);
    case 'pipe':
      return nounsOf((def as z.core.$ZodPipeDef).in);
    case 'number':
      return (def.checks ?? []).some((check) =>
        /int/.test(String((check._zod.def as { format?: string }).format)),
      )
        ? { one: 'a whole number', many: 'whole numbers' }
        : { one: 'a number', many: 'numbers' };
    case 'string':
      return { one: 'text', many: 'pieces of text' };
    case 'boolean':
      return { one: 'true or false', many: 'true or false values' };
    case 'enum': {
      const values = Object.values((def as z.core.$ZodEnumDef).entries).join(', ');
      return { one: `one of ${values}`, many: `values among ${values}` };
    }
    case 'array': {
      const element = nounsOf((def as z.core.$ZodArrayDef).element);
      return { one: `a list of ${element.many}`, many: `lists of ${element.many}` };
    }
    case 'object':
      return { one: 'a map of keys', many: 'maps of keys' };
    case 'union': {
      const options = (def as z.core.$ZodUnionDef).options.map(nounsOf);
      return { one: options.map((o) => o.one).join(' or '), many: options.map((o) => o.many).join(' or ') };
    }
    default:
      return { one: `a ${def.type}`, many: `${def.type} values` };
  }
}

/** A value found in the file, as a person reads it. */
function valueWords(input: unknown): string {
  if (input === null) return 'an empty value';
  if (typeof input === 'string') return `the text "${clip(input)}"`;
  if (Array.isArray(input)) return 'a list';
  if (typeof input === 'object') return 'a map of keys';
  return String(input);
}

const NUMERIC = /^\s*[+-]?(\d+\.?\d*|\.\d+)\s*$/;

/** zod's default wordings replaced by a person's ("a whole number", "a list of channel ids"). */
function inWords(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type': {
      const expected =
        issue.expected === 'int'
          ? 'a whole number'
          : issue.inst && 'def' in issue.inst._zod
            ? nounsOf(issue.inst as z.core.$ZodType).one
            : `a ${issue.expected}`;
      if (issue.input === undefined) return `missing: expected ${expected}`;
      const unquote =
        typeof issue.input === 'string' && NUMERIC.test(issue.input) && /number/.test(expected)
          ? ' (write it without quotes)'
          : '';
      return `expected ${expected}, not ${valueWords(issue.input)}${unquote}`;
    }
    case 'too_small': {
      const min = issue.minimum;
      if (issue.origin === 'array') return `expected at least ${min} item${min === 1 ? '' : 's'}`;
      if (issue.origin === 'string')
        return min === 1 ? 'expected some text, not an empty one' : `expected at least ${min} characters`;
      return issue.inclusive ? `expected ${min} or more` : `expected more than ${min}`;
    }
    case 'too_big': {
      const max = issue.maximum;
      if (issue.origin === 'array') return `expected at most ${max} item${max === 1 ? '' : 's'}`;
      if (issue.origin === 'string') return `expected at most ${max} characters`;
      return issue.inclusive ? `expected at most ${max}` : `expected less than ${max}`;
    }
    case 'invalid_value':
      return `expected one of ${issue.values.map(String).join(', ')}, not ${valueWords(issue.input)}`;
    case 'invalid_union':
      return issue.inst && 'def' in issue.inst._zod
        ? `expected ${nounsOf(issue.inst as z.core.$ZodType).one}, not ${valueWords(issue.input)}`
        : undefined;
    case 'unrecognized_keys':
      return 'unknown key';
    default:
      return undefined;
  }
}

export interface IssueWording {
  error: z.core.$ZodErrorMap;
  /** Per object holding an unknown key (its path as JSON), the keys it knows. */
  knownKeys: Map<string, string[]>;
  /** The paths (as JSON) of keys that are missing. */
  missing: Set<string>;
}

/**
 * What a parse needs beyond zod's issues to word them: the error map, the keys each object knows (zod's final
 * issue keeps only the unknown ones) and which keys are missing rather than wrong.
 */
export function issueWording(): IssueWording {
  const knownKeys = new Map<string, string[]>();
  const missing = new Set<string>();
  const error: z.core.$ZodErrorMap = (issue) => {
    if (issue.code === 'invalid_type' && issue.input === undefined)
      missing.add(JSON.stringify(issue.path ?? []));
    if (issue.code === 'unrecognized_keys' && issue.inst && 'def' in issue.inst._zod) {
      const def = issue.inst._zod.def as z.core.$ZodObjectDef;
      knownKeys.set(JSON.stringify(issue.path ?? []), Object.keys(def.shape));
    }
    return inWords(issue);
  };
  return { error, knownKeys, missing };
}

/**
 * Optimal string alignment distance (Levenshtein with adjacent swaps counted once: "clutser" is 1 from
 * "cluster"), case-insensitive.
 */
export function editDistance(a: string, b: string): number {
  const s = a.toLowerCase();
  const t = b.toLowerCase();
  const rows = Array.from({ length: s.length + 1 }, (_, i) =>
    Array.from({ length: t.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number) => rows[i]?.[j] ?? Number.POSITIVE_INFINITY;
  for (let i = 1; i <= s.length; i++) {
    for (let j = 1; j <= t.length; j++) {
      const cost = s[i - 1] === t[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && s[i - 1] === t[j - 2] && s[i - 2] === t[j - 1])
        best = Math.min(best, at(i - 2, j - 2) + 1);
      (rows[i] as number[])[j] = best;
    }
  }
  return at(s.length, t.length);
}

/** The known key closest to `key`, when close enough to be a typo (a third of its letters at most). */
export function closestKey(key: string, known: readonly string[]): string | undefined {
  let best: { key: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(key, candidate);
    if (!best || distance < best.distance) best = { key: candidate, distance };
  }
  const allowed = Math.max(1, Math.floor(Math.max(key.length, 3) / 3));
  return best && best.distance <= allowed ? best.key : undefined;
}

type Path = (string | number)[];

/** A path as the messages name a field: `projects[0].approvals.rules[1].verify`. */
export const fieldOf = (path: Path): string =>
  path.length > 0
    ? path
        .map((p) => (typeof p === 'number' ? `[${p}]` : p))
        .join('.')
        .replace(/\.\[/g, '[')
    : '(top level)';

/** The line of the deepest node on `path` that exists: a missing key is reported at its parent's line. */
export function lineOf(doc: Document, lines: LineCounter, path: Path): number {
  for (let depth = path.length; depth >= 0; depth--) {
    const node = doc.getIn(path.slice(0, depth), true);
    if (isNode(node) && node.range) return lines.linePos(node.range[0]).line;
  }
  return 1;
}

/**
 * Every issue as a problem with its line and field, in file order: an unknown key named with the closest known
 * one; the "missing" of the key it most likely meant left out (the typo is the one problem).
 */
export function problemsOf(
  issues: readonly z.core.$ZodIssue[],
  { knownKeys, missing }: IssueWording,
  doc: Document,
  lines: LineCounter,
): PolicyProblem[] {
  const found: { path: Path; message: string }[] = [];
  const meant = new Set<string>();
  for (const issue of issues) {
    const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
    if (issue.code !== 'unrecognized_keys') {
      found.push({ path, message: issue.message });
      continue;
    }
    const known = knownKeys.get(JSON.stringify(path)) ?? [];
    for (const key of issue.keys) {
      const closest = closestKey(key, known);
      if (closest) meant.add(JSON.stringify([...path, closest]));
      found.push({
        path: [...path, key],
        message: closest
          ? `unknown key, did you mean \`${closest}\`?`
          : `unknown key; the keys here are ${known.join(', ')}`,
      });
    }
  }
  return found
    .filter(({ path }) => !(missing.has(JSON.stringify(path)) && meant.has(JSON.stringify(path))))
    .map(({ path, message }) => ({ line: lineOf(doc, lines, path), field: fieldOf(path), message }))
    .sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
}
