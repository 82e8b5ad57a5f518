import type { Cluster, Redis } from 'ioredis';
import type { DigestSnapshot } from '../pricing/price-fields.ts';
import type { RenderedMessage } from './renderers.ts';

/** How long the record of one tick is kept: long past any retry of it. */
export const TICK_TTL_SECONDS = 3 * 24 * 3600;
/** How long a worker holds a tick without renewing it; a crashed holder's tick is free again after this. */
export const TICK_LEASE_MS = 30_000;

/** Deletes or extends the lease only when `token` still holds it. */
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`;
const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`;

/** What one tick posts, fixed on its first attempt so that retries send the rest of the same digest. */
export interface TickPlan {
  messages: RenderedMessage[];
  /** Saved as the channel's snapshot once every message is posted; absent for a failure notice. */
  snapshot?: DigestSnapshot;
}

/**
 * The state of one channel's digest at one tick, in Redis: who is sending it right now (a SET NX lease, so two
 * workers never send the same tick at once), the plan, how many parts are posted, and whether it is done.
 */
export class TickStore {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
  ) {}

  private base(channel: string, tick: string): string {
    return `${this.prefix}:digest:tick:${channel}:${tick}`;
  }

  private leaseKey(channel: string, tick: string): string {
    return `${this.base(channel, tick)}:lease`;
  }

  /** Takes the tick for `token`; false while someone else holds it. */
  async claim(channel: string, tick: string, token: string, leaseMs = TICK_LEASE_MS): Promise<boolean> {
    return (await this.redis.set(this.leaseKey(channel, tick), token, 'PX', leaseMs, 'NX')) === 'OK';
  }

  /** Extends the lease before each Slack call; false when it was lost (expired and taken by another). */
  async renew(channel: string, tick: string, token: string, leaseMs = TICK_LEASE_MS): Promise<boolean> {
    return (await this.redis.eval(RENEW, 1, this.leaseKey(channel, tick), token, String(leaseMs))) === 1;
  }

  async release(channel: string, tick: string, token: string): Promise<void> {
    await this.redis.eval(RELEASE, 1, this.leaseKey(channel, tick), token);
  }

  /** The tick's plan, stored by the first attempt; later attempts get the stored one back. */
  async plan(channel: string, tick: string, build: () => Promise<TickPlan>): Promise<TickPlan> {
    const key = `${this.base(channel, tick)}:state`;
    const stored = await this.redis.hget(key, 'plan');
    if (stored !== null) return JSON.parse(stored) as TickPlan;
    const plan = await build();
    await this.redis.multi().hsetnx(key, 'plan', JSON.stringify(plan)).expire(key, TICK_TTL_SECONDS).exec();
    const kept = await this.redis.hget(key, 'plan');
    return kept !== null ? (JSON.parse(kept) as TickPlan) : plan;
  }

  /** How many parts are already posted. */
  async sent(channel: string, tick: string): Promise<number> {
    return Number((await this.redis.hget(`${this.base(channel, tick)}:state`, 'sent')) ?? '0');
  }

  /** `ts` of the first part is kept: the digest's chart goes into its thread. */
  async markSent(channel: string, tick: string, count: number, ts?: string): Promise<void> {
    const key = `${this.base(channel, tick)}:state`;
    if (count === 1 && ts) await this.redis.hset(key, 'sent', String(count), 'ts', ts);
    else await this.redis.hset(key, 'sent', String(count));
  }

  /** The `ts` of the digest's first message, once posted. */
  async firstTs(channel: string, tick: string): Promise<string | undefined> {
    return (await this.redis.hget(`${this.base(channel, tick)}:state`, 'ts')) ?? undefined;
  }

  async isDone(channel: string, tick: string): Promise<boolean> {
    return (await this.redis.hget(`${this.base(channel, tick)}:state`, 'done')) === '1';
  }

  async markDone(channel: string, tick: string): Promise<void> {
    await this.redis.hset(`${this.base(channel, tick)}:state`, 'done', '1');
  }
}
