import { join } from 'node:path';
import { writeHeapSnapshot } from 'node:v8';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { loadEnv } from '../../src/config/env.ts';
import { parsePolicy } from '../../src/config/policy.ts';
import { tracingConfig } from '../../src/config/tracing-env.ts';
import { createQueues } from '../../src/jobs/queues.ts';
import { sweepRetention } from '../../src/jobs/retention-sweeper.ts';
import { type Running, startCloudops } from '../../src/main.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { traceLogFields } from '../../src/observability/tracing.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import type { BotStartOp } from './bot.ts';
import { type ProcOp, serveProc } from './proc.ts';

/**
 * The bot alone in a process of its own (forked by bot.ts): `startCloudops` as `npm start` runs it, with the bench
 * policy, its logs in a file, and a clock the bench can move forward (for retention). Nothing else runs here, so
 * this process's CPU time is the bot's.
 */
let running: Running | undefined;
let logger: ReturnType<typeof createLogger> | undefined;
let start: BotStartOp | undefined;
/** How far the bot's clock is ahead of the wall clock. */
let clockOffsetMs = 0;

const DAY_MS = 86_400_000;

serveProc(
  {
    async start(op) {
      start = op as unknown as BotStartOp;
      const env = loadEnv(start.env);
      const policy = parsePolicy(start.policyYaml, 'bench-policy.yml');
      // As npm start builds it: with tracing configured, its lines carry the trace ids (and pay for them).
      logger = createLogger(
        {
          level: start.logLevel,
          secrets: start.secrets,
          traceFields: tracingConfig(env) ? traceLogFields : undefined,
        },
        pino.destination({ dest: start.logFile, append: true, sync: false, mkdir: true }),
      );
      running = await startCloudops(env, policy, {
        logger,
        shutdownTimeoutMs: 5000,
        now: () => new Date(Date.now() + clockOffsetMs),
        ...(start.concurrency ? { concurrency: start.concurrency } : {}),
        // Retention rounds often, so the bench need not wait; what one round removes is the same.
        ...(start.fastRetention
          ? { retentionPolicy: { intervalMs: 200, batch: 500, finishedJobAgeMs: DAY_MS } }
          : {}),
      });
      return { port: running.port ?? null };
    },
    advanceClock(op: ProcOp) {
      clockOffsetMs += Number(op.ms);
      return clockOffsetMs;
    },
    /** One retention round as the bot's sweep runs it, finished jobs of any age included (what goes a day later). */
    async sweepFinished() {
      if (!start || !logger) throw new Error('the bot is not started');
      const redis = new Redis(start.env.REDIS_URL ?? '', { maxRetriesPerRequest: null });
      const prefix = start.env.REDIS_PREFIX ?? '';
      const store = new RequestStore(redis, { prefix, now: () => new Date(Date.now() + clockOffsetMs) });
      const queues = createQueues(redis, prefix);
      try {
        return await sweepRetention(
          { store, queues, logger },
          { intervalMs: 0, batch: 500, finishedJobAgeMs: 0 },
        );
      } finally {
        await queues.close();
        redis.disconnect();
      }
    },
  },
  async () => {
    // BENCH_HEAP_BOT=<dir>: what the bot holds once the load is over, before it stops (bench/profile.md).
    const heapDir = process.env.BENCH_HEAP_BOT;
    if (heapDir) writeHeapSnapshot(join(heapDir, `bot-${process.pid}-${Date.now()}.heapsnapshot`));
    await running?.stop();
    logger?.flush();
  },
);
