/**
 * Reads the audit chain for checking: from Redis (the stream, its head and anchor) or from an exported copy (JSON
 * lines, or the webhook's JSON arrays).
 */
import type { Cluster, Redis } from 'ioredis';
import type { AuditAnchor } from '../model/audit-record.ts';
import type { AuditEntry } from '../model/types.ts';
import { requestKeys } from '../store/keys.ts';
import { auditEntryOf, compareStreamIds } from './audit.ts';
import type { ReadRecord } from './verify.ts';

/** Entries fetched per XRANGE round trip. */
const PAGE = 1000;

/** An exported copy cannot be read as entries; the message names the line. */
export class AuditFileError extends Error {
  override readonly name = 'AuditFileError';
  readonly code = 'AUDIT_FILE_UNREADABLE';
}

/** An entry as the checker reads it: a chained record whole, an older entry by its stored fields. */
export function readRecordOf(entry: AuditEntry): ReadRecord {
  if (entry.record) return entry.record as unknown as ReadRecord;
  const { record: _record, ...legacy } = entry;
  return legacy as ReadRecord;
}

/**
 * The chain as Redis holds it: the anchor, the head and the first page read in one MULTI (a trim or an append in
 * between cannot make a sound chain look broken), then the rest page by page.
 */
export async function readStoredChain(
  redis: Redis | Cluster,
  prefix: string,
): Promise<{ records: ReadRecord[]; anchor?: AuditAnchor; head: string }> {
  const keys = requestKeys(prefix);
  const results = (await redis
    .multi()
    .get(keys.auditAnchor)
    .get(keys.auditHead)
    .xrange(keys.audit, '-', '+', 'COUNT', PAGE)
    .exec()) as [Error | null, unknown][] | null;
  const [anchorJson, head, firstPage] = (results ?? []).map(([error, value]) => {
    if (error) throw error;
    return value;
  }) as [string | null, string | null, [string, string[]][]];
  const records: ReadRecord[] = firstPage.map(([id, fields]) => readRecordOf(auditEntryOf(id, fields)));
  let page = firstPage;
  while (page.length === PAGE) {
    page = await redis.xrange(keys.audit, `(${page[page.length - 1]![0]}`, '+', 'COUNT', PAGE);
    records.push(...page.map(([id, fields]) => readRecordOf(auditEntryOf(id, fields))));
  }
  const anchor = anchorJson ? (JSON.parse(anchorJson) as AuditAnchor) : undefined;
  return { records, ...(anchor ? { anchor } : {}), head: head ?? '' };
}

/**
 * The entries of an exported copy, in stream order: JSON lines (`cloudops audit --json`) or the webhook's batches (a
 * JSON array each, one per line or one for the whole file). An entry shipped twice (at-least-once delivery) counts
 * once; the same id with different content is kept twice, so the check names it.
 */
export function parseAuditFile(text: string): ReadRecord[] {
  const items: unknown[] = [];
  const trimmed = text.trim();
  if (trimmed.startsWith('[') && isJson(trimmed)) items.push(...(JSON.parse(trimmed) as unknown[]));
  else
    for (const [index, line] of text.split('\n').entries()) {
      if (line.trim() === '') continue;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        throw new AuditFileError(`line ${index + 1} is not JSON`);
      }
      if (Array.isArray(value)) items.push(...value);
      else items.push(value);
    }
  const seen = new Map<string, string>();
  const records: ReadRecord[] = [];
  for (const [index, item] of items.entries()) {
    if (!item || typeof item !== 'object' || typeof (item as { id?: unknown }).id !== 'string')
      throw new AuditFileError(`entry ${index + 1} has no id: not an audit entry`);
    const text = JSON.stringify(item);
    const id = (item as { id: string }).id;
    if (seen.get(id) === text) continue;
    seen.set(id, text);
    records.push(item as ReadRecord);
  }
  return records.sort((a, b) => compareStreamIds(a.id, b.id));
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
