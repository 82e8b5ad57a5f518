import type { KnownBlock, ModalView } from '@slack/types';
import type { VerifyMethod } from '../../config/verification-policy.ts';
import { verifyText } from '../../requests/approval/approval-rules.ts';
import type { CloudRequest } from '../../requests/model/types.ts';
import type { BreakGlassClaims } from '../../requests/model/verification.ts';
import { vmLabel } from './describe.ts';
import { escapeMrkdwn, mrkdwn, plain, quoted } from './text.ts';

/** The action id of the link's button: Slack reports a click on a URL button too, which is only acknowledged. */
export const VERIFY_OPEN = 'verify_open';

/** What the approver alone is shown: why the click counted nothing yet, and the link to verify on. */
export function verifyLinkMessage(
  request: CloudRequest,
  methods: readonly VerifyMethod[],
  url: string,
): { text: string; blocks: KnownBlock[] } {
  const how = verifyText(methods);
  const what = `${request.kind === 'resize' ? 'Resize' : 'Restore'} ${vmLabel(request)}`;
  const text = `Your approval of request ${request.id} (${escapeMrkdwn(what)}) counts once you verify it (${how}). The link works once, for you alone, for 10 minutes: ${url}`;
  return {
    text,
    blocks: [
      {
        type: 'section',
        text: mrkdwn(
          `:lock: *Your approval counts once you verify it* (${how}): request \`${request.id}\`, ${escapeMrkdwn(what)}.\nThe link works once, for you alone, for 10 minutes. Do not share it.`,
        ),
      },
      openButton(request, url, 'Verify and approve', 'primary'),
    ],
  };
}

/**
 * What the break-glass user alone is shown, where the break glass must be verified: nothing ran yet, the reason they
 * gave (quoted: typed text), and the link to verify on.
 */
export function breakGlassLinkMessage(
  request: CloudRequest,
  claims: BreakGlassClaims,
  url: string,
): { text: string; blocks: KnownBlock[] } {
  const how = verifyText(claims.methods);
  const what = escapeMrkdwn(`${request.kind === 'resize' ? 'Resize' : 'Restore'} ${vmLabel(request)}`);
  const text = `Your break glass of request ${request.id} (${what}) runs once you verify it (${how}). Nothing runs until then. The link works once, for you alone, for 10 minutes: ${url}`;
  return {
    text,
    blocks: [
      {
        type: 'section',
        text: mrkdwn(
          `:lock: *Your break glass runs once you verify it* (${how}): request \`${request.id}\`, ${what}. Nothing runs until then. Your reason:\n${quoted(claims.reason)}\nThe link works once, for you alone, for 10 minutes. Do not share it.`,
        ),
      },
      openButton(request, url, 'Verify and run now', 'danger'),
    ],
  };
}

/** The link's button, which opens the page in the browser (its click in Slack is only acknowledged). */
function openButton(
  request: CloudRequest,
  url: string,
  label: string,
  style: 'primary' | 'danger',
): KnownBlock {
  return {
    type: 'actions',
    block_id: `verify:${request.id}`,
    elements: [
      { type: 'button', action_id: VERIFY_OPEN, text: plain(label, 75), style, url, value: request.id },
    ],
  };
}

/** The same, as a small modal for a click on the App Home (which has no place for an ephemeral message). */
export function verifyLinkModal(
  request: CloudRequest,
  methods: readonly VerifyMethod[],
  url: string,
): ModalView {
  return {
    type: 'modal',
    title: plain('cloudops', 24),
    close: plain('Close', 24),
    blocks: verifyLinkMessage(request, methods, url).blocks,
  };
}
