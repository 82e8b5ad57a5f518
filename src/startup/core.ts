/**
 * What every role shares, opened once per process: the two Redis connections (checked before anything else), the
 * Slack token check, the cloud API client, the stores, the queues, the Slack Web API client, the approval policy,
 * the request lifecycle and the digest jobs. Each part is registered with the shutdown stages as it opens.
 */
import { Cluster } from 'ioredis';
import { FILES_SCOPE, UploadScope } from '../charts/upload-scope.ts';
import type { CloudApiClient } from '../cloud/client.ts';
import type { PriceSource } from '../cloud/price-cache.ts';
import { clusterHealth } from '../config/cluster-health.ts';
import type { Env } from '../config/env.ts';
import { type Policy, userGroupsOf } from '../config/policy.ts';
import type { PolicySource } from '../config/policy-source.ts';
import {
  type RedisClient,
  type RedisTarget,
  redisKeyPrefix,
  redisTarget,
  type watchReplicas,
} from '../config/redis-connection.ts';
import type { SealKeys } from '../config/seal-keys.ts';
import type { ChartPosterDeps } from '../jobs/digest-chart.ts';
import { createDigestJobs, type DigestJobs } from '../jobs/digests.ts';
import type { Queues } from '../jobs/queues.ts';
import type { Readiness } from '../observability/http.ts';
import { type Logger, scrubSecrets } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import { PriceHistory } from '../pricing/price-history.ts';
import type { ApprovalPolicy } from '../requests/approval/approvers.ts';
import type { AuditContext } from '../requests/audit/append.ts';
import { groupsOfMember } from '../requests/inbox.ts';
import { RequestLifecycle } from '../requests/lifecycle/request-lifecycle.ts';
import { RequestStore } from '../requests/store/store.ts';
import type { VmFactsStore } from '../requests/vm-facts.ts';
import { digestRenderer } from '../slack/blocks/digest.ts';
import { createUserGroups } from '../slack/user-groups.ts';
import type { SlackApi } from '../slack-api/client.ts';
import type { TicketDesk } from '../tickets/desk.ts';
import { ticketDeskFrom } from '../tickets/from-env.ts';
import { checkSlackToken, StartupError } from './checks.ts';
import { openCloudClient, openQueues, openSlackApi } from './clients.ts';
import { startCloudCheck } from './cloud-check.ts';
import type { StartupDeadline } from './deadline.ts';
import type { StartOptions } from './options.ts';
import { connectBotRedis } from './redis-clients.ts';
import { openRequests } from './requests.ts';
import type { ShutdownStages } from './stages.ts';
import { within } from './stages.ts';

/** How long start-up waits for Slack's auth.test, within the start-up deadline. */
const SLACK_STARTUP_MS = 4_000;

/** Which roles this process runs (ROLE=all runs each). */
export type Role = 'web' | 'worker' | 'scheduler';

