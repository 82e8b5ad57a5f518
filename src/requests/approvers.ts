import { approversOf, type Policy, type ProjectPolicy } from '../config/policy.ts';
import type { CloudRequest } from './types.ts';

/** What a person may try to do to a request. */
export type Act = 'approve' | 'reject' | 'cancel' | 'resolve';

/** Why a person may not: each surface words it for its own place (a button, the App Home, a step). */
export type NotAllowed =
  /** The requester clicked Approve or Reject on their own request. */
  | { code: 'own_request' }
  /** Only the request's approvers may do this; they are listed. */
  | { code: 'not_approver'; approvers: string[] }
  /** Only the requester may (cancel a request still waiting for approval). */
  | { code: 'not_requester' }
  /** Only the requester or an approver may (record an unknown outcome). */
  | { code: 'not_involved' };

/**
 * The one place that answers "who may act on this request" and "what happens after an approval". Every surface
 * (buttons, modals, App Home, workflow steps) goes through it, never a copy of its rules.
 */
export interface ApprovalPolicy {
  /** The approvers a new request gets, frozen with it. */
  approversFor(project: ProjectPolicy): string[];
  /** Undefined when `user` may do `act` to `request` (its state is checked by the lifecycle, not here). */
  may(request: CloudRequest, user: string, act: Act): Promise<NotAllowed | undefined>;
  /** What an approval leads to: today one approval queues the request. */
  afterApproval(request: CloudRequest): { next: 'queue' };
}

/** A request queued for a later run that has not started: its approvers may cancel it too. */
export function isScheduledWaiting(request: CloudRequest): boolean {
  return request.state === 'queued' && request.runAt !== undefined;
}

/** The policy file's approvers: a project's own list, else the default list; one approval is enough. */
export function createApprovalPolicy(policy: Policy): ApprovalPolicy {
  return {
    approversFor: (project) => approversOf(policy, project),
    async may(request, user, act) {
      const approver = request.approvers.includes(user);
      const requester = user === request.requester;
      switch (act) {
        case 'approve':
          if (requester) return { code: 'own_request' };
          return approver ? undefined : { code: 'not_approver', approvers: request.approvers };
        case 'reject':
          if (requester) return { code: 'own_request' };
          return approver ? undefined : { code: 'not_approver', approvers: request.approvers };
        case 'cancel':
          return requester || (isScheduledWaiting(request) && approver)
            ? undefined
            : { code: 'not_requester' };
        case 'resolve':
          return requester || approver ? undefined : { code: 'not_involved' };
      }
    },
    afterApproval: () => ({ next: 'queue' }),
  };
}
