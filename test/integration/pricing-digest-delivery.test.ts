import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startCloudSim } from '../../sim/cloud/server.ts';
import { CloudApiClient, FAST_TIMEOUTS } from '../../src/cloud/client.ts';
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

describe('pricing digest delivery: size, rate limits, API failures, many channels', () => {
  it('120 clusters split into messages that pass the stand-in checks, each part once despite a 429', async () => {
    for (let i = 4; i <= 120; i += 1) {
      env.sim.addCluster({
        name: `zone-${100 + i}`,
        location: `Site ${i}`,
        prices: {
          vcore_regular: '0.0120',
          vcore_light: '0.0060',
          ram: `0.00${40 + (i % 50)}`,
          storage_fast: '0.0002',
          public_ip: '0.0050',
        },
      });
    }
    // One chat call per second in this channel: the second part meets Slack's 429 and waits Retry-After.
    env.standIn.limitPerChannel(1);
    const { pricing } = await startInstance();
    await pricing.scheduler.sendNow('C0BIG');
    const parts = await env.standIn.waitFor(() => {
      const found = digests('C0BIG');
      const total = Number(/\((\d+)\/(\d+)\)/.exec(found[0]?.text ?? '')?.[2] ?? 0);
      return total > 0 && found.length >= total ? found : undefined;
    }, 30_000);
    expect(parts.length).toBeGreaterThanOrEqual(3);
    expect(env.standIn.calls.some((c) => c.method === 'chat.postMessage' && c.status === 429)).toBe(true);
    await sleep(1500);
    const final = digests('C0BIG');
    expect(final.map((m) => /\((\d+)\/\d+\)/.exec(m.text ?? '')?.[1])).toEqual(
      Array.from({ length: final.length }, (_, i) => String(i + 1)),
    );
    for (const m of final) expect((m.blocks ?? []).length).toBeLessThanOrEqual(50);
    const all = final.map(blocksText).join('\n');
    const listed = await new CloudApiClient({ baseUrl: env.sim.url, timeouts: FAST_TIMEOUTS }).listClusters();
    for (const c of listed) expect(all).toContain(`*${c.name}*`);
    expect(env.standIn.problems).toEqual([]);
  });

  it('when the cloud API is down the channel gets a clear notice and the schedule goes on', async () => {
    env.sim.fault('list', { kind: 'status', status: 503, times: 1 });
    const { pricing } = await startInstance();
    await pricing.scheduler.subscribe('C0DOWN', EVERY_SECOND);
    const notice = await env.standIn.waitFor(
      () => env.standIn.messages('C0DOWN').find((m) => (m.text ?? '').includes('could not be read')),
      30_000,
    );
    expect(notice.text).toMatch(
      /^:warning: Pricing digest: the cloud API could not be read \(the service is unavailable \(HTTP 503\)\)\. The next digest is at <!date\^\d+\^/,
    );
    expect(notice.text).not.toContain(env.sim.apiKey);
    // The next tick reads the API again and posts a real digest.
    const digest = await env.standIn.waitFor(() => digests('C0DOWN')[0], 30_000);
    expect(blocksText(digest)).toContain('First digest in this channel');
    await pricing.scheduler.unsubscribe('C0DOWN');
  });

  it('a closed cloud port is reported the same way', async () => {
    const { pricing } = await startInstance();
    await env.sim.close();
    await pricing.scheduler.subscribe('C0GONE', EVERY_SECOND);
    const notice = await env.standIn.waitFor(
      () => env.standIn.messages('C0GONE').find((m) => (m.text ?? '').includes('could not be read')),
      30_000,
    );
    expect(notice.text).toContain(':warning: Pricing digest: the cloud API could not be read (');
    expect(notice.text).toContain('The next digest is at');
    await pricing.scheduler.unsubscribe('C0GONE');
    env.sim = await startCloudSim();
  });

  it('Slack failures get the verdict every worker uses: an outage is retried, a refusal is final', async () => {
    const { pricing } = await startInstance();
    // internal_error says "try later": the digest is posted on the job's next attempt (the notify worker agrees).
    env.standIn.failNext('chat.postMessage', { error: 'internal_error' });
    await pricing.scheduler.sendNow('C0FLAKY');
    const digest = await env.standIn.waitFor(() => digests('C0FLAKY')[0], 30_000);
    expect(blocksText(digest)).toContain('First digest in this channel');
    const attempts = () =>
      env.standIn.calls.filter((c) => c.method === 'chat.postMessage' && c.args.channel === 'C0FLAKY').length;
    expect(attempts()).toBe(2);
    // channel_not_found will not change by retrying: one call, then nothing more.
    env.standIn.failNext('chat.postMessage', { error: 'channel_not_found', times: 5 });
    await pricing.scheduler.sendNow('C0GONE2');
    await env.standIn.waitFor(
      () => env.standIn.calls.some((c) => c.method === 'chat.postMessage' && c.args.channel === 'C0GONE2'),
      30_000,
    );
    await sleep(3000);
    expect(
      env.standIn.calls.filter((c) => c.method === 'chat.postMessage' && c.args.channel === 'C0GONE2'),
    ).toHaveLength(1);
  });

  it('many channels due at the same second all get their digest', async () => {
    const { pricing } = await startInstance({ concurrency: 20 });
    const channels = Array.from({ length: 15 }, (_, i) => `C0MANY${i}`);
    await Promise.all(channels.map((c) => pricing.scheduler.subscribe(c, EVERY_SECOND)));
    await env.standIn.waitFor(() => channels.every((c) => digests(c).length >= 1), 30_000);
    await Promise.all(channels.map((c) => pricing.scheduler.unsubscribe(c)));
    expect(env.standIn.problems).toEqual([]);
  });
});
