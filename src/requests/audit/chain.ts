/**
 * The audit chain (docs/operations.md#audit-chain): each entry carries `prev` (the previous entry's hash), `hash`
 * (the SHA-256 of its canonical JSON, `prev` included) and `seal` (an HMAC of `hash` under the seal keys' 'audit'
 * purpose). Editing an entry breaks its hash; rebuilding the hashes after an edit needs the key for the seals.
 * Pure: no Redis here.
 */
import { hash } from 'node:crypto';
import type { SealKeys } from '../../config/seal-keys.ts';
import type { AuditAnchor, AuditBody } from '../model/audit-record.ts';
import { canonicalJson } from '../model/canonical-json.ts';

/** What sealing needs of the seal keys. */
export type AuditSealer = Pick<SealKeys, 'seal' | 'check'>;

/** The body of a record: what its hash covers. */
export function bodyOf(record: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, hash: _hash, seal: _seal, ...body } = record;
  return body;
}

/** SHA-256 (hex) of the canonical JSON of `body`, `prev` included. */
export function hashOf(body: Record<string, unknown> | AuditBody): string {
  return sha256(canonicalJson(body));
}

/** One-shot SHA-256 (hex): no Hash object per entry, half the cost of one on an entry's few hundred bytes. */
function sha256(text: string): string {
  return hash('sha256', text, 'hex');
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
    const digest = sha256(json);
    out.push({ body, json, hash: digest, seal: sealer ? sealer.seal('audit', digest) : '' });
    last = digest;
  }
  return out;
}
