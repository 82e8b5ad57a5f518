/**
 * Checks an audit chain, from Redis or from an exported copy (docs/operations.md#verifying-the-audit): recomputes
 * each hash, follows `prev`, checks the seals when the key is at hand, and names the first entry changed, removed,
 * inserted or out of order. Pure: the records arrive in order from whoever read them.
 */

import type { AuditAnchor } from '../model/audit-record.ts';
import { type AuditSealer, anchorData, bodyOf, hashOf } from './chain.ts';

/** An entry as read: chained ones have `hash` and `prev`; entries written before the chain existed have neither. */
export type ReadRecord = Record<string, unknown> & {
  id: string;
  hash?: string;
  prev?: string;
  seal?: string;
};

export type ChainVerdict =
  | { ok: true; checked: number; unchained: number; sealsChecked: boolean }
  | { ok: false; checked: number; entry: string; problem: ChainProblem; message: string };

export type ChainProblem = 'changed' | 'removed' | 'inserted' | 'reordered' | 'anchor' | 'unsealed';

export interface VerifyOptions {
  /** Checks the seals too; without it only the hashes and links are checked. */
  sealer?: AuditSealer;
  /** Where a trimmed chain begins (Redis). */
  anchor?: AuditAnchor;
  /**
   * The first entry's `prev` is taken as given: an exported copy may begin anywhere in the chain. Otherwise it must
   * be '' (the chain's start) or the anchor's hash.
   */
  openStart?: boolean;
  /**
   * The chain's head as Redis kept it, read before the entries: it must be the hash of one of them (or the anchor's,
   * or '' for an empty chain). Entries removed from the end leave it pointing at nothing.
   */
  head?: string;
}

function fail(checked: number, entry: string, problem: ChainProblem, message: string): ChainVerdict {
  return { ok: false, checked, entry, problem, message };
}

/** Why `record`'s link to the entry before it is broken, looking at its neighbours. */
function brokenLink(records: ReadRecord[], i: number, expected: string, checked: number): ChainVerdict {
  const record = records[i] as ReadRecord;
  const before = records[i - 1];
  const after = records[i + 1];
  if (records.slice(i + 1).some((later) => later.hash === record.prev))
    return fail(
      checked,
      record.id,
      'reordered',
      `entry ${record.id} is out of order: it follows a later entry`,
    );
  if (after?.prev === expected)
    return fail(
      checked,
      record.id,
      'inserted',
      `entry ${record.id} was inserted: the entry after it links past it`,
    );
  const twoBack = records[i - 2];
  if (before && ((twoBack && record.prev === twoBack.hash) || (!twoBack && record.prev === '')))
    return fail(checked, before.id, 'inserted', `entry ${before.id} was inserted before ${record.id}`);
  const where = before ? `between ${before.id} and ${record.id}` : `before ${record.id}`;
  return fail(checked, record.id, 'removed', `an entry was removed ${where}`);
}

/** Checks `records` (oldest first); see {@link ChainVerdict}. */
export function verifyChain(records: ReadRecord[], options: VerifyOptions = {}): ChainVerdict {
  const { sealer, anchor } = options;
  if (anchor && sealer && !(anchor.seal && sealer.check('audit', anchorData(anchor), anchor.seal)))
    return fail(
      0,
      anchor.id,
      'anchor',
      `the anchor (last entry removed by retention, ${anchor.id}) was changed`,
    );
  let expected: string | undefined = options.openStart ? undefined : (anchor?.hash ?? '');
  let checked = 0;
  let unchained = 0;
  let started = false;
  for (let i = 0; i < records.length; i++) {
    const record = records[i] as ReadRecord;
    if (typeof record.hash !== 'string' || typeof record.prev !== 'string') {
      if (started)
        return fail(
          checked,
          record.id,
          'inserted',
          `entry ${record.id} was inserted: it is not part of the chain`,
        );
      unchained++;
      continue;
    }
    started = true;
    if (hashOf(bodyOf(record)) !== record.hash)
      return fail(
        checked,
        record.id,
        'changed',
        `entry ${record.id} was changed: its hash does not match its content`,
      );
    if (sealer && !(typeof record.seal === 'string' && sealer.check('audit', record.hash, record.seal)))
      return fail(
        checked,
        record.id,
        record.seal ? 'changed' : 'unsealed',
        record.seal
          ? `entry ${record.id} was changed: its seal does not match (rewritten without the key)`
          : `entry ${record.id} has no seal (written without SEAL_KEY, or added by someone without it)`,
      );
    if (expected !== undefined && record.prev !== expected) {
      const chained = records.filter((r) => typeof r.hash === 'string');
      const at = chained.indexOf(record);
      if (at === 0)
        return fail(
          checked,
          record.id,
          'removed',
          anchor
            ? `entries were removed before ${record.id}: it does not follow the anchor ${anchor.id}`
            : `entries were removed before ${record.id}: the chain's first entry does not start it`,
        );
      return brokenLink(chained, at, expected, checked);
    }
    expected = record.hash;
    checked++;
  }
  const known = (hash: string) =>
    hash === '' || hash === anchor?.hash || records.some((record) => record.hash === hash);
  if (options.head !== undefined && !known(options.head)) {
    const last = records.at(-1)?.id ?? anchor?.id ?? 'the start';
    return fail(
      checked,
      last,
      'removed',
      `entries after ${last} were removed: the chain's head is further on`,
    );
  }
  return { ok: true, checked, unchained, sealsChecked: sealer !== undefined };
}
