import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { Env, SentinelAddress } from './env.ts';
import { ConfigError, parseAddresses, parseSentinels } from './env.ts';

/** The master's name at the Sentinels when REDIS_SENTINEL_NAME is unset (docs/configuration.md). */
export const DEFAULT_SENTINEL_NAME = 'mymaster';

/**
 * Where the bot's Redis is: one URL, a master found through Sentinels, or a Redis Cluster found through some of its
 * nodes (REDIS_URL then gives only the user, password, db and TLS; on a cluster no db).
 */
export interface RedisTarget {
  url: string;
  sentinels?: SentinelAddress[];
  sentinelName: string;
  /** The Sentinels' own password (REDIS_SENTINEL_PASSWORD), when they ask for one. */
  sentinelPassword?: string;
  /** Some nodes of a Redis Cluster (REDIS_CLUSTER_NODES): every connection is then an ioredis Cluster. */
  clusterNodes?: SentinelAddress[];
  /** A PEM file of the CA that signed the servers' certificates (REDIS_TLS_CA_FILE), for rediss:// only. */
  tlsCaFile?: string;
}

/** A connection of the bot: one Redis (alone or found through Sentinels), or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/** The Redis target of a parsed environment. */
export function redisTarget(
  env: Pick<
    Env,
    | 'REDIS_URL'
    | 'REDIS_SENTINELS'
    | 'REDIS_SENTINEL_NAME'
    | 'REDIS_SENTINEL_PASSWORD'
    | 'REDIS_CLUSTER_NODES'
    | 'REDIS_TLS_CA_FILE'
  >,
): RedisTarget {
  return {
    url: env.REDIS_URL,
    sentinels: env.REDIS_SENTINELS === undefined ? undefined : parseSentinels(env.REDIS_SENTINELS),
    sentinelName: env.REDIS_SENTINEL_NAME ?? DEFAULT_SENTINEL_NAME,
    sentinelPassword: env.REDIS_SENTINEL_PASSWORD,
    clusterNodes: env.REDIS_CLUSTER_NODES === undefined ? undefined : parseAddresses(env.REDIS_CLUSTER_NODES),
    tlsCaFile: env.REDIS_TLS_CA_FILE,
  };
}

/**
 * The prefix of every key the bot and its queues write. On a Redis Cluster it is one hash tag, `{cloudops}`: every
 * key then hashes to the same slot, as the scripts need (theirs and BullMQ's touch several keys at once, and some
 * derive key names inside the script). Elsewhere REDIS_PREFIX as it is, so existing data keeps its names.
 */
export function redisKeyPrefix(env: Pick<Env, 'REDIS_PREFIX' | 'REDIS_CLUSTER_NODES'>): string {
  return env.REDIS_CLUSTER_NODES === undefined ? env.REDIS_PREFIX : `{${env.REDIS_PREFIX}}`;
}

