import type { ApprovalKind, ProjectPolicy } from '../../config/policy.ts';
import { scrubSecrets } from '../../observability/logger.ts';
import { classifyChange } from '../../rules/change-scope.ts';
import { cleanReason } from '../../rules/inputs.ts';
import type { VmKnown } from '../../rules/types.ts';
import { agentBoundRefusal } from '../approval/agent-bound.ts';
import {
  approvalsText,
  type RuleFacts,
  resizeFacts,
  resizeKindFor,
  restoreFacts,
  verifyText,
  withIncreaseVerify,
} from '../approval/approval-rules.ts';
import type { RequestApproval } from '../approval/approvers.ts';
import { goAheadDecision, sealDecision } from '../approval/decision-seal.ts';
import { costPreview } from '../cost-preview.ts';
import {
  agentActor,
  type CloudRequest,
  type CostPreview,
  type GoAhead,
  type ResizeParams,
  type RestoreParams,
} from '../model/types.ts';
import { requireTicket, resizeKinds, type TicketFacts } from '../tickets.ts';
import { freeze } from './steps.ts';
import {
  type Acts,
  AGENT_NEEDS_PERSON,
  AgentLimitError,
  ApprovalUnreachableError,
  type CheckedResize,
  type CheckedRestore,
  HOUR_MS,
  type LifecycleDeps,
  type Origin,
  RequesterRefusedError,
} from './types.ts';

/** The escalation comes at this share of the approval TTL (docs/policy.md#approval-policies: 75 %). */
const ESCALATE_AT = 0.75;

/**
 * What `createResize` would make of this resize, without storing anything: its cost preview and the approvals it
 * would need (an agent's plan, for instance).
 */
export async function previewResize(
  { deps }: Acts,
  origin: Origin,
  resize: CheckedResize,
): Promise<{ cost?: CostPreview; costNote?: string; approval: RequestApproval }> {
  const { project } = resize;
  const cost = await resizeCost(deps, resize);
  const { kind, params, increase } = resizeRequested(deps, resize, cost?.preview?.diffMonthly);
  const facts = resizeFacts(params, kind, cost?.preview?.diffMonthly);
  return {
    cost: cost?.preview,
    costNote: cost?.note,
    approval: approvalFor(deps, origin, project, project.approval[kind], facts, increase),
  };
}

/** Stores a checked resize (refused first when it is beyond what the asking agent may add) and posts it. */
export async function createResize(acts: Acts, origin: Origin, resize: CheckedResize): Promise<CloudRequest> {
  const { deps } = acts;
  const { project, vm, check } = resize;
  const cost = await resizeCost(deps, resize);
  const { kind, params, increase } = resizeRequested(deps, resize, cost?.preview?.diffMonthly);
  const mode = project.approval[kind];
  const overBound =
    origin.agent && agentBoundRefusal(origin.agent, cost?.preview?.diffMonthly, deps.policy.currency);
  if (overBound) throw new AgentLimitError(overBound);
  const notes = [...check.notes, ...(resize.leaseNotes ?? [])];
  if (cost?.note && !cost.preview) notes.push(cost.note);
  if (check.needsStoppedConfirmation)
    notes.push(
      origin.agent
        ? `Lowers cores or RAM: agent ${origin.agent.name} asserted the VM is stopped (vm_stopped); nobody in Slack confirmed it.`
        : 'Lowers cores or RAM: the requester confirmed the VM is stopped.',
    );
  if (resize.returnOf)
    notes.push(
      `Returns the temporary increase of request ${resize.returnOf}; its lease ends when this succeeds.`,
    );
  const created = await create(acts, origin, project, vm, {
    params,
    mode,
    facts: resizeFacts(params, kind, cost?.preview?.diffMonthly),
    reason: resize.reason,
    notes,
    cost: cost?.preview,
    runAt: resize.runAt,
    kinds: resizeKinds(resize.vm, resize.target),
    ticket: resize.ticket,
    increase,
  });
  if (resize.returnOf) await acts.leases.returnRequested(resize.returnOf, created);
  return created;
}

/** Stores a checked restore and posts it. */
export async function createRestore(
  acts: Acts,
  origin: Origin,
  restore: CheckedRestore,
): Promise<CloudRequest> {
  // An agent names the VM once and asserts it is stopped: nobody confirmed or typed anything.
  const notes = [
    origin.agent
      ? `The VM must be stopped: agent ${origin.agent.name} asserted it is (vm_stopped) and named the VM once, in vm_id; nobody typed the VM id again.`
      : 'The VM must be stopped: the requester confirmed it and typed the VM id again.',
  ];
  if (restore.vm.ha) notes.push('High-availability VM: autostart is not allowed.');
  return create(acts, origin, restore.project, restore.vm, {
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
    kinds: ['restore'],
    ticket: restore.ticket,
  });
}

function resizeCost(deps: LifecycleDeps, resize: CheckedResize) {
  return costPreview(
    { prices: deps.prices, currency: deps.policy.currency, logger: deps.logger },
    resize.project,
    resize.vm,
    resize.target,
    resize.lease?.returnTo,
  );
}