/** Everything the start functions of the roles build on. */
export interface Core {
  env: Env;
  policy: Policy;
  /** Seals the audit entries every writer of this process appends, and names the policy version in them. */
  audit: AuditContext;
  options: StartOptions;
  now: () => Date;
  logger: Logger;
  metrics: Metrics;
  /** Redis key and BullMQ prefix. */
  prefix: string;
  /** The configuration's values that are secret: scrubbed from typed text and logs. */
  secrets: string[];
  /** SEAL_KEY (and SEAL_KEY_PREVIOUS): seals the decisions that let a request run, and checks them. */
  sealKeys: SealKeys;
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
  /** The change-ticket systems (docs/configuration.md#change-tickets). */
  tickets: TicketDesk;
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
    sealKeys: SealKeys;
    stages: ShutdownStages;
    deadline: StartupDeadline;
    /** Where the policy's version is read (the policy itself arrives as a live view of it). */
    policySource: PolicySource;
  },
): Promise<Core> {
  const { logger, metrics, stages, deadline } = parts;
  const audit: AuditContext = {
    sealer: parts.sealKeys,
    policyVersion: () => parts.policySource.version(),
    scrub: (text) => scrubSecrets(text, parts.secrets),
  };
  const now = options.now ?? (() => new Date());
  const prefix = redisKeyPrefix(env);
  const runs = (role: Role) => env.ROLE === 'all' || env.ROLE === role;

  // Through the Sentinels when REDIS_SENTINELS is set; a failover moves both clients (and BullMQ's duplicates).
  const target = redisTarget(env);
  const { clients, replicas } = await connectBotRedis(target, logger, runs('worker'), stages, deadline);
  const {
    fast: fastRedis,
    queue: queueRedis,
    jobs: jobsRedis,
    records: recordsRedis,
    log: redisLog,
  } = clients;

  const uploadScope = new UploadScope(logger);
  await checkSlackAtStart(env, runs('web'), uploadScope, logger, deadline);

  // Not awaited: an unreachable API or a refused key is a warning, /readyz's "cloud": false and a gauge at 0.
  const cloudCheck = startCloudCheck(
    { url: env.CLOUD_API_URL, apiKey: env.CLOUD_API_KEY, logger, metrics, proxy: env },
    options.cloudCheck,
  );
  stages.intake.push(async () => cloudCheck.stop());
  const cloud = openCloudClient(env, metrics);
  stages.connections.push((budget) => within(cloud.close(), budget));
  const retentionDays = policy.retention_days;
  // With the audit export on, retention keeps what it has not shipped.
  const workerStore = new RequestStore(recordsRedis ?? queueRedis, {
    prefix,
    now,
    retentionDays,
    auditRetentionDays: () => policy.audit_retention_days,
    audit,
    exportsAudit: env.AUDIT_WEBHOOK_URL !== undefined,
  });
  const queues = openQueues(queueRedis, prefix, (error, queue) => redisLog.failure(error, { queue }));
  stages.connections.push(() => queues.close());
  const slack = openSlackApi(env, logger);
  stages.connections.push(() => slack.close());
  const userGroups = createUserGroups(slack, { logger, ...options.userGroupCache });
  const groupsOf = groupsOfMember(userGroups, userGroupsOf(policy));
  // Through the proxy like every outbound client; nothing is configured without JIRA_URL or SERVICENOW_URL.
  const tickets = ticketDeskFrom(env);
  stages.connections.push(() => tickets.close());
  const { approvals, store, vmFacts, prices, lifecycleDeps, requests } = openRequests({
    redis: fastRedis,
    queues,
    cloud,
    policy,
    prefix,
    now,
    logger,
    metrics,
    secrets: parts.secrets,
    sealKeys: parts.sealKeys,
    userGroups,
    tickets,
    audit,
  });
  // The workers' lifecycle waits for Redis to come back (the records connection) instead of failing a job.
  const workerRequests = new RequestLifecycle({ ...lifecycleDeps, store: workerStore });

  const charts = (redis: RedisClient) =>
    chartDeps(redis, { policy, prefix, slack, scope: uploadScope, logger });
  const workerCharts = charts(queueRedis);
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

  return {
    env,
    policy,
    options,
    now,
    logger,
    metrics,
    prefix,
    secrets: parts.secrets,
    sealKeys: parts.sealKeys,
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
    tickets,
    digests,
    charts: charts(fastRedis),
    readiness: {
      ...readinessOf(fastRedis, policy, queues, metrics, () => cloudCheck.up()),
      policyVersion: () => parts.policySource.version(),
    },
    audit,
    stages,
    deadline,
  };
}

/**
 * A token Slack refuses stops every role; Slack not answering stops the web role only (docs/operations.md#start-up).
 * A token without the files scope is noted on `uploadScope` (charts then go without upload).
 */
async function checkSlackAtStart(
  env: Env,
  web: boolean,
  uploadScope: UploadScope,
  logger: Logger,
  deadline: StartupDeadline,
): Promise<void> {
  if (!env.SLACK_BOT_TOKEN) return;
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
  if (!slack.ok && web) throw new StartupError(slack.why);
  if (!slack.ok)
    logger.warn({ why: slack.why }, 'Slack did not answer at start-up; replies wait until it does');
  if (slack.ok && slack.scopes && !slack.scopes.includes(FILES_SCOPE)) uploadScope.missing('start-up');
}

/** Price charts on `redis`: the history they draw from, and how they are uploaded. */
function chartDeps(
  redis: RedisClient,
  parts: { policy: Policy; prefix: string; slack: SlackApi; scope: UploadScope; logger: Logger },
): ChartPosterDeps {
  const { policy, prefix, slack, scope, logger } = parts;
  return {
    history: new PriceHistory(redis, prefix, policy.retention_days),
    slack,
    reference: policy.reference_vm,
    currency: policy.currency,
    scope,
    logger,
  };
}

/** What /readyz and /metrics ask of the core. */
function readinessOf(
  fastRedis: RedisClient,
  policy: Policy,
  queues: Queues,
  metrics: Metrics,
  cloudUp: () => boolean,
): Readiness {
  return {
    redisPing: async () => (await fastRedis.ping()) === 'PONG',
    // Each node gets less than /readyz waits in all, so the line comes with the answer.
    redisCluster: fastRedis instanceof Cluster ? () => clusterHealth(fastRedis, 800) : undefined,
    policyLoaded: () => policy.projects !== undefined,
    cloudUp,
    beforeScrape: async () => {
      for (const [name, queue] of Object.entries({ execute: queues.execute, notify: queues.notify })) {
        metrics.queueDepth.set({ queue: name }, await queue.count());
      }
    },
  };
}
