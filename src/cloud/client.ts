/**
 * The service's four documented operations over undici. Every failure is one of the classes of
 * `errors.ts`, chosen by one question: could the request have taken effect? The client never retries:
 * the job worker decides, once.
 */
import { type Dispatcher, request } from 'undici';
import type { z } from 'zod';
import { outboundDispatcher, type ProxyEnv } from '../config/outbound.ts';
import { inSpan } from '../observability/tracing.ts';
import {
  type CloudApiError,
  CloudInputError,
  CloudOutcomeUnknownError,
  CloudProtocolError,
  CloudRateLimitedError,
  CloudRefusedError,
  CloudUnavailableError,
} from './errors.ts';
import { clusterFromA, clusterFromB } from './normalise.ts';
import { clause, parseReason, sentence } from './reasons.ts';
import {
  clusterASchema,
  clusterBSchema,
  clusterListSchema,
  resizeResponseSchema,
  restoreResponseSchema,
} from './schemas.ts';
import type {
  CallOptions,
  CloudApi,
  Cluster,
  ResizeBody,
  ResizeResult,
  RestoreBody,
  RestoreResult,
} from './types.ts';

/** How long each phase of a call may take. */
export interface TimeoutPolicy {
  /** TCP (and TLS) connect; applies to the dispatcher the client creates itself. */
  connectMs: number;
  /** From sending the request to the response headers. */
  headersMs: number;
  /** Between two chunks of the response body. */
  bodyMs: number;
  /**
   * The whole call, from sending to the last byte of the answer, whatever the peer does byte by byte (docs/operations.md#deadlines).
   * Past it a call that was sent ends as outcome unknown.
   */
  totalMs: number;
}

/** A whole API call's deadline unless configured (`CLOUD_API_DEADLINE_MS`; docs/operations.md#deadlines). */
export const DEFAULT_CALL_DEADLINE_MS = 45_000;

/** Production: generous, since a resize may take the service a while to answer. */
export const DEFAULT_TIMEOUTS: TimeoutPolicy = Object.freeze({
  connectMs: 5_000,
  headersMs: 30_000,
  bodyMs: 30_000,
  totalMs: DEFAULT_CALL_DEADLINE_MS,
});

/** Tests against the local simulator: a hang is noticed within a second. */
export const FAST_TIMEOUTS: TimeoutPolicy = Object.freeze({
  connectMs: 500,
  headersMs: 800,
  bodyMs: 800,
  totalMs: 5_000,
});

/** The operations, as named in errors and metrics. */
export type CloudOperation = 'listClusters' | 'getCluster' | 'resize' | 'restore';

/** How a call ended, for metrics. */
export type CallOutcome = 'ok' | 'refused' | 'rate_limited' | 'unavailable' | 'unknown' | 'protocol';

/** One finished call, reported to `onCall` (metrics). Never carries a header or a body. */
export interface CallReport {
  operation: CloudOperation;
  status?: number;
  outcome: CallOutcome;
  durationMs: number;
}

export interface CloudApiClientOptions {
  /** e.g. `https://api.example.com`; a path prefix is kept. */
  baseUrl: string;
  /** Bearer key for get cluster, resize and restore; never sent to list clusters. */
  apiKey?: string;
  /** A keep-alive pool to use; when absent the client creates an `Agent` and closes it in `close()`. */
  dispatcher?: Dispatcher;
  /** The outbound proxy the client's own dispatcher goes through (docs/configuration.md#outbound-proxy). */
  proxy?: ProxyEnv;
  timeouts?: TimeoutPolicy;
  onCall?: (call: CallReport) => void;
  /** Clock for `Retry-After` dates. */
  now?: () => number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SEGMENT = /^[A-Za-z0-9._-]+$/;
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

/** One call's shape: its auth, response schema and body, and what its span may show. */
interface CallSpec<S extends z.ZodType> {
  auth: boolean;
  schema: S;
  body?: object;
  signal?: AbortSignal;
  /** The path as the span names it, typed segments as placeholders; the path itself when absent. */
  route?: string;
  /** Span attributes set only once the API answered 2xx: values the API has then confirmed to be real. */
  known?: Record<string, string>;
}

/** Implements {@link CloudApi} over undici; see the module comment for the error rules. */
export class CloudApiClient implements CloudApi {
  private readonly base: string;
  private readonly apiKey?: string;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly timeouts: TimeoutPolicy;
  private readonly onCall?: (call: CallReport) => void;
  private readonly now: () => number;
  /** Where the API is, for spans: host and port only (a URL could carry credentials). */
  private readonly host?: { hostname: string; port: number };

