import type { Server } from 'node:http';
import { pathToFileURL } from 'node:url';
import { CloudApiClient, DEFAULT_TIMEOUTS } from './cloud/client.ts';
import { createPriceCache } from './cloud/price-cache.ts';
import { withDotEnv } from './config/dotenv.ts';
import { ConfigError, type Env, loadEnv, missingForRole } from './config/env.ts';
import { loadPolicy, type Policy, PolicyError, userGroupsOf } from './config/policy.ts';
import { createRedis, describeRedis, redisTarget, watchReplicas } from './config/redis-connection.ts';
import { createDigestJobs } from './jobs/digests.ts';
import { type DuePolicy, startDueScheduler } from './jobs/due-times.ts';
import { ABANDON_GRACE_MS, createExecution, type ExecutionConcurrency } from './jobs/execution.ts';
import { markHomeSeen, startHomeRefresh } from './jobs/home.ts';
import { createOutbox } from './jobs/outbox.ts';
import { createQueues } from './jobs/queues.ts';
import { QUEUE_REDIS_OPTIONS } from './jobs/redis-options.ts';
import { ReplicaAck } from './jobs/replica-ack.ts';
import { type RetentionPolicy, startRetentionSweeper } from './jobs/retention-sweeper.ts';
import type { LockPolicy } from './jobs/retry-policy.ts';
import { type SweepPolicy, startStrandedSweeper } from './jobs/stranded-sweeper.ts';
import { StepTokens, startStepCompletion } from './jobs/workflow-steps.ts';
import {
  healthRoutes,
  metricsHandlers,
  type Readiness,
  startHealthServer,
  startRouteServer,
} from './observability/http.ts';
import { createLogger, type Logger } from './observability/logger.ts';
import { createMetrics, type Metrics, statusLabel } from './observability/metrics.ts';
import { createApprovalPolicy } from './requests/approvers.ts';
import { startHomeBackfill } from './requests/home-backfill.ts';
import { groupsOfMember } from './requests/inbox.ts';
import { type LifecycleDeps, RequestLifecycle } from './requests/lifecycle.ts';
import { RequestStore } from './requests/store.ts';
import { VmFactsStore } from './requests/vm-facts.ts';
import { createSlackApp, type SlackApp } from './slack/app.ts';
import { digestRenderer } from './slack/blocks/digest.ts';
import { homeRenderer } from './slack/blocks/home.ts';
import { createRequestRenderer } from './slack/blocks/request-message.ts';
import { pricingWords } from './slack/commands/pricing.ts';
import { DraftStore } from './slack/drafts.ts';
import { RedeliveryGuard } from './slack/redelivery.ts';
import type { ReconnectPolicy } from './slack/socket-link.ts';
import { createUserGroups } from './slack/user-groups.ts';
import { SlackApi } from './slack-api/client.ts';
import { checkSlackToken, StartupError, waitForRedis } from './startup/checks.ts';

/** A running bot: what it listens on, and how to stop it. */
export interface Running {
  port?: number;
  /** Where `/metrics` listens (METRICS_PORT on METRICS_HOST; the one picked when METRICS_PORT is 0). */
  metricsPort: number;
  metrics: Metrics;
  /** Stops taking work, finishes or hands back what runs, closes every connection: within the shutdown deadline. */
  stop(): Promise<void>;
}

/** PRODUCT.md §6: SIGTERM ends the bot within 20 s, an API call in flight included. */
export const SHUTDOWN_DEADLINE_MS = 20_000;
/**
 * PRODUCT.md §7: a start-up that cannot finish exits within 10 s. Counted from the process's start, so loading the
 * code counts too, and leaving time to close what was opened: 2.5 s, because on a machine at load 8–14 closing
 * after an 8.5 s deadline ended the process at 10.2–10.9 s.
 */
export const STARTUP_DEADLINE_MS = 7_500;
/** How long start-up waits for Redis, within the start-up deadline. */
const REDIS_STARTUP_MS = 5_000;
/** How long start-up waits for Slack's auth.test, within the start-up deadline. */
const SLACK_STARTUP_MS = 4_000;
/** The end of a shutdown kept for closing connections, after the workers had their time. */
const CLOSE_RESERVE_MS = 1_500;

