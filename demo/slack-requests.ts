/**
 * What Slack sends a bot, built and signed as Slack does it (v0 HMAC over `v0:{timestamp}:{body}`), for the demo.
 * The tests have their own copy in test/helpers/slack-request.ts: src never imports test code.
 */
import { createHmac } from 'node:crypto';
import type { SocketModeStandIn } from '../sim/slack/socket-mode.ts';

/** Who acts, and where. */
export interface Actor {
  user: string;
  channel: string;
  team: string;
}

/** The bot's answer to one request: the HTTP status and the body, parsed when it is JSON. */
export interface Ack {
  status: number;
  json: Record<string, unknown> | undefined;
}

/** `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{body}`. */
export function slackSignature(secret: string, timestamp: number, body: string): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
}

/** POSTs a form-encoded body to the bot with Slack's signature headers. */
export async function postSigned(url: string, secret: string, body: string): Promise<Ack> {
  const timestamp = Math.floor(Date.now() / 1000);
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-slack-request-timestamp': String(timestamp),
      'x-slack-signature': slackSignature(secret, timestamp, body),
    },
    body,
  });
  const text = await response.text();
  let json: Record<string, unknown> | undefined;
  try {
    json = text.trim() === '' ? undefined : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    json = undefined;
  }
  return { status: response.status, json };
}

/**
 * Delivers the same body over Socket Mode, as Slack does for an app with an app-level token: a slash command's
 * fields, or an interaction's `payload`, in an envelope on the socket; the ack's payload is the answer.
 */
export async function deliverOverSocket(socket: SocketModeStandIn, body: string): Promise<Ack> {
  const fields = new URLSearchParams(body);
  const payload = fields.get('payload');
  const ack = payload
    ? await socket.deliver('interactive', JSON.parse(payload) as Record<string, unknown>)
    : await socket.deliver('slash_commands', Object.fromEntries(fields));
  return { status: 200, json: ack.payload };
}

/** A `/cloud <text>` slash command body. */
export function slashCommand(actor: Actor, text: string, triggerId: string, responseUrl: string): string {
  return new URLSearchParams({
    team_id: actor.team,
    team_domain: 'demo',
    channel_id: actor.channel,
    user_id: actor.user,
    command: '/cloud',
    text,
    api_app_id: 'A0CLOUDOPS',
    response_url: responseUrl,
    trigger_id: triggerId,
  }).toString();
}

/** An interactivity body: one `payload` field with the JSON. */
export function interaction(payload: Record<string, unknown>): string {
  return new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
}

const userOf = (actor: Actor) => ({
  id: actor.user,
  username: actor.user.toLowerCase(),
  team_id: actor.team,
});

/** A click on a button of a message in the channel. */
export function buttonClick(
  actor: Actor,
  button: { actionId: string; value: string; blockId?: string },
  message: { ts: string; text?: string; blocks?: unknown[] },
  triggerId: string,
  responseUrl: string,
): Record<string, unknown> {
  return {
    type: 'block_actions',
    user: userOf(actor),
    api_app_id: 'A0CLOUDOPS',
    container: { type: 'message', message_ts: message.ts, channel_id: actor.channel, is_ephemeral: false },
    trigger_id: triggerId,
    team: { id: actor.team, domain: 'demo' },
    channel: { id: actor.channel, name: actor.channel.toLowerCase() },
    message: { type: 'message', bot_id: 'B0CLOUDOPS', ...message },
    response_url: responseUrl,
    actions: [
      {
        type: 'button',
        action_id: button.actionId,
        block_id: button.blockId ?? 'actions',
        value: button.value,
        action_ts: (Date.now() / 1000).toFixed(6),
      },
    ],
  };
}

interface InputBlock {
  type: string;
  block_id?: string;
  element?: {
    type: string;
    action_id?: string;
    initial_value?: string;
    initial_option?: { value: string };
    initial_options?: { value: string }[];
    options?: { value: string }[];
  };
}

/**
 * A modal submitted by `actor`: every input keeps what the modal showed unless `values` (by block_id) says what
 * the person typed or picked; checkbox values are lists.
 */
export function viewSubmission(
  actor: Actor,
  view: Record<string, unknown>,
  values: Record<string, string | string[]>,
  triggerId: string,
): Record<string, unknown> {
  const state: Record<string, Record<string, unknown>> = {};
  for (const block of (Array.isArray(view.blocks) ? view.blocks : []) as InputBlock[]) {
    if (block.type !== 'input' || !block.block_id || !block.element) continue;
    const element = block.element;
    const actionId = element.action_id ?? block.block_id;
    const given = values[block.block_id];
    const option = (value: string) => {
      const found = element.options?.find((o) => o.value === value);
      if (!found) throw new Error(`${block.block_id}: ${value} is not one of the modal's options`);
      return found;
    };
    if (element.type === 'static_select' || element.type === 'radio_buttons') {
      const chosen = typeof given === 'string' ? given : element.initial_option?.value;
      state[block.block_id] = {
        [actionId]: { type: element.type, selected_option: chosen === undefined ? null : option(chosen) },
      };
    } else if (element.type === 'checkboxes') {
      const chosen =
        given === undefined ? (element.initial_options ?? []).map((o) => o.value) : [given].flat();
      state[block.block_id] = { [actionId]: { type: 'checkboxes', selected_options: chosen.map(option) } };
    } else {
      const chosen = typeof given === 'string' ? given : (element.initial_value ?? null);
      state[block.block_id] = { [actionId]: { type: element.type, value: chosen === '' ? null : chosen } };
    }
  }
  return {
    type: 'view_submission',
    team: { id: actor.team, domain: 'demo' },
    user: userOf(actor),
    api_app_id: 'A0CLOUDOPS',
    trigger_id: triggerId,
    view: { private_metadata: '', ...view, state: { values: state } },
    response_urls: [],
  };
}
