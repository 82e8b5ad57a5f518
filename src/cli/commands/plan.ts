import { CloudApiError } from '../../cloud/errors.ts';
import type { Cluster } from '../../cloud/types.ts';
import { approvalsOf, findProject, type Policy, type ProjectPolicy } from '../../config/policy.ts';
import { resizeBody } from '../../jobs/resize-body.ts';
import {
  type ApprovalPlan,
  approvalsText,
  planApproval,
  resizeFacts,
  verifyText,
  withIncreaseVerify,
} from '../../requests/approval/approval-rules.ts';
import type { CostPreview } from '../../requests/model/types.ts';
import { checkResizeUnder } from '../../requests/resize-check.ts';
import { knownVm } from '../../requests/vm-facts.ts';
import { approvalKind, classifyChange } from '../../rules/change-scope.ts';
import { costDifference, sizeAfter, vmCost } from '../../rules/cost.ts';
import {
  isViolation,
  parseCpuClass,
  parseOnOff,
  parseVmid,
  parseWanMode,
  parseWholeNumber,
  readTargetWords,
} from '../../rules/inputs.ts';
import { formatUtc, type ResizeCheck } from '../../rules/resize.ts';
import type { ResizeTarget, Violation, VmKnown } from '../../rules/types.ts';
import { policyOf, withCloud } from '../cloud.ts';
import { CliError, type CliIo, UsageError, write } from '../io.ts';
import { PLAN_USAGE } from '../usage.ts';

/** Exit code of a plan the rules refuse: distinct from errors (1) and usage mistakes (2). */
export const EXIT_REFUSED = 3;

export interface PlanOptions {
  stopped: boolean;
  twoStep: boolean;
  /** Check as of this time instead of now. */
  at?: string;
  json: boolean;
}

/** Reads key=value words into a target, with the same keys and limits as `/cloud resize`. */
export function parseTarget(words: string[], policy: Policy): ResizeTarget {
  const limits = policy.limits;
  const read = readTargetWords<Violation>(words, (field, raw) => {
    const parsed =
      field === 'cores'
        ? parseWholeNumber(raw, 'cores', limits.cores)
        : field === 'ramGb'
          ? parseWholeNumber(raw, 'ramGb', limits.ram_gb)
          : field === 'osDiskGb'
            ? parseWholeNumber(raw, 'osDiskGb', limits.os_disk_gb)
            : field === 'cpuClass'
              ? parseCpuClass(raw)
              : field === 'wanMode'
                ? parseWanMode(raw)
                : parseOnOff(raw);
    return isViolation(parsed) ? { error: parsed } : parsed;
  });
  if ('target' in read) return read.target;
  const { problem } = read;
  switch (problem.code) {
    case 'not_key_value':
      throw new UsageError(
        `unexpected "${problem.word}": options are written key=value. Usage: ${PLAN_USAGE}`,
      );
    case 'unknown_key':
      throw new UsageError(`unknown key "${problem.key}". Usage: ${PLAN_USAGE}`);
    case 'twice':
      throw new UsageError(`"${problem.key}" is given twice`);
    case 'bad_value':
      throw new UsageError(`${problem.key}: ${problem.error.message}`);
  }
}

/** The request message's cost preview, with the percentage and the prices the cluster does not list. */
interface CostPlan extends Omit<CostPreview, 'note'> {
  diffPercent?: string;
  missing: string[];
}

