import type { AllMiddlewareArgs, BlockAction, ButtonAction, SlackActionMiddlewareArgs } from '@slack/bolt';
import type { CloudRequest } from '../../requests/model/types.ts';
import { noticeModal } from '../blocks/home.ts';
import { afterWaitingAcks, type SlackDeps, TRY_AGAIN, withDeadline } from '../deps.ts';
import type { SlackRouter } from '../router.ts';

export type ButtonArgs = SlackActionMiddlewareArgs<BlockAction<ButtonAction>> & AllMiddlewareArgs;

/**
 * Who clicked, where, and on which request (the button's value is only an id; all else comes from the store). A click
 * on the clicker's own App Home has no channel: the same buttons, the same checks.
 */
export interface Click {
  user: string;
  channel?: string;
  /** The button sits on the clicker's App Home, not on a message. */
  home: boolean;
  requestId: string;
  /** For an answer in a modal (the App Home has no place for an ephemeral message). */
  triggerId: string;
}

export function clickOf(args: ButtonArgs): Click {
  return {
    user: args.body.user.id,
    channel: args.body.channel?.id,
    home: args.body.view?.type === 'home',
    requestId: args.action.value ?? '',
    triggerId: args.body.trigger_id,
  };
}

/** Request ids as the store makes them; anything else is not looked up. */
export const REQUEST_ID = /^[0-9A-Z]{4,16}$/;

/** Tells only the clicker why nothing happened. */
export async function tellClicker(deps: SlackDeps, click: Click, text: string): Promise<void> {
  deps.metrics.approvals.inc({ decision: 'refused_click' });
  // The App Home has no place for an ephemeral message: a small modal says it instead.
  if (click.home) {
    await deps.slack
      .openView(click.triggerId, noticeModal(text))
      .catch((error: unknown) => deps.logger.warn({ err: error }, 'could not show an explanation'));
    return;
  }
  const channel = click.channel;
  if (!channel) return;
  await deps.slack.chat.postEphemeral({ channel, user: click.user, text }).catch((error: unknown) => {
    deps.logger.warn({ err: error }, 'could not send an ephemeral explanation');
  });
}

/**
 * The request a modal names in its `private_metadata` (a forged id finds nothing), or 'unavailable' when the store
 * did not answer in time.
 */
export async function requestForView(
  deps: SlackDeps,
  id: string,
): Promise<CloudRequest | undefined | 'unavailable'> {
  try {
    return REQUEST_ID.test(id) ? await withDeadline(deps.store.get(id)) : undefined;
  } catch {
    return 'unavailable';
  }
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
  if (!request || (!click.home && request.channel !== click.channel)) {
    const where = click.home ? '' : ' in this channel';
    await tellClicker(deps, click, `This request does not exist${where}.`);
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
