import type { Server } from 'node:http';
import { pathToFileURL } from 'node:url';
import { WebClient } from '@slack/web-api';
import { Redis } from 'ioredis';
import { CloudApiClient } from './cloud/client.ts';
import { createPriceCache } from './cloud/price-cache.ts';
import { ConfigError, type Env, loadEnv, missingForRole } from './config/env.ts';
import { loadPolicy, type Policy, PolicyError } from './config/policy.ts';
import { createExecution, type ExecutionConcurrency } from './jobs/execution.ts';
import { createQueues } from './jobs/queues.ts';
import { QUEUE_REDIS_OPTIONS } from './jobs/redis-options.ts';
import { type RetentionPolicy, startRetentionSweeper } from './jobs/retention-sweeper.ts';
import { type SweepPolicy, startStrandedSweeper } from './jobs/stranded-sweeper.ts';
import { healthRoutes, type Readiness, startHealthServer } from './observability/http.ts';
import { createLogger, type Logger } from './observability/logger.ts';
import { createMetrics, type Metrics } from './observability/metrics.ts';
import { RequestStore } from './requests/store.ts';
import { VmFactsStore } from './requests/vm-facts.ts';
import { createSlackApp, type SlackApp } from './slack/app.ts';
import { createRequestRenderer } from './slack/blocks/request-message.ts';
import { boltLogger } from './slack/bolt-logger.ts';
import { DraftStore } from './slack/drafts.ts';
import { createPricing } from './slack/pricing/index.ts';

/** A running bot: what it listens on, and how to stop it. */
export interface Running {
  port?: number;
  metrics: Metrics;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Injected clock for tests and the demo; defaults to the wall clock. */
  now?: () => Date;
  logger?: Logger;
  /** How long SIGTERM waits for running API calls. */
  shutdownTimeoutMs?: number;
  /** Test knobs for BullMQ (short stall detection). */
  stalledIntervalMs?: number;
  /** Jobs at once per worker process; default DEFAULT_CONCURRENCY of `src/jobs/execution.ts`. */
  concurrency?: ExecutionConcurrency;
  /** How often workers look for requests stranded between two writes; tests use a fast one. */
  sweepPolicy?: SweepPolicy;
  /** How often workers remove what retention let go; tests use a fast one. */
  retentionPolicy?: RetentionPolicy;
}

/**
 * Wires config → clients → Slack app → workers → scheduler, per ROLE. Nothing else in the codebase wires.
 */