/**
 * The policy's approval plan; for an agent that is not `unattended`, never fewer than one person; for an agent with
 * `verify`, verified approvals (by the rule's own methods where it names some, else the agent's, over its block's);
 * for a resize planned as a decrease that also raises something, the increase's verification too (`increase`).
 */
function approvalFor(
  deps: LifecycleDeps,
  origin: Origin,
  project: ProjectPolicy,
  mode: 'required' | 'none',
  facts: RuleFacts,
  increase?: RequestApproval,
): RequestApproval {
  const planned = deps.approvals.planFor(project, mode, facts);
  const plan =
    origin.agent && !origin.agent.unattended && planned.count === 0
      ? { ...planned, count: 1, rule: AGENT_NEEDS_PERSON }
      : planned;
  const agentVerify = origin.agent?.verify;
  const own =
    agentVerify && plan.count > 0 && plan.verifyFrom !== 'rule'
      ? { ...plan, verify: agentVerify, verifyFrom: 'rule' as const }
      : plan;
  return { ...own, ...withIncreaseVerify(own, increase) };
}

/** Who asks is checked (requesters, requests_per_hour), then the request is stored (`storeRequest`). */
async function create(
  acts: Acts,
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
    /** The kinds of change it counts as, for the change-ticket rule. */
    kinds: ApprovalKind[];
    ticket?: TicketFacts;
    /** A resize planned as a decrease that also raises something: the plan of its increase. */
    increase?: RequestApproval;
  },
): Promise<CloudRequest> {
  const { deps } = acts;
  // A person (an agent is limited by its own entry, at the MCP surface) asks where the policy lets them.
  if (!origin.agent) {
    const refused = await deps.approvals.mayRequest(project, origin.user);
    if (refused) throw new RequesterRefusedError(`Not requested: ${refused}.`);
  }
  requireTicket(deps, project, fields.kinds, fields.ticket);
  const plan = approvalFor(deps, origin, project, fields.mode, fields.facts, fields.increase);
  const unreachable = await deps.approvals.unreachable(project, origin.user, plan.count);
  if (unreachable) throw new ApprovalUnreachableError(`Not requested: ${unreachable} (${plan.rule}).`);
  const taken = origin.agent ? undefined : await takePersonRequest(deps, origin.user);
  try {
    return await storeRequest(acts, origin, project, vm, fields, plan);
  } catch (error) {
    // Only requests made count: one that could not be stored gives its place back.
    await taken?.release().catch(() => undefined);
    throw error;
  }
}

/** Counts a person's request against the policy's `requests_per_hour`; refused with when they may ask again. */
async function takePersonRequest(deps: LifecycleDeps, user: string) {
  if (!deps.takeRequest) return undefined;
  const perHour = deps.policy.requests_per_hour;
  const taken = await deps.takeRequest(user, perHour);
  if (taken.ok) return taken;
  throw new RequesterRefusedError(
    `Not requested: <@${user}> made ${perHour} requests in the last hour (the policy's requests_per_hour); you may ask again at ${taken.retryAt.toISOString().slice(0, 16).replace('T', ' ')} UTC.`,
  );
}

/** Stores a request the checks let through, has its message posted, and queues it at once when no approval is needed. */
async function storeRequest(
  acts: Acts,
  origin: Origin,
  project: ProjectPolicy,
  vm: VmKnown,
  fields: Parameters<typeof create>[4],
  plan: RequestApproval,
): Promise<CloudRequest> {
  const { deps } = acts;
  const needsApproval = plan.count > 0;
  const now = deps.now();
  const expiresFrom = fields.runAt && fields.runAt > now ? fields.runAt : now;
  const ttlMs = deps.policy.approval_ttl_hours * HOUR_MS;
  const expiresAt = new Date(expiresFrom.getTime() + ttlMs);
  const created = await deps.store.create(
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
      reason:
        fields.reason === undefined ? undefined : cleanReason(scrubSecrets(fields.reason, deps.secrets)),
      needsApproval,
      approvers: deps.approvals.approversFor(project),
      requiredApprovals: plan.count,
      approvalRule: plan.rule,
      approvals: [],
      ...(plan.verify ? { verify: plan.verify } : {}),
      escalateTo: plan.escalateTo,
      expiresAt: expiresAt.toISOString(),
      runAt: fields.runAt?.toISOString(),
      notes: fields.notes,
      cost: fields.cost,
      workflowStep: origin.workflowStep,
      agent: origin.agent ? { name: origin.agent.name } : undefined,
      ...(fields.ticket ? { ticket: fields.ticket } : {}),
    },
    origin.agent ? agentActor(origin.agent.name) : origin.user,
    `${plan.rule}: ${approvalsText(plan.count)}${plan.verify ? `, verified (${verifyText(plan.verify)})` : ''}${origin.agent ? ` (for ${origin.user})` : ''}${fields.ticket ? `; ticket ${fields.ticket.key} (${fields.ticket.state})` : ''}`,
  );
  deps.metrics.requests.inc({ kind: created.kind, state: 'pending' });
  if (needsApproval) {
    // Its expiry and due times leave in the same write as its message's post, and before it: a process dying after
    // the write leaves nothing half done, and none can post a message whose buttons never expire.
    await Promise.all([
      ...scheduleWaiting(deps, created, plan, now, expiresAt),
      deps.outbox.postRequest(created.id),
    ]);
    return created;
  }
  return runWithoutApproval(acts, created, plan, now, expiresAt, expiresFrom);
}

