import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import type { FunctionExecution } from '../../sim/slack/server.ts';
import type { Harness } from './harness.ts';
import { type SlackHttpResponse, slackSignature } from './slack-request.ts';
import { WAIT_MS } from './startup.ts';

/** POSTs a JSON body to the bot as Slack's Events API does: real HTTP, signed v0 headers. */
export async function postSignedJson(
  url: string,
  body: Record<string, unknown>,
  secret: string,
): Promise<SlackHttpResponse> {
  const text = JSON.stringify(body);
  const timestamp = Math.floor(Date.now() / 1000);
  const response = await request(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-slack-request-timestamp': String(timestamp),
      'x-slack-signature': slackSignature(secret, timestamp, text),
    },
    body: text,
  });
  const answer = await response.body.text();
  let json: Record<string, unknown> | undefined;
  try {
    json = answer.trim() === '' ? undefined : (JSON.parse(answer) as Record<string, unknown>);
  } catch {
    json = undefined;
  }
  return { status: response.statusCode, text: answer, json };
}

/** An Events API envelope (`event_callback`) around `event`, from the test workspace. */
export function eventCallback(team: string, event: Record<string, unknown>): Record<string, unknown> {
  const now = Date.now() / 1000;
  return {
    token: 'deprecated-verification-token',
    team_id: team,
    api_app_id: 'A0CLOUDOPS',
    event: { event_ts: now.toFixed(6), ...event },
    type: 'event_callback',
    event_id: `Ev${randomBytes(6).toString('hex').toUpperCase()}`,
    event_time: Math.floor(now),
    authorizations: [
      {
        team_id: team,
        user_id: 'U0CLOUDOPS',
        is_bot: true,
        is_enterprise_install: false,
        enterprise_id: null,
      },
    ],
    is_ext_shared_channel: false,
  };
}

/** An Events API body as Slack delivers it in the harness's mode: signed HTTP, or an `events_api` envelope. */
export async function deliverEvent(
  h: Pick<Harness, 'mode' | 'slack' | 'eventsUrl' | 'signingSecret'>,
  body: Record<string, unknown>,
): Promise<SlackHttpResponse> {
  if (h.mode === 'http') return postSignedJson(h.eventsUrl, body, h.signingSecret);
  await h.slack.socket.deliver('events_api', body);
  return { status: 200, text: '', json: undefined };
}

/** `user` opens the bot's Home tab: Slack sends `app_home_opened`. */
export function openHome(h: Harness, user: string): Promise<SlackHttpResponse> {
  return deliverEvent(
    h,
    eventCallback(h.slack.teamId, {
      type: 'app_home_opened',
      user,
      channel: `D${user.slice(1)}`,
      tab: 'home',
    }),
  );
}

/**
 * The Home tab `user` sees now, waiting for one published after `after` publishes (of anybody) were seen, and that
 * `holds` when given. A refresh rendered before the latest change can be published after `after` too (it is followed
 * by one with the change): a test that expects the change says so in `holds`, rather than reading whichever came first.
 */
export async function homeAfter(
  h: Harness,
  user: string,
  after: number,
  timeoutMs = WAIT_MS,
  holds: (blocks: Record<string, unknown>[]) => boolean = () => true,
): Promise<{ blocks: Record<string, unknown>[]; text: string }> {
  const view = await h.slack.waitFor(
    () =>
      h.slack.homes
        .slice(after)
        .filter((p) => p.user === user && holds(p.view.blocks as Record<string, unknown>[]))
        .at(-1)?.view,
    timeoutMs,
  );
  const blocks = view.blocks as Record<string, unknown>[];
  return { blocks, text: JSON.stringify(blocks) };
}

/** The buttons on a published home: action id and value (the request id), in order. */
export function homeButtons(blocks: Record<string, unknown>[]): { action: string; value: string }[] {
  const buttons: { action: string; value: string }[] = [];
  for (const block of blocks) {
    const elements = [
      ...((block.elements as Record<string, unknown>[] | undefined) ?? []),
      ...(block.accessory ? [block.accessory as Record<string, unknown>] : []),
    ];
    for (const element of elements) {
      if (element.type === 'button')
        buttons.push({ action: String(element.action_id), value: String(element.value) });
    }
  }
  return buttons;
}

/** A click on a button of `user`'s App Home, as Slack sends it: no channel, the home view in the payload. */
export function clickOnHome(
  h: Harness,
  actionId: string,
  value: string,
  user: string,
): Promise<SlackHttpResponse> {
  const home = h.slack.homeOf(user) ?? { type: 'home', blocks: [] };
  const actionTs = (Date.now() / 1000).toFixed(6);
  const payload = {
    type: 'block_actions',
    user: { id: user, username: user.toLowerCase(), name: user.toLowerCase(), team_id: h.slack.teamId },
    api_app_id: 'A0CLOUDOPS',
    token: 'deprecated-verification-token',
    container: { type: 'view', view_id: 'V0HOME' },
    trigger_id: h.slack.triggerId(),
    team: { id: h.slack.teamId, domain: 'cloudops-test' },
    enterprise: null,
    is_enterprise_install: false,
    view: { id: 'V0HOME', team_id: h.slack.teamId, state: { values: {} }, hash: '1.V0HOME', ...home },
    actions: [
      {
        action_id: actionId,
        block_id: `home:${value}`,
        text: { type: 'plain_text', text: actionId, emoji: true },
        value,
        type: 'button',
        action_ts: actionTs,
      },
    ],
  };
  return h.interaction(payload);
}

/**
 * The `slack#/types/user_context` Slack fills in for a step from the person who ran the workflow (a builder cannot
 * set it by hand): their user id and a secret Slack makes for this run.
 */
export function workflowUser(id: string): { id: string; secret: string } {
  return { id, secret: randomBytes(24).toString('base64url') };
}

/** The `function_executed` event Slack sends for a step run the stand-in started. */
export function functionExecuted(team: string, run: FunctionExecution): Record<string, unknown> {
  return eventCallback(team, {
    type: 'function_executed',
    function: {
      id: `Fn0${run.callbackId.length}`,
      callback_id: run.callbackId,
      title: run.callbackId,
      type: 'app',
      input_parameters: [],
      output_parameters: [],
      app_id: 'A0CLOUDOPS',
      date_created: 1_700_000_000,
      date_updated: 1_700_000_000,
      date_deleted: 0,
    },
    inputs: run.inputs,
    function_execution_id: run.id,
    workflow_execution_id: `Wx${run.id}`,
    bot_access_token: run.token,
  });
}

/**
 * A workflow runs one of the bot's steps: the stand-in starts the run (its execution id and token) and Slack sends
 * `function_executed` with the inputs. Returns the run, whose state the stand-in updates when the bot completes it.
 */
export async function runStep(
  h: Pick<Harness, 'mode' | 'slack' | 'eventsUrl' | 'signingSecret'>,
  callbackId: string,
  inputs: Record<string, unknown>,
): Promise<FunctionExecution> {
  const run = h.slack.startFunction(callbackId, inputs);
  const response = await deliverEvent(h, functionExecuted(h.slack.teamId, run));
  if (response.status !== 200) throw new Error(`function_executed: HTTP ${response.status}`);
  return run;
}
