import type { Redis } from 'ioredis';
import type { PricingMessage } from '../blocks/clusters.ts';
import type { DigestSnapshot } from '../price-fields.ts';

/** How long the record of one tick is kept: long past any retry of it. */
export const TICK_TTL_SECONDS = 3 * 24 * 3600;

/** What one tick posts, fixed on its first attempt so that retries send the rest of the same digest. */
export interface TickPlan {
  messages: PricingMessage[];
  /** Saved as the channel's snapshot once every message is posted; absent for a failure notice. */
  snapshot?: DigestSnapshot;
}

/**
 * The state of one channel's digest at one tick, in Redis: who owns it (SET NX, so a duplicate job for the same
 * tick sends nothing), the plan, how many parts are posted, and whether it is done.
 */
export class TickStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  private base(channel: string, tick: string): string {
    return `${this.prefix}:digest:tick:${channel}:${tick}`;
  }

  /** True when `owner` holds this tick (first claim, or the same job retrying); false for anyone else. */
  async claim(channel: string, tick: string, owner: string): Promise<boolean> {
    const key = `${this.base(channel, tick)}:owner`;
    const set = await this.redis.set(key, owner, 'EX', TICK_TTL_SECONDS, 'NX');
    if (set === 'OK') return true;
    return (await this.redis.get(key)) === owner;
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

  async markSent(channel: string, tick: string, count: number): Promise<void> {
    await this.redis.hset(`${this.base(channel, tick)}:state`, 'sent', String(count));
  }

  async isDone(channel: string, tick: string): Promise<boolean> {
    return (await this.redis.hget(`${this.base(channel, tick)}:state`, 'done')) === '1';
  }

  async markDone(channel: string, tick: string): Promise<void> {
    await this.redis.hset(`${this.base(channel, tick)}:state`, 'done', '1');
  }
}
