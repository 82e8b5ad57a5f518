/**
 * The shutdown stages every start function registers what it opened with, and the small timing helpers start-up
 * and shutdown share. The order of the stages is the shutdown's (docs/operations.md#shutdown): stop taking work,
 * let the work in hand finish (or hand it back), then close connections, last opened first.
 */
import type { Server } from 'node:http';
import { ABANDON_GRACE_MS } from '../jobs/execution.ts';
import type { Logger } from '../observability/logger.ts';

/** Something start-up opened, closed in its stage of the shutdown, given the time left. */
export type Closer = (budgetMs: number) => Promise<void>;

/** The end of a shutdown kept for closing connections, after the workers had their time. */
const CLOSE_RESERVE_MS = 1_500;

/** What a running bot closes when it stops, stage by stage. */
export class ShutdownStages {
  /** Servers, links and sweepers: closed first, so no new work comes in. */
  readonly intake: Closer[] = [];
  /** Workers: they drain what they hold until only the time to abandon and to close is left. */
  readonly work: Closer[] = [];
  /** Clients and queues: closed one after another, last opened first (the queues before their Redis connection). */
  readonly connections: Closer[] = [];

  constructor(private readonly logger: Logger) {}

  /** Runs the three stages within `deadlineMs`; a part that fails or overruns is logged and the rest go on. */
  async run(deadlineMs: number): Promise<void> {
    const end = performance.now() + deadlineMs;
    const left = () => Math.max(0, end - performance.now());
    const warn = (error: unknown) => this.logger.warn({ err: error }, 'a part did not stop cleanly');
    await Promise.all(this.intake.map((close) => within(close(0), Math.min(2_000, left() / 4)).catch(warn)));
    const drain = Math.max(0, left() - ABANDON_GRACE_MS - CLOSE_RESERVE_MS);
    await Promise.all(this.work.map((close) => within(close(drain), drain + ABANDON_GRACE_MS).catch(warn)));
    for (const close of this.connections.toReversed())
      await within(close(left()), Math.max(250, left())).catch(warn);
  }
}

/** The port `server` listens on (`fallback` when it has no address). */
export function portOf(server: Server, fallback: number): number {
  const address = server.address();
  return typeof address === 'object' && address ? address.port : fallback;
}

export function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => server.close(() => resolve()));
}

/** `promise`, or the signal's reason as soon as it aborts. */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** `promise`, or rejects when it takes longer than `ms`; the timer never keeps a stopping process alive. */
export function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not finish within ${Math.round(ms)} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
