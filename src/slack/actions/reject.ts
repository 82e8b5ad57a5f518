import { vmLabel } from '../blocks/describe.ts';
import { FIELDS, rejectModal, VIEWS } from '../blocks/modals.ts';
import { ACTIONS } from '../blocks/request-message.ts';
import { mention } from '../blocks/text.ts';
import { afterWaitingAcks, type SlackDeps, TRY_AGAIN, withDeadline } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { readForm, text } from '../views/form-values.ts';
import {
  alreadyText,
  announce,
  type ButtonArgs,
  clickOf,
  expireIfDue,
  requestForClick,
  tellClicker,
} from './common.ts';

/** Reject: an approver clicks, a small modal asks for an optional reason, the submission decides. */
export function register(app: SlackRouter, deps: SlackDeps): void {
  app.action(ACTIONS.reject, async (args) => {
    const button = args as ButtonArgs;
    await button.ack();
    await afterWaitingAcks();
    const click = clickOf(button);
    const request = await requestForClick(button, deps, click);
    if (!request) return;
    if (!request.approvers.includes(click.user) || click.user === request.requester) {
      const hint = click.user === request.requester ? ' To withdraw your own request, use Cancel.' : '';
      return tellClicker(
        button,
        deps,
        click,
        `Only the approvers of ${request.projectName} can reject.${hint}`,
      );
    }
    if (request.state !== 'pending') return tellClicker(button, deps, click, alreadyText(request));
    const expired = await expireIfDue(deps, request).catch(() => TRY_AGAIN);
    if (expired) return tellClicker(button, deps, click, expired);
    await button.client.views
      .open({ trigger_id: button.body.trigger_id, view: rejectModal(request.id, vmLabel(request)) })
      .catch((error: unknown) => deps.logger.warn({ err: error }, 'could not open the reject form'));
  });

  app.view(VIEWS.reject, async ({ ack, body, view }) => {
    const user = body.user.id;
    const id = view.private_metadata;
    const errors = (message: string) =>
      ack({ response_action: 'errors', errors: { [FIELDS.rejectReason]: message } });
    let request: Awaited<ReturnType<typeof deps.store.get>>;
    try {
      request = /^[0-9A-Z]{4,16}$/.test(id) ? await withDeadline(deps.store.get(id)) : undefined;
    } catch {
      return void (await errors(TRY_AGAIN));
    }
    if (!request?.approvers.includes(user) || user === request.requester) {
      return void (await errors('You cannot reject this request.'));
    }
    // The modal may have stayed open past the request's expiry: then it expires instead of being rejected.
    const expired = await withDeadline(expireIfDue(deps, request)).catch(() => TRY_AGAIN);
    if (expired) return void (await errors(expired));
    const reason = text(readForm(view), FIELDS.rejectReason);
    const rejected = await withDeadline(
      deps.store.transition(request.id, {
        from: ['pending'],
        to: 'rejected',
        actor: user,
        patch: { rejectedBy: user, rejectReason: reason },
        detail: reason,
      }),
    ).catch(() => undefined);
    if (!rejected) return void (await errors(TRY_AGAIN));
    if (!rejected.ok) {
      return void (await errors(rejected.request ? alreadyText(rejected.request) : 'This request is gone.'));
    }
    await ack({ response_action: 'clear' });
    deps.metrics.approvals.inc({ decision: 'rejected' });
    await announce(deps, rejected.request, 'rejected').catch((error: unknown) =>
      deps.logger.error({ err: error, requestId: id, by: mention(user) }, 'could not announce a rejection'),
    );
  });
}
