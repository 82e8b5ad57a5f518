import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SlackMessage } from '../../sim/slack/server.ts';
import { TickStore } from '../../src/jobs/digest-ticks.ts';
import {
  blocksText,
  digests,
  EVERY_SECOND,
  env,
  setUpPricingEnv,
  sleep,
  startInstance,
  tearDownPricingEnv,
} from './pricing-env.ts';

beforeEach(setUpPricingEnv);
afterEach(tearDownPricingEnv);

describe('pricing digest schedules over BullMQ, the cloud sim and the Slack stand-in', () => {
  it('posts on schedule, shows a changed price with its percentage, and stops on unsubscribe', async () => {
    const { pricing } = await startInstance();
    await pricing.scheduler.subscribe('C0DIGEST', EVERY_SECOND, 'U0DEV');
    const first = await env.standIn.waitFor(() => digests('C0DIGEST')[0], 30_000);
    const text = blocksText(first);
    expect(text).toContain('First digest in this channel');
    for (const name of ['zone-1', 'zone-2', 'zone-3']) expect(text).toContain(`*${name}*`);
    expect(text).toContain('hourly prices in EUR');
    expect(text).toContain(':star: cheapest');

    const seen = digests('C0DIGEST').length;
    env.sim.setPrice('zone-1', 'ram', '0.0044');
    const changed = await env.standIn.waitFor(
      () =>
        digests('C0DIGEST')
          .slice(seen)
          .find((m) => blocksText(m).includes('RAM 0.0040 → 0.0044')),
      30_000,
    );
    expect(blocksText(changed)).toContain('*zone-1* RAM 0.0040 → 0.0044 (:arrow_up: +10.0%)');
    // The digest after that compares with the changed price: no change any more.
    const after = digests('C0DIGEST').length;
    const calm = await env.standIn.waitFor(() => digests('C0DIGEST')[after], 30_000);
    expect(blocksText(calm)).toContain('No changes since the last digest');

    expect(await pricing.scheduler.unsubscribe('C0DIGEST')).toBe(true);
    expect(await pricing.scheduler.get('C0DIGEST')).toBeUndefined();
    await sleep(1500); // a tick already taken may still finish
    const stopped = digests('C0DIGEST').length;
    await sleep(2500);
    expect(digests('C0DIGEST').length).toBe(stopped);
    expect(env.standIn.problems).toEqual([]);
  });

  it('two scheduler+worker instances send each tick once', async () => {
    const a = await startInstance();
    const b = await startInstance();
    // Both subscribe (the later replaces the earlier: one scheduler per channel).
    await a.pricing.scheduler.subscribe('C0TWICE', EVERY_SECOND);
    await b.pricing.scheduler.subscribe('C0TWICE', EVERY_SECOND);
    await env.standIn.waitFor(() => digests('C0TWICE').length >= 4, 30_000);
    await a.pricing.scheduler.unsubscribe('C0TWICE');
    await sleep(1500);
    const completed = await a.pricing.scheduler.queue.getJobs(['completed']);
    const ticks = new Set(completed.filter((j) => j.data.channel === 'C0TWICE').map((j) => j.id));
    const posts = env.standIn.callsOf('chat.postMessage').filter((c) => c.args.channel === 'C0TWICE');
    expect(posts.length).toBe(ticks.size);
    expect(posts.length).toBeGreaterThanOrEqual(4);
    // Every digest is about a different second.
    const headers = digests('C0TWICE').map((m) => m.ts);
    expect(new Set(headers).size).toBe(headers.length);
  });

  it('a tick held by one worker is not sent by another at the same time', async () => {
    const ticks = new TickStore(env.admin, env.prefix);
    expect(await ticks.claim('C1', '1000', 'worker-a')).toBe(true);
    expect(await ticks.claim('C1', '1000', 'worker-b')).toBe(false);
    expect(await ticks.renew('C1', '1000', 'worker-b')).toBe(false);
    await ticks.release('C1', '1000', 'worker-b'); // not the holder: changes nothing
    expect(await ticks.claim('C1', '1000', 'worker-b')).toBe(false);
    await ticks.release('C1', '1000', 'worker-a');
    expect(await ticks.claim('C1', '1000', 'worker-b')).toBe(true);
  });

  it('the schedule survives a restart: a new instance goes on without subscribing again', async () => {
    const first = await startInstance();
    await first.pricing.scheduler.subscribe('C0RESTART', EVERY_SECOND);
    await env.standIn.waitFor(() => digests('C0RESTART')[0], 30_000);
    await first.close();
    const before = digests('C0RESTART').length;
    await sleep(1200);
    const second = await startInstance();
    expect((await second.pricing.scheduler.get('C0RESTART'))?.pattern).toBe('*/1 * * * * *');
    await env.standIn.waitFor(() => digests('C0RESTART').length >= before + 2, 30_000);
    // The snapshot from before the restart is the base: no "first digest" again.
    expect(blocksText(digests('C0RESTART').at(-1) as SlackMessage)).toContain(
      'No changes since the last digest',
    );
    await second.pricing.scheduler.unsubscribe('C0RESTART');
  });
});
