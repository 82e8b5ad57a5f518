import { redisKeyPrefix } from '../../config/redis-connection.ts';
import { exportAudit } from '../../requests/audit/audit.ts';
import { parseSince, SinceError, writeAuditJsonLines } from '../../requests/audit/export.ts';
import { type CliIo, UsageError, write } from '../io.ts';
import { withCliRedis } from '../redis.ts';

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
  return withCliRedis(io.env, async (redis) => {
    if (json) {
      await writeAuditJsonLines(redis, redisKeyPrefix(io.env), from, io.stdout);
      return 0;
    }
    let count = 0;
    for await (const entry of exportAudit(redis, redisKeyPrefix(io.env), from)) {
      count++;
      await write(
        io.stdout,
        `${entry.at}  ${entry.requestId}  ${entry.state.padEnd(15)}  ${shown(entry.actor)}${entry.detail ? `  ${shown(entry.detail)}` : ''}\n`,
      );
    }
    if (count === 0) await write(io.stdout, `No audit entries since ${from.toISOString()}.\n`);
    return 0;
  });
}

/** What could forge a line or reach the terminal: control and format characters (line breaks, escapes, bidi), quotes. */
const UNSAFE = /[\p{Cc}\p{Cf}\u2028\u2029"\\]|^\s|\s$/u;

/**
 * Typed text (a reason in a detail) as one line of the listing: as it is when it holds nothing unsafe, else as a JSON
 * string, as `--json` prints it, with format characters (bidi overrides, zero-width) escaped as well.
 */
export function shown(text: string): string {
  if (!UNSAFE.test(text)) return text;
  return JSON.stringify(text).replace(
    /[\p{Cf}\u007F-\u009F\u2028\u2029]/gu,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
