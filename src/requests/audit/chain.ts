/**
 * The audit chain (docs/operations.md#audit-chain): each entry carries `prev` (the previous entry's hash), `hash`
 * (the SHA-256 of its canonical JSON, `prev` included) and `seal` (an HMAC of `hash` under the seal keys' 'audit'
 * purpose). Editing an entry breaks its hash; rebuilding the hashes after an edit needs the key for the seals.
 * Pure: no Redis here.
 */
import { createHash } from 'node:crypto';
import type { SealKeys } from '../../config/seal-keys.ts';

/** What sealing needs of the seal keys. */
export type AuditSealer = Pick<SealKeys, 'seal' | 'check'>;

/** How an approver proved who they are, as the audit names it. */
export interface AuditApprover {
  user: string;
  method: 'slack' | 'passkey' | 'sso';
  /** The passkey's credential id (base64url). */
  credential?: string;
  /** The IdP's subject. */
  subject?: string;
  at: string;
}

/** Who asked: a person in Slack, an agent for a person, or an operator at the command line. */
export interface AuditRequester {
  slack?: string;
  name?: string;
  email?: string;
  agent?: string;
  on_behalf_of?: string;
  cli?: { user: string; host: string; as?: string };
}

/** One audit entry as it is hashed: everything but its stream id, hash and seal. */
export interface AuditBody {
  /** The request it belongs to; null for an entry of no request (a policy change, an agent disabled). */
  request_id: string | null;
  /** What happened: a request's new state, `created`, a note (`approval`, `reminder`, …) or `policy_changed`. */
  act: string;
  /** Who did it: a Slack user id, `agent:<name>`, `cli:<user>@<host>`, or `cloudops` for the bot itself. */
  actor: string;
  /** When, ISO 8601 in UTC. */
  time: string;
  details: string | null;
  /** The version of the policy the writing process held (12 hex digits), null when it was not known. */
  policy_version: string | null;
  project?: { name: string; id: string };
  vm?: number;
  /** Each field before → after, or the backup restored. */
  change?:
    | Record<string, { before: string | number | null; after: string | number | null }>
    | { backup: string; autostart: boolean };
  /** The monthly cost difference as an exact decimal, with its currency. */
  monthly_cost_delta?: { amount: string; currency: string } | null;
  rule?: string | null;
  approvals_needed?: number;
  approvers?: AuditApprover[];
  requester?: AuditRequester;
  ticket?: string | null;
  /** Frozen work run now by a break-glass user, and why. */
  break_glass?: { by: string; reason: string; at: string };
  /** The API's latest answer: its task id, or its status and reason. */
  outcome?: { task_id?: string; status?: number; answer?: string; not_sent?: boolean } | null;
  /** The hash of the entry before it; '' for the first entry of the chain. */
  prev: string;
}

/** A chained entry as `cloudops audit --json`, the export and `verify --file` see it. */
export interface AuditRecord extends AuditBody {
  /** The stream id: ordered, `<ms>-<seq>`; not part of the hash. */
  id: string;
  hash: string;
  /** Absent when no SEAL_KEY was set where it was written. */
  seal?: string;
}

/** Where the chain begins once retention trimmed it: the last entry removed, sealed. */
export interface AuditAnchor {
  id: string;
  hash: string;
  seal?: string;
}

/** JSON with object keys sorted at every depth, no whitespace, undefined members left out: one text per value. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item ?? null)).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/** The body of a record: what its hash covers. */
export function bodyOf(record: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, hash: _hash, seal: _seal, ...body } = record;
  return body;
}

/** SHA-256 (hex) of the canonical JSON of `body`, `prev` included. */
export function hashOf(body: Record<string, unknown> | AuditBody): string {
  return createHash('sha256').update(canonicalJson(body)).digest('hex');
}

/** What an anchor's seal covers: its id and hash, so neither can be moved to another. */
export function anchorData(anchor: Pick<AuditAnchor, 'id' | 'hash'>): string {
  return `anchor ${anchor.id} ${anchor.hash}`;
}

/** A chained entry ready to store: its canonical body, hash and seal. */
export interface SealedEntry {
  body: AuditBody;
  json: string;
  hash: string;
  seal: string;
}

/** Chains `bodies` after `prev`, in order: each one's prev is the hash before it. */
export function chainAfter(
  prev: string,
  bodies: Omit<AuditBody, 'prev'>[],
  sealer: AuditSealer | undefined,
): SealedEntry[] {
  const out: SealedEntry[] = [];
  let last = prev;
  for (const partial of bodies) {
    const body = { ...partial, prev: last } as AuditBody;
    const json = canonicalJson(body);
    const hash = createHash('sha256').update(json).digest('hex');
    out.push({ body, json, hash, seal: sealer ? sealer.seal('audit', hash) : '' });
    last = hash;
  }
  return out;
}
