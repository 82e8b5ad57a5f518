import { ACTIONS } from '../blocks/request-message.ts';
import { afterWaitingAcks, type SlackDeps, TRY_AGAIN } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { alreadyText, announce, type ButtonArgs, clickOf, requestForClick, tellClicker } from './common.ts';

/** After an unknown outcome, the requester or an approver records what the portal showed. Nothing is resent. */
export function register(app: SlackRouter, deps: SlackDeps): void {
  for (const [actionId, to] of [
    [ACTIONS.resolveDone, 'resolved_done'],
    [ACTIONS.resolveFailed, 'resolved_failed'],
  ] as const) {
    app.action(actionId, async (args) => {
      const button = args as ButtonArgs;
      await button.ack();
      await afterWaitingAcks();
      const click = clickOf(button);
      const request = await requestForClick(button, deps, click);
      if (!request) return;
      if (click.user !== request.requester && !request.approvers.includes(click.user)) {
        return tellClicker(button, deps, click, 'Only the requester or an approver can record the outcome.');
      }
      if (request.state !== 'unknown') return tellClicker(button, deps, click, alreadyText(request));
      try {
        const resolved = await deps.store.transition(request.id, {
          from: ['unknown'],
          to,
          actor: click.user,
          patch: { resolvedBy: click.user },
          detail: 'checked in the portal',
        });
        if (!resolved.ok) {
          return tellClicker(
            button,
            deps,
            click,
            resolved.request ? alreadyText(resolved.request) : 'This request is gone.',
          );
        }
        await announce(deps, resolved.request, 'resolved');
      } catch (error) {
        deps.logger.error({ err: error, requestId: request.id }, 'resolution could not be stored');
        await tellClicker(button, deps, click, TRY_AGAIN);
      }
    });
  }
}
