import { findAgent } from '../../config/agents.ts';
import {
  approvalsOf,
  approvalValidHoursOf,
  findProject,
  freezeOf,
  type Policy,
  type ProjectPolicy,
} from '../../config/policy.ts';
import type { SealKeys } from '../../config/seal-keys.ts';
import type { VerifyMethod } from '../../config/verification-policy.ts';
import { classifyChange } from '../../rules/change-scope.ts';
import type { VmKnown } from '../../rules/types.ts';
import { type CloudRequest, revisionOf } from '../model/types.ts';
import { VERIFY_METHODS } from '../model/verification.ts';
import {
  type ApprovalPlan,
  approvalsText,
  freezeAt,
  planApproval,
  resizeFacts,
  resizeKindFor,
  restoreFacts,
  verifyText,
  withIncreaseVerify,
} from './approval-rules.ts';
import type { ApprovalPolicy } from './approvers.ts';
import {
  approvalDecision,
  breakGlassDecision,
  decisionHolds,
  goAheadDecision,
  requestFacts,
} from './decision-seal.ts';

/*
 * The worker's own judgement before a request's POST (docs/approvals.md#the-worker-judges): the approvals the request
 * needs are planned under the policy this process runs with (never a count stored with the request), the recorded
 * approvals are counted only when their seals hold and the policy names their approvers (verified by a method the
 * rule asks for, where it asks), and every sealed decision must still be within `approval_valid_hours`.
 */

/** What the worker's judgement reads: its own policy, approvers (with user groups), keys and clock. */
export interface DecisionCheckDeps {
  policy: Policy;
  approvals: ApprovalPolicy;
  sealKeys: SealKeys;
  now: () => Date;
}

/** Why the request is not sent: a seal that does not hold (`seal_invalid`), or approvals short of the policy's. */
export interface DecisionRefusal {
  code: 'seal_invalid' | 'short';
  reason: string;
}

const HOUR_MS = 3_600_000;

/** The rule an agent's request names when the policy's own would let it run without a person. */
const AGENT_NEEDS_PERSON = 'asked by an agent: a person approves';

/** When each sealed decision was made, once every seal on the request holds ({@link checkSeals}). */
export interface SealedTimes {
  approvals: string[];
  goAhead?: string;
  breakGlass?: string;
}

/**
 * Every seal on `request` checked against the request as it is now (first, before anything else is judged): each
 * approval recorded, its go-ahead and its break glass. A `seal_invalid` refusal naming the first that is missing or
 * does not hold (forged, moved from another request or change, or altered), else when each was made.
 */
export function checkSeals(keys: SealKeys, request: CloudRequest): SealedTimes | DecisionRefusal {
  const sealed = sealedTimes(keys, request, requestFacts(request));
  if (typeof sealed === 'string') return { code: 'seal_invalid', reason: sealed };
  // Work runs on an approval or on a sealed go-ahead (break glass only ever follows one of them).
  if (sealed.approvals.length === 0 && sealed.goAhead === undefined)
    return {
      code: 'seal_invalid',
      reason: 'Not sent: no sealed decision lets it run (no approval, and no sealed "no approval needed").',
    };
  return sealed;
}

/**
 * Whether `request`, whose seals hold (`sealed`), may be sent now under the worker's own policy: the approvals it
 * needs, planned as for a new request, and the decisions' validity. `vm`: what is known of the VM now,
 * `monthlyDelta`: its cost difference now (resizes; undefined when unknown). Undefined when it may go.
 */
export async function checkApprovals(
  deps: DecisionCheckDeps,
  request: CloudRequest,
  sealed: SealedTimes,
  monthlyDelta: string | undefined,
  vm: VmKnown,
): Promise<DecisionRefusal | undefined> {
  const { policy } = deps;
  const project = findProject(policy, request.projectUuid);
  if (!project) return notInPolicy(request);
  const plan = planUnder(policy, project, request, vm, monthlyDelta);
  if (typeof plan === 'string') return short(plan);
  const unverified = unverifiedBreakGlass(request, plan);
  if (unverified) return short(unverified);
  const breaker = await breakerNotAllowed(deps, project, request);
  if (breaker) return short(breaker);
  const counted = await qualifying(deps, project, request, plan);
  if (counted.users.length < plan.count) {
    const methods = plan.verify ? `, verified by ${verifyText(plan.verify)}` : '';
    const not = counted.not.length > 0 ? ` (not counted: ${counted.not.join('; ')})` : '';
    return short(
      `Not sent: under the policy the worker runs with it needs ${approvalsText(plan.count)}${methods} (${plan.rule}), and ${counted.users.length} of the approvals recorded qualify${not}.`,
    );
  }
  return expired(deps, project, request, sealed);
}

/**
 * A run found already sending (its worker stopped between two steps, or a Redis writer put it there): every seal on it
 * must hold, with at least one decision that lets it run, and within `approval_valid_hours`, as at its start. The
 * approvals are not planned again, nor the rules: a change half made is judged as it was approved, not against the VM
 * its own first steps changed. Undefined when it may go on.
 */
