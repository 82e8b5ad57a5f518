/** The operator CLI's Redis: one short-lived connection per command, that says clearly when Redis is down. */
import type { Env } from '../config/env.ts';
import { createRedis, describeRedis, type RedisClient, redisTarget } from '../config/redis-connection.ts';
import { CliError } from './io.ts';

/** How long to wait for Redis before saying it cannot be reached. */
const REDIS_CONNECT_TIMEOUT_MS = 5_000;

/**
 * Connects to the Redis the environment names (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES), runs `use` with
 * it and disconnects. One attempt: a CLI should say Redis is down (a CliError naming the variable), not wait for it.
 */
export async function withCliRedis<T>(env: Env, use: (redis: RedisClient) => Promise<T>): Promise<T> {
  const target = redisTarget(env);
  const redis = createRedis(target, {
    lazyConnect: true,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  // Connection errors surface through connect(); the event would otherwise print a stack. Keep its code.
  let lastError: NodeJS.ErrnoException | undefined;
  redis.on('error', (error: NodeJS.ErrnoException) => {
    lastError = error;
  });
  try {
    try {
      await redis.connect();
    } catch (error) {
      const code = lastError?.code ?? (error as NodeJS.ErrnoException).code;
      const { variable, where } = describeRedis(target);
      throw new CliError(`${variable}: cannot reach ${where} (${code ?? 'no answer'})`);
    }
    return await use(redis);
  } finally {
    redis.disconnect();
  }
}
