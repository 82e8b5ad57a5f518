import type { SlackAnswer, SlackApi } from './client.ts';
import { SlackApiError, SlackPlatformError } from './errors.ts';

/** The fields of `users.info` the bot reads: the profile's email comes only with the users:read.email scope. */
interface UsersInfoAnswer extends SlackAnswer {
  user?: { id?: string; deleted?: boolean; profile?: { email?: unknown } };
}

/**
 * The person's email as Slack has it (`users.info`; scopes users:read and users:read.email), or undefined when Slack
 * gives none (a bot, a guest without one, or the scope missing). Slack's refusals reject as the client's errors
 * (`SlackPlatformError` with `user_not_found`, `missing_scope`…).
 */
export async function emailOf(slack: SlackApi, user: string): Promise<string | undefined> {
  const answer = await slack.call<UsersInfoAnswer>('users.info', { user });
  const email = answer.user?.profile?.email;
  if (answer.user?.deleted === true || typeof email !== 'string' || !email.includes('@')) return undefined;
  return email;
}

/**
 * Approvers' emails for the SSO login of verified approvals, which must equal the email the provider vouches for
 * (the `ApproverEmails` of src/verify/sso-flow.ts).
 */
export function slackEmails(slack: SlackApi): { emailOf(user: string): Promise<string | undefined> } {
  return { emailOf: (user) => emailOf(slack, user) };
}

/** Whether a person may still decide, as Slack says now; `unknown` with Slack's error code when it could not say. */
export type Standing = 'active' | 'deactivated' | { unknown: string };

/**
 * Slack's answers that mean the person is gone: no such user (any more). Not `account_inactive`: that is the bot's own
 * token deactivated, which says nothing of the person.
 */
const GONE = new Set(['user_not_found', 'user_disabled']);

/** How long the page waits for Slack before it says "try again": a person is looking at it. */
const STANDING_TIMEOUT_MS = 3_000;

/**
 * `user`'s standing in the workspace (`users.info`, scope users:read): `deactivated` when an admin deactivated them
 * (`deleted`) or Slack knows no such user, `unknown` when Slack did not answer (or the app lacks the scope).
 */
export async function standingOf(slack: SlackApi, user: string): Promise<Standing> {
  try {
    const answer = await slack.call<UsersInfoAnswer>(
      'users.info',
      { user },
      { timeoutMs: STANDING_TIMEOUT_MS },
    );
    if (!answer.user) return { unknown: 'no_user' };
    return answer.user.deleted === true ? 'deactivated' : 'active';
  } catch (error) {
    if (error instanceof SlackPlatformError && GONE.has(error.error)) return 'deactivated';
    if (error instanceof SlackApiError) return { unknown: error.code };
    throw error;
  }
}
