/**
 * What every role shares, opened once per process: the two Redis connections (checked before anything else), the
 * Slack token check, the cloud API client, the stores, the queues, the Slack Web API client, the approval policy,
 * the request lifecycle and the digest jobs. Each part is registered with the shutdown stages as it opens.
 */
import { Cluster } from 'ioredis';
import { FILES_SCOPE, UploadScope } from '../charts/upload-scope.ts';
import { CloudApiClient, DEFAULT_TIMEOUTS } from '../cloud/client.ts';
import type { PriceSource } from '../cloud/price-cache.ts';
import { clusterHealth } from '../config/cluster-health.ts';
import type { Env } from '../config/env.ts';
import { type Policy, userGroupsOf } from '../config/policy.ts';
import {
  describeRedis,
  type RedisClient,
  type RedisTarget,
  redisKeyPrefix,
  redisTarget,
  watchReplicas,
} from '../config/redis-connection.ts';
import type { ChartPosterDeps } from '../jobs/digest-chart.ts';
import { createDigestJobs, type DigestJobs } from '../jobs/digests.ts';
import { createQueues, type Queues } from '../jobs/queues.ts';
import type { Readiness } from '../observability/http.ts';
import type { Logger } from '../observability/logger.ts';
import { type Metrics, statusLabel } from '../observability/metrics.ts';
import { PriceHistory } from '../pricing/price-history.ts';
import { type ApprovalPolicy, createApprovalPolicy } from '../requests/approvers.ts';
import { groupsOfMember } from '../requests/inbox.ts';
import { RequestLifecycle } from '../requests/lifecycle.ts';
import { RequestStore } from '../requests/store.ts';
import type { VmFactsStore } from '../requests/vm-facts.ts';
import { digestRenderer } from '../slack/blocks/digest.ts';
import { createUserGroups } from '../slack/user-groups.ts';
import { SlackApi } from '../slack-api/client.ts';
import { checkSlackToken, StartupError, waitForRedis } from './checks.ts';
import { startCloudCheck } from './cloud-check.ts';
import type { StartupDeadline } from './deadline.ts';
import type { StartOptions } from './options.ts';
import { openRedisClients } from './redis-clients.ts';
import { openRequests } from './requests.ts';
import type { ShutdownStages } from './stages.ts';
import { within } from './stages.ts';

/** How long start-up waits for Redis, within the start-up deadline. */
const REDIS_STARTUP_MS = 5_000;
/** How long start-up waits for Slack's auth.test, within the start-up deadline. */
const SLACK_STARTUP_MS = 4_000;

/** Which roles this process runs (ROLE=all runs each). */
export type Role = 'web' | 'worker' | 'scheduler';

/** Everything the start functions of the roles build on. */
export interface Core {
  env: Env;
  policy: Policy;
  options: StartOptions;
  now: () => Date;
  logger: Logger;
  metrics: Metrics;
  /** Redis key and BullMQ prefix. */
  prefix: string;
  /** The configuration's values that are secret: scrubbed from typed text and logs. */
  secrets: string[];
  runs(role: Role): boolean;
  /** Where Redis is (one server, or through Sentinels), and with Sentinels which replicas a write waits for. */
  target: RedisTarget;
  replicas: ReturnType<typeof watchReplicas> | undefined;
  /** Fails fast while Redis is down: the web handlers must answer Slack within 3 s. */
  fastRedis: RedisClient;
  /** Waits for Redis to come back: BullMQ's queues (and the workers of the App Home, steps and digests). */
  queueRedis: RedisClient;
  /** Waits too, each command as it comes: BullMQ's execute and notify workers (src/jobs/redis-options.ts). */
  jobsRedis: RedisClient;
  /** Waits too, without BullMQ's scripts: the workers' requests, locks, markers and reply records. */
  recordsRedis: RedisClient;
  cloud: CloudApiClient;
  prices: PriceSource;
  /** The request store on the fast connection (web) and on the waiting records one (workers). */
  store: RequestStore;
  workerStore: RequestStore;
  vmFacts: VmFactsStore;
  queues: Queues;
  slack: SlackApi;
  userGroups: ReturnType<typeof createUserGroups>;
  approvals: ApprovalPolicy;
  /** The user groups of the policy that `user` belongs to (a person's App Home reads what waits for them too). */
  groupsOf: ReturnType<typeof groupsOfMember>;
  /** The lifecycle on the fast connection (web, scheduler) and on the waiting one (workers). */
  requests: RequestLifecycle;
  workerRequests: RequestLifecycle;
  digests: DigestJobs;
  /** Price charts: what the web role's `/cloud cluster` draws and uploads with (history on the fast connection). */
  charts: ChartPosterDeps;
  readiness: Readiness;
  stages: ShutdownStages;
  deadline: StartupDeadline;
}

