import type { KnownBlock } from '@slack/types';
import type { DigestRenderer } from '../../jobs/renderers.ts';
import type { DigestDiff, PriceChange } from '../../pricing/diff.ts';
import { clusterViews, referenceVmView } from './cluster-views.ts';
import {
  type ClusterView,
  clusterSection,
  lineSections,
  type PricingMessage,
  packMessages,
  type ReferenceVmView,
  referenceVmText,
} from './clusters.ts';
import { costLine } from './money.ts';
import { escapeMrkdwn, mrkdwn, plain, slackDate } from './text.ts';

export interface DigestInput {
  clusters: ClusterView[];
  diff: DigestDiff;
  currency: string;
  referenceVm: ReferenceVmView;
  at: Date;
}

/** "zone-1 RAM 0.0050 → 0.0055 (:arrow_up: +10.0%)". */
export function changeLine(change: PriceChange): string {
  const what = `*${escapeMrkdwn(change.cluster)}* ${escapeMrkdwn(change.label)}`;
  const before = escapeMrkdwn(change.before ?? '');
  const after = escapeMrkdwn(change.after ?? '');
  switch (change.direction) {
    case 'up':
    case 'down': {
      const arrow = change.direction === 'up' ? ':arrow_up:' : ':arrow_down:';
      return `• ${what} ${before} → ${after} (${arrow} ${change.percent !== undefined ? `${change.percent}%` : 'from 0'})`;
    }
    case 'new':
      return `• ${what}: new price ${after}`;
    case 'gone':
      return `• ${what}: no longer listed (was ${before})`;
    case 'changed':
      return `• ${what} ${before} → ${after}`;
  }
}

/** The "what changed" lines of a digest. */
export function changeLines(diff: DigestDiff): string[] {
  return [
    ...diff.added.map(
      (c) => `• :new: *${escapeMrkdwn(c.name)}*${c.location ? ` (${escapeMrkdwn(c.location)})` : ''} is new`,
    ),
    ...diff.removed.map(
      (c) =>
        `• :x: *${escapeMrkdwn(c.name)}*${c.location ? ` (${escapeMrkdwn(c.location)})` : ''} is no longer listed`,
    ),
    ...diff.changes.map(changeLine),
  ];
}

function changeBlocks(diff: DigestDiff): KnownBlock[] {
  if (!diff.hasPrevious) {
    return [
      { type: 'section', text: mrkdwn('First digest in this channel: changes are shown from the next one.') },
    ];
  }
  const since = diff.since ? ` (${slackDate(new Date(diff.since))})` : '';
  const lines = changeLines(diff);
  if (lines.length === 0)
    return [{ type: 'section', text: mrkdwn(`No changes since the last digest${since}.`) }];
  return lineSections(lines, `*Since the last digest*${since}`);
}

/**
 * The pricing digest as one or more messages, each inside Slack's limits and complete in itself: every part
 * has its own header, date and currency, and a cluster's section is never cut in two.
 */
export function digestMessages(input: DigestInput): PricingMessage[] {
  const { clusters, diff, currency } = input;
  const cheapest = clusters.filter((c) => c.cost.cheapest);
  const body: KnownBlock[] = [...changeBlocks(diff), { type: 'divider' }];
  if (clusters.length === 0) {
    body.push({ type: 'section', text: mrkdwn('The cloud API lists no active clusters right now.') });
  }
  for (const cluster of clusters) body.push(clusterSection(cluster, currency));
  if (cheapest.length > 0) {
    const names = cheapest.map((c) => `*${escapeMrkdwn(c.name)}*`).join(', ');
    const first = cheapest[0];
    body.push({
      type: 'context',
      elements: [
        mrkdwn(
          `:star: Cheapest reference VM: ${names} at ${first ? escapeMrkdwn(costLine(first.cost, currency)) : ''}`,
        ),
      ],
    });
  }
  const counts = `${clusters.length} active cluster${clusters.length === 1 ? '' : 's'}`;
  const head = (part: number, total: number): KnownBlock[] => [
    { type: 'header', text: plain(`Pricing digest${total > 1 ? ` (${part}/${total})` : ''}`, 150) },
    {
      type: 'context',
      elements: [
        mrkdwn(
          `${slackDate(input.at)} · ${counts} · hourly prices in ${escapeMrkdwn(currency)} · reference VM: ${referenceVmText(input.referenceVm)}, 730 h a month`,
        ),
      ],
    },
  ];
  const changes = diff.hasPrevious ? diff.added.length + diff.removed.length + diff.changes.length : 0;
  const text = (part: number, total: number) =>
    `Pricing digest${total > 1 ? ` (${part}/${total})` : ''}: ${counts}, ${changes} change${changes === 1 ? '' : 's'}${
      cheapest[0] ? `, cheapest reference VM in ${cheapest.map((c) => escapeMrkdwn(c.name)).join(', ')}` : ''
    }`;
  return packMessages(body, head, text);
}

/** Posted instead of the digest when the cloud API cannot be read; the schedule goes on. */
export function digestFailureMessage(reason: string, next: Date | undefined): PricingMessage {
  const nextText = next ? ` The next digest is at ${slackDate(next)}.` : '';
  const text = `:warning: Pricing digest: the cloud API could not be read (${reason}).${nextText}`;
  return { text, blocks: [{ type: 'section', text: mrkdwn(text) }] };
}

/** The digest's Block Kit, as the digest worker receives it (wired by main.ts). */
export const digestRenderer: DigestRenderer = {
  digest: ({ clusters, diff, policy, at }) =>
    digestMessages({
      clusters: clusterViews(clusters, policy.reference_vm),
      diff,
      currency: policy.currency,
      referenceVm: referenceVmView(policy.reference_vm),
      at,
    }),
  failure: digestFailureMessage,
};
