import { createHmac } from 'node:crypto';
import { request } from 'undici';

/** Slack's v0 request signature: `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{body}` with the signing secret. */
export function slackSignature(secret: string, timestamp: number, body: string): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
}

export interface SignOptions {
  secret: string;
  /** Seconds since the epoch put in `X-Slack-Request-Timestamp`; defaults to now (Slack's clock, not the bot's). */
  timestamp?: number;
  /** Replaces the computed signature, to test forged requests. */
  signature?: string;
  /** Leaves both signature headers out. */
  unsigned?: boolean;
}

export interface SlackHttpResponse {
  status: number;
  text: string;
  /** The body parsed as JSON, or undefined when it is empty or not JSON (Bolt answers a bare ack with no body). */
  json: Record<string, unknown> | undefined;
}

/** POSTs a form-encoded body to the bot exactly as Slack does: real HTTP, signed v0 headers. */
export async function postSigned(url: string, body: string, sign: SignOptions): Promise<SlackHttpResponse> {
  const timestamp = sign.timestamp ?? Math.floor(Date.now() / 1000);
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    'user-agent': 'Slackbot 1.0 (+https://api.slack.com/robots)',
  };
  if (!sign.unsigned) {
    headers['x-slack-request-timestamp'] = String(timestamp);
    headers['x-slack-signature'] = sign.signature ?? slackSignature(sign.secret, timestamp, body);
  }
  const response = await request(url, { method: 'POST', headers, body });
  const text = await response.body.text();
  let json: Record<string, unknown> | undefined;
  try {
    json = text.trim() === '' ? undefined : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    json = undefined;
  }
  return { status: response.statusCode, text, json };
}

/** Who and where, as every Slack payload says it. */
export interface SlackOrigin {
  user: string;
  channel: string;
  teamId: string;
}

/** A slash command body: `command=/cloud&text=…&trigger_id=…&response_url=…` and the rest Slack sends. */
export function slashCommandBody(
  origin: SlackOrigin,
  fields: { text: string; triggerId: string; responseUrl: string; command?: string },
): string {
  return new URLSearchParams({
    token: 'deprecated-verification-token',
    team_id: origin.teamId,
    team_domain: 'cloudops-test',
    channel_id: origin.channel,
    channel_name: origin.channel.toLowerCase(),
    user_id: origin.user,
    user_name: origin.user.toLowerCase(),
    command: fields.command ?? '/cloud',
    text: fields.text,
    api_app_id: 'A0CLOUDOPS',
    is_enterprise_install: 'false',
    response_url: fields.responseUrl,
    trigger_id: fields.triggerId,
  }).toString();
}

/** An interaction body: a single `payload` field holding the JSON, as Slack posts interactivity. */
export function interactionBody(payload: Record<string, unknown>): string {
  return new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
}

const user = (origin: SlackOrigin) => ({
  id: origin.user,
  username: origin.user.toLowerCase(),
  name: origin.user.toLowerCase(),
  team_id: origin.teamId,
});

/** A `block_actions` payload for a button click on a message (or on an ephemeral message without `message`). */
export function blockActionsPayload(
  origin: SlackOrigin,
  fields: {
    actionId: string;
    value: string;
    blockId?: string;
    triggerId: string;
    responseUrl: string;
    /** The message the button is on, as Slack echoes it back. */
    message?: { ts: string; text?: string; blocks?: unknown[]; thread_ts?: string };
  },
): Record<string, unknown> {
  const actionTs = (Date.now() / 1000).toFixed(6);
  return {
    type: 'block_actions',
    user: user(origin),
    api_app_id: 'A0CLOUDOPS',
    token: 'deprecated-verification-token',
    container: {
      type: 'message',
      message_ts: fields.message?.ts ?? actionTs,
      channel_id: origin.channel,
      is_ephemeral: fields.message === undefined,
    },
    trigger_id: fields.triggerId,
    team: { id: origin.teamId, domain: 'cloudops-test' },
    enterprise: null,
    is_enterprise_install: false,
    channel: { id: origin.channel, name: origin.channel.toLowerCase() },
    ...(fields.message
      ? { message: { type: 'message', subtype: 'bot_message', bot_id: 'B0CLOUDOPS', ...fields.message } }
      : {}),
    state: { values: {} },
    response_url: fields.responseUrl,
    actions: [
      {
        action_id: fields.actionId,
        block_id: fields.blockId ?? 'actions',
        text: { type: 'plain_text', text: fields.actionId, emoji: true },
        value: fields.value,
        type: 'button',
        action_ts: actionTs,
      },
    ],
  };
}