export interface StartOptions {
  /** Injected clock for tests and the demo; defaults to the wall clock. */
  now?: () => Date;
  logger?: Logger;
  /** The whole shutdown's deadline, a running API call included (default SHUTDOWN_DEADLINE_MS). */
  shutdownTimeoutMs?: number;
  /** Ends the start-up early (a stop asked for): what was opened is closed, and the start rejects with its reason. */
  signal?: AbortSignal;
  /**
   * How long the start-up may take: past it, what was opened is closed and the start rejects with a StartupError
   * naming what it was waiting for. Unset: no deadline beyond the Redis and Slack checks' own.
   */
  startupTimeoutMs?: number;
  /** Test knobs for BullMQ (short stall detection). */
  stalledIntervalMs?: number;
  /** Jobs at once per worker process; default DEFAULT_CONCURRENCY of `src/jobs/execution.ts`. */
  concurrency?: ExecutionConcurrency;
  /** The per-VM lock of the workers (default VM_LOCK); tests use a fast one so a lock a failover left behind frees soon. */
  vmLock?: LockPolicy;
  /** How often workers look for requests stranded between two writes; tests use a fast one. */
  sweepPolicy?: SweepPolicy;
  /** How often workers remove what retention let go; tests use a fast one. */
  retentionPolicy?: RetentionPolicy;
  /** How often the scheduler looks for due reminders, escalations and freeze ends; tests use a fast one. */
  duePolicy?: DuePolicy;
  /** How long user group members are cached, and the least time between two refreshes a click forces. */
  userGroupCache?: { cacheMs: number; refreshGapMs: number };
  /** Socket Mode's reconnect backoff and hello deadline; default RECONNECT_POLICY of `src/slack/socket-link.ts`. */
  reconnectPolicy?: ReconnectPolicy;
}

/** Something start-up opened, closed in its stage of the shutdown, given the time left. */
type Closer = (budgetMs: number) => Promise<void>;

/**
 * Wires config → clients → Slack app → workers → scheduler, per ROLE. Nothing else in the codebase wires.
 * Whatever fails or is aborted during start-up closes everything opened so far before the start rejects.
 */