  constructor(options: CloudApiClientOptions) {
    this.base = options.baseUrl.replace(/\/+$/, '');
    const url = URL.canParse(this.base) ? new URL(this.base) : undefined;
    if (url)
      this.host = {
        hostname: url.hostname,
        port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
      };
    this.apiKey = options.apiKey;
    this.timeouts = options.timeouts ?? DEFAULT_TIMEOUTS;
    this.onCall = options.onCall;
    this.now = options.now ?? Date.now;
    this.ownsDispatcher = options.dispatcher === undefined;
    this.dispatcher =
      options.dispatcher ??
      outboundDispatcher(options.proxy ?? {}, {
        connect: { timeout: this.timeouts.connectMs },
        headersTimeout: this.timeouts.headersMs,
        bodyTimeout: this.timeouts.bodyMs,
        keepAliveTimeout: 4_000,
        connections: 16,
      });
  }

  async listClusters(options: CallOptions = {}): Promise<Cluster[]> {
    const list = await this.call('listClusters', 'GET', '/cloud/cluster/', {
      auth: false,
      schema: clusterListSchema,
      signal: options.signal,
    });
    return list.value.map(clusterFromB);
  }

  async getCluster(name: string, shape: 'A' | 'B' = 'B', options: CallOptions = {}): Promise<Cluster> {
    const segment = checkSegment('getCluster', 'cluster', name, 'a cluster name');
    // The name is whatever was typed after `/cloud cluster`: the span names the route, and the name only once the API
    // answered with that cluster (typed text that is no cluster, a pasted token say, is never exported).
    const known = { 'cloudops.cluster': name };
    if (shape === 'A') {
      const got = await this.call('getCluster', 'GET', `/api/cloud/cluster/${segment}/`, {
        auth: true,
        schema: clusterASchema,
        signal: options.signal,
        route: '/api/cloud/cluster/{name}/',
        known,
      });
      return clusterFromA(got.value);
    }
    const got = await this.call('getCluster', 'GET', `/cloud/cluster/${segment}/`, {
      auth: true,
      schema: clusterBSchema,
      signal: options.signal,
      route: '/cloud/cluster/{name}/',
      known,
    });
    return clusterFromB(got.value);
  }

  async resize(
    projectUuid: string,
    vmid: number,
    body: ResizeBody,
    options: CallOptions = {},
  ): Promise<ResizeResult> {
    const path = `${vmPath('resize', projectUuid, vmid)}/upgrade/`;
    const got = await this.call('resize', 'POST', path, {
      auth: true,
      body,
      schema: resizeResponseSchema,
      signal: options.signal,
    });
    return { message: got.value.message, status: got.status };
  }

  async restore(
    projectUuid: string,
    vmid: number,
    backupSlug: string,
    body: RestoreBody,
    options: CallOptions = {},
  ): Promise<RestoreResult> {
    const base = vmPath('restore', projectUuid, vmid);
    const slug = checkSegment('restore', 'backup', backupSlug, 'a backup slug');
    const got = await this.call('restore', 'POST', `${base}/backups/${slug}/restore/`, {
      auth: true,
      body,
      schema: restoreResponseSchema,
      signal: options.signal,
      route: `${base}/backups/{backup}/restore/`,
    });
    return { taskId: got.value.task_id, message: got.value.message, status: got.status };
  }

  /** Closes the dispatcher when the client created it; a passed-in one belongs to the caller. */
  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close();
  }

