import { findProject, freezeOf } from '../../config/policy.ts';
import type { SealKeys } from '../../config/seal-keys.ts';
import type { VmKnown } from '../../rules/types.ts';
import { freezeAt } from '../approval/approval-rules.ts';
import type { ApprovalPolicy } from '../approval/approvers.ts';
import { checkApprovals, checkResumed, checkSeals } from '../approval/decision-check.ts';
import { monthlyDeltaNow, type RecheckDeps, recheckRequest } from '../approval/recheck-rules.ts';
import { FreezeHoldError, type RunHoldError } from '../model/run-hold.ts';
import type { CloudRequest, Lease, StepOutcome } from '../model/types.ts';
import type { RequestStore } from '../store/store.ts';
import type { TransitionInput, TransitionResult } from '../store/transitions.ts';
import { type TicketDeps, ticketBeforeSend } from '../tickets.ts';
import type { VmFactsWrite } from '../vm-facts.ts';

/*
 * A run's moves, owned here like bullmq's Job.moveToFailed: the execute worker (jobs/) keeps the queue, the VM's
 * lock, the delay and the call through cloud/, and asks these functions for every change of the request's state
 * (queued → sending, back to queued, its outcome, the settle that outlives a failover). The notify worker's cancel
 * and the stranded sweeper's re-queue are here too: nothing outside requests/ writes a request's state.
 */

/** Waits for a replica to hold a write (jobs/replica-ack.ts implements it); disabled without Sentinels. */
export interface Durability {
  readonly enabled: boolean;
  durably<T>(write: () => Promise<T>): Promise<T>;
}

/** What a run's moves read and write; the execute worker's deps satisfy it. */
export interface RunDeps extends RecheckDeps, TicketDeps {
  store: RequestStore;
  /** The worker's own approvers (with user groups): who may approve, under the policy this process runs with. */
  approvals: ApprovalPolicy;
  /** SEAL_KEY (and SEAL_KEY_PREVIOUS): every decision that lets the request run is checked with them. */
  sealKeys: SealKeys;
  /** Whether the agent of this name is disabled now (`cloudops agents disable`); absent: no agent is. */
  agentDisabled?: (name: string) => Promise<boolean>;
  /** With Sentinels: a run's end state is made to outlive a failover ({@link settleDurably}). */
  replicaAck?: Durability;
}

/**
 * The checks a run passes right before its first POST leaves, on what is known of the VM now: an agent's work whose
 * agent was disabled or removed meanwhile is not sent, nor a lease's return whose lease was kept meanwhile; every
 * decision's seal must hold ({@link checkSeals}); a freeze of the worker's policy holds work no break glass let
 * through ({@link freezeHolds}, a FreezeHoldError thrown to wait); the rules are checked again ({@link recheckRequest}); the change
 * ticket is read again ({@link ticketBeforeSend}, which throws a TicketHoldError to wait); and the
 * approvals are planned and counted under the worker's own policy, within `approval_valid_hours`
 * ({@link checkApprovals}, docs/approvals.md#the-worker-judges). The sentence why nothing is sent, or undefined when
 * it may go.
 */
export async function beforeSend(
  deps: RunDeps,
  request: CloudRequest,
  known: VmKnown,
): Promise<string | undefined> {
  const stopped = (await agentStopped(deps, request)) ?? (await leaseKeptMeanwhile(deps, request));
  if (stopped) return stopped;
  // The seals first: nothing else is judged on a request a Redis writer made or altered.
  const sealed = checkSeals(deps.sealKeys, request);
  if ('code' in sealed) return sealInvalid(deps, request, sealed.reason);
  freezeHolds(deps, request);
  const seen: { monthlyDelta?: string; costed?: boolean } = {};
  const rules = await recheckRequest(deps, request, known, 'run', seen);
  if (rules) return rules;
  // The ticket before the plan: a ticket system down until the approval's validity ends says so itself.
  const ticket = await ticketBeforeSend(deps, request);
  if (ticket) return ticket;
  const { params } = request;
  const project = findProject(deps.policy, request.projectUuid);
  // A resize the rules' re-check did not cost (past its first step) is costed here: the count may depend on it.
  const delta =
    params.kind === 'resize' && !seen.costed && project
      ? await monthlyDeltaNow(deps, project, params, known)
      : seen.monthlyDelta;
  const refusal = await checkApprovals(deps, request, sealed, delta, known);
  if (!refusal) return undefined;
  return refusal.code === 'seal_invalid' ? sealInvalid(deps, request, refusal.reason) : refusal.reason;
}