export async function startCloudops(env: Env, policy: Policy, options: StartOptions = {}): Promise<Running> {
  const startedAt = performance.now();
  const now = options.now ?? (() => new Date());
  const secrets = [
    env.SLACK_BOT_TOKEN,
    env.SLACK_APP_TOKEN,
    env.SLACK_SIGNING_SECRET,
    env.CLOUD_API_KEY,
  ].filter((s): s is string => s !== undefined);
  const logger = options.logger ?? createLogger({ level: env.LOG_LEVEL, secrets });
  const metrics = createMetrics();
  const prefix = env.REDIS_PREFIX;
  const role = env.ROLE;
  const runs = (part: 'web' | 'worker' | 'scheduler') => role === 'all' || role === part;

  // Web handlers must answer Slack within 3 s: their Redis client fails fast instead of queueing while Redis is down.
  const fastRedis = new Redis(env.REDIS_URL, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    lazyConnect: false,
  });
  // Queues and workers wait for Redis to come back: BullMQ needs maxRetriesPerRequest null.
  const queueRedis = new Redis(env.REDIS_URL, QUEUE_REDIS_OPTIONS);
  for (const client of [fastRedis, queueRedis]) {
    client.on('error', (error: Error) => logger.warn({ err: error }, 'redis connection problem'));
  }
  let redisDeadline: NodeJS.Timeout | undefined;
  await Promise.race([
    new Promise<void>((resolve) => fastRedis.once('ready', () => resolve())),
    new Promise<void>((_, reject) => {
      redisDeadline = setTimeout(
        () =>
          reject(new ConfigError(`REDIS_URL: no Redis answered at ${redactUrl(env.REDIS_URL)} within 5 s`)),
        5000,
      );
    }),
  ])
    .catch(async (error) => {
      fastRedis.disconnect();
      queueRedis.disconnect();
      throw error;
    })
    // A pending deadline would keep a stopping process alive for up to 5 s.
    .finally(() => clearTimeout(redisDeadline));

  const cloud = new CloudApiClient({
    baseUrl: env.CLOUD_API_URL ?? '',
    apiKey: env.CLOUD_API_KEY,
    onCall: (call) =>
      metrics.apiLatency.observe(
        { operation: call.operation, status: String(call.status ?? 'none'), outcome: call.outcome },
        call.durationMs / 1000,
      ),
  });
  const retentionDays = policy.retention_days;
  const store = new RequestStore(fastRedis, { prefix, now, retentionDays });
  const workerStore = new RequestStore(queueRedis, { prefix, now, retentionDays });
  const vmFacts = new VmFactsStore(fastRedis, { prefix });
  const queues = createQueues(queueRedis, prefix);
  // Without a listener BullMQ prints connection errors to the console, outside the redacted JSON log.
  for (const queue of [queues.execute, queues.notify]) {
    queue.on('error', (error: Error) =>
      logger.warn({ err: error, queue: queue.name }, 'queue connection problem'),
    );
  }
  const prices = createPriceCache(cloud);
  const slackClient = new WebClient(env.SLACK_BOT_TOKEN, {
    slackApiUrl: env.SLACK_API_URL,
    // Reports are retried by their own queue, so the client neither retries nor waits out rate limits itself.
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    // Its warnings go to the redacted JSON log, not the console.
    logger: boltLogger(logger),
  });

  const readiness: Readiness = {
    redisPing: async () => (await fastRedis.ping()) === 'PONG',
    policyLoaded: () => policy.projects !== undefined,
    beforeScrape: async () => {
      for (const [name, queue] of Object.entries({ execute: queues.execute, notify: queues.notify })) {
        metrics.queueDepth.set({ queue: name }, await queue.count());
      }
    },
  };

  const pricing = createPricing({
    policy,
    cloud,
    prices,
    connection: queueRedis,
    prefix,
    slack: slackClient,
    now,
    logger,
  });

  const stoppers: (() => Promise<void>)[] = [];
  let port: number | undefined;
  let slackApp: SlackApp | undefined;
  let healthServer: Server | undefined;

  if (runs('worker')) {
    const execution = createExecution({
      connection: queueRedis,
      prefix,
      store: workerStore,
      vmFacts: new VmFactsStore(queueRedis, { prefix }),
      cloud,
      policy,
      queues,
      now,
      logger,
      metrics,
      slack: slackClient,
      renderer: createRequestRenderer(),
      stalledIntervalMs: options.stalledIntervalMs,
      concurrency: options.concurrency,
    });
    // Stopped first: it would otherwise enqueue into queues that are closing.
    const sweeper = startStrandedSweeper({ store: workerStore, queues, now, logger }, options.sweepPolicy);
    stoppers.push(() => sweeper.stop());
    const retention = startRetentionSweeper({ store: workerStore, queues, logger }, options.retentionPolicy);
    stoppers.push(() => retention.stop());
    stoppers.push(() => execution.close(options.shutdownTimeoutMs ?? 20_000));
    const digestWorker = pricing.startWorker();
    stoppers.push(() => digestWorker.close());
  }
  if (runs('scheduler')) {
    await pricing.startScheduler();
  }
  if (runs('web')) {
    slackApp = createSlackApp(
      env,
      {
        policy,
        store,
        vmFacts,
        drafts: new DraftStore(fastRedis, prefix),
        queues,
        prices,
        now,
        logger,
        metrics,
        words: pricing.words,
      },
      env.SLACK_APP_TOKEN ? [] : healthRoutes(readiness, metrics),
    );
    const started = await slackApp.start(env.SLACK_APP_TOKEN ? 0 : env.PORT, env.HOST);
    port = started.port;
  }
  // Health and metrics live on PORT in every mode; Bolt serves them in HTTP mode.
  if (!port) {
    healthServer = await startHealthServer(env.PORT, readiness, metrics, env.HOST);
    const address = healthServer.address();
    port = typeof address === 'object' && address ? address.port : env.PORT;
  }
  logger.info(
    {
      role,
      port,
      mode: env.SLACK_APP_TOKEN ? 'socket' : 'http',
      startupMs: Math.round(performance.now() - startedAt),
    },
    'cloudops ready',
  );

  let stopping: Promise<void> | undefined;
  return {
    port,
    metrics,
    stop() {
      stopping ??= (async () => {
        // Stop taking work first (Slack, then workers), then close connections.
        await slackApp
          ?.stop()
          .catch((error: unknown) => logger.warn({ err: error }, 'slack app did not stop cleanly'));
        await new Promise<void>((resolve) =>
          healthServer ? healthServer.close(() => resolve()) : resolve(),
        );
        for (const stop of stoppers)
          await stop().catch((error: unknown) => logger.warn({ err: error }, 'worker did not stop cleanly'));
        await pricing.close().catch(() => undefined);
        await queues.close().catch(() => undefined);
        await cloud.close().catch(() => undefined);
        fastRedis.disconnect();
        await queueRedis.quit().catch(() => queueRedis.disconnect());
        logger.info('cloudops stopped');
      })();
      return stopping;
    },
  };
}

/** `redis://user:secret@host` → `redis://host`, for messages. */
function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.toString();
  } catch {
    return 'the configured URL';
  }
}

/** `npm start`: load config, start per ROLE, stop cleanly on SIGTERM/SIGINT. */
export async function main(rawEnv: Record<string, string | undefined> = process.env): Promise<void> {
  let env: Env;
  let policy: Policy;
  try {
    env = loadEnv(rawEnv);
    const missing = missingForRole(env);
    if (missing.length > 0) {
      process.stderr.write(
        `cloudops: missing ${missing.join(', ')}. Set them (see README “Environment”), or try everything locally with no account: npm run demo\n`,
      );
      process.exitCode = 1;
      return;
    }
    policy = await loadPolicy(env.POLICY_FILE);
  } catch (error) {
    if (error instanceof ConfigError || error instanceof PolicyError) {
      process.stderr.write(`cloudops: ${error.message}\n`);
      process.exitCode = 1;
      return;
    }
    throw error;
  }
  let running: Running;
  try {
    running = await startCloudops(env, policy);
  } catch (error) {
    process.stderr.write(`cloudops: could not start: ${(error as Error).message}\n`);
    process.exitCode = 1;
    return;
  }
  const shutdown = (signal: string) => {
    process.stderr.write(`cloudops: ${signal} received, finishing running work\n`);
    void running.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
}
