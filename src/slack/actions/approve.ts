import type { VerificationLinks } from '../../requests/approval/verified-approval.ts';
import type { CloudRequest } from '../../requests/model/types.ts';
import type { VerifyClaims } from '../../requests/model/verification.ts';
import { refusalText } from '../blocks/refusals.ts';
import { ACTIONS } from '../blocks/request-message.ts';
import { VERIFY_OPEN, verifyLinkMessage, verifyLinkModal } from '../blocks/verify-link.ts';
import type { SlackDeps } from '../deps.ts';
import type { SlackRouter } from '../router.ts';
import { type Click, onButton } from './common.ts';

/**
 * Approve: the lifecycle decides who may and makes the first click win. Where the approval must be verified, the
 * click counts nothing and the approver alone gets the link to verify on (the App Home's buttons and the request
 * message's are this one action).
 */
export function register(router: SlackRouter, deps: SlackDeps): void {
  onButton(router, deps, ACTIONS.approve, async (request, click) => {
    const decision = await deps.requests.approve(request, click.user);
    if (decision.ok) return undefined;
    const { refusal } = decision;
    if (refusal.code === 'needs_verification') return sendLink(deps, click, request, refusal.claims);
    return refusalText(refusal, 'approve', request);
  });
  // The link's button opens the browser; Slack reports the click as well, which needs only its ack.
  router.action(VERIFY_OPEN, async ({ ack }) => {
    await ack();
  });
}

/**
 * Sends `click`'s user alone the link of `claims`: an ephemeral message where they clicked, a modal on the App Home;
 * never the channel. Otherwise, what to tell the clicker instead (nothing counted).
 */
async function sendLink(
  deps: SlackDeps,
  click: Click,
  request: CloudRequest,
  claims: VerifyClaims,
): Promise<string | undefined> {
  const links: VerificationLinks | undefined = deps.links;
  if (!links)
    return `Request \`${request.id}\` needs a verified approval, and this bot runs no verification page: nothing was counted. Ask whoever runs cloudops.`;
  try {
    const url = await links.issue(claims);
    if (click.home) await deps.slack.openView(click.triggerId, verifyLinkModal(request, claims.methods, url));
    else if (click.channel)
      await deps.slack.chat.postEphemeral({
        channel: click.channel,
        user: click.user,
        ...verifyLinkMessage(request, claims.methods, url),
      });
    else return refusalText({ code: 'needs_verification', claims }, 'approve', request);
    deps.metrics.approvals.inc({ decision: 'verification_sent' });
    return undefined;
  } catch (error) {
    deps.logger.warn({ err: error, requestId: request.id }, 'could not send a verification link');
    return refusalText({ code: 'needs_verification', claims }, 'approve', request);
  }
}
