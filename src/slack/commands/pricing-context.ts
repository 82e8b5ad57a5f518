import type { PriceSource } from '../../cloud/price-cache.ts';
import type { CloudApi } from '../../cloud/types.ts';
import type { Policy } from '../../config/policy.ts';
import type { ChartPosterDeps } from '../../jobs/digest-chart.ts';
import type { DigestScheduler } from '../../jobs/digest-scheduler.ts';
import type { Logger } from '../../observability/logger.ts';

// What the three pricing words share, apart from pricing.ts which lists them (so none of them imports that list).

/** What the pricing words need; built once by main.ts. */
export interface PricingContext {
  policy: Policy;
  cloud: Pick<CloudApi, 'getCluster' | 'listClusters'>;
  prices: PriceSource;
  scheduler: DigestScheduler;
  now: () => Date;
  logger: Logger;
  /** `/cloud cluster`'s price chart; absent when charts are off. */
  charts?: ChartPosterDeps;
  /** Shortest gap between two digests a channel may ask for. */
  minIntervalMs?: number;
}

/** Slack lets a response_url answer five times. */
export const MAX_RESPONSES = 5;
