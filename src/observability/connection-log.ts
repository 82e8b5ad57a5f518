/**
 * Logs stay readable during an outage (docs/troubleshooting.md#logs): a lost connection is one line when it goes and
 * one when it comes back, with how many failures were seen between, instead of a line per failure from every
 * client, queue and worker on it.
 */
import type { Logger } from './logger.ts';

/** Error codes and messages of a connection that is gone, not of a command that failed. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNABORTED',
]);
const CONNECTION_MESSAGES =
  /^(Connection is closed|connect ETIMEDOUT|Stream isn't writeable|Reached the max retries per request limit)/;

/** Whether `error` means the connection itself is gone (as opposed to a command Redis refused). */
export function isConnectionError(error: unknown): boolean {
  const { code, message, name } = (error ?? {}) as { code?: unknown; message?: unknown; name?: unknown };
  return (
    (typeof code === 'string' && CONNECTION_CODES.has(code)) ||
    name === 'MaxRetriesPerRequestError' ||
    (typeof message === 'string' && CONNECTION_MESSAGES.test(message))
  );
}

/** One dependency's connection as the log tells it: up, or down since a moment with a count of failures. */
export class ConnectionLog {
  private downSince: number | undefined;
  private failed = 0;

  constructor(
    private readonly logger: Logger,
    /** What the connection is to, in the lines' `msg`: `redis connection lost`. */
    private readonly name: string,
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * A failure seen on the connection. A connection error while up is the one `lost` line; while down it is counted.
   * Any other error is logged as it is, at warn, since it is not the outage.
   */
  failure(error: unknown, fields: Record<string, unknown> = {}): void {
    if (!isConnectionError(error)) {
      this.logger.warn({ err: error, ...fields }, `${this.name} problem`);
      return;
    }
    this.failed += 1;
    if (this.downSince !== undefined) return;
    this.downSince = this.clock();
    this.logger.warn({ err: error, ...fields }, `${this.name} connection lost`);
  }

  /** The connection works again: the one `back` line, with what failed meanwhile; nothing when it was not down. */
  recovered(): void {
    if (this.downSince === undefined) return;
    this.logger.info(
      { failed: this.failed, downMs: this.clock() - this.downSince },
      `${this.name} connection back`,
    );
    this.downSince = undefined;
    this.failed = 0;
  }

  /** Whether the last word was a loss. */
  get down(): boolean {
    return this.downSince !== undefined;
  }
}

/** One ConnectionLog per logger and dependency, so every part of a process that shares a logger shares the count. */
const logs = new WeakMap<Logger, Map<string, ConnectionLog>>();

/** The Redis connection log of the process that owns `logger`. */
export function redisConnectionLog(logger: Logger): ConnectionLog {
  let byName = logs.get(logger);
  if (!byName) {
    byName = new Map();
    logs.set(logger, byName);
  }
  let log = byName.get('redis');
  if (!log) {
    log = new ConnectionLog(logger, 'redis');
    byName.set('redis', log);
  }
  return log;
}

/**
 * A dependency that answers but fails (the Slack Web API's 5xx, `internal_error`, a refused connection): one line when
 * it starts failing and one when a call succeeds again, with how many failed between, instead of a line per retry.
 */
export class OutageLog {
  private downSince: number | undefined;
  private failed = 0;

  constructor(
    private readonly logger: Logger,
    /** What fails, in the lines' `msg`: `slack web api unavailable`. */
    private readonly name: string,
    /** What is done meanwhile, said in the first line. */
    private readonly meanwhile: string,
    private readonly clock: () => number = Date.now,
  ) {}

  /** A failed call: the one `unavailable` line when it is the first, else counted. */
  failure(fields: Record<string, unknown>): void {
    this.failed += 1;
    if (this.downSince !== undefined) return;
    this.downSince = this.clock();
    this.logger.warn(fields, `${this.name} unavailable; ${this.meanwhile}`);
  }

  /** A call succeeded: the one `back` line when it was down. */
  recovered(): void {
    if (this.downSince === undefined) return;
    this.logger.info({ failed: this.failed, downMs: this.clock() - this.downSince }, `${this.name} back`);
    this.downSince = undefined;
    this.failed = 0;
  }
}

const outages = new WeakMap<Logger, OutageLog>();

/** The Slack Web API's outage log of the process that owns `logger`, shared by its workers. */
export function slackOutageLog(logger: Logger): OutageLog {
  let log = outages.get(logger);
  if (!log) {
    log = new OutageLog(logger, 'slack web api', 'replies wait and are retried until it answers');
    outages.set(logger, log);
  }
  return log;
}
