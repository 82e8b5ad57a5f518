import { scrubSecrets } from '../../observability/logger.ts';
import { cleanReason } from '../../rules/inputs.ts';
import { isScheduledWaiting } from '../approval/approvers.ts';
import { approvalDecision, breakGlassDecision, sealDecision } from '../approval/decision-seal.ts';
import { refuseIfChanged } from '../approval/recheck-at-approval.ts';
import type { Decision } from '../model/decision.ts';
import { agentActor, type CloudRequest, revisionOf } from '../model/types.ts';
import type { VerifiedBy } from '../model/verification.ts';
import { verifiedDetail } from '../store/changes.ts';
import { afterApproval, check, decide, refuse, startsFrom } from './steps.ts';
import type { Acts } from './types.ts';
import { uncounted, verificationNeeded } from './verified-approve.ts';
import { breakGlassVerification } from './verified-break-glass.ts';

/*
 * The decisions people (and agents) make on a request: approve, reject, cancel, break glass.
 */

/**
 * Approve: each approver counts once, the requester never; the approval that reaches the count approves, exactly
 * once however many click at the same moment. Short of the count, the message shows the progress. Where the
 * request's approvals must be verified (verified-approve.ts), a click without `verified` counts nothing and is refused with the
 * claims of the approver's link; `revision` (the link's) must still be the request's when the approval is written.
 */
export async function approve(
  acts: Acts,
  request: CloudRequest,
  user: string,
  verified?: VerifiedBy,
  revision?: number,
): Promise<Decision> {
  const { deps, own } = acts;
  const checked = await check(acts, request, user, 'approve');
  if (checked) return refuse(checked);
  // A click on a request whose approvals must be verified counts nothing: the approver gets a link instead.
  const needed = verificationNeeded(request, user, verified);
  if (needed) return refuse(needed);
  // Before it counts: a resize whose VM moved, or whose rules or cost no longer hold, ends refused here.
  const refused = await refuseIfChanged(deps, request, user);
  if (refused) return refuse({ code: 'rechecked', request: refused });
  // The request as the clicker's handler read it: the compare-and-set is the first round trip. Unless a freeze
  // holds it, the approval that completes the count queues it in the same write.
  const holds = afterApproval(deps, request).next === 'freeze';
  const keys = deps.sealKeys;
  const counted = await deps.store.approve(request.id, user, request, {
    queue: !holds,
    verified,
    revision,
    // One HMAC per approval, stored in the approval's own write.
    ...(keys ? { seal: (current, approval) => sealDecision(keys, current, approvalDecision(approval)) } : {}),
  });
  if (!counted.ok) {
    if (counted.reason === 'duplicate') return refuse({ code: 'already_approved' });
    if (counted.reason === 'unverified' || counted.reason === 'changed')
      return refuse(uncounted(counted.reason, counted.request, user));
    return refuse(counted.request ? { code: 'already', request: counted.request } : { code: 'gone' });
  }
  if (counted.request.state === 'pending') {
    deps.metrics.approvals.inc({ decision: 'counted' });
    await deps.outbox.announce(counted.request);
    return { ok: true, request: counted.request };
  }
  deps.metrics.approvals.inc({ decision: 'approved' });
  if (counted.request.state === 'queued') {
    deps.metrics.requests.inc({ kind: request.kind, state: 'queued' });
    // The announcement and the job leave together, in one batch on the queue connection, the announcement first: a
    // process dying now cannot leave a job running under a message that still waits. One dying before the batch
    // leaves a queued request without its job, which the stranded-request sweeper queues and announces.
    await Promise.all([
      deps.outbox.announce(counted.request, 'approved'),
      deps.outbox.execute(counted.request),
    ]);
    return { ok: true, request: counted.request };
  }
  // A freeze holds it: announced right after the approval is stored, beside the move to queued, and before the job: a process dying
  // now leaves no message "waiting" with live buttons and a job running; an approval not queued yet, or queued
  // without its job, is queued (and announced) by the stranded-request sweeper.
  const next = await own.queueApproved(
    counted.request,
    undefined,
    deps.outbox.announce(counted.request, 'approved'),
  );
  if (next?.state === 'frozen') await deps.outbox.announce(next, 'frozen');
  return { ok: true, request: next ?? counted.request };
}

/**
 * Break glass: a user the policy allows runs frozen work now, with a reason (audited); the freeze's end is dropped.
 * Where the request's approvals must be verified, so is the break glass: without `verified` nothing runs, and the
 * refusal carries the claims of the user's link (verified-break-glass.ts); the page calls again with `verified`,
 * which is sealed with the break glass and named in its audit entry.
 */
