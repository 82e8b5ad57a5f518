import { Decimal } from './decimal.ts';
import type { ResizeCheck } from './resize.ts';
import { COOLDOWN_MS, NAME } from './resize.ts';
import type { CpuClass, ResizeField, ResizeTarget, Violation, VmKnown } from './types.ts';

/**
 * Temporary increases (docs/policy.md#temporary-changes-leases): how long, what may be temporary, what it returns
 * to, and when the return is offered. Pure; the clock is a parameter.
 */

/** How long a lease lasts: hours from when the increase ran, or until the start of a day (UTC). */
export type LeaseTerm = { hours: number } | { until: string };

/** The longest lease: a year. Longer is a permanent change. */
export const MAX_LEASE_HOURS = 365 * 24;

/** The fields a lease returns; the OS disk never shrinks, and WAN or private network are not sizes. */
export const LEASE_FIELDS = ['cores', 'ramGb', 'cpuClass'] as const;
export type LeaseField = (typeof LEASE_FIELDS)[number];

/** The size a lease returns to: the values before the increase, of the fields it raised. */
export type LeaseReturn = Pick<ResizeTarget, LeaseField>;

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

/**
 * `48h`, `7d` or `2026-12-01` (the start of that day, UTC), or why not. A date is not compared with today here:
 * {@link checkLease} does that with the clock.
 */
export function parseLeaseTerm(raw: string): LeaseTerm | { error: string } {
  const text = raw.trim().toLowerCase();
  const duration = /^(\d{1,6})([hd])$/.exec(text);
  if (duration) {
    const hours = Number(duration[1]) * (duration[2] === 'd' ? 24 : 1);
    if (hours <= 0) return { error: 'a lease lasts at least 1 hour' };
    if (hours > MAX_LEASE_HOURS) return { error: 'a lease lasts at most 365 days' };
    return { hours };
  }
  const date = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (date) {
    const at = new Date(Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3])));
    // Date.UTC rolls 2026-02-30 over into March: a date that does not exist comes back different.
    if (at.toISOString().slice(0, 10) !== text) return { error: `${text} is not a date` };
    return { until: at.toISOString() };
  }
  return { error: 'a lease is written as hours (48h), days (7d) or a date (2026-12-01)' };
}

/** How a lease term reads: "48 h", "7 d", "until 2026-12-01". */
export function leaseTermText(term: LeaseTerm): string {
  if ('until' in term) return `until ${term.until.slice(0, 10)}`;
  return term.hours % 24 === 0 ? `${term.hours / 24} d` : `${term.hours} h`;
}

/** When a lease whose increase ran at `startedAt` ends. */
export function leaseEnd(term: LeaseTerm, startedAt: Date): Date {
  if ('until' in term) return new Date(term.until);
  return new Date(startedAt.getTime() + term.hours * HOUR_MS);
}

/**
 * When the return may be offered: the lease's end, but never before the 24-hour rule allows lowering after the
 * last increase the bot knows of (the lease's own, or a later one by another request).
 */
export function offerAt(endsAt: Date, lastIncreaseAt: Date | undefined): Date {
  const allowed = lastIncreaseAt ? lastIncreaseAt.getTime() + COOLDOWN_MS : 0;
  return new Date(Math.max(endsAt.getTime(), allowed));
}

/** The day's reminder after `last` (the offer or the previous reminder): one a day. */
export function nextReminderAt(last: Date): Date {
  return new Date(last.getTime() + DAY_MS);
}

/** What a lease on a checked resize returns to, and why it cannot be temporary. */
export interface LeaseCheck {
  violations: Violation[];
  /** The size before the increase, of each field raised. */
  returnTo: LeaseReturn;
  /** For the request message, e.g. that a disk increase stays. */
  notes: string[];
}

/**
 * Whether a resize may be temporary: only increases of cores, RAM or CPU class, from a size the bot knows (else
 * it cannot return to it). A disk increase in the same request stays; anything else (a decrease, WAN, private
 * network) is refused on the lease field, as is a date already past.
 */
export function checkLease(input: {
  vm: VmKnown;
  check: ResizeCheck;
  term: LeaseTerm;
  now: Date;
}): LeaseCheck {
  const { vm, check, term, now } = input;
  const violations: Violation[] = [];
  const notes: string[] = [];
  const refuse = (message: string) => violations.push({ field: 'lease', code: 'bad_value', message });
  const sent = new Set(check.steps.flatMap((step) => Object.keys(step) as ResizeField[]));
  const raised = LEASE_FIELDS.filter((f) => check.directions[f] === 'up' && sent.has(f));
  const unknown = LEASE_FIELDS.filter((f) => check.directions[f] === 'unknown' && sent.has(f));
  const others = [...sent].filter(
    (f) =>
      !(LEASE_FIELDS as readonly string[]).includes(f) &&
      !(f === 'osDiskGb' && check.directions.osDiskGb === 'up'),
  );
  if (unknown.length > 0) {
    refuse(
      `A temporary change returns to the size before it, and the bot does not know the current ${unknown.map((f) => NAME[f]).join(' or ')}: make it a permanent change, or add the VM's size to the policy file.`,
    );
  } else if (check.decreases.length > 0 || others.length > 0) {
    const what = [
      ...check.decreases.map((f) => `lowers ${NAME[f]}`),
      ...others.map((f) => `changes ${NAME[f]}`),
    ];
    refuse(
      `Only an increase of cores, RAM or CPU class can be temporary; this request also ${what.join(', ')}. Request that separately, or leave “Return to the current size after” empty.`,
    );
  } else if (raised.length === 0) {
    refuse(
      'Only an increase of cores, RAM or CPU class can be temporary, and this request raises none of them. Leave “Return to the current size after” empty.',
    );
  }
  if ('until' in term && new Date(term.until) <= now) {
    refuse(
      `The lease would end ${term.until.slice(0, 10)} (start of the day, UTC), which has passed: choose a later date.`,
    );
  }
  const returnTo: LeaseReturn = {};
  for (const field of raised) Object.assign(returnTo, { [field]: vm[field] as number | CpuClass });
  if (violations.length === 0 && check.directions.osDiskGb === 'up') {
    notes.push('The OS disk increase stays when the lease ends: a disk never shrinks.');
  }
  return { violations, returnTo, notes };
}

/** "4 cores / 8 GB" (and the CPU class where the lease returns it). */
export function sizeText(size: LeaseReturn): string {
  const parts: string[] = [];
  if (size.cores !== undefined) parts.push(`${size.cores} cores`);
  if (size.ramGb !== undefined) parts.push(`${size.ramGb} GB`);
  if (size.cpuClass !== undefined) parts.push(`${size.cpuClass} CPU`);
  return parts.join(' / ');
}

/**
 * What the raised fields cost between two times at `hourly` (a price string): every started hour counts, as hours
 * are billed. Exact decimal; two places.
 */
export function leaseCost(hourly: string, from: Date, to: Date): { hours: number; cost: string } {
  const hours = Math.max(0, Math.ceil((to.getTime() - from.getTime()) / HOUR_MS));
  return { hours, cost: Decimal.parse(hourly).mul(hours).toFixed(2) };
}
