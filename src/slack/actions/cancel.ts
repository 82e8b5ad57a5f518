import { refusalText } from '../blocks/refusals.ts';
import { ACTIONS } from '../blocks/request-message.ts';
import type { SlackDeps } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { onButton } from './common.ts';

/**
 * Cancel: the requester, while the request waits for approval; the requester or an approver, while a scheduled
 * run has not started. A run that already started cannot be cancelled (the store's state check decides).
 */
export function register(router: SlackRouter, deps: SlackDeps): void {
  onButton(router, deps, ACTIONS.cancel, async (request, click) => {
    const decision = await deps.requests.cancel(request, click.user);
    return decision.ok ? undefined : refusalText(decision.refusal, 'cancel', request);
  });
}