/**
 * A request no one needs to approve: its message is posted, then it is frozen when a freeze covers its time, else
 * queued at once.
 */
async function runWithoutApproval(
  acts: Acts,
  created: CloudRequest,
  plan: RequestApproval,
  now: Date,
  expiresAt: Date,
  expiresFrom: Date,
): Promise<CloudRequest> {
  const { deps } = acts;
  await deps.outbox.postRequest(created.id);
  // The go-ahead that lets it run with nobody approving is sealed, and stored with its first move.
  const goAhead = sealedGoAhead(deps, created, now);
  // A freeze holds count-0 work too: one that covers a scheduled run's time, not only one that covers now.
  const after = deps.approvals.afterApproval(created, expiresFrom);
  if (after.next === 'freeze') {
    const frozen = await freeze(acts, created, 'pending', after.freeze, goAhead);
    if (frozen) {
      await deps.outbox.announce(frozen, 'frozen');
      return frozen;
    }
  }
  const queued = await deps.store.transition(
    created.id,
    {
      from: ['pending'],
      to: 'queued',
      actor: 'cloudops',
      detail: 'no approval needed by the policy',
      ...(goAhead ? { patch: { goAhead } } : {}),
    },
    created,
  );
  if (queued.ok) {
    deps.metrics.requests.inc({ kind: created.kind, state: 'queued' });
    await deps.outbox.execute(queued.request);
    return queued.request;
  }
  // The queueing lost to a decision made meanwhile: the expiry is queued all the same and finds it decided.
  await Promise.all(scheduleWaiting(deps, created, plan, now, expiresAt));
  return created;
}

/** The sealed "no approval needed" (or unattended agent's go-ahead) of `request`, decided at `now`. */
function sealedGoAhead(deps: LifecycleDeps, request: CloudRequest, now: Date): GoAhead | undefined {
  if (!deps.sealKeys) return undefined;
  const decision = goAheadDecision(request, now.toISOString());
  return {
    kind: decision.kind === 'agent' ? 'agent' : 'no_approval',
    at: decision.at,
    revision: decision.revision,
    seal: sealDecision(deps.sealKeys, request, decision),
  };
}

/** What a request waiting for people has queued: its expiry and, when its rule has them, a reminder and an escalation. */
function scheduleWaiting(
  deps: LifecycleDeps,
  created: CloudRequest,
  plan: { remindAfterHours?: number; escalateTo: string[] },
  now: Date,
  expiresAt: Date,
): Promise<void>[] {
  const scheduled = [deps.outbox.expireAt(created)];
  if (plan.remindAfterHours !== undefined) {
    const remindAt = now.getTime() + plan.remindAfterHours * HOUR_MS;
    if (remindAt < expiresAt.getTime())
      scheduled.push(deps.outbox.dueAt({ kind: 'remind', requestId: created.id }, new Date(remindAt)));
  }
  if (plan.escalateTo.length > 0) {
    const ttlMs = deps.policy.approval_ttl_hours * HOUR_MS;
    const escalateAt = new Date(expiresAt.getTime() - (1 - ESCALATE_AT) * ttlMs);
    scheduled.push(deps.outbox.dueAt({ kind: 'escalate', requestId: created.id }, escalateAt));
  }
  return scheduled;
}

/**
 * What a checked resize asks for: its parameters, and the approval kind it is planned as, classified field by field
 * (one that raises and lowers, or whose direction is unknown, is the kind that needs more approvals; planned as a
 * decrease, it carries the increase's plan, whose verification it must meet too).
 */
function resizeRequested(
  deps: LifecycleDeps,
  resize: CheckedResize,
  monthlyDelta: string | undefined,
): { kind: 'resize_up' | 'resize_down'; params: ResizeParams; increase?: RequestApproval } {
  const { createdAt: _c, lastIncreaseAt: _l, ...before } = resize.vm;
  const params: ResizeParams = {
    kind: 'resize',
    target: resize.target,
    steps: resize.check.steps,
    before,
    confirmedStopped: resize.confirmedStopped,
    ...(resize.lease ? { lease: resize.lease } : {}),
    ...(resize.returnOf ? { returnOf: resize.returnOf } : {}),
  };
  const { project } = resize;
  const planOf = (k: 'resize_up' | 'resize_down') =>
    deps.approvals.planFor(project, project.approval[k], resizeFacts(params, k, monthlyDelta));
  const direction = classifyChange(resize.vm, resize.target).direction;
  const kind = resizeKindFor(direction, (k) => planOf(k).count);
  // Planned as a decrease, a change that raises anything still meets what the increase would have to verify.
  const raises = direction === 'mixed' || direction === 'unknown';
  return { kind, params, ...(kind === 'resize_down' && raises ? { increase: planOf('resize_up') } : {}) };
}