export function checkResumed(deps: DecisionCheckDeps, request: CloudRequest): DecisionRefusal | undefined {
  const sealed = checkSeals(deps.sealKeys, request);
  if ('code' in sealed) return sealed;
  const project = findProject(deps.policy, request.projectUuid);
  if (!project) return notInPolicy(request);
  return expired(deps, project, request, sealed);
}

function notInPolicy(request: CloudRequest): DecisionRefusal {
  return short(`Not sent: project ${request.projectName} is not in the policy the worker runs with.`);
}

function short(reason: string): DecisionRefusal {
  return { code: 'short', reason };
}

/**
 * A break glass on a request whose approvals the worker's policy asks to be verified runs only when it was verified
 * by a method the plan asks for (its seal, checked first, covers the method): a Slack click (sealed with the method
 * `slack`) proves nobody, whoever recorded it (an old bot, a hand-written Redis entry). The sentence why, or undefined.
 */
function unverifiedBreakGlass(request: CloudRequest, plan: ApprovalPlan): string | undefined {
  const { breakGlass } = request;
  if (!breakGlass || !plan.verify) return undefined;
  const method = breakGlass.verified?.method;
  if (method && plan.verify.includes(method)) return undefined;
  const how = method ? `verified by ${verifyText([method])} only` : 'not verified';
  return `Not sent: it was run during a freeze by a break glass (${String(breakGlass.by)}), ${how}, and under the policy the worker runs with its approvals and break glass must be verified by ${verifyText(plan.verify)} (${plan.rule}). Make a new request if it is still needed: it runs when the freeze ends.`;
}

/**
 * A break glass lets work through a freeze of the worker's policy only while that policy still names its breaker in
 * `break_glass`, as an approval counts only while it names the approver: someone an operator removed (a compromised
 * account, say) between the break glass and the run lets nothing through. Nothing to say once no freeze holds now.
 */
async function breakerNotAllowed(
  deps: DecisionCheckDeps,
  project: ProjectPolicy,
  request: CloudRequest,
): Promise<string | undefined> {
  const { breakGlass } = request;
  if (!breakGlass || !freezeAt(freezeOf(deps.policy, project), deps.now())) return undefined;
  if (!(await deps.approvals.may(request, breakGlass.by, 'break_glass'))) return undefined;
  return `Not sent: it was run during a freeze by a break glass (${String(breakGlass.by)}), whom the policy the worker runs with no longer lets run work during a freeze of ${request.projectName} (break_glass). Make a new request if it is still needed: it runs when the freeze ends.`;
}

/**
 * The approvals `request` needs under `policy`, planned as a new request is (create.ts): the kind from what it
 * changes on the VM as known now, its cost now, and an agent's own terms (its `verify` over its block's, not over a
 * rule's); a resize planned as a decrease that raises something also meets the increase's verification. A sentence
 * when it cannot be planned.
 */
function planUnder(
  policy: Policy,
  project: ProjectPolicy,
  request: CloudRequest,
  vm: VmKnown,
  monthlyDelta: string | undefined,
): ApprovalPlan | string {
  const approvals = approvalsOf(policy, project);
  let plan: ApprovalPlan;
  /** A decrease that raises something: the increase's plan, whose verification it meets too. */
  let increase: ApprovalPlan | undefined;
  const { params } = request;
  if (params.kind === 'resize') {
    // Planned on the sizes it was made and sealed with (the rules' re-check refused it if the VM moved since).
    const planFor = (kind: 'resize_up' | 'resize_down') =>
      planApproval(
        approvals,
        project.approval[kind],
        resizeFacts(params, kind, monthlyDelta),
        policy.currency,
      );
    const direction = classifyChange({ ...vm, ...params.before }, params.target).direction;
    const kind = resizeKindFor(direction, (k) => planFor(k).count);
    plan = planFor(kind);
    if (kind === 'resize_down' && (direction === 'mixed' || direction === 'unknown'))
      increase = planFor('resize_up');
  } else {
    plan = planApproval(approvals, project.approval.restore, restoreFacts(), policy.currency);
  }
  if (request.agent) {
    const agent = findAgent(policy.agents, request.agent.name);
    if (!agent) return `Not sent: agent ${request.agent.name} is not in the policy the worker runs with.`;
    if (!agent.unattended && plan.count === 0) plan = { ...plan, count: 1, rule: AGENT_NEEDS_PERSON };
    if (agent.verify && plan.count > 0 && plan.verifyFrom !== 'rule')
      plan = { ...plan, verify: agent.verify, verifyFrom: 'rule' };
  }
  return withIncreaseVerify(plan, increase);
}

/**
 * The times of the request's sealed decisions, each seal checked against the request as it is now: every approval
 * recorded, the go-ahead and the break glass where present. A sentence naming the first one whose seal is missing or
 * does not hold (a forged, moved or altered decision), or that claims a revision the request has not passed.
 */
