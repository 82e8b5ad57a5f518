/**
 * `cloudops mcp`: the agents' tools over stdio for an MCP client on an agent's machine, as a thin client of a running
 * bot (docs/agents.md#over-stdio). Every tools/list and tools/call is forwarded to the bot's `/mcp` with the agent's
 * token, and the bot's answer (a refusal, a 401 or a 429 included) comes back as the MCP result or error. The process
 * holds no Redis, cloud, policy, seal or Slack credentials: whatever decides or runs a request is the bot's.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  type CallToolRequest,
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  type ListToolsRequest,
  ListToolsRequestSchema,
  type ListToolsResult,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { type Dispatcher, Response as UndiciResponse, fetch as undiciFetch } from 'undici';
import { outboundDispatcher, type ProxyEnv } from '../config/outbound.ts';
import { INSTRUCTIONS } from './instructions.ts';

/** The largest answer read from the bot: a tool's answer is a few kilobytes; more is a wrong or hostile server. */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;
/** How long a forwarded call may take: get_request may wait 60 s at the bot, and the answer must fit after it. */
const CALL_TIMEOUT_MS = 90_000;
/** How long connecting to the bot (its initialize) may take. */
const CONNECT_TIMEOUT_MS = 15_000;
/** How much of the bot's own words an error carries. */
const MAX_SAID = 300;

/** A problem with what `cloudops mcp` was given; the message names the variable, never a secret. */
export class McpClientConfigError extends Error {
  override readonly name = 'McpClientConfigError';
  readonly code = 'mcp_client_config';
}

/** An answer of the bot that was larger than {@link MAX_ANSWER_BYTES}. */
export class AnswerTooLargeError extends Error {
  override readonly name = 'AnswerTooLargeError';
  readonly code = 'answer_too_large';
  constructor(readonly limit: number) {
    super(`the bot's answer was larger than ${limit} bytes; it was not read`);
  }
}

/** An agent's token as `cloudops agents token` makes them. */
const AGENT_TOKEN = /cloudops_agent_[A-Za-z0-9_-]+/g;

const LOOPBACK_HOST = /^(localhost|127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\])$/i;

/**
 * The bot's MCP endpoint, `${CLOUDOPS_URL}/mcp`. Refused: anything but http(s), credentials, a query or a fragment in
 * the URL, and plain http to anything but loopback (the agent's token would cross the network in clear).
 */
export function botEndpoint(value: string | undefined): URL {
  const text = value?.trim() ?? '';
  if (text === '')
    throw new McpClientConfigError(
      'CLOUDOPS_URL is not set: give the base URL of the bot’s MCP endpoint, e.g. https://cloudops.example.com or http://127.0.0.1:8808 (docs/agents.md)',
    );
  if (!URL.canParse(text))
    throw new McpClientConfigError(
      'CLOUDOPS_URL: expected an http(s) URL, e.g. https://cloudops.example.com',
    );
  const url = new URL(text);
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new McpClientConfigError(
      'CLOUDOPS_URL: expected an http(s) URL, e.g. https://cloudops.example.com',
    );
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '')
    throw new McpClientConfigError(
      'CLOUDOPS_URL: expected the base URL alone, without credentials, query or fragment (the token is CLOUDOPS_AGENT_TOKEN)',
    );
  if (url.protocol === 'http:' && !LOOPBACK_HOST.test(url.hostname))
    throw new McpClientConfigError(
      `CLOUDOPS_URL: plain http:// is accepted on loopback only (127.0.0.1, [::1], localhost), not ${url.hostname}: the agent's token would cross the network in clear; use https://`,
    );
  return new URL(`${url.href.replace(/\/+$/, '')}/mcp`);
}

/** The bot's variables that `cloudops mcp` never uses: named once on stderr when set, so they can be removed. */
const BOT_ONLY =
  /^(REDIS_.*|CLOUD_API_.*|SLACK_.*|SEAL_KEY.*|POLICY_FILE|OIDC_CLIENT_SECRET|AUDIT_WEBHOOK_.*)$/;

