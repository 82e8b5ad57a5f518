import { type Job, type JobsOptions, Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { redisConnectionLog, slackOutageLog } from '../observability/connection-log.ts';
import type { Logger } from '../observability/logger.ts';
import { queueTelemetry } from '../observability/tracing.ts';
import { SlackRetryLaterError } from './notify-worker.ts';
import { NOTIFY_RETRY, type RetryPolicy, retryDelayMs } from './retry-policy.ts';
import { slackFailure } from './slack-failure.ts';

/** A queue and its worker for one kind of follow-up Slack call (App Home publishes, step completions). */
export interface FollowUpQueue<T> {
  add(data: T, options?: JobsOptions): Promise<void>;
  close(): Promise<void>;
}

export interface FollowUpQueueDeps {
  connection: Redis | Cluster;
  prefix: string;
  logger: Logger;
  retry?: RetryPolicy;
}

/** What a job may do about the whole queue while it runs. */
export interface FollowUpControl {
  /**
   * Slack rate-limited a call that every job of this queue makes: no job of the queue starts for `ms` (in every
   * process, through the queue's limiter), and the error returned, thrown, puts this job back without using an attempt.
   */
  pause(ms: number): Promise<Error>;
}

/**
 * Starts `name`'s queue and worker: jobs retried with the notify delays (Slack's Retry-After honoured), at most
 * `limiter` jobs per window when given.
 */
export function startFollowUpQueue<T extends object>(
  name: string,
  deps: FollowUpQueueDeps,
  options: { jobs: JobsOptions; limiter?: { max: number; duration: number } },
  process: (job: Job<T>, control: FollowUpControl) => Promise<string | number>,
): FollowUpQueue<T> {
  const retry = deps.retry ?? NOTIFY_RETRY;
  const queue = new Queue(name, {
    connection: deps.connection,
    prefix: deps.prefix,
    defaultJobOptions: { backoff: { type: 'cloudops' }, ...options.jobs },
    telemetry: queueTelemetry(),
  });
  queue.on('error', (error: Error) => redisConnectionLog(deps.logger).failure(error, { queue: name }));
  const control: FollowUpControl = {
    async pause(ms) {
      await worker.rateLimit(ms);
      return Worker.RateLimitError();
    },
  };
  const worker = new Worker<T, string | number>(name, (job) => process(job, control), {
    connection: deps.connection,
    prefix: deps.prefix,
    concurrency: 4,
    limiter: options.limiter,
    telemetry: queueTelemetry(),
    settings: { backoffStrategy: (attempts, _type, error) => retryDelayMs(retry, attempts, error) },
  });
  const outage = slackOutageLog(deps.logger);
  worker.on('failed', (job, error) => {
    // A Slack outage is one line for the process (its outage log), a rate limit none: both only wait.
    if (error instanceof SlackRetryLaterError) {
      if (error.retryAfterMs === undefined) outage.failure({ queue: name, error: error.message });
      return;
    }
    deps.logger.warn({ queue: name, attemptsMade: job?.attemptsMade, err: error }, 'follow-up not done yet');
  });
  worker.on('completed', () => outage.recovered());
  worker.on('error', (error) => redisConnectionLog(deps.logger).failure(error, { queue: name }));
  return {
    async add(data, jobOptions) {
      await queue.add(name, data, jobOptions);
    },
    async close() {
      await worker.close();
      await queue.close();
    },
  };
}

/**
 * The error a follow-up job throws for a failed Slack call: retried later (after Slack's Retry-After) for outages and
 * rate limits, given up for a refusal that retrying will not change. `onFinal` runs before giving up.
 */
export async function slackCallFailed(
  method: string,
  error: unknown,
  onFinal?: (label: string) => Promise<void>,
): Promise<Error> {
  const failure = slackFailure(error);
  if (!failure) return error instanceof Error ? error : new Error(String(error));
  if (failure.verdict === 'final') {
    await onFinal?.(failure.label);
    return new UnrecoverableError(`${method}: ${failure.label}`);
  }
  return new SlackRetryLaterError(method, failure.label, { retryAfterMs: failure.retryAfterMs });
}
