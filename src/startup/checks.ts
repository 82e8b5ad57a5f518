/**
 * What start-up checks before the bot takes work (docs/operations.md#start-up): that Redis answers and takes the password, and
 * that Slack accepts the bot token. Each failure is one line naming the cause, never a secret.
 */
import { ErrorCode, WebClient } from '@slack/web-api';
import type { Cluster, Redis } from 'ioredis';
import {
  fetchThrough,
  outboundDispatcher,
  type ProxyEnv,
  proxyConfigured,
  proxyRefusal,
  proxyRefusalAdvice,
  proxyRefusalText,
} from '../config/outbound.ts';
import { describeRedis, type RedisTarget, redactUrl } from '../config/redis-connection.ts';
import { TOKEN_REFUSED } from '../slack-api/errors.ts';

/** A start-up that cannot finish; `message` is the one line printed before exiting non-zero. */
export class StartupError extends Error {
  override readonly name = 'StartupError';
  readonly code = 'STARTUP_FAILED';
}

/** A Redis refusal that no reconnect will cure: the one line, and what to do about it. */
export interface RedisRefusal {
  line: string;
  fix: string;
}

/** What a refusal is, or undefined for a passing problem. */
export function redisRefusal(error: Error, target: RedisTarget): RedisRefusal | undefined {
  // The credentials come from REDIS_URL, with or without Sentinels.
  const { where } = describeRedis(target);
  // A cluster client reports "Failed to refresh slots cache." and keeps the node's own answer beside it.
  const message = (error as { lastNodeError?: Error }).lastNodeError?.message ?? error.message;
  if (message.startsWith('NOAUTH'))
    return {
      line: `REDIS_URL: Redis at ${where} wants a password (NOAUTH): give it in REDIS_URL, e.g. redis://:password@host:6379`,
      fix: 'give the password in REDIS_URL',
    };
  if (message.startsWith('WRONGPASS'))
    return {
      line: `REDIS_URL: Redis at ${where} refused the user name or password (WRONGPASS)`,
      fix: 'give the right password in REDIS_URL',
    };
  if (target.sentinels && /unknown command 'sentinel'/i.test(message)) {
    const list = target.sentinels.map((n) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`);
    return {
      line: `REDIS_SENTINELS: ${list.join(',')} is a Redis, not a Sentinel: set REDIS_URL to it instead (and leave REDIS_SENTINELS empty), or give the Sentinels' addresses (port 26379 unless changed)`,
      fix: 'set REDIS_URL to that Redis and leave REDIS_SENTINELS empty, or name the Sentinels',
    };
  }
  if (target.clusterNodes && /cluster support disabled/i.test(message)) {
    const nodes = target.clusterNodes.map(
      (n) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`,
    );
    return {
      line: `REDIS_CLUSTER_NODES: the Redis at ${nodes.join(',')} is not in cluster mode: set REDIS_URL to it instead (and leave REDIS_CLUSTER_NODES empty), or name the nodes of a Redis Cluster`,
      fix: 'set REDIS_URL to that Redis and leave REDIS_CLUSTER_NODES empty',
    };
  }
  return undefined;
}

/**
 * A single-node client (REDIS_URL, no Sentinels) that reached a node of a Redis Cluster (every command on a key of
 * another node's slots would fail with MOVED) or a Sentinel (which has no data commands at all): refused before any
 * work, naming what to set.
 */
export async function singleNodeMixUp(
  client: Redis | Cluster,
  target: RedisTarget,
): Promise<RedisRefusal | undefined> {
  if (target.clusterNodes || target.sentinels || 'nodes' in client) return undefined;
  const info = await client.info().catch(() => '');
  if (/^redis_mode:sentinel\s*$/m.test(info))
    return {
      line: `REDIS_URL: the Redis at ${redactUrl(target.url)} is a Sentinel: set REDIS_SENTINELS to the Sentinels (host:port,host:port,…) and keep only the password and TLS in REDIS_URL`,
      fix: 'set REDIS_SENTINELS to the Sentinels (host:port,…)',
    };
  if (!/^cluster_enabled:1\s*$/m.test(info)) return undefined;
  return {
    line: `REDIS_URL: the Redis at ${redactUrl(target.url)} is a node of a Redis Cluster: set REDIS_CLUSTER_NODES to its nodes (host:port,host:port,…) instead`,
    fix: 'set REDIS_CLUSTER_NODES to the cluster nodes (host:port,…)',
  };
}

/**
 * Resolves once `client` is ready. Rejects with a {@link StartupError} when Redis refuses the credentials or is a
 * cluster where a single Redis was named, or the other way round (at once), or nothing answers within `timeoutMs`;
 * `signal` ends the wait early with its reason.
 */
export async function waitForRedis(
  client: Redis | Cluster,
  target: RedisTarget,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<void> {
  if (client.status !== 'ready') await readyWithin(client, target, timeoutMs, signal);
  const mixUp = await singleNodeMixUp(client, target);
  if (mixUp) throw new StartupError(mixUp.line);
}

function readyWithin(
  client: Redis | Cluster,
  target: RedisTarget,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<void> {
  const { variable, where } = describeRedis(target);
  return new Promise<void>((resolve, reject) => {
    const done = (error?: unknown) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('error', onError);
      signal?.removeEventListener('abort', onAbort);
      if (error) reject(error);
      else resolve();
    };
    const onReady = () => done();
    const onError = (error: Error) => {
      const refusal = redisRefusal(error, target);
      if (refusal) done(new StartupError(refusal.line));
    };
    const onAbort = () => done(signal?.reason);
    const timer = setTimeout(
      () =>
        done(
          new StartupError(
            `${variable}: no Redis answered at ${where} within ${Math.round(timeoutMs / 100) / 10} s`,
          ),
        ),
      timeoutMs,
    );
    client.on('ready', onReady);
    client.on('error', onError);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** What auth.test said: the token works, or Slack could not be asked (down, slow, 5xx). */
export type SlackCheck =
  | {
      ok: true;
      /** The token's scopes when Slack said them (`x-oauth-scopes`); undefined when it did not. */
      scopes?: string[];
    }
  | { ok: false; why: string };

/**
 * Calls auth.test with its own deadline. Rejects with a {@link StartupError} when Slack refuses the token
 * (`invalid_auth`…); resolves `{ ok: false, why }` when Slack did not answer, for the caller to decide by role.
 */
export async function checkSlackToken(
  token: string,
  apiUrl: string,
  timeoutMs: number,
  signal?: AbortSignal,
  proxy: ProxyEnv = {},
): Promise<SlackCheck> {
  const dispatcher = proxyConfigured(proxy) ? outboundDispatcher(proxy) : undefined;
  // A client of its own: a deadline (axios aborts the request) and no retries, and nothing left open afterwards.
  const client = new WebClient(token, {
    slackApiUrl: apiUrl,
    timeout: Math.max(1, Math.round(timeoutMs)),
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    logger: silentLogger,
    ...(dispatcher ? { fetch: fetchThrough(dispatcher) } : {}),
  });
  const where = redactUrl(apiUrl);
  const call = client.auth.test().then(
    (result): SlackCheck => {
      const scopes = result.response_metadata?.scopes;
      return scopes ? { ok: true, scopes } : { ok: true };
    },
    (error: unknown): SlackCheck => {
      const { code, data, statusCode } = error as {
        code?: string;
        data?: { error?: string };
        statusCode?: number;
      };
      if (code === ErrorCode.PlatformError && data?.error && TOKEN_REFUSED.has(data.error))
        throw new StartupError(`SLACK_BOT_TOKEN: Slack refused the token (${data.error})`);
      if (code === ErrorCode.PlatformError)
        return { ok: false, why: `Slack answered auth.test with ${data?.error}` };
      if (code === ErrorCode.HTTPError)
        return { ok: false, why: `Slack at ${where} answered HTTP ${statusCode}` };
      if (code === ErrorCode.RateLimitedError)
        return { ok: false, why: `Slack at ${where} is rate limiting` };
      // The client's fetch failed: its own deadline (TimeoutError), or the connection (the cause's code).
      const original = (error as { original?: { name?: string; cause?: { code?: string } } }).original;
      const refused = proxyRefusal(original);
      if (refused !== undefined)
        return {
          ok: false,
          why: `Slack at ${where} could not be reached: ${proxyRefusalText(refused)}; ${proxyRefusalAdvice(refused)}`,
        };
      if (original?.name !== 'TimeoutError')
        return {
          ok: false,
          why: `Slack at ${where} could not be reached (${original?.cause?.code ?? original?.name ?? code})`,
        };
      return {
        ok: false,
        why: `Slack did not answer auth.test at ${where} within ${Math.round(timeoutMs / 100) / 10} s`,
      };
    },
  );
  if (!signal) return call;
  return new Promise<SlackCheck>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    call.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** The Web API client logs nothing of the check: its outcome is reported by the caller. */
const silentLogger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  setLevel: () => undefined,
  getLevel: () => 'error' as never,
  setName: () => undefined,
};

/**
 * `promise` (a server starting to listen on `port`), with a port in use or refused turned into one line naming the
 * variable that sets it (docs/troubleshooting.md#port-in-use), not Node's EADDRINUSE alone.
 */
export function listening<T>(
  variable: string,
  port: number,
  host: string | undefined,
  promise: Promise<T>,
): Promise<T> {
  return promise.catch((error: unknown) => {
    const where = `port ${port} on ${host ?? 'every interface'}`;
    const code = errnoOf(error);
    if (code === 'EADDRINUSE')
      throw new StartupError(
        `${variable}: ${where} is already in use by another process; stop it, or set ${variable} to a free port`,
      );
    if (code === 'EACCES')
      throw new StartupError(
        `${variable}: ${where} needs privileges to listen on; set ${variable} to a port above 1023`,
      );
    if (code === 'EADDRNOTAVAIL')
      throw new StartupError(
        `${variable}: ${where}: this machine has no such address; check the matching HOST variable`,
      );
    throw error;
  });
}

/** The errno code of a listen failure, also when a library wrapped it (Bolt) or only kept it in the message. */
function errnoOf(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current; depth++) {
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && code.startsWith('E')) return code;
    const inMessage =
      typeof message === 'string' ? /\b(EADDRINUSE|EACCES|EADDRNOTAVAIL)\b/.exec(message) : null;
    if (inMessage) return inMessage[1];
    current =
      (current as { cause?: unknown; original?: unknown }).cause ??
      (current as { original?: unknown }).original;
  }
  return undefined;
}
