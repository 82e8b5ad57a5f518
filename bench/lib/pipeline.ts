import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { Pool } from 'undici';
import { DEFAULT_CONCURRENCY } from '../../src/jobs/execution.ts';
import { createQueues, enqueueExecution, QUEUE_NAMES } from '../../src/jobs/queues.ts';
import { approvalDecision, sealDecision } from '../../src/requests/approval/decision-seal.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { requestKeys } from '../../src/requests/store/keys.ts';
import { RequestStore } from '../../src/requests/store/store.ts';
import { BENCH, BENCH_SEAL_KEYS } from './identity.ts';
import { forEachParallel } from './parallel.ts';
import { benchResize, createMany } from './requests.ts';
import type { Sims } from './sims.ts';
import { percentile } from './stats.ts';

/** The bot's execute-worker concurrency: the bare BullMQ baseline runs with the same. */
export const BOT_EXECUTE_CONCURRENCY = DEFAULT_CONCURRENCY.execute;
/** How often the bench looks at the stand-in while the pipeline runs. */
const POLL_MS = 100;

/** What pushing approved requests through the bot's pipeline measured. */
export interface PipelineResult {
  requests: number;
  /** Enqueue of the first → the last thread reply posted on the stand-in. */
  elapsedMs: number;
  perSecond: number;
  executeWaitP50Ms: number;
  executeWaitP99Ms: number;
  notifyWaitP50Ms: number;
  notifyWaitP99Ms: number;
  /** Final states of the requests. */
  states: Record<string, number>;
  threadReplies: number;
  /** CPU time of the bot's process(es) from the first enqueue to the last reply, per request (NaN when not asked). */
  cpuMsPerRequest: number;
}

/**
 * Creates `count` approved requests (message already posted, state queued, as the Approve handler leaves them), then
 * times enqueue → execute worker → simulator → notify worker → thread reply on the stand-in, for every request.
 * The bot (in this process or a child) must be running with `prefix`. `vmidOf(i)` picks each request's VM.
 */
