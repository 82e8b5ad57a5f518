import type { WebClient } from '@slack/web-api';
import type { Redis } from 'ioredis';
import type { PriceSource } from '../../cloud/price-cache.ts';
import type { CloudApi } from '../../cloud/types.ts';
import type { Policy } from '../../config/policy.ts';
import type { Logger } from '../../observability/logger.ts';
import type { CommandWord } from '../deps.ts';
import { clusterWord } from './commands/cluster.ts';
import { clustersWord } from './commands/clusters.ts';
import { digestWord } from './commands/digest.ts';
import type { PricingContext } from './context.ts';
import { DigestScheduler } from './digest/scheduler.ts';
import { SnapshotStore } from './digest/snapshots.ts';
import { startDigestWorker } from './digest/worker.ts';

export interface PricingDeps {
  policy: Policy;
  cloud: Pick<CloudApi, 'getCluster' | 'listClusters'>;
  prices: PriceSource;
  /** A BullMQ-ready connection (maxRetriesPerRequest null). */
  connection: Redis;
  prefix: string;
  slack: Pick<WebClient, 'chat'>;
  now: () => Date;
  logger: Logger;
  /** Shortest gap between two digests a channel may ask for (tests pass less). */
  minIntervalMs?: number;
  /** Digest jobs run at once by one worker. */
  concurrency?: number;
}

export interface Pricing {
  words: CommandWord[];
  startWorker(): { close(): Promise<void> };
  startScheduler(): Promise<void>;
  close(): Promise<void>;
  /** The subscriptions, for tests and tools. */
  scheduler: DigestScheduler;
}

/**
 * The pricing feature: `/cloud clusters`, `/cloud cluster <name>`, `/cloud digest …`, and the digest worker.
 * Schedules are BullMQ job schedulers in Redis, so restarts and extra instances share them.
 */
export function createPricing(deps: PricingDeps): Pricing {
  const scheduler = new DigestScheduler({ connection: deps.connection, prefix: deps.prefix, now: deps.now });
  // Without a listener BullMQ prints connection errors to the console, outside the redacted log.
  scheduler.queue.on('error', (error: Error) => deps.logger.warn({ err: error }, 'digest queue problem'));
  const snapshots = new SnapshotStore(deps.connection, deps.prefix);
  const context: PricingContext = {
    policy: deps.policy,
    cloud: deps.cloud,
    prices: deps.prices,
    scheduler,
    now: deps.now,
    logger: deps.logger,
    minIntervalMs: deps.minIntervalMs,
  };
  const workers: { close(): Promise<void> }[] = [];
  return {
    scheduler,
    words: [clustersWord(context), clusterWord(context), digestWord(context)],
    startWorker() {
      const started = startDigestWorker({
        connection: deps.connection,
        prefix: deps.prefix,
        policy: deps.policy,
        cloud: deps.cloud,
        slack: deps.slack,
        snapshots,
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
      await scheduler.close();
    },
  };
}
