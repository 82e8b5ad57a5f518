import type { KnownBlock, SectionBlock } from '@slack/types';
import type { RenderedMessage } from '../../jobs/renderers.ts';
import { MAIN_PRICE_KEYS, priceLabel } from '../../pricing/price-fields.ts';
import { type CostView, costLine } from './money.ts';
import { escapeMrkdwn, mrkdwn, truncate } from './text.ts';

/** One cluster as the pricing messages show it. */
export interface ClusterView {
  name: string;
  location: string;
  description?: string;
  status?: string;
  /** Every price, `key → decimal string` (see price-fields.ts). */
  prices: Record<string, string>;
  cost: CostView;
}

/** A message for `respond()` or `chat.postMessage`. */
export type PricingMessage = RenderedMessage;

/** Blocks per message we allow ourselves: Slack allows 50, the rest is headroom. */
export const MAX_BLOCKS_PER_MESSAGE = 45;
/** Characters per text object we allow ourselves: Slack allows 3000. */
export const MAX_TEXT_CHARS = 2800;

const CHEAPEST = ':star: cheapest';

/** "*zone-1* · Paris  :star: cheapest", the first line of a cluster's section. */
function titleLine(view: ClusterView): string {
  const parts = [`*${escapeMrkdwn(view.name)}*`];
  if (view.location) parts.push(escapeMrkdwn(view.location));
  if (view.status) parts.push(`status: ${escapeMrkdwn(view.status)}`);
  return `${parts.join(' · ')}${view.cost.cheapest ? `  ${CHEAPEST}` : ''}`;
}

/**
 * One section per cluster, short two-column fields that read well on a phone: the five main hourly prices and
 * the reference VM's cost.
 */
export function clusterSection(view: ClusterView, currency: string): SectionBlock {
  const fields = MAIN_PRICE_KEYS.map((key) =>
    mrkdwn(`*${priceLabel(key)}*\n${escapeMrkdwn(view.prices[key] ?? '—')}`, 2000),
  );
  fields.push(mrkdwn(`*Reference VM*\n${escapeMrkdwn(costLine(view.cost, currency))}`, 2000));
  return { type: 'section', text: mrkdwn(titleLine(view)), fields };
}

/** Every price that is not one of the five main ones, as one context line ("more prices"). */
export function otherPricesLine(view: ClusterView): string | undefined {
  const others = Object.entries(view.prices).filter(([key]) => !MAIN_PRICE_KEYS.includes(key));
  if (others.length === 0) return undefined;
  return truncate(
    others.map(([key, value]) => `${priceLabel(key)} ${escapeMrkdwn(value)}`).join(' · '),
    MAX_TEXT_CHARS,
  );
}

/** Describes the reference VM for a context line. */
export interface ReferenceVmView {
  cores: number;
  ramGb: number;
  osDiskGb: number;
  cpuClass: string;
  publicIp: boolean;
}

export function referenceVmText(vm: ReferenceVmView): string {
  return `${vm.cores} ${vm.cpuClass} vCore${vm.cores === 1 ? '' : 's'}, ${vm.ramGb} GB RAM, ${vm.osDiskGb} GB disk${vm.publicIp ? ', public IP' : ''}`;
}

/** Splits body blocks into messages that each start with their own `head(part, total)` blocks. */
export function packMessages(
  body: KnownBlock[],
  head: (part: number, total: number) => KnownBlock[],
  text: (part: number, total: number) => string,
): PricingMessage[] {
  const room = MAX_BLOCKS_PER_MESSAGE - head(1, 1).length;
  const chunks: KnownBlock[][] = [];
  let current: KnownBlock[] = [];
  for (const block of body) {
    // A divider never starts or ends a part on its own.
    if (current.length >= room) {
      chunks.push(current);
      current = [];
    }
    if (block.type === 'divider' && current.length === 0) continue;
    current.push(block);
  }
  while (current.at(-1)?.type === 'divider') current.pop();
  if (current.length > 0 || chunks.length === 0) chunks.push(current);
  const total = chunks.length;
  return chunks.map((blocks, i) => ({
    text: text(i + 1, total),
    blocks: [...head(i + 1, total), ...blocks],
  }));
}

/** Lines joined into as few mrkdwn sections as fit, each under the text limit. */
export function lineSections(lines: string[], first?: string): SectionBlock[] {
  const sections: SectionBlock[] = [];
  let current = first ?? '';
  for (const raw of lines) {
    const line = truncate(raw, MAX_TEXT_CHARS);
    const next = current ? `${current}\n${line}` : line;
    if (next.length > MAX_TEXT_CHARS) {
      sections.push({ type: 'section', text: mrkdwn(current) });
      current = line;
    } else {
      current = next;
    }
  }
  if (current) sections.push({ type: 'section', text: mrkdwn(current) });
  return sections;
}

export interface ClustersListInput {
  clusters: ClusterView[];
  currency: string;
  referenceVm: ReferenceVmView;
}

/** `/cloud clusters`: a header, one section per cluster, and where to find the other prices. */
export function clustersMessages(input: ClustersListInput): PricingMessage[] {
  const { clusters, currency } = input;
  if (clusters.length === 0) {
    const text = 'The cloud API lists no active clusters right now.';
    return [{ text, blocks: [{ type: 'section', text: mrkdwn(text) }] }];
  }
  const cheapest = clusters.filter((c) => c.cost.cheapest).map((c) => c.name);
  const body: KnownBlock[] = clusters.map((c) => clusterSection(c, currency));
  body.push({
    type: 'context',
    elements: [mrkdwn('`/cloud cluster <name>` shows every price of one cluster, with its status.')],
  });
  const head = (part: number, total: number): KnownBlock[] => [
    {
      type: 'section',
      text: mrkdwn(
        `*Active clusters* (${clusters.length})${total > 1 ? ` · part ${part}/${total}` : ''}\nHourly prices in ${escapeMrkdwn(currency)} · reference VM: ${referenceVmText(input.referenceVm)}, 730 h a month`,
      ),
    },
  ];
  const text = (part: number, total: number) =>
    `Active clusters: ${clusters.length}${cheapest.length > 0 ? `, cheapest reference VM in ${cheapest.map(escapeMrkdwn).join(', ')}` : ''}${total > 1 ? ` (part ${part}/${total})` : ''}`;
  return packMessages(body, head, text);
}

/** `/cloud cluster <name>`: everything the API said, known and unknown price fields alike. */
export function clusterDetailMessage(
  view: ClusterView,
  currency: string,
  referenceVm: ReferenceVmView,
): PricingMessage {
  const lines = Object.entries(view.prices).map(
    ([key, value]) => `• ${priceLabel(key)}: ${escapeMrkdwn(value)}`,
  );
  const blocks: KnownBlock[] = [
    clusterSection(view, currency),
    ...lineSections(lines, `*All hourly prices* (${escapeMrkdwn(currency)})`),
  ];
  const context = [`Reference VM: ${referenceVmText(referenceVm)}, 730 h a month`];
  if (view.description) context.unshift(truncate(escapeMrkdwn(view.description), 1000));
  blocks.push({ type: 'context', elements: context.map((c) => mrkdwn(c)) });
  return {
    text: `Cluster ${escapeMrkdwn(view.name)}${view.location ? ` (${escapeMrkdwn(view.location)})` : ''}: reference VM ${costLine(view.cost, currency)}`,
    blocks,
  };
}
