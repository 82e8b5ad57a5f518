import type { PriceSource } from '../../cloud/price-cache.ts';
import { approvalsOf, findProject, type Policy, type ProjectPolicy } from '../../config/policy.ts';
import type { Logger } from '../../observability/logger.ts';
import { type ChangeScope, classifyChange, type FieldChange } from '../../rules/change-scope.ts';
import { NAME } from '../../rules/resize.ts';
import type { ResizeField, ResizeTarget, VmKnown } from '../../rules/types.ts';
import { costPreview } from '../cost-preview.ts';
import type { CloudRequest, ResizeParams } from '../model/types.ts';
import { checkResizeUnder } from '../resize-check.ts';
import { approvalsText, planApproval, resizeFacts, resizeKindFor } from './approval-rules.ts';

/** What a re-check reads besides the request: the policy, the prices (cached) and the time. */
export interface RecheckDeps {
  policy: Policy;
  prices: PriceSource;
  logger: Logger;
  now: () => Date;
}

/**
 * Checks a resize request again against what is known of its VM now (`vm`), at its approval (before the approval is
 * counted) or when the worker is about to send it: the fields it sends must still stand where they stood when it
 * was made (else its direction and cost are not what its message says), the rules must allow it, and its cost must
 * still meet the approvals it has and its agent's `max_monthly_delta` (a cost nobody can tell meets neither). The
 * sentence saying why it is not sent, or undefined when it may go on. Restores, and runs past their first step, pass.
 */
export async function recheckRequest(
  deps: RecheckDeps,
  request: CloudRequest,
  vm: VmKnown,
  stage: 'approval' | 'run',
  /** Filled with the cost difference now, when this re-check computed it (the worker's own judgement reuses it). */
  seen?: { monthlyDelta?: string; costed?: boolean },
): Promise<string | undefined> {
  const { params } = request;
  if (params.kind !== 'resize' || request.nextStep > 0) return undefined;
  const sent = sentFields(params);
  if (Object.keys(sent).length === 0) return undefined;

  const changed = changedSince(params, vm, sent);
  if (changed) return `Not sent: VM ${request.vmid} changed since this request was made: ${changed}.`;

  const now = deps.now();
  const check = checkResizeUnder(deps.policy, {
    vm,
    target: params.target,
    confirmedStopped: params.confirmedStopped,
    acceptWanTwoStep: params.steps.length > 1,
    now,
  });
  // A scheduled lowering is approved before its time: the 24-hour rule is its worker's to check, at that time.
  const waiting = stage === 'approval' && request.runAt !== undefined && new Date(request.runAt) > now;
  const violations = check.violations.filter((v) => !(waiting && v.code === 'cooldown'));
  if (violations.length > 0) {
    const when =
      stage === 'approval'
        ? 'at its approval'
        : request.runAt
          ? 'at its scheduled time'
          : request.frozenUntil
            ? 'when the freeze ended'
            : 'when it was about to run';
    return `Not sent: ${when} the rules do not allow it. ${violations.map((v) => v.message).join(' ')}`;
  }

  return costChanged(deps, request, params, vm, seen);
}

/** The fields the request sends, at the value it ends with (a WAN switch through `off` ends at its target). */
function sentFields(params: ResizeParams): ResizeTarget {
  const sent: ResizeTarget = {};
  for (const step of params.steps) {
    for (const field of Object.keys(step) as ResizeField[])
      Object.assign(sent, { [field]: params.target[field] ?? step[field] });
  }
  return sent;
}

const VERB: Record<FieldChange, string> = {
  raise: 'raises',
  lower: 'lowers',
  both: 'changes',
  unknown: 'may raise or lower',
};

