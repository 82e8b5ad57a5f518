/**
 * One call to a ticket system over undici, through the outbound dispatcher (so `HTTPS_PROXY` applies), with a
 * deadline for the whole call and a cap on the answer's size. Every failure to get a documented JSON answer is a
 * {@link TicketUnreachableError} (or {@link TicketUnauthorisedError} for 401/403): a ticket system that is down, hangs,
 * redirects to a login page or answers HTML is never read as a pass.
 */
import { type Dispatcher, request } from 'undici';
import type { z } from 'zod';
import { outboundDispatcher, type ProxyEnv } from '../config/outbound.ts';
import { TicketUnauthorisedError, TicketUnreachableError } from './errors.ts';

/** How long each phase of a call may take. */
export interface TicketTimeouts {
  connectMs: number;
  headersMs: number;
  bodyMs: number;
  /** The whole call, unless the caller gives its own. */
  totalMs: number;
}

/** Production: a ticket read sits in front of a person waiting; a run's re-check retries anyway. */
export const TICKET_TIMEOUTS: TicketTimeouts = Object.freeze({
  connectMs: 3_000,
  headersMs: 8_000,
  bodyMs: 8_000,
  totalMs: 10_000,
});

/** The most of an answer read: a ticket's status or a change's five fields are a few kilobytes. */
export const MAX_ANSWER_BYTES = 1024 * 1024;

export interface TicketHttpOptions {
  /** e.g. `https://example.atlassian.net`; a path prefix is kept. */
  baseUrl: string;
  /** The full `Authorization` header value; undefined: none configured. */
  authorization?: string;
  /** The variables that would give the credentials, for the message when they are missing. */
  credentialNames: string;
  /** `Jira`, `ServiceNow`: how messages name the system. */
  label: string;
  proxy?: ProxyEnv;
  dispatcher?: Dispatcher;
  timeouts?: TicketTimeouts;
  maxAnswerBytes?: number;
}

export interface TicketAnswer {
  status: number;
  json: unknown;
}

/** An HTTP client for one ticket system; the clients of jira.ts and servicenow.ts hold one each. */
export class TicketHttp {
  readonly base: string;
  readonly label: string;
  private readonly authorization?: string;
  private readonly credentialNames: string;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly timeouts: TicketTimeouts;
  private readonly maxAnswerBytes: number;

  constructor(options: TicketHttpOptions) {
    this.base = options.baseUrl.replace(/\/+$/, '');
    this.label = options.label;
    this.authorization = options.authorization;
    this.credentialNames = options.credentialNames;
    this.timeouts = options.timeouts ?? TICKET_TIMEOUTS;
    this.maxAnswerBytes = options.maxAnswerBytes ?? MAX_ANSWER_BYTES;
    this.ownsDispatcher = options.dispatcher === undefined;
    this.dispatcher =
      options.dispatcher ??
      outboundDispatcher(options.proxy ?? {}, {
        connect: { timeout: this.timeouts.connectMs },
        headersTimeout: this.timeouts.headersMs,
        bodyTimeout: this.timeouts.bodyMs,
        keepAliveTimeout: 4_000,
        connections: 8,
      });
  }

