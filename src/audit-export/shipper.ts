/**
 * Ships the audit stream to AUDIT_WEBHOOK_URL (docs/operations.md#audit-export): batches of entries POSTed as a JSON
 * array, signed when AUDIT_WEBHOOK_SECRET is set, the cursor moved only after a 2xx. A receiver that fails is retried
 * with exponential backoff and logged once when it starts failing and once when it takes batches again.
 */
import { type Dispatcher, request } from 'undici';
import type { RedisClient } from '../config/redis-connection.ts';
import { redisConnectionLog } from '../observability/connection-log.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import { batchBody, SIGNATURE_HEADER, signBody, TIMESTAMP_HEADER } from './batch.ts';
import { type AuditBatch, AuditCursor } from './cursor.ts';

/** How the export batches, waits and retries; tests pass a fast one. */
export interface AuditExportPolicy {
  /** Entries per POST at most. */
  batch: number;
  /** How often the stream is looked at once everything is shipped. */
  idleMs: number;
  /** The wait after the first failed POST; it doubles with each failure in a row, up to `maxRetryMs`. */
  firstRetryMs: number;
  maxRetryMs: number;
  /** One POST's deadline, answer included. */
  timeoutMs: number;
  /** How long the shipping lease lasts unless renewed: longer than a POST and the longest wait together. */
  leaseMs: number;
}

export const AUDIT_EXPORT_POLICY: AuditExportPolicy = {
  batch: 100,
  idleMs: 1_000,
  firstRetryMs: 1_000,
  maxRetryMs: 30_000,
  timeoutMs: 10_000,
  leaseMs: 60_000,
};

export interface AuditShipperDeps {
  redis: RedisClient;
  prefix: string;
  /** AUDIT_WEBHOOK_URL. Logged by host only: a URL can carry a token. */
  url: string;
  /** The configured secret values, scrubbed from the entries' details (as from every log line). */
  secrets?: readonly string[];
  /** AUDIT_WEBHOOK_SECRET; unset: batches go unsigned. */
  secret?: string;
  /** Carries the POSTs (the caller's pool, or its proxy). */
  dispatcher: Dispatcher;
  logger: Logger;
  metrics: Metrics;
  /** Sent as User-Agent. */
  userAgent: string;
}

/** Why a POST did not count: the receiver's status, or the transport error's code. */
type Failure = { status: number } | { code: string };

/** The receiver as the log tells it: one line when it starts failing, one when it takes batches again. */
class ReceiverLog {
  private downSince: number | undefined;
  private failures = 0;

  constructor(
    private readonly logger: Logger,
    private readonly receiver: string,
  ) {}

  failed(failure: Failure, backlog: number, retryMs: number): void {
    this.failures += 1;
    if (this.downSince !== undefined) return;
    this.downSince = Date.now();
    this.logger.warn(
      { receiver: this.receiver, ...failure, backlog, retryMs },
      'audit export failing; retrying with backoff, nothing is lost',
    );
  }

