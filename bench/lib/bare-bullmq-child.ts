import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import type { BareBullmqStart, BareTake } from './bare-bullmq.ts';
import { serveProc } from './proc.ts';

/**
 * Bare BullMQ workers in a process of their own (forked by bare-bullmq.ts): the jobs are added by the bench from
 * another process, as clicks reach the bot from outside, so this process's CPU time is processing only. With two
 * hops, the first processor adds a job to a second queue (as the bot's execute job adds its notify job).
 */
let redis: Redis | undefined;
let pool: Pool | undefined;
const workers: Worker[] = [];
let hop2: Queue | undefined;
/** When the last hop's processor started, per job `i` (epoch ms, sub-millisecond). */
let starts: Record<number, number> = {};
/** processedOn − timestamp of the last hop's jobs. */
let waits: number[] = [];
let done = 0;
let onDone: (() => void) | undefined;
let doneTarget = Number.POSITIVE_INFINITY;

const epochNow = () => performance.timeOrigin + performance.now();

serveProc(
  {
    async start(op) {
      const cfg = op as unknown as BareBullmqStart;
      redis = new Redis(cfg.redisUrl, { maxRetriesPerRequest: null });
      const connection = redis;
      const { prefix, concurrency } = cfg;
      const work = cfg.work;
      if (work) pool = new Pool(new URL(work.cloudUrl).origin, { connections: concurrency });
      const last = async (i: number) => {
        starts[i] = epochNow();
        if (work && pool) {
          const response = await pool.request({
            method: 'POST',
            path: `/cloud/project/${work.projectUuid}/vm/${work.firstVmid + (i % work.vms)}/upgrade/`,
            headers: { authorization: `Bearer ${work.apiKey}`, 'content-type': 'application/json' },
            body: JSON.stringify({ cores: 4 }),
          });
          await response.body.dump();
        }
      };
      const finished = (job: { processedOn?: number; timestamp: number }) => {
        if (job.processedOn !== undefined) waits.push(job.processedOn - job.timestamp);
        done++;
        if (done >= doneTarget) onDone?.();
      };
      const worker = (name: string, process: (i: number) => Promise<void>) => {
        const w = new Worker<{ i: number }>(name, (job) => process(job.data.i), {
          connection,
          prefix,
          concurrency,
          removeOnComplete: { count: 10_000 },
        });
        workers.push(w);
        return w;
      };
      if (cfg.hops === 2) {
        const second = new Queue('bare2', { connection, prefix });
        hop2 = second;
        worker('bare', async (i) => void (await second.add('hop', { i })));
        worker('bare2', last).on('completed', finished);
      } else {
        worker('bare', last).on('completed', finished);
      }
      await Promise.all(workers.map((w) => w.waitUntilReady()));
      return null;
    },
    /** Resolves once `count` jobs finished their last hop since the last `take`. */
    async waitDone(op) {
      doneTarget = Number(op.count);
      if (done < doneTarget) await new Promise<void>((resolve) => (onDone = resolve));
      onDone = undefined;
      doneTarget = Number.POSITIVE_INFINITY;
      return epochNow();
    },
    take() {
      const out: BareTake = { starts, waits, done };
      starts = {};
      waits = [];
      done = 0;
      return out;
    },
  },
  async () => {
    await Promise.all(workers.map((w) => w.close()));
    await hop2?.close();
    await pool?.close();
    await redis?.quit().catch(() => undefined);
  },
);
