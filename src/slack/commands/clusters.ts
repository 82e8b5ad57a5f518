import { clusterViews, referenceVmView } from '../blocks/cluster-views.ts';
import { clustersMessages } from '../blocks/clusters.ts';
import type { CommandWord } from '../deps.ts';
import { cloudErrorText } from './cloud-error.ts';
import { MAX_RESPONSES, type PricingContext } from './pricing-context.ts';

/** `/cloud clusters`: acks at once, then answers with every active cluster, its prices and the reference VM cost. */
export function clustersWord(pricing: PricingContext): CommandWord {
  return {
    word: 'clusters',
    usage: '`/cloud clusters`',
    summary: 'active clusters with hourly prices and the reference VM’s cost, the cheapest marked',
    async handle({ slack }) {
      await slack.ack();
      let messages: ReturnType<typeof clustersMessages>;
      try {
        const clusters = await pricing.prices.clusters();
        messages = clustersMessages({
          clusters: clusterViews(clusters, pricing.policy.reference_vm),
          currency: pricing.policy.currency,
          referenceVm: referenceVmView(pricing.policy.reference_vm),
        });
      } catch (error) {
        pricing.logger.warn({ err: error }, 'clusters: cloud API could not be read');
        await slack
          .respond({ response_type: 'ephemeral', text: cloudErrorText(error) })
          .catch(() => undefined);
        return;
      }
      try {
        for (const message of messages.slice(0, MAX_RESPONSES)) {
          await slack.respond({ response_type: 'ephemeral', ...message });
        }
      } catch (error) {
        // The response_url is the only way back to this person; nothing else to tell them.
        pricing.logger.warn({ err: error }, 'clusters: the answer could not be delivered');
      }
    },
  };
}
