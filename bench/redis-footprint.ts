/**
 * What the bot keeps in Redis as history grows (issue 16 item 5, docs/operations.md#retention). The whole bot runs in this
 * process (ROLE=all, retention_days 30, an injected clock) on a redis-server of the bench's own, against the
 * simulators; rounds of approved requests run through to their final states (execute → API → thread replies).
 * After each round the bench counts the bytes held under the bot's prefix (MEMORY USAGE of every key), then moves
 * the clock past retention_days, lets the bot's retention sweep run, and counts again.
 *
 *   npm run bench:redis -- [--round 250] [--rounds 6] [--runs 3]
 *
 * Keys with a TTL (send markers, reply records: 3 days of real time) are counted apart: they go by themselves, and
 * the moved clock cannot age them. Finished BullMQ jobs go a day after they finish (and past a count cap): after the
 * clock move the bench asks the bot's sweep for what it removes a day later (finished jobs of any age).
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { startLocalRedis } from '../sim/local-redis.ts';
import { loadEnv } from '../src/config/env.ts';
import { parsePolicy } from '../src/config/policy.ts';
import { createQueues } from '../src/jobs/queues.ts';
import { sweepRetention } from '../src/jobs/retention-sweeper.ts';
import { startCloudops } from '../src/main.ts';
import { createLogger } from '../src/observability/logger.ts';
import { requestKeys } from '../src/requests/store/keys.ts';
import { RequestStore } from '../src/requests/store/store.ts';
import { benchEnv } from './lib/bot.ts';
import { BENCH, benchPolicyYaml } from './lib/identity.ts';
import { runPipeline } from './lib/pipeline.ts';
import { footprint } from './lib/redis-bytes.ts';
import { startSims } from './lib/sims.ts';
import { median } from './lib/stats.ts';

const { values } = parseArgs({
  options: {
    round: { type: 'string', default: '250' },
    rounds: { type: 'string', default: '6' },
    runs: { type: 'string', default: '3' },
  },
});
const ROUND = Number(values.round);
const ROUNDS = Number(values.rounds);
const RUNS = Number(values.runs);
const RETENTION_DAYS = 30;
const DAY_MS = 86_400_000;
const FIRST_VMID = 40_000;

interface Row {
  /** Requests finished so far. */
  history: number;
  /** Bytes while the last round's requests are still within retention_days (with their finished jobs). */
  heldBytes: number;
  /** Bytes once retention let them go. */
  afterBytes: number;
  /** What one finished request costs while it is kept: (held − after) / round. */
  perKeptRequest: number;
  /** Bytes in keys with a TTL (send markers, reply records), after retention. */
  ttlBytes: number;
  afterByKind: Record<string, number>;
}

