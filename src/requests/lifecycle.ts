import type { PriceSource } from '../cloud/price-cache.ts';
import type { Policy, ProjectPolicy } from '../config/policy.ts';
import { type Logger, scrubSecrets } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { ResizeCheck } from '../rules/resize.ts';
import type { ResizeTarget, VmKnown } from '../rules/types.ts';
import {
  approvalsText,
  type FreezeHit,
  type RuleFacts,
  resizeFacts,
  restoreFacts,
} from './approval-rules.ts';
import type { Act, ApprovalPolicy, NotAllowed, RequestApproval } from './approvers.ts';
import { isScheduledWaiting } from './approvers.ts';
import { costPreview } from './cost-preview.ts';
import { Leases } from './leases.ts';
import type { Outbox } from './outbox.ts';
import type { RequestStore } from './store.ts';
import {
  agentActor,
  type CloudRequest,
  type CostPreview,
  type LeaseAsked,
  type RequestState,
  type ResizeParams,
  type RestoreParams,
  type WorkflowStepRun,
} from './types.ts';
import type { VmFactsStore } from './vm-facts.ts';

/** Who asked, and where the request lives (its message, its thread). */
export interface Origin {
  user: string;
  teamId: string;
  channel: string;
  /** Asked by a Workflow Builder step, which waits for the request's end. */
  workflowStep?: WorkflowStepRun;
  /** Asked by an AI agent for `user` (the person accountable for it): see {@link AgentAsking}. */
  agent?: AgentAsking;
}

/** An agent asking through MCP, with what the policy lets it do (docs/agents.md). */
export interface AgentAsking {
  name: string;
  /** Count-0 approval rules apply to it; otherwise a person always approves. */
  unattended: boolean;
  /** A resize costing more than this per month more is refused before any request exists. */
  maxMonthlyDelta?: number;
}

/** A resize that passed the rules. */
export interface CheckedResize {
  project: ProjectPolicy;
  vm: VmKnown;
  target: ResizeTarget;
  check: ResizeCheck;
  confirmedStopped: boolean;
  reason?: string;
  /** A scheduled downsize: when it may run. */
  runAt?: Date;
  /** A temporary increase (checked with `checkLease`): how long, and what it returns to. */
  lease?: LeaseAsked;
  /** Notes of the lease check, e.g. that a disk increase stays. */
  leaseNotes?: string[];
  /** This resize returns the lease of that request. */
  returnOf?: string;
}

/** A restore that passed the rules. */
export interface CheckedRestore {
  project: ProjectPolicy;
  vm: VmKnown;
  backupSlug: string;
  autostart: boolean;
  reason?: string;
}

/** Why nothing changed; each surface words it for its place. */
export type Refusal =
  | NotAllowed
  /** The request is no longer in a state this act applies to (someone else decided first). */
  | { code: 'already'; request: CloudRequest }
  /** It was pending past its expiry: it is expired now. */
  | { code: 'expired'; request: CloudRequest }
  /** It is not in the store any more. */
  | { code: 'gone' }
  /** Asked by an agent an admin has disabled: nobody may approve or run it until the agent is enabled again. */
  | { code: 'agent_disabled'; agent: string }
  /** The lease was kept or returned already. */
  | { code: 'lease_closed'; request: CloudRequest }
  /** The lease's return is already being sent (or has just run): Keep waits for its outcome. */
  | { code: 'return_under_way'; request: CloudRequest };

export type Decision = { ok: true; request: CloudRequest } | { ok: false; refusal: Refusal };

/** A request refused when it is made: its approvals could never come together. Nothing was stored. */
export class ApprovalUnreachableError extends Error {
  override readonly name = 'ApprovalUnreachableError';
  readonly code = 'APPROVAL_UNREACHABLE';
}

/** An agent asked for more than its `max_monthly_delta` allows (or a cost nobody can tell). Nothing was stored. */
export class AgentLimitError extends Error {
  override readonly name = 'AgentLimitError';
  readonly code = 'AGENT_LIMIT';
}

/** The rule an agent's request names when the policy's own would let it run without a person. */
export const AGENT_NEEDS_PERSON = 'asked by an agent: a person approves';

/** The escalation comes at this share of the approval TTL (docs/policy.md#approval-policies: 75 %). */
const ESCALATE_AT = 0.75;
const HOUR_MS = 3_600_000;

