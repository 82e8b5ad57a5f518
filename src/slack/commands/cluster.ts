import { CloudApiError, CloudRefusedError } from '../../cloud/errors.ts';
import type { Cluster } from '../../cloud/types.ts';
import { type ChartOutcome, postClusterChart } from '../../jobs/digest-chart.ts';
import { clusterViews, referenceVmView } from '../blocks/cluster-views.ts';
import { clusterDetailMessage } from '../blocks/clusters.ts';
import { escapeMrkdwn, mrkdwn, truncate, typedText } from '../blocks/text.ts';
import type { CommandWord } from '../deps.ts';
import { cloudErrorText } from './cloud-error.ts';
import type { PricingContext } from './pricing-context.ts';

const USAGE = '`/cloud cluster <name>`';

/** What the person is told when the chart did not come. */
const CHART_MISSING: Partial<Record<ChartOutcome, string>> = {
  'no-scope':
    'No price chart: the app lacks the `files:write` scope (an admin can add it and reinstall the app).',
  failed:
    'No price chart: Slack did not take it here (the bot may not be in this conversation: invite it with `/invite @cloudops`).',
};
const CLUSTER_NAME = /^[A-Za-z0-9._-]{1,64}$/;

/** Shape A where it answers (it has the status), else Shape B; a 404 from both means no such active cluster. */
async function fetchCluster(pricing: PricingContext, name: string): Promise<Cluster | 'unknown'> {
  try {
    return await pricing.cloud.getCluster(name, 'A');
  } catch (error) {
    if (!(error instanceof CloudApiError)) throw error;
    pricing.logger.info(
      { cluster: name, code: error.code },
      'cluster: Shape A did not answer, trying Shape B',
    );
  }
  try {
    return await pricing.cloud.getCluster(name, 'B');
  } catch (error) {
    if (error instanceof CloudRefusedError && error.status === 404) return 'unknown';
    throw error;
  }
}

async function unknownText(pricing: PricingContext, name: string): Promise<string> {
  const names = await pricing.prices
    .clusters()
    .then((list) => list.map((c) => c.name).sort())
    .catch(() => undefined);
  const listed =
    names && names.length > 0
      ? ` Active clusters: ${names.map((n) => `\`${escapeMrkdwn(n)}\``).join(', ')}.`
      : '';
  return `:warning: No active cluster is called \`${typedText(name)}\`.${listed}`;
}

/** `/cloud cluster <name>`: one cluster with its status where known and every price, unknown fields too. */
export function clusterWord(pricing: PricingContext): CommandWord {
  return {
    word: 'cluster',
    usage: `${USAGE}`,
    summary: 'one cluster: status, every hourly price and the reference VM’s cost',
    async handle({ args, slack }) {
      const [name, ...rest] = args;
      if (!name || rest.length > 0) {
        await slack.ack({
          response_type: 'ephemeral',
          text: `:warning: Give one cluster name. Usage: ${USAGE}`,
        });
        return;
      }
      if (!CLUSTER_NAME.test(name)) {
        await slack.ack({
          response_type: 'ephemeral',
          text: `:warning: A cluster name has only letters, digits, ".", "_" and "-", not \`${typedText(truncate(name, 64))}\`.`,
        });
        return;
      }
      await slack.ack();
      try {
        const cluster = await fetchCluster(pricing, name);
        if (cluster === 'unknown') {
          await slack.respond({ response_type: 'ephemeral', text: await unknownText(pricing, name) });
          return;
        }
        const [view] = clusterViews([cluster], pricing.policy.reference_vm);
        if (!view) return;
        // "Cheapest" only means something among several clusters.
        const message = clusterDetailMessage(
          { ...view, cost: { ...view.cost, cheapest: false } },
          pricing.policy.currency,
          referenceVmView(pricing.policy.reference_vm),
        );
        const extra = Object.entries(cluster.extra);
        if (extra.length > 0) {
          const line = extra
            .map(([key, value]) => `${escapeMrkdwn(key)}: ${escapeMrkdwn(JSON.stringify(value))}`)
            .join(' · ');
          message.blocks.push({
            type: 'context',
            elements: [mrkdwn(truncate(`Other fields: ${line}`, 2800))],
          });
        }
        await slack.respond({ response_type: 'ephemeral', ...message });
        // After the answer: the chart is extra, and says only why it is missing when that is worth knowing.
        if (pricing.charts) {
          const outcome = await postClusterChart(
            pricing.charts,
            cluster,
            { channel: slack.command.channel_id, user: slack.command.user_id },
            pricing.now(),
          );
          const why = CHART_MISSING[outcome];
          if (why) await slack.respond({ response_type: 'ephemeral', text: why }).catch(() => undefined);
        }
      } catch (error) {
        pricing.logger.warn({ err: error, cluster: name }, 'cluster: cloud API could not be read');
        await slack
          .respond({ response_type: 'ephemeral', text: cloudErrorText(error) })
          .catch(() => undefined);
      }
    },
  };
}
