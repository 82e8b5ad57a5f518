// A request taken through the real Slack flow against a bot (in-process or a child): the slash command, the modal
// submitted, the request message posted, the approvers' clicks. What the reload and report tests drive.
import type { SlackStandIn } from '../../sim/slack/server.ts';
import {
  blockActionsPayload,
  interactionBody,
  postSigned,
  type SlackHttpResponse,
  slashCommandBody,
  viewState,
  viewSubmissionPayload,
} from './slack-request.ts';

/** Where the bot listens and who talks to it. */
export interface FlowBot {
  url: string;
  signingSecret: string;
  slack: SlackStandIn;
  team: string;
  channel: string;
}

/** A request message the bot posted. */
export interface Posted {
  requestId: string;
  ts: string;
  text?: string;
  blocks?: unknown[];
}

const send = (bot: FlowBot, body: string): Promise<SlackHttpResponse> =>
  postSigned(`${bot.url}/slack/events`, body, { secret: bot.signingSecret });

/** `/cloud <text>` by `user`, the modal submitted with `values`; resolves with the request message posted. */
export async function submitRequest(
  bot: FlowBot,
  user: string,
  text: string,
  values: Record<string, string | string[] | null> = { reason: 'capacity' },
): Promise<Posted> {
  const origin = { user, channel: bot.channel, teamId: bot.team };
  const opened = bot.slack.views.length;
  const posted = new Set(bot.slack.messages(bot.channel).map((m) => m.ts));
  const command = await send(
    bot,
    slashCommandBody(origin, {
      text,
      triggerId: bot.slack.triggerId(),
      responseUrl: bot.slack.responseUrl({ channel: bot.channel, user }),
    }),
  );
  if (command.status !== 200) throw new Error(`/cloud ${text}: HTTP ${command.status}`);
  const view = await bot.slack.waitFor(() =>
    bot.slack.views.slice(opened).find((v) => v.method === 'views.open'),
  );
  const submit = viewSubmissionPayload(
    origin,
    view.view,
    viewState(view.view, values),
    bot.slack.triggerId(),
  );
  const answer = await send(bot, interactionBody(submit));
  if (answer.json?.response_action !== 'clear')
    throw new Error(`submit refused: ${JSON.stringify(answer.json)}`);
  const message = await bot.slack.waitFor(
    () =>
      bot.slack
        .messages(bot.channel)
        .find(
          (m) => !posted.has(m.ts) && m.thread_ts === undefined && /\(request [^)]+\)/.test(m.text ?? ''),
        ),
    30_000,
  );
  const requestId = /\(request ([^)]+)\)/.exec(message.text ?? '')?.[1] as string;
  return { requestId, ts: message.ts, text: message.text, blocks: message.blocks as unknown[] | undefined };
}

/** `user` clicks a button (`approve`, `reject`, …) on the request message. */
export async function click(bot: FlowBot, user: string, posted: Posted, actionId: string): Promise<void> {
  const payload = blockActionsPayload(
    { user, channel: bot.channel, teamId: bot.team },
    {
      actionId,
      value: posted.requestId,
      blockId: `request:${posted.requestId}`,
      triggerId: bot.slack.triggerId(),
      responseUrl: bot.slack.responseUrl({ channel: bot.channel, user, messageTs: posted.ts }),
      message: { ts: posted.ts, text: posted.text, blocks: posted.blocks },
    },
  );
  const answer = await send(bot, interactionBody(payload));
  if (answer.status !== 200) throw new Error(`${actionId}: HTTP ${answer.status}`);
}

/** `user` rejects the request: the button, then the reject form with `reason`. */
export async function reject(bot: FlowBot, user: string, posted: Posted, reason: string): Promise<void> {
  const opened = bot.slack.views.length;
  await click(bot, user, posted, 'reject');
  const view = await bot.slack.waitFor(() =>
    bot.slack.views.slice(opened).find((v) => v.method === 'views.open'),
  );
  const origin = { user, channel: bot.channel, teamId: bot.team };
  const answer = await send(
    bot,
    interactionBody(
      viewSubmissionPayload(
        origin,
        view.view,
        viewState(view.view, { reject_reason: reason }),
        bot.slack.triggerId(),
      ),
    ),
  );
  if (answer.status !== 200) throw new Error(`reject form: HTTP ${answer.status}`);
}
