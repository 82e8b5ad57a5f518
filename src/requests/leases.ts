import type { Policy } from '../config/policy.ts';
import { scrubSecrets } from '../observability/logger.ts';
import { cleanReason } from '../rules/inputs.ts';
import { LEASE_FIELDS, type LeaseReturn, leaseEnd, nextReminderAt, offerAt } from '../rules/lease.ts';
import type { VmKnown } from '../rules/types.ts';
import { type ApprovalPolicy, isScheduledWaiting } from './approval/approvers.ts';
import type { Decision, Refusal } from './model/decision.ts';
import type { CloudRequest, Lease, RequestState } from './model/types.ts';
import type { DueItem, Outbox } from './outbox.ts';
import type { RequestStore } from './store/store.ts';
import type { VmFactsStore } from './vm-facts.ts';

/*
 * Temporary increases once they ran (docs/policy.md#temporary-changes-leases): the lease lives on the request that
 * made the increase, with `leaseOpen` set until the return succeeds or someone keeps the size. Its offer and its
 * daily reminders are ONE due item (kind `lease`) in the due-times set, moved forward each time it falls due.
 */

/** States in which a return request has ended without changing the VM: it no longer stands in Keep's way. */
const RETURN_ENDED: readonly RequestState[] = [
  'rejected',
  'expired',
  'cancelled',
  'refused',
  'resolved_failed',
];

/** How soon a lease's due item comes back while "Keep it" is written: what announces the keep after a stop. */
const KEEP_RETRY_MS = 60_000;

/** The lease's due item: its offer first, then one reminder a day. */
export function leaseItem(requestId: string): DueItem {
  return { kind: 'lease', requestId };
}

/**
 * The lease a request opens when its increase ran at `ranAt`: what the success write stores, and when the return is
 * first offered (never before the 24-hour rule allows lowering). Undefined for a permanent change.
 */
export function openLease(request: CloudRequest, ranAt: Date): { lease: Lease; offerAt: Date } | undefined {
  if (request.params.kind !== 'resize' || !request.params.lease || request.lease) return undefined;
  const endsAt = leaseEnd(request.params.lease.term, ranAt);
  return {
    lease: { startedAt: ranAt.toISOString(), endsAt: endsAt.toISOString() },
    offerAt: offerAt(endsAt, ranAt),
  };
}

/** What a lease's due time leads to now. */
export type LeaseStep =
  | { next: 'none' }
  | { next: 'wait'; until: Date }
  | { next: 'offer' }
  | { next: 'remind'; count: number };

/**
 * Pure: the offer once the lease ended and the 24-hour rule allows lowering after the last increase the bot knows
 * (the lease's own or a later one); then a reminder when a day has passed since the offer or the last reminder.
 */
export function leaseStep(request: CloudRequest, lastIncreaseAt: Date | undefined, now: Date): LeaseStep {
  const lease = request.lease;
  if (!request.leaseOpen || !lease) return { next: 'none' };
  if (!lease.offeredAt) {
    const started = new Date(lease.startedAt);
    const increased = lastIncreaseAt && lastIncreaseAt > started ? lastIncreaseAt : started;
    const at = offerAt(new Date(lease.endsAt), increased);
    return now < at ? { next: 'wait', until: at } : { next: 'offer' };
  }
  const at = nextReminderAt(new Date(lease.remindedAt ?? lease.offeredAt));
  return now < at ? { next: 'wait', until: at } : { next: 'remind', count: (lease.reminders ?? 0) + 1 };
}

/**
 * The raised fields as the bot knows them now, when another request changed them after the increase (so the offer
 * says so); undefined when they are as the increase left them.
 */
export function changedSince(request: CloudRequest, vm: VmKnown): LeaseReturn | undefined {
  if (request.params.kind !== 'resize' || !request.params.lease) return undefined;
  const { target, lease } = request.params;
  const fields = LEASE_FIELDS.filter((f) => lease.returnTo[f] !== undefined);
  if (fields.every((f) => vm[f] === undefined || vm[f] === target[f])) return undefined;
  const now: LeaseReturn = {};
  for (const field of fields) Object.assign(now, { [field]: vm[field] });
  return now;
}

/**
 * The patch that ends a lease whose return request succeeded (the worker writes it with the store's
 * compare-and-set); undefined when the lease is no longer open.
 */
export function returnedPatch(
  current: CloudRequest,
  returnRequestId: string,
  at: Date,
): Partial<CloudRequest> | undefined {
  if (!current.leaseOpen || !current.lease) return undefined;
  return {
    leaseOpen: false,
    lease: { ...current.lease, returned: { requestId: returnRequestId, at: at.toISOString() } },
  };
}

/** Where ending a lease writes: the store, the due times and the thread (the worker and the lifecycle each bring theirs). */
export interface LeaseEnding {
  store: RequestStore;
  dropDue(items: DueItem[]): Promise<void>;
  announce(request: CloudRequest, event: 'lease_returned'): Promise<void>;
}

/**
 * A return request ran (or was marked applied after an unknown outcome): the lease it returns ends (audited on the
 * lease's request), its reminders stop and its thread is told. Idempotent: run again after a crash, it finishes what
 * the first run began.
 */