export async function startCloudops(env: Env, policy: Policy, options: StartOptions = {}): Promise<Running> {
  const startedAt = performance.now();
  const now = options.now ?? (() => new Date());
  // One signal for the start-up: a stop asked for, or the start-up deadline.
  const signal = AbortSignal.any(
    [
      options.signal,
      options.startupTimeoutMs ? AbortSignal.timeout(options.startupTimeoutMs) : undefined,
    ].filter((s): s is AbortSignal => s !== undefined),
  );
  // Whole milliseconds: timers and AbortSignal.timeout refuse fractions.
  const startupLeft = () =>
    options.startupTimeoutMs === undefined
      ? Number.POSITIVE_INFINITY
      : Math.floor(options.startupTimeoutMs - (performance.now() - startedAt));
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
  logger.info({ role }, 'cloudops starting');

  // Shutdown stages, in order: stop taking work, let work finish (or abandon it), close connections.
  const intake: Closer[] = [];
  const work: Closer[] = [];
  const connections: Closer[] = [];
  const shutdown = async (deadlineMs: number) => {
    const end = performance.now() + deadlineMs;
    const left = () => Math.max(0, end - performance.now());
    const warn = (error: unknown) => logger.warn({ err: error }, 'a part did not stop cleanly');
    await Promise.all(intake.map((close) => within(close(0), Math.min(2_000, left() / 4)).catch(warn)));
    // Workers drain until only the time to abandon the calls in flight and to close connections is left.
    const drain = Math.max(0, left() - ABANDON_GRACE_MS - CLOSE_RESERVE_MS);
    await Promise.all(work.map((close) => within(close(drain), drain + ABANDON_GRACE_MS).catch(warn)));
    // One after another, last opened first: the queues before the Redis connection they use.
    for (const close of connections.toReversed())
      await within(close(left()), Math.max(250, left())).catch(warn);
  };
  /** What start-up is waiting for, named in the error when its deadline passes. */
  let waitingFor = 'the configuration';
  const step = <T>(what: string, promise: Promise<T>): Promise<T> => {
    waitingFor = what;
    return abortable(promise, signal);
  };

  try {
    if (signal.aborted) throw signal.reason;
    // Web handlers must answer Slack within 3 s: their Redis client fails fast instead of queueing while Redis is down.
    // Through the Sentinels when REDIS_SENTINELS is set; a failover moves both clients (and BullMQ's duplicates).
    const target = redisTarget(env);
    const fastRedis = createRedis(target, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      lazyConnect: false,
    });
    // Queues and workers wait for Redis to come back: BullMQ needs maxRetriesPerRequest null.
    const queueRedis = createRedis(target, QUEUE_REDIS_OPTIONS);
    for (const client of [fastRedis, queueRedis]) {
      client.on('error', (error: Error) => logger.warn({ err: error }, 'redis connection problem'));
    }
    // With Sentinels, how many replicas a critical write waits for (src/jobs/replica-ack.ts).
    const replicas = target.sentinels ? watchReplicas(target) : undefined;
    connections.push(async (budget) => {
      replicas?.close();
      fastRedis.disconnect();
      // QUIT lets BullMQ's last writes land; a Redis that does not answer is simply dropped.
      await within(queueRedis.quit(), budget).catch(() => undefined);
      queueRedis.disconnect();
    });
    waitingFor = `Redis (${describeRedis(target).variable})`;
    // Within what is left of the start-up, so the line names Redis rather than the deadline.
    await waitForRedis(
      fastRedis,
      target,
      Math.max(100, Math.min(REDIS_STARTUP_MS, startupLeft() - 100)),
      signal,
    );

    // A token Slack refuses stops every role; Slack not answering stops the web role only (PRODUCT.md §7).
    if (env.SLACK_BOT_TOKEN) {
      const slack = await step(
        'Slack (auth.test at SLACK_API_URL)',
        checkSlackToken(
          env.SLACK_BOT_TOKEN,
          env.SLACK_API_URL,
          Math.max(100, Math.min(SLACK_STARTUP_MS, startupLeft() - 100)),
          signal,
        ),
      );
      if (!slack.ok && runs('web')) throw new StartupError(slack.why);
      if (!slack.ok)
        logger.warn({ why: slack.why }, 'Slack did not answer at start-up; replies wait until it does');
    }

    const cloud = new CloudApiClient({
      baseUrl: env.CLOUD_API_URL ?? '',
      apiKey: env.CLOUD_API_KEY,
      timeouts: { ...DEFAULT_TIMEOUTS, totalMs: env.CLOUD_API_DEADLINE_MS },
      onCall: (call) =>
        metrics.apiLatency.observe(
          { operation: call.operation, status: statusLabel(call.status), outcome: call.outcome },
          call.durationMs / 1000,
        ),
    });
    connections.push((budget) => within(cloud.close(), budget));
    const retentionDays = policy.retention_days;
    const store = new RequestStore(fastRedis, { prefix, now, retentionDays });
    const workerStore = new RequestStore(queueRedis, { prefix, now, retentionDays });
    const vmFacts = new VmFactsStore(fastRedis, { prefix });
    const queues = createQueues(queueRedis, prefix);
    connections.push(() => queues.close());
    // Without a listener BullMQ prints connection errors to the console, outside the redacted JSON log.
    for (const queue of [queues.execute, queues.notify]) {
      queue.on('error', (error: Error) =>
        logger.warn({ err: error, queue: queue.name }, 'queue connection problem'),
      );
    }
    const prices = createPriceCache(cloud);
    // Reports are retried by their own queues, so the client neither retries nor waits out rate limits itself.
    const slackClient = new SlackApi({ apiUrl: env.SLACK_API_URL, token: env.SLACK_BOT_TOKEN ?? '', logger });
    connections.push(() => slackClient.close());
    const userGroups = createUserGroups(slackClient, { logger, ...options.userGroupCache });
    const approvals = createApprovalPolicy(policy, userGroups);
    // A person's App Home also reads what waits for the user groups of the policy they belong to.
    const groupsOf = groupsOfMember(userGroups, userGroupsOf(policy));
    const lifecycleDeps: LifecycleDeps = {
      policy,
      store,
      outbox: createOutbox(queues, now),
      approvals,
      prices,
      now,
      logger,
      metrics,
      vmFacts,
      secrets,
    };
    const requests = new RequestLifecycle(lifecycleDeps);
    // The workers' lifecycle waits for Redis to come back (queue connection) instead of failing a job.
    const workerRequests = new RequestLifecycle({ ...lifecycleDeps, store: workerStore });

    const socketMode = env.SLACK_APP_TOKEN !== undefined && runs('web');
    let slackApp: SlackApp | undefined;
    const readiness: Readiness = {
      redisPing: async () => (await fastRedis.ping()) === 'PONG',
      policyLoaded: () => policy.projects !== undefined,
      // Socket Mode: not ready until the link is up, and again not while it is lost.
      slackConnected: socketMode ? () => slackApp?.connected?.() === true : undefined,
      beforeScrape: async () => {
        for (const [name, queue] of Object.entries({ execute: queues.execute, notify: queues.notify })) {
          metrics.queueDepth.set({ queue: name }, await queue.count());
        }
      },
    };

    const digests = createDigestJobs({
      policy,
      cloud,
      connection: queueRedis,
      prefix,
      slack: slackClient,
      renderer: digestRenderer,
      now,
      logger,
    });
    connections.push(() => digests.close());
    const digestOf = (channel: string) => digests.scheduler.get(channel);

    let port: number | undefined;
    // Health lives on PORT in every mode; Bolt serves it in HTTP mode. Elsewhere a server of its own
    // answers from now on: /healthz while the Socket Mode link connects, /readyz 503 until it is up.
    if (!runs('web') || socketMode) {
      const healthServer: Server = await step(
        'the health server on PORT',
        startHealthServer(env.PORT, readiness, env.HOST),
      );
      intake.push(() => closeServer(healthServer));
      port = portOf(healthServer, env.PORT);
    }
    // The web part first: when Slack or the port fails it, no worker has started yet.
    if (runs('web')) {
      slackApp = createSlackApp(
        env,
        {
          policy,
          store,
          requests,
          slack: slackClient,
          approvals,
          homes: { seen: (user) => markHomeSeen(fastRedis, prefix, user), digestOf, groupsOf },
          stepTokens: new StepTokens(fastRedis, prefix),
          vmFacts,
          drafts: new DraftStore(fastRedis, prefix),
          prices,
          now,
          logger,
          metrics,
          words: pricingWords({ policy, cloud, prices, scheduler: digests.scheduler, now, logger }),
        },
        socketMode ? [] : healthRoutes(readiness),
        { guard: new RedeliveryGuard(fastRedis, prefix), policy: options.reconnectPolicy },
      );
      const web = slackApp;
      intake.push(() => web.stop());
      const started = await step(
        socketMode
          ? 'the Socket Mode connection to Slack (apps.connections.open at SLACK_API_URL)'
          : `the Slack app listening on PORT`,
        web.start(socketMode ? 0 : env.PORT, env.HOST),
      );
      port ??= started.port;
    }
    if (runs('worker')) {
      const homes = startHomeRefresh({
        connection: queueRedis,
        prefix,
        store: workerStore,
        approvals,
        renderer: homeRenderer,
        digestOf,
        groupsOf,
        groups: userGroups,
        slack: slackClient,
        now,
        logger,
      });
      // Requests stored before the App Home's indexes are added to them once, in the background.
      const backfill = startHomeBackfill(queueRedis, prefix, logger);
      intake.push(() => backfill.stop());
      const steps = startStepCompletion({
        connection: queueRedis,
        prefix,
        store: workerStore,
        slack: slackClient,
        logger,
      });
      const execution = createExecution({
        connection: queueRedis,
        prefix,
        store: workerStore,
        requests: workerRequests,
        vmFacts: new VmFactsStore(queueRedis, { prefix }),
        cloud,
        policy,
        queues,
        now,
        logger,
        metrics,
        slack: slackClient,
        renderer: createRequestRenderer(),
        // A change reaches the App Homes of those it concerns and completes the workflow step that asked for it.
        followUps: {
          changed: async (request) =>
            void (await Promise.all([homes.changed(request), steps.changed(request)])),
        },
        stalledIntervalMs: options.stalledIntervalMs,
        concurrency: options.concurrency,
        vmLock: options.vmLock,
        // With Sentinels, what a POST or a Slack reply depends on waits for a replica (src/jobs/replica-ack.ts).
        replicaAck: new ReplicaAck(queueRedis, replicas?.current),
      });
      // The sweepers stop with the intake: they would otherwise enqueue into queues that are closing.
      const sweeper = startStrandedSweeper(
        {
          store: workerStore,
          queues,
          now,
          logger,
          queueApproved: (request, detail) => requests.queueApproved(request, detail),
        },
        options.sweepPolicy,
      );
      intake.push(() => sweeper.stop());
      const retention = startRetentionSweeper(
        { store: workerStore, queues, logger },
        options.retentionPolicy,
      );
      intake.push(() => retention.stop());
      // The home refresh and step completion after the notify worker that feeds them.
      work.push(async (budget) => {
        await execution.close(budget);
        await Promise.all([homes.close(), steps.close()]);
      });
      const digestWorker = digests.startWorker();
      work.push(() => digestWorker.close());
    }
    if (runs('scheduler')) {
      await step('Redis (the digest scheduler)', digests.startScheduler());
      const dueScheduler = startDueScheduler(
        {
          due: queues.due,
          handlers: {
            remind: (id) => requests.remind(id),
            escalate: (id) => requests.escalate(id),
            'freeze-end': (id) => requests.endFreeze(id),
            lease: (id) => requests.leases.due(id),
          },
          now,
          logger,
        },
        options.duePolicy,
      );
      intake.push(() => dueScheduler.stop());
    }
    const groups = userGroupsOf(policy);
    if (runs('web') && groups.length > 0 && env.SLACK_BOT_TOKEN) {
      // Not awaited: a slow Slack must not hold the start-up; each group Slack will not resolve is warned about.
      void Promise.all(groups.map((group) => userGroups.problem(group))).catch(() => undefined);
    }
    // /metrics has no authentication: its own port, on loopback unless METRICS_HOST says otherwise.
    const metricsServer: Server = await step(
      'the metrics server on METRICS_PORT',
      startRouteServer(env.METRICS_PORT, metricsHandlers(readiness, metrics), env.METRICS_HOST),
    );
    intake.push(() => closeServer(metricsServer));
    const metricsPort = portOf(metricsServer, env.METRICS_PORT);
    logger.info(
      {
        role,
        port,
        metricsPort,
        mode: socketMode ? 'socket' : 'http',
        startupMs: Math.round(performance.now() - startedAt),
      },
      'cloudops ready',
    );

    let stopping: Promise<void> | undefined;
    return {
      port,
      metricsPort,
      metrics,
      stop() {
        stopping ??= shutdown(options.shutdownTimeoutMs ?? SHUTDOWN_DEADLINE_MS).then(() =>
          logger.info('cloudops stopped'),
        );
        return stopping;
      },
    };
  } catch (error) {
    // Close what was opened, quickly: nothing has taken work yet, or only just.
    await shutdown(1_000);
    if ((error as Error)?.name === 'TimeoutError')
      throw new StartupError(`still waiting for ${waitingFor} when the start-up deadline passed`);
    throw error;
  }
}

