import type { SlackAnswer, SlackApi } from './client.ts';
import { SlackApiError, SlackPlatformError } from './errors.ts';

/** The fields of `users.info` the bot reads: the profile's email comes only with the users:read.email scope. */
interface UsersInfoAnswer extends SlackAnswer {
  user?: { id?: string; deleted?: boolean; profile?: { email?: unknown } };
}

/**
 * What Slack says of a person now: active (with their email where Slack gives one: the users:read.email scope, not a
 * bot, not a guest without one), deactivated, or unknown with Slack's error code when it could not say.
 */
export type Standing =
  | { status: 'active'; email?: string }
  | { status: 'deactivated' }
  | { status: 'unknown'; error: string };

/**
 * Slack's answers that mean the person is gone: no such user (any more). Not `account_inactive`: that is the bot's own
 * token deactivated, which says nothing of the person.
 */
const GONE = new Set(['user_not_found', 'user_disabled']);

/** How long the page waits for Slack before it says "try again": a person is looking at it. */
const STANDING_TIMEOUT_MS = 3_000;

/**
 * `user`'s standing in the workspace, from one `users.info` (scope users:read): `deactivated` when an admin
 * deactivated them (`deleted`) or Slack knows no such user, `unknown` when Slack did not answer (or the app lacks the
 * scope). The verification page asks it right before a decision counts, and the SSO leg compares its email with the
 * provider's.
 */
export async function standingOf(slack: SlackApi, user: string): Promise<Standing> {
  try {
    const answer = await slack.call<UsersInfoAnswer>(
      'users.info',
      { user },
      { timeoutMs: STANDING_TIMEOUT_MS },
    );
    if (!answer.user) return { status: 'unknown', error: 'no_user' };
    if (answer.user.deleted === true) return { status: 'deactivated' };
    const email = answer.user.profile?.email;
    return typeof email === 'string' && email.includes('@')
      ? { status: 'active', email }
      : { status: 'active' };
  } catch (error) {
    if (error instanceof SlackPlatformError && GONE.has(error.error)) return { status: 'deactivated' };
    if (error instanceof SlackApiError) return { status: 'unknown', error: error.code };
    throw error;
  }
}
