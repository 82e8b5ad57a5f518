/** How a notify job's Slack call failed, as the job's retries read it. */
import { UnrecoverableError } from 'bullmq';
import {
  SlackHttpError,
  SlackPlatformError,
  SlackRateLimitedError,
  SlackRequestError,
} from '../slack-api/errors.ts';

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

/**
 * Whether a failed post surely made no message: Slack answered it with an error, a rate limit or a 503 (a gateway's
 * 500, 502 or 504 may come after Slack took it), or the request never left (connection refused, name not found).
 */
export function surelyNotPosted(error: unknown): boolean {
  const cause = error instanceof SlackRetryLaterError ? error.cause : error;
  if (cause instanceof SlackPlatformError || cause instanceof SlackRateLimitedError) return true;
  if (cause instanceof SlackHttpError) return cause.status < 500 || cause.status === 503;
  return cause instanceof SlackRequestError && !cause.mayHaveArrived;
}
