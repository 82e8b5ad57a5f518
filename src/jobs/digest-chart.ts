import type { ChartInput } from '../charts/price-chart.ts';
import type { UploadScope } from '../charts/upload-scope.ts';
import type { Logger } from '../observability/logger.ts';
import {
  type HistoryPoint,
  historyPoint,
  type PriceHistory,
  referenceKey,
} from '../pricing/price-history.ts';
import { HOURS_PER_MONTH } from '../rules/cost.ts';
import type { PriceLike, ReferenceVm } from '../rules/types.ts';
import type { SlackApi } from '../slack-api/client.ts';
import { SlackApiError, SlackPlatformError, SlackRateLimitedError } from '../slack-api/errors.ts';

/** One chart's whole upload (three requests) must be done within this: the digest's text is already out. */
export const CHART_UPLOAD_TIMEOUT_MS = 8_000;

/** Charts drawn and uploaded at once by one process: the uploads wait on Slack, the drawing shares two cores. */
export const CHART_LANE_CONCURRENCY = 2;
/** Charts waiting beyond this are dropped (logged): after a burst of digests the oldest pictures matter least. */
export const CHART_LANE_MAX_WAITING = 2_000;

/**
 * Where digest charts wait their turn, apart from the digest jobs: a job hands its chart over and is done, so
 * uploads never hold the slots the next channels' text needs. In memory: a chart lost to a restart is only a picture.
 */
export class ChartLane {
  private running = 0;
  private readonly waiting: { task: () => Promise<unknown>; since: number; attempts: number }[] = [];
  /** Set by a 429: no chart starts before this (Slack's file methods are limited per workspace). */
  private pausedUntil = 0;
  private readonly idle: (() => void)[] = [];
  private retry?: NodeJS.Timeout;
  private pumping = false;
  /** While this says digests are being sent, charts wait (at most {@link CHART_MAX_DEFER_MS}): text goes first. */
  busy: () => Promise<boolean> = async () => false;

  constructor(
    private readonly logger: Logger,
    private readonly concurrency = CHART_LANE_CONCURRENCY,
    private readonly maxWaiting = CHART_LANE_MAX_WAITING,
  ) {}

  /** Queues `task`; false when the lane is full and the chart is dropped. */
  push(task: () => Promise<unknown>): boolean {
    if (this.waiting.length >= this.maxWaiting) {
      this.logger.warn({ waiting: this.waiting.length }, 'chart: too many waiting, one dropped');
      return false;
    }
    this.waiting.push({ task, since: Date.now(), attempts: 0 });
    this.next();
    return true;
  }

  private next(): void {
    void this.pump();
  }

  /** Starts what may start: while digests are being sent, charts younger than the defer limit wait. */
  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.running < this.concurrency && this.waiting.length > 0) {
        const oldest = this.waiting[0];
        const paused = this.pausedUntil - Date.now();
        if (paused > 0) {
          this.wake(paused);
          return;
        }
        if (
          oldest &&
          Date.now() - oldest.since < CHART_MAX_DEFER_MS &&
          (await this.busy().catch(() => false))
        ) {
          this.wake(CHART_BUSY_RECHECK_MS);
          return;
        }
        const item = this.waiting.shift();
        if (!item) break;
        this.running++;
        void item
          .task()
          .catch((error: unknown) => {
            if (error instanceof ChartRateLimitedError && item.attempts + 1 < CHART_ATTEMPTS) {
              // Slack's limit is per workspace: every chart waits, this one goes first again.
              this.pausedUntil = Math.max(this.pausedUntil, Date.now() + error.retryAfterMs);
              this.waiting.unshift({ ...item, attempts: item.attempts + 1 });
              return;
            }
            this.logger.warn({ err: error }, 'chart: not posted');
          })
          .finally(() => {
            this.running--;
            this.next();
          });
      }
      if (this.running === 0 && this.waiting.length === 0) for (const done of this.idle.splice(0)) done();
    } finally {
      this.pumping = false;
    }
  }

  private wake(ms: number): void {
    this.retry ??= setTimeout(() => {
      this.retry = undefined;
      this.next();
    }, ms);
  }

  /** Resolves when nothing runs or waits, or after `timeoutMs` (what is left is dropped). */
  async drain(timeoutMs: number): Promise<void> {
    if (this.running === 0 && this.waiting.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => this.idle.push(resolve)),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    clearTimeout(this.retry);
    this.retry = undefined;
    this.waiting.length = 0;
  }
}

/** Thrown by a chart Slack rate-limited: the lane pauses for `retryAfterMs` and tries it again. */
export class ChartRateLimitedError extends Error {
  override readonly name = 'ChartRateLimitedError';
  readonly code = 'CHART_RATE_LIMITED';
  constructor(readonly retryAfterMs: number) {
    super(`chart upload rate limited, retry after ${retryAfterMs} ms`);
  }
}

/** A chart Slack rate-limits is tried this many times in all. */
export const CHART_ATTEMPTS = 3;

/** Charts wait while digests are being sent, but never longer than this. */
export const CHART_MAX_DEFER_MS = 30_000;
const CHART_BUSY_RECHECK_MS = 250;

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
    /** In the lane a 429 is thrown as {@link ChartRateLimitedError}, to be tried again later; elsewhere it is a failure. */
    onRateLimit?: 'throw';
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
    if (error instanceof SlackRateLimitedError && where.onRateLimit === 'throw')
      throw new ChartRateLimitedError(error.retryAfterMs);
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

/**
 * `/cloud cluster <name>`'s chart: the cluster's known cost changes (kept by digests and by this command) and its
 * cost now, shared in the channel the command was typed in.
 */
export async function postClusterChart(
  deps: ChartPosterDeps,
  cluster: { name: string; prices: PriceLike },
  where: { channel: string; user: string },
  now: Date,
): Promise<ChartOutcome> {
  if (!deps.scope.usable) return 'no-scope';
  const current = historyPoint([cluster], deps.reference, now);
  const cost = current.costs[cluster.name];
  if (cost === undefined) return 'no-history';
  let points: HistoryPoint[];
  try {
    await deps.history.recordClusters(current);
    points = await deps.history.clusterPoints(cluster.name, current.ref);
  } catch (error) {
    deps.logger.warn({ err: error, cluster: cluster.name }, 'chart: price history could not be read');
    return 'failed';
  }
  // The chart ends at now: the last known change may be days old.
  if (points.at(-1)?.at !== current.at) points.push(current);
  return uploadChart(
    deps,
    {
      title: `${cluster.name}: reference VM, monthly cost`,
      subtitle: referenceSubtitle(deps.reference),
      currency: deps.currency,
      points,
      markCheapest: false,
    },
    {
      channel: where.channel,
      filename: `price-history-${cluster.name}-${current.at.slice(0, 10)}.png`,
      title: `${cluster.name}: reference VM cost, ${day(current.at)}`,
      comment: () =>
        `:chart_with_upwards_trend: ${cluster.name}'s price history (the reference VM a month), asked for by <@${where.user}>.`,
    },
  );
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
      onRateLimit: 'throw',
      filename: `price-history-${last.at.slice(0, 10)}.png`,
      title: `Reference VM cost per cluster, ${day(last.at)}`,
      comment: () =>
        `:chart_with_upwards_trend: The reference VM's monthly cost per cluster over ${points.length === 1 ? 'this digest' : `the last ${points.length} digests`}.`,
    },
  );
}
