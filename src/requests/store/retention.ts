import type { Cluster, Redis } from 'ioredis';
import { compareStreamIds, countAudit, oldestUnshipped } from '../audit/audit.ts';
import type { RequestKeys } from './keys.ts';
import { REMOVE_EXPIRED } from './scripts.ts';

/** Audit entries read per round trip when retention looks for entries of requests no longer stored. */
const AUDIT_SWEEP_PAGE = 500;

/** How long an ended request and its audit entries are kept when the caller does not say (policy `retention_days`). */
export const DEFAULT_RETENTION_DAYS = 90;
export const DAY_MS = 86_400_000;

/**
 * What retention did about audit entries past `retention_days` that the audit export has not shipped: kept them
 * (the export is on) or removed them (it is off, but an earlier export left its group with entries unshipped).
 */
export type UnshippedAudit = { kept: number } | { dropped: number };

/** What retention reads and writes: the store's connection, keys and clock, and its policy. */
export interface RetentionScope {
  redis: Redis | Cluster;
  keys: RequestKeys;
  now: () => Date;
  /** `retention_days` in milliseconds. */
  retentionMs: number;
  /** The audit export is on (AUDIT_WEBHOOK_URL): retention keeps every audit entry it has not shipped. */
  exportsAudit: boolean;
}

/**
 * Removes up to `limit` requests whose retention (`retention_days` after they ended, never while a lease is open)
 * has passed, then their audit entries: the stream is trimmed to what the oldest request still stored and the
 * retention window need, and older entries of requests no longer stored are deleted one by one (an old open lease
 * keeps the trim back, not the entries of requests that ended after it). Reads only the retention index and the
 * audit entries older than the window, never all requests. With the audit export on, nothing it has not shipped is
 * removed; `onUnshipped` hears how many such entries past the window were kept (or, with the export off but its
 * group left behind, removed). Returns how many requests were removed.
 */
export async function removeExpired(
  scope: RetentionScope,
  limit = 500,
  onUnshipped?: (note: UnshippedAudit) => void,
): Promise<number> {
  const cutoff = scope.now().getTime() - scope.retentionMs;
  const ids = await scope.redis.zrangebyscore(scope.keys.retention, '-inf', cutoff, 'LIMIT', 0, limit);
  const results = await Promise.all(
    ids.map((id) =>
      REMOVE_EXPIRED.run(
        scope.redis,
        [scope.keys.request(id), scope.keys.retention, scope.keys.created, scope.keys.awaitingRun],
        [id, cutoff, scope.keys.channel(''), scope.keys.requestedBy(''), scope.keys.involving('')],
      ),
    ),
  );
  const removed = results.reduce<number>((sum, result) => sum + Number(result), 0);
  const [, oldest] = await scope.redis.zrange(scope.keys.created, 0, 0, 'WITHSCORES');
  let keepFrom = `${Math.min(cutoff, oldest === undefined ? Infinity : Number(oldest))}-0`;
  let orphansBefore = `${cutoff}-0`;
  const unshipped = await oldestUnshipped(scope.redis, scope.keys.audit, scope.exportsAudit);
  if (scope.exportsAudit && unshipped !== undefined && compareStreamIds(unshipped, orphansBefore) < 0) {
    const pastWindow = await countAudit(scope.redis, scope.keys.audit, unshipped, `(${orphansBefore}`);
    if (compareStreamIds(unshipped, keepFrom) < 0) keepFrom = unshipped;
    orphansBefore = unshipped;
    if (pastWindow > 0) onUnshipped?.({ kept: pastWindow });
  }
  const trimmedUnshipped =
    !scope.exportsAudit && unshipped !== undefined && compareStreamIds(unshipped, keepFrom) < 0
      ? await countAudit(scope.redis, scope.keys.audit, unshipped, `(${keepFrom}`)
      : 0;
  await scope.redis.xtrim(scope.keys.audit, 'MINID', keepFrom);
  let deletedUnshipped = 0;
  if (compareStreamIds(keepFrom, orphansBefore) < 0) {
    const deleted = await deleteOrphanedAudit(scope, orphansBefore);
    if (!scope.exportsAudit && unshipped !== undefined)
      deletedUnshipped = deleted.filter((id) => compareStreamIds(id, unshipped) >= 0).length;
  }
  if (trimmedUnshipped + deletedUnshipped > 0)
    onUnshipped?.({ dropped: trimmedUnshipped + deletedUnshipped });
  return removed;
}

/**
 * Deletes the audit entries written before `before` (a stream id, excluded) whose request is no longer stored, and
 * returns their ids. What is left before the cutoff after a sweep is only the history of requests still kept (open
 * leases, recently ended), so each sweep reads little more than that.
 */
async function deleteOrphanedAudit(scope: RetentionScope, before: string): Promise<string[]> {
  const deleted: string[] = [];
  let from = '-';
  for (;;) {
    const rows = await scope.redis.xrange(scope.keys.audit, from, `(${before}`, 'COUNT', AUDIT_SWEEP_PAGE);
    if (rows.length === 0) return deleted;
    const owners = rows.map(([, fields]) => fields[fields.indexOf('requestId') + 1] ?? '');
    const unique = [...new Set(owners)];
    const stored = await Promise.all(unique.map((id) => scope.redis.exists(scope.keys.request(id))));
    const gone = new Set(unique.filter((_, i) => stored[i] === 0));
    const orphaned = rows.filter((_, i) => gone.has(owners[i] ?? '')).map(([id]) => id);
    if (orphaned.length > 0) await scope.redis.xdel(scope.keys.audit, ...orphaned);
    deleted.push(...orphaned);
    if (rows.length < AUDIT_SWEEP_PAGE) return deleted;
    from = `(${rows[rows.length - 1]![0]}`;
  }
}
