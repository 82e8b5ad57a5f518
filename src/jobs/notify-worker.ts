import { DelayedError, type Job, UnrecoverableError } from 'bullmq';
import { slackOutageLog } from '../observability/connection-log.ts';
import { closedLabel, SLACK_ERROR_LABELS } from '../observability/metrics.ts';
import { cancelUndeliverable } from '../requests/lifecycle/run-moves.ts';
import type { CloudRequest, ReplyEvent } from '../requests/model/types.ts';
import type { ExecutionDeps } from './deps.ts';
import { carries, findPosted, REPLY_EVENT_TYPE, REQUEST_EVENT_TYPE } from './posted-lookup.ts';
import { cancelExecution, enqueueNotify, type NotifyJob, removeExpireJob, replyId } from './queues.ts';
import {
  MessageNotPostedError,
  SlackRefusedError,
  SlackRetryLaterError,
  surelyNotPosted,
} from './slack-errors.ts';
import { slackFailure } from './slack-failure.ts';
import { noteOnTicket } from './ticket-gate.ts';

/** A pending request's expiry is re-checked at least this often, so a moved clock (tests, demo) is noticed. */
const EXPIRE_RECHECK_MAX_MS = 60_000;
/** "Posted" records for thread replies outlive every retry of their job (40 attempts of at most 15 min: hours). */
export const REPLIED_TTL_S = 3 * 24 * 3600;
export { MessageNotPostedError, SlackRefusedError, SlackRetryLaterError } from './slack-errors.ts';

