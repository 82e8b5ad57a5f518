import type { Cluster, Redis } from 'ioredis';
import type { ConfirmAndSet, HeldLock } from './vm-lock.ts';

/**
 * Markers outlive any retry or restart of the job they guard (12 attempts of at most 15 min, plus stall recovery:
 * hours), then go: a request that has moved on is guarded by its state.
 */
export const MARKER_TTL_S = 3 * 24 * 3600;

/**
 * "This step's POST may have left": set before sending, cleared only when the call surely did not reach the API.
 * A job that finds the marker (a retry, a stalled job after a crash) must not send again.
 */
export class SendMarkers {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
  ) {}

  /** The marker's key: a script that starts a run sets it with the lock (requests/lifecycle/run-start.ts). */
  key(requestId: string, step: number): string {
    return `${this.prefix}:sending:${requestId}:${step}`;
  }

  /** Sets the marker; false when it was already there (someone may have sent this step). */
  async mark(requestId: string, step: number, at: Date): Promise<boolean> {
    const ok = await this.redis.set(this.key(requestId, step), at.toISOString(), 'EX', MARKER_TTL_S, 'NX');
    return ok === 'OK';
  }

  /**
   * Sets the marker only while `lock` is still held, in one round trip: 'lost' (nothing set: do not send), 'set',
   * or 'exists' (someone may have sent this step).
   */
  markHolding(lock: HeldLock, requestId: string, step: number, at: Date): Promise<ConfirmAndSet> {
    return lock.confirmAndSetNx(this.key(requestId, step), at.toISOString(), MARKER_TTL_S);
  }

  /** Whether the step's marker is there: its POST may have left. */
  async exists(requestId: string, step: number): Promise<boolean> {
    return (await this.redis.exists(this.key(requestId, step))) === 1;
  }

  /** Clears the marker after a call that surely did not take effect, so a retry may send. */
  async clear(requestId: string, step: number): Promise<void> {
    await this.redis.del(this.key(requestId, step));
  }
}
