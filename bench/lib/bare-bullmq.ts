import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { forEachParallel, range } from './parallel.ts';
import { forkProc } from './proc.ts';
import { percentile } from './stats.ts';

/** What the no-op BullMQ baseline measured. */
export interface BareBullmqResult {
  jobs: number;
  elapsedMs: number;
  perSecond: number;
  waitP50Ms: number;
  waitP99Ms: number;
  /** CPU time of the workers' process per job (ms). */
  cpuMsPerJob: number;
}

/** A job's work other than nothing: one resize call to the cloud simulator on VM firstVmid + i % vms. */
export interface BareWork {
  cloudUrl: string;
  apiKey: string;
  projectUuid: string;
  firstVmid: number;
  vms: number;
}

/** What bare-bullmq-child.ts is started with. */
export interface BareBullmqStart {
  redisUrl: string;
  prefix: string;
  concurrency: number;
  /** 1: add → process; 2: add → process → add → process. */
  hops: 1 | 2;
  work?: BareWork;
}

/** What the child recorded since the last take. */
export interface BareTake {
  /** Epoch ms (sub-millisecond) when the last hop's processor started, per job `i`. */
  starts: Record<number, number>;
  waits: number[];
  done: number;
}

/** Bare BullMQ workers in their own process; the bench adds jobs from its own. */
export interface BareBullmq {
  cpuMs(): Promise<number>;
  /** Adds `count` jobs, `parallelism` adds in flight, and waits until all are processed. */
  run(count: number, options: { parallelism?: number; timeoutMs: number }): Promise<BareBullmqResult>;
  /** Adds job `i` now; resolves with when the add was started (epoch ms). */
  add(i: number): Promise<number>;
  /** Waits until `count` jobs were processed since the last take, then takes what was recorded. */
  take(count: number, timeoutMs: number): Promise<BareTake>;
  close(): Promise<void>;
}

const epochNow = () => performance.timeOrigin + performance.now();

/** Forks bare-bullmq-child.ts with workers of `concurrency` on `prefix`. */
export async function startBareBullmq(options: BareBullmqStart): Promise<BareBullmq> {
  const proc = forkProc(new URL('./bare-bullmq-child.ts', import.meta.url), 'bare BullMQ');
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue('bare', { connection: redis, prefix: options.prefix });
  try {
    await proc.call({ op: 'start', ...options });
  } catch (error) {
    await proc.close(1000);
    await queue.close();
    redis.disconnect();
    throw error;
  }
  let nextJob = 0;
  const add = async (i: number) => {
    const at = epochNow();
    await queue.add('noop', { i }, { jobId: `bare.${nextJob++}`, removeOnComplete: { count: 10_000 } });
    return at;
  };
  const take = async (count: number, timeoutMs: number) => {
    await proc.call({ op: 'waitDone', count }, timeoutMs);
    return proc.call<BareTake>({ op: 'take' });
  };
  return {
    cpuMs: () => proc.cpuMs(),
    add,
    take,
    async run(count, runOptions) {
      const cpuBefore = await proc.cpuMs();
      const started = performance.now();
      await forEachParallel(range(count), runOptions.parallelism ?? 50, async (i) => void (await add(i)));
      const taken = await take(count, runOptions.timeoutMs);
      const elapsedMs = performance.now() - started;
      const cpu = (await proc.cpuMs()) - cpuBefore;
      const waits = [...taken.waits].sort((a, b) => a - b);
      return {
        jobs: count,
        elapsedMs,
        perSecond: (count * 1000) / elapsedMs,
        waitP50Ms: percentile(waits, 50),
        waitP99Ms: percentile(waits, 99),
        cpuMsPerJob: cpu / count,
      };
    },
    async close() {
      await proc.close();
      await queue.close();
      redis.disconnect();
    },
  };
}

/** One throughput run of bare BullMQ in a process of its own (started and stopped for it). */
export async function runBareBullmq(options: {
  redisUrl: string;
  prefix: string;
  count: number;
  concurrency: number;
  addParallelism?: number;
  timeoutMs: number;
  work?: BareWork;
}): Promise<BareBullmqResult> {
  const bare = await startBareBullmq({
    redisUrl: options.redisUrl,
    prefix: options.prefix,
    concurrency: options.concurrency,
    hops: 1,
    work: options.work,
  });
  try {
    return await bare.run(options.count, {
      parallelism: options.addParallelism,
      timeoutMs: options.timeoutMs,
    });
  } finally {
    await bare.close();
  }
}
