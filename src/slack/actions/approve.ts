import { enqueueExecution } from '../../jobs/queues.ts';
import { ACTIONS } from '../blocks/request-message.ts';
import { mention } from '../blocks/text.ts';
import { afterWaitingAcks, type SlackDeps, TRY_AGAIN } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import {
  alreadyText,
  announce,
  type ButtonArgs,
  clickOf,
  expireIfDue,
  requestForClick,
  tellClicker,
} from './common.ts';

/**
 * Approve: only the request's approvers, never its requester, only while pending and not expired.
 * The store's compare-and-set makes the first click win; a second click, a second approver or a replay changes nothing.
 */
export function register(app: SlackRouter, deps: SlackDeps): void {
  app.action(ACTIONS.approve, async (args) => {
    const button = args as ButtonArgs;
    await button.ack();
    await afterWaitingAcks();
    const click = clickOf(button);
    const request = await requestForClick(button, deps, click);
    if (!request) return;
    if (click.user === request.requester) {
      return tellClicker(
        button,
        deps,
        click,
        'You cannot approve your own request: another approver has to.',
      );
    }
    if (!request.approvers.includes(click.user)) {
      const who = request.approvers.map(mention).join(', ');
      return tellClicker(
        button,
        deps,
        click,
        `Only the approvers of ${request.projectName} can approve: ${who}.`,
      );
    }
    if (request.state !== 'pending') return tellClicker(button, deps, click, alreadyText(request));
    try {
      const expired = await expireIfDue(deps, request);
      if (expired) return tellClicker(button, deps, click, expired);
      const approved = await deps.store.transition(request.id, {
        from: ['pending'],
        to: 'approved',
        actor: click.user,
        patch: { approvedBy: click.user },
      });
      if (!approved.ok) {
        return tellClicker(
          button,
          deps,
          click,
          approved.request ? alreadyText(approved.request) : 'This request is gone.',
        );
      }
      deps.metrics.approvals.inc({ decision: 'approved' });
      const queued = await deps.store.transition(request.id, {
        from: ['approved'],
        to: 'queued',
        actor: 'cloudops',
      });
      if (queued.ok) {
        deps.metrics.requests.inc({ kind: request.kind, state: 'queued' });
        await enqueueExecution(deps.queues, queued.request, deps.now());
      }
      await announce(deps, queued.ok ? queued.request : approved.request, 'approved');
    } catch (error) {
      deps.logger.error({ err: error, requestId: request.id }, 'approval could not be stored');
      await tellClicker(button, deps, click, TRY_AGAIN);
    }
  });
}