/** The port `server` listens on (`fallback` when it has no address). */
function portOf(server: Server, fallback: number): number {
  const address = server.address();
  return typeof address === 'object' && address ? address.port : fallback;
}

function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => server.close(() => resolve()));
}

/** `promise`, or the signal's reason as soon as it aborts. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** `promise`, or rejects when it takes longer than `ms`; the timer never keeps a stopping process alive. */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not finish within ${Math.round(ms)} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** A stop asked for by a signal while the bot was still starting: not a failure. */
class StopRequested extends Error {
  override readonly name = 'StopRequested';
}

/**
 * `npm start`: load config, start per ROLE, stop cleanly on SIGTERM/SIGINT at any moment. A start-up that cannot
 * finish prints one line naming the cause and exits 1 within 10 s (PRODUCT.md §7); a stop ends within 20 s.
 */
export async function main(rawEnv?: Record<string, string | undefined>): Promise<void> {
  const stopRequested = new AbortController();
  let running: Running | undefined;
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) return;
    signalled = true;
    // One deadline for the whole stop; the timer does not keep the process alive by itself.
    setTimeout(() => {
      process.stderr.write(`cloudops: did not stop within ${SHUTDOWN_DEADLINE_MS / 1000} s; exiting\n`);
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS - 250).unref();
    if (!running) {
      process.stderr.write(`cloudops: ${signal} received while starting, stopping\n`);
      stopRequested.abort(new StopRequested(signal));
      return;
    }
    process.stderr.write(`cloudops: ${signal} received, finishing running work\n`);
    void running.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  /** One line, exit 1. What start-up opened is closed by then; timers a Redis client left behind do not delay the exit. */
  const fail = (line: string) => {
    process.exitCode = 1;
    process.stderr.write(`cloudops: ${line}\n`, () => process.exit(1));
  };

  let env: Env;
  let policy: Policy;
  try {
    // `.env` in the working directory (npm start: the clone), under the environment, which wins.
    env = loadEnv(rawEnv ?? withDotEnv(process.env, '.env'));
    const missing = missingForRole(env);
    if (missing.length > 0) {
      return fail(
        `missing ${missing.join(', ')}. Set them (see README “Environment”), or try everything locally with no account: npm run demo`,
      );
    }
    policy = await loadPolicy(env.POLICY_FILE);
  } catch (error) {
    if (error instanceof ConfigError || error instanceof PolicyError) return fail(error.message);
    throw error;
  }
  // The deadline counts from the process's start: loading the code is part of starting.
  const startupLeft = Math.max(1_000, Math.round(STARTUP_DEADLINE_MS - process.uptime() * 1000));
  try {
    running = await startCloudops(env, policy, {
      signal: stopRequested.signal,
      startupTimeoutMs: startupLeft,
    });
  } catch (error) {
    // Stopped while starting: what was opened is closed; a call still pending (Slack's auth.test) is dropped.
    if (error instanceof StopRequested) process.exit(0);
    return fail(`could not start: ${(error as Error).message}`);
  }
  if (signalled) {
    // A signal arrived in the moment between the start finishing and `running` being set.
    await running.stop();
    process.exit(0);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
}
