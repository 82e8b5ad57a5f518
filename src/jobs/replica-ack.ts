import type { Cluster, Redis } from 'ioredis';

/**
 * How long a critical write waits for a replica to acknowledge it (`WAIT 1 <ms>`) when Sentinels are configured.
 * Normally the answer comes in well under a millisecond; it runs out only while no replica follows the master.
 */
export const CRITICAL_WAIT_MS = 1000;
/** How long a write that must outlive a failover is repeated before its job gives up and retries. */
export const DURABLE_BUDGET_MS = 30_000;

/** No replica acknowledged a critical write in time: it could be lost in a failover, so nothing may follow it. */
export class NotReplicatedError extends Error {
  override readonly name = 'NotReplicatedError';
  readonly code = 'NOT_REPLICATED';
  /** Read by the queues' backoff: try again soon, a failover takes seconds. */
  readonly retryAfterMs = 1000;
}

/**
 * Makes the writes a connection has sent survive a failover before the bot acts on them (a POST to the API, a
 * reply in Slack): `WAIT n` on that same connection, `n` the replicas the Sentinels see up (`replicas`, at least 1).
 * Replication is asynchronous: without it, a master that crashes, or keeps taking writes for a moment after
 * `SENTINEL FAILOVER` promoted a replica, loses what it acknowledged last. Without Sentinels (`replicas`
 * undefined) there is no replica to wait for, and every method is a no-op.
 */
export class ReplicaAck {
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly replicas: (() => number) | undefined,
    private readonly timeoutMs = CRITICAL_WAIT_MS,
  ) {}

  /** Whether writes wait for replicas (Sentinels configured). */
  get enabled(): boolean {
    return this.replicas !== undefined;
  }

  /** Resolves once the replicas have every write this connection sent; throws {@link NotReplicatedError} otherwise. */
  async confirm(): Promise<void> {
    if (!this.replicas) return;
    const wanted = Math.max(1, this.replicas());
    const acknowledged = Number(await this.redis.call('WAIT', wanted, this.timeoutMs));
    if (acknowledged < wanted)
      throw new NotReplicatedError(
        `${acknowledged} of ${wanted} Redis replicas acknowledged the write within ${this.timeoutMs} ms`,
      );
  }

  /**
   * Runs `write` until a replica holds what it wrote: after a failover the client has moved to the new master and
   * the write lands there. `write` must be safe to repeat. Throws {@link NotReplicatedError} after `budgetMs`.
   */
  async durably<T>(write: () => Promise<T>, budgetMs = DURABLE_BUDGET_MS): Promise<T> {
    const deadline = performance.now() + budgetMs;
    for (;;) {
      const result = await write();
      try {
        await this.confirm();
        return result;
      } catch (error) {
        if (!(error instanceof NotReplicatedError) || performance.now() > deadline) throw error;
      }
    }
  }
}
