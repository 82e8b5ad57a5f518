import type { Dispatcher } from 'undici';
import { proxyRefusal, proxyRefusalText } from '../config/outbound.ts';
import type { CallOutcome, CloudOperation, TimeoutPolicy } from './calls.ts';
import {
  type CloudApiError,
  CloudOutcomeUnknownError,
  CloudProtocolError,
  CloudRateLimitedError,
  CloudRefusedError,
  CloudUnavailableError,
} from './errors.ts';
import { clause, parseReason, sentence } from './reasons.ts';

// Which class of errors.ts a failed call is, by one question: could the request have taken effect? Transport
// failures are told apart by their error code, never by their message.

/** Transport error codes that mean the request never left this machine. */
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NONAME',
  'UND_ERR_CONNECT_TIMEOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
]);

/** Classifies an answer that is not a 2xx. */
export function statusError(
  operation: CloudOperation,
  status: number,
  contentType: string | undefined,
  text: string,
  headers: Dispatcher.ResponseData['headers'],
  client: { apiKey?: string; now: () => number },
): CloudApiError {
  const secrets = [client.apiKey];
  const parsed = parseReason(status, contentType, text, { secrets });
  const body = parsed.readable ? clause(parsed.reason) : undefined;
  if (status === 429) {
    const retryAfterMs = parseRetryAfter(headerValue(headers['retry-after']), client.now());
    return new CloudRateLimitedError(
      operation,
      `The service is limiting the rate of calls (HTTP 429)${retryText(retryAfterMs)}; nothing was applied.`,
      { status, retryAfterMs },
    );
  }
  if (status === 503) {
    const retryAfterMs = parseRetryAfter(headerValue(headers['retry-after']), client.now());
    return new CloudUnavailableError(
      operation,
      `The service is unavailable (HTTP 503)${retryText(retryAfterMs)}; nothing was applied.`,
      { status, retryAfterMs },
    );
  }
  if (status === 401 || status === 403) {
    const why = body ? `: ${body}` : '';
    return new CloudRefusedError(
      operation,
      sentence(`The API key was refused (HTTP ${status})${why}`, secrets),
      {
        status,
        fields: parsed.fields,
      },
    );
  }
  if (status >= 400 && status < 500) {
    return new CloudRefusedError(operation, parsed.reason, { status, fields: parsed.fields });
  }
  if (status >= 500) {
    const why = body ? ` (${body})` : '';
    return new CloudOutcomeUnknownError(
      operation,
      sentence(
        `The service failed with HTTP ${status}${why}, so whether the call took effect is unknown`,
        secrets,
      ),
      { status },
    );
  }
  return new CloudProtocolError(
    operation,
    `The service answered HTTP ${status}, which the client does not follow, so whether the call took effect is unknown.`,
    { status },
  );
}

/** Classifies a failure without a (complete) answer, on the error code, never on the message. */
export function transportError(
  operation: CloudOperation,
  error: unknown,
  signal: AbortSignal | undefined,
  deadline: AbortSignal,
  timeouts: TimeoutPolicy,
  status?: number,
): CloudApiError {
  const codes = errorCodes(error);
  const refused = proxyRefusal(error);
  if (refused !== undefined && status === undefined)
    return new CloudUnavailableError(
      operation,
      `The service could not be reached: ${proxyRefusalText(refused)}; nothing was sent.`,
      {
        cause: error,
      },
    );
  const notSent = codes.find((code) => NOT_SENT_CODES.has(code));
  if (notSent && status === undefined) {
    const what =
      notSent === 'UND_ERR_CONNECT_TIMEOUT'
        ? `did not accept a connection within ${timeouts.connectMs} ms`
        : notSent.startsWith('EAI') || notSent === 'ENOTFOUND'
          ? `host could not be resolved (${notSent})`
          : `could not be reached (${notSent})`;
    return new CloudUnavailableError(operation, `The service ${what}; nothing was sent.`, { cause: error });
  }
  if (deadline.aborted && !signal?.aborted) {
    return new CloudOutcomeUnknownError(
      operation,
      `The service had not finished answering ${seconds(timeouts.totalMs)} after the request was sent (the deadline of a whole call), so whether it took effect is unknown.`,
      { status, cause: error },
    );
  }
  const answered = status === undefined ? '' : ` after answering HTTP ${status}`;
  let what: string;
  if (signal?.aborted) what = 'The call was cancelled while in flight';
  else if (codes.includes('UND_ERR_HEADERS_TIMEOUT'))
    what = `The service did not answer within ${timeouts.headersMs} ms`;
  else if (codes.includes('UND_ERR_BODY_TIMEOUT'))
    what = `The service stopped sending its answer for ${timeouts.bodyMs} ms${answered}`;
  else if (codes.includes('UND_ERR_SOCKET') || codes.includes('ECONNRESET') || codes.includes('EPIPE'))
    what = `The connection was dropped${answered}`;
  else what = `The call failed${answered} (${codes[0] ?? 'unknown error'})`;
  return new CloudOutcomeUnknownError(
    operation,
    `${what} after the request was sent, so whether it took effect is unknown.`,
    { status, cause: error },
  );
}

/**
 * `Retry-After` as milliseconds from now: delta-seconds or an HTTP date. Undefined when absent or unreadable;
 * a date in the past gives 0.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  if (Number.isNaN(at) || !/[a-z]/i.test(text)) return undefined;
  return Math.max(0, at - nowMs);
}

/** `45 s`, or `1.2 s` below ten seconds. */
function seconds(ms: number): string {
  return ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${Number((ms / 1000).toFixed(1))} s`;
}

function retryText(retryAfterMs: number | undefined): string {
  if (retryAfterMs === undefined) return '';
  return `; retry after ${Math.ceil(retryAfterMs / 1000)} s`;
}

export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

export function describeBody(contentType: string | undefined, text: string): string {
  if (text.trim() === '') return 'an empty body';
  if (/html/i.test(contentType ?? '') || /^\s*</.test(text)) return 'an HTML page';
  return `a body of type ${(contentType ?? 'unknown').split(';')[0]}`;
}

/** Every `code` on the error, its causes and an AggregateError's members (Node's happy eyeballs). */
function errorCodes(error: unknown, depth = 0): string[] {
  if (depth > 5 || typeof error !== 'object' || error === null) return [];
  const codes: string[] = [];
  const { code, cause, errors } = error as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof code === 'string') codes.push(code);
  codes.push(...errorCodes(cause, depth + 1));
  if (Array.isArray(errors)) for (const inner of errors) codes.push(...errorCodes(inner, depth + 1));
  return codes;
}

export function outcomeOf(error: unknown): CallOutcome {
  if (error instanceof CloudRateLimitedError) return 'rate_limited';
  if (error instanceof CloudUnavailableError) return 'unavailable';
  if (error instanceof CloudRefusedError) return 'refused';
  if (error instanceof CloudProtocolError) return 'protocol';
  return 'unknown';
}
