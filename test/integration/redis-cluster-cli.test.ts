import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.ts';
import { freePort, type LocalRedis, startLocalRedis } from '../../sim/local-redis.ts';
import { AuditCursor } from '../../src/audit-export/cursor.ts';
import { clusterHealth } from '../../src/config/cluster-health.ts';
import { loadEnv } from '../../src/config/env.ts';
import {
  createRedis,
  type RedisClient,
  redisKeyPrefix,
  redisTarget,
} from '../../src/config/redis-connection.ts';
import { QUEUE_REDIS_OPTIONS } from '../../src/jobs/redis-options.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { StartupError, waitForRedis } from '../../src/startup/checks.ts';
import { resizeRequest } from '../fixtures/requests.ts';
import { runProcess } from '../helpers/run-process.ts';

// The operator's side of a Redis Cluster: `cloudops doctor` and `cloudops audit` (the shipped binary, dist/ built by
// the global setup) against 3 masters and 3 replicas of this file's own; the one line when a node is gone; the
// start-up line when no node answers.
const BIN = join(fileURLToPath(new URL('../../', import.meta.url)), 'bin', 'cloudops.mjs');

let cluster: LocalCluster;
let env: Record<string, string>;
const clients: RedisClient[] = [];
beforeAll(async () => {
  cluster = await startLocalCluster({ masters: 3, replicas: 1 });
  env = {
    REDIS_URL: 'redis://unused.invalid:1',
    REDIS_CLUSTER_NODES: cluster.nodesEnv,
    REDIS_PREFIX: 'ops-eu',
  };
}, 120_000);
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await cluster?.stop();
});

function client(): RedisClient {
  const redis = createRedis(redisTarget(loadEnv(env)), QUEUE_REDIS_OPTIONS);
  redis.on('error', () => undefined);
  clients.push(redis);
  return redis;
}

function cli(
  args: string[],
  overrides: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runProcess(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env, ...overrides },
  });
}

describe('the operator CLI on a Redis Cluster', () => {
  it('cloudops audit reads the audit log under the hash tag', async () => {
    const store = new RequestStore(client(), { prefix: redisKeyPrefix(loadEnv(env)) });
    const request = await store.create(resizeRequest(), 'U0DEV');
    const run = await cli(['audit', '--since', '1h', '--json']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const entries = run.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { request_id: string; act: string });
    expect(entries.filter((e) => e.request_id === request.id).map((e) => e.act)).toEqual([
      'created',
      'pending',
    ]);
  });

  it('the audit export keeps its cursor and lease under the hash tag: read, acknowledged, nothing left', async () => {
    const prefix = redisKeyPrefix(loadEnv(env));
    const redis = client();
    const store = new RequestStore(redis, { prefix, exportsAudit: true });
    const cursor = new AuditCursor(redis, prefix);
    await cursor.ensureGroup();
    expect(await cursor.hold(10_000)).toBe(true);
    const request = await store.create(resizeRequest(), 'U0DEV');
    let shipped: string[] = [];
    for (;;) {
      const batch = await cursor.take(100);
      if (batch.ids.length === 0) break;
      shipped = [...shipped, ...batch.entries.filter((e) => e.requestId === request.id).map((e) => e.state)];
      await cursor.ack(batch.ids);
    }
    expect(shipped).toEqual(['created', 'pending']);
    expect(await cursor.backlog()).toBe(0);
    expect(await store.removeExpired()).toBe(0);
    await cursor.release();
  });

  it('cloudops doctor gives the cluster in one line and checks every master', async () => {
    const run = await cli(['doctor', '--json']);
    const checks = (JSON.parse(run.stdout) as { checks: { id: string; status: string; summary: string }[] })
      .checks;
    const byId = (id: string) => checks.find((c) => c.id === id);
    expect(byId('redis')?.summary).toBe(`Redis answers at the Redis Cluster at ${cluster.nodesEnv}`);
    expect(byId('redis.cluster')).toEqual({
      id: 'redis.cluster',
      status: 'ok',
      summary: 'Redis Cluster: 6 of 6 nodes answering, 16384 of 16384 slots covered (3 masters, state ok)',
    });
    expect(byId('redis.maxmemory-policy')?.status).toBe('ok');
    // The local nodes keep nothing on disk: the worst master says so.
    expect(byId('redis.persistence')?.status).toBe('warn');
  });

  it('says how many nodes answer when one is gone', async () => {
    const redis = client();
    await waitForRedis(redis, redisTarget(loadEnv(env)), 10_000);
    expect(redis).toBeInstanceOf(Cluster);
    const masters = new Set((redis as Cluster).nodes('master').map((n) => n.options.port));
    // A replica: the slots stay covered, one node fewer answers.
    const replica = cluster.nodes.find((n) => !masters.has(n.port));
    expect(replica).toBeDefined();
    await replica!.kill();
    const health = await clusterHealth(redis as Cluster, 500);
    expect(health.line).toMatch(/^Redis Cluster: 5 of 6 nodes answering, 16384 of 16384 slots covered/);
    expect(health.answering).toBe(5);
  });

  it('start-up names REDIS_CLUSTER_NODES when no node answers', async () => {
    const nobody = await freePort();
    const target = redisTarget(loadEnv({ REDIS_CLUSTER_NODES: `127.0.0.1:${nobody}` }));
    const redis = createRedis(target, { lazyConnect: false });
    redis.on('error', () => undefined);
    clients.push(redis);
    const failed = await waitForRedis(redis, target, 500).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(StartupError);
    expect((failed as Error).message).toBe(
      `REDIS_CLUSTER_NODES: no Redis answered at the Redis Cluster at 127.0.0.1:${nobody} within 0.5 s`,
    );
  });

  it('start-up says the cluster wants a password, or refused it, at once', async () => {
    const guarded = await startLocalCluster({ masters: 3, replicas: 0, password: 'cluster-pw-7f3a' });
    try {
      for (const [url, line] of [
        ['redis://x', /^REDIS_URL: Redis at the Redis Cluster at .* wants a password \(NOAUTH\)/],
        [
          'redis://:wrong-pw-1234@x',
          /^REDIS_URL: Redis at the Redis Cluster at .* refused the user name or password/,
        ],
      ] as const) {
        const target = redisTarget(loadEnv({ REDIS_URL: url, REDIS_CLUSTER_NODES: guarded.nodesEnv }));
        const redis = createRedis(target, { lazyConnect: false });
        redis.on('error', () => undefined);
        clients.push(redis);
        const failed = await waitForRedis(redis, target, 5_000).catch((error: unknown) => error);
        expect(failed).toBeInstanceOf(StartupError);
        expect((failed as Error).message).toMatch(line);
        expect((failed as Error).message).not.toContain('wrong-pw-1234');
      }
    } finally {
      await guarded.stop();
    }
  }, 120_000);
});

