import { ErrorCode, type WebAPICallError } from '@slack/web-api';

/** Slack platform errors that say "try again later" rather than "this will never work". */
const TRANSIENT_PLATFORM_ERRORS = new Set([
  'internal_error',
  'fatal_error',
  'service_unavailable',
  'request_timeout',
  'ratelimited',
]);

/** Used when Slack says 429 without a usable Retry-After. */
export const DEFAULT_RETRY_AFTER_MS = 5_000;

/**
 * What a worker does with a failed Slack call, decided once for every worker (notify, digest):
 * `retry` a rate limit (after `retryAfterMs`), an outage or a network failure; `final` a refusal that retrying
 * will not change (`channel_not_found`, `not_in_channel`, `invalid_blocks`, …). `label` names the failure for
 * metrics and logs: Slack's error code, never message text.
 */
export type SlackFailure =
  | { verdict: 'retry'; label: string; retryAfterMs?: number }
  | { verdict: 'final'; label: string };

function isSlackError(error: unknown): error is WebAPICallError {
  return (
    error instanceof Error &&
    'code' in error &&
    Object.values(ErrorCode).includes((error as { code: unknown }).code as ErrorCode)
  );
}

/** The verdict on an error thrown by a Slack Web API call, or undefined when it is not a Slack error at all. */
export function slackFailure(error: unknown): SlackFailure | undefined {
  if (!isSlackError(error)) return undefined;
  if (error.code === ErrorCode.RateLimitedError) {
    const seconds = error.retryAfter;
    return {
      verdict: 'retry',
      label: error.code,
      retryAfterMs: typeof seconds === 'number' && seconds > 0 ? seconds * 1000 : DEFAULT_RETRY_AFTER_MS,
    };
  }
  if (error.code === ErrorCode.PlatformError) {
    const label = error.data.error;
    return { verdict: TRANSIENT_PLATFORM_ERRORS.has(label) ? 'retry' : 'final', label };
  }
  // Request and HTTP errors: the call did not get an answer from Slack (network, 5xx).
  return { verdict: 'retry', label: error.code };
}