  private async call<S extends z.ZodType>(
    operation: CloudOperation,
    method: 'GET' | 'POST',
    path: string,
    options: CallSpec<S>,
  ): Promise<{ value: z.infer<S>; status: number }> {
    // The span names the method and the route (the path with the VM id, other segments as placeholders); headers (the
    // key) and bodies are never recorded.
    const route = options.route ?? path;
    return inSpan(
      `${method} ${route}`,
      {
        kind: 'client',
        attributes: {
          'http.request.method': method,
          'url.path': route,
          'server.address': this.host?.hostname,
          'server.port': this.host?.port,
          'cloudops.operation': operation,
        },
      },
      async (span) => {
        const started = performance.now();
        let status: number | undefined;
        try {
          const result = await this.send(operation, method, path, options, (s) => {
            status = s;
          });
          this.report(operation, started, 'ok', status);
          span.set({ ...options.known, 'http.response.status_code': status, 'cloudops.outcome': 'ok' });
          return result;
        } catch (error) {
          const outcome = outcomeOf(error);
          this.report(operation, started, outcome, status);
          span.set({ 'http.response.status_code': status, 'cloudops.outcome': outcome });
          throw error;
        }
      },
    );
  }

  private async send<S extends z.ZodType>(
    operation: CloudOperation,
    method: 'GET' | 'POST',
    path: string,
    options: CallSpec<S>,
    onStatus: (status: number) => void,
  ): Promise<{ value: z.infer<S>; status: number }> {
    if (!URL.canParse(this.base)) {
      throw new CloudUnavailableError(
        operation,
        'No valid API URL is configured (CLOUD_API_URL); nothing was sent.',
        {},
      );
    }
    if (options.auth && !this.apiKey) {
      throw new CloudInputError(
        operation,
        'apiKey',
        'No API key is configured (CLOUD_API_KEY); nothing was sent.',
      );
    }
    if (options.signal?.aborted) {
      throw new CloudUnavailableError(operation, 'The call was cancelled before it was sent.', {});
    }

    // One signal ends the call: the caller's (a shutdown abandoning it) or the whole call's deadline.
    const deadline = AbortSignal.timeout(this.timeouts.totalMs);
    const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (options.auth) headers.authorization = `Bearer ${this.apiKey}`;
    if (options.body !== undefined) headers['content-type'] = 'application/json';

    let response: Dispatcher.ResponseData;
    try {
      response = await request(`${this.base}${path}`, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        dispatcher: this.dispatcher,
        signal,
        headersTimeout: this.timeouts.headersMs,
        bodyTimeout: this.timeouts.bodyMs,
      });
    } catch (error) {
      throw this.transportError(operation, error, options.signal, deadline);
    }

    const status = response.statusCode;
    onStatus(status);
    const contentType = headerValue(response.headers['content-type']);
    let text: string;
    try {
      text = await response.body.text();
    } catch (error) {
      // The status line is trustworthy even when the body is cut off; only a cut-off success is unknown.
      if (status < 200 || status >= 300) text = '';
      else throw this.transportError(operation, error, options.signal, deadline, status);
    }

