import type { ChartInput } from '../charts/price-chart.ts';
import type { UploadScope } from '../charts/upload-scope.ts';
import type { Logger } from '../observability/logger.ts';
import { type HistoryPoint, type PriceHistory, referenceKey } from '../pricing/price-history.ts';
import { HOURS_PER_MONTH } from '../rules/cost.ts';
import type { ReferenceVm } from '../rules/types.ts';
import type { SlackApi } from '../slack-api/client.ts';
import { SlackApiError, SlackPlatformError } from '../slack-api/errors.ts';

/** One chart's whole upload (three requests) must be done within this: the digest's text is already out. */
export const CHART_UPLOAD_TIMEOUT_MS = 8_000;

/** What became of a digest's chart. */
export type ChartOutcome = 'posted' | 'no-scope' | 'no-history' | 'failed';

export interface ChartPosterDeps {
  history: PriceHistory;
  slack: Pick<SlackApi, 'uploadFile'>;
  reference: ReferenceVm;
  currency: string;
  scope: UploadScope;
  logger: Logger;
  timeoutMs?: number;
}

/** "2 vCores (regular), 4 GB RAM, 50 GB disk, public IP · 730 h a month". */
export function referenceSubtitle(reference: ReferenceVm): string {
  return `${reference.cores} vCore${reference.cores === 1 ? '' : 's'} (${reference.cpu_class}), ${reference.ram_gb} GB RAM, ${reference.os_disk_gb} GB disk${reference.public_ip ? ', public IP' : ''} · ${HOURS_PER_MONTH} h a month`;
}

/** Draws `input` (loading the drawing code on first use) and shares it in `channel`, in the thread of `threadTs`. */
export async function uploadChart(
  deps: ChartPosterDeps,
  input: ChartInput,
  where: {
    channel: string;
    threadTs?: string;
    filename: string;
    title: string;
    comment: (alt: string) => string;
  },
): Promise<ChartOutcome> {
  if (!deps.scope.usable) return 'no-scope';
  try {
    const { drawChart } = await import('../charts/draw.ts');
    const chart = await drawChart(input);
    await deps.slack.uploadFile(
      {
        bytes: chart.png,
        filename: where.filename,
        title: where.title,
        altText: chart.alt,
        channel: where.channel,
        threadTs: where.threadTs,
        initialComment: where.comment(chart.alt),
      },
      { timeoutMs: deps.timeoutMs ?? CHART_UPLOAD_TIMEOUT_MS },
    );
    deps.scope.granted();
    return 'posted';
  } catch (error) {
    if (error instanceof SlackPlatformError && error.error === 'missing_scope') {
      deps.scope.missing('upload');
      return 'no-scope';
    }
    const label = error instanceof SlackApiError ? error.code : (error as Error).name;
    deps.logger.warn({ channel: where.channel, error: label }, 'chart: not posted');
    return 'failed';
  }
}

/** "26 Nov 2026". */
function day(iso: string): string {
  return new Date(iso).toLocaleDateString('en-GB', {
    day: 'numeric',
    month: 'short',
    year: 'numeric',
    timeZone: 'UTC',
  });
}

/** The digest's chart: the channel's past digests, shared in the thread of the digest's first message. */
export async function postDigestChart(
  deps: ChartPosterDeps,
  channel: string,
  threadTs: string | undefined,
): Promise<ChartOutcome> {
  if (!deps.scope.usable) return 'no-scope';
  let points: HistoryPoint[];
  try {
    points = await deps.history.channelPoints(channel, referenceKey(deps.reference));
  } catch (error) {
    deps.logger.warn({ err: error, channel }, 'chart: price history could not be read');
    return 'failed';
  }
  const last = points.at(-1);
  if (!last || Object.keys(last.costs).length === 0) return 'no-history';
  return uploadChart(
    deps,
    {
      title: 'Reference VM, monthly cost per cluster',
      subtitle: referenceSubtitle(deps.reference),
      currency: deps.currency,
      points,
    },
    {
      channel,
      threadTs,
      filename: `price-history-${last.at.slice(0, 10)}.png`,
      title: `Reference VM cost per cluster, ${day(last.at)}`,
      comment: () =>
        `:chart_with_upwards_trend: The reference VM's monthly cost per cluster over ${points.length === 1 ? 'this digest' : `the last ${points.length} digests`}.`,
    },
  );
}