export interface LifecycleDeps {
  policy: Policy;
  store: RequestStore;
  outbox: Outbox;
  approvals: ApprovalPolicy;
  prices: PriceSource;
  now: () => Date;
  logger: Logger;
  metrics: Metrics;
  /** What the bot knows of each VM: a resize resolved as applied is recorded there like a success; a lease's offer is checked against it. */
  vmFacts: VmFactsStore;
  /**
   * The configured secret values (tokens, signing secret, API key): a reason someone types is stored, audited and
   * posted to the channel without them or any Slack token or bearer credential pasted into it.
   */
  secrets?: readonly string[];
  /** Whether the agent of this name is disabled now (`cloudops agents disable`); absent: no agent is. */
  agentDisabled?: (name: string) => Promise<boolean>;
}

/** The states an act starts from: anything else is "already decided". */
function startsFrom(act: Act, request: CloudRequest): RequestState[] {
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

const refuse = (refusal: Refusal): Decision => ({ ok: false, refusal });

/**
 * A request's whole life, with no Slack in it: create from a checked draft, approve, reject, cancel, resolve,
 * expire, queue. Every state change goes through the store's compare-and-set (with its audit entry), so of two
 * people deciding at once exactly one wins; the queues are reached through the outbox.
 */
export class RequestLifecycle {
  /** Temporary increases once they ran: offer, reminders, keep, return. */
  readonly leases: Leases;

  constructor(private readonly deps: LifecycleDeps) {
    this.leases = new Leases(deps, (request, actor, detail) => this.cancelled(request, actor, detail));
  }

  /**
   * What `createResize` would make of this resize, without storing anything: its cost preview and the approvals it
   * would need (an agent's plan, for instance).
   */
  async previewResize(
    origin: Origin,
    resize: CheckedResize,
  ): Promise<{ cost?: CostPreview; costNote?: string; approval: RequestApproval }> {
    const { project } = resize;
    const { kind, params } = resizeRequested(resize);
    const cost = await this.resizeCost(resize);
    const facts = resizeFacts(params, kind, cost?.preview?.diffMonthly);
    return {
      cost: cost?.preview,
      costNote: cost?.note,
      approval: this.approvalFor(origin, project, project.approval[kind], facts),
    };
  }

  private resizeCost(resize: CheckedResize) {
    return costPreview(
      { prices: this.deps.prices, currency: this.deps.policy.currency, logger: this.deps.logger },
      resize.project,
      resize.vm,
      resize.target,
      resize.lease?.returnTo,
    );
  }

  /** The policy's approval plan; for an agent that is not `unattended`, never fewer than one person. */
  private approvalFor(
    origin: Origin,
    project: ProjectPolicy,
    mode: 'required' | 'none',
    facts: RuleFacts,
  ): RequestApproval {
    const plan = this.deps.approvals.planFor(project, mode, facts);
    if (origin.agent && !origin.agent.unattended && plan.count === 0)
      return { ...plan, count: 1, rule: AGENT_NEEDS_PERSON };
    return plan;
  }

  async createResize(origin: Origin, resize: CheckedResize): Promise<CloudRequest> {
    const { project, vm, check } = resize;
    const { kind, params } = resizeRequested(resize);
    const mode = project.approval[kind];
    const cost = await this.resizeCost(resize);
    const bound = origin.agent?.maxMonthlyDelta;
    if (bound !== undefined) {
      const delta = cost?.preview?.diffMonthly;
      if (delta === undefined)
        throw new AgentLimitError(
          `Not requested: agent ${origin.agent?.name} may add at most ${bound} ${this.deps.policy.currency} a month, and the cost of this change is not known.`,
        );
      if (Number(delta) > bound)
        throw new AgentLimitError(
          `Not requested: this change adds ${delta} ${this.deps.policy.currency} a month, and agent ${origin.agent?.name} may add at most ${bound}.`,
        );
    }
    const notes = [...check.notes, ...(resize.leaseNotes ?? [])];
    if (cost?.note && !cost.preview) notes.push(cost.note);
    if (check.needsStoppedConfirmation)
      notes.push('Lowers cores or RAM: the requester confirmed the VM is stopped.');
    if (resize.returnOf)
      notes.push(
        `Returns the temporary increase of request ${resize.returnOf}; its lease ends when this succeeds.`,
      );
    const created = await this.create(origin, project, vm, {
      params,
      mode,
      facts: resizeFacts(params, kind, cost?.preview?.diffMonthly),
      reason: resize.reason,
      notes,
      cost: cost?.preview,
      runAt: resize.runAt,
    });
    if (resize.returnOf) await this.leases.returnRequested(resize.returnOf, created);
    return created;
  }

  async createRestore(origin: Origin, restore: CheckedRestore): Promise<CloudRequest> {
    const notes = ['The VM must be stopped: the requester confirmed it and typed the VM id again.'];
    if (restore.vm.ha) notes.push('High-availability VM: autostart is not allowed.');
    return this.create(origin, restore.project, restore.vm, {
      params: {
        kind: 'restore',
        backupSlug: restore.backupSlug,
        autostart: restore.autostart,
        confirmedStopped: true,
      },
      mode: restore.project.approval.restore,
      facts: restoreFacts(),
      reason: restore.reason,
      notes,
    });
  }

  /**
   * Approve: each approver counts once, the requester never; the approval that reaches the count approves, exactly
   * once however many click at the same moment. Short of the count, the message shows the progress.
   */
  async approve(request: CloudRequest, user: string): Promise<Decision> {
    const checked = await this.check(request, user, 'approve');
    if (checked) return refuse(checked);
    // The request as the clicker's handler read it: the compare-and-set is the first round trip. Unless a freeze
    // holds it, the approval that completes the count queues it in the same write.
    const holds = this.afterApproval(request).next === 'freeze';
    const counted = await this.deps.store.approve(request.id, user, request, { queue: !holds });
    if (!counted.ok) {
      if (counted.reason === 'duplicate') return refuse({ code: 'already_approved' });
      return refuse(counted.request ? { code: 'already', request: counted.request } : { code: 'gone' });
    }
    if (counted.request.state === 'pending') {
      this.deps.metrics.approvals.inc({ decision: 'counted' });
      await this.deps.outbox.announce(counted.request);
      return { ok: true, request: counted.request };
    }
    this.deps.metrics.approvals.inc({ decision: 'approved' });
    if (counted.request.state === 'queued') {
      this.deps.metrics.requests.inc({ kind: request.kind, state: 'queued' });
      // The announcement and the job leave together, in one batch on the queue connection, the announcement first: a
      // process dying now cannot leave a job running under a message that still waits. One dying before the batch
      // leaves a queued request without its job, which the stranded-request sweeper queues and announces.
      await Promise.all([
        this.deps.outbox.announce(counted.request, 'approved'),
        this.deps.outbox.execute(counted.request),
      ]);
      return { ok: true, request: counted.request };
    }
    // A freeze holds it: announced right after the approval is stored, beside the move to queued, and before the job: a process dying
    // now leaves no message "waiting" with live buttons and a job running; an approval not queued yet, or queued
    // without its job, is queued (and announced) by the stranded-request sweeper.
    const next = await this.queueApproved(
      counted.request,
      undefined,
      this.deps.outbox.announce(counted.request, 'approved'),
    );
    if (next?.state === 'frozen') await this.deps.outbox.announce(next, 'frozen');
    return { ok: true, request: next ?? counted.request };
  }

  /**
   * Break glass: a user the policy allows runs frozen work now, with a reason (audited); the freeze's end is dropped.
   */
  async breakGlass(request: CloudRequest, user: string, typed: string): Promise<Decision> {
    const checked = await this.check(request, user, 'break_glass');
    if (checked) return refuse(checked);
    const reason = scrubSecrets(typed, this.deps.secrets);
    const at = this.deps.now().toISOString();
    const queued = await this.deps.store.transition(
      request.id,
      {
        from: ['frozen'],
        to: 'queued',
        actor: user,
        patch: { breakGlass: { by: user, reason, at } },
        detail: `break glass: ${reason}`,
      },
      request,
    );
    if (!queued.ok)
      return refuse(queued.request ? { code: 'already', request: queued.request } : { code: 'gone' });
    await this.deps.outbox.dropDue([{ kind: 'freeze-end', requestId: request.id }]);
    this.deps.metrics.requests.inc({ kind: request.kind, state: 'queued' });
    await this.deps.outbox.execute(queued.request);
    await this.deps.outbox.announce(queued.request, 'break_glass');
    return { ok: true, request: queued.request };
  }

  /**
   * The end of a freeze fell due: if another window holds the project now, the request waits for its end; else the
   * rules are checked again when it runs (the worker re-checks work that waited) and it is queued.
   */
  async endFreeze(requestId: string): Promise<void> {
    const request = await this.deps.store.get(requestId);
    if (request?.state !== 'frozen') return;
    const after = this.deps.approvals.afterApproval(request, this.deps.now());
    if (after.next === 'freeze') {
      const until = after.freeze.until.toISOString();
      if (until !== request.frozenUntil) {
        const moved = await this.deps.store.note(
          request.id,
          {
            note: 'freeze',
            actor: 'cloudops',
            detail: `still frozen${reasonText(after.freeze)} until ${until}`,
          },
          (current) =>
            current.state === 'frozen'
              ? { frozenUntil: until, freezeReason: after.freeze.reason }
              : undefined,
        );
        if (moved.ok) await this.deps.outbox.announce(moved.request);
      }
      await this.deps.outbox.dueAt({ kind: 'freeze-end', requestId }, after.freeze.until);
      return;
    }
    const queued = await this.deps.store.transition(
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
    this.deps.metrics.requests.inc({ kind: request.kind, state: 'queued' });
    await this.deps.outbox.execute(queued.request);
    await this.deps.outbox.announce(queued.request, 'unfrozen');
  }

  /** `remind_after_hours` passed on a pending request: one reminder in its thread, mentioning who has not acted. */
  async remind(requestId: string): Promise<void> {
    const at = this.deps.now().toISOString();
    const noted = await this.deps.store.note(requestId, { note: 'reminder', actor: 'cloudops' }, (current) =>
      current.state === 'pending' && !current.remindedAt ? { remindedAt: at } : undefined,
    );
    if (noted.ok) await this.deps.outbox.announce(noted.request, 'reminder');
  }

  /** 75 % of the approval TTL passed on a pending request: `escalate_to` are mentioned and may approve from now on. */
  async escalate(requestId: string): Promise<void> {
    const at = this.deps.now().toISOString();
    const noted = await this.deps.store.note(
      requestId,
      { note: 'escalation', actor: 'cloudops' },
      (current) =>
        current.state === 'pending' && !current.escalatedAt && (current.escalateTo ?? []).length > 0
          ? { escalatedAt: at }
          : undefined,
    );
    if (noted.ok) await this.deps.outbox.announce(noted.request, 'escalated');
  }

  /** Whether `user` may reject now, before they are asked for a reason (an expired request expires here). */
  async mayReject(request: CloudRequest, user: string): Promise<Decision> {
    const checked = await this.check(request, user, 'reject');
    return checked ? refuse(checked) : { ok: true, request };
  }

  /** Whether `user` may run frozen work now, before they are asked for a reason. */
  async mayBreakGlass(request: CloudRequest, user: string): Promise<Decision> {
    const checked = await this.check(request, user, 'break_glass');
    return checked ? refuse(checked) : { ok: true, request };
  }

  async reject(request: CloudRequest, user: string, typed?: string): Promise<Decision> {
    const checked = await this.check(request, user, 'reject');
    if (checked) return refuse(checked);
    const reason = typed === undefined ? undefined : scrubSecrets(typed, this.deps.secrets);
    return this.decide(request, {
      from: ['pending'],
      to: 'rejected',
      actor: user,
      patch: { rejectedBy: user, rejectReason: reason },
      detail: reason,
      reply: 'rejected',
      metric: () => this.deps.metrics.approvals.inc({ decision: 'rejected' }),
    });
  }

  /** Cancel a request waiting for approval, or a scheduled run that has not started (its job is dropped). */
  async cancel(request: CloudRequest, user: string): Promise<Decision> {
    const checked = await this.check(request, user, 'cancel');
    if (checked) return refuse(checked);
    return this.cancelled(request, user);
  }

  /** Cancel without asking who clicked (the caller decided): a waiting, frozen or scheduled request stops. */
  private cancelled(request: CloudRequest, user: string, detail?: string): Promise<Decision> {
    const scheduled = isScheduledWaiting(request);
    const frozen = request.state === 'frozen';
    return this.decide(request, {
      from: startsFrom('cancel', request),
      to: 'cancelled',
      actor: user,
      patch: { cancelledBy: user },
      detail,
      reply: 'cancelled',
      metric: () => this.deps.metrics.requests.inc({ kind: request.kind, state: 'cancelled' }),
      after: scheduled
        ? () => this.deps.outbox.cancelExecution(request.id)
        : frozen
          ? () => this.deps.outbox.dropDue([{ kind: 'freeze-end', requestId: request.id }])
          : undefined,
    });
  }

  /**
   * An agent cancels a request it made itself (waiting for approval, scheduled, or frozen); the audit names the agent.
   * Any other request is refused as not its own.
   */
  async cancelByAgent(request: CloudRequest, agent: string): Promise<Decision> {
    if (request.agent?.name !== agent) return refuse({ code: 'not_requester' });
    if (!startsFrom('cancel', request).includes(request.state)) return refuse({ code: 'already', request });
    const actor = agentActor(agent);
    const scheduled = isScheduledWaiting(request);
    const frozen = request.state === 'frozen';
    return this.decide(request, {
      from: startsFrom('cancel', request),
      to: 'cancelled',
      actor,
      patch: { cancelledBy: actor },
      reply: 'cancelled',
      metric: () => this.deps.metrics.requests.inc({ kind: request.kind, state: 'cancelled' }),
      after: scheduled
        ? () => this.deps.outbox.cancelExecution(request.id)
        : frozen
          ? () => this.deps.outbox.dropDue([{ kind: 'freeze-end', requestId: request.id }])
          : undefined,
    });
  }

  /**
   * After an unknown outcome, a person records what the portal showed. Nothing is sent again. "It was applied"
   * records the step like a success: the VM's new size, and an increase's time (the 24-hour wait before lowering).
   */
  async resolve(
    request: CloudRequest,
    user: string,
    outcome: 'resolved_done' | 'resolved_failed',
  ): Promise<Decision> {
    const checked = await this.check(request, user, 'resolve');
    if (checked) return refuse(checked);
    const done = outcome === 'resolved_done';
    return this.decide(request, {
      from: ['unknown'],
      to: outcome,
      actor: user,
      patch: { resolvedBy: user, ...(done ? await this.leases.resolvedDone(request) : {}) },
      detail: 'checked in the portal',
      reply: 'resolved',
      after: done
        ? async () => {
            await this.recordResolvedStep(request);
            await this.leases.returned(request);
          }
        : undefined,
    });
  }

  /**
   * The step whose outcome was unknown (steps after it were never sent), recorded as applied at the time the bot
   * stopped waiting for its answer: the nearest time the bot has for when the API applied it.
   */
  private async recordResolvedStep(request: CloudRequest): Promise<void> {
    if (request.params.kind !== 'resize') return;
    const step = request.params.steps[request.nextStep];
    if (!step) return;
    const unknown = request.outcomes.findLast((o) => o.step === request.nextStep);
    const at = unknown ? new Date(unknown.at) : this.deps.now();
    const known = await this.deps.vmFacts.knownFor(this.deps.policy, request);
    await this.deps.vmFacts.recordStep(request, step, known, at);
  }

  /**
   * A pending request past its `expiresAt` becomes expired, whoever notices first (a click, the expire job);
   * true when it is expired (now or already), false while it is still live.
   */
  async expireIfDue(request: CloudRequest, detail?: string): Promise<boolean> {
    if (request.state === 'expired') return true;
    if (request.state !== 'pending' || new Date(request.expiresAt) > this.deps.now()) return false;
    await this.expire(request, detail);
    return true;
  }

  /** pending → expired, announced in the thread; refused when someone decided first. The caller checked it is due. */
  async expire(request: CloudRequest, detail?: string): Promise<Decision> {
    return this.decide(request, {
      from: ['pending'],
      to: 'expired',
      actor: 'cloudops',
      patch: {},
      detail,
      reply: 'expired',
      metric: () => this.deps.metrics.requests.inc({ kind: request.kind, state: 'expired' }),
    });
  }

  /**
   * approved → queued → its job: the one way an approved request reaches the queue; while a freeze holds the project,
   * approved → frozen instead, until the window ends. Undefined when it lost. `announced`: the approval's
   * announcement under way, stored before the job is added (and before a freeze: the sweeper does not look at those).
   */
  async queueApproved(
    request: CloudRequest,
    detail?: string,
    announced?: Promise<void>,
  ): Promise<CloudRequest | undefined> {
    // Awaited on every way out below; this only keeps a failure from counting as unhandled meanwhile.
    announced?.catch(() => undefined);
    const after = this.afterApproval(request);
    if (after.next === 'freeze') {
      await announced;
      return this.freeze(request, 'approved', after.freeze);
    }
    const [queued] = await Promise.all([
      this.deps.store.transition(
        request.id,
        { from: ['approved'], to: 'queued', actor: 'cloudops', detail },
        request,
      ),
      announced,
    ]);
    if (!queued.ok) return undefined;
    this.deps.metrics.requests.inc({ kind: request.kind, state: 'queued' });
    await this.deps.outbox.execute(queued.request);
    return queued.request;
  }

  /** What follows `request`'s approval: a freeze that covers its run time (not only now) holds it, else it queues. */
  private afterApproval(request: CloudRequest): ReturnType<ApprovalPolicy['afterApproval']> {
    const now = this.deps.now();
    const runAt = request.runAt ? new Date(request.runAt) : undefined;
    return this.deps.approvals.afterApproval(request, runAt && runAt > now ? runAt : now);
  }

  /** Holds `request` until the freeze ends: its state says so, and the end is a due time. */
  private async freeze(
    request: CloudRequest,
    from: 'approved' | 'pending',
    hit: FreezeHit,
  ): Promise<CloudRequest | undefined> {
    const until = hit.until.toISOString();
    const frozen = await this.deps.store.transition(
      request.id,
      {
        from: [from],
        to: 'frozen',
        actor: 'cloudops',
        patch: { frozenUntil: until, freezeReason: hit.reason },
        detail: `held by a freeze${reasonText(hit)} until ${until}`,
      },
      request,
    );
    if (!frozen.ok) return undefined;
    this.deps.metrics.requests.inc({ kind: request.kind, state: 'frozen' });
    await this.deps.outbox.dueAt({ kind: 'freeze-end', requestId: request.id }, hit.until);
    return frozen.request;
  }

  /** Who may, then in which state, then (for decisions on pending requests) whether it expired meanwhile. */
  private async check(request: CloudRequest, user: string, act: Act): Promise<Refusal | undefined> {
    const notAllowed = await this.deps.approvals.may(request, user, act);
    if (notAllowed) return notAllowed;
    if (!startsFrom(act, request).includes(request.state)) return { code: 'already', request };
    // What a disabled agent asked waits for no one: approving or breaking glass for it is refused, with why.
    const agent = request.agent?.name;
    if (
      agent !== undefined &&
      (act === 'approve' || act === 'break_glass') &&
      (request.agent?.disabled || (await this.deps.agentDisabled?.(agent)))
    )
      return { code: 'agent_disabled', agent };
    if ((act === 'approve' || act === 'reject') && (await this.expireIfDue(request)))
      return { code: 'expired', request };
    return undefined;
  }

  /** One compare-and-set transition, then its metric, follow-up and announcement. */
  private async decide(
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
    const moved = await this.deps.store.transition(request.id, transition, request);
    if (!moved.ok)
      return refuse(moved.request ? { code: 'already', request: moved.request } : { code: 'gone' });
    await after?.();
    metric?.();
    await this.deps.outbox.announce(moved.request, reply);
    return { ok: true, request: moved.request };
  }

  /** Stores a checked request, has its message posted, and queues it at once when no approval is needed. */
  private async create(
    origin: Origin,
    project: ProjectPolicy,
    vm: VmKnown,
    fields: {
      params: ResizeParams | RestoreParams;
      mode: 'required' | 'none';
      facts: RuleFacts;
      reason?: string;
      notes: string[];
      cost?: CostPreview;
      runAt?: Date;
    },
  ): Promise<CloudRequest> {
    const plan = this.approvalFor(origin, project, fields.mode, fields.facts);
    const unreachable = await this.deps.approvals.unreachable(project, origin.user, plan.count);
    if (unreachable) throw new ApprovalUnreachableError(`Not requested: ${unreachable} (${plan.rule}).`);
    const needsApproval = plan.count > 0;
    const now = this.deps.now();
    const expiresFrom = fields.runAt && fields.runAt > now ? fields.runAt : now;
    const ttlMs = this.deps.policy.approval_ttl_hours * HOUR_MS;
    const expiresAt = new Date(expiresFrom.getTime() + ttlMs);
    const created = await this.deps.store.create(
      {
        kind: fields.params.kind,
        state: 'pending',
        teamId: origin.teamId,
        channel: origin.channel,
        projectName: project.name,
        projectUuid: project.uuid,
        vmid: vm.vmid,
        vmName: vm.name,
        params: fields.params,
        requester: origin.user,
        reason: fields.reason === undefined ? undefined : scrubSecrets(fields.reason, this.deps.secrets),
        needsApproval,
        approvers: this.deps.approvals.approversFor(project),
        requiredApprovals: plan.count,
        approvalRule: plan.rule,
        approvals: [],
        escalateTo: plan.escalateTo,
        expiresAt: expiresAt.toISOString(),
        runAt: fields.runAt?.toISOString(),
        notes: fields.notes,
        cost: fields.cost,
        workflowStep: origin.workflowStep,
        agent: origin.agent ? { name: origin.agent.name } : undefined,
      },
      origin.agent ? agentActor(origin.agent.name) : origin.user,
      `${plan.rule}: ${approvalsText(plan.count)}${origin.agent ? ` (for ${origin.user})` : ''}`,
    );
    this.deps.metrics.requests.inc({ kind: created.kind, state: 'pending' });
    if (needsApproval) {
      // Its expiry and due times leave in the same write as its message's post, and before it: a process dying after
      // the write leaves nothing half done, and none can post a message whose buttons never expire.
      await Promise.all([
        ...this.scheduleWaiting(created, plan, now, expiresAt),
        this.deps.outbox.postRequest(created.id),
      ]);
      return created;
    }
    await this.deps.outbox.postRequest(created.id);
    // A freeze holds count-0 work too: one that covers a scheduled run's time, not only one that covers now.
    const after = this.deps.approvals.afterApproval(created, expiresFrom);
    if (after.next === 'freeze') {
      const frozen = await this.freeze(created, 'pending', after.freeze);
      if (frozen) {
        await this.deps.outbox.announce(frozen, 'frozen');
        return frozen;
      }
    }
    const queued = await this.deps.store.transition(
      created.id,
      { from: ['pending'], to: 'queued', actor: 'cloudops', detail: 'no approval needed by the policy' },
      created,
    );
    if (queued.ok) {
      this.deps.metrics.requests.inc({ kind: created.kind, state: 'queued' });
      await this.deps.outbox.execute(queued.request);
      return queued.request;
    }
    // The queueing lost to a decision made meanwhile: the expiry is queued all the same and finds it decided.
    await Promise.all(this.scheduleWaiting(created, plan, now, expiresAt));
    return created;
  }

  /** What a request waiting for people has queued: its expiry and, when its rule has them, a reminder and an escalation. */
  private scheduleWaiting(
    created: CloudRequest,
    plan: { remindAfterHours?: number; escalateTo: string[] },
    now: Date,
    expiresAt: Date,
  ): Promise<void>[] {
    const scheduled = [this.deps.outbox.expireAt(created)];
    if (plan.remindAfterHours !== undefined) {
      const remindAt = now.getTime() + plan.remindAfterHours * HOUR_MS;
      if (remindAt < expiresAt.getTime())
        scheduled.push(this.deps.outbox.dueAt({ kind: 'remind', requestId: created.id }, new Date(remindAt)));
    }
    if (plan.escalateTo.length > 0) {
      const ttlMs = this.deps.policy.approval_ttl_hours * HOUR_MS;
      const escalateAt = new Date(expiresAt.getTime() - (1 - ESCALATE_AT) * ttlMs);
      scheduled.push(this.deps.outbox.dueAt({ kind: 'escalate', requestId: created.id }, escalateAt));
    }
    return scheduled;
  }
}

function reasonText(hit: FreezeHit): string {
  return hit.reason ? ` (${hit.reason})` : '';
}

/** What a checked resize asks for: up or down (which approvals apply), and the request's parameters. */
function resizeRequested(resize: CheckedResize): {
  kind: 'resize_up' | 'resize_down';
  params: ResizeParams;
} {
  const { createdAt: _c, lastIncreaseAt: _l, ...before } = resize.vm;
  return {
    kind: resize.check.decreases.length > 0 ? 'resize_down' : 'resize_up',
    params: {
      kind: 'resize',
      target: resize.target,
      steps: resize.check.steps,
      before,
      confirmedStopped: resize.confirmedStopped,
      ...(resize.lease ? { lease: resize.lease } : {}),
      ...(resize.returnOf ? { returnOf: resize.returnOf } : {}),
    },
  };
}
