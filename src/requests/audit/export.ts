import { once } from 'node:events';
import type { Cluster, Redis } from 'ioredis';
import type { AuditEntry } from '../model/types.ts';
import { exportAudit } from './audit.ts';

/** `--since` could not be read. */
export class SinceError extends Error {
  override readonly name = 'SinceError';
}

const UNIT_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };

/**
 * Reads `--since`: a duration back from `now` ('30m', '24h', '7d', '2w') or an ISO 8601 date or date-time
 * ('2025-01-31', '2025-01-31T08:00:00Z').
 */
export function parseSince(text: string, now: Date = new Date()): Date {
  const trimmed = text.trim();
  const relative = /^(\d+)\s*([mhdw])$/i.exec(trimmed);
  if (relative) {
    const unit = UNIT_MS[relative[2]!.toLowerCase()]!;
    return new Date(now.getTime() - Number(relative[1]) * unit);
  }
  if (/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(trimmed)) {
    const parsed = new Date(trimmed);
    if (!Number.isNaN(parsed.getTime())) return parsed;
  }
  throw new SinceError(
    `--since: expected an ISO date such as 2025-01-31T08:00:00Z or a duration such as 24h or 7d, got "${text}"`,
  );
}

/**
 * An entry as `cloudops audit --json` prints it: a chained entry whole (`prev`, `hash`, `seal` and `policy_version`
 * at the top level), one written before the chain in its stored fields.
 */
export function auditJson(entry: AuditEntry): string {
  if (entry.record) return JSON.stringify(entry.record);
  const { record: _record, ...legacy } = entry;
  return JSON.stringify(legacy);
}

/**
 * Writes the audit log since `since` to `out` as JSON lines (one entry per line), honouring back-pressure.
 * Resolves with the number of lines written; does not end `out`.
 */
export async function writeAuditJsonLines(
  redis: Redis | Cluster,
  prefix: string,
  since: Date | undefined,
  out: NodeJS.WritableStream,
): Promise<number> {
  let count = 0;
  for await (const entry of exportAudit(redis, prefix, since)) {
    if (!out.write(`${auditJson(entry)}\n`)) await once(out, 'drain');
    count++;
  }
  return count;
}
