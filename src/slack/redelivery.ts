import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

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

/** Remembers deliveries in Redis under the key prefix, so one delivered again is not acted on twice. */
export class RedeliveryGuard {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly ttlSeconds = DELIVERY_TTL_SECONDS,
    private readonly timeoutMs = GUARD_TIMEOUT_MS,
  ) {}

  /**
   * True the first time `body` arrives, false for a delivery of the same thing again (from any process sharing the
   * Redis). Throws when Redis fails or does not answer within the guard's timeout: the caller decides. A write that
   * answers late still lands, so a later delivery of the same thing is caught.
   */
  async first(body: Record<string, unknown>): Promise<boolean> {
    const key = `${this.prefix}:delivery:${deliveryKey(body)}`;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`Redis did not answer within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
    });
    const set = this.redis.set(key, '1', 'EX', this.ttlSeconds, 'NX');
    set.catch(() => undefined);
    try {
      return (await Promise.race([set, late])) === 'OK';
    } finally {
      clearTimeout(timer);
    }
  }
}
