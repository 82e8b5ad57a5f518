/**
 * Every way a call to the service can fail, as classes matched with `instanceof`.
 * The split follows one question: could the request have taken effect?
 * - {@link CloudRefusedError}: the service answered no (4xx). Final.
 * - {@link CloudInputError} (a CloudRefusedError): the client refused an argument before sending anything.
 * - {@link CloudRateLimitedError}: 429. Surely not applied; retry after `retryAfterMs`.
 * - {@link CloudUnavailableError}: not sent (connection refused, DNS) or 503. Surely not applied; retry.
 * - {@link CloudOutcomeUnknownError}: sent, and no trustworthy answer (timeout, reset, other 5xx). Never resend.
 * - {@link CloudProtocolError}: a 2xx whose body is not what the spec documents.
 * Messages carry the cleaned reason only: never a header, a key or a raw body.
 */
export abstract class CloudApiError extends Error {
  abstract readonly code: string;
  /** One clean sentence a user can read. */
  readonly reason: string;
  /** HTTP status, when an answer arrived. */
  readonly status?: number;
  /** The operation, e.g. 'resize'. */
  readonly operation: string;

  constructor(operation: string, reason: string, options: { status?: number; cause?: unknown } = {}) {
    super(`${operation}: ${reason}`, { cause: options.cause });
    this.operation = operation;
    this.reason = reason;
    this.status = options.status;
  }
}

export class CloudRefusedError extends CloudApiError {
  override readonly name: string = 'CloudRefusedError';
  readonly code: string = 'CLOUD_REFUSED';
  /** Per-field reasons when the body was a field list, e.g. `{ cores: ['…'] }`. */
  readonly fields: Record<string, string[]>;

  constructor(
    operation: string,
    reason: string,
    options: { status?: number; fields?: Record<string, string[]>; cause?: unknown },
  ) {
    super(operation, reason, options);
    this.fields = options.fields ?? {};
  }
}

/**
 * An argument the client refuses before sending anything (bad project UUID, vmid, backup slug or cluster
 * name). A refusal of our own: final, surely not applied, and `status` is undefined.
 */
export class CloudInputError extends CloudRefusedError {
  override readonly name: string = 'CloudInputError';
  override readonly code: string = 'CLOUD_INPUT';
  /** Which argument was refused, e.g. 'vmid'. */
  readonly field: string;

  constructor(operation: string, field: string, reason: string) {
    super(operation, reason, { fields: { [field]: [reason] } });
    this.field = field;
  }
}

export class CloudRateLimitedError extends CloudApiError {
  override readonly name = 'CloudRateLimitedError';
  readonly code = 'CLOUD_RATE_LIMITED';
  /** From `Retry-After` (seconds or HTTP date); undefined when the header was absent or unreadable. */
  readonly retryAfterMs?: number;

  constructor(operation: string, reason: string, options: { status: number; retryAfterMs?: number }) {
    super(operation, reason, options);
    this.retryAfterMs = options.retryAfterMs;
  }
}

export class CloudUnavailableError extends CloudApiError {
  override readonly name = 'CloudUnavailableError';
  readonly code = 'CLOUD_UNAVAILABLE';
  readonly retryAfterMs?: number;

  constructor(
    operation: string,
    reason: string,
    options: { status?: number; retryAfterMs?: number; cause?: unknown },
  ) {
    super(operation, reason, options);
    this.retryAfterMs = options.retryAfterMs;
  }
}

export class CloudOutcomeUnknownError extends CloudApiError {
  override readonly name = 'CloudOutcomeUnknownError';
  readonly code = 'CLOUD_OUTCOME_UNKNOWN';
}

export class CloudProtocolError extends CloudApiError {
  override readonly name = 'CloudProtocolError';
  readonly code = 'CLOUD_PROTOCOL';
}

/** Errors after which the same request may be sent again without risk of applying it twice. */
export function isSurelyNotApplied(error: unknown): error is CloudRateLimitedError | CloudUnavailableError {
  return error instanceof CloudRateLimitedError || error instanceof CloudUnavailableError;
}

/**
 * The client's reason as a clause for "could not be read (…)": no final stop, and without the tails that only matter
 * for changes ("nothing was applied", "so whether the call took effect is unknown"): a read changes nothing.
 */
export function cloudReason(error: unknown): string {
  if (!(error instanceof CloudApiError)) return 'unexpected error';
  const reason = error.reason
    .replace(/;?\s*nothing was (applied|sent)\.?$/i, '')
    .replace(/,?\s*so whether (the call|it) took effect is unknown\.?$/i, '')
    .replace(/\s+after the request was sent$/i, '')
    .replace(/[.\s]+$/, '');
  return reason.charAt(0).toLowerCase() + reason.slice(1);
}
