import { cleanReason, reasonProblem } from '../../rules/inputs.ts';
import { vmLabel } from '../blocks/describe.ts';
import { breakGlassModal, FIELDS, VIEWS } from '../blocks/modals.ts';
import { refusalText } from '../blocks/refusals.ts';
import { ACTIONS } from '../blocks/request-message.ts';
import { type SlackDeps, TRY_AGAIN, withDeadline } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { readForm, text } from '../views/form-values.ts';
import { onButton, requestForView } from './common.ts';

/**
 * Break glass: on frozen work, "Run now" asks a break-glass user for a reason in a modal; the submission runs it.
 * Whether the clicker may is the lifecycle's question, asked before the modal opens and again on submit.
 */
export function register(router: SlackRouter, deps: SlackDeps): void {
  onButton(router, deps, ACTIONS.breakGlass, async (request, click, button) => {
    const allowed = await deps.requests.mayBreakGlass(request, click.user);
    if (!allowed.ok) return refusalText(allowed.refusal, 'break_glass', request);
    await button.client.views
      .open({ trigger_id: button.body.trigger_id, view: breakGlassModal(request.id, vmLabel(request)) })
      .catch((error: unknown) => deps.logger.warn({ err: error }, 'could not open the break-glass form'));
    return undefined;
  });

  router.view(VIEWS.breakGlass, async ({ ack, body, view }) => {
    const user = body.user.id;
    const id = view.private_metadata;
    const errors = (message: string) =>
      ack({ response_action: 'errors', errors: { [FIELDS.breakGlassReason]: message } });
    const typed = text(readForm(view), FIELDS.breakGlassReason) ?? '';
    const reason = cleanReason(typed);
    if (!reason)
      return void (await errors(reasonProblem(typed) ?? 'Say why it cannot wait for the freeze to end.'));
    const request = await requestForView(deps, id);
    if (request === 'unavailable') return void (await errors(TRY_AGAIN));
    if (!request) return void (await errors('This request is gone.'));
    const decision = await withDeadline(deps.requests.breakGlass(request, user, reason)).catch(
      () => undefined,
    );
    if (!decision) return void (await errors(TRY_AGAIN));
    if (!decision.ok) return void (await errors(refusalText(decision.refusal, 'break_glass', request)));
    await ack({ response_action: 'clear' });
  });
}
