import type { AllMiddlewareArgs, BlockAction, ButtonAction, SlackActionMiddlewareArgs } from '@slack/bolt';
import { enqueueNotify, removeExpireJob } from '../../jobs/queues.ts';
import type { CloudRequest, ReplyEvent } from '../../requests/types.ts';
import { STATE_LABEL } from '../blocks/describe.ts';
import { mention } from '../blocks/text.ts';
import { type SlackDeps, TRY_AGAIN, withDeadline } from '../deps.ts';

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

/** Tells only the clicker why nothing happened. */
export async function tellClicker(
  args: ButtonArgs,
  deps: SlackDeps,
  click: Click,
  text: string,
): Promise<void> {
  deps.metrics.approvals.inc({ decision: 'refused_click' });
  const channel = click.channel;
  if (!channel) return;
  await args.client.chat.postEphemeral({ channel, user: click.user, text }).catch((error: unknown) => {
    deps.logger.warn({ err: error }, 'could not send an ephemeral explanation');
  });
}

/** Loads the request behind a click; answers the clicker itself when it cannot. */
export async function requestForClick(
  args: ButtonArgs,
  deps: SlackDeps,
  click: Click,
): Promise<CloudRequest | undefined> {
  let request: CloudRequest | undefined;
  try {
    request = /^[0-9A-Z]{4,16}$/.test(click.requestId)
      ? await withDeadline(deps.store.get(click.requestId))
      : undefined;
  } catch {
    await tellClicker(args, deps, click, TRY_AGAIN);
    return undefined;
  }
  // A payload replayed into another channel, or a forged id, finds nothing to act on.
  if (!request || request.channel !== click.channel) {
    await tellClicker(args, deps, click, 'This request does not exist in this channel.');
    return undefined;
  }
  return request;
}

/** "Already approved by @x" and the like, for a click that came too late. */
export function alreadyText(request: CloudRequest): string {
  const by = request.approvedBy ?? request.rejectedBy ?? request.cancelledBy ?? request.resolvedBy;
  return `Nothing changed: request \`${request.id}\` is already “${STATE_LABEL[request.state].replace(/^:[a-z_]+: /, '')}”${by ? ` (${mention(by)})` : ''}.`;
}

/** Refreshes the request message and, when given, posts a thread reply; both through the notify queue. */
export async function announce(deps: SlackDeps, request: CloudRequest, reply?: ReplyEvent): Promise<void> {
  // A decided request's expire job has nothing left to do.
  if (request.state !== 'pending') await removeExpireJob(deps.queues, request.id);
  await enqueueNotify(deps.queues, { type: 'sync-message', requestId: request.id });
  if (reply) await enqueueNotify(deps.queues, { type: 'thread-reply', requestId: request.id, event: reply });
}

/**
 * A pending request past its `expiresAt` is expired now, whoever clicks (the notify worker may not have run yet):
 * returns the text for the clicker, or undefined when the request is still live.
 */
export async function expireIfDue(deps: SlackDeps, request: CloudRequest): Promise<string | undefined> {
  if (request.state !== 'pending' || new Date(request.expiresAt) > deps.now()) return undefined;
  const expired = await deps.store.transition(request.id, {
    from: ['pending'],
    to: 'expired',
    actor: 'cloudops',
  });
  if (expired.ok) {
    deps.metrics.requests.inc({ kind: request.kind, state: 'expired' });
    await announce(deps, expired.request, 'expired');
  }
  return `Request \`${request.id}\` has expired; ask for a new one.`;
}
