import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/config/policy.ts';
import { createApprovalPolicy } from '../../src/requests/approval/approvers.ts';
import { backfillHomeIndexes } from '../../src/requests/home-backfill.ts';
import { readInbox } from '../../src/requests/inbox.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, uniquePrefix } from '../helpers/redis.ts';

// The one-off backfill of the App Home's indexes for requests stored before them (issue 13), on the real Redis.
let redis: Redis;
let prefix: string;
let store: RequestStore;
const clock = new Date('2025-03-01T10:00:00Z');
const approvals = createApprovalPolicy(
  parsePolicy(
    'approvers: [U0LEAD]\nprojects:\n  - { name: shop-prod, uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10, channels: [C0PROD] }\n',
    'backfill.yml',
  ),
);

beforeAll(() => {
  redis = testRedis();
});
afterAll(async () => {
  await redis.quit();
});
beforeEach(() => {
  prefix = uniquePrefix('backfill');
  store = new RequestStore(redis, { prefix, now: () => clock });
});
afterEach(async () => {
  await deleteKeys(redis, prefix);
});

/** Removes the App Home's indexes, as a store written before they existed has none. */
async function withoutIndexes(): Promise<void> {
  for (const pattern of [`${prefix}:involving:*`, `${prefix}:requested-by:*`]) {
    const keys = await redis.keys(pattern);
    if (keys.length > 0) await redis.del(...keys);
  }
}

const inboxOf = (user: string) => readInbox({ store, approvals, now: () => clock }, user);

describe('App Home index backfill', () => {
  it('puts old requests back on the homes of those they name, live ones only in the involvement index; once', async () => {
    const live = await store.create(
      resizeRequest({ approvers: ['U0LEAD', 'S0LEADS'], escalateTo: ['U0BOSS'] }),
      'U0DEV',
    );
    const ended = await store.create(resizeRequest(), 'U0DEV');
    await store.transition(ended.id, { from: ['pending'], to: 'rejected', actor: 'U0LEAD' });
    await withoutIndexes();
    expect((await inboxOf('U0LEAD')).waiting).toEqual([]);

    expect(await backfillHomeIndexes(redis, prefix)).toEqual({ read: 2, done: true });
    expect((await inboxOf('U0LEAD')).waiting.map((r) => r.id)).toEqual([live.id]);
    expect((await inboxOf('U0DEV')).mine.map((r) => r.id).sort()).toEqual([live.id, ended.id].sort());
    for (const id of ['U0DEV', 'U0LEAD', 'S0LEADS', 'U0BOSS'])
      expect(await redis.zrange(`${prefix}:involving:${id}`, 0, -1)).toEqual([live.id]);
    // Scored by creation, as the store's own writes do.
    expect(Number(await redis.zscore(`${prefix}:involving:U0LEAD`, live.id))).toBe(clock.getTime());

    // Marked done: a second start reads nothing.
    await withoutIndexes();
    expect(await backfillHomeIndexes(redis, prefix)).toEqual({ read: 0, done: true });
    expect(await redis.exists(`${prefix}:involving:U0LEAD`)).toBe(0);
  });

  it('walks a large store in pages, resumes after a stop, and a page read twice changes nothing', async () => {
    const made = [];
    for (let i = 0; i < 330; i++)
      made.push(await store.create(resizeRequest({ requester: `U0DEV${i % 3}` }), 'U0DEV'));
    await withoutIndexes();
    let pages = 0;
    const first = await backfillHomeIndexes(redis, prefix, () => pages++ >= 1, 50);
    expect(first.done).toBe(false);
    expect(first.read).toBeGreaterThan(0);
    expect(first.read).toBeLessThan(330);
    const rest = await backfillHomeIndexes(redis, prefix, () => false, 50);
    expect(rest.done).toBe(true);
    expect(await redis.zcard(`${prefix}:involving:U0LEAD`)).toBe(330);
    // Each requester's own-requests index keeps its newest 100.
    expect(await redis.zcard(`${prefix}:requested-by:U0DEV0`)).toBe(100);
    console.info(`home index backfill: 330 requests in pages of 50, read ${first.read} + ${rest.read}`);
  });
});