  /**
   * Sends one call about `ticket` and returns the answer's status and JSON for the statuses `expected` lists
   * (2xx and, e.g., 404 that the caller reads); anything else throws.
   */
  async call(
    ticket: string,
    method: 'GET' | 'POST' | 'PATCH',
    path: string,
    options: { body?: unknown; expected?: number[]; timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<TicketAnswer> {
    if (!this.authorization)
      throw new TicketUnauthorisedError(
        ticket,
        `${this.label} has no credentials configured (${this.credentialNames}), so ${ticket} cannot be checked.`,
      );
    const totalMs = options.timeoutMs ?? this.timeouts.totalMs;
    const deadline = AbortSignal.timeout(totalMs);
    const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
    const headers: Record<string, string> = { accept: 'application/json', authorization: this.authorization };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    let response: Dispatcher.ResponseData;
    let text: string;
    try {
      response = await request(`${this.base}${path}`, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        dispatcher: this.dispatcher,
        signal,
        headersTimeout: Math.min(this.timeouts.headersMs, totalMs),
        bodyTimeout: Math.min(this.timeouts.bodyMs, totalMs),
      });
      text = await this.readCapped(ticket, response);
    } catch (error) {
      if (error instanceof TicketUnreachableError) throw error;
      throw this.transportError(ticket, error, deadline.aborted, totalMs);
    }
    const status = response.statusCode;
    if (status === 401 || status === 403)
      throw new TicketUnauthorisedError(
        ticket,
        `${this.label} refused cloudops's credentials (HTTP ${status}; check ${this.credentialNames}), so ${ticket} could not be checked.`,
      );
    const expected = options.expected ?? [];
    if (!(status >= 200 && status < 300) && !expected.includes(status))
      throw new TicketUnreachableError(
        ticket,
        `${this.label} ${statusWords(status)}, so ${ticket} could not be checked.`,
      );
    try {
      return { status, json: text === '' ? undefined : JSON.parse(text) };
    } catch (error) {
      throw new TicketUnreachableError(
        ticket,
        `${this.label} answered HTTP ${status} with ${describe(response.headers['content-type'], text)} instead of JSON, so ${ticket} could not be checked.`,
        { cause: error },
      );
    }
  }

  /** Parses `json` with `schema`, or says the answer is not what the system documents. */
  parse<S extends z.ZodType>(ticket: string, schema: S, json: unknown): z.infer<S> {
    const parsed = schema.safeParse(json);
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? ` (at ${issue.path.join('.')})` : '';
    throw new TicketUnreachableError(
      ticket,
      `${this.label} answered with JSON that is not its documented answer${where}, so ${ticket} could not be checked.`,
      { cause: parsed.error },
    );
  }

  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close();
  }

  private async readCapped(ticket: string, response: Dispatcher.ResponseData): Promise<string> {
    const declared = Number(response.headers['content-length']);
    const tooLarge = () =>
      new TicketUnreachableError(
        ticket,
        `${this.label} answered with more than ${Math.round(this.maxAnswerBytes / 1024)} KiB, far more than a ticket's fields, so ${ticket} could not be checked.`,
      );
    if (Number.isFinite(declared) && declared > this.maxAnswerBytes) {
      response.body.destroy();
      throw tooLarge();
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response.body) {
      size += (chunk as Buffer).length;
      if (size > this.maxAnswerBytes) {
        response.body.destroy();
        throw tooLarge();
      }
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  private transportError(
    ticket: string,
    error: unknown,
    timedOut: boolean,
    totalMs: number,
  ): TicketUnreachableError {
    const code = errorCode(error);
    const what = timedOut
      ? `did not answer within ${seconds(totalMs)}`
      : code === 'UND_ERR_CONNECT_TIMEOUT'
        ? `did not accept a connection within ${seconds(this.timeouts.connectMs)}`
        : code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT'
          ? 'stopped answering'
          : code === 'ENOTFOUND' || code?.startsWith('EAI')
            ? `could not be found (${code})`
            : `could not be reached (${code ?? 'no answer'})`;
    return new TicketUnreachableError(ticket, `${this.label} ${what}, so ${ticket} could not be checked.`, {
      cause: error,
    });
  }
}

function statusWords(status: number): string {
  if (status === 429) return 'is limiting the rate of calls (HTTP 429)';
  if (status === 503) return 'is unavailable (HTTP 503)';
  if (status >= 300 && status < 400)
    return `answered with a redirect (HTTP ${status}), as a login page in the way does`;
  if (status >= 500) return `failed (HTTP ${status})`;
  return `answered HTTP ${status}`;
}

function describe(contentType: string | string[] | undefined, text: string): string {
  const type = Array.isArray(contentType) ? contentType[0] : contentType;
  if (text.trim() === '') return 'an empty body';
  if (/html/i.test(type ?? '') || /^\s*</.test(text)) return 'an HTML page';
  return `a body of type ${(type ?? 'unknown').split(';')[0]}`;
}

function errorCode(error: unknown, depth = 0): string | undefined {
  if (depth > 4 || typeof error !== 'object' || error === null) return undefined;
  const { code, cause, errors } = error as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof code === 'string') return code;
  if (Array.isArray(errors)) for (const inner of errors) return errorCode(inner, depth + 1);
  return errorCode(cause, depth + 1);
}

function seconds(ms: number): string {
  return ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${Number((ms / 1000).toFixed(1))} s`;
}
