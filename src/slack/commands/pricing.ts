import type { CommandWord } from '../deps.ts';
import { clusterWord } from './cluster.ts';
import { clustersWord } from './clusters.ts';
import { digestWord } from './digest.ts';
import type { PricingContext } from './pricing-context.ts';

/** `/cloud clusters`, `/cloud cluster <name>` and `/cloud digest …`. */
export function pricingWords(context: PricingContext): CommandWord[] {
  return [clustersWord(context), clusterWord(context), digestWord(context)];
}
