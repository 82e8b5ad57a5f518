import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { CloudRequest, RequestState } from '../requests/types.ts';
import { FINAL_STATES } from '../requests/types.ts';

/** A tool's answer: the text an agent reads, and the same as structured content. */
export function answer(text: string, structured: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text }], structuredContent: structured };
}

/** A refusal: a tool error carrying the one sentence a person would read in Slack. Nothing was done. */
export function refusal(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/** Each state in words, as the request message says it (without Slack's emoji). */
const STATE_WORDS: Record<RequestState, string> = {
  pending: 'waiting for approval',
  approved: 'approved',
  rejected: 'rejected',
  expired: 'expired without an approval',
  cancelled: 'cancelled',
  queued: 'queued to run',
  sending: 'running',
  succeeded: 'done',
  refused: 'refused by the API',
  unknown: 'outcome unknown (a person checks the portal)',
  resolved_done: 'marked done after checking',
  resolved_failed: 'marked failed after checking',
  frozen: 'approved, waiting for a freeze to end',
};

/** A request as an agent reads it: state, approvals, outcome, task id. */
export function requestView(request: CloudRequest): Record<string, unknown> {
  const needed = request.requiredApprovals ?? (request.needsApproval ? 1 : 0);
  const last = request.outcomes.at(-1);
  const taskId = request.outcomes.findLast((o) => o.taskId !== undefined)?.taskId;
  return {
    request_id: request.id,
    kind: request.kind,
    state: request.state,
    state_text: STATE_WORDS[request.state],
    final: FINAL_STATES.includes(request.state),
    project: request.projectName,
    vm_id: request.vmid,
    ...(request.vmName ? { vm_name: request.vmName } : {}),
    channel: request.channel,
    /** Whether the request message is in Slack yet (posting is retried while Slack fails). */
    posted: request.messageTs !== undefined,
    ...(request.agent ? { agent: request.agent.name } : {}),
    on_behalf_of: request.requester,
    approvals: {
      needed,
      given: (request.approvals ?? []).map((a) => a.user),
      ...(request.approvalRule ? { rule: request.approvalRule } : {}),
    },
    ...(request.rejectedBy ? { rejected_by: request.rejectedBy } : {}),
    ...(request.rejectReason ? { reject_reason: request.rejectReason } : {}),
    ...(request.cancelledBy ? { cancelled_by: request.cancelledBy } : {}),
    ...(request.frozenUntil && request.state === 'frozen'
      ? { frozen_until: request.frozenUntil, freeze_reason: request.freezeReason }
      : {}),
    ...(request.state === 'pending' ? { expires_at: request.expiresAt } : {}),
    ...(request.runAt ? { run_at: request.runAt } : {}),
    ...(last
      ? {
          outcome: {
            message: last.message ?? null,
            reason: last.reason ?? null,
            status: last.status ?? null,
          },
        }
      : {}),
    ...(taskId ? { task_id: taskId } : {}),
    ...(request.cost ? { cost: request.cost } : {}),
    created_at: request.createdAt,
    updated_at: request.updatedAt,
  };
}

/** One or two sentences saying where the request stands. */
export function requestText(request: CloudRequest): string {
  const what =
    request.params.kind === 'resize'
      ? `resize of ${request.projectName} VM ${request.vmid}`
      : `restore of ${request.projectName} VM ${request.vmid} from ${request.params.backupSlug}`;
  const parts = [`Request ${request.id} (${what}) is ${STATE_WORDS[request.state]}.`];
  const needed = request.requiredApprovals ?? (request.needsApproval ? 1 : 0);
  if (request.state === 'pending' && needed > 0) {
    const given = request.approvals?.length ?? 0;
    parts.push(
      `${given} of ${needed} approval${needed === 1 ? '' : 's'} in Slack${request.approvalRule ? ` (${request.approvalRule})` : ''}; it expires at ${request.expiresAt}.`,
    );
  }
  if (request.state === 'frozen' && request.frozenUntil)
    parts.push(
      `A freeze${request.freezeReason ? ` (${request.freezeReason})` : ''} holds it until ${request.frozenUntil}; then it runs.`,
    );
  if (request.rejectedBy)
    parts.push(
      `Rejected by ${request.rejectedBy}${request.rejectReason ? `: “${request.rejectReason}”` : ''}.`,
    );
  const last = request.outcomes.at(-1);
  if (last && FINAL_STATES.concat(['unknown']).includes(request.state)) {
    const said = last.reason ?? last.message;
    if (said) parts.push(`The API said: ${said}`);
  }
  const taskId = request.outcomes.findLast((o) => o.taskId !== undefined)?.taskId;
  if (taskId) parts.push(`Task id: ${taskId}.`);
  return parts.join(' ');
}