export async function endReturnedLease(ending: LeaseEnding, request: CloudRequest, at: Date): Promise<void> {
  if (request.params.kind !== 'resize' || !request.params.returnOf) return;
  const leaseId = request.params.returnOf;
  const ended = await ending.store.note(
    leaseId,
    { note: 'lease', actor: 'cloudops', detail: `returned by request ${request.id}` },
    (current) => returnedPatch(current, request.id, at),
  );
  // Run again after a stop that came after the note, it finds the lease closed by this return: it announces that.
  const closed = ended.request;
  if (closed?.lease?.returned?.requestId === request.id) await ending.announce(closed, 'lease_returned');
  await ending.dropDue([leaseItem(leaseId)]);
}

export interface LeaseDeps {
  policy: Policy;
  store: RequestStore;
  outbox: Outbox;
  approvals: ApprovalPolicy;
  vmFacts: VmFactsStore;
  now: () => Date;
  /** Secret values scrubbed from a typed reason (see LifecycleDeps). */
  secrets?: readonly string[];
}

/**
 * A lease's life after its increase ran: the offer and reminders when its due time comes, who may act on it (the
 * approval policy's answer), "Keep it", and the return request made from the offer.
 */
export class Leases {
  /**
   * @param cancel the lifecycle's cancel without its clicker check: how Keep withdraws a return still waiting
   */
  constructor(
    private readonly deps: LeaseDeps,
    private readonly cancel: (request: CloudRequest, actor: string, detail: string) => Promise<Decision>,
  ) {}

  /** What the bot knows of the lease's VM now (the policy's facts under what it applied). */
  vmNow(request: CloudRequest): Promise<VmKnown> {
    return this.deps.vmFacts.knownFor(this.deps.policy, request);
  }

  /**
   * The lease's due time came: offer the return (once), or remind (once a day), or wait longer (the 24-hour rule
   * after a later increase). Each write is a compare-and-set, so two schedulers never post twice.
   */
  async due(requestId: string): Promise<void> {
    const { store, outbox } = this.deps;
    const request = await store.get(requestId);
    if (!request) return;
    const vm = await this.vmNow(request);
    const now = this.deps.now();
    const step = leaseStep(request, vm.lastIncreaseAt, now);
    const at = now.toISOString();
    // Each case notes, announces, and only then moves the due item on: a process stopping in between leaves the item
    // to be taken again after its claim, which finds the note and announces it (the announcement's fixed job id and
    // the reply's record make a second one post nothing new).
    switch (step.next) {
      case 'none':
        return this.announceEnd(request);
      case 'wait':
        if (request.lease?.offeredAt) await this.announceLast(request);
        return outbox.dueAt(leaseItem(requestId), step.until);
      case 'offer': {
        const changed = changedSince(request, vm);
        const noted = await store.note(
          requestId,
          { note: 'lease', actor: 'cloudops', detail: 'return offered' },
          (current) =>
            current.leaseOpen && current.lease && !current.lease.offeredAt
              ? { lease: { ...current.lease, offeredAt: at, ...(changed ? { changedSince: changed } : {}) } }
              : undefined,
        );
        if (noted.ok) await outbox.announce(noted.request, 'lease_offer');
        await outbox.dueAt(leaseItem(requestId), nextReminderAt(now));
        return;
      }
      case 'remind': {
        const noted = await store.note(
          requestId,
          { note: 'lease', actor: 'cloudops', detail: `reminder ${step.count}` },
          (current) =>
            current.leaseOpen && current.lease && (current.lease.reminders ?? 0) === step.count - 1
              ? { lease: { ...current.lease, remindedAt: at, reminders: step.count } }
              : undefined,
        );
        if (noted.ok) await outbox.announce(noted.request, 'lease_reminder', step.count);
        await outbox.dueAt(leaseItem(requestId), nextReminderAt(now));
        return;
      }
    }
  }

  /** The offer or the latest reminder again, for a note whose announcement a stopped process may not have sent. */
  private async announceLast(request: CloudRequest): Promise<void> {
    const reminders = request.lease?.reminders ?? 0;
    if (reminders > 0) await this.deps.outbox.announce(request, 'lease_reminder', reminders);
    else await this.deps.outbox.announce(request, 'lease_offer');
  }

  /** A closed lease's end again (kept, or returned), for a stop between its note and its announcement. */
  private async announceEnd(request: CloudRequest): Promise<void> {
    if (request.leaseOpen || !request.lease) return;
    if (request.lease.kept) await this.deps.outbox.announce(request, 'lease_kept');
    else if (request.lease.returned) await this.deps.outbox.announce(request, 'lease_returned');
  }

  /** Whether `user` may return or keep: the requester or one of the request's approvers, while the lease is open. */
  async mayAct(request: CloudRequest, user: string): Promise<Decision> {
    const notAllowed = await this.deps.approvals.may(request, user, 'lease');
    if (notAllowed) return { ok: false, refusal: notAllowed };
    if (!request.leaseOpen) return { ok: false, refusal: { code: 'lease_closed', request } };
    return { ok: true, request };
  }

