/**
 * `npm run bench:cluster`: the bot on one Redis against the bot on a local Redis Cluster of 3 masters (and 3
 * replicas), side by side, alternating. Two figures each round: click → API p50 (signed Approve clicks at 10/s on
 * pending requests, click sent → the resize reaching the cloud simulator) and approved requests per second (a
 * burst of Approve clicks, first click sent → last resize at the simulator). On a cluster every key of the bot sits
 * in one hash slot, so one master does all its work: the figures say what that costs against one Redis.
 *
 * Options: --rounds N (default 3), --clicks N (latency clicks per round, default 100), --burst N (default 300).
 */
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type LocalCluster, startLocalCluster } from '../sim/local-cluster.ts';
import { type LocalRedis, startLocalRedis } from '../sim/local-redis.ts';
import { loadEnv } from '../src/config/env.ts';
import {
  createRedis,
  type RedisClient,
  redisKeyPrefix,
  redisTarget,
} from '../src/config/redis-connection.ts';
import { RequestStore } from '../src/requests/store/store.ts';
import { ACTIONS } from '../src/slack/blocks/request-message.ts';
import { startBenchBot } from './lib/bot.ts';
import { BENCH } from './lib/identity.ts';
import { type LoadGenerator, startLoadGenerator } from './lib/load-generator.ts';
import { postRequestMessages } from './lib/pipeline.ts';
import { benchResize, createMany } from './lib/requests.ts';
import { type Sims, startSims } from './lib/sims.ts';
import { percentile, showSpread, spread } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    clicks: { type: 'string', default: '100' },
    burst: { type: 'string', default: '300' },
  },
});
const ROUNDS = Number(values.rounds);
const CLICKS = Number(values.clicks);
const BURST = Number(values.burst);
const FIRST_VMID = 70_000;
const logFile = join(tmpdir(), `cloudops-bench-cluster-${randomUUID().slice(0, 8)}.log`);
const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

interface Target {
  name: 'single' | 'cluster';
  /** Variables the bot gets for its Redis. */
  env: Record<string, string>;
  client: RedisClient;
}

interface Round {
  clickToApiP50: number;
  approvedPerSecond: number;
}