export async function runPipeline(options: {
  redis: Redis;
  prefix: string;
  sims: Sims;
  count: number;
  vmidOf: (i: number) => number;
  timeoutMs: number;
  log: (message: string) => void;
  /** CPU time used so far by the process(es) running the bot (ms), read at the first enqueue and the last reply. */
  botCpuMs?: () => Promise<number>;
}): Promise<PipelineResult> {
  const { redis, prefix, sims, count } = options;
  const store = new RequestStore(redis, { prefix });
  const before = await sims.threadReplies();

  options.log(`pipeline: preparing ${count} approved requests`);
  const created = await createMany(store, count, (i) => benchResize(sims.projectUuid, options.vmidOf(i)));
  const ready = await prepareApproved(store, created, sims);

  const queues = createQueues(redis, prefix);
  const cpuBefore = (await options.botCpuMs?.()) ?? Number.NaN;
  const started = performance.now();
  // Many approvals at once, as many clicks would enqueue them.
  await forEachParallel(ready, 50, (request) => enqueueExecution(queues, request, new Date()));
  options.log(`pipeline: ${count} enqueued in ${Math.round(performance.now() - started)} ms`);

  const deadline = started + options.timeoutMs;
  let replies = 0;
  for (;;) {
    // A counter, not the summary: that one reads every message and call the stand-in holds, ten times a second.
    replies = (await sims.threadReplies()) - before;
    if (replies >= count) break;
    if (performance.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  const elapsedMs = performance.now() - started;
  const cpuAfter = (await options.botCpuMs?.()) ?? Number.NaN;

  const states = await finalStates(redis, prefix, ready);
  const ids = new Set(ready.map((r) => r.id));
  const execute = await waits(queues.execute, ids);
  const notifyQueue = new Queue(QUEUE_NAMES.notify, { connection: redis, prefix });
  const notify = await waits(notifyQueue, ids);
  await notifyQueue.close();
  await queues.close();
  if (replies < count) {
    throw new Error(
      `pipeline: only ${replies} of ${count} thread replies within ${options.timeoutMs} ms (states ${JSON.stringify(states)})`,
    );
  }
  return {
    requests: count,
    elapsedMs,
    perSecond: (count * 1000) / elapsedMs,
    executeWaitP50Ms: execute.p50,
    executeWaitP99Ms: execute.p99,
    notifyWaitP50Ms: notify.p50,
    notifyWaitP99Ms: notify.p99,
    states,
    threadReplies: replies,
    cpuMsPerRequest: (cpuAfter - cpuBefore) / count,
  };
}

/** Posts each request's message on the stand-in (setup, not measured), then approves and queues it, sealed. */
function prepareApproved(store: RequestStore, created: CloudRequest[], sims: Sims): Promise<CloudRequest[]> {
  return postRequestMessages(store, created, sims, { approve: true });
}

/**
 * Posts each request's message on the stand-in (setup, not measured), as the bot does when a request is made; with
 * `approve`, then approves and queues it as the Approve handler does (one sealed approval).
 */
export async function postRequestMessages(
  store: RequestStore,
  created: CloudRequest[],
  sims: Sims,
  options: { approve: boolean },
): Promise<CloudRequest[]> {
  const api = new URL(sims.slackApiUrl);
  const pool = new Pool(api.origin, { connections: 20 });
  const out = new Map<string, CloudRequest>();
  try {
    await forEachParallel(created, 20, async (request) => {
      const response = await pool.request({
        method: 'POST',
        path: `${api.pathname}chat.postMessage`,
        headers: {
          authorization: `Bearer ${BENCH.botToken}`,
          'content-type': 'application/json; charset=utf-8',
        },
        body: JSON.stringify({ channel: request.channel, text: `Request ${request.id}` }),
      });
      const answer = (await response.body.json()) as { ok: boolean; ts?: string; error?: string };
      if (!answer.ok || !answer.ts) throw new Error(`pipeline setup: chat.postMessage: ${answer.error}`);
      const posted = await store.update(request.id, { messageTs: answer.ts });
      if (!options.approve) {
        out.set(request.id, posted ?? { ...request, messageTs: answer.ts });
        return;
      }
      // Approved as the Approve handler approves: one write that counts the approval, seals it under the bot's
      // SEAL_KEY and queues the request. The worker sends nothing on an approval without a seal that holds.
      const queued = await store.approve(request.id, BENCH.approver, posted ?? request, {
        queue: true,
        seal: (current, approval) => sealDecision(BENCH_SEAL_KEYS, current, approvalDecision(approval)),
      });
      if (!queued.ok || queued.request.state !== 'queued')
        throw new Error(`pipeline setup: ${request.id} could not be approved and queued`);
      out.set(request.id, queued.request);
    });
  } finally {
    await pool.close();
  }
  return created.map((r) => out.get(r.id) ?? r);
}

async function finalStates(
  redis: Redis,
  prefix: string,
  requests: CloudRequest[],
): Promise<Record<string, number>> {
  const keys = requestKeys(prefix);
  const states: Record<string, number> = {};
  for (let i = 0; i < requests.length; i += 500) {
    const values = await redis.mget(requests.slice(i, i + 500).map((r) => keys.request(r.id)));
    for (const value of values) {
      const state = value === null ? 'missing' : (JSON.parse(value) as CloudRequest).state;
      states[state] = (states[state] ?? 0) + 1;
    }
  }
  return states;
}

/** Queue wait (processedOn - timestamp) of a queue's completed jobs for the requests of this run. */
async function waits(queue: Queue, requestIds: Set<string>): Promise<{ p50: number; p99: number }> {
  const jobs = await queue.getJobs(['completed'], 0, -1);
  const values = jobs
    .filter(
      (j) =>
        j.processedOn !== undefined && requestIds.has((j.data as { requestId?: string }).requestId ?? ''),
    )
    .map((j) => (j.processedOn ?? 0) - j.timestamp)
    .sort((a, b) => a - b);
  return { p50: percentile(values, 50), p99: percentile(values, 99) };
}