describe('a cluster named where a single Redis belongs, and the other way round', () => {
  let single: LocalRedis;
  beforeAll(async () => {
    single = await startLocalRedis();
  });
  afterAll(async () => {
    await single?.stop();
  });

  const standaloneNodes = () => `127.0.0.1:${new URL(single.url).port}`;
  const clusterNodeUrl = () => `redis://127.0.0.1:${cluster.nodes[0]!.port}`;

  it('start-up: REDIS_CLUSTER_NODES naming a Redis not in cluster mode says so at once, with what to set', async () => {
    const target = redisTarget(loadEnv({ REDIS_CLUSTER_NODES: standaloneNodes() }));
    const redis = createRedis(target, { lazyConnect: false });
    redis.on('error', () => undefined);
    clients.push(redis);
    const failed = await waitForRedis(redis, target, 20_000).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(StartupError);
    expect((failed as Error).message).toBe(
      `REDIS_CLUSTER_NODES: the Redis at ${standaloneNodes()} is not in cluster mode: set REDIS_URL to it instead (and leave REDIS_CLUSTER_NODES empty), or name the nodes of a Redis Cluster`,
    );
  });

  it('start-up: REDIS_URL pointing at a node of a Redis Cluster says so, with what to set', async () => {
    const target = redisTarget(loadEnv({ REDIS_URL: clusterNodeUrl() }));
    const redis = createRedis(target, { lazyConnect: false });
    redis.on('error', () => undefined);
    clients.push(redis);
    const failed = await waitForRedis(redis, target, 20_000).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(StartupError);
    expect((failed as Error).message).toBe(
      `REDIS_URL: the Redis at ${clusterNodeUrl()} is a node of a Redis Cluster: set REDIS_CLUSTER_NODES to its nodes (host:port,host:port,…) instead`,
    );
  });

  it('cloudops doctor names each mix-up as a failure with what to set', async () => {
    for (const [overrides, variable, fix] of [
      [
        { REDIS_CLUSTER_NODES: standaloneNodes(), REDIS_URL: 'redis://x' },
        'REDIS_CLUSTER_NODES',
        /REDIS_URL/,
      ],
      [{ REDIS_CLUSTER_NODES: '', REDIS_URL: clusterNodeUrl() }, 'REDIS_URL', /REDIS_CLUSTER_NODES/],
    ] as const) {
      const run = await cli(['doctor', '--json'], overrides);
      expect(run.code).toBe(1);
      const checks = (
        JSON.parse(run.stdout) as { checks: { id: string; status: string; summary: string; fix?: string }[] }
      ).checks;
      const redis = checks.find((c) => c.id === 'redis');
      expect(redis?.status).toBe('fail');
      expect(redis?.summary).toMatch(new RegExp(`^${variable}: the Redis at `));
      expect(redis?.fix).toMatch(fix);
    }
  });
});
