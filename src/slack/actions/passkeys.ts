import { PASSKEY_REGISTER } from '../blocks/home.ts';
import type { SlackDeps } from '../deps.ts';
import type { SlackRouter } from '../router.ts';

/**
 * "Register a passkey" on the App Home: the person alone gets, by DM, a single-use ten-minute link to the
 * registration page (src/verify/). Whether they may register there (a first passkey, or proving one they have) is
 * the page's to decide.
 */
export function register(router: SlackRouter, deps: SlackDeps): void {
  router.action(PASSKEY_REGISTER, async ({ ack, body }) => {
    await ack();
    const user = body.user.id;
    try {
      if (!deps.passkeyLinks) {
        await deps.slack.chat.postMessage({
          channel: user,
          text: 'This cloudops runs no verification page (PUBLIC_URL is not set), so passkeys cannot be registered.',
        });
        return;
      }
      const url = await deps.passkeyLinks.issue(body.team?.id ?? deps.policy.workspace ?? '', user);
      await deps.slack.chat.postMessage({
        channel: user,
        text: 'Register a passkey for verified approvals: open the link (it works once, for 10 minutes).',
        unfurl_links: false,
        blocks: [
          {
            type: 'section',
            text: {
              type: 'mrkdwn',
              text: 'Register a passkey for verified approvals. The link works once, for 10 minutes; do not share it.',
            },
          },
          {
            type: 'actions',
            elements: [
              {
                type: 'button',
                action_id: 'passkey_open',
                text: { type: 'plain_text', text: 'Open the registration page' },
                url,
              },
            ],
          },
        ],
      });
    } catch (error) {
      if ((error as { code?: unknown }).code === 'TOO_MANY_LINKS') {
        // Each open link is a page someone could keep: the person uses one they have, or waits for them to expire.
        await deps.slack.chat
          .postMessage({
            channel: user,
            text: 'You have several registration links open already (the last ones sent to you here). Use one of them, or ask again in 10 minutes when they have expired.',
          })
          .catch(() => undefined);
        return;
      }
      // Neither the link nor the message's text reach the log: the link is a secret.
      deps.logger.warn({ err: error, user }, 'could not send a passkey registration link');
    }
  });
  // The link's button opens the browser; Slack reports the click as well, which needs only its ack.
  router.action('passkey_open', async ({ ack }) => {
    await ack();
  });
}