/** Which of the bot's own variables are set in `env` (names only, sorted). */
export function botVariablesSet(env: Record<string, string | undefined>): string[] {
  return Object.keys(env)
    .filter((name) => BOT_ONLY.test(name) && (env[name] ?? '').trim() !== '')
    .sort();
}

/**
 * A fetch over `dispatcher` (the proxy settings apply) that reads at most `limit` bytes of any answer; past it the
 * answer's stream fails with {@link AnswerTooLargeError} and `overflow` is called (an event stream never ends by
 * itself, so the caller must drop the connection).
 */
export function limitedFetch(dispatcher: Dispatcher, limit: number, overflow: () => void): FetchLike {
  return async (url, init) => {
    const response = await undiciFetch(url, { ...(init as object), dispatcher } as Parameters<
      typeof undiciFetch
    >[1]);
    const declared = Number(response.headers.get('content-length') ?? Number.NaN);
    if (Number.isFinite(declared) && declared > limit) {
      await response.body?.cancel().catch(() => undefined);
      overflow();
      throw new AnswerTooLargeError(limit);
    }
    if (response.body === null || [101, 204, 205, 304].includes(response.status))
      return response as unknown as Response;
    let seen = 0;
    const bounded = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          seen += chunk.byteLength;
          if (seen > limit) {
            overflow();
            controller.error(new AnswerTooLargeError(limit));
          } else controller.enqueue(chunk);
        },
      }),
    );
    return new UndiciResponse(bounded, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    }) as unknown as Response;
  };
}

/** What the bot said in a refused HTTP answer: the JSON-RPC error's message when it sent one, else its text. */
function botSaid(error: StreamableHTTPError): string {
  const text = error.message.replace(/^(Streamable HTTP error: )?Error POSTing to endpoint: /, '');
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } };
    if (typeof body.error?.message === 'string') return body.error.message.slice(0, MAX_SAID);
  } catch {
    // Not JSON: its text, cut short.
  }
  return text.replace(/\s+/g, ' ').slice(0, MAX_SAID);
}

/**
 * A failure as the agent's client gets it: a JSON-RPC error with this code and message. Not an McpError, whose
 * message already carries an `MCP error N:` prefix that the agent's SDK would add a second time.
 */
export class BotCallError extends Error {
  override readonly name = 'BotCallError';
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** The connection to the bot, opened on first use and again after it was lost. */
export class BotLink {
  private client: Promise<Client> | undefined;
  private overflowed = false;
  private readonly dispatcher: Dispatcher;

  constructor(
    private readonly endpoint: URL,
    private readonly token: string,
    proxy: ProxyEnv,
    private readonly version: string,
    private readonly limit = MAX_ANSWER_BYTES,
  ) {
    // Plain http is loopback only (botEndpoint): through a proxy the bearer would cross the network in clear, and
    // the proxy would call its own loopback, not this machine's bot. So it goes direct; https follows the proxy.
    this.dispatcher = outboundDispatcher(endpoint.protocol === 'http:' ? {} : proxy, {
      connectTimeout: CONNECT_TIMEOUT_MS,
    });
  }

  async listTools(params: ListToolsRequest['params']): Promise<ListToolsResult> {
    return this.forward((client) => client.listTools(params, { timeout: CALL_TIMEOUT_MS }));
  }

  async callTool(params: CallToolRequest['params']): Promise<CallToolResult> {
    return this.forward(
      (client) => client.callTool(params, undefined, { timeout: CALL_TIMEOUT_MS }) as Promise<CallToolResult>,
    );
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.then((c) => c.close()).catch(() => undefined);
    await this.dispatcher.close().catch(() => undefined);
  }

  private async forward<T>(call: (client: Client) => Promise<T>): Promise<T> {
    this.overflowed = false;
    try {
      return this.scrubbed(await call(await this.connected()));
    } catch (error) {
      throw this.asMcpError(error);
    }
  }

  private connected(): Promise<Client> {
    this.client ??= this.open().catch((error: unknown) => {
      this.client = undefined;
      throw error;
    });
    return this.client;
  }

