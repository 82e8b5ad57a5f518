import type { App } from '@slack/bolt';
import type { SlackDeps } from '../deps.ts';

/**
 * App Home: each time a person opens the Home tab their page is published (Bolt has acked the event by then), within
 * the views.publish budget the refresh queue shares: beyond it, or after Slack's 429, the page waits in the home
 * queue instead of being dropped. Opening it also signs them up for refreshes when their requests change.
 */
export function register(app: App, deps: SlackDeps): void {
  app.event('app_home_opened', async ({ event }) => {
    if (event.tab !== 'home') return;
    const started = performance.now();
    try {
      const outcome = await deps.homes.opened(event.user);
      deps.logger.debug({ outcome, ms: Math.round(performance.now() - started) }, 'home opened');
    } catch (error) {
      deps.logger.warn({ err: error }, 'could not publish the App Home');
    }
  });
}
