import type { Logger } from '../observability/logger.ts';
import type { UnshippedAudit } from '../requests/store/retention.ts';
import type { RequestStore } from '../requests/store/store.ts';
import { KEEP_FINISHED, type Queues } from './queues.ts';

/** How often retention runs, how much it removes per round, and how old a finished job may get. */
export interface RetentionPolicy {
  intervalMs: number;
  /** Requests removed per round trip batch; a sweep repeats batches until none is due. */
  batch: number;
  /** Finished BullMQ jobs older than this are removed, whether or not another job finished since. */
  finishedJobAgeMs: number;
}

export const RETENTION_POLICY: RetentionPolicy = {
  intervalMs: 10 * 60_000,
  batch: 500,
  finishedJobAgeMs: KEEP_FINISHED.ageS * 1000,
};

export interface RetentionDeps {
  store: RequestStore;
  queues: Queues;
  logger: Logger;
}

export interface RetentionResult {
  requests: number;
  jobs: number;
}

/**
 * One retention round: requests past `retention_days` (and their audit entries) through the store's retention
 * index, then finished jobs past their age. BullMQ's own removeOnComplete/removeOnFail only run when another job
 * finishes, so a queue that went quiet would otherwise keep its last jobs. Safe from several workers at once.
 */
export async function sweepRetention(
  deps: RetentionDeps,
  policy: RetentionPolicy = RETENTION_POLICY,
): Promise<RetentionResult> {
  let requests = 0;
  // Each batch counts the entries held back again, so the largest count is the one to report; removals add up.
  let kept = 0;
  let dropped = 0;
  const onUnshipped = (note: UnshippedAudit) => {
    if ('kept' in note) kept = Math.max(kept, note.kept);
    else dropped += note.dropped;
  };
  for (;;) {
    const removed = await deps.store.removeExpired(policy.batch, onUnshipped);
    requests += removed;
    if (removed < policy.batch) break;
  }
  let jobs = 0;
  for (const queue of [deps.queues.execute, deps.queues.notify]) {
    for (const state of ['completed', 'failed'] as const) {
      jobs += (await queue.clean(policy.finishedJobAgeMs, 10_000, state)).length;
    }
  }
  if (kept > 0)
    deps.logger.warn(
      { unshipped: kept },
      'retention kept audit entries past retention_days: the audit export has not shipped them yet',
    );
  if (dropped > 0)
    deps.logger.error(
      { unshipped: dropped },
      'retention removed audit entries the audit export had not shipped: AUDIT_WEBHOOK_URL is no longer set',
    );
  if (requests + jobs > 0) deps.logger.info({ requests, jobs }, 'retention removed what had expired');
  return { requests, jobs };
}

/** Runs {@link sweepRetention} now and then every `intervalMs` until stopped. */
export function startRetentionSweeper(
  deps: RetentionDeps,
  policy: RetentionPolicy = RETENTION_POLICY,
): { stop(): Promise<void> } {
  let running: Promise<unknown> | undefined;
  const sweep = () => {
    if (running) return;
    running = sweepRetention(deps, policy)
      .catch((error: unknown) =>
        deps.logger.warn({ err: error }, 'retention sweep failed; the next one tries again'),
      )
      .finally(() => {
        running = undefined;
      });
  };
  sweep();
  const timer = setInterval(sweep, policy.intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
