import type { Cluster, Redis } from 'ioredis';
import type { AuditBody, AuditRecord } from '../model/audit-record.ts';
import type { AuditEntry, CloudRequest } from '../model/types.ts';
import { requestKeys } from '../store/keys.ts';

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

/**
 * The consumer group of the audit export (src/audit-export/) on the audit stream. An entry it has not acknowledged
 * (pending, or after its last delivered id) is not shipped yet, and retention keeps it while the export is on.
 */
export const AUDIT_EXPORT_GROUP = 'cloudops-audit-export';

/**
 * A stream entry's fields (`[name, value, …]`) as an audit entry: a chained one (`e`, `h`, `s`: its canonical JSON,
 * hash and seal) with its whole record, or one written before the chain (`requestId`, `state`, …).
 */
export function auditEntryOf(id: string, fields: string[]): AuditEntry {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) map.set(fields[i]!, fields[i + 1]!);
  const json = map.get('e');
  if (json !== undefined) return chainedEntry(id, json, map.get('h') ?? '', map.get('s'));
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

function chainedEntry(id: string, json: string, hash: string, seal: string | undefined): AuditEntry {
  let body: AuditBody;
  try {
    body = JSON.parse(json) as AuditBody;
  } catch {
    // Not JSON: written by someone other than the bot. Kept so verify names it; the hash cannot match.
    body = {
      request_id: null,
      act: 'unreadable',
      actor: '',
      time: '',
      details: json,
      policy_version: null,
      prev: '',
    };
  }
  const record: AuditRecord = { id, ...body, hash, ...(seal ? { seal } : {}) };
  return {
    id,
    requestId: body.request_id ?? '',
    state: body.act as AuditEntry['state'],
    actor: body.actor,
    at: body.time,
    ...(body.details !== null ? { detail: body.details } : {}),
    record,
  };
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
    yield rows.map(([id, fields]) => auditEntryOf(id, fields));
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

/** Orders two stream ids ('1700000000000-3'): by time, then by sequence. */
export function compareStreamIds(a: string, b: string): number {
  const [aMs = 0, aSeq = 0] = a.split('-').map(Number);
  const [bMs = 0, bSeq = 0] = b.split('-').map(Number);
  return aMs - bMs || aSeq - bSeq;
}

/** XINFO GROUPS' reply for one group, as a map. */
export type GroupInfo = Map<string, unknown>;

/** The audit export's consumer group on `stream` (undefined when the stream or the group does not exist). */
export async function exportGroupInfo(
  redis: Redis | Cluster,
  stream: string,
): Promise<GroupInfo | undefined> {
  let groups: unknown[][];
  try {
    groups = (await redis.xinfo('GROUPS', stream)) as unknown[][];
  } catch (error) {
    if (error instanceof Error && /no such key/i.test(error.message)) return undefined;
    throw error;
  }
  for (const flat of groups) {
    const info: GroupInfo = new Map();
    for (let i = 0; i + 1 < flat.length; i += 2) info.set(String(flat[i]), flat[i + 1]);
    if (info.get('name') === AUDIT_EXPORT_GROUP) return info;
  }
  return undefined;
}

/**
 * The id of the oldest audit entry the export has not shipped: the oldest pending (delivered, not acknowledged) or
 * the first after its last delivered id. Undefined when everything is shipped, or when there is no export group and
 * `exportOn` is false; with `exportOn` and no group yet (the export has not started), the stream's first entry.
 */
export async function oldestUnshipped(
  redis: Redis | Cluster,
  stream: string,
  exportOn: boolean,
): Promise<string | undefined> {
  const first = async (start: string) => (await redis.xrange(stream, start, '+', 'COUNT', 1))[0]?.[0];
  const group = await exportGroupInfo(redis, stream);
  if (!group) return exportOn ? first('-') : undefined;
  const [count, smallest] = (await redis.xpending(stream, AUDIT_EXPORT_GROUP)) as [number, string | null];
  const next = await first(`(${String(group.get('last-delivered-id') ?? '0-0')}`);
  const candidates = [count > 0 ? smallest : undefined, next].filter((id): id is string => !!id);
  return candidates.sort(compareStreamIds)[0];
}

/** How many audit entries have ids from `start` (inclusive) to `end` (an XRANGE bound), counted in pages. */
export async function countAudit(
  redis: Redis | Cluster,
  stream: string,
  start: string,
  end: string,
): Promise<number> {
  let count = 0;
  for await (const page of pages(redis, stream, start, end)) count += page.length;
  return count;
}
