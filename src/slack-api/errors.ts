/**
 * Why a Slack Web API call failed, as classes matched with `instanceof` (the Web API SDK's errors.ts is the model).
 * Messages carry Slack's error code or the HTTP status, never the token or what was sent.
 */
export class SlackApiError extends Error {
  override readonly name: string = 'SlackApiError';
  constructor(
    readonly method: string,
    /** A short code for metrics and logs: Slack's `error`, `http_<status>`, `ratelimited` or a network code. */
    readonly code: string,
    options?: { cause?: unknown },
  ) {
    super(`${method}: ${code}`, options);
  }
}

/** Slack answered `ok: false` with this `error` (`channel_not_found`, `invalid_blocks`, `internal_error`, …). */
export class SlackPlatformError extends SlackApiError {
  override readonly name = 'SlackPlatformError';
  constructor(
    method: string,
    readonly error: string,
    /** The rest of Slack's answer (`response_metadata.messages` for `invalid_blocks`, …). */
    readonly data: Record<string, unknown>,
  ) {
    super(method, error);
  }
}

/** HTTP 429: wait `retryAfterMs` (Slack's `Retry-After`) before calling this method again. */
export class SlackRateLimitedError extends SlackApiError {
  override readonly name = 'SlackRateLimitedError';
  constructor(
    method: string,
    readonly retryAfterMs: number,
  ) {
    super(method, 'ratelimited');
  }
}

/** An HTTP status other than 200 and 429 (Slack's edge or a proxy in front of it). */
export class SlackHttpError extends SlackApiError {
  override readonly name = 'SlackHttpError';
  constructor(
    method: string,
    readonly status: number,
  ) {
    super(method, `http_${status}`);
  }
}

/** No answer: refused or dropped connection, timeout, a body that is not JSON. `sent` says whether it may have arrived. */
export class SlackRequestError extends SlackApiError {
  override readonly name = 'SlackRequestError';
  constructor(
    method: string,
    code: string,
    /** False only when the request surely never left (connection refused, name not found). */
    readonly mayHaveArrived: boolean,
    options?: { cause?: unknown },
  ) {
    super(method, code, options);
  }
}

/** Slack's `error` codes that mean the token itself is refused: no retry or restart will help. */
export const TOKEN_REFUSED = new Set([
  'invalid_auth',
  'not_authed',
  'account_inactive',
  'token_revoked',
  'token_expired',
  'team_disabled',
  'ekm_access_denied',
]);
