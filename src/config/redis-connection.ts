import { Redis, type RedisOptions } from 'ioredis';
import type { Env, SentinelAddress } from './env.ts';
import { parseSentinels } from './env.ts';

/** The master's name at the Sentinels when REDIS_SENTINEL_NAME is unset (PRODUCT.md §2). */
export const DEFAULT_SENTINEL_NAME = 'mymaster';

/**
 * Where the bot's Redis is: one URL, or a master found through Sentinels (REDIS_URL then gives only the user,
 * password, db and TLS).
 */
export interface RedisTarget {
  url: string;
  sentinels?: SentinelAddress[];
  sentinelName: string;
}

/** The Redis target of a parsed environment. */
export function redisTarget(
  env: Pick<Env, 'REDIS_URL' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME'>,
): RedisTarget {
  return {
    url: env.REDIS_URL,
    sentinels: env.REDIS_SENTINELS === undefined ? undefined : parseSentinels(env.REDIS_SENTINELS),
    sentinelName: env.REDIS_SENTINEL_NAME ?? DEFAULT_SENTINEL_NAME,
  };
}

/** For messages: the variable an operator fixes and where the bot looked, never a password. */
export function describeRedis(target: RedisTarget): { variable: string; where: string } {
  if (target.sentinels) {
    const list = target.sentinels.map((s) => `${s.host.includes(':') ? `[${s.host}]` : s.host}:${s.port}`);
    return {
      variable: 'REDIS_SENTINELS',
      where: `master "${target.sentinelName}" of the Sentinels ${list.join(',')}`,
    };
  }
  return { variable: 'REDIS_URL', where: redactUrl(target.url) };
}

/** `redis://user:secret@host` → `redis://host`, for messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.toString();
  } catch {
    return 'the configured URL';
  }
}

/**
 * After a failover the node a client talks to may no longer be the master. READONLY: it became a replica.
 * NOREPLICAS: an old master cut off from its replicas refuses writes (`min-replicas-to-write`), as it should, since
 * they would be lost. Both mean the write was not applied: reconnect (through the Sentinels: to the master they
 * name now) and send it again (2). Anything else (false) is the caller's.
 */
export function reconnectOnError(error: Error): false | 2 {
  return /^(READONLY|NOREPLICAS)\b/.test(error.message) ? 2 : false;
}

/**
 * The one way the bot, its workers, its scheduler and the CLI open Redis: through the Sentinels when they are
 * configured (with ioredis' failover detector, so a `+switch-master` moves every client at once), else REDIS_URL.
 * `options` are the caller's (BullMQ's clients need `maxRetriesPerRequest: null`).
 */
export function createRedis(target: RedisTarget, options: RedisOptions = {}): Redis {
  const common: RedisOptions = { reconnectOnError, ...options };
  if (!target.sentinels) return new Redis(target.url, common);
  const url = new URL(target.url);
  const db = Number(url.pathname.slice(1) || '0');
  const tls = url.protocol === 'rediss:';
  return new Redis({
    sentinels: target.sentinels,
    name: target.sentinelName,
    username: decodeURIComponent(url.username) || undefined,
    password: decodeURIComponent(url.password) || undefined,
    db: Number.isInteger(db) ? db : 0,
    // rediss:// : TLS to the master and to the Sentinels.
    ...(tls ? { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
    failoverDetector: true,
    ...common,
  });
}
