import { randomUUID } from 'node:crypto';
import { DelayedError, type Job, UnrecoverableError, Worker } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { cloudReason } from '../cloud/errors.ts';
import type { CloudApi } from '../cloud/types.ts';
import type { Policy } from '../config/policy.ts';
import { redisConnectionLog } from '../observability/connection-log.ts';
import type { Logger } from '../observability/logger.ts';
import { queueTelemetry } from '../observability/tracing.ts';
import { diffSnapshots } from '../pricing/diff.ts';
import { toSnapshot } from '../pricing/price-fields.ts';
import { type PriceHistory, pointOfSnapshot } from '../pricing/price-history.ts';
import { nextRun } from '../pricing/schedule-parse.ts';
import type { SnapshotStore } from '../pricing/snapshots.ts';
import type { SlackApi } from '../slack-api/client.ts';
import { type ChartLane, type ChartPosterDeps, postDigestChart } from './digest-chart.ts';
import { DIGEST_QUEUE, type DigestJobData } from './digest-scheduler.ts';
import { type TickPlan, TickStore } from './digest-ticks.ts';
import type { DigestRenderer } from './renderers.ts';
import { slackFailure } from './slack-failure.ts';

/** Channels whose digests run at the same time; many channels due at the same minute all get theirs. */
export const DIGEST_CONCURRENCY = 20;
export interface DigestWorkerDeps {
  connection: Redis | Cluster;
  prefix: string;
  policy: Policy;
  cloud: Pick<CloudApi, 'listClusters'>;
  slack: Pick<SlackApi, 'chat'>;
  snapshots: SnapshotStore;
  /** Each digest's costs, for the charts; absent in setups that keep none. */
  history?: PriceHistory;
  /** Posts the digest's chart after its text, through `lane`; absent when charts are off. */
  charts?: ChartPosterDeps & { lane: ChartLane };
  renderer: DigestRenderer;
  /** When the channel's next scheduled digest runs, for the failure notice; undefined when none. */
  nextDigestAt(channel: string): Promise<Date | undefined>;
  now: () => Date;
  logger: Logger;
  concurrency?: number;
}

/** What one job did, for logs and tests. */
export type DigestOutcome = 'posted' | 'api-failed' | 'already-done';

/** Another worker is sending this tick right now; BullMQ retries the job after its backoff. */
export class TickBusyError extends Error {
  override readonly name = 'TickBusyError';
  readonly code = 'TICK_BUSY';
}

/** The tick a job stands for: a scheduler's jobs are `repeat:<channel>:<millis>`, others use their own id. */
export function tickOf(job: Pick<Job, 'id'>): string {
  const id = job.id ?? 'unknown';
  return id.startsWith('repeat:') ? (id.split(':').at(-1) ?? id) : id;
}

/** Builds what this tick posts: the digest, or the notice that the API could not be read. */
async function buildPlan(deps: DigestWorkerDeps, data: DigestJobData): Promise<TickPlan> {
  const at = deps.now();
  let clusters: Awaited<ReturnType<CloudApi['listClusters']>>;
  try {
    clusters = await deps.cloud.listClusters();
  } catch (error) {
    deps.logger.warn({ err: error, channel: data.channel }, 'digest: cloud API could not be read');
    const next =
      data.pattern && data.tz
        ? nextRun({ pattern: data.pattern, tz: data.tz }, at)
        : await deps.nextDigestAt(data.channel).catch(() => undefined);
    return { messages: [deps.renderer.failure(cloudReason(error), next)] };
  }
  const snapshot = toSnapshot(clusters, at);
  const previous = await deps.snapshots.get(data.channel);
  const messages = deps.renderer.digest({
    clusters,
    diff: diffSnapshots(previous, snapshot),
    policy: deps.policy,
    at,
  });
  return { messages, snapshot };
}

