import { Cluster, type Redis } from 'ioredis';
import { clusterHealth } from '../config/cluster-health.ts';
import { createRedis, describeRedis, type RedisTarget, tlsOptions } from '../config/redis-connection.ts';
import { redisRefusal, singleNodeMixUp } from '../startup/checks.ts';
import { checkRedisAccess } from './redis-access.ts';
import { type CheckResult, fail, ok, warn } from './report.ts';

/** How long doctor waits for Redis to answer. */
export const REDIS_CHECK_MS = 3_000;

/**
 * Redis reachable (and taking the password), whether it also takes no password or is reached in clear text over a
 * network (./redis-access.ts), its `maxmemory-policy` (BullMQ and the request store need
 * `noeviction`: an evicted key is a lost job or request) and whether it persists what it holds.
 */
export async function checkRedis(target: RedisTarget, timeoutMs = REDIS_CHECK_MS): Promise<CheckResult[]> {
  const { variable, where } = describeRedis(target);
  const client = createRedis(target, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    retryStrategy: () => null,
  });
  // Reported below as one check; ioredis would otherwise print unhandled error events.
  let lastError: Error | undefined;
  client.on('error', (error: Error) => {
    lastError = error;
  });
  try {
    try {
      // Without retries the client ends at the first refused connection: no need to wait out the timeout.
      const ended = new Promise<never>((_, reject) =>
        client.once('end', () => reject(lastError ?? new Error('connection closed'))),
      );
      ended.catch(() => undefined);
      await within(Promise.race([client.connect(), ended]), timeoutMs);
      await within(client.ping(), timeoutMs);
    } catch (error) {
      const cause = lastError ?? (error as Error);
      const refusal = redisRefusal(cause, target);
      if (refusal) return [fail('redis', refusal.line, refusal.fix)];
      return [
        fail(
          'redis',
          `Redis: no answer at ${where} (${codeOf(cause)})`,
          `start Redis there, or set ${variable} to where it runs`,
        ),
      ];
    }
    const mixUp = await singleNodeMixUp(client, target);
    if (mixUp) return [fail('redis', mixUp.line, mixUp.fix)];
    const results: CheckResult[] = [ok('redis', `Redis answers at ${where}`)];
    results.push(...(await checkRedisAccess(client, tlsOptions(target), timeoutMs)));
    if (client instanceof Cluster) {
      const health = await clusterHealth(client, timeoutMs);
      results.push(
        health.ok
          ? ok('redis.cluster', health.line)
          : fail('redis.cluster', health.line, 'bring the failing nodes back, or assign the uncovered slots'),
      );
      // Every master holds a share of the data: the worst of them is what counts.
      const masters = client.nodes('master');
      results.push(worst(await Promise.all(masters.map(memoryPolicy))));
      results.push(worst(await Promise.all(masters.map(persistence))));
      return results;
    }
    results.push(await memoryPolicy(client));
    results.push(await persistence(client));
    return results;
  } finally {
    client.disconnect();
  }
}

async function memoryPolicy(client: Redis): Promise<CheckResult> {
  const id = 'redis.maxmemory-policy';
  const policy = await configGet(client, 'maxmemory-policy');
  if (policy === undefined)
    return warn(
      id,
      'Redis maxmemory-policy could not be read (CONFIG is disabled here)',
      "make sure it is noeviction in your provider's settings",
    );
  if (policy === 'noeviction') return ok(id, 'Redis maxmemory-policy is noeviction');
  return fail(
    id,
    `Redis maxmemory-policy is ${policy}: when memory runs out Redis deletes keys, and with them queued jobs and requests`,
    'set maxmemory-policy noeviction (redis.conf, or CONFIG SET maxmemory-policy noeviction and CONFIG REWRITE)',
  );
}

async function persistence(client: Redis): Promise<CheckResult> {
  const id = 'redis.persistence';
  const info = await client.info('persistence').catch(() => '');
  const aof = /^aof_enabled:1\r?$/m.test(info);
  if (aof) return ok(id, 'Redis persistence: append-only file on');
  const save = await configGet(client, 'save');
  const fix = 'set appendonly yes (redis.conf, or CONFIG SET appendonly yes and CONFIG REWRITE)';
  if (save === undefined)
    return warn(id, 'Redis persistence could not be read (CONFIG is disabled here)', fix);
  if (save.trim() !== '')
    return warn(
      id,
      `Redis persistence: snapshots only (save ${save}): a restart loses what changed since the last one`,
      fix,
    );
  return warn(id, 'Redis persistence: off: a restart of Redis loses every request, job and audit entry', fix);
}

/** A CONFIG GET value, or undefined where CONFIG is refused (managed Redis often renames or disables it). */
async function configGet(client: Redis, name: string): Promise<string | undefined> {
  try {
    const answer = (await client.config('GET', name)) as string[];
    return answer[1];
  } catch {
    return undefined;
  }
}

const SEVERITY: Record<CheckResult['status'], number> = { ok: 0, warn: 1, fail: 2 };

/** The most severe of the same check on several nodes. */
function worst(results: CheckResult[]): CheckResult {
  return results.reduce((a, b) => (SEVERITY[b.status] > SEVERITY[a.status] ? b : a));
}

function codeOf(error: Error): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : error.message.split('\n')[0] || error.name;
}

function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error('no answer in time'), { code: 'ETIMEDOUT' })),
      ms,
    );
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
