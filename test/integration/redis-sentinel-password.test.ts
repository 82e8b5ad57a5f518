import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SentinelGroup, startSentinelGroup } from '../../sim/local-sentinel.ts';
import { loadEnv } from '../../src/config/env.ts';
import {
  createRedis,
  type RedisClient,
  redisTarget,
  watchReplicas,
} from '../../src/config/redis-connection.ts';

// Sentinels that ask for a password of their own (their `requirepass`): a master, two replicas and one Sentinel of this
// file's own, the Sentinel's default user given a password once the group is up.
const SENTINEL_PASSWORD = 'sentinel-pw-2c81';
let group: SentinelGroup;
const clients: RedisClient[] = [];
beforeAll(async () => {
  group = await startSentinelGroup({ replicas: 2, sentinels: 1, quorum: 1 });
  const port = group.sentinelPorts[0]!;
  const sentinel = new Redis(port, '127.0.0.1');
  await sentinel.call('ACL', 'SETUSER', 'default', 'resetpass', `>${SENTINEL_PASSWORD}`);
  sentinel.disconnect();
}, 120_000);
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await group?.stop();
});

/** A client as the bot builds it from its environment, giving up after one try. */
function botClient(env: Record<string, string>): RedisClient {
  const client = createRedis(redisTarget(loadEnv({ REDIS_SENTINELS: group.sentinels, ...env })), {
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    sentinelRetryStrategy: () => null,
    connectTimeout: 3_000,
  });
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

describe('REDIS_SENTINEL_PASSWORD', { timeout: 60_000 }, () => {
  it('finds the master through Sentinels that ask for a password, and writes to it', async () => {
    const redis = botClient({ REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD });
    await redis.set('sentinel-password-test:key', 'written');
    expect(await redis.get('sentinel-password-test:key')).toBe('written');
    expect(await redis.call('ROLE').then((r) => (r as string[])[0])).toBe('master');
    await redis.del('sentinel-password-test:key');
  });

  it('without it, the Sentinels refuse to name the master: nothing is written', async () => {
    const redis = botClient({});
    // The connection ends (no retry here); the queued write fails with it.
    await expect(redis.set('sentinel-password-test:refused', 'x')).rejects.toThrow();
    const direct = new Redis(await group.masterPort(), '127.0.0.1');
    expect(await direct.exists('sentinel-password-test:refused')).toBe(0);
    direct.disconnect();
  });

  it('the replica watch asks the Sentinels with it too: it counts both replicas (without it, its floor of 1)', async () => {
    const target = redisTarget(
      loadEnv({ REDIS_SENTINELS: group.sentinels, REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD }),
    );
    const watch = watchReplicas(target, 100);
    try {
      await expect.poll(() => watch.current(), { timeout: 10_000 }).toBe(2);
    } finally {
      watch.close();
    }
    const refused = watchReplicas(redisTarget(loadEnv({ REDIS_SENTINELS: group.sentinels })), 100);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(refused.current()).toBe(1);
    refused.close();
  });

  it('set without REDIS_SENTINELS: a start-up error naming it, with no value echoed', () => {
    expect(() => loadEnv({ REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD })).toThrow(
      /REDIS_SENTINEL_PASSWORD: set without REDIS_SENTINELS/,
    );
    try {
      loadEnv({ REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD });
    } catch (error) {
      expect(String((error as Error).message)).not.toContain(SENTINEL_PASSWORD);
    }
  });
});
