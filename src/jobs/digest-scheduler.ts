import { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { queueTelemetry } from '../observability/tracing.ts';
import { type DigestSchedule, nextRun } from '../pricing/schedule-parse.ts';
import { EVENTS_MAX_LEN } from './queues.ts';

/** The BullMQ queue that carries digest jobs (keys `${prefix}:pricing-digest:*`). */
export const DIGEST_QUEUE = 'pricing-digest';

/** What a digest job carries: the channel, and for scheduled ones the schedule (for "next digest at"). */
export interface DigestJobData {
  channel: string;
  kind: 'scheduled' | 'now';
  pattern?: string;
  tz?: string;
  label?: string;
  by?: string;
}

/** Retries for Slack trouble other than rate limits (those wait Retry-After without using an attempt). */
export const DIGEST_JOB_OPTIONS = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 2000 },
  removeOnComplete: { count: 200 },
  removeOnFail: { count: 200 },
} as const;

/**
 * Shortest gap between two `/cloud digest now` in one channel. Each one reads the whole price list from the API and
 * posts a full digest in the channel; prices do not change by the minute.
 */
export const DIGEST_NOW_INTERVAL_MS = 10 * 60_000;

/** What `digest now` did: queued one, or refused until `nextAt` because one was asked for shortly before. */
export type SendNowResult = { queued: true; nextAt: Date } | { queued: false; nextAt: Date };

/** A channel's subscription as it lives in Redis. */
export interface Subscription {
  channel: string;
  pattern: string;
  tz: string;
  label: string;
  next?: Date;
}

/**
 * Channel subscriptions as BullMQ job schedulers, one per channel (scheduler id = channel id, so subscribing
 * again replaces the schedule). They live in Redis: restarts and several instances share them.
 */
export class DigestScheduler {
  readonly queue: Queue<DigestJobData>;

  constructor(options: {
    connection: Redis | Cluster;
    prefix: string;
    now: () => Date;
    /** Shortest gap between two `digest now` in a channel (default DIGEST_NOW_INTERVAL_MS). */
    nowIntervalMs?: number;
  }) {
    this.queue = new Queue<DigestJobData>(DIGEST_QUEUE, {
      connection: options.connection,
      prefix: options.prefix,
      streams: { events: { maxLen: EVENTS_MAX_LEN } },
      telemetry: queueTelemetry(),
    });
    this.now = options.now;
    this.redis = options.connection;
    this.prefix = options.prefix;
    this.nowIntervalMs = options.nowIntervalMs ?? DIGEST_NOW_INTERVAL_MS;
  }

  private readonly now: () => Date;
  private readonly redis: Redis | Cluster;
  private readonly prefix: string;
  private readonly nowIntervalMs: number;

  /** Creates or replaces the channel's schedule; returns when the first digest runs. */
  async subscribe(channel: string, schedule: DigestSchedule, by?: string): Promise<Subscription> {
    await this.queue.upsertJobScheduler(
      channel,
      { pattern: schedule.pattern, tz: schedule.tz },
      {
        name: 'digest',
        data: {
          channel,
          kind: 'scheduled',
          pattern: schedule.pattern,
          tz: schedule.tz,
          label: schedule.label,
          by,
        },
        opts: DIGEST_JOB_OPTIONS,
      },
    );
    return { channel, ...schedule, next: nextRun(schedule, this.now()) };
  }

  /** Removes the channel's schedule; false when there was none. */
  async unsubscribe(channel: string): Promise<boolean> {
    return this.queue.removeJobScheduler(channel);
  }

  async get(channel: string): Promise<Subscription | undefined> {
    const found = await this.queue.getJobScheduler(channel);
    if (!found?.pattern) return undefined;
    const tz = found.tz ?? 'UTC';
    return {
      channel,
      pattern: found.pattern,
      tz,
      label: found.template?.data?.label ?? `cron \`${found.pattern}\` (${tz})`,
      next:
        found.next !== undefined ? new Date(found.next) : nextRun({ pattern: found.pattern, tz }, this.now()),
    };
  }

  async count(): Promise<number> {
    return this.queue.getJobSchedulersCount();
  }

  /**
   * Queues one digest for the channel right away, besides its schedule: at most one per `nowIntervalMs` per channel,
   * whichever process is asked (a Redis key with that TTL, set only when absent). Refused, it says when the next one
   * may be asked for.
   */
  async sendNow(channel: string, by?: string): Promise<SendNowResult> {
    const key = `${this.prefix}:digest-now:${channel}`;
    const at = this.now().getTime();
    const claimed = await this.redis.set(key, by ?? '', 'PX', this.nowIntervalMs, 'NX');
    if (claimed !== 'OK') {
      const left = await this.redis.pttl(key);
      return { queued: false, nextAt: new Date(at + Math.max(left, 1000)) };
    }
    try {
      // Custom BullMQ job ids may not contain ':'; the time keeps two requests apart.
      await this.queue.add(
        'digest',
        { channel, kind: 'now', by },
        { ...DIGEST_JOB_OPTIONS, jobId: `now-${channel}-${at}` },
      );
    } catch (error) {
      // Nothing was queued: the channel may ask again at once.
      await this.redis.del(key).catch(() => undefined);
      throw error;
    }
    return { queued: true, nextAt: new Date(at + this.nowIntervalMs) };
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
