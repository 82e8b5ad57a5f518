import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TRY_AGAIN } from '../../src/slack/deps.ts';
import { CHANNELS, type Harness, startHarness, USERS } from '../helpers/harness.ts';
import { type SlowTcpProxy, startSlowTcpProxy } from '../helpers/proxies.ts';
import { testRedisUrl } from '../helpers/redis.ts';

// The bot's Redis behind a proxy that can make every round trip slow; the test reads Redis directly.
let h: Harness;
let proxy: SlowTcpProxy | undefined;
beforeAll(async () => {
  h = await startHarness({
    env: async () => {
      proxy = await startSlowTcpProxy(testRedisUrl());
      return { REDIS_URL: proxy.url };
    },
  });
});
afterEach(() => {
  proxy?.setDelay(0);
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  await h?.close();
  await proxy?.close();
});

/** Submits `view` and measures how long the bot took to answer. */
async function timedSubmit(view: Record<string, unknown>, values: Parameters<Harness['submitView']>[1]) {
  const started = performance.now();
  const ack = await h.submitView(view, values, USERS.dev);
  return { ack, ms: Math.round(performance.now() - started) };
}

/** Waits until `key` is in Redis (30 s at most). */
async function waitFor(key: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while ((await h.redis.exists(key)) === 0) {
    if (Date.now() > deadline) throw new Error(`${key} not there`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The Redis key of a form's draft: its id, read from the draft sealed into the form. */
const draftKey = (view: Record<string, unknown>) => {
  const body = String(view.private_metadata).split('.').at(-2) ?? '';
  return `${h.prefix}:draft:${(JSON.parse(Buffer.from(body, 'base64url').toString()) as { id: string }).id}`;
};

describe('modal submissions answer within Slack’s 3 s whatever Redis does', () => {
  it('Redis 1.1 s per round trip: the resize is answered within 3 s and stored; the form is marked done only after', async () => {
    const view = await h.openModal('resize shop-prod 102 cores=6');
    proxy?.setDelay(1_100);
    const { ack, ms } = await timedSubmit(view, { reason: 'slow redis' });
    console.info(`slow-redis: resize submit answered in ${ms} ms with Redis at 1.1 s a round trip`);
    // Past 3 s Bolt itself answers 404 (as Slack would see it): a 200 with the bot's answer is the 3 s promise.
    expect(ack.status).toBe(200);
    expect(ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest();
    await h.waitForRequest(request.id, (r) => r.reason === 'slow redis', 30_000);
    await waitFor(`${draftKey(view)}:done`);
  });

  it('Redis slower than the budget: "try again" within 3 s, and the same form then submits (the draft was kept)', async () => {
    const view = await h.openModal('restore shop-prod 102 nightly_2025-01-01');
    const values = { confirm: ['stopped'], typed_vmid: '102' };
    proxy?.setDelay(2_600);
    const first = await timedSubmit(view, values);
    console.info(`slow-redis: restore submit answered in ${first.ms} ms with Redis at 2.6 s a round trip`);
    expect(first.ack.status).toBe(200);
    expect(first.ack.json).toEqual({ response_action: 'errors', errors: { project: TRY_AGAIN } });
    expect(await h.redis.exists(`${draftKey(view)}:done`)).toBe(0);

    // Redis is fast again once what the slow one still held has landed: the claim taken late is given back.
    proxy?.setDelay(0);
    await proxy?.drained();
    expect(await h.redis.exists(`${draftKey(view)}:claim`)).toBe(0);
    const again = await timedSubmit(view, values);
    expect(again.ack.json).toEqual({ response_action: 'clear' });
    const request = await h.nextRequest();
    expect(request).toMatchObject({ kind: 'restore', vmid: 102, channel: CHANNELS.prod });
  });
});

describe('Redis down', () => {
  it('a slash command says the bot cannot reach its database, not that the form could not be opened', async () => {
    proxy?.setDown(true);
    try {
      const seen = h.slack.responses.length;
      const answer = await h.command('resize shop-prod 102 cores=6');
      expect(answer.status).toBe(200);
      const told = await h.slack.waitFor(() => h.slack.responses.slice(seen).at(-1));
      expect(told.body.text).toBe(TRY_AGAIN);
      const listed = await h.command('jobs');
      expect(listed.status).toBe(200);
      const jobs = await h.slack.waitFor(() => h.slack.responses.slice(seen + 1).at(-1));
      expect(jobs.body.text).toBe(TRY_AGAIN);
    } finally {
      proxy?.setDown(false);
    }
  });
});
