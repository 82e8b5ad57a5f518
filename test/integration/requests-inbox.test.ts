import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/config/policy.ts';
import { createApprovalPolicy } from '../../src/requests/approval/approvers.ts';
import { readInbox } from '../../src/requests/inbox.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { deleteKeys, testRedis, uniquePrefix } from '../helpers/redis.ts';

let redis: Redis;
let prefix: string;
let clock: Date;
let store: RequestStore;
const approvals = createApprovalPolicy(
  parsePolicy(
    'approvers: [U0LEAD]\nprojects:\n  - { name: shop-prod, uuid: 0b6f7c1e-3d2a-4c55-9a53-2f1a4e8b9c10, channels: [C0PROD] }\n',
    'inbox.yml',
  ),
);

beforeAll(() => {
  redis = testRedis();
});
afterAll(async () => {
  await redis.quit();
});
beforeEach(() => {
  prefix = uniquePrefix('inbox');
  clock = new Date('2025-03-01T10:00:00Z');
  store = new RequestStore(redis, { prefix, now: () => clock, retentionDays: 1 });
});
afterEach(async () => {
  await deleteKeys(redis, prefix);
});

const inboxOf = (user: string) => readInbox({ store, approvals, now: () => clock }, user);

describe('involvement index and inbox', () => {
  it('a request is listed for its requester and approvers until it is final, then leaves their index', async () => {
    const request = await store.create(resizeRequest({ approvers: ['U0LEAD', 'U0LEAD2'] }), 'U0DEV');
    for (const person of ['U0DEV', 'U0LEAD', 'U0LEAD2']) {
      expect((await store.listInvolving(person)).requests.map((r) => r.id)).toEqual([request.id]);
    }
    expect((await store.listInvolving('U0OTHER')).total).toBe(0);
    expect((await inboxOf('U0LEAD')).waiting.map((r) => r.id)).toEqual([request.id]);
    // The requester is listed, but the approval policy says they may not approve their own.
    expect((await inboxOf('U0DEV')).waiting).toEqual([]);
    expect((await inboxOf('U0DEV')).mine.map((r) => r.id)).toEqual([request.id]);

    await store.transition(request.id, { from: ['pending'], to: 'rejected', actor: 'U0LEAD' });
    for (const person of ['U0DEV', 'U0LEAD', 'U0LEAD2']) {
      expect(await redis.zcard(`${prefix}:involving:${person}`)).toBe(0);
    }
    expect((await inboxOf('U0DEV')).mine.map((r) => r.state)).toEqual(['rejected']);
  });

  it('a scheduled run waiting for its time is listed for those who may cancel it', async () => {
    const request = await store.create(resizeRequest({ runAt: '2025-03-02T10:00:00Z' }), 'U0DEV');
    await store.transition(request.id, { from: ['pending'], to: 'approved', actor: 'U0LEAD' });
    await store.transition(request.id, { from: ['approved'], to: 'queued', actor: 'cloudops' });
    expect((await inboxOf('U0LEAD')).scheduled.map((r) => r.id)).toEqual([request.id]);
    expect((await inboxOf('U0DEV')).scheduled.map((r) => r.id)).toEqual([request.id]);
    expect((await inboxOf('U0LEAD')).waiting).toEqual([]);
  });

  it('an expired-but-not-yet-swept request is not offered for approval; retention removes the own-requests entry', async () => {
    const request = await store.create(resizeRequest({ expiresAt: '2025-03-01T11:00:00Z' }), 'U0DEV');
    clock = new Date('2025-03-01T12:00:00Z');
    expect((await inboxOf('U0LEAD')).waiting).toEqual([]);
    await store.transition(request.id, { from: ['pending'], to: 'expired', actor: 'cloudops' });
    clock = new Date('2025-03-03T12:00:00Z');
    expect(await store.removeExpired()).toBe(1);
    expect(await redis.zcard(`${prefix}:requested-by:U0DEV`)).toBe(0);
  });

  it('an id whose request is gone leaves the index when it is read', async () => {
    const request = await store.create(resizeRequest(), 'U0DEV');
    await redis.del(`${prefix}:req:${request.id}`);
    expect(await store.listInvolving('U0LEAD')).toEqual({ requests: [], total: 0 });
    expect(await redis.zcard(`${prefix}:involving:U0LEAD`)).toBe(0);
  });
});
