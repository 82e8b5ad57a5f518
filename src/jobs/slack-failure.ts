import {
  SlackApiError,
  SlackHttpError,
  SlackPlatformError,
  SlackRateLimitedError,
} from '../slack-api/errors.ts';

/** Slack platform errors that say "try again later" rather than "this will never work". */
const TRANSIENT_PLATFORM_ERRORS = new Set([
  'internal_error',
  'fatal_error',
  'service_unavailable',
  'request_timeout',
  'ratelimited',
]);

/**
 * What a worker does with a failed Slack call, decided once for every worker (notify, digest):
 * `retry` a rate limit (after `retryAfterMs`), an outage or a network failure; `final` a refusal that retrying
 * will not change (`channel_not_found`, `not_in_channel`, `invalid_blocks`, …). `label` names the failure for
 * metrics and logs: Slack's error code, never message text.
 */
export type SlackFailure =
  | { verdict: 'retry'; label: string; retryAfterMs?: number }
  | { verdict: 'final'; label: string };

/** The verdict on an error thrown by a Slack Web API call, or undefined when it is not a Slack error at all. */
export function slackFailure(error: unknown): SlackFailure | undefined {
  if (!(error instanceof SlackApiError)) return undefined;
  if (error instanceof SlackRateLimitedError)
    return { verdict: 'retry', label: error.code, retryAfterMs: error.retryAfterMs };
  if (error instanceof SlackPlatformError)
    return { verdict: TRANSIENT_PLATFORM_ERRORS.has(error.error) ? 'retry' : 'final', label: error.error };
  // A 4xx other than 429 will not change by itself (a wrong URL, a proxy refusing); 5xx and no answer will.
  if (error instanceof SlackHttpError && error.status < 500) return { verdict: 'final', label: error.code };
  return { verdict: 'retry', label: error.code };
}
