/**
 * The Redis clients a bot process opens on one target, and the one log they share: a fast client for work that
 * must answer within a deadline (Slack's 3 s), a waiting one for BullMQ's queues, and, where workers run, waiting
 * ones for BullMQ's workers and for the workers' own keys.
 */
import { Cluster } from 'ioredis';
import { clusterHealth } from '../config/cluster-health.ts';
import {
  createRedis,
  describeRedis,
  type RedisClient,
  type RedisTarget,
  watchReplicas,
} from '../config/redis-connection.ts';
import { JOBS_REDIS_OPTIONS, QUEUE_REDIS_OPTIONS } from '../jobs/redis-options.ts';
import { redisConnectionLog } from '../observability/connection-log.ts';
import type { Logger } from '../observability/logger.ts';
import { waitForRedis } from './checks.ts';
import type { StartupDeadline } from './deadline.ts';
import { type ShutdownStages, within } from './stages.ts';

/** How long start-up waits for Redis, within the start-up deadline. */
const REDIS_STARTUP_MS = 5_000;

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

/** The bot's Redis: its clients, and with Sentinels which replicas a write waits for. */
export interface BotRedis {
  clients: RedisClients;
  replicas: ReturnType<typeof watchReplicas> | undefined;
}

/**
 * Opens the bot's clients on `target`, closed by the shutdown's connections stage, and waits for Redis within the
 * start-up deadline (a StartupError naming Redis when it does not answer); a cluster's health is logged at once.
 */
export async function connectBotRedis(
  target: RedisTarget,
  logger: Logger,
  workers: boolean,
  stages: ShutdownStages,
  deadline: StartupDeadline,
): Promise<BotRedis> {
  const clients = openRedisClients(target, logger, { lazyConnect: false, workers });
  const { fast: fastRedis, queue: queueRedis, jobs: jobsRedis, records: recordsRedis } = clients;
  // With Sentinels, how many replicas a critical write waits for (src/jobs/replica-ack.ts).
  const replicas = target.sentinels ? watchReplicas(target) : undefined;
  stages.connections.push(async (budget) => {
    replicas?.close();
    fastRedis.disconnect();
    // QUIT lets BullMQ's last writes land; a Redis that does not answer is simply dropped.
    await Promise.all(
      [queueRedis, jobsRedis, recordsRedis].map(
        (client) => client && within(client.quit(), budget).catch(() => undefined),
      ),
    );
    for (const client of [queueRedis, jobsRedis, recordsRedis]) client?.disconnect();
  });
  deadline.waitingFor = `Redis (${describeRedis(target).variable})`;
  // Within what is left of the start-up, so the line names Redis rather than the deadline.
  await waitForRedis(fastRedis, target, deadline.within(REDIS_STARTUP_MS), deadline.signal);
  // A cluster can be up with slots unserved: say at once what the bot found.
  if (fastRedis instanceof Cluster) {
    const health = await clusterHealth(fastRedis);
    const { line, ...counts } = health;
    if (health.ok) logger.info(counts, line);
    else logger.warn(counts, line);
  }
  return { clients, replicas };
}
