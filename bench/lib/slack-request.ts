import { createHmac, randomBytes } from 'node:crypto';
import { type InputValue, viewState, viewSubmissionPayload } from '../../test/helpers/slack-request.ts';

/** A body ready to POST to `/slack/events`, with Slack's v0 signature headers. */
export interface SignedRequest {
  body: string;
  headers: Record<string, string>;
}

/** Signs `body` the way Slack does: `v0=` HMAC-SHA256 of `v0:<timestamp>:<body>` with the signing secret. */
export function sign(
  secret: string,
  body: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): SignedRequest {
  const timestamp = String(nowSeconds);
  const signature = `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
  return {
    body,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-slack-request-timestamp': timestamp,
      'x-slack-signature': signature,
    },
  };
}

/** Who sends what, and where; the same for every request of one load run. */
export interface SlackIdentity {
  teamId: string;
  channelId: string;
  userId: string;
  /** Where the bot may `respond`; the Slack stand-in hands these out. */
  responseUrl: string;
}

const triggerId = () => `${Date.now()}.${randomBytes(6).toString('hex')}`;

/** A signed `/cloud <text>` slash command, form-encoded like Slack's. */
export function slashCommand(secret: string, who: SlackIdentity, text: string): SignedRequest {
  return sign(secret, commandBody(who, text, triggerId()));
}

/** The form body of a `/cloud <text>` slash command carrying `trigger`, unsigned (signed when sent). */
export function commandBody(who: SlackIdentity, text: string, trigger: string): string {
  return new URLSearchParams({
    token: 'bench-verification-token',
    team_id: who.teamId,
    team_domain: 'bench',
    channel_id: who.channelId,
    channel_name: 'bench',
    user_id: who.userId,
    user_name: 'bench-user',
    command: '/cloud',
    text,
    api_app_id: 'A0BENCH',
    response_url: who.responseUrl,
    trigger_id: trigger,
  }).toString();
}

/** A fresh trigger_id, for a command whose modal the bench then looks up by it. */
export const newTriggerId = (): string => triggerId();

/** A signed block_actions click on a button (`actionId`, `value`) of a bot message in `who.channelId`. */
export function buttonClick(
  secret: string,
  who: SlackIdentity,
  actionId: string,
  value: string,
): SignedRequest {
  return sign(secret, clickBody(who, actionId, value));
}

/** The form body of a block_actions click on the message `messageTs` (a made-up one when absent), unsigned. */
export function clickBody(who: SlackIdentity, actionId: string, value: string, messageTs?: string): string {
  const ts = messageTs ?? `${Math.floor(Date.now() / 1000)}.000100`;
  const payload = {
    type: 'block_actions',
    team: { id: who.teamId, domain: 'bench' },
    user: { id: who.userId, username: 'bench-approver', team_id: who.teamId },
    api_app_id: 'A0BENCH',
    token: 'bench-verification-token',
    container: { type: 'message', message_ts: ts, channel_id: who.channelId, is_ephemeral: false },
    trigger_id: triggerId(),
    channel: { id: who.channelId, name: 'bench' },
    message: { type: 'message', ts, text: 'request', user: 'U0BOT' },
    response_url: who.responseUrl,
    actions: [
      {
        type: 'button',
        action_id: actionId,
        block_id: `request:${value}`,
        value,
        text: { type: 'plain_text', text: 'Approve' },
        action_ts: `${Date.now() / 1000}`,
      },
    ],
  };
  return new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
}

/**
 * The form body of a view_submission of `view` (as views.open set it, private_metadata included), unsigned: every
 * input keeps its initial value except those in `values` (by block_id), as test/helpers/slack-request.ts builds it.
 */
export function submissionBody(
  who: SlackIdentity,
  view: Record<string, unknown>,
  values: Record<string, InputValue>,
): string {
  const payload = viewSubmissionPayload(
    { user: who.userId, channel: who.channelId, teamId: who.teamId },
    view,
    viewState(view, values),
    triggerId(),
  );
  return new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
}
