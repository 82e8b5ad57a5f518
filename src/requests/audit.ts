import type { Cluster, Redis } from 'ioredis';
import { requestKeys } from './store.ts';
import type { AuditEntry, CloudRequest } from './types.ts';

/** Entries fetched per XRANGE round trip. */
const PAGE = 500;

export interface AuditQuery {
  /** Entries at or after this time. */
  since?: Date;
  /** Entries at or before this time. */
  until?: Date;
  /** Only this request's entries. */
  requestId?: string;
  /** At most this many entries (oldest first); default 1000. */
  limit?: number;
}

function toEntry(id: string, fields: string[]): AuditEntry {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) map.set(fields[i]!, fields[i + 1]!);
  const entry: AuditEntry = {
    id,
    requestId: map.get('requestId') ?? '',
    state: (map.get('state') ?? 'created') as AuditEntry['state'],
    actor: map.get('actor') ?? '',
    at: map.get('at') ?? new Date(Number(id.split('-')[0])).toISOString(),
  };
  const detail = map.get('detail');
  if (detail !== undefined) entry.detail = detail;
  return entry;
}

/** Pages through the stream from `start` to `end` (XRANGE bounds), oldest first. */
async function* pages(
  redis: Redis | Cluster,
  key: string,
  start: string,
  end: string,
): AsyncGenerator<AuditEntry[]> {
  let from = start;
  for (;;) {
    const rows = await redis.xrange(key, from, end, 'COUNT', PAGE);
    if (rows.length === 0) return;
    yield rows.map(([id, fields]) => toEntry(id, fields));
    if (rows.length < PAGE) return;
    from = `(${rows[rows.length - 1]![0]}`;
  }
}

/**
 * The audit log: one Redis stream, `${prefix}:audit`, appended by {@link RequestStore} in the same script as
 * each state change. Stream ids follow the store's clock, so time ranges are id ranges.
 */
export class AuditLog {
  private readonly keys: ReturnType<typeof requestKeys>;

  constructor(
    private readonly redis: Redis | Cluster,
    prefix: string,
  ) {
    this.keys = requestKeys(prefix);
  }

  /** Entries matching the query, oldest first. */
  async read(query: AuditQuery = {}): Promise<AuditEntry[]> {
    const limit = query.limit ?? 1000;
    let sinceMs = query.since?.getTime();
    if (query.requestId) {
      // A request has no entries before its creation: start the scan there instead of at the stream's start.
      const json = await this.redis.get(this.keys.request(query.requestId));
      if (json !== null) {
        const createdMs = new Date((JSON.parse(json) as CloudRequest).createdAt).getTime();
        sinceMs = Math.max(sinceMs ?? 0, createdMs);
      }
    }
    const start = sinceMs === undefined ? '-' : String(sinceMs);
    const end = query.until ? String(query.until.getTime()) : '+';
    const out: AuditEntry[] = [];
    if (limit <= 0) return out;
    for await (const page of pages(this.redis, this.keys.audit, start, end)) {
      for (const entry of page) {
        if (query.requestId && entry.requestId !== query.requestId) continue;
        out.push(entry);
        if (out.length >= limit) return out;
      }
    }
    return out;
  }
}

/** Every audit entry since `since` (all when absent), oldest first, read in pages so memory stays flat. */
export async function* exportAudit(
  redis: Redis | Cluster,
  prefix: string,
  since?: Date,
): AsyncGenerator<AuditEntry> {
  const start = since ? String(since.getTime()) : '-';
  for await (const page of pages(redis, requestKeys(prefix).audit, start, '+')) {
    yield* page;
  }
}
