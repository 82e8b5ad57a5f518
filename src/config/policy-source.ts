/**
 * The policy a process runs on, which a reload may replace without a restart (docs/policy.md#reload): a holder
 * with the current policy and its version, read by every role at the moment it decides.
 */
import { isDeepStrictEqual } from 'node:util';
import { loadPolicyFile, type Policy, PolicyError, policyVersionOf } from './policy.ts';

/** Where the current policy is read: what the process started with, or what the last valid reload brought. */
export interface PolicySource {
  /** The policy in force now. */
  current(): Policy;
  /** Its version: the first 12 hex digits of the SHA-256 of the file it was read from. */
  version(): string;
}

/** What a reload did. */
export type ReloadOutcome =
  | { kind: 'changed'; from: string; to: string; changes: string }
  | { kind: 'unchanged'; version: string }
  | { kind: 'invalid'; version: string; problem: string };

/** A policy given as an object (tests, the demo): fixed, versioned by its JSON. */
export function fixedPolicySource(policy: Policy, version?: string): PolicySource {
  const fixed = version ?? policyVersionOf(JSON.stringify(policy));
  return { current: () => policy, version: () => fixed };
}

/**
 * The policy read from a file, read again on {@link reload}: a valid file replaces it; an invalid one (or one that
 * cannot be read) keeps the old. Reloads run one at a time, in the order asked, so a slower read never replaces what
 * a later one brought.
 */
export class FilePolicySource implements PolicySource {
  private policy: Policy;
  private ver: string;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly path: string,
    loaded: { policy: Policy; version: string },
  ) {
    this.policy = loaded.policy;
    this.ver = loaded.version;
  }

  /** Reads the file and parses it; throws the PolicyError that would stop a start. */
  static async open(path: string): Promise<FilePolicySource> {
    return new FilePolicySource(path, await loadPolicyFile(path));
  }

  current(): Policy {
    return this.policy;
  }

  version(): string {
    return this.ver;
  }

  /** Reads the file again; see {@link ReloadOutcome}. Never throws for a bad file. */
  reload(): Promise<ReloadOutcome> {
    const next = this.queue.then(() => this.readOnce());
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async readOnce(): Promise<ReloadOutcome> {
    let loaded: { policy: Policy; version: string };
    try {
      loaded = await loadPolicyFile(this.path);
    } catch (error) {
      if (!(error instanceof PolicyError)) throw error;
      return { kind: 'invalid', version: this.ver, problem: error.summary };
    }
    if (loaded.version === this.ver) return { kind: 'unchanged', version: this.ver };
    const from = this.ver;
    const changes = policyChanges(this.policy, loaded.policy);
    // One assignment each, no await between: a reader sees the old pair or the new one.
    this.policy = loaded.policy;
    this.ver = loaded.version;
    return { kind: 'changed', from, to: loaded.version, changes };
  }
}

/**
 * The policy as one object whose every read goes to `source.current()`. Dozens of readers (the approval rules, the
 * handlers, the workers) hold "the policy"; handing them this view lets each see a reload at its next read without
 * threading the source through every signature.
 */
export function livePolicy(source: PolicySource): Policy {
  return new Proxy({} as Policy, {
    get: (_target, key) => Reflect.get(source.current(), key),
    has: (_target, key) => Reflect.has(source.current(), key),
    ownKeys: () => Reflect.ownKeys(source.current()),
    getOwnPropertyDescriptor: (_target, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(source.current(), key);
      return descriptor ? { ...descriptor, configurable: true } : undefined;
    },
    set: () => false,
    deleteProperty: () => false,
  });
}

/** At most this many names in one part of the summary line. */
const MAX_NAMES = 5;

function names(list: string[]): string {
  return list.length <= MAX_NAMES
    ? list.join(', ')
    : `${list.slice(0, MAX_NAMES).join(', ')} and ${list.length - MAX_NAMES} more`;
}

/** A scalar as the summary shows it; anything larger is only said to have changed. */
function shown(value: unknown): string | undefined {
  if (value === undefined) return 'unset';
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')
    return String(value);
  return undefined;
}

/**
 * What changed between two policies, in one line: top-level settings with their values when they are scalars,
 * projects and agents by name (added, removed, changed and which of their keys).
 */
export function policyChanges(before: Policy, after: Policy): string {
  const parts: string[] = [];
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
  for (const key of keys) {
    const a = (before as Record<string, unknown>)[key];
    const b = (after as Record<string, unknown>)[key];
    if (isDeepStrictEqual(a, b)) continue;
    if (key === 'projects' || key === 'agents') {
      parts.push(...namedChanges(key, (a ?? []) as { name: string }[], (b ?? []) as { name: string }[]));
      continue;
    }
    const [was, now] = [shown(a), shown(b)];
    parts.push(was !== undefined && now !== undefined ? `${key} ${was} → ${now}` : `${key} changed`);
  }
  return parts.length > 0 ? parts.join('; ') : 'formatting only';
}

function namedChanges(section: string, before: { name: string }[], after: { name: string }[]): string[] {
  const old = new Map(before.map((entry) => [entry.name, entry]));
  const now = new Map(after.map((entry) => [entry.name, entry]));
  const added = [...now.keys()].filter((name) => !old.has(name));
  const removed = [...old.keys()].filter((name) => !now.has(name));
  const changed = [...now.keys()]
    .filter((name) => old.has(name) && !isDeepStrictEqual(old.get(name), now.get(name)))
    .map((name) => {
      const a = old.get(name) as Record<string, unknown>;
      const b = now.get(name) as Record<string, unknown>;
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].filter(
        (key) => !isDeepStrictEqual(a[key], b[key]),
      );
      return `${name} (${keys.join(', ')})`;
    });
  const singular = section.slice(0, -1);
  return [
    ...(added.length > 0 ? [`${singular} added: ${names(added)}`] : []),
    ...(removed.length > 0 ? [`${singular} removed: ${names(removed)}`] : []),
    ...(changed.length > 0 ? [`${singular} changed: ${names(changed)}`] : []),
  ];
}