/** What a person typed or picked in one input: text, one option value, or several checkbox values. */
export type InputValue = string | string[] | null;

interface InputElement {
  type: string;
  action_id?: string;
  initial_value?: string;
  initial_option?: { value: string };
  initial_options?: { value: string }[];
  initial_date?: string;
  options?: { value: string; text: unknown }[];
}

interface InputBlock {
  type: string;
  block_id?: string;
  element?: InputElement;
}

/**
 * `view.state.values` as Slack builds it on submit: every input block keyed by block_id then action_id, with the
 * element's initial value unless `values` (by block_id) says what the person entered. A select or checkbox value
 * must be one of the element's options (Slack sends the whole option object); `null` clears an input.
 */
export function viewState(
  view: Record<string, unknown>,
  values: Record<string, InputValue>,
): Record<string, Record<string, unknown>> {
  const state: Record<string, Record<string, unknown>> = {};
  const blocks = (Array.isArray(view.blocks) ? view.blocks : []) as InputBlock[];
  const unknown = Object.keys(values).filter(
    (id) => !blocks.some((b) => b.type === 'input' && b.block_id === id),
  );
  if (unknown.length > 0) throw new Error(`the view has no input block ${unknown.join(', ')}`);
  for (const block of blocks) {
    if (block.type !== 'input' || !block.block_id || !block.element) continue;
    const element = block.element;
    const actionId = element.action_id ?? 'input';
    const given = Object.hasOwn(values, block.block_id) ? values[block.block_id] : undefined;
    const option = (value: string) => {
      const found = element.options?.find((o) => o.value === value);
      if (!found) throw new Error(`${block.block_id}: ${value} is not one of the options`);
      return found;
    };
    switch (element.type) {
      case 'static_select':
      case 'radio_buttons': {
        const chosen = given === undefined ? (element.initial_option?.value ?? null) : given;
        if (Array.isArray(chosen)) throw new Error(`${block.block_id}: one value expected`);
        state[block.block_id] = {
          [actionId]: { type: element.type, selected_option: chosen === null ? null : option(chosen) },
        };
        break;
      }
      case 'checkboxes': {
        const chosen = given === undefined ? (element.initial_options ?? []).map((o) => o.value) : given;
        const list = chosen === null ? [] : Array.isArray(chosen) ? chosen : [chosen];
        state[block.block_id] = { [actionId]: { type: 'checkboxes', selected_options: list.map(option) } };
        break;
      }
      case 'datepicker': {
        const chosen = given === undefined ? (element.initial_date ?? null) : given;
        if (Array.isArray(chosen)) throw new Error(`${block.block_id}: one date expected`);
        state[block.block_id] = { [actionId]: { type: 'datepicker', selected_date: chosen } };
        break;
      }
      default: {
        const chosen = given === undefined ? (element.initial_value ?? null) : given;
        if (Array.isArray(chosen)) throw new Error(`${block.block_id}: one value expected`);
        // Slack sends an empty text input as null.
        state[block.block_id] = { [actionId]: { type: element.type, value: chosen === '' ? null : chosen } };
      }
    }
  }
  return state;
}

/** A `view_submission` payload for `view` (as views.open returned it) with `state.values` filled in. */
export function viewSubmissionPayload(
  origin: SlackOrigin,
  view: Record<string, unknown>,
  stateValues: Record<string, Record<string, unknown>>,
  triggerId: string,
): Record<string, unknown> {
  return {
    type: 'view_submission',
    team: { id: origin.teamId, domain: 'cloudops-test' },
    user: user(origin),
    api_app_id: 'A0CLOUDOPS',
    token: 'deprecated-verification-token',
    trigger_id: triggerId,
    view: {
      external_id: '',
      clear_on_close: false,
      notify_on_close: false,
      previous_view_id: null,
      app_installed_team_id: origin.teamId,
      private_metadata: '',
      ...view,
      state: { values: stateValues },
    },
    response_urls: [],
    is_enterprise_install: false,
    enterprise: null,
  };
}
