import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Refusal } from '../requests/model/decision.ts';
import type { CloudRequest, RequestState } from '../requests/model/types.ts';
import { FINAL_STATES, refusedBeforeSending } from '../requests/model/types.ts';

/** A tool's answer: the text an agent reads, and the same as structured content. */
export function answer(text: string, structured: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text }], structuredContent: structured };
}

/** A refusal: a tool error carrying the one sentence a person would read in Slack. Nothing was done. */
export function refusal(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/** What every tool of a disabled agent answers (`cloudops agents disable`), a wait the moment it is disabled. */
export function disabledRefusal(agent: string): CallToolResult {
  return refusal(
    `Agent ${agent} is disabled: an admin stopped it (cloudops agents disable). Nothing was done.`,
  );
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

/** The state in words; a refusal by cloudops's own re-check is not the API's. */
function stateWords(request: CloudRequest): string {
  return refusedBeforeSending(request) ? 'refused by cloudops before sending' : STATE_WORDS[request.state];
}

/** A request as an agent reads it: state, approvals, outcome, task id. */
export function requestView(request: CloudRequest): Record<string, unknown> {
  const needed = request.requiredApprovals ?? (request.needsApproval ? 1 : 0);
  const last = request.outcomes.at(-1);
  const taskId = request.outcomes.findLast((o) => o.taskId !== undefined)?.taskId;
  return {
    request_id: request.id,
    kind: request.kind,
    state: request.state,
    state_text: stateWords(request),
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
      // Each approval is verified by a passkey or the company SSO before it counts (docs/policy.md#verified-approvals).
      ...(request.verify ? { verified_by: request.verify } : {}),
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
  const parts = [`Request ${request.id} (${what}) is ${stateWords(request)}.`];
  const needed = request.requiredApprovals ?? (request.needsApproval ? 1 : 0);
  if (request.state === 'pending' && needed > 0) {
    const given = request.approvals?.length ?? 0;
    parts.push(
      `${given} of ${needed} ${request.verify ? 'verified ' : ''}approval${needed === 1 ? '' : 's'} in Slack${request.approvalRule ? ` (${request.approvalRule})` : ''}; it expires at ${request.expiresAt}.`,
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

/**
 * Why cancel_request changed nothing, in plain text: an agent reads no Slack markup (mentions, code spans, emoji
 * names), so people are named by their ids.
 */
export function cancelRefusalText(refusal: Refusal, request: CloudRequest): string {
  switch (refusal.code) {
    case 'already': {
      const now = refusal.request;
      const by = now.approvedBy ?? now.rejectedBy ?? now.cancelledBy ?? now.resolvedBy;
      return `Nothing changed: request ${now.id} is already ${STATE_WORDS[now.state]}${by ? ` (by ${by})` : ''}.`;
    }
    case 'expired':
      return `Nothing changed: request ${request.id} has expired; ask for a new one.`;
    case 'gone':
      return `Nothing changed: request ${request.id} is gone.`;
    case 'agent_disabled':
      return `Nothing changed: agent ${refusal.agent} is ${refusal.removed ? 'no longer in the policy' : 'disabled'}.`;
    default:
      return `Nothing changed: request ${request.id} cannot be cancelled now (it is ${STATE_WORDS[request.state]}).`;
  }
}