/**
 * Runs one digest job: claims the tick (a duplicate job for the same channel and tick sends nothing), fixes the
 * plan once, posts the parts not yet posted, and saves the snapshot after the last one. A Slack 429 moves the job
 * back to delayed until Retry-After; parts already posted are not posted again.
 */
export async function runDigestJob(
  deps: DigestWorkerDeps,
  ticks: TickStore,
  job: Job<DigestJobData>,
  lockToken?: string,
): Promise<DigestOutcome> {
  const { channel } = job.data;
  const token = lockToken ?? randomUUID();
  const tick = tickOf(job);
  if (!(await ticks.claim(channel, tick, token)))
    throw new TickBusyError(`digest ${channel}/${tick} is being sent elsewhere`);
  try {
    if (await ticks.isDone(channel, tick)) return 'already-done';
    const plan = await ticks.plan(channel, tick, () => buildPlan(deps, job.data));
    for (let part = await ticks.sent(channel, tick); part < plan.messages.length; part += 1) {
      const message = plan.messages[part];
      if (!message) break;
      if (!(await ticks.renew(channel, tick, token)))
        throw new TickBusyError(`digest ${channel}/${tick}: lease lost`);
      let ts: string | undefined;
      try {
        ({ ts } = await deps.slack.chat.postMessage({
          channel,
          text: message.text,
          blocks: message.blocks,
          unfurl_links: false,
        }));
      } catch (error) {
        const failure = slackFailure(error);
        const wait = failure?.verdict === 'retry' ? failure.retryAfterMs : undefined;
        if (wait !== undefined && lockToken) {
          deps.logger.info({ channel, part, waitMs: wait }, 'digest: Slack rate limit, waiting');
          await job.moveToDelayed(Date.now() + wait, lockToken);
          throw new DelayedError();
        }
        if (failure?.verdict === 'final') {
          deps.logger.warn({ channel, error: failure.label }, 'digest: Slack refused the message');
          throw new UnrecoverableError(`Slack refused the digest for ${channel}`);
        }
        throw error;
      }
      await ticks.markSent(channel, tick, part + 1, ts);
    }
    if (plan.snapshot) {
      await deps.snapshots.save(channel, plan.snapshot);
      // The chart's history is extra: failing to keep it never fails a digest that was delivered.
      await deps.history
        ?.recordDigest(channel, pointOfSnapshot(plan.snapshot, deps.policy.reference_vm))
        .catch((error: unknown) =>
          deps.logger.warn({ err: error, channel }, 'digest: price history not kept'),
        );
    }
    await ticks.markDone(channel, tick);
    // After the text is out and the tick is done, outside the job: a slow or refused upload delays no digest.
    const charts = deps.charts;
    if (plan.snapshot && charts) {
      const threadTs = await ticks.firstTs(channel, tick).catch(() => undefined);
      charts.lane.push(() => postDigestChart(charts, channel, threadTs));
    }
    return plan.snapshot ? 'posted' : 'api-failed';
  } finally {
    await ticks.release(channel, tick, token).catch(() => undefined);
  }
}

/** Starts the digest worker: BullMQ hands each tick to one worker; the tick store keeps the send single. */
export function startDigestWorker(deps: DigestWorkerDeps): {
  worker: Worker<DigestJobData>;
  close(): Promise<void>;
} {
  const ticks = new TickStore(deps.connection, deps.prefix);
  const worker = new Worker<DigestJobData, DigestOutcome>(
    DIGEST_QUEUE,
    (job, token) => runDigestJob(deps, ticks, job, token),
    {
      connection: deps.connection,
      prefix: deps.prefix,
      concurrency: deps.concurrency ?? DIGEST_CONCURRENCY,
      telemetry: queueTelemetry(),
    },
  );
  worker.on('failed', (job, error) =>
    deps.logger.warn(
      { err: error, channel: job?.data.channel, attempts: job?.attemptsMade },
      'digest job failed',
    ),
  );
  worker.on('error', (error) => redisConnectionLog(deps.logger).failure(error, { queue: 'digest' }));
  return { worker, close: () => worker.close() };
}
