import type { FreezeHit } from '../approval/approval-rules.ts';
import { type Act, type ApprovalPolicy, isScheduledWaiting } from '../approval/approvers.ts';
import type { Decision, Refusal } from '../model/decision.ts';
import type { CloudRequest, GoAhead, RequestState } from '../model/types.ts';
import type { Acts, LifecycleDeps } from './types.ts';

/*
 * The steps the acts share: who may act and from which state, one compare-and-set transition with its announcement,
 * and a freeze's hold.
 */

/** The states an act starts from: anything else is "already decided". */
export function startsFrom(act: Act, request: CloudRequest): RequestState[] {
  switch (act) {
    case 'approve':
    case 'reject':
      return ['pending'];
    case 'cancel':
      if (request.state === 'frozen') return ['frozen'];
      return isScheduledWaiting(request) ? ['queued'] : ['pending'];
    case 'resolve':
      return ['unknown'];
    case 'break_glass':
      return ['frozen'];
    case 'lease':
      // A lease is acted on after its request ended; whether it is still open is the lease's own question.
      return ['succeeded'];
  }
}

export const refuse = (refusal: Refusal): Decision => ({ ok: false, refusal });

/** Who may, then in which state, then (for decisions on pending requests) whether it expired meanwhile. */
export async function check(
  { deps, own }: Acts,
  request: CloudRequest,
  user: string,
  act: Act,
): Promise<Refusal | undefined> {
  const notAllowed = await deps.approvals.may(request, user, act);
  if (notAllowed) return notAllowed;
  if (!startsFrom(act, request).includes(request.state)) return { code: 'already', request };
  // What a disabled agent asked waits for no one: approving or breaking glass for it is refused, with why. An agent
  // removed from the policy took its limits (max_monthly_delta, may) with it: what it asked is refused the same way.
  const agent = request.agent?.name;
  if (agent !== undefined && (act === 'approve' || act === 'break_glass')) {
    if (!agentInPolicy(deps, agent)) return { code: 'agent_disabled', agent, removed: true };
    if (request.agent?.disabled || (await deps.agentDisabled?.(agent)))
      return { code: 'agent_disabled', agent };
  }
  if ((act === 'approve' || act === 'reject') && (await own.expireIfDue(request)))
    return { code: 'expired', request };
  return undefined;
}

/** One compare-and-set transition, then its metric, follow-up and announcement. */
export async function decide(
  { deps }: Acts,
  request: CloudRequest,
  move: {
    from: RequestState[];
    to: RequestState;
    actor: string;
    patch: Partial<CloudRequest>;
    detail?: string;
    reply: 'rejected' | 'cancelled' | 'resolved' | 'expired';
    metric?: () => void;
    after?: () => Promise<void>;
  },
): Promise<Decision> {
  const { reply, metric, after, ...transition } = move;
  const moved = await deps.store.transition(request.id, transition, request);
  if (!moved.ok)
    return refuse(moved.request ? { code: 'already', request: moved.request } : { code: 'gone' });
  await after?.();
  metric?.();
  await deps.outbox.announce(moved.request, reply);
  return { ok: true, request: moved.request };
}

/** What follows `request`'s approval: a freeze that covers its run time (not only now) holds it, else it queues. */
export function afterApproval(
  deps: LifecycleDeps,
  request: CloudRequest,
): ReturnType<ApprovalPolicy['afterApproval']> {
  const now = deps.now();
  const runAt = request.runAt ? new Date(request.runAt) : undefined;
  return deps.approvals.afterApproval(request, runAt && runAt > now ? runAt : now);
}

/** Holds `request` until the freeze ends: its state says so, and the end is a due time. */
export async function freeze(
  { deps }: Acts,
  request: CloudRequest,
  from: 'approved' | 'pending',
  hit: FreezeHit,
  /** Count-0 work: its sealed go-ahead, stored with this first move. */
  goAhead?: GoAhead,
): Promise<CloudRequest | undefined> {
  const until = hit.until.toISOString();
  const frozen = await deps.store.transition(
    request.id,
    {
      from: [from],
      to: 'frozen',
      actor: 'cloudops',
      patch: { frozenUntil: until, freezeReason: hit.reason, ...(goAhead ? { goAhead } : {}) },
      detail: `held by a freeze${reasonText(hit)} until ${until}`,
    },
    request,
  );
  if (!frozen.ok) return undefined;
  deps.metrics.requests.inc({ kind: request.kind, state: 'frozen' });
  await deps.outbox.dueAt({ kind: 'freeze-end', requestId: request.id }, hit.until);
  return frozen.request;
}

/** The freeze's reason, in parentheses, for an audit detail. */
export function reasonText(hit: FreezeHit): string {
  return hit.reason ? ` (${hit.reason})` : '';
}

/** Whether the policy still names agent `name` (names are matched as `cloudops agents` matches them). */
export function agentInPolicy(deps: Pick<LifecycleDeps, 'policy'>, name: string): boolean {
  return deps.policy.agents.some((a) => a.name.toLowerCase() === name.toLowerCase());
}