export async function breakGlass(
  acts: Acts,
  request: CloudRequest,
  user: string,
  typed: string,
  verified?: VerifiedBy,
): Promise<Decision> {
  const { deps } = acts;
  const checked = await check(acts, request, user, 'break_glass');
  if (checked) return refuse(checked);
  const reason = cleanReason(scrubSecrets(typed, deps.secrets));
  const needed = breakGlassVerification(request, user, reason, verified);
  if (needed) return refuse(needed);
  const at = deps.now().toISOString();
  const revision = revisionOf(request);
  const seal =
    deps.sealKeys && sealDecision(deps.sealKeys, request, breakGlassDecision(user, at, revision, verified));
  const queued = await deps.store.transition(
    request.id,
    {
      from: ['frozen'],
      to: 'queued',
      actor: user,
      patch: {
        breakGlass: {
          by: user,
          reason,
          at,
          ...(verified ? { verified } : {}),
          ...(seal ? { revision, seal } : {}),
        },
      },
      // The verification before the typed reason, so that no reason can pass for one.
      detail: `break glass${verified ? ` (${verifiedDetail(verified)})` : ''}: ${reason}`,
    },
    request,
  );
  if (!queued.ok)
    return refuse(queued.request ? { code: 'already', request: queued.request } : { code: 'gone' });
  await deps.outbox.dropDue([{ kind: 'freeze-end', requestId: request.id }]);
  deps.metrics.requests.inc({ kind: request.kind, state: 'queued' });
  await deps.outbox.execute(queued.request);
  await deps.outbox.announce(queued.request, 'break_glass');
  return { ok: true, request: queued.request };
}

/** Whether `user` may reject now, before they are asked for a reason (an expired request expires here). */
export async function mayReject(acts: Acts, request: CloudRequest, user: string): Promise<Decision> {
  const checked = await check(acts, request, user, 'reject');
  return checked ? refuse(checked) : { ok: true, request };
}

/**
 * Whether `user` may run frozen work now, before they are asked for a reason (where it must be verified, the
 * submitted reason gets them a link).
 */
export async function mayBreakGlass(acts: Acts, request: CloudRequest, user: string): Promise<Decision> {
  const checked = await check(acts, request, user, 'break_glass');
  return checked ? refuse(checked) : { ok: true, request };
}

/** Reject a request waiting for approval, with the reason typed (secrets scrubbed), if any. */
export async function reject(
  acts: Acts,
  request: CloudRequest,
  user: string,
  typed?: string,
): Promise<Decision> {
  const { deps } = acts;
  const checked = await check(acts, request, user, 'reject');
  if (checked) return refuse(checked);
  const reason = typed === undefined ? undefined : cleanReason(scrubSecrets(typed, deps.secrets));
  return decide(acts, request, {
    from: ['pending'],
    to: 'rejected',
    actor: user,
    patch: { rejectedBy: user, rejectReason: reason },
    detail: reason,
    reply: 'rejected',
    metric: () => deps.metrics.approvals.inc({ decision: 'rejected' }),
  });
}

/** Cancel a request waiting for approval, or a scheduled run that has not started (its job is dropped). */
export async function cancel(acts: Acts, request: CloudRequest, user: string): Promise<Decision> {
  const checked = await check(acts, request, user, 'cancel');
  if (checked) return refuse(checked);
  return cancelled(acts, request, user);
}

/** Cancel without asking who clicked (the caller decided): a waiting, frozen or scheduled request stops. */
export function cancelled(
  acts: Acts,
  request: CloudRequest,
  user: string,
  detail?: string,
): Promise<Decision> {
  const { deps } = acts;
  const scheduled = isScheduledWaiting(request);
  const frozen = request.state === 'frozen';
  return decide(acts, request, {
    from: startsFrom('cancel', request),
    to: 'cancelled',
    actor: user,
    patch: { cancelledBy: user },
    detail,
    reply: 'cancelled',
    metric: () => deps.metrics.requests.inc({ kind: request.kind, state: 'cancelled' }),
    after: scheduled
      ? () => deps.outbox.cancelExecution(request.id)
      : frozen
        ? () => deps.outbox.dropDue([{ kind: 'freeze-end', requestId: request.id }])
        : undefined,
  });
}

/**
 * An agent cancels a request it made itself (waiting for approval, scheduled, or frozen); the audit names the agent.
 * Any other request is refused as not its own.
 */
export async function cancelByAgent(acts: Acts, request: CloudRequest, agent: string): Promise<Decision> {
  const { deps } = acts;
  if (request.agent?.name !== agent) return refuse({ code: 'not_requester' });
  if (!startsFrom('cancel', request).includes(request.state)) return refuse({ code: 'already', request });
  const actor = agentActor(agent);
  const scheduled = isScheduledWaiting(request);
  const frozen = request.state === 'frozen';
  return decide(acts, request, {
    from: startsFrom('cancel', request),
    to: 'cancelled',
    actor,
    patch: { cancelledBy: actor },
    reply: 'cancelled',
    metric: () => deps.metrics.requests.inc({ kind: request.kind, state: 'cancelled' }),
    after: scheduled
      ? () => deps.outbox.cancelExecution(request.id)
      : frozen
        ? () => deps.outbox.dropDue([{ kind: 'freeze-end', requestId: request.id }])
        : undefined,
  });
}
