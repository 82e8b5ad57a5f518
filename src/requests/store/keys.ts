import { randomInt } from 'node:crypto';

/** Crockford base32: no I, L, O or U, so an id read aloud or retyped is unambiguous. */
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CROCKFORD_LETTERS = CROCKFORD.slice(10);
/** How many request ids a channel's index keeps for `/cloud jobs`. */
export const CHANNEL_INDEX_KEEP = 1000;
/** How many of a person's own requests their index keeps (the App Home shows the most recent). */
export const REQUESTER_INDEX_KEEP = 100;

/**
 * A new request id such as 'R7K2M9QX': 8 Crockford base32 characters from a CSPRNG. The first is a letter so an
 * id never reads as a number (BullMQ refuses numeric custom job ids).
 */
export function newRequestId(): string {
  let id = CROCKFORD_LETTERS[randomInt(CROCKFORD_LETTERS.length)]!;
  for (let i = 1; i < 8; i++) id += CROCKFORD[randomInt(CROCKFORD.length)]!;
  return id;
}

/** Key names under one prefix, shared by the store, the audit log and the workers. */
export function requestKeys(prefix: string) {
  return {
    request: (id: string) => `${prefix}:req:${id}`,
    channel: (channel: string) => `${prefix}:channel:${channel}`,
    audit: `${prefix}:audit`,
    /** The audit chain's last hash: what the next entry's `prev` must be. */
    auditHead: `${prefix}:audit-head`,
    /** Where the audit chain begins once retention trimmed it: the last entry removed, sealed. */
    auditAnchor: `${prefix}:audit-anchor`,
    /** Requests that must have an execute job (approved or queued), scored by when they entered that state. */
    awaitingRun: `${prefix}:awaiting-run`,
    /** Ended requests without an open lease, scored by when they ended (or their lease closed). */
    retention: `${prefix}:retention`,
    /** Every stored request, scored by creation: the oldest bounds how much audit history must stay. */
    created: `${prefix}:created`,
    /** Requests whose lease is open, scored by when the lease ends. */
    leases: `${prefix}:leases`,
    /** A person's own most recent requests, scored by creation (the App Home). */
    requestedBy: (person: string) => `${prefix}:requested-by:${person}`,
    /**
     * Requests not yet final that name a person or a user group (requester, approver, escalated to), scored by
     * creation: what the App Home and its refresh read instead of scanning all requests. Removed when the request
     * reaches a final state.
     */
    involving: (person: string) => `${prefix}:involving:${person}`,
  };
}

/** The key names of one prefix (see {@link requestKeys}). */
export type RequestKeys = ReturnType<typeof requestKeys>;
