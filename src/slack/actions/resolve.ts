import { refusalText } from '../blocks/refusals.ts';
import { ACTIONS } from '../blocks/request-message.ts';
import type { SlackDeps } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { onButton } from './common.ts';

/** After an unknown outcome, the requester or an approver records what the portal showed. Nothing is resent. */
export function register(router: SlackRouter, deps: SlackDeps): void {
  for (const [actionId, outcome] of [
    [ACTIONS.resolveDone, 'resolved_done'],
    [ACTIONS.resolveFailed, 'resolved_failed'],
  ] as const) {
    onButton(router, deps, actionId, async (request, click) => {
      const decision = await deps.requests.resolve(request, click.user, outcome);
      return decision.ok ? undefined : refusalText(decision.refusal, 'resolve', request);
    });
  }
}
