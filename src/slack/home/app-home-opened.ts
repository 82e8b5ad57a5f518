import type { App } from '@slack/bolt';
import { publishHome } from '../../jobs/home.ts';
import { homeRenderer } from '../blocks/home.ts';
import type { SlackDeps } from '../deps.ts';

/**
 * App Home: each time a person opens the Home tab, their page is built from their inbox and published (Bolt has
 * acked the event by then). Opening it also signs them up for refreshes when their requests change.
 */
export function register(app: App, deps: SlackDeps): void {
  app.event('app_home_opened', async ({ event }) => {
    if (event.tab !== 'home') return;
    const started = performance.now();
    try {
      await deps.homes.seen(event.user);
      const blocks = await publishHome(
        {
          store: deps.store,
          approvals: deps.approvals,
          renderer: homeRenderer,
          now: deps.now,
          digestOf: deps.homes.digestOf,
          groupsOf: deps.homes.groupsOf,
        },
        deps.slack,
        event.user,
      );
      deps.logger.debug({ blocks, ms: Math.round(performance.now() - started) }, 'home published');
    } catch (error) {
      deps.logger.warn({ err: error }, 'could not publish the App Home');
    }
  });
}
