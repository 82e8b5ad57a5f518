import type { HomeView, KnownBlock, ModalView } from '@slack/types';
import { type Dispatcher, Pool, request } from 'undici';
import { outboundDispatcher, type ProxyEnv, proxyConfigured } from '../config/outbound.ts';
import type { Logger } from '../observability/logger.ts';
import { inSpan } from '../observability/tracing.ts';
import {
  SlackApiError,
  SlackHttpError,
  SlackPlatformError,
  SlackRateLimitedError,
  SlackRequestError,
} from './errors.ts';

/**
 * Methods that take form fields, not JSON (`json_input_supported` is absent from their reference files); every
 * method the bot writes with takes JSON, so its blocks and views are sent without a second encoding.
 */
const FORM_METHODS = new Set([
  'conversations.replies',
  'conversations.info',
  'usergroups.list',
  'usergroups.users.list',
  'users.info',
  'chat.getPermalink',
  'files.getUploadURLExternal',
]);

/** Network failures that happen before a request reaches Slack: a retry cannot make the call twice. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

/** Used when Slack says 429 without a usable Retry-After. */
export const DEFAULT_RETRY_AFTER_MS = 5_000;

/** What every successful answer has; each method adds its own fields. */
export interface SlackAnswer {
  ok: true;
  [field: string]: unknown;
}

/** A message of a thread as `conversations.replies` gives it (the fields the bot reads). */
export interface ThreadMessage {
  ts?: string;
  thread_ts?: string;
  text?: string;
  metadata?: { event_type?: string; event_payload?: Record<string, unknown> };
}

/** A message as the bot posts it. */
export interface MessageArgs {
  channel: string;
  text: string;
  blocks?: KnownBlock[];
  thread_ts?: string;
  unfurl_links?: boolean;
  metadata?: { event_type: string; event_payload: Record<string, unknown> };
}

/** One file of `files.completeUploadExternal`: the id `files.getUploadURLExternal` gave, and its title. */
export interface UploadedFile {
  id: string;
  title?: string;
}

/** A file to upload and where to share it (a channel, optionally a thread in it). */
export interface FileUpload {
  bytes: Buffer;
  filename: string;
  title?: string;
  /** Read out by screen readers in place of the image. */
  altText?: string;
  channel: string;
  threadTs?: string;
  initialComment?: string;
}

/** Per-call options of the Web API client. */
export interface CallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  token?: string;
}

/** How hard `views.open` tries: a trigger id lives 3 s, so every retry must fit in what is left of that. */
export interface ViewOpenPolicy {
  /** Attempts in all, the first included. */
  attempts: number;
  /** Pause before a retry after a connection failure. */
  backoffMs: number;
  /** No attempt starts (and no Retry-After is waited for) later than this after the open began. */
  budgetMs: number;
  /** One attempt's limit for the answer's headers and body. */
  timeoutMs: number;
}

/** The policy for modals opened after a slash command's ack. */
export const VIEWS_OPEN_POLICY: ViewOpenPolicy = {
  attempts: 3,
  backoffMs: 200,
  budgetMs: 2500,
  timeoutMs: 2500,
};