/** The cost preview from the list endpoint (no key); a reason instead when it cannot be shown. */
async function costPlan(
  io: CliIo,
  policy: Policy,
  project: ProjectPolicy,
  vm: VmKnown,
  target: ResizeTarget,
): Promise<CostPlan | string> {
  const cluster = project.cluster;
  if (!cluster) return `project ${project.name} names no cluster in the policy`;
  const after = sizeAfter(vm, target);
  if (!after) return 'the VM’s current cores, RAM or disk are not in the policy file';
  if (!io.env.CLOUD_API_URL) return 'CLOUD_API_URL is not set';
  let clusters: Cluster[];
  try {
    clusters = await withCloud(io, false, (client) => client.listClusters());
  } catch (error) {
    // The plan stands without a price: say why in the plan rather than failing it.
    if (error instanceof CloudApiError) return `the prices could not be read (${error.reason})`;
    throw error;
  }
  const prices = clusters.find((c) => c.name === cluster)?.prices;
  if (!prices) return `cluster ${cluster} is not in the active cluster list`;
  const cost = vmCost(prices, after);
  const plan: CostPlan = {
    cluster,
    currency: policy.currency,
    hourly: cost.hourly.toFixed(4),
    monthly: cost.monthly.toFixed(2),
    missing: cost.missing,
  };
  const before = sizeAfter(vm, {});
  if (before) {
    const diff = costDifference(prices, before, after);
    plan.diffHourly = diff.hourly.toFixed(4);
    plan.diffMonthly = diff.monthly.toFixed(2);
    plan.diffPercent = diff.percent;
    plan.missing = diff.missing;
  }
  return plan;
}

const signed = (text: string) => (text.startsWith('-') ? text : `+${text}`);

function knownLine(vm: VmKnown): string {
  const parts = [
    vm.cores !== undefined ? `${vm.cores} cores` : 'cores ?',
    vm.ramGb !== undefined ? `${vm.ramGb} GB RAM` : 'RAM ?',
    vm.osDiskGb !== undefined ? `${vm.osDiskGb} GB disk` : 'disk ?',
    vm.cpuClass ? `${vm.cpuClass} CPU` : 'CPU class ?',
    vm.wanMode ? `WAN ${vm.wanMode}` : 'WAN ?',
    vm.privateNetwork ? `private network ${vm.privateNetwork}` : undefined,
    vm.ha ? 'HA' : undefined,
    vm.createdAt ? `created ${formatUtc(vm.createdAt)}` : undefined,
  ];
  return parts.filter((p): p is string => p !== undefined).join(', ');
}

/** The approvals a request for this resize would need (by the project's rules), and whether they are verified. */
function approvalPlan(
  policy: Policy,
  project: ProjectPolicy,
  vm: VmKnown,
  target: ResizeTarget,
  check: ResizeCheck,
  cost: CostPlan | string,
): ApprovalPlan {
  const kind = check.decreases.length > 0 ? 'resize_down' : 'resize_up';
  const { createdAt: _c, lastIncreaseAt: _l, ...before } = vm;
  const planOf = (k: 'resize_up' | 'resize_down') =>
    planApproval(
      approvalsOf(policy, project),
      project.approval[k],
      resizeFacts(
        { kind: 'resize', target, steps: check.steps, before, confirmedStopped: false },
        k,
        typeof cost === 'string' ? undefined : cost.diffMonthly,
      ),
      policy.currency,
    );
  // As the bot plans it: a decrease that also raises something meets the increase's verification too.
  const direction = classifyChange(vm, target).direction;
  const raises = direction === 'mixed' || direction === 'unknown';
  return withIncreaseVerify(planOf(kind), kind === 'resize_down' && raises ? planOf('resize_up') : undefined);
}

/** "Approval: 2 approvals (rule 1 (…)), each verified by passkey or SSO." */
function approvalLine(plan: ApprovalPlan): string {
  const verified = plan.verify ? `, each verified by ${verifyText(plan.verify)}` : '';
  return `Approval: ${approvalsText(plan.count)} (${plan.rule})${verified}.`;
}

