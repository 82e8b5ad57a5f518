import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../observability/logger.ts';
import { type CloudRequest, FINAL_STATES } from './model/types.ts';
import { REQUESTER_INDEX_KEEP, requestKeys } from './store/keys.ts';

/** Requests read per round: one ZSCAN page of the created index, one MGET, one pipeline of index writes. */
const BATCH = 200;

/**
 * Where the backfill stands: `cursor` of the ZSCAN over the created index, and `done` once it went round. The name
 * carries the indexes' version: indexes that change what they hold get a new name and a new pass.
 */
const stateKey = (prefix: string) => `${prefix}:index-backfill:home-v1`;

export interface BackfillResult {
  /** Requests read this time. */
  read: number;
  done: boolean;
}

/**
 * Adds requests stored before the App Home's indexes existed to them: each to its requester's own-requests index
 * and, while not final, to the involvement index of everyone it names (requester, approvers and groups, those
 * escalated to). One-off: it walks the created index (every stored request) with ZSCAN, saves its cursor after each
 * page so a restart resumes, and marks itself done; writes are ZADD NX, so a page read twice changes nothing. An
 * entry that went final meanwhile leaves the index when a home reads it. `stopped` is asked between pages.
 */
export async function backfillHomeIndexes(
  redis: Redis | Cluster,
  prefix: string,
  stopped: () => boolean = () => false,
  batch = BATCH,
): Promise<BackfillResult> {
  const keys = requestKeys(prefix);
  const state = stateKey(prefix);
  const [done, saved] = await redis.hmget(state, 'done', 'cursor');
  let read = 0;
  if (done === '1') return { read, done: true };
  let cursor = saved ?? '0';
  do {
    if (stopped()) return { read, done: false };
    const [next, flat] = await redis.zscan(keys.created, cursor, 'COUNT', batch);
    const ids = flat.filter((_, i) => i % 2 === 0);
    const values = ids.length > 0 ? await redis.mget(ids.map((id) => keys.request(id))) : [];
    const write = redis.pipeline();
    for (const value of values) {
      if (value === null) continue;
      const request = JSON.parse(value) as CloudRequest;
      const score = new Date(request.createdAt).getTime();
      const own = keys.requestedBy(request.requester);
      write.zadd(own, 'NX', score, request.id);
      write.zremrangebyrank(own, 0, -(REQUESTER_INDEX_KEEP + 1));
      if (FINAL_STATES.includes(request.state)) continue;
      const named = [request.requester, ...request.approvers, ...(request.escalateTo ?? [])];
      for (const id of new Set(named)) write.zadd(keys.involving(id), 'NX', score, request.id);
    }
    write.hset(state, 'cursor', next);
    await write.exec();
    read += values.length;
    cursor = next;
  } while (cursor !== '0');
  await redis.hset(state, 'done', '1');
  return { read, done: true };
}

/**
 * Runs the backfill once in the background at start-up (a slow pass must not hold the start); `stop` ends it between
 * pages and waits for the page under way.
 */
export function startHomeBackfill(
  redis: Redis | Cluster,
  prefix: string,
  logger: Logger,
): { stop(): Promise<void> } {
  let stopping = false;
  const started = performance.now();
  const running = backfillHomeIndexes(redis, prefix, () => stopping).then(
    (result) => {
      if (result.read > 0)
        logger.info(
          { requests: result.read, done: result.done, ms: Math.round(performance.now() - started) },
          'App Home indexes backfilled for requests stored before them',
        );
    },
    (error: unknown) => {
      if (!stopping)
        logger.warn({ err: error }, 'App Home index backfill stopped; the next start resumes it');
    },
  );
  return {
    async stop() {
      stopping = true;
      await running;
    },
  };
}
