import type { PriceSource } from '../../cloud/price-cache.ts';
import type { CloudApi } from '../../cloud/types.ts';
import type { Policy } from '../../config/policy.ts';
import type { ChartPosterDeps } from '../../jobs/digest-chart.ts';
import type { DigestScheduler } from '../../jobs/digest-scheduler.ts';
import type { Logger } from '../../observability/logger.ts';
import type { CommandWord } from '../deps.ts';
import { clusterWord } from './cluster.ts';
import { clustersWord } from './clusters.ts';
import { digestWord } from './digest.ts';

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

/** `/cloud clusters`, `/cloud cluster <name>` and `/cloud digest …`. */
export function pricingWords(context: PricingContext): CommandWord[] {
  return [clustersWord(context), clusterWord(context), digestWord(context)];
}
