import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { forEachParallel, range } from './parallel.ts';
import { percentile } from './stats.ts';

/** What the no-op BullMQ baseline measured. */
export interface BareBullmqResult {
  jobs: number;
  elapsedMs: number;
  perSecond: number;
  waitP50Ms: number;
  waitP99Ms: number;
}

/**
 * Bare BullMQ: `count` jobs added one by one (as the bot enqueues), a Worker with `concurrency` whose processor does
 * nothing (or `work`); the time from the first add to the last completion, and queue wait (processedOn - timestamp).
 */
export async function runBareBullmq(options: {
  connection: Redis;
  prefix: string;
  count: number;
  concurrency: number;
  /** Adds in flight at once, as concurrent approvals would. */
  addParallelism?: number;
  timeoutMs: number;
  /** The work of job `i`; nothing by default (the no-op baseline). */
  work?: (i: number) => Promise<void>;
}): Promise<BareBullmqResult> {
  const { connection, prefix, count, concurrency } = options;
  const queue = new Queue('bare', { connection, prefix });
  const waits: number[] = [];
  let done = 0;
  let resolveAll: () => void = () => undefined;
  const allDone = new Promise<void>((resolve) => {
    resolveAll = resolve;
  });
  const work = options.work ?? (async () => undefined);
  const worker = new Worker<{ i: number }>('bare', (job) => work(job.data.i), {
    connection,
    prefix,
    concurrency,
    removeOnComplete: { count: count + 10 },
  });
  worker.on('completed', (job) => {
    if (job.processedOn !== undefined) waits.push(job.processedOn - job.timestamp);
    done++;
    if (done === count) resolveAll();
  });
  await worker.waitUntilReady();
  const started = performance.now();
  await forEachParallel(range(count), options.addParallelism ?? 50, async (i) => {
    await queue.add('noop', { i }, { jobId: `bare.${i}` });
  });
  let timer: NodeJS.Timeout | undefined;
  const finished = await Promise.race([
    allDone.then(() => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), options.timeoutMs);
    }),
  ]);
  clearTimeout(timer);
  const elapsedMs = performance.now() - started;
  await worker.close();
  await queue.close();
  if (!finished)
    throw new Error(`bare BullMQ: only ${done} of ${count} jobs done within ${options.timeoutMs} ms`);
  waits.sort((a, b) => a - b);
  return {
    jobs: count,
    elapsedMs,
    perSecond: (count * 1000) / elapsedMs,
    waitP50Ms: percentile(waits, 50),
    waitP99Ms: percentile(waits, 99),
  };
}