/** "cores were 4 and are 12 now, so 6 lowers them (when asked, it raised them)", or undefined when nothing moved. */
function changedSince(params: ResizeParams, vm: VmKnown, sent: ResizeTarget): string | undefined {
  const then: ChangeScope = classifyChange(params.before, sent);
  const now: ChangeScope = classifyChange(vm, sent);
  const lines: string[] = [];
  for (const field of Object.keys(sent) as ResizeField[]) {
    const was = params.before[field];
    const is = vm[field];
    // A value the bot does not know now is no sign of a change (facts are only ever learnt); the API judges it.
    if (was === is || is === undefined) continue;
    const shown = (value: unknown) =>
      value === undefined
        ? 'not known'
        : field === 'ramGb' || field === 'osDiskGb'
          ? `${value} GB`
          : String(value);
    const wasVerb = then.fields[field];
    const isVerb = now.fields[field];
    const direction =
      isVerb === undefined
        ? `, so ${shown(sent[field])} changes nothing now`
        : isVerb !== wasVerb
          ? `, so ${shown(sent[field])} ${VERB[isVerb]} ${field === 'cores' ? 'them' : 'it'} now${wasVerb ? ` (when asked, it ${VERB[wasVerb]} ${field === 'cores' ? 'them' : 'it'})` : ''}`
          : '';
    lines.push(
      `${NAME[field]} ${field === 'cores' ? 'were' : 'was'} ${shown(was)} and ${field === 'cores' ? 'are' : 'is'} ${shown(is)} now${direction}`,
    );
  }
  if (lines.length === 0) return undefined;
  return `${lines.join('; ')}. Its direction and cost are not what it showed: make a new request if it is still needed`;
}

/** The monthly cost difference of `params` on the VM as known now; undefined when nobody can tell. */
export async function monthlyDeltaNow(
  deps: RecheckDeps,
  project: ProjectPolicy,
  params: ResizeParams,
  vm: VmKnown,
): Promise<string | undefined> {
  const cost = await costPreview(
    { prices: deps.prices, currency: deps.policy.currency, logger: deps.logger },
    project,
    vm,
    params.target,
    params.lease?.returnTo,
  );
  return cost?.preview?.diffMonthly;
}

/** Why the cost now no longer carries the request: a larger difference, a bound, or more approvals needed. */
async function costChanged(
  deps: RecheckDeps,
  request: CloudRequest,
  params: ResizeParams,
  vm: VmKnown,
  seen?: { monthlyDelta?: string; costed?: boolean },
): Promise<string | undefined> {
  const { policy } = deps;
  const project = findProject(policy, request.projectUuid) ?? findProject(policy, request.projectName);
  if (!project) return undefined;
  const delta = await monthlyDeltaNow(deps, project, params, vm);
  if (seen) Object.assign(seen, { monthlyDelta: delta, costed: true });
  const shown = request.cost?.diffMonthly;
  const money = (value: string | undefined) =>
    value === undefined
      ? 'not known'
      : `${value.startsWith('-') ? '' : '+'}${value} ${policy.currency} a month`;
  if (shown !== undefined && delta !== undefined && Number(delta) > Number(shown))
    return `Not sent: its cost changed since it was made: ${money(shown)} then, ${money(delta)} now. Make a new request if it is still needed.`;

  const agent = request.agent ? policy.agents.find((a) => a.name === request.agent?.name) : undefined;
  const bound = agent?.max_monthly_delta;
  if (bound !== undefined && (delta === undefined || Number(delta) > bound))
    return `Not sent: agent ${agent?.name} may add at most ${bound} ${policy.currency} a month, and the cost of this change is ${money(delta)} now.`;

  // The approvals it was made with stand unless its cost moved. Before a run the worker also plans them under its
  // own policy, whatever was stored (decision-check.ts).
  if (delta === shown) return undefined;
  const planFor = (kind: 'resize_up' | 'resize_down') =>
    planApproval(
      approvalsOf(policy, project),
      project.approval[kind],
      resizeFacts({ ...params, before: vm }, kind, delta),
      policy.currency,
    );
  const plan = planFor(
    resizeKindFor(classifyChange(vm, params.target).direction, (kind) => planFor(kind).count),
  );
  // An agent's request always waits for a person unless the agent is unattended.
  const needed = agent && !agent.unattended ? Math.max(1, plan.count) : plan.count;
  const had = request.requiredApprovals ?? 1;
  if (needed > had)
    return `Not sent: with its cost now ${money(delta)}, it needs ${approvalsText(needed)} (${plan.rule}), and it was made needing ${approvalsText(had)}. Make a new request if it is still needed.`;
  return undefined;
}
