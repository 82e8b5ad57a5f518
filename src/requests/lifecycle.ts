import type { PriceSource } from '../cloud/price-cache.ts';
import type { Policy, ProjectPolicy } from '../config/policy.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { ResizeCheck } from '../rules/resize.ts';
import type { ResizeTarget, VmKnown } from '../rules/types.ts';
import type { Act, ApprovalPolicy, NotAllowed } from './approvers.ts';
import { isScheduledWaiting } from './approvers.ts';
import { costPreview } from './cost-preview.ts';
import type { Outbox } from './outbox.ts';
import type { RequestStore } from './store.ts';
import type {
  CloudRequest,
  CostPreview,
  LeaseAsked,
  RequestState,
  ResizeParams,
  RestoreParams,
  WorkflowStepRun,
} from './types.ts';
import type { VmFactsStore } from './vm-facts.ts';

/** Who asked, and where the request lives (its message, its thread). */
export interface Origin {
  user: string;
  teamId: string;
  channel: string;
  /** Asked by a Workflow Builder step, which waits for the request's end. */
  workflowStep?: WorkflowStepRun;
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
  | { code: 'gone' };

export type Decision = { ok: true; request: CloudRequest } | { ok: false; refusal: Refusal };

export interface LifecycleDeps {
  policy: Policy;
  store: RequestStore;
  outbox: Outbox;
  approvals: ApprovalPolicy;
  prices: PriceSource;
  now: () => Date;
  logger: Logger;
  metrics: Metrics;
  /** What the bot knows of each VM: a resize resolved as applied is recorded there like a success. */
  vmFacts: VmFactsStore;
}

/** The states an act starts from: anything else is "already decided". */
function startsFrom(act: Act, request: CloudRequest): RequestState[] {
  switch (act) {
    case 'approve':
    case 'reject':
      return ['pending'];
    case 'cancel':
      return isScheduledWaiting(request) ? ['queued'] : ['pending'];
    case 'resolve':
      return ['unknown'];
  }
}

const refuse = (refusal: Refusal): Decision => ({ ok: false, refusal });

/**
 * A request's whole life, with no Slack in it: create from a checked draft, approve, reject, cancel, resolve,
 * expire, queue. Every state change goes through the store's compare-and-set (with its audit entry), so of two
 * people deciding at once exactly one wins; the queues are reached through the outbox.
 */
export class RequestLifecycle {
  constructor(private readonly deps: LifecycleDeps) {}

