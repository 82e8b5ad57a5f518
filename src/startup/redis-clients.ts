/**
 * The Redis clients a bot process opens on one target, and the one log they share: a fast client for work that
 * must answer within a deadline (Slack's 3 s), a waiting one for BullMQ's queues, and, where workers run, waiting
 * ones for BullMQ's workers and for the workers' own keys.
 */
import { createRedis, type RedisClient, type RedisTarget } from '../config/redis-connection.ts';
import { JOBS_REDIS_OPTIONS, QUEUE_REDIS_OPTIONS } from '../jobs/redis-options.ts';
import { redisConnectionLog } from '../observability/connection-log.ts';
import type { Logger } from '../observability/logger.ts';

export interface RedisClients {
  /** Fails fast while Redis is down instead of queueing commands. */
  fast: RedisClient;
  /** Waits for Redis to come back (BullMQ needs maxRetriesPerRequest null): the queues, auto-pipelined. */
  queue: RedisClient;
  /** With `workers`: BullMQ's workers, waiting, each command written as it comes (see JOBS_REDIS_OPTIONS). */
  jobs?: RedisClient;
  /**
   * With `workers`: the workers' requests, VM locks, send markers and reply records, waiting and auto-pipelined, with
   * none of BullMQ's scripts on it: ioredis copies every script defined on a connection onto each auto-pipelined
   * batch (about 65 on BullMQ's), which made a worker's own round trips cost more CPU than their commands.
   */
  records?: RedisClient;
  /** One line when Redis goes and one when it is back, whichever client, queue or worker notices first. */
  log: ReturnType<typeof redisConnectionLog>;
}

/** Opens the clients (the fast one at once, or on `connect()` with `lazyConnect`), their errors on one log. */
export function openRedisClients(
  target: RedisTarget,
  logger: Logger,
  options: { lazyConnect: boolean; workers?: boolean },
): RedisClients {
  const fast = createRedis(target, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    lazyConnect: options.lazyConnect,
  });
  const queue = createRedis(target, QUEUE_REDIS_OPTIONS);
  const jobs = options.workers ? createRedis(target, JOBS_REDIS_OPTIONS) : undefined;
  const records = options.workers ? createRedis(target, QUEUE_REDIS_OPTIONS) : undefined;
  const log = redisConnectionLog(logger);
  for (const [connection, client] of [
    ['fast', fast],
    ['queue', queue],
    ['jobs', jobs],
    ['records', records],
  ] as const) {
    client?.on('error', (error: Error) => log.failure(error, { connection }));
    client?.on('ready', () => log.recovered());
  }
  return { fast, queue, jobs, records, log };
}
