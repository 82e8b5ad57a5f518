import type { Decision, Refusal } from '../model/decision.ts';
import { type CloudRequest, revisionOf } from '../model/types.ts';
import type { BreakGlassClaims, VerifiedBy } from '../model/verification.ts';
import { refuse } from './steps.ts';
import type { Acts } from './types.ts';
import { claimsRefusal } from './verified-approve.ts';

/*
 * Break glass under a `verify:` rule (docs/approvals.md#break-glass-under-a-verify-rule): where the request's
 * approvals must be verified, so must the break glass that runs it during a freeze. The submitted reason runs nothing
 * and gets the claims of the user's link; the page, once the user proved who they are, records the break glass
 * through breakGlassVerified, in the same single write as a plain one (decide.ts breakGlass).
 */

/**
 * The refusal that sends the break-glass user a link, with `reason` (scrubbed and cleaned) in its claims, when a
 * break glass without `verified` cannot run this request; undefined when it may.
 */
export function breakGlassVerification(
  request: CloudRequest,
  user: string,
  reason: string,
  verified: VerifiedBy | undefined,
): Refusal | undefined {
  if (verified || !request.verify?.length) return undefined;
  const claims: BreakGlassClaims = {
    requestId: request.id,
    version: revisionOf(request),
    approver: user,
    teamId: request.teamId,
    methods: [...request.verify],
    reason,
  };
  return { code: 'break_glass_needs_verification', claims };
}

/**
 * What the verification page calls once the break-glass user proved who they are: re-reads the request, checks the
 * link's claims against it (still frozen, at the link's revision, a method it allows), then breaks glass as
 * `claims.approver` with `by`, which asks again whether the policy lets them (a reload may have removed them). A
 * frozen request's revision moves only when it leaves `frozen` (to queued or cancelled, never back), so the write's
 * "still frozen" keeps the link's revision too.
 */
export async function breakGlassVerified(
  acts: Acts,
  claims: BreakGlassClaims,
  by: VerifiedBy,
): Promise<Decision> {
  const request = await acts.deps.store.get(claims.requestId);
  if (!request) return refuse({ code: 'gone' });
  const refusal = claimsRefusal(claims, request, by, 'frozen');
  if (refusal) return refuse(refusal);
  return acts.own.breakGlass(request, claims.approver, claims.reason, by);
}
