import type { ChildProcess } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { killGroup, spawnGroup } from '../../sim/process-group.ts';
import { STARTUP_WAIT_MS } from './startup.ts';

/** What a worker child process connects to. */
export interface WorkerProcessConfig {
  redisUrl: string;
  prefix: string;
  cloudUrl: string;
  cloudApiKey: string;
  slackApiUrl: string;
  slackToken: string;
  policyYaml: string;
  /** Header timeout of the child's cloud client; long, so a slow call is still in flight when the test kills it. */
  cloudHeadersTimeoutMs?: number;
  stalledIntervalMs?: number;
  /** SEAL_KEY and SEAL_KEY_PREVIOUS of the worker (default TEST_SEAL_KEY alone), e.g. a worker restarted for a rotation. */
  sealKey?: string;
  sealKeyPrevious?: string;
}

/** A worker running in a child process, to be killed as a crash would. */
export interface WorkerProcess {
  child: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

const READY = 'worker-process-ready';

/**
 * Starts `createExecution` in a child process (`node --import tsx`, in a process group of its own) and resolves
 * once its workers run.
 */
export async function startWorkerProcess(config: WorkerProcessConfig): Promise<WorkerProcess> {
  const child = spawnGroup(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    env: { ...process.env, CLOUDOPS_WORKER_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      killGroup(child);
      reject(new Error(`worker process not ready after ${STARTUP_WAIT_MS} ms: ${stderr}`));
    }, STARTUP_WAIT_MS);
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes(READY)) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`worker process exited (${code}) before ready: ${stderr}`));
    });
  });
  return {
    child,
    exited,
    async kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) killGroup(child, signal);
      return exited;
    },
  };
}

/** The child's side: the same wiring as `src/main.ts` for the worker role, with the config from the parent. */
async function runChild(): Promise<void> {
  const { SlackApi } = await import('../../src/slack-api/client.ts');
  const { Redis } = await import('ioredis');
  const { CloudApiClient, DEFAULT_TIMEOUTS } = await import('../../src/cloud/client.ts');
  const { parsePolicy } = await import('../../src/config/policy.ts');
  const { createExecution } = await import('../../src/jobs/execution.ts');
  const { createPriceCache } = await import('../../src/cloud/price-cache.ts');
  const { workerLifecycle } = await import('./lifecycle.ts');
  const { TEST_SEAL_KEYS } = await import('./seal.ts');
  const { sealKeysFrom } = await import('../../src/config/seal-keys.ts');
  const { createApprovalPolicy } = await import('../../src/requests/approval/approvers.ts');
  const { createQueues } = await import('../../src/jobs/queues.ts');
  const { FAST_RETRY, FAST_VM_LOCK } = await import('../../src/jobs/retry-policy.ts');
  const { createLogger } = await import('../../src/observability/logger.ts');
  const { createMetrics } = await import('../../src/observability/metrics.ts');
  const { RequestStore } = await import('../../src/requests/store/store.ts');
  const { VmFactsStore } = await import('../../src/requests/vm-facts.ts');
  const { createRequestRenderer } = await import('../../src/slack/blocks/request-message.ts');
  const { AgentControls } = await import('../../src/mcp/agent-state.ts');

  const config = JSON.parse(process.env.CLOUDOPS_WORKER_CONFIG ?? '{}') as WorkerProcessConfig;
  const { QUEUE_REDIS_OPTIONS } = await import('../../src/jobs/redis-options.ts');
  const redis = new Redis(config.redisUrl, QUEUE_REDIS_OPTIONS);
  const cloud = new CloudApiClient({
    baseUrl: config.cloudUrl,
    apiKey: config.cloudApiKey,
    timeouts: { ...DEFAULT_TIMEOUTS, headersMs: config.cloudHeadersTimeoutMs ?? 30_000 },
  });
  const store = new RequestStore(redis, { prefix: config.prefix });
  const policy = parsePolicy(config.policyYaml);
  const queues = createQueues(redis, config.prefix);
  const now = () => new Date();
  const logger = createLogger({ level: 'warn', name: 'worker-process' }, process.stderr);
  const metrics = createMetrics({ defaultMetrics: false });
  const vmFacts = new VmFactsStore(redis, { prefix: config.prefix });
  const requests = workerLifecycle({ policy, store, queues, cloud, vmFacts, now, logger, metrics });
  const execution = createExecution({
    connection: redis,
    prefix: config.prefix,
    store,
    requests,
    vmFacts,
    cloud,
    prices: createPriceCache(cloud),
    policy,
    approvals: createApprovalPolicy(policy),
    sealKeys: config.sealKey ? sealKeysFrom(config.sealKey, config.sealKeyPrevious) : TEST_SEAL_KEYS,
    queues,
    now,
    logger,
    metrics,
    slack: new SlackApi({ apiUrl: config.slackApiUrl, token: config.slackToken }),
    renderer: createRequestRenderer(),
    stalledIntervalMs: config.stalledIntervalMs ?? 1_000,
    retry: { execute: FAST_RETRY, notify: FAST_RETRY },
    vmLock: FAST_VM_LOCK,
    agentDisabled: (name) => new AgentControls(redis, config.prefix).isDisabled(name),
  });
  process.once('SIGTERM', () => {
    void execution.close(5_000).then(() => process.exit(0));
  });
  process.stdout.write(`${READY}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await runChild();
}