/**
 * The check of a run found already sending, before its next step leaves ({@link checkResumed}): the seals, and their
 * validity. A request a Redis writer put in sending, unsealed or with a change nobody approved, is not sent. The
 * sentence why, or undefined when it may go on.
 */
export async function beforeResume(deps: RunDeps, request: CloudRequest): Promise<string | undefined> {
  const refusal = checkResumed(deps, request);
  if (!refusal) return undefined;
  return refusal.code === 'seal_invalid' ? sealInvalid(deps, request, refusal.reason) : refusal.reason;
}

/** A seal that does not hold is audited `seal_invalid` before the run ends refused, nothing sent. */
async function sealInvalid(deps: RunDeps, request: CloudRequest, reason: string): Promise<string> {
  deps.logger.warn({ requestId: request.id }, 'a decision seal does not hold: not sent');
  await deps.store.note(
    request.id,
    { note: 'seal_invalid', actor: 'cloudops', detail: truncateDetail(reason) },
    () => ({}),
  );
  return reason;
}

/**
 * sending → queued: a freeze ({@link freezeHolds}) or the change ticket ({@link ticketBeforeSend}) holds the run;
 * nothing was sent, and the job waits until the hold's `at`.
 */
export function holdRun(deps: RunDeps, request: CloudRequest, hold: RunHoldError): Promise<TransitionResult> {
  return deps.store.transition(
    request.id,
    {
      from: ['sending'],
      to: 'queued',
      actor: 'cloudops',
      detail: truncateDetail(
        `held by ${hold.holder}: ${hold.message} Looks again at ${hold.at.toISOString()}.`,
      ),
    },
    request,
  );
}

/**
 * A freeze of the worker's own policy holds work that no (sealed) break glass let through, however it reached the
 * queue: the scheduler moves frozen work on at the window's end, so queued work met here during a window was queued
 * just before it began, or by a Redis writer. It waits for the end, as frozen work does.
 */
function freezeHolds(deps: RunDeps, request: CloudRequest): void {
  if (request.breakGlass) return;
  const project = findProject(deps.policy, request.projectUuid);
  const freeze = project && freezeAt(freezeOf(deps.policy, project), deps.now());
  if (!freeze) return;
  const why = freeze.reason ? ` (${freeze.reason})` : '';
  throw new FreezeHoldError(freeze.until, `A freeze${why} holds it until ${freeze.until.toISOString()}.`);
}

/**
 * An agent's request whose agent an admin disabled (or removed from the policy) after its approval: it waited for a
 * freeze's end, its scheduled time, or a worker, and does not run now. Read at the run, not at the approval.
 */
async function agentStopped(deps: RunDeps, request: CloudRequest): Promise<string | undefined> {
  const name = request.agent?.name;
  if (name === undefined) return undefined;
  if (!deps.policy.agents.some((a) => a.name.toLowerCase() === name.toLowerCase()))
    return `Not sent: agent ${name} is no longer in the policy, so the work it asked for does not run. Ask again if the change is still needed.`;
  if (await deps.agentDisabled?.(name))
    return `Not sent: agent ${name} is disabled (cloudops agents disable), so the work it asked for does not run. Enable it and ask again if the change is still needed.`;
  return undefined;
}

/**
 * A lease's return whose lease was kept meanwhile is not sent: a lease ends by Keep or by its return, never both.
 * Keep withdraws a return it knows of; this covers one made in the moment before the lease named it.
 */
async function leaseKeptMeanwhile(deps: RunDeps, request: CloudRequest): Promise<string | undefined> {
  const leaseId = request.params.kind === 'resize' ? request.params.returnOf : undefined;
  if (!leaseId) return undefined;
  const lease = await deps.store.get(leaseId);
  if (!lease?.lease?.kept) return undefined;
  return `Not sent: the temporary size of request ${leaseId} was kept meanwhile, so there is nothing to return.`;
}

/**
 * queued → sending, as read under the VM's lock (the compare-and-set is the run's first round trip). `refusal`: why
 * {@link beforeSend} stopped it, the run then ends refused from sending with nothing sent.
 */
export function startSending(
  deps: RunDeps,
  request: CloudRequest,
  refusal: string | undefined,
): Promise<TransitionResult> {
  return deps.store.transition(
    request.id,
    {
      from: ['queued'],
      to: 'sending',
      actor: 'cloudops',
      detail:
        refusal === undefined
          ? `sending step ${request.nextStep + 1}`
          : 'rules re-checked at run time; not sent',
    },
    request,
  );
}

