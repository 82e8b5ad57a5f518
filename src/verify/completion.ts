import type { CloudRequest, RequestState } from '../requests/model/types.ts';
import type { VerifiedBy } from '../requests/model/verification.ts';
import type { Standing } from '../slack-api/users.ts';
import { requestMoved, type VerifyPageDeps } from './deps.ts';
import type { Outcome } from './http.ts';
import type { LinkPurpose } from './links.ts';
import {
  BREAK_GLASS_CHANGED,
  breakGlassOutcome,
  CHANGED,
  deactivated,
  decisionOutcome,
  linkRefusal,
  slackUnsure,
} from './outcomes.ts';

/*
 * What a link at /verify/… is for once its person proved who they are: an approval that counts, or a break glass that
 * runs frozen work. The passkey and the SSO legs of the page share these.
 */

/** The purposes the page at /verify/… serves. */
export type VerifyPurpose = Extract<LinkPurpose, { kind: 'approve' | 'break_glass' }>;

/** Whether `purpose` is one the page at /verify/… serves (not a registration). */
export function isVerifyPurpose(purpose: LinkPurpose): purpose is VerifyPurpose {
  return purpose.kind === 'approve' || purpose.kind === 'break_glass';
}

/** The state the request must still be in for the link: pending for an approval, frozen for a break glass. */
function awaitedState(purpose: VerifyPurpose): RequestState {
  return purpose.kind === 'approve' ? 'pending' : 'frozen';
}

/** What the page says when `request` moved on since the link was issued (or is gone), else undefined. */
export function movedOutcome(purpose: VerifyPurpose, request: CloudRequest | undefined): Outcome | undefined {
  const moved = requestMoved(request, purpose.claims.version, awaitedState(purpose));
  if (!moved) return undefined;
  if (moved === 'gone') return linkRefusal('unknown');
  return purpose.kind === 'approve' ? CHANGED : BREAK_GLASS_CHANGED;
}

/**
 * Whether the link's person still stands in Slack, asked right before their decision counts (and before the link is
 * used up): someone deactivated since the link was sent decides nothing, whatever passkey or login they still hold;
 * when Slack cannot say, nothing counts and the link is kept for another try. Undefined when they may go on.
 */
export async function standingOutcome(
  deps: VerifyPageDeps,
  purpose: VerifyPurpose,
): Promise<Outcome | undefined> {
  return standingRefusal(deps, purpose, await deps.standing(purpose.claims.approver));
}

/** What the page says of the link's person's `standing` ({@link standingOutcome}); undefined when active. */
export function standingRefusal(
  deps: VerifyPageDeps,
  purpose: VerifyPurpose,
  standing: Standing,
): Outcome | undefined {
  if (standing.status === 'active') return undefined;
  const breakGlass = purpose.kind === 'break_glass';
  const { requestId } = purpose.claims;
  if (standing.status === 'deactivated') {
    deps.logger.warn({ requestId }, 'a deactivated Slack account used a link');
    return deactivated(breakGlass);
  }
  deps.logger.warn(
    { requestId, slackError: standing.error },
    'could not ask Slack whether the person of a link is active',
  );
  return slackUnsure(breakGlass);
}

/** Hands the lifecycle what was proved (the link used up already): counts the approval or runs the break glass. */
export async function completeVerified(
  deps: VerifyPageDeps,
  purpose: VerifyPurpose,
  by: VerifiedBy,
): Promise<Outcome> {
  const { requestId } = purpose.claims;
  if (purpose.kind === 'approve')
    return decisionOutcome(await deps.approver.approveVerified(purpose.claims, by), requestId);
  return breakGlassOutcome(await deps.approver.breakGlassVerified(purpose.claims, by), requestId);
}