function sealedTimes(keys: SealKeys, request: CloudRequest, facts: string): SealedTimes | string {
  const current = revisionOf(request);
  const invalid = (what: string) =>
    `Not sent: ${what} carries no valid seal; it was not recorded by the bot for this request as it is now.`;
  const approvals: string[] = [];
  for (const approval of request.approvals ?? []) {
    const revision = approval.revision;
    if (
      typeof revision !== 'number' ||
      revision >= current ||
      !realVerification(approval.verified) ||
      !decisionHolds(keys, facts, approvalDecision({ ...approval, revision }), approval.seal)
    )
      return invalid(`the approval recorded for ${String(approval.user)}`);
    approvals.push(approval.at);
  }
  const times: SealedTimes = { approvals };
  const { goAhead, breakGlass } = request;
  if (goAhead) {
    const decision = goAheadDecision(request, goAhead.at, goAhead.revision);
    if (goAhead.revision >= current || !decisionHolds(keys, facts, decision, goAhead.seal))
      return invalid('its "no approval needed"');
    times.goAhead = goAhead.at;
  }
  if (breakGlass) {
    const revision = breakGlass.revision;
    if (
      typeof revision !== 'number' ||
      revision >= current ||
      !realVerification(breakGlass.verified) ||
      !decisionHolds(
        keys,
        facts,
        // With the verification stored beside it: one added or changed in Redis breaks the seal.
        breakGlassDecision(breakGlass.by, breakGlass.at, revision, breakGlass.verified),
        breakGlass.seal,
      )
    )
      return invalid(`the break glass recorded for ${String(breakGlass.by)}`);
    times.breakGlass = breakGlass.at;
  }
  return times;
}

/**
 * Whether a stored verification is one the bot records: none, or a method it verifies by with its credential id or
 * subject. A click is sealed as the method `slack` with no subject, so a verification written beside a sealed click
 * naming `slack`, or no method at all, would rebuild to the click's sealed text and pass for verified on the message
 * and in the audit: it counts as altered.
 */
function realVerification(verified: unknown): boolean {
  if (verified === undefined) return true;
  const { method, subject } = (verified ?? {}) as { method?: unknown; subject?: unknown };
  return VERIFY_METHODS.includes(method as VerifyMethod) && typeof subject === 'string' && subject !== '';
}

/**
 * The approvers whose (sealed) approvals count under the worker's policy: distinct people other than the requester,
 * named as approvers by the policy, verified by a method the plan asks for where it asks. `not`: the others, why.
 */
async function qualifying(
  deps: DecisionCheckDeps,
  project: ProjectPolicy,
  request: CloudRequest,
  plan: ApprovalPlan,
): Promise<{ users: string[]; not: string[] }> {
  const users: string[] = [];
  const not: string[] = [];
  for (const approval of request.approvals ?? []) {
    const { user, verified } = approval;
    if (user === request.requester) not.push(`${user}, the requester`);
    else if (users.includes(user)) continue;
    else if (plan.verify && !(verified && plan.verify.includes(verified.method)))
      not.push(`${user}, not verified by ${verifyText(plan.verify)}`);
    else if (!(await deps.approvals.mayApprove(project, user))) not.push(`${user}, not an approver`);
    else users.push(user);
  }
  return { users, not };
}

/**
 * The decisions are older than `approval_valid_hours`, counted from the later of the last of them and the moment the
 * work became due: its scheduled time, or the end of the freeze (under the worker's policy) that held it then. Work a
 * (sealed) break glass let through was due at the break glass (or its scheduled time): the freeze held it no longer,
 * and its end extends nothing.
 */
function expired(
  deps: DecisionCheckDeps,
  project: ProjectPolicy,
  request: CloudRequest,
  sealed: SealedTimes,
): DecisionRefusal | undefined {
  const times = [...sealed.approvals, sealed.goAhead, sealed.breakGlass];
  const from = Math.max(
    ...times.map((t) => (t === undefined ? Number.NEGATIVE_INFINITY : Date.parse(t))),
    request.runAt ? Date.parse(request.runAt) : Number.NEGATIVE_INFINITY,
  );
  // Sealed times are the bot's own ISO strings; anything else (or none at all) is no time to count from.
  if (!Number.isFinite(from))
    return { code: 'seal_invalid', reason: 'Not sent: no sealed decision says when it was approved.' };
  const brokeFreeze = sealed.breakGlass !== undefined;
  if (deps.now().getTime() <= validityEnd(deps.policy, project, from, brokeFreeze)) return undefined;
  const hours = approvalValidHoursOf(deps.policy, project);
  return {
    code: 'seal_invalid',
    reason: `Not sent: its approval is older than the ${hours} hours an approval stays good for (approval_valid_hours). Make a new request if it is still needed.`,
  };
}

/**
 * When work decided at `from` (ms) may run no longer: `approval_valid_hours` (the project's, else the top level's)
 * after it, or after the end of the freeze that held it then. A break glass ran through the freeze, so its own time
 * counts. The run's wait for a ticket system (tickets.ts) ends here too.
 */
export function validityEnd(
  policy: Policy,
  project: ProjectPolicy,
  from: number,
  brokeFreeze: boolean,
): number {
  const freeze = brokeFreeze ? undefined : freezeAt(freezeOf(policy, project), new Date(from));
  const start = freeze ? Math.max(from, freeze.until.getTime()) : from;
  return start + approvalValidHoursOf(policy, project) * HOUR_MS;
}
