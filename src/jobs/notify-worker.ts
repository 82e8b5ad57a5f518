import { DelayedError, type Job, UnrecoverableError } from 'bullmq';
import { closedLabel, SLACK_ERROR_LABELS } from '../observability/metrics.ts';
import type { CloudRequest, ReplyEvent } from '../requests/types.ts';
import type { ExecutionDeps } from './deps.ts';
import { enqueueNotify, type NotifyJob, replyId } from './queues.ts';
import { slackFailure } from './slack-failure.ts';

/** A pending request's expiry is re-checked at least this often, so a moved clock (tests, demo) is noticed. */
const EXPIRE_RECHECK_MAX_MS = 60_000;
/** "Posted" records for thread replies outlive every retry of their job (40 attempts of at most 15 min: hours). */
export const REPLIED_TTL_S = 3 * 24 * 3600;
/** Slack could not take the call now (rate limit, outage, network): the job retries later. */
export class SlackRetryLaterError extends Error {
  override readonly name = 'SlackRetryLaterError';
  readonly code = 'SLACK_RETRY_LATER';
  /** From Slack's `Retry-After`, when it sent one. */
  readonly retryAfterMs?: number;

  constructor(method: string, reason: string, options: { retryAfterMs?: number; cause?: unknown } = {}) {
    super(`${method}: ${reason}`, { cause: options.cause });
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** A report needs the request message, which is not posted yet: the job retries later. */
export class MessageNotPostedError extends Error {
  override readonly name = 'MessageNotPostedError';
  readonly code = 'MESSAGE_NOT_POSTED';
}

/** How a notify job ended, for metrics.jobs. */
export type NotifyOutcome =
  | 'posted'
  | 'updated'
  | 'replied'
  | 'duplicate'
  | 'expired'
  | 'skipped'
  | 'missing';

/**
 * Reports to Slack, one step each: post or sync the request message, post a thread reply at most once, expire a
 * pending request. Slack failures delay a report; they never repeat a cloud API call (this worker makes none).
 */
export class NotifyProcessor {
  constructor(private readonly deps: ExecutionDeps) {}

  private repliedKey(jobId: string): string {
    return `${this.deps.prefix}:replied:${jobId}`;
  }

  /** The BullMQ processor. */
  async process(job: Job<NotifyJob>, token?: string): Promise<NotifyOutcome> {
    const data = job.data;
    // A reply's "posted" record is looked up with the request, in the same round trip.
    const [request, replied] = await Promise.all([
      this.deps.store.get(data.requestId),
      data.type === 'report' || data.type === 'thread-reply'
        ? this.deps.connection.exists(this.repliedKey(replyId(data)))
        : 0,
    ]);
    if (!request) return 'missing';
    switch (data.type) {
      case 'post-request':
        return this.postRequest(request);
      case 'sync-message':
        if (!request.messageTs) return this.waitForMessage(request);
        await this.update(request, request.messageTs);
        return 'updated';
      case 'thread-reply':
        if (!request.messageTs) return this.waitForMessage(request);
        return this.threadReply(request, request.messageTs, data, replied > 0);
      case 'report':
        return this.report(request, data, replied > 0);
      case 'expire':
        return this.expire(job, request, token);
    }
  }

  /** Posts the request message once; when it is already posted (a retry after a crash), updates it instead. */
  private async postRequest(request: CloudRequest): Promise<NotifyOutcome> {
    if (request.messageTs) {
      await this.update(request, request.messageTs);
      return 'updated';
    }
    const message = this.deps.renderer.requestMessage(request);
    const result = await this.slackCall('chat.postMessage', (withBlocks) =>
      this.deps.slack.chat.postMessage({
        channel: request.channel,
        text: message.text,
        blocks: withBlocks ? message.blocks : undefined,
      }),
    );
    if (!result.ts) throw new SlackRetryLaterError('chat.postMessage', 'no ts in the answer');
    // The compare-and-set write returns the stored request: if its state moved while the post was under way
    // (more than this one write since), render it once more.
    const latest = await this.deps.store.update(request.id, { messageTs: result.ts });
    if (latest && latest.version !== request.version + 1) await this.update(latest, result.ts);
    return 'posted';
  }

  private async update(request: CloudRequest, ts: string): Promise<void> {
    const message = this.deps.renderer.requestMessage(request);
    await this.slackCall('chat.update', (withBlocks) =>
      this.deps.slack.chat.update({
        channel: request.channel,
        ts,
        text: message.text,
        blocks: withBlocks ? message.blocks : [],
      }),
    );
  }

  /**
   * Posts the event's reply in the request's thread once, then syncs the request message: one job for what used to
   * be a `thread-reply` and a `sync-message`. The reply goes first so a retry (after a rate limit) repeats only the
   * step that failed: the reply is skipped by its "posted" record. A message Slack refuses to update does not fail
   * the report.
   */
  private async report(
    request: CloudRequest,
    data: Extract<NotifyJob, { type: 'report' }>,
    alreadyReplied: boolean,
  ): Promise<NotifyOutcome> {
    if (!request.messageTs) return this.waitForMessage(request);
    const replied = await this.threadReply(request, request.messageTs, data, alreadyReplied);
    try {
      await this.update(request, request.messageTs);
    } catch (error) {
      if (!(error instanceof UnrecoverableError)) throw error;
      this.deps.logger.warn({ requestId: request.id }, 'request message not updated after its reply');
    }
    return replied;
  }

  /** Posts the reply in the request's thread unless its record (looked up by the caller) says it was posted. */
  private async threadReply(
    request: CloudRequest,
    thread_ts: string,
    reply: { requestId: string; event: ReplyEvent; step?: number },
    alreadyReplied: boolean,
  ): Promise<NotifyOutcome> {
    if (alreadyReplied) return 'duplicate';
    const key = this.repliedKey(replyId(reply));
    const message = this.deps.renderer.threadReply(request, reply.event, reply.step);
    const result = await this.slackCall('chat.postMessage', (withBlocks) =>
      this.deps.slack.chat.postMessage({
        channel: request.channel,
        thread_ts,
        text: message.text,
        blocks: withBlocks ? message.blocks : undefined,
      }),
    );
    await this.deps.connection.set(key, result.ts ?? 'posted', 'EX', REPLIED_TTL_S);
    return 'replied';
  }

  /** A pending request past `expiresAt` becomes expired; earlier, the job looks again later. */
  private async expire(job: Job<NotifyJob>, request: CloudRequest, token?: string): Promise<NotifyOutcome> {
    if (request.state !== 'pending') return 'skipped';
    const remaining = new Date(request.expiresAt).getTime() - this.deps.now().getTime();
    if (remaining > 0) {
      await job.moveToDelayed(Date.now() + Math.min(remaining, EXPIRE_RECHECK_MAX_MS), token);
      throw new DelayedError();
    }
    const expired = await this.deps.requests.expire(request, 'no decision before it expired');
    return expired.ok ? 'expired' : 'skipped';
  }

  /** Makes sure the request message gets posted, and retries this report after it. */
  private async waitForMessage(request: CloudRequest): Promise<never> {
    await enqueueNotify(this.deps.queues, { type: 'post-request', requestId: request.id });
    throw new MessageNotPostedError(`request ${request.id} has no message yet`);
  }

  /**
   * One Slack call; its failure is decided here: rate limits and outages retry later (with Slack's Retry-After),
   * a refusal such as `channel_not_found` is final; refused blocks are sent again as text alone. Every failure
   * is counted.
   */
  private async slackCall<T>(
    method: string,
    call: (withBlocks: boolean) => Promise<T>,
    withBlocks = true,
  ): Promise<T> {
    try {
      return await call(withBlocks);
    } catch (error) {
      const failure = slackFailure(error);
      if (!failure) throw error;
      const { label } = failure;
      this.deps.metrics.slackErrors.inc({ method, error: closedLabel(label, SLACK_ERROR_LABELS) });
      if (label === 'invalid_blocks' && withBlocks) {
        // Blocks Slack refuses must not cost the user the report: send its text alone.
        this.deps.logger.error({ method }, 'slack refused the blocks; sending the text alone');
        return this.slackCall(method, call, false);
      }
      if (failure.verdict === 'final') {
        this.deps.logger.error({ method, error: label }, 'slack refused a report');
        throw new UnrecoverableError(`${method}: ${label}`);
      }
      if (failure.retryAfterMs !== undefined) {
        throw new SlackRetryLaterError(method, 'rate limited', {
          retryAfterMs: failure.retryAfterMs,
          cause: error,
        });
      }
      throw new SlackRetryLaterError(method, label, { cause: error });
    }
  }
}
