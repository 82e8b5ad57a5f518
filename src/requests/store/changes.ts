import { type CloudRequest, type NewRequest, revisionOf } from '../model/types.ts';
import type { VerifiedBy } from '../model/verification.ts';
import { newRequestId } from './keys.ts';

// The pure parts of a store write: what a patch may set, whether the write revises the request, which indexes it
// moves and the audit's words. No Redis here: store.ts decides and writes.

/** Fields no patch may set: they belong to the store. */
const PROTECTED = ['id', 'state', 'version', 'createdAt', 'updatedAt'] as const;

/** "verified: passkey, credential AbC…" / "verified: SSO, subject 00u1…": the audit's words for a verification. */
export function verifiedDetail(verified: VerifiedBy): string {
  return verified.method === 'sso'
    ? `verified: SSO, subject ${verified.subject}`
    : `verified: passkey, credential ${verified.subject}`;
}

/**
 * Whether a write changes what a verification link was issued for: the state, what the request would do, or the
 * verification it asks for (a re-planned approval).
 */
export function revised(current: CloudRequest, next: CloudRequest): boolean {
  return (
    next.state !== current.state ||
    JSON.stringify(next.params) !== JSON.stringify(current.params) ||
    JSON.stringify(next.verify) !== JSON.stringify(current.verify)
  );
}

/** The open-lease index's move for a write: the lease's end while open, 'closed' when it just closed. */
export function leaseIndex(current: CloudRequest, next: CloudRequest): string {
  if (next.leaseOpen && next.lease) return String(new Date(next.lease.endsAt).getTime());
  return current.leaseOpen ? 'closed' : '';
}

/**
 * Everyone a request names as requester, approver or escalation target (current and earlier versions), once each.
 * Those escalated to are indexed from the start, so an escalation needs no index write of its own; until it
 * happens the approval policy keeps the request off their App Home.
 */
export function peopleOf(
  ...versions: Pick<CloudRequest, 'requester' | 'approvers' | 'escalateTo'>[]
): string[] {
  return [...new Set(versions.flatMap((r) => [r.requester, ...r.approvers, ...(r.escalateTo ?? [])]))];
}

/**
 * The request as the store writes it: the fields a state change moves (`state`, `version`, `revision`, `updatedAt`)
 * last, in that order, so a script can move a state by rewriting the JSON's tail as text (scripts.ts
 * MOVE_STATE_LUA) and the result is still what `JSON.stringify` of the parsed copy gives, byte for byte: the SHA-1
 * every compare-and-set compares.
 */
export function inStorageOrder(request: CloudRequest): CloudRequest {
  const { state, version, revision, updatedAt, ...rest } = request;
  return { ...rest, state, version, revision: revisionOf(request), updatedAt };
}

/** The patch without the fields that belong to the store ({@link PROTECTED}). */
export function stripProtected(patch: Partial<CloudRequest> | undefined): Partial<CloudRequest> {
  if (!patch) return {};
  const copy: Partial<CloudRequest> = { ...patch };
  for (const key of PROTECTED) delete copy[key];
  return copy;
}

/** A new request as first stored: a fresh id, version and revision 1, no steps sent yet. */
export function freshRequest(input: NewRequest, at: Date): CloudRequest {
  return inStorageOrder({
    ...input,
    id: newRequestId(),
    version: 1,
    revision: 1,
    createdAt: at.toISOString(),
    updatedAt: at.toISOString(),
    nextStep: 0,
    outcomes: [],
  });
}