export interface SlackApiOptions {
  /** `SLACK_API_URL`, e.g. https://slack.com/api/ */
  apiUrl: string;
  token: string;
  /** Sockets kept open to Slack (default 32). */
  connections?: number;
  /** One call's deadline, the whole answer included (default 10 s). */
  timeoutMs?: number;
  /** Tests and benches may pass their own; the default is one keep-alive pool. */
  dispatcher?: Dispatcher;
  /** The outbound proxy for the Web API and the upload step (docs/configuration.md#outbound-proxy). */
  proxy?: ProxyEnv;
  /** At debug level each call's method and body are logged (through the bot's redacting logger). */
  logger?: Logger;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The arguments of a page of messages (a thread's replies, a channel's history). */
interface MessagePageArgs {
  channel: string;
  limit?: number;
  cursor?: string;
  include_all_metadata?: boolean;
}

/** A page of messages as Slack answers it. */
type MessagePage = SlackAnswer & {
  messages?: ThreadMessage[];
  has_more?: boolean;
  response_metadata?: { next_cursor?: string };
};

/**
 * The Slack Web API as the bot uses it: one JSON POST per call on one keep-alive undici pool, the token in the
 * Authorization header only. It neither retries nor waits: a 429 becomes a {@link SlackRateLimitedError} with
 * Slack's Retry-After, and the caller (a BullMQ job, the 3-second modal budget) decides when to try again.
 * `@slack/web-api` spent about ten times the CPU per call (WHATWG fetch, a queue, a retry wrapper and redacted
 * debug copies of every payload) on the path of every approval.
 */
export class SlackApi {
  private readonly base: URL;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  /** The upload step's way out (another host than the Web API): through the proxy when one is set. */
  private readonly uploads?: Dispatcher;
  private readonly timeoutMs: number;
  private readonly authorization: string;
  private readonly logger?: Logger;

  readonly chat = {
    postMessage: (args: MessageArgs) =>
      this.call<SlackAnswer & { ts: string; channel: string }>('chat.postMessage', args),
    update: (args: MessageArgs & { ts: string }) => this.call('chat.update', args),
    postEphemeral: (args: { channel: string; user: string; text: string; blocks?: KnownBlock[] }) =>
      this.call('chat.postEphemeral', args),
    getPermalink: (args: { channel: string; message_ts: string }) =>
      this.call<SlackAnswer & { permalink: string }>('chat.getPermalink', args),
  };

  readonly conversations = {
    replies: (args: MessagePageArgs & { ts: string }) =>
      this.call<MessagePage>('conversations.replies', args),
    /** A channel's top-level messages, newest first; `oldest` is a message timestamp (seconds). */
    history: (args: MessagePageArgs & { oldest?: string }) =>
      this.call<MessagePage>('conversations.history', args),
  };

  /** Workflow Builder steps: completed with the token Slack gave that run (sent as the bearer, never in the body). */
  readonly functions = {
    completeSuccess: ({
      token,
      ...args
    }: {
      token: string;
      function_execution_id: string;
      outputs: Record<string, unknown>;
    }) => this.call('functions.completeSuccess', args, { token }),
    completeError: ({ token, ...args }: { token: string; function_execution_id: string; error: string }) =>
      this.call('functions.completeError', args, { token }),
  };

  readonly usergroups = {
    users: {
      list: (args: { usergroup: string }) =>
        this.call<SlackAnswer & { users?: string[] }>('usergroups.users.list', args),
    },
  };

  /** Slack's external upload: a URL for the bytes, the bytes, then the file shared where it belongs. */
  readonly files = {
    getUploadURLExternal: (
      args: { filename: string; length: number; alt_txt?: string },
      options?: CallOptions,
    ) =>
      this.call<SlackAnswer & { upload_url: string; file_id: string }>(
        'files.getUploadURLExternal',
        args,
        options,
      ),
    completeUploadExternal: (
      args: { files: UploadedFile[]; channel_id?: string; thread_ts?: string; initial_comment?: string },
      options?: CallOptions,
    ) => this.call<SlackAnswer & { files: UploadedFile[] }>('files.completeUploadExternal', args, options),
  };

  readonly views = {
    publish: (args: { user_id: string; view: HomeView }) => this.call('views.publish', args),
  };

  constructor(options: SlackApiOptions) {
    this.base = new URL(options.apiUrl.endsWith('/') ? options.apiUrl : `${options.apiUrl}/`);
    this.ownsDispatcher = options.dispatcher === undefined;
    const proxy = options.proxy ?? {};
    const pool = { connections: options.connections ?? 32, keepAliveTimeout: 30_000 };
    this.dispatcher =
      options.dispatcher ??
      (proxyConfigured(proxy) ? outboundDispatcher(proxy, pool) : new Pool(this.base.origin, pool));
    // Without a proxy the bytes go through undici's global dispatcher, as before.
    this.uploads = options.dispatcher ?? (proxyConfigured(proxy) ? this.dispatcher : undefined);
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.authorization = `Bearer ${options.token}`;
    this.logger = options.logger;
  }