  delivered(): void {
    if (this.downSince === undefined) return;
    this.logger.info(
      { receiver: this.receiver, failedAttempts: this.failures, downMs: Date.now() - this.downSince },
      'audit export delivering again',
    );
    this.downSince = undefined;
    this.failures = 0;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** The error code of a failed POST, for the log and nothing more (never its message: it may hold the URL). */
function failureCode(error: unknown): string {
  const { code, name } = (error ?? {}) as { code?: unknown; name?: unknown };
  if (typeof code === 'string') return code;
  return typeof name === 'string' ? name : 'unknown';
}

/**
 * The URL to POST to and its user:password@ as a Basic `authorization` header: undici drops a URL's user part
 * without a word, so a receiver behind basic authentication would answer 401 forever.
 */
export function receiverTarget(url: string): { url: string; authorization?: string } {
  const parsed = new URL(url);
  if (parsed.username === '' && parsed.password === '') return { url };
  const credentials = `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`;
  parsed.username = '';
  parsed.password = '';
  return { url: parsed.toString(), authorization: `Basic ${Buffer.from(credentials).toString('base64')}` };
}

/**
 * What a receiver refused as too large (413): the batch is halved until it fits; an entry refused alone is sent once
 * more trimmed (its details cut, saying so), and if that is refused too it is set aside (acknowledged unshipped,
 * with an error line and `cloudops_audit_export_entries_total{outcome="set_aside"}`: it stays in the audit log).
 * Batches grow back to the policy's size as they are taken.
 */
class TooLarge {
  /** Entries per POST now. */
  size: number;
  /** Ids of entries to send trimmed. */
  readonly trim = new Set<string>();

  constructor(
    private readonly deps: Pick<AuditShipperDeps, 'logger' | 'metrics'>,
    private readonly cursor: AuditCursor,
    private readonly full: number,
  ) {
    this.size = full;
  }

  /** The receiver answered 413 to `batch`; resolves with the wait before the next round (none). */
  async refused(batch: AuditBatch): Promise<number> {
    this.deps.metrics.auditExportBatches.inc({ outcome: 'too_large' });
    if (batch.ids.length > 1) {
      this.size = Math.max(1, Math.floor(batch.ids.length / 2));
      this.deps.logger.info(
        { entries: batch.ids.length, next: this.size, status: 413 },
        'audit batch too large for the receiver; sending it in smaller batches',
      );
      return 0;
    }
    const [entry] = batch.entries;
    const id = batch.ids[0] ?? '';
    if (entry && !this.trim.has(id)) {
      this.trim.add(id);
      return 0;
    }
    await this.cursor.ack(batch.ids);
    this.trim.delete(id);
    this.deps.metrics.auditExportEntries.inc({ outcome: 'set_aside' });
    this.deps.logger.error(
      { id, requestId: entry?.requestId || undefined, status: 413 },
      'audit entry set aside: the receiver refuses it even trimmed (HTTP 413); it stays in the audit log (cloudops audit)',
    );
    return 0;
  }

  /** `batch` was answered 2xx: trimmed entries in it are told, and batches grow back. */
  shipped(batch: AuditBatch): void {
    for (const id of batch.ids) {
      if (!this.trim.delete(id)) continue;
      this.deps.metrics.auditExportEntries.inc({ outcome: 'trimmed' });
      this.deps.logger.warn(
        { id, status: 413 },
        'audit entry too large for the receiver; shipped trimmed (the full entry stays in the audit log)',
      );
    }
    this.size = Math.min(this.full, this.size * 2);
  }
}

/** A running export: `stop` lets a POST in flight finish within `budgetMs`, then cuts it (its batch stays unshipped). */
export interface AuditShipper {
  stop(budgetMs?: number): Promise<void>;
}

/** Starts shipping; runs until stopped. Only the process holding the lease ships; the others wait their turn. */
export function startAuditShipper(
  deps: AuditShipperDeps,
  policy: AuditExportPolicy = AUDIT_EXPORT_POLICY,
): AuditShipper {
  const cursor = new AuditCursor(deps.redis, deps.prefix);
  const receiver = new URL(deps.url).host;
  const target = receiverTarget(deps.url);
  const log = new ReceiverLog(deps.logger, receiver);
  const redisLog = redisConnectionLog(deps.logger);
  const stopping = new AbortController();
  const cut = new AbortController();
  let failures = 0;
  let groupReady = false;
  const tooLarge = new TooLarge(deps, cursor, policy.batch);

  const post = async (batch: AuditBatch): Promise<Failure | undefined> => {
    const body = batchBody(batch.entries, deps.secrets, tooLarge.trim);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': deps.userAgent,
    };
    if (deps.secret) {
      // Signed at each POST: a retried batch carries its own time, and a receiver refuses one captured long ago.
      const timestamp = String(Math.floor(Date.now() / 1000));
      headers[TIMESTAMP_HEADER] = timestamp;
      headers[SIGNATURE_HEADER] = signBody(deps.secret, timestamp, body);
    }
    if (target.authorization) headers.authorization = target.authorization;
    try {
      const response = await request(target.url, {
        method: 'POST',
        headers,
        body,
        dispatcher: deps.dispatcher,
        signal: AbortSignal.any([cut.signal, AbortSignal.timeout(policy.timeoutMs)]),
      });
      await response.body.dump();
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      return ok ? undefined : { status: response.statusCode };
    } catch (error) {
      return { code: failureCode(error) };
    }
  };

  /** One round: ship a batch if there is one; resolves with how long to wait before the next. */
  const round = async (): Promise<number> => {
    if (!(await cursor.hold(policy.leaseMs))) return policy.idleMs;
    if (!groupReady) {
      await cursor.ensureGroup();
      groupReady = true;
    }
    const batch = await cursor.take(tooLarge.size);
    if (batch.ids.length === 0) return policy.idleMs;
    const failure = batch.entries.length > 0 ? await post(batch) : undefined;
    // Too large for the receiver: split, trimmed or set aside at once, never the same batch again and again.
    if (failure && 'status' in failure && failure.status === 413) return tooLarge.refused(batch);
    if (failure) {
      deps.metrics.auditExportBatches.inc({ outcome: 'failed' });
      const retryMs = Math.min(policy.maxRetryMs, policy.firstRetryMs * 2 ** failures);
      failures += 1;
      log.failed(failure, await cursor.backlog(), retryMs);
      return retryMs;
    }
    await cursor.ack(batch.ids);
    if (batch.entries.length > 0) deps.metrics.auditExportBatches.inc({ outcome: 'shipped' });
    tooLarge.shipped(batch);
    failures = 0;
    log.delivered();
    // A full batch means more may wait: go on at once.
    return batch.ids.length >= policy.batch ? 0 : policy.idleMs;
  };

  const loop = (async () => {
    while (!stopping.signal.aborted) {
      let wait: number;
      try {
        wait = await round();
        deps.metrics.auditExportBacklog.set(await cursor.backlog());
        redisLog.recovered();
      } catch (error) {
        // The stream or its group was removed (a flushed database): created again on the next round.
        if (error instanceof Error && error.message.startsWith('NOGROUP')) groupReady = false;
        else redisLog.failure(error, { part: 'audit export' });
        wait = Math.min(policy.maxRetryMs, policy.firstRetryMs);
      }
      await pause(wait, stopping.signal);
    }
    await cursor.release().catch(() => undefined);
  })();

  deps.logger.info({ receiver, signed: deps.secret !== undefined }, 'audit export on');
  return {
    async stop(budgetMs = policy.timeoutMs) {
      stopping.abort();
      const timer = setTimeout(() => cut.abort(), budgetMs);
      await loop;
      clearTimeout(timer);
    },
  };
}