  private async open(): Promise<Client> {
    const client = new Client({ name: 'cloudops-mcp', version: this.version });
    const transport = new StreamableHTTPClientTransport(this.endpoint, {
      // A redirect is never followed: the token goes to the URL the operator gave, and nowhere else.
      requestInit: { headers: { authorization: `Bearer ${this.token}` }, redirect: 'error' },
      fetch: limitedFetch(this.dispatcher, this.limit, () => this.dropOversized(client)),
      reconnectionOptions: {
        maxRetries: 0,
        initialReconnectionDelay: 1_000,
        maxReconnectionDelay: 1_000,
        reconnectionDelayGrowFactor: 1,
      },
    });
    client.onclose = () => {
      this.client = undefined;
    };
    // The transport's own complaints (a stream that broke) surface as the call's error; nothing to print.
    client.onerror = () => undefined;
    try {
      await client.connect(transport, { timeout: CONNECT_TIMEOUT_MS });
    } catch (error) {
      await client.close().catch(() => undefined);
      throw error;
    }
    return client;
  }

  /** An answer over the limit: the connection goes (its event stream would otherwise keep the call open). */
  private dropOversized(client: Client): void {
    this.overflowed = true;
    this.client = undefined;
    void client.close().catch(() => undefined);
  }

  /** Any failure as the error the agent's client gets: what the bot said, never the token. */
  private asMcpError(error: unknown): BotCallError {
    const where = this.endpoint.href;
    if (this.overflowed || error instanceof AnswerTooLargeError)
      return new BotCallError(ErrorCode.InternalError, new AnswerTooLargeError(this.limit).message);
    if (error instanceof McpError)
      return new BotCallError(
        error.code,
        this.scrub(error.message.replace(/^MCP error -?\d+: /, '').slice(0, 4 * MAX_SAID)),
        this.scrubbed(error.data),
      );
    if (error instanceof StreamableHTTPError) {
      const status = error.code;
      const said = this.scrub(botSaid(error));
      const hint =
        status === 401
          ? ' (CLOUDOPS_AGENT_TOKEN is not the token of an agent in the bot’s policy)'
          : status === 429
            ? ' (too many calls at once: try again shortly)'
            : '';
      return new BotCallError(-32000, `the bot at ${where} answered ${status}: ${said}${hint}`, { status });
    }
    const cause = (error as { cause?: { code?: unknown } })?.cause?.code;
    const why = typeof cause === 'string' ? cause : this.scrub(String((error as Error)?.message ?? error));
    return new BotCallError(
      ErrorCode.ConnectionClosed,
      `cannot reach the bot at ${where} (${why.slice(0, MAX_SAID)})`,
    );
  }

  /** A result or an error's data with the token out of every string in it, keys included. */
  private scrubbed<T>(value: T): T {
    if (typeof value === 'string') return this.scrub(value) as T;
    if (Array.isArray(value)) return value.map((item: unknown) => this.scrubbed(item)) as T;
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [this.scrub(key), this.scrubbed(item)]),
    ) as T;
  }

  /** The token, and anything shaped like an agent's token, out of what is passed on. */
  private scrub(text: string): string {
    return text.split(this.token).join('[redacted]').replace(AGENT_TOKEN, '[redacted]');
  }
}

/**
 * Serves the tools over stdin/stdout, forwarding each call through `link`, until stdin closes. stdout is the
 * protocol's; nothing else is written there.
 */
export async function serveStdioClient(
  link: BotLink,
  version: string,
  streams: { stdin?: NodeJS.ReadableStream; stdout?: NodeJS.WritableStream } = {},
): Promise<void> {
  const server = new Server(
    { name: 'cloudops', version },
    { instructions: INSTRUCTIONS, capabilities: { tools: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, (request) => link.listTools(request.params));
  server.setRequestHandler(CallToolRequestSchema, (request) => link.callTool(request.params));
  const transport = new StdioServerTransport(
    streams.stdin as NodeJS.ReadStream | undefined,
    streams.stdout as NodeJS.WriteStream | undefined,
  );
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    (streams.stdin ?? process.stdin).once('end', () => resolve());
  });
  try {
    await server.connect(transport);
    await closed;
    await server.close();
  } finally {
    await link.close();
  }
}
