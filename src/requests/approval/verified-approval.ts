import type { Decision } from '../model/decision.ts';
import type { BreakGlassClaims, VerifiedBy, VerifyClaims } from '../model/verification.ts';

/*
 * The contract of a verified approval (or break glass) between the lifecycle and the verify/ adapter (the link and
 * the page on PUBLIC_URL): the adapter issues links, the lifecycle counts what the page proved.
 */

/** Issues the approver's single-use, ten-minute link on PUBLIC_URL (implemented in src/verify/). */
export interface VerificationLinks {
  /** The absolute URL the approver opens; only they are shown it (ephemeral message or DM). */
  issue(claims: VerifyClaims): Promise<string>;
  /** The same for a break glass: the URL the break-glass user opens; the reason stays with the link, not in it. */
  issueBreakGlass(claims: BreakGlassClaims): Promise<string>;
}

/**
 * What the page calls once the approver proved who they are: the lifecycle's `approveVerified`. It re-reads the
 * request, checks the claims against it, and counts the approval in the same compare-and-set as a plain one; a
 * refusal says why nothing counted (`already`, `expired`, `gone`, `verification_stale`, `verification_mismatch`,
 * `already_approved`, `not_approver`, `own_request`).
 */
export interface VerifiedApprover {
  approveVerified(claims: VerifyClaims, by: VerifiedBy): Promise<Decision>;
  /**
   * The same for a break-glass link: the lifecycle's `breakGlassVerified` re-reads the request, checks the claims and
   * that the user may still break glass, and records the break glass with `by` in one write (`already`, `gone`,
   * `verification_stale`, `verification_mismatch`, `not_break_glass`, `agent_disabled`).
   */
  breakGlassVerified(claims: BreakGlassClaims, by: VerifiedBy): Promise<Decision>;
}
