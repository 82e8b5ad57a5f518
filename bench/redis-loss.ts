/**
 * What a Redis failover or a crash of the master loses: acknowledged writes missing on the master afterwards.
 * Each run starts its own master + replica + 3 Sentinels, runs writers that SET one key after another (a write
 * counts once its client said OK), then either `SENTINEL FAILOVER` or SIGKILL of the master in the middle, waits
 * until the Sentinels' new master is settled, and counts the acknowledged keys it lacks.
 *
 * Clients: `plain` (ioredis through the Sentinels, no options), `bot` (createRedis: READONLY/NOREPLICAS reconnect
 * and resend, failover detector), `bot+wait` (the same, and a write counts only once the bot's ReplicaAck confirmed
 * it: `WAIT n <ms>`, n the replicas the Sentinels see up, as the bot's critical writes do when Sentinels are set;
 * has it, as the bot's critical writes do when Sentinels are configured).
 *
 *   node --import tsx bench/redis-loss.ts [--runs 3] [--writers 8] [--ms 5000] [--only bot,bot+wait] [--events failover,crash]
 *     [--replicas 1] [--min-replicas-to-write 0] [--after-ms 2500]
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { type SentinelGroup, startSentinelGroup } from '../sim/local-sentinel.ts';
import {
  createRedis,
  type RedisClient,
  type RedisTarget,
  watchReplicas,
} from '../src/config/redis-connection.ts';
import { ReplicaAck } from '../src/jobs/replica-ack.ts';
import { median, percentile } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    writers: { type: 'string', default: '8' },
    ms: { type: 'string', default: '5000' },
    only: { type: 'string', default: 'plain,bot,bot+wait' },
    events: { type: 'string', default: 'failover,crash' },
    replicas: { type: 'string', default: '1' },
    'min-replicas-to-write': { type: 'string', default: '0' },
    /** How long the writers go on after the event (default half of --ms). */
    'after-ms': { type: 'string' },
  },
});
const RUNS = Number(values.runs);
const WRITERS = Number(values.writers);
const WRITE_MS = Number(values.ms);
const CLIENTS = values.only.split(',') as ClientKind[];
const EVENTS = values.events.split(',') as EventKind[];
const REPLICAS = Number(values.replicas);
const MIN_REPLICAS = Number(values['min-replicas-to-write']);
const AFTER_MS = values['after-ms'] === undefined ? WRITE_MS / 2 : Number(values['after-ms']);

type ClientKind = 'plain' | 'bot' | 'bot+wait';
type EventKind = 'failover' | 'crash';