    if (status < 200 || status >= 300)
      throw this.statusError(operation, status, contentType, text, response.headers);

    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      throw new CloudProtocolError(
        operation,
        `The service answered HTTP ${status} with ${describeBody(contentType, text)} instead of the documented JSON.`,
        { status, cause: error },
      );
    }
    const parsed = options.schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue && issue.path.length > 0 ? ` at ${issue.path.join('.')}` : '';
      throw new CloudProtocolError(
        operation,
        sentence(
          `The service answered HTTP ${status} with JSON that is not the documented ${operation} answer${where}: ${issue?.message ?? 'unexpected shape'}`,
          [this.apiKey],
        ),
        { status, cause: parsed.error },
      );
    }
    return { value: parsed.data, status };
  }

  /** Classifies an answer that is not a 2xx. */
  private statusError(
    operation: CloudOperation,
    status: number,
    contentType: string | undefined,
    text: string,
    headers: Dispatcher.ResponseData['headers'],
  ): CloudApiError {
    const secrets = [this.apiKey];
    const parsed = parseReason(status, contentType, text, { secrets });
    const body = parsed.readable ? clause(parsed.reason) : undefined;
    if (status === 429) {
      const retryAfterMs = parseRetryAfter(headerValue(headers['retry-after']), this.now());
      return new CloudRateLimitedError(
        operation,
        `The service is limiting the rate of calls (HTTP 429)${retryText(retryAfterMs)}; nothing was applied.`,
        { status, retryAfterMs },
      );
    }
    if (status === 503) {
      const retryAfterMs = parseRetryAfter(headerValue(headers['retry-after']), this.now());
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
  private transportError(
    operation: CloudOperation,
    error: unknown,
    signal: AbortSignal | undefined,
    deadline: AbortSignal,
    status?: number,
  ): CloudApiError {
    const codes = errorCodes(error);
    const notSent = codes.find((code) => NOT_SENT_CODES.has(code));
    if (notSent && status === undefined) {
      const what =
        notSent === 'UND_ERR_CONNECT_TIMEOUT'
          ? `did not accept a connection within ${this.timeouts.connectMs} ms`
          : notSent.startsWith('EAI') || notSent === 'ENOTFOUND'
            ? `host could not be resolved (${notSent})`
            : `could not be reached (${notSent})`;
      return new CloudUnavailableError(operation, `The service ${what}; nothing was sent.`, { cause: error });
    }
    if (deadline.aborted && !signal?.aborted) {
      return new CloudOutcomeUnknownError(
        operation,
        `The service had not finished answering ${seconds(this.timeouts.totalMs)} after the request was sent (the deadline of a whole call), so whether it took effect is unknown.`,
        { status, cause: error },
      );
    }
    const answered = status === undefined ? '' : ` after answering HTTP ${status}`;
    let what: string;
    if (signal?.aborted) what = 'The call was cancelled while in flight';
    else if (codes.includes('UND_ERR_HEADERS_TIMEOUT'))
      what = `The service did not answer within ${this.timeouts.headersMs} ms`;
    else if (codes.includes('UND_ERR_BODY_TIMEOUT'))
      what = `The service stopped sending its answer for ${this.timeouts.bodyMs} ms${answered}`;
    else if (codes.includes('UND_ERR_SOCKET') || codes.includes('ECONNRESET') || codes.includes('EPIPE'))
      what = `The connection was dropped${answered}`;
    else what = `The call failed${answered} (${codes[0] ?? 'unknown error'})`;
    return new CloudOutcomeUnknownError(
      operation,
      `${what} after the request was sent, so whether it took effect is unknown.`,
      { status, cause: error },
    );
  }

  private report(operation: CloudOperation, started: number, outcome: CallOutcome, status?: number): void {
    this.onCall?.({ operation, status, outcome, durationMs: performance.now() - started });
  }
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

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function describeBody(contentType: string | undefined, text: string): string {
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

function outcomeOf(error: unknown): CallOutcome {
  if (error instanceof CloudRateLimitedError) return 'rate_limited';
  if (error instanceof CloudUnavailableError) return 'unavailable';
  if (error instanceof CloudRefusedError) return 'refused';
  if (error instanceof CloudProtocolError) return 'protocol';
  return 'unknown';
}

function checkSegment(operation: CloudOperation, field: string, value: unknown, what: string): string {
  if (typeof value !== 'string' || !SEGMENT.test(value) || value === '.' || value === '..') {
    throw new CloudInputError(
      operation,
      field,
      `${capitalise(what)} may hold only letters, digits, ".", "_" and "-"; nothing was sent.`,
    );
  }
  return encodeURIComponent(value);
}

function vmPath(operation: CloudOperation, projectUuid: unknown, vmid: unknown): string {
  if (typeof projectUuid !== 'string' || !UUID.test(projectUuid)) {
    throw new CloudInputError(operation, 'project', 'The project id must be a UUID; nothing was sent.');
  }
  if (typeof vmid !== 'number' || !Number.isSafeInteger(vmid) || vmid < 1) {
    throw new CloudInputError(
      operation,
      'vmid',
      'The VM id must be a positive whole number; nothing was sent.',
    );
  }
  return `/cloud/project/${encodeURIComponent(projectUuid)}/vm/${encodeURIComponent(String(vmid))}`;
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
