import type { SlackAnswer, SlackApi } from './client.ts';

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