  async createResize(origin: Origin, resize: CheckedResize): Promise<CloudRequest> {
    const { project, vm, check } = resize;
    const mode = check.decreases.length > 0 ? project.approval.resize_down : project.approval.resize_up;
    const cost = await costPreview(
      { prices: this.deps.prices, currency: this.deps.policy.currency, logger: this.deps.logger },
      project,
      vm,
      resize.target,
      resize.lease?.returnTo,
    );
    const notes = [...check.notes, ...(resize.leaseNotes ?? [])];
    if (cost?.note && !cost.preview) notes.push(cost.note);
    if (check.needsStoppedConfirmation)
      notes.push('Lowers cores or RAM: the requester confirmed the VM is stopped.');
    const { createdAt: _c, lastIncreaseAt: _l, ...before } = vm;
    return this.create(origin, project, vm, {
      params: {
        kind: 'resize',
        target: resize.target,
        steps: check.steps,
        before,
        confirmedStopped: resize.confirmedStopped,
        ...(resize.lease ? { lease: resize.lease } : {}),
        ...(resize.returnOf ? { returnOf: resize.returnOf } : {}),
      },
      needsApproval: mode === 'required',
      reason: resize.reason,
      notes,
      cost: cost?.preview,
      runAt: resize.runAt,
    });
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
      needsApproval: restore.project.approval.restore === 'required',
      reason: restore.reason,
      notes,
    });
  }

  /** Approve: the first approval wins; a second click, a second approver or a replay changes nothing. */
  async approve(request: CloudRequest, user: string): Promise<Decision> {
    const checked = await this.check(request, user, 'approve');
    if (checked) return refuse(checked);
    const approved = await this.deps.store.transition(request.id, {
      from: ['pending'],
      to: 'approved',
      actor: user,
      patch: { approvedBy: user },
    });
    if (!approved.ok)
      return refuse(approved.request ? { code: 'already', request: approved.request } : { code: 'gone' });
    this.deps.metrics.approvals.inc({ decision: 'approved' });
    // Announced first, right after the approval is stored: a process dying now leaves no message "waiting" with
    // live buttons; an approval that was not queued yet is queued by the stranded-request sweeper.
    await this.deps.outbox.announce(approved.request, 'approved');
    const queued = await this.queueApproved(approved.request);
    return { ok: true, request: queued ?? approved.request };
  }

  /** Whether `user` may reject now, before they are asked for a reason (an expired request expires here). */
  async mayReject(request: CloudRequest, user: string): Promise<Decision> {
    const checked = await this.check(request, user, 'reject');
    return checked ? refuse(checked) : { ok: true, request };
  }

  async reject(request: CloudRequest, user: string, reason?: string): Promise<Decision> {
    const checked = await this.check(request, user, 'reject');
    if (checked) return refuse(checked);
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
    const scheduled = isScheduledWaiting(request);
    return this.decide(request, {
      from: startsFrom('cancel', request),
      to: 'cancelled',
      actor: user,
      patch: { cancelledBy: user },
      reply: 'cancelled',
      metric: () => this.deps.metrics.requests.inc({ kind: request.kind, state: 'cancelled' }),
      after: scheduled ? () => this.deps.outbox.cancelExecution(request.id) : undefined,
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
    return this.decide(request, {
      from: ['unknown'],
      to: outcome,
      actor: user,
      patch: { resolvedBy: user },
      detail: 'checked in the portal',
      reply: 'resolved',
      after: outcome === 'resolved_done' ? () => this.recordResolvedStep(request) : undefined,
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

  /** approved → queued → its job: the one way an approved request reaches the queue. Undefined when it lost. */
  async queueApproved(request: CloudRequest, detail?: string): Promise<CloudRequest | undefined> {
    const queued = await this.deps.store.transition(request.id, {
      from: ['approved'],
      to: 'queued',
      actor: 'cloudops',
      detail,
    });
    if (!queued.ok) return undefined;
    this.deps.metrics.requests.inc({ kind: request.kind, state: 'queued' });
    await this.deps.outbox.execute(queued.request);
    return queued.request;
  }

  /** Who may, then in which state, then (for decisions on pending requests) whether it expired meanwhile. */
  private async check(request: CloudRequest, user: string, act: Act): Promise<Refusal | undefined> {
    const notAllowed = await this.deps.approvals.may(request, user, act);
    if (notAllowed) return notAllowed;
    if (!startsFrom(act, request).includes(request.state)) return { code: 'already', request };
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
    const moved = await this.deps.store.transition(request.id, transition);
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
      needsApproval: boolean;
      reason?: string;
      notes: string[];
      cost?: CostPreview;
      runAt?: Date;
    },
  ): Promise<CloudRequest> {
    const now = this.deps.now();
    const expiresFrom = fields.runAt && fields.runAt > now ? fields.runAt : now;
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
        reason: fields.reason,
        needsApproval: fields.needsApproval,
        approvers: this.deps.approvals.approversFor(project),
        expiresAt: new Date(
          expiresFrom.getTime() + this.deps.policy.approval_ttl_hours * 3_600_000,
        ).toISOString(),
        runAt: fields.runAt?.toISOString(),
        notes: fields.notes,
        cost: fields.cost,
        workflowStep: origin.workflowStep,
      },
      origin.user,
    );
    this.deps.metrics.requests.inc({ kind: created.kind, state: 'pending' });
    await this.deps.outbox.postRequest(created.id);
    if (!fields.needsApproval) {
      const queued = await this.deps.store.transition(created.id, {
        from: ['pending'],
        to: 'queued',
        actor: 'cloudops',
        detail: 'no approval needed by the policy',
      });
      if (queued.ok) {
        this.deps.metrics.requests.inc({ kind: created.kind, state: 'queued' });
        await this.deps.outbox.execute(queued.request);
        return queued.request;
      }
    }
    await this.deps.outbox.expireAt(created);
    return created;
  }
}
