import { refusalText } from '../blocks/refusals.ts';
import { ACTIONS } from '../blocks/request-message.ts';
import type { SlackDeps } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { onButton } from './common.ts';

/** Approve: the lifecycle decides who may and makes the first click win. */
export function register(router: SlackRouter, deps: SlackDeps): void {
  onButton(router, deps, ACTIONS.approve, async (request, click) => {
    const decision = await deps.requests.approve(request, click.user);
    return decision.ok ? undefined : refusalText(decision.refusal, 'approve', request);
  });
}
