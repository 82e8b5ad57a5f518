import type { Cluster, Redis } from 'ioredis';
import { compareStreamIds, countAudit, oldestUnshipped } from '../audit/audit.ts';
import { type AuditSealer, anchorData } from '../audit/chain.ts';
import type { AuditAnchor } from '../model/audit-record.ts';
import type { RequestKeys } from './keys.ts';
import { LuaScript } from './lua.ts';
import { REMOVE_EXPIRED } from './scripts.ts';

/** How long an ended request and its audit entries are kept when the caller does not say (policy `retention_days`). */
export const DEFAULT_RETENTION_DAYS = 90;
export const DAY_MS = 86_400_000;
/** How long an audit entry is kept when the policy does not say (`audit_retention_days`). */
export const DEFAULT_AUDIT_RETENTION_DAYS = 400;

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
  /** `audit_retention_days` in milliseconds, read at each sweep (a reload may change it). */
  auditRetentionMs: () => number;
  /** Seals the anchor trimming leaves. */
  sealer?: AuditSealer;
}

/**
 * Removes up to `limit` requests whose retention (`retention_days` after they ended, never while a lease is open)
 * has passed, then trims the audit chain (see {@link trimAudit}). Reads only the retention index and the oldest
 * audit entries, never all requests. Returns how many requests were removed.
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
  await trimAudit(scope, onUnshipped);
  return results.reduce<number>((sum, result) => sum + Number(result), 0);
}

/**
 * Trims the audit chain from its oldest entry up to `audit_retention_days` ago, apart from the requests' retention,
 * and leaves a sealed anchor (the id and hash of the last entry removed) where it begins, so what remains still
 * verifies (docs/operations.md#audit-retention). Only from the oldest: an entry in the middle is never removed,
 * which would break the chain. With the audit export on, nothing it has not shipped is removed; `onUnshipped` hears
 * how many such entries past the window were kept (or, with the export off but its group left behind, removed).
 */
export async function trimAudit(
  scope: RetentionScope,
  onUnshipped?: (note: UnshippedAudit) => void,
): Promise<void> {
  const stream = scope.keys.audit;
  let keepFrom = `${scope.now().getTime() - scope.auditRetentionMs()}-0`;
  const unshipped = await oldestUnshipped(scope.redis, stream, scope.exportsAudit);
  if (unshipped !== undefined && compareStreamIds(unshipped, keepFrom) < 0) {
    const pastWindow = await countAudit(scope.redis, stream, unshipped, `(${keepFrom}`);
    if (scope.exportsAudit) {
      keepFrom = unshipped;
      if (pastWindow > 0) onUnshipped?.({ kept: pastWindow });
    } else if (pastWindow > 0) onUnshipped?.({ dropped: pastWindow });
  }
  const [last] = await scope.redis.xrevrange(stream, `(${keepFrom}`, '-', 'COUNT', 1);
  if (!last) return;
  const [id, fields] = last;
  const hash = fields[fields.indexOf('h') + 1] ?? '';
  const anchor: AuditAnchor = { id, hash: fields.includes('h') ? hash : '' };
  if (scope.sealer) anchor.seal = scope.sealer.seal('audit', anchorData(anchor));
  await TRIM_AUDIT.run(scope.redis, [stream, scope.keys.auditAnchor], [id, keepFrom, JSON.stringify(anchor)]);
}

/**
 * KEYS: audit stream, anchor. ARGV: the last id removed, the first id kept (XTRIM MINID), the anchor's JSON. Trims
 * and sets the anchor in one script, so the chain never begins anywhere but where its anchor says.
 */
const TRIM_AUDIT = new LuaScript(`
if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 0 then return 0 end
redis.call('XTRIM', KEYS[1], 'MINID', ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
return 1
`);
