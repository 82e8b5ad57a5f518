import { Redis, type RedisOptions } from 'ioredis';
import type { Env, SentinelAddress } from './env.ts';
import { parseSentinels } from './env.ts';

/** The master's name at the Sentinels when REDIS_SENTINEL_NAME is unset (docs/configuration.md). */
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
  const client = new Redis({
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
  // ioredis' failover detector outlives a connection that broke by itself (a crashed master): when the Sentinels then
  // announce the new master while the client is reconnecting, it cancels that reconnect and the client ends for good
  // ("Connection is closed." on every command; bench/redis-loss.ts saw it in 1 crash of 6). The detector goes with
  // its connection; the next connection brings its own.
  const cleaned = new WeakSet<object>();
  client.on('close', () => {
    const detector = (client as unknown as WithConnector).connector?.failoverDetector;
    // Once per detector: each cleanup adds a listener to its Sentinel connections.
    if (!detector || cleaned.has(detector)) return;
    cleaned.add(detector);
    detector.cleanup();
  });
  // BullMQ opens its blocking connections with duplicate(): they get the same treatment.
  client.duplicate = (override?: Partial<RedisOptions>) => createRedis(target, { ...options, ...override });
  return client;
}

/** The private part of an ioredis client the workaround above reaches (ioredis 5 SentinelConnector). */
interface WithConnector {
  connector?: { failoverDetector?: { cleanup(): void } | null };
}

/** How many replicas the Sentinels see up for the master, kept fresh; `current()` is at least 1. */
export interface ReplicaCount {
  current(): number;
  close(): void;
}

/**
 * Flags of a replica that is down. Not `disconnected`: the Sentinels show it for a moment while they reconnect,
 * in the middle of a failover too, when counting one replica less let an old master's writes through.
 */
const REPLICA_DOWN = /s_down|o_down/;

/**
 * Asks the Sentinels every `everyMs` how many replicas of the master are up (`SENTINEL REPLICAS`), trying them in
 * turn. A critical write waits for that many ({@link ReplicaAck}), not for any one: during a `SENTINEL FAILOVER`
 * the old master goes on taking writes for a moment, and a replica still attached to it would acknowledge writes
 * that the promoted one never gets (bench/redis-loss.ts: with two replicas, WAIT 1 lost thousands of them).
 */
export function watchReplicas(target: RedisTarget, everyMs = 1000): ReplicaCount {
  const sentinels = target.sentinels ?? [];
  const tls = target.url.startsWith('rediss:');
  let count = 1;
  let turn = 0;
  let client: Redis | undefined;
  let closed = false;
  const poll = async () => {
    if (closed || sentinels.length === 0) return;
    try {
      const at = sentinels[turn % sentinels.length]!;
      client ??= new Redis(at.port, at.host, {
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
        connectTimeout: everyMs,
        ...(tls ? { tls: {} } : {}),
      }).on('error', () => undefined);
      const replicas = (await client.call('SENTINEL', 'REPLICAS', target.sentinelName)) as string[][];
      const up = replicas.filter((fields) => !REPLICA_DOWN.test(fields[fields.indexOf('flags') + 1] ?? ''));
      count = Math.max(1, up.length);
    } catch {
      // The next Sentinel answers the next time.
      client?.disconnect();
      client = undefined;
      turn++;
    }
  };
  void poll();
  const timer = setInterval(() => void poll(), everyMs);
  timer.unref();
  return {
    current: () => count,
    close() {
      closed = true;
      clearInterval(timer);
      client?.disconnect();
    },
  };
}
