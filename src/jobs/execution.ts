import { type Job, Worker } from 'bullmq';
import { duplicateRedis } from '../config/redis-connection.ts';
import { redisConnectionLog } from '../observability/connection-log.ts';
import { queueTelemetry, withRequestId } from '../observability/tracing.ts';
import type { ExecutionDeps } from './deps.ts';
import { ExecuteProcessor } from './execute-worker.ts';
import { NotifyProcessor, SlackRetryLaterError } from './notify-worker.ts';
import { type ExecuteJobData, type NotifyJob, QUEUE_NAMES } from './queues.ts';
import { EXECUTE_RETRY, NOTIFY_RETRY, retryDelayMs, VM_LOCK } from './retry-policy.ts';
import { SendMarkers } from './send-markers.ts';
import { VmLock } from './vm-lock.ts';

export type { ExecutionDeps } from './deps.ts';

/** Jobs at once per process, per queue. */
export interface ExecutionConcurrency {
  execute: number;
  notify: number;
}

/**
 * Default jobs at once per process: several VMs change in parallel, each VM one at a time (the VM lock). The jobs
 * mostly wait on the API, Slack and Redis, so more slots overlap those waits (and let auto-pipelining batch).
 */
export const DEFAULT_CONCURRENCY: Readonly<ExecutionConcurrency> = Object.freeze({ execute: 16, notify: 16 });
/** BullMQ's default stall check; a crashed worker's job is picked up again after about this long. */
const DEFAULT_STALLED_INTERVAL_MS = 30_000;
/** A stalled execute job runs again (and finds its marker) rather than failing silently with the request in 'sending'. */
const MAX_STALLED_COUNT = 10;

/** After a shutdown abandons the calls in flight, how long their jobs get to record 'unknown' and queue the reply. */
export const ABANDON_GRACE_MS = 2_000;

/** The running workers. */
export interface Execution {
  /**
   * Stops taking jobs and lets running ones finish for up to `timeoutMs`. Then the API calls still in flight are
   * abandoned: each ends as 'outcome unknown' (said in its thread, its VM lock released) within
   * {@link ABANDON_GRACE_MS}, and the workers close; a job stuck elsewhere is handed to the next worker.
   */
  close(timeoutMs: number): Promise<void>;
}

/**
 * Starts the execute worker (cloud API calls) and the notify worker (Slack reports) on the given Redis connection.
 */
export function createExecution(deps: ExecutionDeps): Execution {
  const retry = deps.retry ?? { execute: EXECUTE_RETRY, notify: NOTIFY_RETRY };
  const lockPolicy = deps.vmLock ?? VM_LOCK;
  const concurrency = deps.concurrency ?? DEFAULT_CONCURRENCY;
  const stalledInterval = deps.stalledIntervalMs ?? DEFAULT_STALLED_INTERVAL_MS;
  const abandon = new AbortController();
  const records = deps.records ?? deps.connection;
  // Lock renewals on a connection of their own: WAITs on `records` would hold them up (vm-lock.ts).
  const renewals = duplicateRedis(records, {});
  renewals.on('error', (error) =>
    redisConnectionLog(deps.logger).failure(error, { connection: 'vm-lock renewals' }),
  );
  const execute = new ExecuteProcessor(
    deps,
    new VmLock(records, deps.prefix, lockPolicy, renewals),
    lockPolicy,
    new SendMarkers(records, deps.prefix),
    abandon.signal,
  );
  const notify = new NotifyProcessor(deps);
  const common = {
    connection: deps.connection,
    prefix: deps.prefix,
    stalledInterval,
    lockDuration: stalledInterval,
    maxStalledCount: MAX_STALLED_COUNT,
    // With tracing on, each job's processing is a span of the trace that enqueued it.
    telemetry: queueTelemetry(),
  };

  const executeWorker = new Worker<ExecuteJobData, string>(
    QUEUE_NAMES.execute,
    (job: Job<ExecuteJobData>, token?: string) =>
      withRequestId(job.data.requestId, () => execute.process(job, token)),
    {
      ...common,
      concurrency: concurrency.execute,
      settings: {
        backoffStrategy: (attemptsMade, _type, error) => retryDelayMs(retry.execute, attemptsMade, error),
      },
    },
  );
  const notifyWorker = new Worker<NotifyJob, string>(
    QUEUE_NAMES.notify,
    (job: Job<NotifyJob>, token?: string) =>
      withRequestId('requestId' in job.data ? job.data.requestId : '', () => notify.process(job, token)),
    {
      ...common,
      concurrency: concurrency.notify,
      settings: {
        backoffStrategy: (attemptsMade, _type, error) => retryDelayMs(retry.notify, attemptsMade, error),
      },
    },
  );

  for (const [queue, worker] of [
    ['execute', executeWorker],
    ['notify', notifyWorker],
  ] as const) {
    worker.on('completed', (_job, result) => deps.metrics.jobs.inc({ queue, outcome: String(result) }));
    worker.on('failed', (job, error) => {
      const final =
        !job || job.attemptsMade >= (job.opts.attempts ?? 1) || error.name === 'UnrecoverableError';
      deps.metrics.jobs.inc({ queue, outcome: final ? 'failed' : 'retry' });
      const log = { queue, jobId: job?.id, attemptsMade: job?.attemptsMade };
      if (final) deps.logger.error({ ...log, err: error }, 'job failed for good');
      // A Slack outage is said once by its outage log, not per retry; other retries in one short line.
      else if (error instanceof SlackRetryLaterError)
        deps.logger.debug({ ...log, reason: error.message }, 'job will be retried');
      else deps.logger.info({ ...log, error: error.name, reason: error.message }, 'job will be retried');
    });
    worker.on('error', (error) => redisConnectionLog(deps.logger).failure(error, { queue }));
  }

  return {
    async close(timeoutMs: number) {
      const workers = [executeWorker, notifyWorker];
      const graceful = Promise.all(workers.map((w) => w.close())).then(() => true);
      try {
        await closeWorkers(graceful, workers, timeoutMs);
      } finally {
        // After the jobs: a lock still held is renewed until its job ends (or expires with the process).
        renewals.disconnect();
      }
    },
  };

  /** Lets running jobs finish for `timeoutMs`, then abandons their calls (see {@link Execution.close}). */
  async function closeWorkers(
    graceful: Promise<boolean>,
    workers: Worker[],
    timeoutMs: number,
  ): Promise<void> {
    if (await settlesWithin(graceful, timeoutMs)) return;
    deps.logger.warn({ timeoutMs }, 'running jobs did not finish in time; abandoning the calls in flight');
    abandon.abort();
    if (await settlesWithin(graceful, ABANDON_GRACE_MS)) return;
    deps.logger.warn('jobs still running after their calls were abandoned; handing them to the next worker');
    await Promise.all(workers.map((w) => w.close(true)));
  }
}

/** Whether `promise` settles within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
