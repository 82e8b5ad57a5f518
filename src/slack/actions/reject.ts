import { cleanReason, reasonProblem } from '../../rules/inputs.ts';
import { vmLabel } from '../blocks/describe.ts';
import { FIELDS, rejectModal, VIEWS } from '../blocks/modals.ts';
import { refusalText } from '../blocks/refusals.ts';
import { ACTIONS } from '../blocks/request-message.ts';
import { type SlackDeps, TRY_AGAIN, withDeadline } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { readForm, text } from '../views/form-values.ts';
import { onButton, requestForView } from './common.ts';

/** Reject: an approver clicks, a small modal asks for an optional reason, the submission decides. */
export function register(router: SlackRouter, deps: SlackDeps): void {
  onButton(router, deps, ACTIONS.reject, async (request, click, button) => {
    const decision = await deps.requests.mayReject(request, click.user);
    if (!decision.ok) return refusalText(decision.refusal, 'reject', request);
    await deps.slack
      .openView(button.body.trigger_id, rejectModal(request.id, vmLabel(request)))
      .catch((error: unknown) => deps.logger.warn({ err: error }, 'could not open the reject form'));
    return undefined;
  });

  router.view(VIEWS.reject, async ({ ack, body, view }) => {
    const user = body.user.id;
    const id = view.private_metadata;
    const errors = (message: string) =>
      ack({ response_action: 'errors', errors: { [FIELDS.rejectReason]: message } });
    const request = await requestForView(deps, id);
    if (request === 'unavailable') return void (await errors(TRY_AGAIN));
    if (!request) return void (await errors('You cannot reject this request.'));
    const typed = text(readForm(view), FIELDS.rejectReason);
    const problem = reasonProblem(typed);
    if (problem) return void (await errors(problem));
    const reason = typed === undefined ? undefined : cleanReason(typed);
    // The modal may have stayed open past the request's expiry: then it expires instead of being rejected.
    const decision = await withDeadline(deps.requests.reject(request, user, reason)).catch(() => undefined);
    if (!decision) return void (await errors(TRY_AGAIN));
    if (!decision.ok) {
      const refusal = decision.refusal;
      const notAllowed = refusal.code === 'own_request' || refusal.code === 'not_approver';
      return void (await errors(
        notAllowed ? 'You cannot reject this request.' : refusalText(refusal, 'reject', request),
      ));
    }
    await ack({ response_action: 'clear' });
  });
}