async function once(run: number, log: (m: string) => void): Promise<Row[]> {
  const server = await startLocalRedis();
  const sims = await startSims({
    botToken: BENCH.botToken,
    teamId: BENCH.teamId,
    seedVms: { count: ROUND, firstVmid: FIRST_VMID },
  });
  const redis = new Redis(server.url, { maxRetriesPerRequest: null });
  const prefix = `cloudops-bench-footprint-${randomUUID().slice(0, 8)}`;
  let clock = Date.now();
  const now = () => new Date(clock);
  const env = loadEnv(
    benchEnv(sims, { redisUrl: server.url, prefix, role: 'all', logLevel: 'warn', port: 0 }),
  );
  const policy = parsePolicy(
    `retention_days: ${RETENTION_DAYS}\n${benchPolicyYaml(sims.projectUuid)}`,
    'bench-policy.yml',
  );
  const logger = createLogger({ level: 'warn' }, pino.destination({ dest: 2, sync: false }));
  const bot = await startCloudops(env, policy, {
    now,
    logger,
    shutdownTimeoutMs: 5000,
    // Fast sweeps so the bench need not wait; what they remove is the same as every 10 minutes.
    retentionPolicy: { intervalMs: 200, batch: 500, finishedJobAgeMs: DAY_MS },
  });
  const store = new RequestStore(redis, { prefix, now });
  const queues = createQueues(redis, prefix);
  const rows: Row[] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      const result = await runPipeline({
        redis,
        prefix,
        sims,
        count: ROUND,
        vmidOf: (i) => FIRST_VMID + i,
        timeoutMs: 120_000,
        log: () => undefined,
      });
      if ((result.states.succeeded ?? 0) !== ROUND)
        throw new Error(`round ${round}: not every request succeeded: ${JSON.stringify(result.states)}`);
      // Let the last reports finish before counting.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const history = round * ROUND;
      const held = await footprint(redis, prefix);

      // Past retention: the bot's sweep removes the requests and their audit; a day later its finished jobs go.
      clock += (RETENTION_DAYS + 1) * DAY_MS;
      const keys = requestKeys(prefix);
      const deadline = Date.now() + 60_000;
      while ((await redis.zcard(keys.retention)) > 0 || (await redis.zcard(keys.created)) > 0) {
        if (Date.now() > deadline) throw new Error('retention did not remove the ended requests within 60 s');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await sweepRetention({ store, queues, logger }, { intervalMs: 0, batch: 500, finishedJobAgeMs: 0 });
      const after = await footprint(redis, prefix);
      const row: Row = {
        history,
        heldBytes: held.bytes,
        afterBytes: after.bytes,
        perKeptRequest: (held.bytes - after.bytes) / ROUND,
        ttlBytes: after.ttlBytes,
        afterByKind: after.byKind,
      };
      log(
        `run ${run} history ${history}: held ${held.bytes} B (${held.keys} keys, ${Math.round(row.perKeptRequest)} B per kept request), after retention ${after.bytes} B (${after.keys} keys) ${JSON.stringify(after.byKind)}; TTL keys ${after.ttlKeys} (${after.ttlBytes} B)`,
      );
      rows.push(row);
    }
  } finally {
    await bot.stop();
    await queues.close();
    redis.disconnect();
    await sims.close();
    await server.stop();
  }
  return rows;
}

const log = (m: string) => process.stderr.write(`[bench:redis] ${m}\n`);
const runs: Row[][] = [];
for (let run = 1; run <= RUNS; run++) runs.push(await once(run, log));

const spread = (v: number[]) => `${Math.round(Math.min(...v))}–${Math.round(Math.max(...v))}`;
const cell = (v: number[]) => `${Math.round(median(v))} (${spread(v)})`;
process.stdout.write(
  `\nRedis bytes held by the bot (MEMORY USAGE of its keys), rounds of ${ROUND} approved requests run to success, retention_days ${RETENTION_DAYS}; median (min–max) of ${RUNS} run(s)\n\n`,
);
process.stdout.write(
  '| finished requests (history) | held, last round within retention (B) | after retention (B) | per kept request (B) | keys with a TTL (B; expire within 3 days) |\n|---|---|---|---|---|\n',
);
for (let i = 0; i < ROUNDS; i++) {
  const at = runs.map((r) => r[i]!);
  process.stdout.write(
    `| ${at[0]!.history} | ${cell(at.map((r) => r.heldBytes))} | ${cell(at.map((r) => r.afterBytes))} | ${cell(at.map((r) => r.perKeptRequest))} | ${cell(at.map((r) => r.ttlBytes))} |\n`,
  );
}
const last = runs.map((r) => r.at(-1)!);
const first = runs.map((r) => r[0]!);
process.stdout.write(
  `\nAfter retention, ${first[0]!.history} → ${last[0]!.history} finished requests: ${cell(first.map((r) => r.afterBytes))} → ${cell(last.map((r) => r.afterBytes))} B (medians, min–max).\n`,
);
process.stdout.write(
  `\nAfter retention, by kind (last run, largest history): ${JSON.stringify(runs.at(-1)?.at(-1)?.afterByKind)}\n`,
);
process.exit(0);
