import type { Decision, Refusal } from '../model/decision.ts';
import { type CloudRequest, type RequestState, revisionOf } from '../model/types.ts';
import type { VerifiedBy, VerifyClaims } from '../model/verification.ts';
import { refuse } from './steps.ts';
import type { Acts } from './types.ts';

/*
 * The verify step of an approval (docs/policy.md#verified-approvals): a click on a request whose approvals must be
 * verified counts nothing and gets the claims of the approver's link; the page, once the approver proved who they
 * are, counts the approval through approveVerified, in the same compare-and-set as a plain one (decide.ts approve).
 */

/** The claims of `user`'s link when their click cannot count as it is; undefined when a click counts. */
export function verificationFor(request: CloudRequest, user: string): VerifyClaims | undefined {
  if (!request.verify) return undefined;
  return {
    requestId: request.id,
    version: revisionOf(request),
    approver: user,
    teamId: request.teamId,
    methods: [...request.verify],
  };
}

/** The refusal that sends the approver a link, when an approval without `verified` cannot count. */
export function verificationNeeded(
  request: CloudRequest,
  user: string,
  verified: VerifiedBy | undefined,
): Refusal | undefined {
  const claims = verified ? undefined : verificationFor(request, user);
  return claims ? { code: 'needs_verification', claims } : undefined;
}

/**
 * Why the compare-and-set counted nothing, in the lifecycle's words: the request changed since the link
 * (`changed`), or it needs a verification this approval lacks (`unverified`: a new link, for the request as it is).
 */
export function uncounted(reason: 'unverified' | 'changed', request: CloudRequest, user: string): Refusal {
  if (reason === 'changed') return { code: 'verification_stale', request };
  const claims = verificationFor(request, user);
  return claims ? { code: 'needs_verification', claims } : { code: 'verification_mismatch' };
}

/** An IdP subject or a credential id as the audit and the message may carry it: printable, bounded. */
const SUBJECT = /^[\x21-\x7e]{1,255}$/;

/**
 * Why a verification with these claims cannot count on the request as stored, or undefined when it may: a link for
 * another workspace or request, a method the request does not allow, a request no longer in `state` (pending for
 * an approval, frozen for a break glass), or one that changed since the link was issued (its state or what it would
 * do; other approvers' approvals do not change it).
 */
export function claimsRefusal(
  claims: VerifyClaims,
  request: CloudRequest,
  by: VerifiedBy,
  state: RequestState = 'pending',
): Refusal | undefined {
  if (claims.requestId !== request.id || claims.teamId !== request.teamId)
    return { code: 'verification_mismatch' };
  if (!SUBJECT.test(by.subject)) return { code: 'verification_mismatch' };
  if (!claims.methods.includes(by.method) || !request.verify?.includes(by.method))
    return { code: 'verification_mismatch' };
  if (request.state !== state) return { code: 'already', request };
  if (claims.version !== revisionOf(request)) return { code: 'verification_stale', request };
  return undefined;
}

/**
 * What the verification page calls once the approver proved who they are: re-reads the request, checks the link's
 * claims against it, then approves as `claims.approver` with `by`. The approval counts only if the request is still
 * at the link's revision when it is written, in the same compare-and-set as a plain approval (so the count,
 * freezes, expiry and concurrent clicks behave alike).
 */
export async function approveVerified(acts: Acts, claims: VerifyClaims, by: VerifiedBy): Promise<Decision> {
  const request = await acts.deps.store.get(claims.requestId);
  if (!request) return refuse({ code: 'gone' });
  const refusal = claimsRefusal(claims, request, by);
  if (refusal) return refuse(refusal);
  return acts.own.approve(request, claims.approver, by, claims.version);
}