/** For messages: the variable an operator fixes and where the bot looked, never a password. */
export function describeRedis(target: RedisTarget): { variable: string; where: string } {
  if (target.clusterNodes) {
    const list = target.clusterNodes.map((n) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`);
    return { variable: 'REDIS_CLUSTER_NODES', where: `the Redis Cluster at ${list.join(',')}` };
  }
  if (target.sentinels) {
    const list = target.sentinels.map((s) => `${s.host.includes(':') ? `[${s.host}]` : s.host}:${s.port}`);
    return {
      variable: 'REDIS_SENTINELS',
      where: `master "${target.sentinelName}" of the Sentinels ${list.join(',')}`,
    };
  }
  return { variable: 'REDIS_URL', where: redactUrl(target.url) };
}

/**
 * A query parameter that may carry a credential: ioredis takes `?password=` and `?username=` as well as the URL's
 * user part, and other URLs carry `token`, `key`, `secret`, `auth` or signatures.
 */
const CREDENTIAL_PARAM = /pass|pwd|user|token|key|secret|auth|sig|cred/i;

/**
 * A path and query as typed, with the values of credential-named query parameters replaced by `[redacted]` and the
 * rest left as it was written (not re-encoded), for log lines.
 */
export function redactQuery(pathAndQuery: string): string {
  const start = pathAndQuery.indexOf('?');
  if (start < 0) return pathAndQuery;
  const query = pathAndQuery
    .slice(start)
    .replace(/([?&])([^=&#]*)=([^&#]*)/g, (whole, sep: string, name: string) =>
      CREDENTIAL_PARAM.test(name) ? `${sep}${name}=[redacted]` : whole,
    );
  return `${pathAndQuery.slice(0, start)}${query}`;
}

/**
 * The credentials a configured URL carries (its password, and the values of query parameters named like
 * credentials), as written and decoded: secrets to scrub from logs and typed text like the tokens.
 */
export function urlCredentials(url: string | undefined): string[] {
  if (url === undefined || !URL.canParse(url)) return [];
  const parsed = new URL(url);
  const found = parsed.password === '' ? [] : [parsed.password, safeDecode(parsed.password)];
  for (const [name, value] of parsed.searchParams)
    if (CREDENTIAL_PARAM.test(name) && value !== '') found.push(value);
  return [...new Set(found)];
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** `redis://user:secret@host/?password=secret` → `redis://host/?password=[redacted]`, for messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    for (const name of [...parsed.searchParams.keys()])
      if (CREDENTIAL_PARAM.test(name)) parsed.searchParams.set(name, '[redacted]');
    parsed.hash = '';
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
 * The TLS options of rediss:// (undefined for redis://): the system's CAs, or REDIS_TLS_CA_FILE's. Throws a
 * {@link ConfigError} naming the variable when the file cannot be read.
 */
export function tlsOptions(target: RedisTarget): ConnectionOptions | undefined {
  if (!target.url.startsWith('rediss:')) return undefined;
  if (target.tlsCaFile === undefined) return {};
  try {
    return { ca: readFileSync(target.tlsCaFile) };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new ConfigError(`REDIS_TLS_CA_FILE: cannot read ${target.tlsCaFile} (${code})`);
  }
}

/**
 * Options of a single client that a Cluster takes for itself rather than for each node's connection: the
 * Cluster queues commands while it (re)learns the slots, and pipelines per node.
 */
const CLUSTER_LEVEL = [
  'enableOfflineQueue',
  'enableAutoPipelining',
  'autoPipeliningIgnoredCommands',
  'lazyConnect',
] as const;

/**
 * A Redis Cluster client: `options` split into the Cluster's own and each node's (see {@link CLUSTER_LEVEL}), the
 * credentials and TLS of REDIS_URL on every node.
 */
function createCluster(target: RedisTarget, nodes: SentinelAddress[], options: RedisOptions): Cluster {
  const url = new URL(target.url);
  const tls = tlsOptions(target);
  const clusterOptions: ClusterOptions = {};
  const nodeOptions: RedisOptions = {
    reconnectOnError,
    username: decodeURIComponent(url.username) || undefined,
    password: decodeURIComponent(url.password) || undefined,
    ...(tls ? { tls } : {}),
  };
  for (const [key, value] of Object.entries(options)) {
    if ((CLUSTER_LEVEL as readonly string[]).includes(key)) Object.assign(clusterOptions, { [key]: value });
    else Object.assign(nodeOptions, { [key]: value });
  }
  return new Cluster(nodes, {
    ...clusterOptions,
    // A caller that gives up on a lost connection (the CLI) gives up on the cluster too.
    ...(options.retryStrategy ? { clusterRetryStrategy: options.retryStrategy } : {}),
    redisOptions: nodeOptions,
    // TLS checks the certificate against the name an operator gave (managed clusters certify their DNS names), so
    // the client connects by name rather than by the address it resolves to.
    ...(tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
  });
}

/**
 * The one way the bot, its workers, its scheduler and the CLI open Redis: a Cluster client when
 * REDIS_CLUSTER_NODES is set; through the Sentinels when they are configured (with ioredis' failover detector, so
 * a `+switch-master` moves every client at once); else REDIS_URL. `options` are the caller's (BullMQ's clients
 * need `maxRetriesPerRequest: null`).
 */
export function createRedis(target: RedisTarget, options: RedisOptions = {}): RedisClient {
  if (target.clusterNodes) return createCluster(target, target.clusterNodes, options);
  return createSingle(target, options);
}

/**
 * Another connection to where `client` goes, with `options` over its own: on a cluster the Cluster's options
 * (offline queue, pipelining) stay the Cluster's and the rest applies to each node's connection.
 */
export function duplicateRedis(client: RedisClient, options: RedisOptions): RedisClient {
  if (!(client instanceof Cluster)) return client.duplicate(options);
  const clusterOptions: ClusterOptions = {};
  const nodeOptions: RedisOptions = { ...client.options.redisOptions };
  for (const [key, value] of Object.entries(options)) {
    if ((CLUSTER_LEVEL as readonly string[]).includes(key)) Object.assign(clusterOptions, { [key]: value });
    else Object.assign(nodeOptions, { [key]: value });
  }
  return client.duplicate(undefined, { ...clusterOptions, redisOptions: nodeOptions });
}

/** One Redis: REDIS_URL's, or the master the Sentinels name. */
function createSingle(target: RedisTarget, options: RedisOptions): Redis {
  const tls = tlsOptions(target);
  const common: RedisOptions = { reconnectOnError, ...(tls ? { tls } : {}), ...options };
  if (!target.sentinels) return new Redis(target.url, common);
  const url = new URL(target.url);
  const db = Number(url.pathname.slice(1) || '0');
  const client = new Redis({
    sentinels: target.sentinels,
    name: target.sentinelName,
    username: decodeURIComponent(url.username) || undefined,
    password: decodeURIComponent(url.password) || undefined,
    db: Number.isInteger(db) ? db : 0,
    ...(target.sentinelPassword ? { sentinelPassword: target.sentinelPassword } : {}),
    // rediss:// : TLS to the master and to the Sentinels.
    ...(tls ? { tls, enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
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
  client.duplicate = (override?: Partial<RedisOptions>) => createSingle(target, { ...options, ...override });
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
  const tls = tlsOptions(target);
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
        ...(target.sentinelPassword ? { password: target.sentinelPassword } : {}),
        ...(tls ? { tls } : {}),
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
