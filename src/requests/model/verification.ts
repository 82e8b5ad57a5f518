import type { VerifyMethod } from '../../config/verification-policy.ts';

/**
 * Verified approvals: where the policy says `verify:`, a click on Approve counts nothing until the approver
 * proves who they are on the web page (a passkey, or a fresh login at the company's SSO). These types are the
 * what a verified approval is made of, underneath both the lifecycle (which decides when an approval needs
 * verification and counts it once it is verified) and the verify/ adapter (which issues the approver's link and
 * runs the page); their contract is approval/verified-approval.ts. The methods are named by the policy
 * (config/verification-policy.ts).
 */

/** Every method, in the order the page offers them. */
export const VERIFY_METHODS: readonly VerifyMethod[] = ['passkey', 'sso'];

/** How an approval was verified: shown on the request message and named in its audit entry. */
export interface VerifiedBy {
  method: VerifyMethod;
  /** The IdP's subject (`sub`) for SSO; the passkey's credential id (base64url) for a passkey. */
  subject: string;
}

/** What one verification link is bound to: one request, as it was when Approve was clicked, and one approver. */
export interface VerifyClaims {
  requestId: string;
  /**
   * The request's `revision` when the link was issued (see `CloudRequest.revision`): it moves when the request
   * changes its state, what it would do or the verification it asks for, never with another approver's approval, a
   * reminder or a message update. A request at another revision refuses the link.
   */
  version: number;
  /**
   * The Slack user id of the approver who clicked Approve (or the break-glass user who asked to run frozen work): only
   * they can complete the link.
   */
  approver: string;
  teamId: string;
  /** What the rule allows; either one satisfies it. */
  methods: VerifyMethod[];
}

/**
 * What a break-glass link is bound to, where the request's approvals must be verified: the claims of an approval
 * link, with `approver` the break-glass user and `version` the request's revision when their reason was submitted,
 * and the reason they typed (scrubbed and cleaned). The link store keeps it server-side; the URL carries none of it.
 */
export interface BreakGlassClaims extends VerifyClaims {
  reason: string;
}