  /** One Web API call; resolves with Slack's answer when `ok`, else rejects with a {@link SlackApiError}. */
  call<T extends SlackAnswer = SlackAnswer>(
    method: string,
    args: object = {},
    options: CallOptions = {},
  ): Promise<T> {
    // A span per call, named by the method; neither the token nor the arguments (user text) are recorded.
    return inSpan(
      method,
      {
        kind: 'client',
        attributes: {
          'http.request.method': 'POST',
          'url.path': `${this.base.pathname}${method}`,
          'server.address': this.base.hostname,
          'slack.method': method,
        },
      },
      async (span) => {
        try {
          const answer = await this.send<T>(method, args, options);
          span.set({ 'http.response.status_code': 200 });
          return answer;
        } catch (error) {
          if (error instanceof SlackHttpError) span.set({ 'http.response.status_code': error.status });
          if (error instanceof SlackRateLimitedError) span.set({ 'http.response.status_code': 429 });
          if (error instanceof SlackPlatformError) span.set({ 'slack.error': error.error });
          throw error;
        }
      },
    );
  }

  private async send<T extends SlackAnswer>(
    method: string,
    args: object,
    options: { timeoutMs?: number; signal?: AbortSignal; token?: string },
  ): Promise<T> {
    const form = FORM_METHODS.has(method);
    const timeout = options.timeoutMs ?? this.timeoutMs;
    const body = form ? formBody(args) : JSON.stringify(args);
    // Checked first, so the hot path pays nothing when debug is off.
    if (this.logger?.isLevelEnabled('debug')) this.logger.debug({ method, body }, 'http request body');
    let status: number;
    let text: string;
    let retryAfter: string | string[] | undefined;
    try {
      const response = await this.dispatcher.request({
        origin: this.base.origin,
        method: 'POST',
        path: `${this.base.pathname}${method}`,
        headers: {
          authorization: options.token ? `Bearer ${options.token}` : this.authorization,
          'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json; charset=utf-8',
          accept: 'application/json',
        },
        body,
        headersTimeout: timeout,
        bodyTimeout: timeout,
        signal: deadline(timeout, options.signal),
      });
      status = response.statusCode;
      retryAfter = response.headers['retry-after'];
      text = await response.body.text();
    } catch (error) {
      const code = transportCode(error);
      throw new SlackRequestError(method, code, !NOT_SENT.has(code), { cause: error });
    }
    if (status === 429) {
      const seconds = Number(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
      throw new SlackRateLimitedError(
        method,
        Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : DEFAULT_RETRY_AFTER_MS,
      );
    }
    if (status !== 200) throw new SlackHttpError(method, status);
    let answer: { ok?: unknown; error?: unknown };
    try {
      answer = JSON.parse(text) as { ok?: unknown; error?: unknown };
    } catch (error) {
      throw new SlackRequestError(method, 'invalid_response', true, { cause: error });
    }
    if (answer.ok !== true) {
      const { ok: _ok, error, ...data } = answer;
      throw new SlackPlatformError(method, typeof error === 'string' ? error : 'unknown_error', data);
    }
    return answer as T;
  }

  /**
   * `views.open` within a trigger id's life: retries a connection failure or a 429 while the budget lasts; an
   * earlier attempt that reached Slack but lost its answer already used the trigger, so `exchanged_trigger_id`
   * after it means the modal is open.
   */
  async openView(
    triggerId: string,
    view: ModalView,
    policy: ViewOpenPolicy = VIEWS_OPEN_POLICY,
  ): Promise<void> {
    const started = performance.now();
    let reachedSlack = false;
    for (let n = 1; ; n++) {
      let wait: number;
      let failure: SlackApiError;
      try {
        await this.call('views.open', { trigger_id: triggerId, view }, { timeoutMs: policy.timeoutMs });
        return;
      } catch (error) {
        if (!(error instanceof SlackApiError)) throw error;
        if (error instanceof SlackPlatformError) {
          if (error.error === 'exchanged_trigger_id' && reachedSlack) return;
          throw error;
        }
        if (error instanceof SlackHttpError) throw error;
        failure = error;
        if (error instanceof SlackRateLimitedError) wait = error.retryAfterMs;
        else {
          if (error instanceof SlackRequestError && error.mayHaveArrived) reachedSlack = true;
          wait = policy.backoffMs * n;
        }
      }
      if (n >= policy.attempts || performance.now() - started + wait > policy.budgetMs) throw failure;
      await sleep(wait);
    }
  }

  /**
   * Uploads one file and shares it: `files.getUploadURLExternal`, the bytes POSTed to the URL it gave (Slack's file
   * service, another host: no token is sent there), then `files.completeUploadExternal`. Each step's failure
   * rejects with a {@link SlackApiError}; `timeoutMs` bounds each of the three requests.
   */
  async uploadFile(
    file: FileUpload,
    options: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<string> {
    const { upload_url: url, file_id: id } = await this.files.getUploadURLExternal(
      {
        filename: file.filename,
        length: file.bytes.length,
        ...(file.altText ? { alt_txt: file.altText } : {}),
      },
      options,
    );
    await this.postBytes(url, file.bytes, options);
    await this.files.completeUploadExternal(
      {
        files: [{ id, ...(file.title ? { title: file.title } : {}) }],
        channel_id: file.channel,
        ...(file.threadTs ? { thread_ts: file.threadTs } : {}),
        ...(file.initialComment ? { initial_comment: file.initialComment } : {}),
      },
      options,
    );
    return id;
  }

  /** The upload step: the raw bytes to the upload URL; Slack answers 200 when it has them. */
  private async postBytes(
    url: string,
    bytes: Buffer,
    options: { timeoutMs?: number; signal?: AbortSignal },
  ): Promise<void> {
    const method = 'files.upload_url';
    const timeout = options.timeoutMs ?? this.timeoutMs;
    let status: number;
    try {
      const response = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream' },
        body: bytes,
        dispatcher: this.uploads,
        headersTimeout: timeout,
        bodyTimeout: timeout,
        signal: deadline(timeout, options.signal),
      });
      status = response.statusCode;
      await response.body.dump();
    } catch (error) {
      const code = transportCode(error);
      throw new SlackRequestError(method, code, !NOT_SENT.has(code), { cause: error });
    }
    if (status === 429) throw new SlackRateLimitedError(method, DEFAULT_RETRY_AFTER_MS);
    if (status !== 200) throw new SlackHttpError(method, status);
  }

  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close();
  }
}

/** A failed request's code: undici's (`ECONNREFUSED`, …) or the error's name (`TimeoutError`, whose `code` is 23). */
function transportCode(error: unknown): string {
  const { code, name } = (error ?? {}) as { code?: unknown; name?: unknown };
  if (typeof code === 'string') return code;
  return typeof name === 'string' ? name : 'request_failed';
}

/**
 * The whole request's deadline (and the caller's signal): undici's headers and body timeouts are idle timeouts, which
 * an answer that sends a byte now and then never reaches.
 */
function deadline(timeoutMs: number, signal?: AbortSignal): AbortSignal {
  const timeout = AbortSignal.timeout(timeoutMs);
  return signal ? AbortSignal.any([signal, timeout]) : timeout;
}

/** Form fields as Slack reads them: objects and arrays JSON-encoded. */
function formBody(args: object): string {
  const form = new URLSearchParams();
  for (const [name, value] of Object.entries(args)) {
    if (value === undefined) continue;
    form.set(name, typeof value === 'object' ? JSON.stringify(value) : String(value));
  }
  return form.toString();
}
