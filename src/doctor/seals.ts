import type { Env } from '../config/env.ts';
import { createRedis, redisKeyPrefix, redisTarget } from '../config/redis-connection.ts';
import { sealKeysFrom } from '../config/seal-keys.ts';
import { sealKid } from '../requests/approval/decision-seal.ts';
import { type CloudRequest, FINAL_STATES } from '../requests/model/types.ts';
import { requestKeys } from '../requests/store/keys.ts';
import { type CheckResult, ok, warn } from './report.ts';

/** Requests read per round trip while counting. */
const BATCH = 500;

/** The key ids every seal of `request` names (approvals, go-ahead, break glass). */
function kidsOf(request: CloudRequest): (string | undefined)[] {
  return [
    ...(request.approvals ?? []).map((a) => sealKid(a.seal)),
    sealKid(request.goAhead?.seal),
    sealKid(request.breakGlass?.seal),
  ];
}

/**
 * During a rotation (SEAL_KEY_PREVIOUS set): how many requests not yet ended carry a seal of the previous key. Until
 * none does, removing SEAL_KEY_PREVIOUS would end them refused (docs/operations.md#rotating-the-seal-key). Undefined
 * when no rotation is under way or a key is unusable (the environment check names it).
 */
export async function checkPreviousKeyWork(env: Env, timeoutMs: number): Promise<CheckResult | undefined> {
  if (!env.SEAL_KEY || !env.SEAL_KEY_PREVIOUS) return undefined;
  let previous: string | undefined;
  try {
    previous = sealKeysFrom(env.SEAL_KEY, env.SEAL_KEY_PREVIOUS).previousKid;
  } catch {
    return undefined;
  }
  if (!previous) return undefined;
  const client = createRedis(redisTarget(env), {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  const keys = requestKeys(redisKeyPrefix(env));
  try {
    await client.connect();
    let pending = 0;
    const total = await client.zcard(keys.created);
    for (let start = 0; start < total; start += BATCH) {
      const ids = await client.zrange(keys.created, start, start + BATCH - 1);
      if (ids.length === 0) break;
      const values = await client.mget(ids.map(keys.request));
      for (const value of values) {
        if (value === null) continue;
        const request = JSON.parse(value) as CloudRequest;
        if (!FINAL_STATES.includes(request.state) && kidsOf(request).includes(previous)) pending += 1;
      }
    }
    return pending === 0
      ? ok(
          'seal.previous',
          `no pending work is sealed with SEAL_KEY_PREVIOUS (key ${previous}): it may be removed`,
        )
      : warn(
          'seal.previous',
          `${pending} pending request(s) carry seals of SEAL_KEY_PREVIOUS (key ${previous})`,
          'keep SEAL_KEY_PREVIOUS until they have run or ended, then remove it and restart the roles',
        );
  } catch {
    // Redis itself is the Redis check's to report.
    return undefined;
  } finally {
    client.disconnect();
  }
}