/** sending → queued: the call was surely not applied (`reason`), and the job retries it later. */
export function requeueNotSent(
  deps: RunDeps,
  request: CloudRequest,
  reason: string,
): Promise<TransitionResult> {
  return deps.store.transition(
    request.id,
    {
      from: ['sending'],
      to: 'queued',
      actor: 'cloudops',
      detail: truncateDetail(`not sent (${reason}); retrying`),
    },
    request,
  );
}

/** A step that is not the last succeeded: the run moves on to the next, with what the step applied to the VM. */
export function recordStep(
  deps: RunDeps,
  request: CloudRequest,
  outcome: StepOutcome,
  vmFacts: VmFactsWrite | undefined,
): Promise<CloudRequest | undefined> {
  const patch = { nextStep: outcome.step + 1, outcomes: [...request.outcomes, outcome] };
  return deps.store.update(request.id, patch, request, vmFacts);
}

/**
 * sending → succeeded after the last step: its outcome, what it applied to the VM and, for a temporary increase, its
 * lease opened in the same write (retention then keeps the request).
 */
export function settleSucceeded(
  deps: RunDeps,
  request: CloudRequest,
  outcome: StepOutcome,
  vmFacts: VmFactsWrite | undefined,
  lease?: Lease,
): Promise<TransitionResult> {
  return settleDurably(deps, request, {
    from: ['sending'],
    to: 'succeeded',
    actor: 'cloudops',
    patch: {
      nextStep: outcome.step + 1,
      outcomes: [...request.outcomes, outcome],
      ...(lease ? { lease, leaseOpen: true } : {}),
    },
    detail: truncateDetail(
      `${outcome.message ?? 'accepted by the API'}${lease ? `; temporary until ${lease.endsAt}` : ''}`,
    ),
    vmFacts,
  });
}

/** sending → refused or unknown: the step's outcome says why (`reason`). */
export function settleEnded(
  deps: RunDeps,
  request: CloudRequest,
  to: 'refused' | 'unknown',
  outcome: StepOutcome,
  reason: string,
): Promise<TransitionResult> {
  return settleDurably(deps, request, {
    from: ['sending'],
    to,
    actor: 'cloudops',
    patch: { outcomes: [...request.outcomes, outcome] },
    detail: truncateDetail(reason),
  });
}

/**
 * A request's end state after its call, made to outlive a failover with Sentinels: while no replica confirms it,
 * the request is read again on the master the client reaches now and the transition made again where it was lost.
 * Without it a new master would find the request still sending, and end it as 'unknown'. `request`: as the run
 * last wrote it.
 */
async function settleDurably(
  deps: RunDeps,
  request: CloudRequest,
  input: TransitionInput,
): Promise<TransitionResult> {
  const { store, replicaAck } = deps;
  const id = request.id;
  let result = await store.transition(id, input, request);
  if (!replicaAck?.enabled || !result.ok) return result;
  await replicaAck.durably(async () => {
    const now = await store.get(id);
    if (!now) result = { ok: false, reason: 'not_found' };
    else if (input.from.includes(now.state)) result = await store.transition(id, input);
    // Neither before nor after the move: the new master's recovery ended it otherwise (e.g. 'unknown'), and the
    // move this run made first is lost. What is stored now is what the thread must say.
    else if (now.state !== input.to) result = { ok: false, reason: 'wrong_state', request: now };
  });
  return result;
}

/**
 * Slack refused the request message for good: a request nobody can see is cancelled unless it already runs (a run
 * that started is stopped by the store's state check).
 */
export function cancelUndeliverable(
  store: RequestStore,
  request: CloudRequest,
  error: string,
): Promise<TransitionResult> {
  return store.transition(
    request.id,
    {
      from: ['pending', 'queued'],
      to: 'cancelled',
      actor: 'cloudops',
      detail: `Slack refused the request message (${error}); nothing was sent`,
    },
    request,
  );
}

/** approved → queued for a request stranded between two writes, found by the sweeper (`detail` says so). */
export function requeueStranded(store: RequestStore, id: string, detail: string): Promise<TransitionResult> {
  return store.transition(id, { from: ['approved'], to: 'queued', actor: 'cloudops', detail });
}

/** Audit details stay one short line. */
function truncateDetail(text: string): string {
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
}
