import { type ChildProcess, fork } from 'node:child_process';
import type { LoadJob, LoadResult } from './load-protocol.ts';

/** A forked load-generator process; `run` sends one load job and resolves with its result. */
export interface LoadGenerator {
  run(job: Omit<LoadJob, 'id'>): Promise<LoadResult>;
  close(): Promise<void>;
}

/** Extra time a load job may take beyond its own plan before the bench gives up on the child. */
const LOAD_JOB_SLACK_MS = 30_000;

function planMs(job: Omit<LoadJob, 'id'>): number {
  return (job.shape.type === 'rate' ? job.shape.durationMs : 0) + job.timeoutMs + LOAD_JOB_SLACK_MS;
}

/** Forks `load-child.ts` under tsx. */
export async function startLoadGenerator(): Promise<LoadGenerator> {
  const child: ChildProcess = fork(new URL('./load-child.ts', import.meta.url), {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', () => resolve());
    child.once('error', reject);
  });
  let nextId = 1;
  const waiting = new Map<number, { resolve: (r: LoadResult) => void; reject: (e: Error) => void }>();
  child.on('message', (message: LoadResult) => {
    waiting.get(message.id)?.resolve(message);
    waiting.delete(message.id);
  });
  child.on('exit', (code) => {
    for (const w of waiting.values()) w.reject(new Error(`load generator exited (code ${code})`));
    waiting.clear();
  });
  return {
    run(job) {
      const id = nextId++;
      return new Promise<LoadResult>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(id);
          reject(new Error(`load job ${id} did not finish within ${planMs(job)} ms`));
        }, planMs(job));
        waiting.set(id, {
          resolve: (r) => {
            clearTimeout(timer);
            resolve(r);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        });
        child.send({ ...job, id } satisfies LoadJob);
      });
    },
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.send({ type: 'close' });
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
