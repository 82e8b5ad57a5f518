import { describe, expect, it } from 'vitest';
import { HOME_OPEN_COALESCE_MS } from '../../src/jobs/home.ts';
import { botPerFile } from '../helpers/bot-per-file.ts';
import { USERS } from '../helpers/harness.ts';
import { homeAfter, openHome } from '../helpers/slack-events.ts';

// The whole bot with a small views.publish budget (5 per 2 s) so the limit shows within seconds: Home tab opens
// (signed app_home_opened events) and the refresh queue share it, and a 429 from Slack delays a home, never loses it.
// It keeps the bot's coalescing of repeated opens, which the harness turns off for the other tests.
const RATE = { max: 5, duration: 2000 };
const h = botPerFile({
  role: 'all',
  startOptions: { homeRate: RATE, homeOpenCoalesceMs: HOME_OPEN_COALESCE_MS },
});

const publishesFor = (user: string) =>
  h.slack.callsOf('views.publish').filter((c) => c.args.user_id === user);
const published = () => h.slack.callsOf('views.publish').filter((c) => c.status === 200);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits for the budget window of earlier tests to pass, so each test starts with the whole budget. */
const freshBudget = () => pause(RATE.duration + 200);

describe('App Home publishes stay within Slack’s limit', () => {
  it('one person opening their home 120 times at once makes one publish per coalescing window, not 120', async () => {
    await freshBudget();
    const user = 'U0OPENER';
    const started = performance.now();
    await Promise.all(Array.from({ length: 120 }, () => openHome(h, user)));
    const took = performance.now() - started;
    await homeAfter(h, user, 0);
    // Time for any publish the opens would still make.
    await pause(RATE.duration + 500);
    // One page per window of HOME_OPEN_COALESCE_MS the burst spans (a loaded machine may stretch it past one).
    const windows = Math.ceil(took / HOME_OPEN_COALESCE_MS) + 1;
    console.info(
      `slack-home-limits: 120 opens in ${Math.round(took)} ms made ${publishesFor(user).length} publishes`,
    );
    expect(publishesFor(user).length).toBeGreaterThanOrEqual(1);
    expect(publishesFor(user).length).toBeLessThanOrEqual(Math.min(windows, 3));
  });

  it('thirty people opening at once: at most the budget in its first window, and every one of them published', async () => {
    await freshBudget();
    const before = published().length;
    const people = Array.from({ length: 30 }, (_, i) => `U0PEOPLE${String(i).padStart(2, '0')}`);
    await Promise.all(people.map((user) => openHome(h, user)));
    await h.slack.waitFor(
      () => people.every((user) => publishesFor(user).some((c) => c.status === 200)),
      40_000,
    );
    const calls = published().slice(before);
    const first = calls[0]?.atMs ?? 0;
    // A little short of the window: the stand-in's clock and Redis's expiry are not the same clock.
    const inFirstWindow = calls.filter((c) => c.atMs < first + RATE.duration - 150);
    expect(inFirstWindow.length).toBeLessThanOrEqual(RATE.max);
    // Slack never had to refuse one.
    expect(h.slack.callsOf('views.publish').filter((c) => c.status === 429)).toEqual([]);
    console.info(
      `slack-home-limits: 30 opens published over ${Math.round((calls.at(-1)?.atMs ?? first) - first)} ms, ${inFirstWindow.length} in the first window`,
    );
  }, 120_000);

  it('a publish Slack answers with 429 is published again after Retry-After', async () => {
    await freshBudget();
    const user = USERS.lead;
    h.slack.failNext('views.publish', { status: 429, retryAfter: 1 });
    await openHome(h, user);
    const home = await homeAfter(h, user, 0, 30_000);
    expect(home.blocks.length).toBeGreaterThan(0);
    const calls = publishesFor(user);
    const limited = calls.find((c) => c.status === 429);
    const done = calls.find((c) => c.status === 200);
    expect(limited).toBeDefined();
    expect((done?.atMs ?? 0) - (limited?.atMs ?? 0)).toBeGreaterThanOrEqual(900);
  });
});
