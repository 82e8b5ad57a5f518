import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';

/** How long a delivery is remembered: Slack's last retry of an event comes within minutes, not hours. */
export const DELIVERY_TTL_SECONDS = 3600;

/**
 * How long the guard may hold a delivery before its ack: the handlers keep 2 s of Slack's 3 s for their own Redis
 * work (PRE_ACK_BUDGET_MS), so a slow Redis costs the guard this much at most, and the delivery goes on unguarded.
 */
export const GUARD_TIMEOUT_MS = 300;

/**
 * What identifies one thing a person did, however often Slack delivers it: an event's `event_id`, an interaction's or
 * a command's `trigger_id` (one per click, submission or command), else a digest of the whole payload. The envelope
 * id is left out on purpose: a delivery on a new connection may carry a new one.
 */
export function deliveryKey(body: Record<string, unknown>): string {
  if (typeof body.event_id === 'string' && body.event_id !== '') return `event:${body.event_id}`;
  if (typeof body.trigger_id === 'string' && body.trigger_id !== '') return `trigger:${body.trigger_id}`;
  return `payload:${createHash('sha256').update(JSON.stringify(body)).digest('hex')}`;
}

/** What the guard knows of a delivery: the first time, or seen before, with the answer it got then if known. */
export type Delivery = { first: true } | { first: false; answer?: Record<string, unknown> };

/** The mark of a delivery whose answer is not known (yet, or it had none). */
const NO_ANSWER = '-';

/** Remembers deliveries in Redis under the key prefix, so one delivered again is not acted on twice. */
export class RedeliveryGuard {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    private readonly ttlSeconds = DELIVERY_TTL_SECONDS,
    private readonly timeoutMs = GUARD_TIMEOUT_MS,
  ) {}

  /**
   * Whether `body` arrives for the first time, or again (from any process sharing the Redis) with the answer it got
   * then, if one was remembered. Throws when Redis fails or does not answer within the guard's timeout: the caller
   * decides. A write that answers late still lands, so a later delivery of the same thing is caught.
   */
  async check(body: Record<string, unknown>): Promise<Delivery> {
    const key = this.key(body);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`Redis did not answer within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
    });
    const lookup = (async (): Promise<Delivery> => {
      if ((await this.redis.set(key, NO_ANSWER, 'EX', this.ttlSeconds, 'NX')) === 'OK')
        return { first: true };
      const stored = await this.redis.get(key);
      const answer =
        stored && stored !== NO_ANSWER ? (JSON.parse(stored) as Record<string, unknown>) : undefined;
      return { first: false, answer };
    })();
    lookup.catch(() => undefined);
    try {
      return await Promise.race([lookup, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Keeps the answer given to `body` with its mark, so a delivery of it again gets the same answer (field errors in
   * a modal, a command's text) when the first one never reached Slack.
   */
  async remember(body: Record<string, unknown>, answer: Record<string, unknown>): Promise<void> {
    await this.redis.set(this.key(body), JSON.stringify(answer), 'KEEPTTL', 'XX');
  }

  private key(body: Record<string, unknown>): string {
    return `${this.prefix}:delivery:${deliveryKey(body)}`;
  }
}
