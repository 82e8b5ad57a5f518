import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startLocalRedis } from '../../sim/local-redis.ts';
import { type SentinelGroup, startSentinelGroup } from '../../sim/local-sentinel.ts';
import { loadEnv } from '../../src/config/env.ts';
import {
  createRedis,
  type RedisClient,
  redisTarget,
  watchReplicas,
} from '../../src/config/redis-connection.ts';
import { QUEUE_REDIS_OPTIONS } from '../../src/jobs/redis-options.ts';
import { NotReplicatedError, ReplicaAck } from '../../src/jobs/replica-ack.ts';
import { StartupError, waitForRedis } from '../../src/startup/checks.ts';

// A real master, a replica and three Sentinels of the test's own, on free ports.
let group: SentinelGroup;
const clients: RedisClient[] = [];
beforeAll(async () => {
  group = await startSentinelGroup({ downAfterMs: 1000, failoverTimeoutMs: 5000 });
}, 120_000);
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await group?.stop();
});

/** A client as the bot builds it from its environment. */
function botClient(env: Record<string, string>): RedisClient {
  const client = createRedis(redisTarget(loadEnv(env)), QUEUE_REDIS_OPTIONS);
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

/** Which nodes hold `key` in `db`: the port of every data node that has it. */
async function holders(key: string, db: number): Promise<number[]> {
  const found: number[] = [];
  for (const node of group.nodes) {
    // A node the test killed does not answer: it holds nothing.
    const direct = new Redis(node.port, '127.0.0.1', {
      db,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    direct.on('error', () => undefined);
    if ((await direct.get(key).catch(() => null)) !== null) found.push(node.port);
    direct.disconnect();
  }
  return found;
}

describe('Redis through Sentinels', () => {
  it('a critical write waits for the replicas the Sentinels see up (WAIT n), and fails when fewer acknowledge', async () => {
    const env = { REDIS_SENTINELS: group.sentinels, REDIS_SENTINEL_NAME: group.name };
    const redis = botClient(env);
    const replicas = watchReplicas(redisTarget(loadEnv(env)), 100);
    try {
      // One replica follows the master: the count the Sentinels give, and what a write waits for.
      await expect.poll(() => replicas.current()).toBe(1);
      const ack = new ReplicaAck(redis, replicas.current, 500);
      expect(await ack.durably(() => redis.set('sentinel-test:critical', '1'))).toBe('OK');
      // Waiting for a second replica that does not exist: refused, not taken as written.
      await expect(new ReplicaAck(redis, () => 2, 100).confirm()).rejects.toBeInstanceOf(NotReplicatedError);
    } finally {
      replicas.close();
    }

    const alone = await startLocalRedis();
    const lonely = createRedis({ url: alone.url, sentinelName: 'mymaster' }, QUEUE_REDIS_OPTIONS);
    lonely.on('error', () => undefined);
    clients.push(lonely);
    try {
      await lonely.set('critical', '1');
      await expect(new ReplicaAck(lonely, () => 1, 100).confirm()).rejects.toBeInstanceOf(NotReplicatedError);
      // Without Sentinels the bot does not wait: the same call is a no-op.
      await expect(new ReplicaAck(lonely, undefined, 100).confirm()).resolves.toBeUndefined();
    } finally {
      await alone.stop();
    }
  });

  it('finds the master through the Sentinels, writes there, and follows a failover to the new master', async () => {
    const redis = botClient({
      REDIS_SENTINELS: group.sentinels,
      REDIS_SENTINEL_NAME: group.name,
      // REDIS_URL gives only the db with Sentinels: its host is not where the bot connects.
      REDIS_URL: 'redis://unused.invalid:1/3',
    });
    await waitForRedis(redis, redisTarget(loadEnv({ REDIS_SENTINELS: group.sentinels })), 10_000);
    const first = await group.masterPort();
    expect(group.nodes.map((n) => n.port)).toContain(first);
    await redis.set('sentinel-test:before', '1');
    expect(await redis.call('ROLE').then((r) => (r as string[])[0])).toBe('master');
    // On the master, in REDIS_URL's db 3 (and replicated from there).
    expect(await holders('sentinel-test:before', 3)).toContain(first);

    const { to } = await group.failover();
    expect(to).not.toBe(first);
    // The same client, after the switch: its next writes reach the new master (the old one is not a master now).
    const deadline = Date.now() + 30_000;
    let wroteOn: number | undefined;
    while (Date.now() < deadline) {
      await redis.set('sentinel-test:after', 'x');
      const [role] = (await redis.call('ROLE')) as [string];
      const port = Number(((await redis.config('GET', 'port')) as string[])[1]);
      if (role === 'master' && port === to) {
        wroteOn = port;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(wroteOn).toBe(to);
    expect(await holders('sentinel-test:after', 3)).toContain(to);
  });

  it('says which Sentinels it could not reach, naming REDIS_SENTINELS', async () => {
    const nobody = await freePort();
    const target = redisTarget(
      loadEnv({ REDIS_SENTINELS: `127.0.0.1:${nobody}`, REDIS_SENTINEL_NAME: 'gone' }),
    );
    const redis = createRedis(target, { lazyConnect: false });
    redis.on('error', () => undefined);
    clients.push(redis);
    const failed = await waitForRedis(redis, target, 500).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(StartupError);
    expect((failed as Error).message).toBe(
      `REDIS_SENTINELS: no Redis answered at master "gone" of the Sentinels 127.0.0.1:${nobody} within 0.5 s`,
    );
  });

  // Last: it kills the group's master.
  it('after a crash (SIGKILL) of the master, every client and its duplicates write on the new master', async () => {
    const env = { REDIS_SENTINELS: group.sentinels, REDIS_SENTINEL_NAME: group.name };
    const bot = Array.from({ length: 6 }, () => botClient(env));
    // BullMQ's blocking connections are duplicates of the one it is given.
    for (const client of bot.slice(0, 2)) {
      const duplicate = client.duplicate();
      duplicate.on('error', () => undefined);
      clients.push(duplicate);
      bot.push(duplicate);
    }
    await Promise.all(bot.map((client) => client.ping()));
    const old = await group.master();
    // Writes go on while the master is gone, so reconnects are under way when the Sentinels switch.
    let stop = false;
    const writing = bot.map(async (client, i) => {
      while (!stop) {
        await client.set(`sentinel-test:crash:${i}`, '1').catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    });
    await old.kill();
    const to = await group.waitForNewMaster(old.port);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    stop = true;
    await Promise.all(writing);
    for (const [i, client] of bot.entries()) {
      await expect
        .poll(
          () => client.set(`sentinel-test:after-crash:${i}`, '1').catch((error: Error) => error.message),
          {
            timeout: 30_000,
          },
        )
        .toBe('OK');
    }
    expect(await holders('sentinel-test:after-crash:7', 0)).toEqual([to]);
  });
});
