import type { AllMiddlewareArgs, BlockAction, ButtonAction, SlackActionMiddlewareArgs } from '@slack/bolt';
import type { CloudRequest } from '../../requests/types.ts';
import { afterWaitingAcks, type SlackDeps, TRY_AGAIN, withDeadline } from '../deps.ts';
import type { SlackRouter } from '../router.ts';

export type ButtonArgs = SlackActionMiddlewareArgs<BlockAction<ButtonAction>> & AllMiddlewareArgs;

/** Who clicked, where, and on which request (the button's value is only an id; all else comes from the store). */
export interface Click {
  user: string;
  channel?: string;
  requestId: string;
}

export function clickOf(args: ButtonArgs): Click {
  return { user: args.body.user.id, channel: args.body.channel?.id, requestId: args.action.value ?? '' };
}

/** Request ids as the store makes them; anything else is not looked up. */
export const REQUEST_ID = /^[0-9A-Z]{4,16}$/;

/** Tells only the clicker why nothing happened. */
export async function tellClicker(deps: SlackDeps, click: Click, text: string): Promise<void> {
  deps.metrics.approvals.inc({ decision: 'refused_click' });
  const channel = click.channel;
  if (!channel) return;
  await deps.slack.chat.postEphemeral({ channel, user: click.user, text }).catch((error: unknown) => {
    deps.logger.warn({ err: error }, 'could not send an ephemeral explanation');
  });
}

/** Loads the request behind a click; answers the clicker itself when it cannot. */
async function requestForClick(deps: SlackDeps, click: Click): Promise<CloudRequest | undefined> {
  let request: CloudRequest | undefined;
  try {
    request = REQUEST_ID.test(click.requestId)
      ? await withDeadline(deps.store.get(click.requestId))
      : undefined;
  } catch {
    await tellClicker(deps, click, TRY_AGAIN);
    return undefined;
  }
  // A payload replayed into another channel, or a forged id, finds nothing to act on.
  if (!request || request.channel !== click.channel) {
    await tellClicker(deps, click, 'This request does not exist in this channel.');
    return undefined;
  }
  return request;
}

/**
 * One request button: ack at once, find the request behind the click (in this channel only), run `handle`, and tell
 * the clicker alone what it returns (why nothing changed). A failure to reach the database says so.
 */
export function onButton(
  router: SlackRouter,
  deps: SlackDeps,
  actionId: string,
  handle: (request: CloudRequest, click: Click, button: ButtonArgs) => Promise<string | undefined>,
): void {
  router.action(actionId, async (args) => {
    const button = args as ButtonArgs;
    await button.ack();
    await afterWaitingAcks();
    const click = clickOf(button);
    const request = await requestForClick(deps, click);
    if (!request) return;
    let answer: string | undefined;
    try {
      answer = await handle(request, click, button);
    } catch (error) {
      deps.logger.error(
        { err: error, requestId: request.id, action: actionId },
        'a button could not be handled',
      );
      answer = TRY_AGAIN;
    }
    if (answer) await tellClicker(deps, click, answer);
  });
}
