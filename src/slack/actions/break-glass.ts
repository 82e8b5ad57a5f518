import type { CloudRequest } from '../../requests/model/types.ts';
import type { BreakGlassClaims } from '../../requests/model/verification.ts';
import { cleanReason, reasonProblem } from '../../rules/inputs.ts';
import { vmLabel } from '../blocks/describe.ts';
import { breakGlassModal, FIELDS, VIEWS } from '../blocks/modals.ts';
import { refusalText } from '../blocks/refusals.ts';
import { ACTIONS } from '../blocks/request-message.ts';
import { breakGlassLinkMessage } from '../blocks/verify-link.ts';
import { type SlackDeps, TRY_AGAIN, withDeadline } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { readForm, text } from '../views/form-values.ts';
import { onButton, requestForView } from './common.ts';

/** How long sending the link may take before the form's ack (after the lifecycle's own 1.5 s): Slack waits 3 s. */
const LINK_MS = 1_200;

/**
 * Break glass: on frozen work, "Run now" asks a break-glass user for a reason in a modal; the submission runs it.
 * Whether the clicker may is the lifecycle's question, asked before the modal opens and again on submit. Where the
 * request's approvals must be verified, the submission runs nothing: the user alone gets a link to verify on.
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
    if (!decision.ok && decision.refusal.code === 'break_glass_needs_verification') {
      const { claims } = decision.refusal;
      const problem = await withDeadline(sendLink(deps, user, request, claims), LINK_MS).catch(() =>
        refusalText({ code: 'break_glass_needs_verification', claims }, 'break_glass', request),
      );
      if (problem) return void (await errors(problem));
    } else if (!decision.ok)
      return void (await errors(refusalText(decision.refusal, 'break_glass', request)));
    await ack({ response_action: 'clear' });
  });
}

/**
 * Sends `user` alone the link of `claims`, as an ephemeral message in the request's channel (where its Run now button
 * is), never the channel itself. Otherwise, what to tell them on the form instead (nothing ran).
 */
async function sendLink(
  deps: SlackDeps,
  user: string,
  request: CloudRequest,
  claims: BreakGlassClaims,
): Promise<string | undefined> {
  if (!deps.links)
    return `Request \`${request.id}\` needs its break glass verified, and this bot runs no verification page: nothing was run. Ask whoever runs cloudops.`;
  try {
    const url = await deps.links.issueBreakGlass(claims);
    await deps.slack.chat.postEphemeral({
      channel: request.channel,
      user,
      ...breakGlassLinkMessage(request, claims, url),
    });
    deps.metrics.approvals.inc({ decision: 'verification_sent' });
    return undefined;
  } catch (error) {
    deps.logger.warn({ err: error, requestId: request.id }, 'could not send a break-glass verification link');
    return refusalText({ code: 'break_glass_needs_verification', claims }, 'break_glass', request);
  }
}
