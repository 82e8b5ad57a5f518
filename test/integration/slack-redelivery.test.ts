import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DELIVERY_TTL_SECONDS, GUARD_TIMEOUT_MS, RedeliveryGuard } from '../../src/slack/redelivery.ts';
import { type SlowTcpProxy, startSlowTcpProxy } from '../helpers/proxies.ts';
import { deleteKeys, testRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';

// The redelivery guard on real Redis: once per delivery across processes, bounded in time when Redis is slow.
const prefix = uniquePrefix('redelivery');
let redis: Redis;
let proxy: SlowTcpProxy;
let slow: Redis;

beforeAll(async () => {
  redis = testRedis();
  proxy = await startSlowTcpProxy(testRedisUrl());
  slow = new Redis(proxy.url, { maxRetriesPerRequest: 1 });
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
  slow.disconnect();
  await proxy.close();
});

describe('RedeliveryGuard', () => {
  it('lets the first delivery through and stops the next with its answer, from any client of the Redis, for an hour', async () => {
    const one = new RedeliveryGuard(redis, prefix);
    const other = new RedeliveryGuard(slow, prefix);
    const body = { type: 'view_submission', trigger_id: '123.456.first' };
    expect(await one.check(body)).toEqual({ first: true });
    expect(await one.check(body)).toEqual({ first: false, answer: undefined });
    // The answer it got is kept with the mark, for every later delivery.
    const answer = { response_action: 'errors', errors: { cores: 'must be from 1 to 32' } };
    await one.remember(body, answer);
    expect(await other.check({ ...body })).toEqual({ first: false, answer });
    expect(await one.check({ ...body, trigger_id: '123.456.second' })).toEqual({ first: true });
    const ttl = await redis.ttl(`${prefix}:delivery:trigger:123.456.first`);
    expect(ttl).toBeGreaterThan(DELIVERY_TTL_SECONDS - 5);
    expect(ttl).toBeLessThanOrEqual(DELIVERY_TTL_SECONDS);
  });

  it('a Redis slower than the guard may wait: it gives up in time, and the late write still marks the delivery', async () => {
    const guard = new RedeliveryGuard(slow, prefix);
    proxy.setDelay(1_000);
    const body = { event_id: 'Ev0SLOW', event: { type: 'app_mention' } };
    // Rejected, not answered: the guard gave up at its own deadline instead of waiting the second out.
    await expect(guard.check(body)).rejects.toThrow(`Redis did not answer within ${GUARD_TIMEOUT_MS} ms`);
    proxy.setDelay(0);
    await proxy.drained();
    await new Promise((r) => setTimeout(r, 100));
    expect(await new RedeliveryGuard(redis, prefix).check(body)).toEqual({ first: false, answer: undefined });
  });
});
