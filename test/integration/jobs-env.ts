import { Redis } from 'ioredis';
import { type CloudSim, startCloudSim } from '../../sim/cloud/server.ts';
import { type SlackStandIn, startSlackStandIn } from '../../sim/slack/server.ts';
import { CloudApiClient, FAST_TIMEOUTS, type TimeoutPolicy } from '../../src/cloud/client.ts';
import { createPriceCache } from '../../src/cloud/price-cache.ts';
import { type Policy, parsePolicy } from '../../src/config/policy.ts';
import { createExecution, type Execution, type ExecutionDeps } from '../../src/jobs/execution.ts';
import { createQueues, enqueueExecution, enqueueNotify, type Queues } from '../../src/jobs/queues.ts';
import { QUEUE_REDIS_OPTIONS } from '../../src/jobs/redis-options.ts';
import { FAST_RETRY, FAST_VM_LOCK } from '../../src/jobs/retry-policy.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createMetrics, type Metrics } from '../../src/observability/metrics.ts';
import { createApprovalPolicy } from '../../src/requests/approval/approvers.ts';
import type { CloudRequest, NewRequest, RequestState } from '../../src/requests/model/types.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { VmFactsStore } from '../../src/requests/vm-facts.ts';
import type { ResizeTarget, WanMode } from '../../src/rules/types.ts';
import { createRequestRenderer } from '../../src/slack/blocks/request-message.ts';
import { SlackApi } from '../../src/slack-api/client.ts';
import { PROJECT, resizeRequest } from '../fixtures/requests.ts';
import { workerLifecycle } from '../helpers/lifecycle.ts';
import { deleteKeys, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { approveSealed, TEST_SEAL_KEYS } from '../helpers/seal.ts';
import { WAIT_MS } from '../helpers/startup.ts';

/** The policy the jobs tests run with: the sim's default project, CPU class and private network mapped as the sim names them. */
export const JOBS_POLICY_YAML = `
resize_fields:
  cpu_class: { field: cpu_type, values: [regular, light] }
  private_network: { field: private_network, values: ["off", "on"] }
projects:
  - name: ${PROJECT.name}
    uuid: ${PROJECT.uuid}
    channels: [C0PROD]
    approvers: [U0LEAD]
`;

/** Everything an execution test needs, on real Redis, the cloud simulator over HTTP and the Slack stand-in. */
export interface JobsEnv {
  prefix: string;
  redis: Redis;
  redisUrl: string;
  sim: CloudSim;
  slack: SlackStandIn;
  cloud: CloudApiClient;
  store: RequestStore;
  vmFacts: VmFactsStore;
  queues: Queues;
  metrics: Metrics;
  policy: Policy;
  deps: ExecutionDeps;
  /** Every line the workers logged at info or above (JSON). */
  logs: string[];
  /** Starts workers in this process (close them with `stopWorkers` or `close`). */
  startWorkers(overrides?: Partial<ExecutionDeps>): Execution;
  /** Stores a request approved by U0LEAD (sealed, as the web role does: it is queued), posts its message and enqueues its run. */
  queueRequest(request: NewRequest): Promise<CloudRequest>;
  /** Resolves with the request once it is in one of `states`. */
  waitForState(id: string, states: RequestState[], timeoutMs?: number): Promise<CloudRequest>;
  close(): Promise<void>;
}

/** Options of `startJobsEnv`; `cloudTimeouts` defaults to FAST_TIMEOUTS (a hang is noticed within a second). */
export interface JobsEnvOptions {
  redisUrl?: string;
  name?: string;
  cloudTimeouts?: TimeoutPolicy;
}

export async function startJobsEnv(options: JobsEnvOptions = {}): Promise<JobsEnv> {
  const redisUrl = options.redisUrl ?? testRedisUrl();
  const prefix = uniquePrefix(options.name ?? 'jobs');
  // The same client options as the bot's workers (auto-pipelining on), so every jobs test runs with them.
  const redis = new Redis(redisUrl, QUEUE_REDIS_OPTIONS);
  redis.on('error', () => undefined);
  const sim = await startCloudSim();
  const slack = await startSlackStandIn();
  const cloud = new CloudApiClient({
    baseUrl: sim.url,
    apiKey: sim.apiKey,
    timeouts: options.cloudTimeouts ?? FAST_TIMEOUTS,
  });
  const store = new RequestStore(redis, { prefix });
  const vmFacts = new VmFactsStore(redis, { prefix });
  const queues = createQueues(redis, prefix);
  const metrics = createMetrics({ defaultMetrics: false });
  const policy = parsePolicy(JOBS_POLICY_YAML);
  const now = () => new Date();
  const logs: string[] = [];
  const logger = createLogger(
    { level: process.env.TEST_LOG_LEVEL ?? 'info' },
    {
      write: (line: string) => {
        logs.push(line);
        if (process.env.TEST_LOG_LEVEL) process.stdout.write(line);
      },
    },
  );
  const requests = workerLifecycle({ policy, store, queues, cloud, vmFacts, now, logger, metrics });
  const deps: ExecutionDeps = {
    connection: redis,
    prefix,
    store,
    requests,
    vmFacts,
    cloud,
    prices: createPriceCache(cloud),
    policy,
    approvals: createApprovalPolicy(policy),
    sealKeys: TEST_SEAL_KEYS,
    queues,
    now,
    logger,
    metrics,
    slack: new SlackApi({ apiUrl: slack.apiUrl, token: slack.botToken }),
    renderer: createRequestRenderer(),
    stalledIntervalMs: 1_000,
    retry: { execute: FAST_RETRY, notify: FAST_RETRY },
    vmLock: FAST_VM_LOCK,
  };
  const running: Execution[] = [];

  const env: JobsEnv = {
    prefix,
    redis,
    redisUrl,
    sim,
    slack,
    cloud,
    store,
    vmFacts,
    queues,
    metrics,
    policy,
    deps,
    logs,
    startWorkers(overrides = {}) {
      const execution = createExecution({ ...deps, ...overrides });
      running.push(execution);
      return execution;
    },
    async queueRequest(input) {
      // Approved by the policy's approver as the web role does (sealed), which queues it.
      const created = await store.create({ ...input, state: 'pending' }, input.requester);
      const queued = await approveSealed(store, created, 'U0LEAD');
      await enqueueNotify(queues, { type: 'post-request', requestId: queued.id });
      await enqueueExecution(queues, queued, new Date());
      return queued;
    },
    async waitForState(id, states, timeoutMs = WAIT_MS) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const request = await store.get(id);
        if (request && states.includes(request.state)) return request;
        if (Date.now() > deadline) {
          throw new Error(
            `request ${id} is ${request?.state ?? 'missing'}, not ${states.join('/')} after ${timeoutMs} ms`,
          );
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    async close() {
      await Promise.all(running.map((e) => e.close(2_000)));
      await queues.close();
      await cloud.close();
      await deps.slack.close();
      await sim.close();
      await slack.close();
      await deleteKeys(redis, prefix).catch(() => undefined);
      await redis.quit().catch(() => redis.disconnect());
    },
  };
  return env;
}

/** The thread replies under a request's message, as texts. */
export function threadTexts(env: JobsEnv, request: CloudRequest): string[] {
  if (!request.messageTs) return [];
  return env.slack.thread(request.channel, request.messageTs).map((m) => m.text ?? '');
}

/** Waits until the request's thread holds `count` replies (and returns their texts). */
export async function waitForReplies(
  env: JobsEnv,
  id: string,
  count: number,
  timeoutMs = WAIT_MS,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const request = await env.store.get(id);
    const texts = request ? threadTexts(env, request) : [];
    if (texts.length >= count) return texts;
    if (Date.now() > deadline)
      throw new Error(`only ${texts.length} of ${count} replies after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A resize request for a sim VM, with `before` taken from the sim's live record so the message shows from → to. */
export function resizeOf(
  env: JobsEnv,
  vmid: number,
  target: ResizeTarget,
  extra: Partial<NewRequest> & { steps?: ResizeTarget[] } = {},
): NewRequest {
  const vm = env.sim.vm(PROJECT.uuid, vmid);
  const { steps, ...rest } = extra;
  return resizeRequest({
    vmid,
    target,
    steps,
    ...rest,
    params: {
      kind: 'resize',
      target,
      steps: steps ?? [target],
      before: {
        vmid,
        ha: vm.ha,
        cores: vm.cores,
        ramGb: vm.ramGb,
        osDiskGb: vm.osDiskGb,
        wanMode: vm.wanMode as WanMode,
      },
      confirmedStopped: true,
    },
  });
}

/** Polls `predicate` every 25 ms until it holds; throws after `timeoutMs`. */
export async function until(predicate: () => boolean, what: string, timeoutMs = WAIT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`${what}: not after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