interface RunResult {
  acknowledged: number;
  lost: number;
  failedWrites: number;
  /** The longest time without an acknowledged write that survived (up to the end of the writes). */
  longestStallMs: number;
  writesPerSecond: number;
  /** WAIT's own time before the event (bot+wait only), p50 and p99. */
  waitP50Ms: number;
  waitP99Ms: number;
  errors: Record<string, number>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function client(kind: ClientKind, group: SentinelGroup, target: RedisTarget): RedisClient {
  const redis =
    kind === 'plain'
      ? new Redis({ sentinels: target.sentinels, name: group.name, maxRetriesPerRequest: null })
      : createRedis(target, { maxRetriesPerRequest: null });
  redis.on('error', () => undefined);
  return redis;
}

/** The group of the run under way, stopped when the bench is interrupted (its servers would outlive it). */
let current: SentinelGroup | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void (current?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

async function once(kind: ClientKind, event: EventKind): Promise<RunResult> {
  const group = await startSentinelGroup({
    downAfterMs: 1000,
    failoverTimeoutMs: 5000,
    replicas: REPLICAS,
    nodeArgs:
      MIN_REPLICAS > 0
        ? ['--min-replicas-to-write', String(MIN_REPLICAS), '--min-replicas-max-lag', '10']
        : [],
  });
  current = group;
  const target: RedisTarget = {
    url: 'redis://127.0.0.1',
    sentinels: group.sentinelPorts.map((port) => ({ host: '127.0.0.1', port })),
    sentinelName: group.name,
  };
  const redis = client(kind, group, target);
  const replicas = kind === 'bot+wait' ? watchReplicas(target) : undefined;
  const ack = new ReplicaAck(redis, replicas?.current);
  try {
    await redis.ping();
    const acked: { key: string; at: number }[] = [];
    let failedWrites = 0;
    /** Why writes failed, with how often. */
    const errors = new Map<string, number>();
    let stop = false;
    /** How long each WAIT took before the event: the cost of a critical write in normal operation. */
    const waits: number[] = [];
    let eventStarted = false;
    const writer = async (w: number) => {
      for (let i = 0; !stop; i++) {
        const key = `loss:${w}:${i}`;
        try {
          // A client without the bot's resend would spin on READONLY errors: each try is bounded.
          await withTimeout(redis.set(key, '1'), 3000);
          if (kind === 'bot+wait') {
            const waitStarted = performance.now();
            await withTimeout(ack.confirm(), 3000);
            if (!eventStarted) waits.push(performance.now() - waitStarted);
          }
          acked.push({ key, at: performance.now() });
        } catch (error) {
          failedWrites++;
          const message = (error as Error).message.slice(0, 80);
          errors.set(message, (errors.get(message) ?? 0) + 1);
          await sleep(20);
        }
      }
    };
    const started = performance.now();
    const writers = Array.from({ length: WRITERS }, (_, w) => writer(w));
    await sleep(WRITE_MS / 2);
    const oldMaster = await group.master();
    eventStarted = true;
    if (event === 'failover') await group.failover();
    else {
      await oldMaster.kill();
      await group.waitForNewMaster(oldMaster.port);
    }
    await sleep(AFTER_MS);
    const ended = performance.now();
    stop = true;
    await Promise.all(writers);
    const elapsed = performance.now() - started;
    // A failed-over old master rejoins as a replica and drops what the others never had: wait for that first.
    if (event === 'failover') await group.waitForReplicas();
    const master = new Redis(await group.masterPort(), '127.0.0.1');
    const exists = master.pipeline();
    for (const { key } of acked) exists.exists(key);
    const found = ((await exists.exec()) ?? []).map(([, n]) => Number(n) === 1);
    master.disconnect();
    const lost = found.filter((f) => !f).length;
    // The longest time without an acknowledged write that survived, up to the end of the writes.
    const kept = acked.filter((_, i) => found[i]).map((a) => a.at);
    let longestStallMs = 0;
    for (const [i, at] of [...kept, ended].entries())
      longestStallMs = Math.max(longestStallMs, at - (kept[i - 1] ?? started));
    return {
      acknowledged: acked.length,
      lost,
      failedWrites,
      longestStallMs: Math.round(longestStallMs),
      writesPerSecond: Math.round((acked.length * 1000) / elapsed),
      waitP50Ms: percentile(
        waits.sort((a, b) => a - b),
        50,
      ),
      waitP99Ms: percentile(waits, 99),
      errors: Object.fromEntries(errors),
    };
  } finally {
    replicas?.close();
    redis.disconnect();
    await group.stop();
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timed out')), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

const spread = (values: number[]) => `${Math.min(...values)}–${Math.max(...values)}`;

process.stdout.write(
  `redis-loss: median (min–max) of ${RUNS} run(s) per case, ${WRITERS} writers, ${WRITE_MS / 2} ms of writes, the event, ${AFTER_MS} ms of writes; ${REPLICAS} replica(s), min-replicas-to-write ${MIN_REPLICAS}\n\n`,
);
process.stdout.write(
  '| event | client | acknowledged | lost | failed writes | longest stall without a surviving write (ms) | writes/s | WAIT p50 / p99 before the event (ms) |\n|---|---|---|---|---|---|---|---|\n',
);
for (const event of EVENTS) {
  for (const kind of CLIENTS) {
    const results: RunResult[] = [];
    for (let r = 0; r < RUNS; r++) {
      const result = await once(kind, event);
      process.stderr.write(`[redis-loss] ${event} ${kind} run ${r + 1}: ${JSON.stringify(result)}\n`);
      results.push(result);
    }
    const col = (pick: (r: RunResult) => number, digits = 0) => {
      const v = results.map(pick).map((x) => Number(x.toFixed(digits)));
      return `${Number(median(v).toFixed(digits))} (${spread(v)})`;
    };
    const waits = kind === 'bot+wait' ? `${col((r) => r.waitP50Ms, 2)} / ${col((r) => r.waitP99Ms, 2)}` : '–';
    process.stdout.write(
      `| ${event} | ${kind} | ${col((r) => r.acknowledged)} | ${col((r) => r.lost)} | ${col((r) => r.failedWrites)} | ${col((r) => r.longestStallMs)} | ${col((r) => r.writesPerSecond)} | ${waits} |\n`,
    );
  }
}
