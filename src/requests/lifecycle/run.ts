import type { Decision } from '../model/decision.ts';
import type { CloudRequest } from '../model/types.ts';
import type { TransitionResult } from '../store/transitions.ts';
import { afterApproval, check, decide, freeze, reasonText, refuse } from './steps.ts';
import type { Acts } from './types.ts';

/*
 * What the bot does to a request on its way and when its times fall due: queue it once approved, hold it while a
 * freeze lasts, remind, escalate, expire, and record what a person found after an unknown outcome.
 */

/**
 * approved → queued → its job: the one way an approved request reaches the queue; while a freeze holds the project,
 * approved → frozen instead, until the window ends. Undefined when it lost. `announced`: the approval's
 * announcement under way, stored before the job is added (and before a freeze: the sweeper does not look at those).
 */
export async function queueApproved(
  acts: Acts,
  request: CloudRequest,
  detail?: string,
  announced?: Promise<void>,
): Promise<CloudRequest | undefined> {
  const { deps } = acts;
  // Awaited on every way out below; this only keeps a failure from counting as unhandled meanwhile.
  announced?.catch(() => undefined);
  const after = afterApproval(deps, request);
  if (after.next === 'freeze') {
    await announced;
    return freeze(acts, request, 'approved', after.freeze);
  }
  const [queued] = await Promise.all([
    deps.store.transition(
      request.id,
      { from: ['approved'], to: 'queued', actor: 'cloudops', detail },
      request,
    ),
    announced,
  ]);
  if (!queued.ok) return undefined;
  deps.metrics.requests.inc({ kind: request.kind, state: 'queued' });
  await deps.outbox.execute(queued.request);
  return queued.request;
}

/**
 * The end of a freeze fell due: if another window holds the project now, the request waits for its end; else the
 * rules are checked again when it runs (the worker re-checks work that waited) and it is queued.
 */
export async function endFreeze({ deps }: Acts, requestId: string): Promise<void> {
  const request = await deps.store.get(requestId);
  if (request?.state !== 'frozen') return;
  const after = deps.approvals.afterApproval(request, deps.now());
  if (after.next === 'freeze') {
    const until = after.freeze.until.toISOString();
    if (until !== request.frozenUntil) {
      const moved = await deps.store.note(
        request.id,
        {
          note: 'freeze',
          actor: 'cloudops',
          detail: `still frozen${reasonText(after.freeze)} until ${until}`,
        },
        (current) =>
          current.state === 'frozen' ? { frozenUntil: until, freezeReason: after.freeze.reason } : undefined,
      );
      if (moved.ok) await deps.outbox.announce(moved.request);
    }
    await deps.outbox.dueAt({ kind: 'freeze-end', requestId }, after.freeze.until);
    return;
  }
  const queued = await deps.store.transition(
    requestId,
    {
      from: ['frozen'],
      to: 'queued',
      actor: 'cloudops',
      detail: 'the freeze ended: queued, the rules are checked again when it runs',
    },
    request,
  );
  if (!queued.ok) return;
  deps.metrics.requests.inc({ kind: request.kind, state: 'queued' });
  await deps.outbox.execute(queued.request);
  await deps.outbox.announce(queued.request, 'unfrozen');
}

/** `remind_after_hours` passed on a pending request: one reminder in its thread, mentioning who has not acted. */
export async function remind({ deps }: Acts, requestId: string): Promise<void> {
  const at = deps.now().toISOString();
  const noted = await deps.store.note(requestId, { note: 'reminder', actor: 'cloudops' }, (current) =>
    current.state === 'pending' && !current.remindedAt ? { remindedAt: at } : undefined,
  );
  const request = announceable(noted, (r) => r.remindedAt !== undefined);
  if (request) await deps.outbox.announce(request, 'reminder');
}

/** 75 % of the approval TTL passed on a pending request: `escalate_to` are mentioned and may approve from now on. */
export async function escalate({ deps }: Acts, requestId: string): Promise<void> {
  const at = deps.now().toISOString();
  const noted = await deps.store.note(requestId, { note: 'escalation', actor: 'cloudops' }, (current) =>
    current.state === 'pending' && !current.escalatedAt && (current.escalateTo ?? []).length > 0
      ? { escalatedAt: at }
      : undefined,
  );
  const request = announceable(noted, (r) => r.escalatedAt !== undefined);
  if (request) await deps.outbox.announce(request, 'escalated');
}

/**
 * The request to announce a note of: the one just noted, or, when it was noted already and is still pending, that
 * one again. Its due item is handed back only after the announcement, so a process that stopped between the two
 * leaves the item to be taken again after its lease, finding the note written; the announcement's fixed job id and
 * the reply's record make a second one post nothing new.
 */
function announceable(
  noted: TransitionResult,
  wasNoted: (request: CloudRequest) => boolean,
): CloudRequest | undefined {
  if (noted.ok) return noted.request;
  const current = noted.request;
  return current?.state === 'pending' && wasNoted(current) ? current : undefined;
}

/**
 * A pending request past its `expiresAt` becomes expired, whoever notices first (a click, the expire job);
 * true when it is expired (now or already), false while it is still live.
 */
export async function expireIfDue(
  { deps, own }: Acts,
  request: CloudRequest,
  detail?: string,
): Promise<boolean> {
  if (request.state === 'expired') return true;
  if (request.state !== 'pending' || new Date(request.expiresAt) > deps.now()) return false;
  await own.expire(request, detail);
  return true;
}

/** pending → expired, announced in the thread; refused when someone decided first. The caller checked it is due. */
export async function expire(acts: Acts, request: CloudRequest, detail?: string): Promise<Decision> {
  return decide(acts, request, {
    from: ['pending'],
    to: 'expired',
    actor: 'cloudops',
    patch: {},
    detail,
    reply: 'expired',
    metric: () => acts.deps.metrics.requests.inc({ kind: request.kind, state: 'expired' }),
  });
}

/**
 * After an unknown outcome, a person records what the portal showed. Nothing is sent again. "It was applied"
 * records the step like a success: the VM's new size, and an increase's time (the 24-hour wait before lowering).
 */
export async function resolve(
  acts: Acts,
  request: CloudRequest,
  user: string,
  outcome: 'resolved_done' | 'resolved_failed',
): Promise<Decision> {
  const checked = await check(acts, request, user, 'resolve');
  if (checked) return refuse(checked);
  const done = outcome === 'resolved_done';
  return decide(acts, request, {
    from: ['unknown'],
    to: outcome,
    actor: user,
    patch: { resolvedBy: user, ...(done ? await acts.leases.resolvedDone(request) : {}) },
    detail: 'checked in the portal',
    reply: 'resolved',
    after: done
      ? async () => {
          await recordResolvedStep(acts, request);
          await acts.leases.returned(request);
        }
      : undefined,
  });
}

/**
 * The step whose outcome was unknown (steps after it were never sent), recorded as applied at the time the bot
 * stopped waiting for its answer: the nearest time the bot has for when the API applied it.
 */
async function recordResolvedStep({ deps }: Acts, request: CloudRequest): Promise<void> {
  if (request.params.kind !== 'resize') return;
  const step = request.params.steps[request.nextStep];
  if (!step) return;
  const unknown = request.outcomes.findLast((o) => o.step === request.nextStep);
  const at = unknown ? new Date(unknown.at) : deps.now();
  const known = await deps.vmFacts.knownFor(deps.policy, request);
  await deps.vmFacts.recordStep(request, step, known, at);
}