  /**
   * "Keep it": the size stays, with a reason (audited); the lease ends and its reminders stop. A lease ends by Keep
   * or by its return, never both: a return request still waiting (for approval, a freeze's end or its scheduled
   * time) is withdrawn first, as cancelled by the person keeping; one already queued or being sent refuses Keep
   * until its outcome is known (it ends the lease when it succeeds, or leaves it open when it fails).
   */
  async keep(request: CloudRequest, user: string, typed: string): Promise<Decision> {
    const allowed = await this.mayAct(request, user);
    if (!allowed.ok) return allowed;
    const reason = cleanReason(scrubSecrets(typed, this.deps.secrets));
    const now = this.deps.now();
    const at = now.toISOString();
    // The lease's due item comes back within a minute: a stop after the note below leaves it to announce the keep
    // (were Keep refused, the item finds the lease open and moves itself back to its time).
    await this.deps.outbox.dueAt(leaseItem(request.id), new Date(now.getTime() + KEEP_RETRY_MS));
    let current: CloudRequest = request;
    // A new return asked for meanwhile fails the write below (it names another return): withdraw that one too.
    for (let attempt = 0; ; attempt++) {
      const returnId = current.lease?.returnRequestId;
      const blocked = returnId ? await this.withdrawReturn(returnId, current.id, user) : undefined;
      if (blocked) return { ok: false, refusal: blocked };
      const kept = await this.deps.store.note(
        request.id,
        { note: 'lease', actor: user, detail: `kept: ${reason}` },
        (latest) =>
          latest.leaseOpen && latest.lease && latest.lease.returnRequestId === returnId
            ? { leaseOpen: false, lease: { ...latest.lease, kept: { by: user, reason, at } } }
            : undefined,
      );
      if (kept.ok) return this.keptNow(kept.request);
      const latest = kept.request ?? (await this.deps.store.get(request.id));
      if (!latest?.leaseOpen || attempt >= 2)
        return { ok: false, refusal: { code: 'lease_closed', request: latest ?? request } };
      current = latest;
    }
  }

  /**
   * The lease's return request stops before Keep ends the lease: cancelled while it waits; a refusal while it runs
   * (or has just succeeded); nothing when it ended without changing the VM.
   */
  private async withdrawReturn(
    returnId: string,
    leaseId: string,
    user: string,
  ): Promise<Refusal | undefined> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const back = await this.deps.store.get(returnId);
      if (!back || RETURN_ENDED.includes(back.state)) return undefined;
      if (!(back.state === 'pending' || back.state === 'frozen' || isScheduledWaiting(back)))
        return { code: 'return_under_way', request: back };
      const withdrawn = await this.cancel(back, user, `withdrawn: the lease of request ${leaseId} was kept`);
      if (withdrawn.ok) return undefined;
      // It moved on meanwhile (approved, expired…): look at where it is now.
    }
    const latest = await this.deps.store.get(returnId);
    return latest ? { code: 'return_under_way', request: latest } : undefined;
  }

  /** After the write that kept the lease: its reminders stop and the thread is told. */
  private async keptNow(kept: CloudRequest): Promise<Decision> {
    await this.deps.outbox.announce(kept, 'lease_kept');
    await this.deps.outbox.dropDue([leaseItem(kept.id)]);
    return { ok: true, request: kept };
  }

  /**
   * After an unknown outcome a person marked the change applied: a temporary increase opens its lease from when it was
   * sent (the patch for that same write, its offer set first), and a return ends its lease.
   */
  async resolvedDone(request: CloudRequest): Promise<Partial<CloudRequest>> {
    const sentAt = new Date(request.outcomes[request.outcomes.length - 1]?.at ?? this.deps.now());
    const opened = openLease(request, sentAt);
    if (!opened) return {};
    await this.deps.outbox.dueAt(leaseItem(request.id), opened.offerAt);
    return { lease: opened.lease, leaseOpen: true };
  }

  /** The lease a resolved-done return request returns ends. */
  async returned(request: CloudRequest): Promise<void> {
    const { store, outbox } = this.deps;
    await endReturnedLease(
      { store, dropDue: (items) => outbox.dropDue(items), announce: (r, e) => outbox.announce(r, e) },
      request,
      this.deps.now(),
    );
  }

  /** A return request was made from the offer: the lease names it (audited); the lease stays open until it succeeds. */
  async returnRequested(leaseRequestId: string, returnRequest: CloudRequest): Promise<void> {
    const named = await this.deps.store.note(
      leaseRequestId,
      { note: 'lease', actor: returnRequest.requester, detail: `return requested: ${returnRequest.id}` },
      (current) =>
        current.leaseOpen && current.lease
          ? { lease: { ...current.lease, returnRequestId: returnRequest.id } }
          : undefined,
    );
    // Kept between the form's check and this write: the return must not run against a kept lease.
    if (!named.ok && named.request?.lease?.kept)
      await this.cancel(
        returnRequest,
        'cloudops',
        `withdrawn: the lease of request ${leaseRequestId} was kept`,
      );
  }
}
