/** How a notify job's Slack call failed, as the job's retries read it. */
import { UnrecoverableError } from 'bullmq';

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

/** Slack refused a call for good (`not_in_channel`, `channel_not_found`, …): retrying will not change it. */
export class SlackRefusedError extends UnrecoverableError {
  override readonly name = 'SlackRefusedError';
  readonly code = 'SLACK_REFUSED';

  constructor(
    method: string,
    /** Slack's error code, e.g. `not_in_channel`. */
    readonly error: string,
  ) {
    super(`${method}: ${error}`);
  }
}

/** A report needs the request message, which is not posted yet: the job retries later. */
export class MessageNotPostedError extends Error {
  override readonly name = 'MessageNotPostedError';
  readonly code = 'MESSAGE_NOT_POSTED';
}