/** How a notify job ended, for metrics.jobs. */
export type NotifyOutcome =
  | 'posted'
  | 'undeliverable'
  | 'updated'
  | 'replied'
  | 'duplicate'
  | 'adopted'
  | 'expired'
  | 'skipped'
  | 'noted'
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

  /** Set before a reply is posted: a retry that finds it but no posted record looks for the reply in Slack first. */
  private sendingKey(replyKey: string): string {
    return `${this.deps.prefix}:reply-sending:${replyKey}`;
  }

  /** The connection of the reply records (see {@link ExecutionDeps.records}). */
  private get records() {
    return this.deps.records ?? this.deps.connection;
  }

  /** Set when Slack refused a request's message for good: its reports then go to the requester directly. */
  private refusedKey(requestId: string): string {
    return `${this.deps.prefix}:message-refused:${requestId}`;
  }

  /** The BullMQ processor. */
  async process(job: Job<NotifyJob>, token?: string): Promise<NotifyOutcome> {
    const data = job.data;
    if (data.type === 'dm') return this.directMessage(data);
    // A reply's "posted" record is looked up with the request, in the same round trip.
    const [request, replied] = await Promise.all([
      this.deps.store.get(data.requestId),
      data.type === 'report' || data.type === 'thread-reply'
        ? this.records.exists(this.repliedKey(replyId(data)))
        : 0,
    ]);
    if (!request) return 'missing';
    // Every change of a request reaches this worker as a report of it (the expire job's waiting rounds are none). The
    // follow-ups run beside the report, so their Redis writes share its round trips; they never fail it.
    const followUp =
      data.type === 'expire' || data.type === 'ticket-note' ? undefined : this.followUp(request);
    try {
      return await this.handle(job, request, replied > 0, token);
    } finally {
      await followUp;
    }
  }

  private async handle(
    job: Job<NotifyJob>,
    request: CloudRequest,
    replied: boolean,
    token?: string,
  ): Promise<NotifyOutcome> {
    const data = job.data;
    switch (data.type) {
      case 'post-request':
        return this.postRequest(request);
      case 'sync-message':
        if (!request.messageTs) return this.waitForMessage(request);
        await this.update(request, request.messageTs);
        return 'updated';
      case 'thread-reply':
        if (!request.messageTs) return this.withoutMessage(request, data, replied);
        return this.threadReply(
          request,
          { channel: request.channel, thread_ts: request.messageTs },
          data,
          replied,
        );
      case 'report':
        return this.report(request, data, replied);
      case 'expire':
        return this.expire(job, request, token);
      case 'dm':
        return this.directMessage(data);
      case 'ticket-note':
        return (await noteOnTicket(this.deps, request)) === 'noted' ? 'noted' : 'skipped';
    }
  }

  /** A direct message about no request: retried as every report is, until Slack takes it or refuses it for good. */
  private async directMessage(data: Extract<NotifyJob, { type: 'dm' }>): Promise<NotifyOutcome> {
    await this.slackCall('chat.postMessage', () =>
      this.deps.slack.chat.postMessage({ channel: data.user, text: data.text }),
    );
    return 'posted';
  }

  /** Tells the other surfaces about the change; their failure never holds up the report. */
  private async followUp(request: CloudRequest): Promise<void> {
    try {
      await this.deps.followUps?.changed(request);
    } catch (error) {
      this.deps.logger.warn({ err: error, requestId: request.id }, 'a follow-up of a change failed');
    }
  }

  /** Posts the request message once; when it is already posted (a retry after a crash), updates it instead. */
  private async postRequest(request: CloudRequest): Promise<NotifyOutcome> {
    if (request.messageTs) {
      await this.update(request, request.messageTs);
      return 'updated';
    }
    // With Sentinels: post only from a master whose replica knows the message is not posted yet.
    await this.deps.replicaAck?.confirm();
    // A post that started before (its answer lost or late, or the process gone) may be in the channel: adopted.
    const first = await this.records.set(
      this.sendingKey(`message:${request.id}`),
      '1',
      'EX',
      REPLIED_TTL_S,
      'NX',
    );
    const found = first === 'OK' ? undefined : await this.findRequestMessage(request);
    if (found) {
      await this.keepMessageTs(request, found, true);
      return 'adopted';
    }
    const message = this.deps.renderer.requestMessage(request);
    let result: Awaited<ReturnType<typeof this.deps.slack.chat.postMessage>>;
    try {
      result = await this.slackCall('chat.postMessage', (withBlocks) =>
        this.deps.slack.chat.postMessage({
          channel: request.channel,
          text: message.text,
          blocks: withBlocks ? message.blocks : undefined,
          metadata: { event_type: REQUEST_EVENT_TYPE, event_payload: { request_id: request.id } },
        }),
      );
    } catch (error) {
      if (error instanceof SlackRefusedError) return this.messageRefused(request, error.error);
      // Slack answered without posting (a 429, a 503, an error): the retry posts without looking first.
      if (surelyNotPosted(error)) await this.records.del(this.sendingKey(`message:${request.id}`));
      throw error;
    }
    if (!result.ts) throw new SlackRetryLaterError('chat.postMessage', 'no ts in the answer');
    await this.keepMessageTs(request, result.ts, false);
    return 'posted';
  }

  /**
   * Stores the message's ts on the request; the message is rendered once more when the request moved since `request`
   * was read (more than this one write), or always (`stale`: an adopted copy shows what its first post showed).
   */
  private async keepMessageTs(request: CloudRequest, ts: string, stale: boolean): Promise<void> {
    const write = () => this.deps.store.update(request.id, { messageTs: ts }, request);
    // Kept until a replica has it (the same value again is harmless): a lost messageTs would post a second message.
    const latest = await (this.deps.replicaAck?.durably(write) ?? write());
    if (latest && (stale || latest.version !== request.version + 1)) await this.update(latest, ts);
  }

  /**
   * The ts of the request's message in its channel, posted by an earlier try whose answer never came (read with
   * conversations.history since the request was made, by the message's metadata). Without the history scope, or
   * when Slack refuses the read, undefined: the message is posted, and may repeat.
   */
  private async findRequestMessage(request: CloudRequest): Promise<string | undefined> {
    // A minute before the request was made: the bot's clock and Slack's may differ a little.
    const oldest = String(Math.floor(new Date(request.createdAt).getTime() / 1000) - 60);
    try {
      return await findPosted(
        (cursor) =>
          this.slackCall('conversations.history', () =>
            this.deps.slack.conversations.history({
              channel: request.channel,
              oldest,
              cursor,
              limit: 200,
              include_all_metadata: true,
            }),
          ),
        (m) => carries(m, REQUEST_EVENT_TYPE, 'request_id', request.id),
      );
    } catch (error) {
      if (!(error instanceof SlackRefusedError)) throw error;
      this.deps.logger.warn(
        { requestId: request.id, error: error.error },
        error.error === 'missing_scope'
          ? 'cannot read the channel (the app lacks channels:history / groups:history): a request message interrupted by a lost answer may repeat'
          : 'cannot read the channel; posting the request message, which may repeat',
      );
      return undefined;
    }
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
   * Slack refused the request message for good (the bot not in the channel, an archived or unknown channel): a
   * request nobody can see is cancelled unless it already runs, and the requester is told why and what to do, in a
   * direct message. The request's later reports go there too.
   */
  private async messageRefused(request: CloudRequest, error: string): Promise<NotifyOutcome> {
    const { store, queues, slack, logger, metrics } = this.deps;
    await this.records.set(this.refusedKey(request.id), error, 'EX', REPLIED_TTL_S);
    const cancelled = await cancelUndeliverable(store, request, error);
    if (cancelled.ok) {
      metrics.requests.inc({ kind: request.kind, state: 'cancelled' });
      // A run that already started is stopped by the store's state check.
      await Promise.all([
        cancelExecution(queues, request.id).catch(() => undefined),
        removeExpireJob(queues, request.id),
      ]);
    }
    logger.warn(
      { requestId: request.id, error, cancelled: cancelled.ok },
      'request message refused by slack',
    );
    const latest = cancelled.ok ? cancelled.request : ((await store.get(request.id)) ?? request);
    const notice = this.deps.renderer.messageRefused(latest, error);
    await this.slackCall('chat.postMessage', () =>
      slack.chat.postMessage({ channel: request.requester, text: notice.text }),
    );
    return 'undeliverable';
  }

  /**
   * A reply for a request without a message: to the requester directly when Slack refused the message, else after
   * the message is posted.
   */
  private async withoutMessage(
    request: CloudRequest,
    reply: { requestId: string; event: ReplyEvent; step?: number },
    alreadyReplied: boolean,
  ): Promise<NotifyOutcome> {
    if (!(await this.records.exists(this.refusedKey(request.id)))) return this.waitForMessage(request);
    return this.threadReply(request, { channel: request.requester }, reply, alreadyReplied);
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
    if (!request.messageTs) return this.withoutMessage(request, data, alreadyReplied);
    const messageTs = request.messageTs;
    const thread = { channel: request.channel, thread_ts: messageTs };
    // The message is synced beside the reply's "posted" record, not after it: neither waits for the other.
    return this.threadReply(request, thread, data, alreadyReplied, async () => {
      try {
        await this.update(request, messageTs);
      } catch (error) {
        if (!(error instanceof UnrecoverableError)) throw error;
        this.deps.logger.warn({ requestId: request.id }, 'request message not updated after its reply');
      }
    });
  }

  /**
   * Posts the reply in `where` (the request's thread) unless its record (looked up by the caller) says it was posted.
   * A reply whose send started but was never recorded (the process died in between) is looked for in the thread by
   * its metadata and adopted when Slack has it, so a crash does not post it twice. `alongside` runs once the reply is
   * in Slack, beside the write of its record (a retry after `alongside` failed finds the record and skips the post).
   */
  private async threadReply(
    request: CloudRequest,
    where: { channel: string; thread_ts?: string },
    reply: { requestId: string; event: ReplyEvent; step?: number },
    alreadyReplied: boolean,
    alongside: () => Promise<void> = async () => undefined,
  ): Promise<NotifyOutcome> {
    if (alreadyReplied) {
      await alongside();
      return 'duplicate';
    }
    const id = replyId(reply);
    const key = this.repliedKey(id);
    // Kept until a replica has it: after a failover the record lands on the new master, so no retry posts again.
    const record = (ts: string) => {
      const write = () => this.records.set(key, ts, 'EX', REPLIED_TTL_S);
      return this.deps.replicaAck?.durably(write) ?? write();
    };
    // With Sentinels: post only from a master whose replica has this job's state (no record yet), never from an old
    // master that a failover left behind, whose writes are about to be dropped.
    await this.deps.replicaAck?.confirm();
    const first = await this.records.set(this.sendingKey(id), '1', 'EX', REPLIED_TTL_S, 'NX');
    if (first !== 'OK' && where.thread_ts) {
      const found = await this.findReply(request, where.channel, where.thread_ts, id);
      if (found) {
        await Promise.all([record(found), alongside()]);
        return 'adopted';
      }
    }
    const message = this.deps.renderer.threadReply(request, reply.event, reply.step);
    const result = await this.slackCall('chat.postMessage', (withBlocks) =>
      this.deps.slack.chat.postMessage({
        ...where,
        text: message.text,
        blocks: withBlocks ? message.blocks : undefined,
        metadata: { event_type: REPLY_EVENT_TYPE, event_payload: { reply_id: id } },
      }),
    );
    await Promise.all([record(result.ts ?? 'posted'), alongside()]);
    return 'replied';
  }

  /**
   * The ts of the reply `id` in the thread, when Slack has it (read with conversations.replies and the reply's
   * metadata). Without the history scope (`missing_scope`) or the thread, undefined: the reply is posted, and may
   * repeat.
   */
  private async findReply(
    request: CloudRequest,
    channel: string,
    ts: string,
    id: string,
  ): Promise<string | undefined> {
    try {
      return await findPosted(
        (cursor) =>
          this.slackCall('conversations.replies', () =>
            this.deps.slack.conversations.replies({
              channel,
              ts,
              cursor,
              limit: 200,
              include_all_metadata: true,
            }),
          ),
        (m) => carries(m, REPLY_EVENT_TYPE, 'reply_id', id),
      );
    } catch (error) {
      if (!(error instanceof SlackRefusedError)) throw error;
      this.deps.logger.warn(
        { requestId: request.id, error: error.error },
        error.error === 'missing_scope'
          ? 'cannot read the thread (the app lacks channels:history / groups:history): a reply interrupted by a crash may repeat'
          : 'cannot read the thread; posting the reply, which may repeat',
      );
      return undefined;
    }
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
    const outage = slackOutageLog(this.deps.logger);
    let result: T;
    try {
      result = await call(withBlocks);
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
        throw new SlackRefusedError(method, label);
      }
      if (failure.retryAfterMs !== undefined) {
        throw new SlackRetryLaterError(method, 'rate limited', {
          retryAfterMs: failure.retryAfterMs,
          cause: error,
        });
      }
      outage.failure({ method, error: label });
      throw new SlackRetryLaterError(method, label, { cause: error });
    }
    outage.recovered();
    return result;
  }
}
