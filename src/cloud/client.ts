/**
 * The service's four documented operations over undici. Every failure is one of the classes of
 * `errors.ts`, chosen by one question: could the request have taken effect? The client never retries:
 * the job worker decides, once.
 */
import { type Dispatcher, request } from 'undici';
import type { z } from 'zod';
import { outboundDispatcher, type ProxyEnv } from '../config/outbound.ts';
import { inSpan } from '../observability/tracing.ts';
import { describeBody, headerValue, outcomeOf, statusError, transportError } from './call-errors.ts';
import {
  type CallOutcome,
  type CallReport,
  type CloudOperation,
  DEFAULT_TIMEOUTS,
  type TimeoutPolicy,
} from './calls.ts';
import { CloudInputError, CloudProtocolError, CloudUnavailableError } from './errors.ts';
import { clusterFromA, clusterFromB } from './normalise.ts';
import { sentence } from './reasons.ts';
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

export {
  type CallOutcome,
  type CallReport,
  type CloudOperation,
  DEFAULT_TIMEOUTS,
  FAST_TIMEOUTS,
  type TimeoutPolicy,
} from './calls.ts';

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
    this.refuseUnsendable(operation, options);
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
      throw transportError(operation, error, options.signal, deadline, this.timeouts);
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
      else throw transportError(operation, error, options.signal, deadline, this.timeouts, status);
    }

    if (status < 200 || status >= 300)
      throw statusError(operation, status, contentType, text, response.headers, {
        apiKey: this.apiKey,
        now: this.now,
      });

    return { value: this.parseAnswer(operation, options.schema, status, contentType, text), status };
  }

  /** What cannot be sent at all fails before any connection: nothing was sent, so the caller may retry freely. */
  private refuseUnsendable(operation: CloudOperation, options: CallSpec<z.ZodType>): void {
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
  }

  /** A success's body as the documented answer; anything else is a protocol error naming where it differs. */
  private parseAnswer<S extends z.ZodType>(
    operation: CloudOperation,
    schema: S,
    status: number,
    contentType: string | undefined,
    text: string,
  ): z.infer<S> {
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
    const parsed = schema.safeParse(json);
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
    return parsed.data;
  }

  private report(operation: CloudOperation, started: number, outcome: CallOutcome, status?: number): void {
    this.onCall?.({ operation, status, outcome, durationMs: performance.now() - started });
  }
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
