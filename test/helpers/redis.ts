import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { inject } from 'vitest';

/** The Redis URL the global setup found or started. */
export function testRedisUrl(): string {
  return inject('redisUrl');
}

/** A key prefix no other test uses; every key a test writes starts with it. */
export function uniquePrefix(name = 'test'): string {
  return `cloudops-test-${name}-${randomUUID().slice(0, 8)}`;
}

/** Deletes every key under `prefix` (only keys this test created: never FLUSHDB). */
export async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

/** A plain ioredis client on the test Redis, with BullMQ's required option. */
export function testRedis(): Redis {
  return new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
}
