import { cancelExecution } from '../../jobs/queues.ts';
import { ACTIONS } from '../blocks/request-message.ts';
import { afterWaitingAcks, type SlackDeps, TRY_AGAIN } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { alreadyText, announce, type ButtonArgs, clickOf, requestForClick, tellClicker } from './common.ts';

/**
 * Cancel: the requester, while the request waits for approval; the requester or an approver, while a scheduled
 * run has not started. A run that already started cannot be cancelled (the store's state check decides).
 */
export function register(app: SlackRouter, deps: SlackDeps): void {
  app.action(ACTIONS.cancel, async (args) => {
    const button = args as ButtonArgs;
    await button.ack();
    await afterWaitingAcks();
    const click = clickOf(button);
    const request = await requestForClick(button, deps, click);
    if (!request) return;
    const scheduledWaiting = request.state === 'queued' && request.runAt !== undefined;
    const allowed =
      click.user === request.requester || (scheduledWaiting && request.approvers.includes(click.user));
    if (!allowed) return tellClicker(button, deps, click, 'Only the requester can cancel this request.');
    if (request.state !== 'pending' && !scheduledWaiting)
      return tellClicker(button, deps, click, alreadyText(request));
    try {
      const cancelled = await deps.store.transition(request.id, {
        from: scheduledWaiting ? ['queued'] : ['pending'],
        to: 'cancelled',
        actor: click.user,
        patch: { cancelledBy: click.user },
      });
      if (!cancelled.ok) {
        return tellClicker(
          button,
          deps,
          click,
          cancelled.request ? alreadyText(cancelled.request) : 'This request is gone.',
        );
      }
      if (scheduledWaiting) await cancelExecution(deps.queues, request.id);
      deps.metrics.requests.inc({ kind: request.kind, state: 'cancelled' });
      await announce(deps, cancelled.request, 'cancelled');
    } catch (error) {
      deps.logger.error({ err: error, requestId: request.id }, 'cancel could not be stored');
      await tellClicker(button, deps, click, TRY_AGAIN);
    }
  });
}
