import type { CloudRequest } from './types.ts';
import type { BreakGlassClaims, VerifyClaims } from './verification.ts';

/** Why a person may not: each surface words it for its own place (a button, the App Home, a step). */
export type NotAllowed =
  /** The requester clicked Approve or Reject on their own request. */
  | { code: 'own_request' }
  /** Only the request's approvers may do this; they are listed (users and groups). */
  | { code: 'not_approver'; approvers: string[] }
  /** Only the requester may (cancel a request still waiting for approval). */
  | { code: 'not_requester' }
  /** Only the requester or an approver may (record an unknown outcome, return or keep a lease's size). */
  | { code: 'not_involved' }
  /** This person's approval is already counted; another approver has to add theirs. */
  | { code: 'already_approved' }
  /** Only the project's break-glass users may run frozen work now; they are listed. */
  | { code: 'not_break_glass'; allowed: string[] };

/** Why nothing changed; each surface words it for its place. */
export type Refusal =
  | NotAllowed
  /** The request is no longer in a state this act applies to (someone else decided first). */
  | { code: 'already'; request: CloudRequest }
  /** It was pending past its expiry: it is expired now. */
  | { code: 'expired'; request: CloudRequest }
  /** It is not in the store any more. */
  | { code: 'gone' }
  /**
   * Asked by an agent an admin has disabled: nobody may approve or run it until the agent is enabled again. `removed`:
   * the agent is no longer in the policy, so neither are the limits it was asked under.
   */
  | { code: 'agent_disabled'; agent: string; removed?: true }
  /** The lease was kept or returned already. */
  | { code: 'lease_closed'; request: CloudRequest }
  /** The lease's return is already being sent (or has just run): Keep waits for its outcome. */
  | { code: 'return_under_way'; request: CloudRequest }
  /** Checked again at an approval, it no longer stood: it ended refused, nothing sent (its outcome says why). */
  | { code: 'rechecked'; request: CloudRequest }
  /** The approval must be verified first: the surface sends the approver alone a link with these claims. */
  | { code: 'needs_verification'; claims: VerifyClaims }
  /** A verification link used on a request that changed since it was issued: nothing counted. */
  | { code: 'verification_stale'; request: CloudRequest }
  /** A verification that does not fit the request (another request or workspace, a method it does not allow). */
  | { code: 'verification_mismatch' }
  /**
   * Break glass on a request whose approvals must be verified: nothing runs on the click; the surface sends the
   * break-glass user alone a link with these claims (docs/approvals.md#break-glass-under-a-verify-rule).
   */
  | { code: 'break_glass_needs_verification'; claims: BreakGlassClaims };

/** What a decision on a request (the lifecycle's or a lease's) answers: the request as it is now, or why not. */
export type Decision = { ok: true; request: CloudRequest } | { ok: false; refusal: Refusal };