/** One round on `target`: a bot of its own, the latency run, then the burst run. */
async function round(target: Target, sims: Sims, load: LoadGenerator, offset: number): Promise<Round> {
  const envPrefix = `bench-${target.name}-${randomUUID().slice(0, 8)}`;
  const keyPrefix = redisKeyPrefix(loadEnv({ REDIS_PREFIX: envPrefix, ...target.env }));
  const bot = await startBenchBot(sims, {
    redisUrl: target.env.REDIS_URL ?? '',
    prefix: envPrefix,
    role: 'all',
    logLevel: 'warn',
    logFile,
    env: target.env,
  });
  const store = new RequestStore(target.client, { prefix: keyPrefix });
  const approver = {
    teamId: BENCH.teamId,
    channelId: BENCH.channel,
    userId: BENCH.approver,
    responseUrl: await sims.responseUrl(BENCH.channel, BENCH.approver),
  };
  /** Clicks Approve on `count` fresh pending requests; the time of each click and of each resize at the sim. */
  const approve = async (count: number, first: number, shape: 'rate' | 'burst') => {
    const created = await createMany(store, count, (i) => benchResize(sims.projectUuid, first + i));
    const pending = await postRequestMessages(store, created, sims, { approve: false });
    const since = performance.timeOrigin + performance.now();
    const result = await load.run({
      url: bot.eventsUrl,
      secret: BENCH.signingSecret,
      who: approver,
      kind: { type: 'action', actionId: ACTIONS.approve, values: pending.map((r) => r.id) },
      shape:
        shape === 'rate'
          ? { type: 'rate', perSecond: 10, durationMs: count * 100 }
          : { type: 'burst', count },
      connections: 10,
      timeoutMs: 20_000,
    });
    if (result.errors > 0) throw new Error(`${result.errors} clicks failed (${result.firstError})`);
    const deadline = performance.now() + 120_000;
    for (;;) {
      const times = await sims.callTimes(since);
      const apiAt = new Map<number, number>();
      for (const r of times.resizes) if (!apiAt.has(r.vmid)) apiAt.set(r.vmid, r.atMs);
      const done = pending.filter((r) => apiAt.has(r.vmid));
      if (done.length === pending.length || performance.now() > deadline)
        return { pending, sentAt: result.sentAtMs, apiAt };
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  try {
    const latency = await approve(CLICKS, FIRST_VMID + offset, 'rate');
    const toApi = latency.pending
      .map((r, i) => (latency.apiAt.get(r.vmid) ?? Number.NaN) - (latency.sentAt[i] ?? Number.NaN))
      .filter((ms) => Number.isFinite(ms))
      .sort((a, b) => a - b);
    const burst = await approve(BURST, FIRST_VMID + offset + CLICKS, 'burst');
    const firstSent = Math.min(...burst.sentAt);
    const lastApi = Math.max(...burst.apiAt.values());
    if (burst.apiAt.size < BURST) throw new Error(`${BURST - burst.apiAt.size} approved requests never ran`);
    return {
      clickToApiP50: percentile(toApi, 50),
      approvedPerSecond: BURST / ((lastApi - firstSent) / 1000),
    };
  } finally {
    await bot.stop();
  }
}

let single: LocalRedis | undefined;
let cluster: LocalCluster | undefined;
let sims: Sims | undefined;
let load: LoadGenerator | undefined;
const clients: RedisClient[] = [];
try {
  single = await startLocalRedis();
  cluster = await startLocalCluster({ masters: 3, replicas: 1 });
  log(`single Redis on ${single.url}; cluster ${cluster.nodesEnv}; bot logs in ${logFile}`);
  const targets: Target[] = [
    { name: 'single', env: { REDIS_URL: single.url } },
    { name: 'cluster', env: { REDIS_URL: 'redis://127.0.0.1:6379', REDIS_CLUSTER_NODES: cluster.nodesEnv } },
  ].map((t) => {
    const client = createRedis(redisTarget(loadEnv(t.env)), { maxRetriesPerRequest: null });
    clients.push(client);
    return { ...t, client } as Target;
  });
  const perRound = CLICKS + BURST;
  sims = await startSims({
    botToken: BENCH.botToken,
    teamId: BENCH.teamId,
    seedVms: { count: perRound * ROUNDS * targets.length, firstVmid: FIRST_VMID },
  });
  load = await startLoadGenerator();
  const results: Record<Target['name'], Round[]> = { single: [], cluster: [] };
  let offset = 0;
  for (let i = 0; i < ROUNDS; i++) {
    // Alternating, so a load that comes and goes on the machine falls on both.
    for (const target of i % 2 === 0 ? targets : targets.toReversed()) {
      const result = await round(target, sims, load, offset);
      offset += perRound;
      results[target.name].push(result);
      log(
        `round ${i + 1} ${target.name}: click → API p50 ${result.clickToApiP50.toFixed(1)} ms, ${result.approvedPerSecond.toFixed(0)} approved/s`,
      );
    }
  }
  const row = (name: Target['name']) => {
    const runs = results[name];
    return `| ${name === 'single' ? 'one Redis' : 'Redis Cluster, 3 masters + 3 replicas'} | ${showSpread(spread(runs.map((r) => r.approvedPerSecond)), 0)} | ${showSpread(spread(runs.map((r) => r.clickToApiP50)), 1, ' ms')} |`;
  };
  process.stdout.write(
    [
      `bench:cluster — ${ROUNDS} rounds each, ${BURST}-click bursts, ${CLICKS} clicks at 10/s; median (min–max)`,
      '',
      '| Redis | approved requests/s | click → API p50 |',
      '|---|---|---|',
      row('single'),
      row('cluster'),
      '',
    ].join('\n'),
  );
} finally {
  for (const client of clients) client.disconnect();
  await load?.close();
  await sims?.close();
  await cluster?.stop();
  await single?.stop();
}