function human(
  label: string,
  vm: VmKnown,
  check: ResizeCheck,
  bodies: Record<string, string | number>[],
  cost: CostPlan | string,
  approval: ApprovalPlan,
): string {
  const lines = [`Plan: resize ${label}`, `Known (policy file): ${knownLine(vm)}`];
  if (check.violations.length > 0) {
    lines.push('Refused by the rules:', ...check.violations.map((v) => `  - ${v.message}`));
    if (check.violations.some((v) => v.code === 'needs_stopped' || v.code === 'wan_direct')) {
      lines.push(
        '  (Here --stopped confirms the VM is stopped and --two-step accepts the WAN switch through off.)',
      );
    }
    if (check.cooldownOnly && check.earliestAllowedAt) {
      lines.push(`Only the 24-hour rule refuses it: allowed from ${formatUtc(check.earliestAllowedAt)}.`);
    }
  } else {
    lines.push('Allowed by the rules. The API would receive, in order:');
    lines.push(...bodies.map((body, i) => `  ${i + 1}. POST …/upgrade/ ${JSON.stringify(body)}`));
  }
  if (check.notes.length > 0) lines.push('Rules that apply:', ...check.notes.map((n) => `  - ${n}`));
  if (typeof cost === 'string') lines.push(`Cost not shown: ${cost}.`);
  else {
    let text = `Cost after the change in ${cost.cluster}: ${cost.currency} ${cost.hourly}/h, ${cost.currency} ${cost.monthly}/month`;
    if (cost.diffHourly !== undefined && cost.diffMonthly !== undefined) {
      text += ` (${signed(cost.diffHourly)}/h, ${signed(cost.diffMonthly)}/month${cost.diffPercent !== undefined ? `, ${signed(cost.diffPercent)}%` : ''})`;
    }
    lines.push(text);
    if (cost.missing.length > 0) lines.push(`Prices missing, counted as 0: ${cost.missing.join(', ')}.`);
  }
  if (check.violations.length === 0) lines.push(approvalLine(approval));
  return `${lines.join('\n')}\n`;
}

/** `cloudops plan resize …`: the rules and a cost preview for a resize, without any mutating call. */
export async function planResizeCommand(io: CliIo, args: string[], options: PlanOptions): Promise<number> {
  const [projectName, vmidText, ...words] = args;
  if (projectName === undefined || vmidText === undefined) throw new UsageError(`usage: ${PLAN_USAGE}`);
  const policy = await policyOf(io);
  const project = findProject(policy, projectName);
  if (!project) {
    const names = policy.projects.map((p) => p.name).join(', ') || 'none';
    throw new CliError(`unknown project "${projectName}" (projects in ${io.env.POLICY_FILE}: ${names})`);
  }
  const vmid = parseVmid(vmidText);
  if (isViolation(vmid)) throw new UsageError(vmid.message);
  const target = parseTarget(words, policy);
  let now = io.now();
  if (options.at !== undefined) {
    now = new Date(options.at);
    if (Number.isNaN(now.getTime()))
      throw new UsageError(`--at: expected an ISO date-time, got "${options.at}"`);
  }
  const vm = knownVm(
    project.vms.find((v) => v.vmid === vmid),
    undefined,
    vmid,
  );
  const check = checkResizeUnder(policy, {
    vm,
    target,
    confirmedStopped: options.stopped,
    acceptWanTwoStep: options.twoStep,
    now,
  });
  const scope = classifyChange(vm, target);
  const allowed = check.violations.length === 0;
  const bodies = allowed ? check.steps.map((step) => resizeBody(step, policy.resize_fields)) : [];
  const cost = await costPlan(io, policy, project, vm, target);
  const label = `${project.name} / VM ${vmid}${vm.name ? ` (${vm.name})` : ''}`;
  const approval = approvalPlan(policy, project, vm, target, check, cost);
  if (options.json) {
    const out = {
      project: project.name,
      projectUuid: project.uuid,
      vmid,
      known: vm,
      target,
      allowed,
      violations: check.violations,
      notes: check.notes,
      steps: allowed ? check.steps : [],
      bodies,
      decreases: check.decreases,
      increases: check.increases,
      unknown: check.unknown,
      needsStoppedConfirmation: check.needsStoppedConfirmation,
      // The same classification as an agent's scope and the approval kind: raise, lower, both or unknown per field.
      changes: scope.fields,
      approvalKind: approvalKind(scope),
      cooldownOnly: check.cooldownOnly,
      earliestAllowedAt: check.earliestAllowedAt?.toISOString() ?? null,
      cost: typeof cost === 'string' ? null : cost,
      costNote: typeof cost === 'string' ? cost : null,
      approval: allowed
        ? { count: approval.count, rule: approval.rule, verify: approval.verify ?? null }
        : null,
    };
    await write(io.stdout, `${JSON.stringify(out)}\n`);
  } else {
    await write(io.stdout, human(label, vm, check, bodies, cost, approval));
  }
  return allowed ? 0 : EXIT_REFUSED;
}
