import type { Logger } from '../observability/logger.ts';
import { requeueStranded } from '../requests/lifecycle/run-moves.ts';
import type { CloudRequest } from '../requests/model/types.ts';
import type { RequestStore } from '../requests/store/store.ts';
import { createOutbox } from './outbox.ts';
import { enqueueExecution, type Queues } from './queues.ts';

/** How old an approval or a queueing must be before the sweeper looks at it, and how often it looks. */
export interface SweepPolicy {
  /** Leaves the handler that just approved time to enqueue on its own. */
  minAgeMs: number;
  intervalMs: number;
  /** Requests looked at per sweep, at most. */
  maxPerSweep: number;
}

export const SWEEP_POLICY: SweepPolicy = { minAgeMs: 2 * 60_000, intervalMs: 60_000, maxPerSweep: 2_000 };
export const FAST_SWEEP_POLICY: SweepPolicy = { minAgeMs: 0, intervalMs: 200, maxPerSweep: 2_000 };

/** Job states in which the execute job will still run the request. */
const LIVE_JOB_STATES = new Set(['waiting', 'delayed', 'active', 'prioritized', 'waiting-children']);

const PAGE = 200;

export interface SweepDeps {
  store: RequestStore;
  queues: Queues;
  now: () => Date;
  logger: Logger;
  /**
   * The lifecycle's way from approved to queued (a freeze holds it instead); without it the sweeper moves the request
   * itself.
   */
  queueApproved?: (request: CloudRequest, detail: string) => Promise<CloudRequest | undefined>;
}

export interface SweepResult {
  checked: number;
  /** Requests approved but never queued, now queued. */
  queued: string[];
  /** Requests queued without a live execute job, now enqueued. */
  enqueued: string[];
}

/**
 * Finds requests stranded by a failure between two writes (the state change was stored, the execute job was not
 * added: Redis failed in between, or the process died) and hands them to the queue. Safe to run from every worker
 * at once: the job id is the request id and transitions are compare-and-set; the per-step send markers still keep
 * any POST from going out twice.
 */
export async function sweepStranded(
  deps: SweepDeps,
  policy: SweepPolicy = SWEEP_POLICY,
): Promise<SweepResult> {
  const result: SweepResult = { checked: 0, queued: [], enqueued: [] };
  const cutoff = new Date(deps.now().getTime() - policy.minAgeMs);
  const seen = new Set<string>();
  for (let offset = 0; result.checked < policy.maxPerSweep; offset += PAGE) {
    const ids = await deps.store.awaitingRun(cutoff, PAGE, offset);
    if (ids.length === 0) break;
    for (const id of ids) {
      if (seen.has(id)) continue;
      seen.add(id);
      result.checked++;
      await sweepOne(deps, id, result);
    }
  }
  if (result.queued.length + result.enqueued.length > 0) {
    deps.logger.warn(
      { queued: result.queued, enqueued: result.enqueued },
      'stranded requests handed to the queue again',
    );
  }
  return result;
}

async function sweepOne(deps: SweepDeps, id: string, result: SweepResult): Promise<void> {
  let request = await deps.store.get(id);
  if (request?.state === 'approved') {
    const detail = 'approved but never queued: queued by the sweeper';
    if (deps.queueApproved) {
      // Queued with its job (or held by a freeze); the announcement may have died with the process.
      const next = await deps.queueApproved(request, detail);
      if (!next) return;
      result.queued.push(id);
      const outbox = createOutbox(deps.queues, deps.now);
      await outbox.announce(next, 'approved');
      if (next.state === 'frozen') await outbox.announce(next, 'frozen');
      return;
    }
    const queued = await requeueStranded(deps.store, id, detail);
    if (!queued.ok) return;
    request = queued.request;
    result.queued.push(id);
  }
  if (request?.state !== 'queued') return;
  const job = await deps.queues.execute.getJob(id);
  if (job && LIVE_JOB_STATES.has(await job.getState())) return;
  // A finished job under the same id would make the new add a no-op: remove it first.
  if (job) await job.remove();
  await enqueueExecution(deps.queues, request, deps.now());
  result.enqueued.push(id);
  // The approval's announcement may have died with the process too: the message loses its buttons and the
  // "Approved" reply is posted (once: the reply's job id and its posted record make a second announcement a no-op).
  if (request.approvedBy) await createOutbox(deps.queues, deps.now).announce(request, 'approved');
}

/** Runs {@link sweepStranded} now and then every `intervalMs` until stopped. */
export function startStrandedSweeper(
  deps: SweepDeps,
  policy: SweepPolicy = SWEEP_POLICY,
): { stop(): Promise<void> } {
  let running: Promise<unknown> | undefined;
  let stopped = false;
  const sweep = () => {
    // A slow sweep (Redis struggling) is not stacked with another one.
    if (running) return;
    running = sweepStranded(deps, policy)
      .catch((error: unknown) =>
        deps.logger.warn({ err: error }, 'stranded-request sweep failed; the next one tries again'),
      )
      .finally(() => {
        running = undefined;
      });
  };
  sweep();
  const timer = setInterval(() => {
    if (!stopped) sweep();
  }, policy.intervalMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
