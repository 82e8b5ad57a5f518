import type { ApprovalKind, ProjectPolicy } from '../../config/policy.ts';
import type { RequestApproval } from '../approval/approvers.ts';
import { Leases } from '../leases.ts';
import type { Decision } from '../model/decision.ts';
import type { CloudRequest, CostPreview } from '../model/types.ts';
import type { BreakGlassClaims, VerifiedBy, VerifyClaims } from '../model/verification.ts';
import { checkNewTicket, type TicketFacts } from '../tickets.ts';
import * as creating from './create.ts';
import * as deciding from './decide.ts';
import * as running from './run.ts';
import type { Acts, CheckedResize, CheckedRestore, LifecycleDeps, Origin } from './types.ts';
import * as verifying from './verified-approve.ts';
import * as breakingGlass from './verified-break-glass.ts';

/**
 * A request's whole life, with no Slack in it: create from a checked draft, approve, reject, cancel, resolve,
 * expire, queue. Every state change goes through the store's compare-and-set (with its audit entry), so of two
 * people deciding at once exactly one wins; the queues are reached through the outbox. Each act lives in the file
 * of its kind (create.ts; decide.ts with verified-approve.ts; run.ts: queue, freeze's end, remind, escalate, expire,
 * resolve); steps.ts holds what they share; this class is what callers hold. A run's own moves (run-start.ts,
 * run-moves.ts) are functions the execute worker calls with what it holds: every change of a request's state is
 * made in this folder.
 */
export class RequestLifecycle {
  /** Temporary increases once they ran: offer, reminders, keep, return. */
  readonly leases: Leases;
  private readonly acts: Acts;

  constructor(deps: LifecycleDeps) {
    this.leases = new Leases(deps, (request, actor, detail) =>
      deciding.cancelled(this.acts, request, actor, detail),
    );
    // Acts call one another through `this`, so what wraps the lifecycle's acts (tracing) sees those calls too.
    this.acts = { deps, leases: this.leases, own: this };
  }

  /**
   * What `createResize` would make of this resize, without storing anything: its cost preview and the approvals it
   * would need (an agent's plan, for instance).
   */
  previewResize(
    origin: Origin,
    resize: CheckedResize,
  ): Promise<{ cost?: CostPreview; costNote?: string; approval: RequestApproval }> {
    return creating.previewResize(this.acts, origin, resize);
  }

  /**
   * Checks the ticket typed for a new change of `kinds` in `project` with its system (docs/policy.md#change-tickets):
   * its facts, to give `createResize` or `createRestore`; undefined when no rule asks for one; a refusal is thrown as
   * a `TicketError` (its `reason` names the ticket and why).
   */
  checkTicket(
    project: ProjectPolicy,
    kinds: ApprovalKind[],
    typed: string | undefined,
    options: { runAt?: Date; timeoutMs?: number } = {},
  ): Promise<TicketFacts | undefined> {
    return checkNewTicket(this.acts.deps, project, kinds, typed, options);
  }

  createResize(origin: Origin, resize: CheckedResize): Promise<CloudRequest> {
    return creating.createResize(this.acts, origin, resize);
  }

  createRestore(origin: Origin, restore: CheckedRestore): Promise<CloudRequest> {
    return creating.createRestore(this.acts, origin, restore);
  }

  /** See {@link deciding.approve}. */
  approve(request: CloudRequest, user: string, verified?: VerifiedBy, revision?: number): Promise<Decision> {
    return deciding.approve(this.acts, request, user, verified, revision);
  }

  /** What the verification page calls once the approver proved who they are: see {@link verifying.approveVerified}. */
  approveVerified(claims: VerifyClaims, by: VerifiedBy): Promise<Decision> {
    return verifying.approveVerified(this.acts, claims, by);
  }

  /** See {@link deciding.breakGlass}. */
  breakGlass(request: CloudRequest, user: string, typed: string, verified?: VerifiedBy): Promise<Decision> {
    return deciding.breakGlass(this.acts, request, user, typed, verified);
  }

  /** What the page calls once a break-glass user proved who they are: see {@link breakingGlass.breakGlassVerified}. */
  breakGlassVerified(claims: BreakGlassClaims, by: VerifiedBy): Promise<Decision> {
    return breakingGlass.breakGlassVerified(this.acts, claims, by);
  }

  /** See {@link running.endFreeze}. */
  endFreeze(requestId: string): Promise<void> {
    return running.endFreeze(this.acts, requestId);
  }

  /** See {@link running.remind}. */
  remind(requestId: string): Promise<void> {
    return running.remind(this.acts, requestId);
  }

  /** See {@link running.escalate}. */
  escalate(requestId: string): Promise<void> {
    return running.escalate(this.acts, requestId);
  }

  /** Whether `user` may reject now, before they are asked for a reason (an expired request expires here). */
  mayReject(request: CloudRequest, user: string): Promise<Decision> {
    return deciding.mayReject(this.acts, request, user);
  }

  /** Whether `user` may run frozen work now, before they are asked for a reason. */
  mayBreakGlass(request: CloudRequest, user: string): Promise<Decision> {
    return deciding.mayBreakGlass(this.acts, request, user);
  }

  reject(request: CloudRequest, user: string, typed?: string): Promise<Decision> {
    return deciding.reject(this.acts, request, user, typed);
  }

  /** Cancel a request waiting for approval, or a scheduled run that has not started (its job is dropped). */
  cancel(request: CloudRequest, user: string): Promise<Decision> {
    return deciding.cancel(this.acts, request, user);
  }

  /** See {@link deciding.cancelByAgent}. */
  cancelByAgent(request: CloudRequest, agent: string): Promise<Decision> {
    return deciding.cancelByAgent(this.acts, request, agent);
  }

  /** See {@link running.resolve}. */
  resolve(
    request: CloudRequest,
    user: string,
    outcome: 'resolved_done' | 'resolved_failed',
  ): Promise<Decision> {
    return running.resolve(this.acts, request, user, outcome);
  }

  /** See {@link running.expireIfDue}. */
  expireIfDue(request: CloudRequest, detail?: string): Promise<boolean> {
    return running.expireIfDue(this.acts, request, detail);
  }

  /** pending → expired, announced in the thread; refused when someone decided first. The caller checked it is due. */
  expire(request: CloudRequest, detail?: string): Promise<Decision> {
    return running.expire(this.acts, request, detail);
  }

  /** See {@link running.queueApproved}. */
  queueApproved(
    request: CloudRequest,
    detail?: string,
    announced?: Promise<void>,
  ): Promise<CloudRequest | undefined> {
    return running.queueApproved(this.acts, request, detail, announced);
  }
}
