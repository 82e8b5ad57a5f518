import type { Redis } from 'ioredis';

/** Bytes under the prefix: keys without a TTL, and keys with one (they expire by themselves). */
export interface Footprint {
  bytes: number;
  keys: number;
  ttlBytes: number;
  ttlKeys: number;
  byKind: Record<string, number>;
}

/** BullMQ's own keys of a queue; any other key under a queue is a job (its hash, logs or dependencies). */
const QUEUE_KEYS = new Set([
  'completed',
  'failed',
  'wait',
  'active',
  'delayed',
  'paused',
  'prioritized',
  'waiting-children',
  'meta',
  'events',
  'id',
  'marker',
  'stalled',
  'stalled-check',
  'limiter',
  'pc',
]);

/**
 * What a key is, for the breakdown: the part after the prefix, ids left out. BullMQ's own keys are named per queue
 * (`home events`, `notify meta`) whatever the queue, so a queue's bounded structures are told from its jobs.
 */
function kindOf(prefix: string, key: string): string {
  const [first = '', second = ''] = key.slice(prefix.length + 1).split(':');
  if (QUEUE_KEYS.has(second)) return `${first} ${second}`;
  return first === 'execute' || first === 'notify' ? `${first} jobs` : first;
}

/** MEMORY USAGE of every key under `prefix`, keys with a TTL apart, and a breakdown by kind. */
export async function footprint(redis: Redis, prefix: string): Promise<Footprint> {
  const result: Footprint = { bytes: 0, keys: 0, ttlBytes: 0, ttlKeys: 0, byKind: {} };
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    const pipeline = redis.pipeline();
    for (const key of keys) pipeline.memory('USAGE', key, 'SAMPLES', '0').pttl(key);
    const replies = (await pipeline.exec()) ?? [];
    keys.forEach((key, i) => {
      const bytes = Number(replies[2 * i]?.[1] ?? 0);
      const ttl = Number(replies[2 * i + 1]?.[1] ?? -1);
      if (ttl >= 0) {
        result.ttlBytes += bytes;
        result.ttlKeys += 1;
        return;
      }
      result.bytes += bytes;
      result.keys += 1;
      const kind = kindOf(prefix, key);
      result.byKind[kind] = (result.byKind[kind] ?? 0) + bytes;
    });
  } while (cursor !== '0');
  return result;
}
