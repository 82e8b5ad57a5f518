import { approversOf, type ProjectPolicy } from '../config/policy.ts';
import { enqueueExecution, enqueueNotify } from '../jobs/queues.ts';
import type { CloudRequest, CostPreview, ResizeParams, RestoreParams } from '../requests/types.ts';
import { costDifference, sizeAfter, vmCost } from '../rules/cost.ts';
import type { ResizeCheck } from '../rules/resize.ts';
import type { ResizeTarget, VmKnown } from '../rules/types.ts';
import type { SlackDeps } from './deps.ts';

/** Who asked, and where the request message goes. */
export interface Origin {
  user: string;
  teamId: string;
  channel: string;
}

/** The hourly and monthly cost after the change and the difference, or why it cannot be shown. */
async function costPreview(deps: SlackDeps, project: ProjectPolicy, vm: VmKnown, target: ResizeTarget) {
  const currency = deps.policy.currency;
  if (!project.cluster) return undefined;
  const after = sizeAfter(vm, target);
  if (!after) {
    return {
      note: 'Cost not shown: the VM’s current cores, RAM or disk are not known to the bot (add them to the policy file).',
    };
  }
  let prices: Awaited<ReturnType<SlackDeps['prices']['clusterPrices']>>;
  try {
    prices = await deps.prices.clusterPrices(project.cluster);
  } catch (error) {
    deps.logger.warn({ err: error, cluster: project.cluster }, 'prices unavailable for the cost preview');
    return { note: `Cost not shown: the prices of ${project.cluster} could not be read just now.` };
  }
  if (!prices)
    return { note: `Cost not shown: cluster ${project.cluster} is not in the active cluster list.` };
  const cost = vmCost(prices, after);
  const preview: CostPreview = {
    cluster: project.cluster,
    currency,
    hourly: cost.hourly.toFixed(4),
    monthly: cost.monthly.toFixed(2),
  };
  const before = sizeAfter(vm, {});
  if (before) {
    const diff = costDifference(prices, before, after);
    preview.diffHourly = diff.hourly.toFixed(4);
    preview.diffMonthly = diff.monthly.toFixed(2);
  }
  if (cost.missing.length > 0) preview.note = `Prices missing for ${cost.missing.join(', ')}; counted as 0.`;
  return { preview };
}

function expiry(deps: SlackDeps, from: Date): string {
  return new Date(from.getTime() + deps.policy.approval_ttl_hours * 3_600_000).toISOString();
}

/** Stores a checked request, posts its message, and queues it at once when no approval is needed. */
async function submit(
  deps: SlackDeps,
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
  const now = deps.now();
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
      reason: fields.reason,
      needsApproval: fields.needsApproval,
      approvers: approversOf(deps.policy, project),
      expiresAt: expiry(deps, fields.runAt && fields.runAt > now ? fields.runAt : now),
      runAt: fields.runAt?.toISOString(),
      notes: fields.notes,
      cost: fields.cost,
    },
    origin.user,
  );
  deps.metrics.requests.inc({ kind: created.kind, state: 'pending' });
  await enqueueNotify(deps.queues, { type: 'post-request', requestId: created.id });
  if (!fields.needsApproval) {
    const queued = await deps.store.transition(created.id, {
      from: ['pending'],
      to: 'queued',
      actor: 'cloudops',
      detail: 'no approval needed by the policy',
    });
    if (queued.ok) {
      deps.metrics.requests.inc({ kind: created.kind, state: 'queued' });
      await enqueueExecution(deps.queues, queued.request, deps.now());
      return queued.request;
    }
  }
  // Delayed until the request's expiry, so the message loses its buttons on time without polling.
  await enqueueNotify(
    deps.queues,
    { type: 'expire', requestId: created.id },
    { expiresAt: created.expiresAt, now: deps.now() },
  );
  return created;
}

/** A resize that passed the rules, as the modal submitted it. */
export interface CheckedResize {
  project: ProjectPolicy;
  vm: VmKnown;
  target: ResizeTarget;
  check: ResizeCheck;
  confirmedStopped: boolean;
  reason?: string;
  runAt?: Date;
}

export async function submitResize(
  deps: SlackDeps,
  origin: Origin,
  resize: CheckedResize,
): Promise<CloudRequest> {
  const { project, vm, check } = resize;
  const mode = check.decreases.length > 0 ? project.approval.resize_down : project.approval.resize_up;
  const cost = await costPreview(deps, project, vm, resize.target);
  const notes = [...check.notes];
  if (cost?.note && !cost.preview) notes.push(cost.note);
  if (check.needsStoppedConfirmation)
    notes.push('Lowers cores or RAM: the requester confirmed the VM is stopped.');
  const { createdAt: _c, lastIncreaseAt: _l, ...before } = vm;
  return submit(deps, origin, project, vm, {
    params: {
      kind: 'resize',
      target: resize.target,
      steps: check.steps,
      before,
      confirmedStopped: resize.confirmedStopped,
    },
    needsApproval: mode === 'required',
    reason: resize.reason,
    notes,
    cost: cost?.preview,
    runAt: resize.runAt,
  });
}

export interface CheckedRestore {
  project: ProjectPolicy;
  vm: VmKnown;
  backupSlug: string;
  autostart: boolean;
  reason?: string;
}

export async function submitRestore(
  deps: SlackDeps,
  origin: Origin,
  restore: CheckedRestore,
): Promise<CloudRequest> {
  const notes = ['The VM must be stopped: the requester confirmed it and typed the VM id again.'];
  if (restore.vm.ha) notes.push('High-availability VM: autostart is not allowed.');
  return submit(deps, origin, restore.project, restore.vm, {
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
