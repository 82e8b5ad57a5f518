import { createRedis, describeRedis, redisKeyPrefix, redisTarget } from '../../config/redis-connection.ts';
import { exportAudit } from '../../requests/audit.ts';
import { parseSince, SinceError, writeAuditJsonLines } from '../../requests/audit-export.ts';
import { CliError, type CliIo, UsageError, write } from '../io.ts';

/** How long to wait for Redis before saying it cannot be reached. */
const REDIS_CONNECT_TIMEOUT_MS = 5_000;

/**
 * `cloudops audit --since <ISO|24h> [--json]`: the audit log from REDIS_URL (or the master of REDIS_SENTINELS, or
 * the Redis Cluster of REDIS_CLUSTER_NODES) / REDIS_PREFIX, oldest first.
 */
export async function auditCommand(io: CliIo, since: string | undefined, json: boolean): Promise<number> {
  if (since === undefined)
    throw new UsageError('audit needs --since, e.g. --since 24h or --since 2025-01-31T08:00:00Z');
  let from: Date;
  try {
    from = parseSince(since, io.now());
  } catch (error) {
    if (error instanceof SinceError) throw new UsageError(error.message);
    throw error;
  }
  const target = redisTarget(io.env);
  const redis = createRedis(target, {
    lazyConnect: true,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    // One attempt: a CLI should say Redis is down, not wait for it.
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
    if (json) {
      await writeAuditJsonLines(redis, redisKeyPrefix(io.env), from, io.stdout);
      return 0;
    }
    let count = 0;
    for await (const entry of exportAudit(redis, redisKeyPrefix(io.env), from)) {
      count++;
      await write(
        io.stdout,
        `${entry.at}  ${entry.requestId}  ${entry.state.padEnd(15)}  ${entry.actor}${entry.detail ? `  ${entry.detail}` : ''}\n`,
      );
    }
    if (count === 0) await write(io.stdout, `No audit entries since ${from.toISOString()}.\n`);
    return 0;
  } finally {
    redis.disconnect();
  }
}
