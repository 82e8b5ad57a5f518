/**
 * A self-contained audit entry of a request (docs/operations.md#audit-entries): everything an auditor needs to read
 * one entry alone — project, VM, the change, its cost, the rule, the approvers and how they proved who they are, the
 * requester, the policy version, the ticket and the outcome — taken from the request as it is written.
 */

import type { AuditApprover, AuditBody, AuditRequester } from '../model/audit-record.ts';
import type { CloudRequest } from '../model/types.ts';

/** What one write records: the act, who did it, a note. */
export interface AuditAct {
  act: string;
  actor: string;
  details?: string;
}

/** The resize fields in the order an auditor reads them, with the API's names. */
const FIELDS = [
  ['cores', 'cores'],
  ['ramGb', 'ram_gb'],
  ['osDiskGb', 'os_disk_gb'],
  ['cpuClass', 'cpu_class'],
  ['wanMode', 'wan_mode'],
  ['privateNetwork', 'private_network'],
] as const;

/**
 * Each field a request changes, before → after (a field the form sent at its current value is not a change); the
 * backup and autostart of a restore.
 */
export function changeOf(request: CloudRequest): NonNullable<AuditBody['change']> {
  const params = request.params;
  if (params.kind === 'restore') return { backup: params.backupSlug, autostart: params.autostart };
  const change: Record<string, { before: string | number | null; after: string | number | null }> = {};
  for (const [field, name] of FIELDS) {
    const after = params.target[field];
    const before = params.before[field];
    if (after === undefined || after === before) continue;
    change[name] = { before: before ?? null, after };
  }
  return change;
}

/** The approvals counted so far, each with its method. */
export function approversOf(request: CloudRequest): AuditApprover[] {
  return (request.approvals ?? []).map((approval) => {
    const verified = approval.verified;
    if (!verified) return { user: approval.user, method: 'slack', at: approval.at };
    return verified.method === 'passkey'
      ? { user: approval.user, method: 'passkey', credential: verified.subject, at: approval.at }
      : { user: approval.user, method: 'sso', subject: verified.subject, at: approval.at };
  });
}

/** Who asked: the agent and the person it acts for, or the person. */
export function requesterOf(request: CloudRequest): AuditRequester {
  return request.agent
    ? { agent: request.agent.name, on_behalf_of: request.requester }
    : { slack: request.requester };
}

/** The request's change ticket, when it has one: its system and key (OPS-42, CHG0012345). */
export function ticketOf(request: CloudRequest): string | null {
  return request.ticket ? `${request.ticket.system} ${request.ticket.key}` : null;
}

/** The API's latest answer: the task id of a success, the status and reason otherwise. */
export function outcomeOf(request: CloudRequest): AuditBody['outcome'] {
  const last = request.outcomes.at(-1);
  if (!last) return null;
  return {
    ...(last.taskId ? { task_id: last.taskId } : {}),
    ...(last.status !== undefined ? { status: last.status } : {}),
    ...(last.reason || last.message ? { answer: last.reason ?? last.message } : {}),
    ...(last.notSent ? { not_sent: true } : {}),
  };
}

/**
 * A break glass as the audit writes it: who, why, when and how they proved it; never its seal or revision (the
 * worker's, not the auditor's), nor anything else stored beside them.
 */
function breakGlassOf(
  breakGlass: NonNullable<CloudRequest['breakGlass']>,
): NonNullable<AuditBody['break_glass']> {
  const { by, reason, at, verified } = breakGlass;
  return {
    by,
    reason,
    at,
    ...(verified ? { verified: { method: verified.method, subject: verified.subject } } : {}),
  };
}

/** The entry of `act` on `request` at `time`, before it is chained. */
export function requestEntry(
  request: CloudRequest,
  act: AuditAct,
  time: string,
  policyVersion: string | null,
): Omit<AuditBody, 'prev'> {
  const cost = request.cost;
  return {
    request_id: request.id,
    act: act.act,
    actor: act.actor,
    time,
    details: act.details ?? null,
    policy_version: policyVersion,
    project: { name: request.projectName, id: request.projectUuid },
    vm: request.vmid,
    change: changeOf(request),
    monthly_cost_delta: cost?.diffMonthly ? { amount: cost.diffMonthly, currency: cost.currency } : null,
    rule: request.approvalRule ?? null,
    approvals_needed: request.needsApproval ? Math.max(1, request.requiredApprovals ?? 1) : 0,
    approvers: approversOf(request),
    requester: requesterOf(request),
    ticket: ticketOf(request),
    ...(request.breakGlass ? { break_glass: breakGlassOf(request.breakGlass) } : {}),
    outcome: outcomeOf(request),
  };
}

/** An entry of no request (a policy change, an agent disabled, a passkey reset). */
export function standaloneEntry(
  act: AuditAct & { requester?: AuditRequester },
  time: string,
  policyVersion: string | null,
): Omit<AuditBody, 'prev'> {
  return {
    request_id: null,
    act: act.act,
    actor: act.actor,
    time,
    details: act.details ?? null,
    policy_version: policyVersion,
    ...(act.requester ? { requester: act.requester } : {}),
  };
}
