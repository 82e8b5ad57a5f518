import type { Socket } from 'node:net';
import { isIP } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis } from 'ioredis';
import type { RedisClient } from '../config/redis-connection.ts';
import { type CheckResult, ok, warn } from './report.ts';

/**
 * Who else can use the Redis the bot uses. Whoever can write to it can queue, approve and undo work, so doctor says
 * when it takes a connection with no password, and when the connection crosses a network in clear text.
 */

/** An address of this machine only: 127.0.0.0/8, ::1, and IPv4 loopback written as IPv6. */
export function isLoopback(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, '').replace(/^::ffff:/i, '');
  if (bare === '::1' || bare.toLowerCase() === 'localhost') return true;
  return isIP(bare) === 4 && bare.startsWith('127.');
}

/** The address and port each connection of `client` reached (the master, or every master of a cluster). */
function reached(client: RedisClient): { host: string; port: number }[] {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  return nodes.flatMap((node) => {
    const stream = (node as unknown as { stream?: Socket }).stream;
    const host = stream?.remoteAddress;
    return host && stream?.remotePort ? [{ host, port: stream.remotePort }] : [];
  });
}

/** True when the Redis at host:port answers PING to a connection that gave no user and no password. */
async function answersWithoutPassword(
  host: string,
  port: number,
  tls: ConnectionOptions | undefined,
  timeoutMs: number,
): Promise<boolean> {
  const probe = new Redis({
    host,
    port,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    retryStrategy: () => null,
    ...(tls ? { tls: { ...tls, servername: undefined, rejectUnauthorized: false } } : {}),
  });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    // NOAUTH (a password is required), or the probe could not connect: nothing to warn about here.
    return false;
  } finally {
    probe.disconnect();
  }
}

/**
 * `redis.password`: ! when the Redis the bot reached also answers a connection without a password.
 * `redis.tls`: ! when the bot reaches a Redis on another machine without TLS (redis:// rather than rediss://).
 */
export async function checkRedisAccess(
  client: RedisClient,
  tls: ConnectionOptions | undefined,
  timeoutMs: number,
): Promise<CheckResult[]> {
  const nodes = reached(client);
  const open: string[] = [];
  for (const { host, port } of nodes)
    if (await answersWithoutPassword(host, port, tls, timeoutMs)) open.push(`${host}:${port}`);
  const password =
    open.length > 0
      ? warn(
          'redis.password',
          `Redis accepts connections without a password (${open.join(', ')}): whoever reaches it can approve and run changes`,
          'give Redis a password or an ACL user (requirepass, or `user ... on >password` with `user default off`) and put it in REDIS_URL (redis://user:password@host:port)',
        )
      : ok('redis.password', 'Redis asks for a password');
  const remote = nodes.filter((node) => !isLoopback(node.host));
  if (tls || remote.length === 0)
    return [
      password,
      ok('redis.tls', tls ? 'Redis is reached over TLS' : 'Redis is on this machine (loopback)'),
    ];
  return [
    password,
    warn(
      'redis.tls',
      `Redis on another machine (${remote.map((n) => `${n.host}:${n.port}`).join(', ')}) is reached without TLS: its password and every request cross the network in clear text`,
      'use rediss:// in REDIS_URL (Redis with tls-port, or a managed Redis with TLS); REDIS_TLS_CA_FILE for a private CA',
    ),
  ];
}
