import { verifyText } from '../../requests/approval/approval-rules.ts';
import type { Act } from '../../requests/approval/approvers.ts';
import type { Refusal } from '../../requests/model/decision.ts';
import type { CloudRequest } from '../../requests/model/types.ts';
import { stateLabel } from './describe.ts';
import { leaseClosedText } from './lease.ts';
import { mention, mentionAny } from './text.ts';

/** "Already approved by @x" and the like, for a click that came too late. */
export function alreadyText(request: CloudRequest): string {
  const by = request.approvedBy ?? request.rejectedBy ?? request.cancelledBy ?? request.resolvedBy;
  return `Nothing changed: request \`${request.id}\` is already “${stateLabel(request).replace(/^:[a-z_]+: /, '')}”${by ? ` (${mention(by)})` : ''}.`;
}

/** Why a click on `request` changed nothing, in one sentence for the person who clicked. */
export function refusalText(refusal: Refusal, act: Act, request: CloudRequest): string {
  switch (refusal.code) {
    case 'already':
      return alreadyText(refusal.request);
    case 'expired':
      return `Request \`${request.id}\` has expired; ask for a new one.`;
    case 'gone':
      return 'This request is gone.';
    case 'agent_disabled':
      if (refusal.removed)
        return `Request \`${request.id}\` was asked by agent ${refusal.agent}, which is no longer in the policy: it cannot be ${act === 'approve' ? 'approved' : 'run'} without the limits the policy gave it. Reject or cancel it instead.`;
      return `Request \`${request.id}\` was asked by agent ${refusal.agent}, which an admin has disabled (\`cloudops agents disable\`): it cannot be ${act === 'approve' ? 'approved' : 'run'} until the agent is enabled again. Reject or cancel it instead.`;
    case 'not_requester':
      return 'Only the requester can cancel this request.';
    case 'not_involved':
      return act === 'lease'
        ? `Only the requester or an approver of ${request.projectName} can return or keep this size.`
        : 'Only the requester or an approver can record the outcome.';
    case 'lease_closed':
      return leaseClosedText(refusal.request);
    case 'return_under_way':
      return `The return to the previous size is already under way (request \`${refusal.request.id}\`): the lease ends when it succeeds, or stays open if it fails.`;
    case 'own_request':
      return act === 'approve'
        ? 'You cannot approve your own request: another approver has to.'
        : `Only the approvers of ${request.projectName} can reject. To withdraw your own request, use Cancel.`;
    case 'not_approver':
      return act === 'approve'
        ? `Only the approvers of ${request.projectName} can approve: ${refusal.approvers.map(mentionAny).join(', ')}.`
        : `Only the approvers of ${request.projectName} can ${act}.`;
    case 'rechecked':
      return `Not approved: request \`${request.id}\` was checked again and refused. ${refusal.request.outcomes.at(-1)?.reason ?? ''}`.trimEnd();
    case 'already_approved':
      return 'Your approval is already counted: another approver has to add theirs.';
    case 'needs_verification':
      return `Request \`${request.id}\` needs a verified approval (${verifyText(refusal.claims.methods)}), and no verification link could be sent: nothing was counted. Try again in a moment.`;
    case 'verification_stale':
      return `Request \`${request.id}\` changed since the verification link was sent: nothing was counted. Click Approve again for a new link.`;
    case 'verification_mismatch':
      return 'This verification does not fit this request: nothing was counted.';
    case 'break_glass_needs_verification':
      return `Request \`${request.id}\` needs its break glass verified (${verifyText(refusal.claims.methods)}), and no verification link could be sent: nothing was run. Try again in a moment.`;
    case 'not_break_glass':
      return refusal.allowed.length > 0
        ? `Only ${refusal.allowed.map(mentionAny).join(', ')} may run work during a freeze of ${request.projectName}; it runs by itself when the freeze ends.`
        : `Nobody may run work during a freeze of ${request.projectName} (no break_glass in the policy); it runs by itself when the freeze ends.`;
  }
}
