import { randomUUID } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { expect, inject } from 'vitest';

/** The Redis URL the global setup found or started. */
export function testRedisUrl(): string {
  return inject('redisUrl');
}

/** A key prefix no other test uses; every key a test writes starts with it. */
export function uniquePrefix(name = 'test'): string {
  return `cloudops-test-${name}-${randomUUID().slice(0, 8)}`;
}

/** Deletes every key under `prefix` (only keys this test created: never FLUSHDB); on a cluster, on every master. */
export async function deleteKeys(redis: Redis | Cluster, prefix: string): Promise<void> {
  for (const key of await keysUnder(redis, prefix)) await redis.del(key);
}

/** Every key under `prefix`, sorted; on a cluster, of every master. */
export async function keysUnder(redis: Redis | Cluster, prefix: string): Promise<string[]> {
  const found: string[] = [];
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      cursor = next;
      found.push(...keys);
    } while (cursor !== '0');
  }
  return found.sort();
}

/** A plain ioredis client on the test Redis, with BullMQ's required option. */
export function testRedis(): Redis {
  return new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
}

/**
 * `BGSAVE` on the Redis at `url` (one a test started, never the shared one), resolving once the snapshot is on disk
 * (`dump.rdb` in its directory): LASTSAVE has moved on and no save is running.
 */
export async function snapshotRedis(url: string): Promise<void> {
  const admin = new Redis(url);
  try {
    const before = await admin.lastsave();
    // LASTSAVE counts seconds: a snapshot in the same second as the last one would not show.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await admin.bgsave();
    await expect
      .poll(
        async () => {
          const info = await admin.info('persistence');
          return !/rdb_bgsave_in_progress:1/.test(info) && (await admin.lastsave()) > before
            ? /rdb_last_bgsave_status:(\w+)/.exec(info)?.[1]
            : 'saving';
        },
        { timeout: 20_000 },
      )
      .toBe('ok');
  } finally {
    admin.disconnect();
  }
}
