import type { Decision } from '../requests/model/decision.ts';
import type { Outcome } from './http.ts';
import type { LinkState } from './links.ts';

/*
 * What the page says, in plain words, for each way a verification ends. A refusal always says nothing counted (an
 * approval) or nothing ran (a break glass).
 */

const NOTHING = 'Nothing was counted.';
const NOTHING_RAN = 'Nothing was run.';

/** Why a link that is not open cannot be used. */
export function linkRefusal(status: Exclude<LinkState['status'], 'open'>): Outcome {
  switch (status) {
    case 'expired':
      return {
        title: 'This link has expired',
        text: `A link works for 10 minutes. ${NOTHING} Click Approve (or Run now) in Slack again for a new link.`,
        tone: 'refused',
        status: 410,
      };
    case 'used':
      return {
        title: 'This link was used already',
        text: `Each link works once. ${NOTHING} If your approval did not count, or your break glass did not run, click Approve (or Run now) in Slack again.`,
        tone: 'refused',
        status: 410,
      };
    case 'reset':
      return {
        title: 'This link was ended',
        text: `An administrator reset the passkeys of the person this link was sent to, which ends every registration page open at the time. ${NOTHING} Ask for a new link on the App Home (Register a passkey).`,
        tone: 'refused',
        status: 410,
      };
    default:
      return {
        title: 'Unknown link',
        text: `This link is not one cloudops issued, or it is too old to remember. ${NOTHING}`,
        tone: 'refused',
        status: 404,
      };
  }
}

/**
 * The person's Slack account was deactivated after the link was sent (or Slack knows them no more): their passkey or
 * login decides nothing. `ran`: a break glass's words.
 */
export function deactivated(breakGlass: boolean): Outcome {
  return {
    title: 'Your Slack account is deactivated',
    text: `Slack says this account is deactivated, so it can no longer approve or run work. ${breakGlass ? NOTHING_RAN : NOTHING}`,
    tone: 'refused',
    status: 403,
  };
}

/** Slack could not say whether the person is still active: nothing decided, and the link still works. */
export function slackUnsure(breakGlass: boolean): Outcome {
  return {
    title: 'Slack did not answer',
    text: `cloudops asks Slack about your account before it counts a decision, and Slack did not answer. ${breakGlass ? NOTHING_RAN : NOTHING} Try again in a moment: this link still works.`,
    tone: 'refused',
    status: 503,
  };
}

/** The request moved on since the link was issued (its state, what it does, or what it asks for). */
export const CHANGED: Outcome = {
  title: 'The request changed',
  text: `The request changed since this link was issued. ${NOTHING} Look at it in Slack again and click Approve there if you still approve it.`,
  tone: 'refused',
  status: 409,
};

/** A break glass's request moved on since its link was issued (it ran, was cancelled, or its freeze ended). */
export const BREAK_GLASS_CHANGED: Outcome = {
  title: 'The request changed',
  text: `The request changed since this link was issued (it ran, was cancelled, or its freeze ended). ${NOTHING_RAN} Look at it in Slack again.`,
  tone: 'refused',
  status: 409,
};

/** An SSO login started on a link whose rule does not accept one (it asks for a passkey). */
export const SSO_NOT_ACCEPTED: Outcome = {
  title: 'Not for this link',
  text: `The rule of this approval does not accept an SSO login; verify with your passkey on this page. ${NOTHING}`,
  tone: 'refused',
  status: 403,
};

/** The passkey used is not one registered to the approver of the link. */
export const FOREIGN_PASSKEY: Outcome = {
  title: 'Not your passkey',
  text: `This passkey is not registered to the person this link was sent to. ${NOTHING} Only the approver who clicked Approve can verify with their own passkey.`,
  tone: 'refused',
  status: 403,
};

/** The passkey's answer did not check out (wrong site, no user verification, a forged or replayed answer). */
export const PASSKEY_FAILED: Outcome = {
  title: 'The passkey did not verify',
  text: `The passkey’s answer did not check out (it must be for this site and verify you with a PIN or biometric). ${NOTHING}`,
  tone: 'refused',
  status: 403,
};

/** What the lifecycle answered to a verified approval. */
export function decisionOutcome(decision: Decision, requestId: string): Outcome {
  if (decision.ok) {
    const request = decision.request;
    const needed = request.requiredApprovals ?? 1;
    const counted = request.approvals?.length ?? 0;
    const text =
      request.state === 'pending'
        ? `Your verified approval of request ${requestId} counted (${counted} of ${needed}). It runs once the others approve.`
        : `Your verified approval of request ${requestId} counted (${counted} of ${needed}): it is approved and runs now.`;
    return { title: 'Approved', text, tone: 'ok' };
  }
  const refusal = decision.refusal;
  switch (refusal.code) {
    case 'verification_stale':
      return CHANGED;
    case 'already':
    case 'expired':
      return {
        title: 'No longer pending',
        text: `Request ${requestId} is ${refusal.request.state} now. ${NOTHING}`,
        tone: 'refused',
      };
    case 'gone':
      return {
        title: 'Request gone',
        text: `Request ${requestId} no longer exists. ${NOTHING}`,
        tone: 'refused',
      };
    case 'verification_mismatch':
      return {
        title: 'This verification does not fit',
        text: `The verification does not fit request ${requestId} as it is. ${NOTHING}`,
        tone: 'refused',
      };
    default:
      return {
        title: 'Not counted',
        text: `Your approval of request ${requestId} cannot count (${refusal.code.replaceAll('_', ' ')}). ${NOTHING}`,
        tone: 'refused',
      };
  }
}

/** What the lifecycle answered to a verified break glass. */
export function breakGlassOutcome(decision: Decision, requestId: string): Outcome {
  if (decision.ok)
    return {
      title: 'Running now',
      text: `Your verified break glass of request ${requestId} is recorded: it runs now, during the freeze.`,
      tone: 'ok',
    };
  const refusal = decision.refusal;
  switch (refusal.code) {
    case 'verification_stale':
    case 'already':
      return BREAK_GLASS_CHANGED;
    case 'gone':
      return {
        title: 'Request gone',
        text: `Request ${requestId} no longer exists. ${NOTHING_RAN}`,
        tone: 'refused',
      };
    case 'not_break_glass':
      return {
        title: 'Not allowed now',
        text: `The policy no longer lets you run work during this freeze (break_glass). ${NOTHING_RAN}`,
        tone: 'refused',
        status: 403,
      };
    case 'verification_mismatch':
      return {
        title: 'This verification does not fit',
        text: `The verification does not fit request ${requestId} as it is. ${NOTHING_RAN}`,
        tone: 'refused',
      };
    default:
      return {
        title: 'Not run',
        text: `Your break glass of request ${requestId} cannot run (${refusal.code.replaceAll('_', ' ')}). ${NOTHING_RAN}`,
        tone: 'refused',
      };
  }
}
