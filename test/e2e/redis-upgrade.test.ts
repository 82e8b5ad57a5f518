import { readFile } from 'node:fs/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentControls } from '../../src/mcp/agent-state.ts';
import { CHANNELS, type Harness, PROD_UUID, startHarness, USERS } from '../helpers/harness.ts';
import { deleteKeys, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';

// An upgrade from 0.4.0: this release's bot started on the keys 0.4.0 wrote. test/fixtures/redis-0.4.0.json holds
// them as 0.4.0's whole bot (commit cfad5e2, ROLE=all, the e2e harness) left them: a lease that ran (VM 101 to 4
// cores for 48 h, its return due), a request waiting for its approval (VM 102 to 6 cores), a daily digest in
// C0PROD and a disabled agent, with the queues' jobs. Each key is RESTOREd under a prefix of this test's own.
interface Fixture {
  now: string;
  requests: {
    pending: string;
    lease: string;
    pendingMessage: { ts: string; text?: string; blocks?: unknown[] };
  };
  keys: { key: string; pttl: number; dump: string }[];
}
const fixture = JSON.parse(
  await readFile(new URL('../fixtures/redis-0.4.0.json', import.meta.url), 'utf8'),
) as Fixture;
const HOUR = 3_600_000;

const prefix = uniquePrefix('upgrade');
let h: Harness;
beforeAll(async () => {
  const redis = new Redis(testRedisUrl());
  try {
    for (const { key, pttl, dump } of fixture.keys)
      await redis.restore(`${prefix}${key}`, pttl > 0 ? pttl : 0, Buffer.from(dump, 'base64'));
  } finally {
    redis.disconnect();
  }
  h = await startHarness({
    role: 'all',
    now: new Date(fixture.now),
    env: () => ({ REDIS_PREFIX: prefix }),
    startOptions: { duePolicy: { pollMs: 50, leaseMs: 60_000, batch: 50 } },
  });
}, 120_000);
afterAll(async () => {
  await h?.close();
  const redis = new Redis(testRedisUrl());
  await deleteKeys(redis, prefix);
  redis.disconnect();
});

describe('upgrading from 0.4.0: the new bot on the old keys', { timeout: 120_000 }, () => {
  it('reads every request 0.4.0 stored, and the disabled agent stays disabled', async () => {
    expect(h.prefix).toBe(prefix);
    expect(await h.store.get(fixture.requests.pending)).toMatchObject({ state: 'pending', vmid: 102 });
    expect(await h.store.get(fixture.requests.lease)).toMatchObject({
      state: 'succeeded',
      vmid: 101,
      leaseOpen: true,
    });
    expect(await new AgentControls(h.redis as Redis, h.prefix).isDisabled('deploy-bot')).toBe(true);
  });

  it('the request 0.4.0 left waiting is approved and runs once', async () => {
    const posts = () => h.sim.calls.filter((c) => c.method === 'POST' && c.path.includes('/vm/102/')).length;
    const message = fixture.requests.pendingMessage;
    await h.click('approve', fixture.requests.pending, USERS.lead, CHANNELS.prod, message);
    await h.waitForRequest(fixture.requests.pending, (r) => r.state === 'succeeded', 30_000);
    expect(h.sim.vm(PROD_UUID, 102).cores).toBe(6);
    await h.click('approve', fixture.requests.pending, USERS.lead2, CHANNELS.prod, message);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(posts()).toBe(1);
  });

  it('the lease 0.4.0 opened ends on time: its thread gets the offer to return or keep it', async () => {
    h.clock.advance(48 * HOUR + 60_000);
    const lease = await h.store.get(fixture.requests.lease);
    await h.slack.waitFor(
      () =>
        h.slack
          .thread(CHANNELS.prod, lease!.messageTs!)
          .find((m) => (m.text ?? '').includes('The temporary increase of')),
      30_000,
    );
  });
});