/** Opens what every role shares; throws a StartupError when Redis or the Slack token stops the start-up. */
export async function openCore(
  env: Env,
  policy: Policy,
  options: StartOptions,
  parts: {
    logger: Logger;
    metrics: Metrics;
    secrets: string[];
    stages: ShutdownStages;
    deadline: StartupDeadline;
  },
): Promise<Core> {
  const { logger, metrics, stages, deadline } = parts;
  const now = options.now ?? (() => new Date());
  const prefix = redisKeyPrefix(env);
  const runs = (role: Role) => env.ROLE === 'all' || env.ROLE === role;

  // Through the Sentinels when REDIS_SENTINELS is set; a failover moves both clients (and BullMQ's duplicates).
  const target = redisTarget(env);
  const {
    fast: fastRedis,
    queue: queueRedis,
    jobs: jobsRedis,
    records: recordsRedis,
    log: redisLog,
  } = openRedisClients(target, logger, {
    lazyConnect: false,
    workers: runs('worker'),
  });
  // With Sentinels, how many replicas a critical write waits for (src/jobs/replica-ack.ts).
  const replicas = target.sentinels ? watchReplicas(target) : undefined;
  stages.connections.push(async (budget) => {
    replicas?.close();
    fastRedis.disconnect();
    // QUIT lets BullMQ's last writes land; a Redis that does not answer is simply dropped.
    await Promise.all(
      [queueRedis, jobsRedis, recordsRedis].map(
        (client) => client && within(client.quit(), budget).catch(() => undefined),
      ),
    );
    for (const client of [queueRedis, jobsRedis, recordsRedis]) client?.disconnect();
  });
  deadline.waitingFor = `Redis (${describeRedis(target).variable})`;
  // Within what is left of the start-up, so the line names Redis rather than the deadline.
  await waitForRedis(fastRedis, target, deadline.within(REDIS_STARTUP_MS), deadline.signal);
  // A cluster can be up with slots unserved: say at once what the bot found.
  if (fastRedis instanceof Cluster) {
    const health = await clusterHealth(fastRedis);
    const { line, ...counts } = health;
    if (health.ok) logger.info(counts, line);
    else logger.warn(counts, line);
  }

  const uploadScope = new UploadScope(logger);
  // A token Slack refuses stops every role; Slack not answering stops the web role only (docs/operations.md#start-up).
  if (env.SLACK_BOT_TOKEN) {
    const slack = await deadline.step(
      'Slack (auth.test at SLACK_API_URL)',
      checkSlackToken(
        env.SLACK_BOT_TOKEN,
        env.SLACK_API_URL,
        deadline.within(SLACK_STARTUP_MS),
        deadline.signal,
        env,
      ),
    );
    if (!slack.ok && runs('web')) throw new StartupError(slack.why);
    if (!slack.ok)
      logger.warn({ why: slack.why }, 'Slack did not answer at start-up; replies wait until it does');
    if (slack.ok && slack.scopes && !slack.scopes.includes(FILES_SCOPE)) uploadScope.missing('start-up');
  }

  // Not awaited: an unreachable API or a refused key is a warning, /readyz's "cloud": false and a gauge at 0.
  const cloudCheck = startCloudCheck(
    { url: env.CLOUD_API_URL, apiKey: env.CLOUD_API_KEY, logger, metrics, proxy: env },
    options.cloudCheck,
  );
  stages.intake.push(async () => cloudCheck.stop());
  const cloud = new CloudApiClient({
    baseUrl: env.CLOUD_API_URL ?? '',
    apiKey: env.CLOUD_API_KEY,
    timeouts: { ...DEFAULT_TIMEOUTS, totalMs: env.CLOUD_API_DEADLINE_MS },
    proxy: env,
    onCall: (call) =>
      metrics.apiLatency.observe(
        { operation: call.operation, status: statusLabel(call.status), outcome: call.outcome },
        call.durationMs / 1000,
      ),
  });
  stages.connections.push((budget) => within(cloud.close(), budget));
  const retentionDays = policy.retention_days;
  // With the audit export on, retention keeps what it has not shipped.
  const workerStore = new RequestStore(recordsRedis ?? queueRedis, {
    prefix,
    now,
    retentionDays,
    exportsAudit: env.AUDIT_WEBHOOK_URL !== undefined,
  });
  const queues = createQueues(queueRedis, prefix);
  stages.connections.push(() => queues.close());
  // Without a listener BullMQ prints connection errors to the console, outside the redacted JSON log.
  for (const queue of [queues.execute, queues.notify]) {
    queue.on('error', (error: Error) => redisLog.failure(error, { queue: queue.name }));
  }
  // Reports are retried by their own queues, so the client neither retries nor waits out rate limits itself.
  const slack = new SlackApi({
    apiUrl: env.SLACK_API_URL,
    token: env.SLACK_BOT_TOKEN ?? '',
    logger,
    proxy: env,
  });
  stages.connections.push(() => slack.close());
  const userGroups = createUserGroups(slack, { logger, ...options.userGroupCache });
  const approvals = createApprovalPolicy(policy, userGroups);
  const groupsOf = groupsOfMember(userGroups, userGroupsOf(policy));
  const { store, vmFacts, prices, lifecycleDeps, requests } = openRequests({
    redis: fastRedis,
    queues,
    cloud,
    policy,
    prefix,
    now,
    logger,
    metrics,
    secrets: parts.secrets,
    approvals,
  });
  // The workers' lifecycle waits for Redis to come back (the records connection) instead of failing a job.
  const workerRequests = new RequestLifecycle({ ...lifecycleDeps, store: workerStore });

  const chartDeps = (redis: RedisClient): ChartPosterDeps => ({
    history: new PriceHistory(redis, prefix, retentionDays),
    slack,
    reference: policy.reference_vm,
    currency: policy.currency,
    scope: uploadScope,
    logger,
  });
  const workerCharts = chartDeps(queueRedis);
  const digests = createDigestJobs({
    policy,
    cloud,
    connection: queueRedis,
    prefix,
    slack,
    renderer: digestRenderer,
    history: workerCharts.history,
    charts: workerCharts,
    now,
    logger,
  });
  stages.connections.push(() => digests.close());

  const readiness: Readiness = {
    redisPing: async () => (await fastRedis.ping()) === 'PONG',
    // Each node gets less than /readyz waits in all, so the line comes with the answer.
    redisCluster: fastRedis instanceof Cluster ? () => clusterHealth(fastRedis, 800) : undefined,
    policyLoaded: () => policy.projects !== undefined,
    cloudUp: () => cloudCheck.up(),
    beforeScrape: async () => {
      for (const [name, queue] of Object.entries({ execute: queues.execute, notify: queues.notify })) {
        metrics.queueDepth.set({ queue: name }, await queue.count());
      }
    },
  };

  return {
    env,
    policy,
    options,
    now,
    logger,
    metrics,
    prefix,
    secrets: parts.secrets,
    runs,
    target,
    replicas,
    fastRedis,
    queueRedis,
    jobsRedis: jobsRedis ?? queueRedis,
    recordsRedis: recordsRedis ?? queueRedis,
    cloud,
    prices,
    store,
    workerStore,
    vmFacts,
    queues,
    slack,
    userGroups,
    approvals,
    groupsOf,
    requests,
    workerRequests,
    digests,
    charts: chartDeps(fastRedis),
    readiness,
    stages,
    deadline,
  };
}
