import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../observability/logger.ts';
import { requestKeys } from '../requests/store/keys.ts';

/** How long one XREAD blocks: the tail stops at most this long after its last waiter left. */
const BLOCK_MS = 5_000;
/** After a failed read (Redis away), the tail waits this long before reading again. */
const RETRY_MS = 1_000;

/**
 * Tells waiters when a request changes, from the audit stream the store appends to in the same script as every
 * state change: one blocking XREAD on a connection of its own, running only while someone waits. Nothing polls
 * the request.
 */
export class RequestChanges {
  private readonly stream: string;
  private readonly waiters = new Map<string, Set<() => void>>();
  private tail: Promise<void> | undefined;
  /** Resolves once the tail knows where the stream ends: changes after that reach the waiters. */
  private started: Promise<void> | undefined;
  private cursor = '0-0';
  private closed = false;

  constructor(
    private readonly redis: Redis | Cluster,
    prefix: string,
    private readonly logger: Logger,
  ) {
    this.stream = requestKeys(prefix).audit;
  }

  /**
   * Resolves true as soon as `changed()` says so (it is asked once at the start, then after each audit entry of
   * the request), false when `ms` passed or `signal` aborted first.
   */
  async waitFor(
    requestId: string,
    changed: () => Promise<boolean>,
    ms: number,
    signal?: AbortSignal,
  ): Promise<boolean> {
    if (this.closed) return changed();
    await this.ensureTail();
    let wake: () => void = () => undefined;
    let woken = false;
    const waiter = () => {
      woken = true;
      wake();
    };
    const set = this.waiters.get(requestId) ?? new Set<() => void>();
    this.waiters.set(requestId, set);
    set.add(waiter);
    const deadline = Date.now() + ms;
    try {
      for (;;) {
        woken = false;
        if (await changed()) return true;
        const left = deadline - Date.now();
        if (left <= 0 || signal?.aborted || this.closed) return false;
        // A change that came while `changed()` ran is read again at once.
        if (woken) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          const done = () => {
            clearTimeout(timer);
            signal?.removeEventListener('abort', done);
            resolve();
          };
          wake = done;
          signal?.addEventListener('abort', done, { once: true });
        });
        wake = () => undefined;
      }
    } finally {
      set.delete(waiter);
      if (set.size === 0 && this.waiters.get(requestId) === set) this.waiters.delete(requestId);
    }
  }

  /** Stops the tail and closes its connection. */
  close(): void {
    this.closed = true;
    for (const set of this.waiters.values()) for (const waiter of set) waiter();
    this.redis.disconnect();
  }

  private ensureTail(): Promise<void> {
    // A fresh start reads from the stream's end; a restart for waiters still there goes on from its cursor.
    this.started ??= (async () => {
      const last = await this.redis.xrevrange(this.stream, '+', '-', 'COUNT', 1);
      this.cursor = last[0]?.[0] ?? '0-0';
    })();
    const started = this.started;
    this.tail ??= started
      .then(() => this.read())
      .catch((error: unknown) => {
        this.logger.warn({ err: error }, 'the MCP request-change tail stopped');
        this.started = undefined;
      })
      .finally(() => {
        this.tail = undefined;
        if (this.closed) return;
        if (this.waiters.size > 0) void this.ensureTail();
        else this.started = undefined;
      });
    return started;
  }

  private async read(): Promise<void> {
    let failing = false;
    while (!this.closed && this.waiters.size > 0) {
      let rows: [string, [string, string[]][]][] | null;
      try {
        rows = (await this.redis.xread(
          'COUNT',
          200,
          'BLOCK',
          BLOCK_MS,
          'STREAMS',
          this.stream,
          this.cursor,
        )) as [string, [string, string[]][]][] | null;
        if (failing) this.logger.info('the MCP request-change tail reads again');
        failing = false;
      } catch (error) {
        if (this.closed) return;
        if (!failing) this.logger.warn({ err: error }, 'the MCP request-change tail cannot read; retrying');
        failing = true;
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
        continue;
      }
      for (const [, entries] of rows ?? []) {
        for (const [id, fields] of entries) {
          this.cursor = id;
          const requestId = fieldOf(fields, 'requestId');
          if (requestId) for (const waiter of this.waiters.get(requestId) ?? []) waiter();
          // An agent disabled or enabled (an entry of no request, and rare): every wait checks its agent again.
          else if (fieldOf(fields, 'state') === 'agent')
            for (const set of this.waiters.values()) for (const waiter of set) waiter();
        }
      }
    }
  }
}

/** A field of a stream entry's flat name/value list, or undefined. */
function fieldOf(fields: string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}
