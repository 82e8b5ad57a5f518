/**
 * What the audit export sends: a JSON array of entries, each named by its stream id so a receiver can drop the
 * duplicates at-least-once delivery may bring, and the HMAC that lets it check the batch came from this bot.
 */
import { createHmac } from 'node:crypto';
import { scrubSecrets } from '../observability/logger.ts';
import type { AuditRecord } from '../requests/model/audit-record.ts';
import type { AuditEntry } from '../requests/model/types.ts';

/**
 * The header carrying a batch's signature: `sha256=` and the hex HMAC-SHA256, keyed with AUDIT_WEBHOOK_SECRET, of
 * `<timestamp>.<body>` (the timestamp header's value, a dot, the exact body), as Slack signs its requests.
 */
export const SIGNATURE_HEADER = 'x-cloudops-signature';
/** The header carrying when a batch was signed, in Unix seconds: a receiver refuses one too old (a replay). */
export const TIMESTAMP_HEADER = 'x-cloudops-timestamp';
/** How many characters of an entry's details a trimmed entry keeps (docs/operations.md#audit-export). */
export const TRIMMED_DETAILS = 1_000;

/**
 * One audit entry as the receiver gets it (docs/operations.md#audit-export): a chained entry whole, as hashed, with
 * its stream id, `prev`, `hash` and `seal`, so the copy verifies (`cloudops audit verify --file`); an entry written
 * before the chain in the fields below only.
 */
export type ShippedAuditEntry = LegacyShippedEntry | AuditRecord;

/** An entry written before the audit chain, as it was always shipped. */
export interface LegacyShippedEntry {
  /** The audit stream's id: stable, unique, ordered (`<ms>-<seq>`); the same entry shipped twice has the same id. */
  id: string;
  /** The request the entry belongs to; null for an entry of no request (an agent disabled or enabled). */
  request_id: string | null;
  /** What happened: the request's new state (`approved`, `succeeded`, …), `created`, or a note (`reminder`, …). */
  act: string;
  /** Who did it: a Slack user id, `agent:<name>`, or `cloudops` for the bot itself. */
  actor: string;
  /** When, ISO 8601 in UTC. */
  time: string;
  /** The entry's note (the rule applied, the API's answer, …); null when it has none. */
  details: string | null;
}

/**
 * An audit entry in the shape the receiver gets; its details scrubbed of secrets as a log line is (`secrets`: the
 * configured values), since history written before typed text was scrubbed this way is shipped too.
 */
export function shippedEntry(entry: AuditEntry, secrets: readonly string[] = []): ShippedAuditEntry {
  // A chained entry goes as hashed: scrubbing it would break its hash (typed text is scrubbed before it is written).
  if (entry.record) return entry.record;
  return {
    id: entry.id,
    request_id: entry.requestId === '' ? null : entry.requestId,
    act: entry.state,
    actor: entry.actor,
    time: entry.at,
    details: entry.detail === undefined ? null : scrubSecrets(entry.detail, secrets),
  };
}

/**
 * An entry whose details are cut to {@link TRIMMED_DETAILS} characters and say so (` … [trimmed: N characters in
 * all]`): sent when a receiver refused the entry alone as too large (413). The full entry stays in the audit log.
 */
export function trimmedEntry(entry: ShippedAuditEntry): ShippedAuditEntry {
  const details = entry.details;
  if (details === null || details.length <= TRIMMED_DETAILS) return entry;
  const kept = Array.from(details).slice(0, TRIMMED_DETAILS).join('');
  return { ...entry, details: `${kept} … [trimmed: ${details.length} characters in all]` };
}

/** The request body of a batch: a JSON array; the entries whose id is in `trim` go trimmed. */
export function batchBody(
  entries: readonly AuditEntry[],
  secrets: readonly string[] = [],
  trim: ReadonlySet<string> = new Set(),
): string {
  return JSON.stringify(
    entries.map((entry) => {
      const shipped = shippedEntry(entry, secrets);
      return trim.has(entry.id) ? trimmedEntry(shipped) : shipped;
    }),
  );
}

/** The signature header's value for `body` sent with the timestamp header `timestamp` (Unix seconds). */
export function signBody(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}
