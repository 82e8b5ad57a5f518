/**
 * The Redis clients a bot process opens on one target, and the one log they share: a fast client for work that
 * must answer within a deadline (Slack's 3 s), a waiting one for BullMQ, and, where workers run, a waiting one for
 * the workers' own keys.
 */
import { createRedis, type RedisClient, type RedisTarget } from '../config/redis-connection.ts';
import { QUEUE_REDIS_OPTIONS } from '../jobs/redis-options.ts';
import { redisConnectionLog } from '../observability/connection-log.ts';
import type { Logger } from '../observability/logger.ts';

export interface RedisClients {
  /** Fails fast while Redis is down instead of queueing commands. */
  fast: RedisClient;
  /** Waits for Redis to come back: BullMQ needs maxRetriesPerRequest null. */
  queue: RedisClient;
  /**
   * Waits like `queue`, for the workers' requests, VM locks, send markers and reply records, with none of BullMQ's
   * scripts on it: ioredis copies every script defined on a connection onto each auto-pipelined batch (about 65 on
   * BullMQ's), which made a worker's own round trips cost more CPU than their commands. Opened with `records`.
   */
  records?: RedisClient;
  /** One line when Redis goes and one when it is back, whichever client, queue or worker notices first. */
  log: ReturnType<typeof redisConnectionLog>;
}

/** Opens both clients (the fast one at once, or on `connect()` with `lazyConnect`), their errors on one log. */
export function openRedisClients(
  target: RedisTarget,
  logger: Logger,
  options: { lazyConnect: boolean; records?: boolean },
): RedisClients {
  const fast = createRedis(target, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    lazyConnect: options.lazyConnect,
  });
  const queue = createRedis(target, QUEUE_REDIS_OPTIONS);
  const records = options.records ? createRedis(target, QUEUE_REDIS_OPTIONS) : undefined;
  const log = redisConnectionLog(logger);
  for (const [connection, client] of [
    ['fast', fast],
    ['queue', queue],
    ['records', records],
  ] as const) {
    client?.on('error', (error: Error) => log.failure(error, { connection }));
    client?.on('ready', () => log.recovered());
  }
  return { fast, queue, records, log };
}
