import type { Cluster, Redis } from 'ioredis';
import type { CloudApi } from '../cloud/types.ts';
import type { Policy } from '../config/policy.ts';
import { redisConnectionLog } from '../observability/connection-log.ts';
import type { Logger } from '../observability/logger.ts';
import type { PriceHistory } from '../pricing/price-history.ts';
import { SnapshotStore } from '../pricing/snapshots.ts';
import type { SlackApi } from '../slack-api/client.ts';
import { ChartLane, type ChartPosterDeps } from './digest-chart.ts';
import { DigestScheduler } from './digest-scheduler.ts';
import { startDigestWorker } from './digest-worker.ts';
import type { DigestRenderer } from './renderers.ts';

export interface DigestJobsDeps {
  policy: Policy;
  cloud: Pick<CloudApi, 'listClusters'>;
  /** A BullMQ-ready connection (maxRetriesPerRequest null). */
  connection: Redis | Cluster;
  prefix: string;
  slack: Pick<SlackApi, 'chat'>;
  renderer: DigestRenderer;
  /** Each digest's costs per cluster, for the charts. */
  history?: PriceHistory;
  /** The digest's chart, posted in its thread after the text; absent when charts are off. */
  charts?: ChartPosterDeps;
  now: () => Date;
  logger: Logger;
  /** Digest jobs run at once by one worker. */
  concurrency?: number;
}

/** The digest's queue side: the schedules (BullMQ job schedulers), the worker that posts, and how to stop both. */
export interface DigestJobs {
  /** The subscriptions; the `/cloud digest` command and tests change them. */
  scheduler: DigestScheduler;
  startWorker(): { close(): Promise<void> };
  startScheduler(): Promise<void>;
  close(): Promise<void>;
}

/** How long closing waits for charts still uploading. */
const CHART_DRAIN_MS = 3_000;

/** Schedules live in Redis, so restarts and extra instances share them. */
export function createDigestJobs(deps: DigestJobsDeps): DigestJobs {
  const scheduler = new DigestScheduler({ connection: deps.connection, prefix: deps.prefix, now: deps.now });
  // Without a listener BullMQ prints connection errors to the console, outside the redacted log.
  scheduler.queue.on('error', (error: Error) =>
    redisConnectionLog(deps.logger).failure(error, { queue: 'digest' }),
  );
  const snapshots = new SnapshotStore(deps.connection, deps.prefix);
  const workers: { close(): Promise<void> }[] = [];
  const lane = new ChartLane(deps.logger);
  // Charts wait while digests wait to be sent or are being sent (delayed jobs are mostly tomorrow's, not counted).
  lane.busy = async () => {
    const counts = await scheduler.queue.getJobCounts('wait', 'active', 'prioritized');
    return Object.values(counts).some((n) => n > 0);
  };
  const charts = deps.charts ? { ...deps.charts, lane } : undefined;
  return {
    scheduler,
    startWorker() {
      const started = startDigestWorker({
        connection: deps.connection,
        prefix: deps.prefix,
        policy: deps.policy,
        cloud: deps.cloud,
        slack: deps.slack,
        snapshots,
        history: deps.history,
        charts,
        renderer: deps.renderer,
        nextDigestAt: async (channel) => (await scheduler.get(channel))?.next,
        now: deps.now,
        logger: deps.logger,
        concurrency: deps.concurrency,
      });
      workers.push(started);
      return started;
    },
    async startScheduler() {
      // BullMQ job schedulers create each next job themselves; this checks the queue answers and reports them.
      await scheduler.queue.waitUntilReady();
      deps.logger.info({ subscriptions: await scheduler.count() }, 'pricing digest schedules loaded');
    },
    async close() {
      await Promise.all(workers.map((w) => w.close().catch(() => undefined)));
      // Charts already handed over get a moment to finish; the digests themselves are all out.
      await lane.drain(CHART_DRAIN_MS);
      await scheduler.close();
    },
  };
}
