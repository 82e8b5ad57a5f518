/** How long to wait before retrying a job whose work surely did not happen (or a Slack report). */
export interface RetryPolicy {
  /** Delay before the first retry; doubles each attempt. */
  baseMs: number;
  /** Upper bound of the exponential delay. */
  maxMs: number;
  /** Upper bound for a server's `Retry-After`, so a bogus header cannot park a job for days. */
  maxRetryAfterMs: number;
}

/** Cloud API calls that surely did not take effect (connection refused, 429, 503). */
export const EXECUTE_RETRY: RetryPolicy = { baseMs: 2_000, maxMs: 5 * 60_000, maxRetryAfterMs: 15 * 60_000 };
/** Slack posts and updates during an outage or rate limit. */
export const NOTIFY_RETRY: RetryPolicy = { baseMs: 1_000, maxMs: 5 * 60_000, maxRetryAfterMs: 15 * 60_000 };
/** For tests: the same shape, in milliseconds. */
export const FAST_RETRY: RetryPolicy = { baseMs: 50, maxMs: 500, maxRetryAfterMs: 5_000 };

/**
 * The per-VM mutation lock: how long it lives unrenewed, how often it is renewed, how long a job whose VM is busy
 * keeps its worker slot polling for the lock (`holdOnMs`, every `pollMs`), and how long it is put back after that.
 */
export interface LockPolicy {
  ttlMs: number;
  renewEveryMs: number;
  /** Bounded so a slot waiting on one busy VM soon goes back to jobs for other VMs. */
  holdOnMs: number;
  pollMs: number;
  waitMs: number;
}

/** A crashed worker's lock frees itself after `ttlMs`; a live one renews it well before. */
export const VM_LOCK: LockPolicy = {
  ttlMs: 60_000,
  renewEveryMs: 15_000,
  holdOnMs: 1_000,
  pollMs: 20,
  waitMs: 2_000,
};
/** For tests: a killed worker's lock is gone within seconds. */
export const FAST_VM_LOCK: LockPolicy = {
  ttlMs: 3_000,
  renewEveryMs: 500,
  holdOnMs: 200,
  pollMs: 10,
  waitMs: 100,
};

/** An error that says when to try again, e.g. from `Retry-After`. */
interface WithRetryAfter {
  retryAfterMs?: number;
}

function retryAfterOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null || !('retryAfterMs' in error)) return undefined;
  const value = (error as WithRetryAfter).retryAfterMs;
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

/**
 * The delay before retry number `attemptsMade`: the server's `Retry-After` when it gave one (bounded), else
 * exponential from `baseMs` with ±20% jitter so many waiting jobs do not return at once.
 */
export function retryDelayMs(policy: RetryPolicy, attemptsMade: number, error?: unknown): number {
  const retryAfter = retryAfterOf(error);
  if (retryAfter !== undefined) return Math.min(retryAfter, policy.maxRetryAfterMs);
  const exponential = Math.min(policy.baseMs * 2 ** Math.max(0, attemptsMade - 1), policy.maxMs);
  return Math.round(exponential * (0.8 + Math.random() * 0.4));
}
