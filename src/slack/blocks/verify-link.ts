import type { KnownBlock, ModalView } from '@slack/types';
import type { VerifyMethod } from '../../config/verification-policy.ts';
import { verifyText } from '../../requests/approval/approval-rules.ts';
import type { CloudRequest } from '../../requests/model/types.ts';
import { vmLabel } from './describe.ts';
import { escapeMrkdwn, mrkdwn, plain } from './text.ts';

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
      {
        type: 'actions',
        block_id: `verify:${request.id}`,
        elements: [
          {
            type: 'button',
            action_id: VERIFY_OPEN,
            text: plain('Verify and approve', 75),
            style: 'primary',
            url,
            value: request.id,
          },
        ],
      },
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
