/**
 * The start-up's one deadline and one stop signal, shared by every start function: each awaited step names what
 * it waits for, so a start-up that runs out of time says what it was still waiting for.
 */
import { abortable } from './stages.ts';

export class StartupDeadline {
  /** A stop asked for, or the deadline passed. */
  readonly signal: AbortSignal;
  /** What start-up is waiting for, named in the error when its deadline passes. */
  waitingFor = 'the configuration';
  private readonly startedAt = performance.now();

  constructor(
    private readonly timeoutMs: number | undefined,
    stop: AbortSignal | undefined,
    /** Added to each wait's own limit in {@link within}: a longer STARTUP_TIMEOUT_SECONDS lengthens them too. */
    private readonly spareMs = 0,
  ) {
    this.signal = AbortSignal.any(
      [stop, timeoutMs ? AbortSignal.timeout(timeoutMs) : undefined].filter(
        (s): s is AbortSignal => s !== undefined,
      ),
    );
  }

  /** Whole milliseconds left (timers and AbortSignal.timeout refuse fractions); infinite without a deadline. */
  left(): number {
    return this.timeoutMs === undefined
      ? Number.POSITIVE_INFINITY
      : Math.floor(this.timeoutMs - (performance.now() - this.startedAt));
  }

  /**
   * The limit for one wait whose own limit is `baseMs` (plus the spare time), within what is left of the deadline
   * with 100 ms to spare, so the wait's error names what it waited for rather than the deadline.
   */
  within(baseMs: number): number {
    return Math.max(100, Math.min(baseMs + Math.max(0, this.spareMs), this.left() - 100));
  }

  /** Milliseconds since the start-up began. */
  elapsed(): number {
    return performance.now() - this.startedAt;
  }

  /** `promise`, named as what start-up now waits for, or the stop's reason as soon as the signal aborts. */
  step<T>(what: string, promise: Promise<T>): Promise<T> {
    this.waitingFor = what;
    return abortable(promise, this.signal);
  }
}
