import { type JobsOptions, Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { queueTelemetry } from '../observability/tracing.ts';
import type { CloudRequest, ReplyEvent } from '../requests/model/types.ts';
import { DueTimes } from './due-times.ts';

/** Queue names under the BullMQ prefix. */
export const QUEUE_NAMES = { execute: 'execute', notify: 'notify' } as const;

/**
 * Separator inside custom job ids. BullMQ 6 refuses ids with ':' unless they have exactly three parts
 * (job.js `addJob` check), so ids are built with '.' instead.
 */
const ID_SEPARATOR = '.';

/**
 * Finished jobs are kept a day at most (a second enqueue with the same id within it is a no-op; later ones are
 * stopped by the request's state and the "posted" records), and at most this many per queue and outcome.
 */
export const KEEP_FINISHED = { ageS: 24 * 3600, completed: 1000, failed: 5000 } as const;

/**
 * BullMQ's events stream of each queue keeps 10,000 entries by default (a few MB); nothing here reads it (no
 * QueueEvents), so it is trimmed to about this many: what Redis holds stays flat however long the history.
 */
export const EVENTS_MAX_LEN = 1000;

/** Execute jobs retry only errors the worker judged "surely not sent"; the delay comes from `retry-policy.ts`. */
const EXECUTE_JOB_OPTIONS: JobsOptions = {
  attempts: 12,
  backoff: { type: 'cloudops' },
  removeOnComplete: { age: KEEP_FINISHED.ageS, count: KEEP_FINISHED.completed },
  removeOnFail: { age: KEEP_FINISHED.ageS, count: KEEP_FINISHED.failed },
};

/** Reports wait out Slack outages and rate limits: many attempts, growing delays. */
const NOTIFY_JOB_OPTIONS: JobsOptions = {
  attempts: 40,
  backoff: { type: 'cloudops' },
  removeOnComplete: { age: KEEP_FINISHED.ageS, count: KEEP_FINISHED.completed },
  removeOnFail: { age: KEEP_FINISHED.ageS, count: KEEP_FINISHED.failed },
};

/** The two queues of the bot, and the due times (reminders, escalations, freeze ends) beside them. */
export interface Queues {
  execute: Queue;
  notify: Queue;
  due: DueTimes;
  close(): Promise<void>;
}

/**
 * Data of an execute job: the request id, and the VM it changes so the worker takes the VM lock before reading the
 * request (jobs enqueued before `vm` existed have none: the worker reads the request for it). The request itself is
 * read from the store when it runs; `request` is the copy the write that queued it stored, from which the run's start
 * predicts its move and chains its audit entry in the lock's own round trip (requests/lifecycle/run-start.ts). It is
 * only a prediction: the lock's script writes it only when the stored request is that copy byte for byte.
 */
export interface ExecuteJobData {
  requestId: string;
  vm?: { projectUuid: string; vmid: number };
  request?: CloudRequest;
}

/**
 * What the notify worker does: post or sync the request message, expire a pending request, or `report` an event
 * (post its thread reply once, then sync the message: one job for each announcement with a reply). `thread-reply`
 * jobs are no longer added; the worker still runs those a previous version left queued.
 */
export type NotifyJob =
  | { type: 'post-request' | 'sync-message' | 'expire'; requestId: string }
  | { type: 'thread-reply'; requestId: string; event: ReplyEvent; step?: number }
  | { type: 'report'; requestId: string; event: ReplyEvent; step?: number }
  /** The run's outcome on the request's change ticket (jobs/ticket-gate.ts). */
  | { type: 'ticket-note'; requestId: string }
  /** A direct message to a person that is about no request (a passkey registered for them); `id` makes it once. */
  | { type: 'dm'; user: string; text: string; id: string };

/** Creates the execute and notify queues on one connection (ioredis with `maxRetriesPerRequest: null`). */
export function createQueues(connection: Redis | Cluster, prefix: string): Queues {
  const streams = { events: { maxLen: EVENTS_MAX_LEN } };
  // With tracing on, a job carries the trace context of the code that added it.
  const telemetry = queueTelemetry();
  const execute = new Queue(QUEUE_NAMES.execute, {
    connection,
    prefix,
    streams,
    telemetry,
    defaultJobOptions: EXECUTE_JOB_OPTIONS,
  });
  const notify = new Queue(QUEUE_NAMES.notify, {
    connection,
    prefix,
    streams,
    telemetry,
    defaultJobOptions: NOTIFY_JOB_OPTIONS,
  });
  return {
    execute,
    notify,
    due: new DueTimes(connection, prefix),
    async close() {
      await Promise.all([execute.close(), notify.close()]);
    },
  };
}

/**
 * Enqueues a queued request for execution. The job id is the request id, so a double click or a replay adds
 * nothing; a scheduled request waits until its `runAt`.
 */
export async function enqueueExecution(queues: Queues, request: CloudRequest, now: Date): Promise<void> {
  const runAt = request.runAt ? new Date(request.runAt).getTime() : undefined;
  const delay = runAt !== undefined && Number.isFinite(runAt) ? Math.max(0, runAt - now.getTime()) : 0;
  const data: ExecuteJobData = {
    requestId: request.id,
    vm: { projectUuid: request.projectUuid, vmid: request.vmid },
    // A scheduled run starts later from whatever is stored then: no copy to predict from.
    ...(delay === 0 ? { request } : {}),
  };
  await queues.execute.add('execute', data, { jobId: request.id, delay });
}

/** Removes a request's execution job if it has not started; a started one is stopped by the store's state check. */
export async function cancelExecution(queues: Queues, requestId: string): Promise<void> {
  await queues.execute.remove(requestId);
}

/**
 * Removes a request's delayed expire job once the request is decided, so it does not sit in Redis until
 * `expiresAt`. A job that is running right now cannot be removed; it finds the request decided and skips.
 */
export async function removeExpireJob(queues: Queues, requestId: string): Promise<void> {
  const jobId = notifyJobId({ type: 'expire', requestId });
  if (jobId) await queues.notify.remove(jobId).catch(() => undefined);
}

/**
 * The identity of one thread reply (request, event, step): the id of the `report` (or older `thread-reply`) job that
 * posts it and the key of its "posted" record, so the same reply is never posted twice.
 */
export function replyId(job: { requestId: string; event: ReplyEvent; step?: number }): string {
  return ['reply', job.requestId, job.event, String(job.step ?? 0)].join(ID_SEPARATOR);
}

/** The deterministic job id of a notify job, or undefined where duplicates are harmless (message syncs). */
export function notifyJobId(job: NotifyJob): string | undefined {
  switch (job.type) {
    case 'post-request':
    case 'expire':
    case 'ticket-note':
      return [job.type, job.requestId].join(ID_SEPARATOR);
    // A report carries the same reply as a `thread-reply` job of an earlier version: one id, so only one of them is
    // ever queued.
    case 'thread-reply':
    case 'report':
      return replyId(job);
    case 'sync-message':
      return undefined;
    case 'dm':
      return ['dm', job.id].join(ID_SEPARATOR);
  }
}

/**
 * Enqueues a Slack report. Post, expire and thread replies have fixed ids so a duplicate is a no-op; an expire
 * job waits until the request's `expiresAt` (given on the job or read by the worker, measured from `now`).
 */
export async function enqueueNotify(
  queues: Queues,
  job: NotifyJob,
  options: { expiresAt?: string; now?: Date } = {},
): Promise<void> {
  const opts: JobsOptions = {};
  const jobId = notifyJobId(job);
  if (jobId) opts.jobId = jobId;
  if (job.type === 'expire' && options.expiresAt) {
    const at = new Date(options.expiresAt).getTime();
    const now = (options.now ?? new Date()).getTime();
    if (Number.isFinite(at)) opts.delay = Math.max(0, at - now);
  }
  await queues.notify.add(job.type, job, opts);
}
