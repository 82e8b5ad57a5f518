import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { agentForToken } from '../config/agents.ts';
import { webOrigin } from '../config/env.ts';
import { batchRefusal, callsIn, readJsonBody, repeatedIdRefusal } from './batches.ts';
import { createAgentServer } from './server.ts';
import type { McpDeps } from './tools.ts';

/** Where the MCP endpoint answers. */
export const MCP_PATH = '/mcp';
/** The largest request body read: a tool call is a few hundred bytes; anything far larger is refused unread. */
export const MAX_BODY_BYTES = 64 * 1024;
/**
 * How many calls one agent may have open at once on this process (a get_request wait holds its call up to 60 s);
 * the next gets 429 until one ends, so one token cannot hold the server's sockets and memory.
 */
export const MAX_OPEN_PER_AGENT = 32;
/** What the endpoint answers to: stateless, it has no stream to GET and no session to DELETE. */
const ALLOW = 'POST, OPTIONS';
/** The request headers an MCP client in a browser sends, allowed in a preflight's answer. */
const CORS_ALLOW_HEADERS =
  'Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID';
/** The answer headers a browser page may read. */
const CORS_EXPOSE_HEADERS = 'WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version, Retry-After';

export interface McpHttpOptions {
  port: number;
  /** The address it binds: on loopback, only loopback names are accepted in `Host` and `Origin`. */
  host: string;
  /** Browser origins allowed to call (an `Origin` header from anywhere else is refused: DNS rebinding). */
  allowedOrigins?: readonly string[];
  version: string;
}

/** A JSON-RPC error answered before any MCP processing: the request is not read further. */
function reject(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
  code = -32000,
): void {
  // Headers already set on the answer (an allowed origin's CORS headers) stay.
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

/** The 429 of an agent whose open calls fill {@link MAX_OPEN_PER_AGENT}. */
function tooMany(res: ServerResponse, agent: string): void {
  reject(
    res,
    429,
    `Agent ${agent} has ${MAX_OPEN_PER_AGENT} calls open on this server; wait for one to end`,
    {
      'retry-after': '1',
    },
  );
}

/**
 * The places one HTTP request holds among its agent's open calls: one per JSON-RPC call it carries (a batch of
 * waits holds as many as it has calls), all given back together when its answer closes.
 */
class OpenPlaces {
  private held = 0;

  constructor(
    private readonly open: Map<string, number>,
    private readonly key: string,
  ) {}

  /** Takes `count` more places; false (nothing taken) when that would pass {@link MAX_OPEN_PER_AGENT}. */
  take(count: number): boolean {
    const now = this.open.get(this.key) ?? 0;
    if (count <= 0) return true;
    if (now + count > MAX_OPEN_PER_AGENT) return false;
    this.open.set(this.key, now + count);
    this.held += count;
    return true;
  }

  /** Gives every place back, once. */
  release(): void {
    if (this.held === 0) return;
    const left = (this.open.get(this.key) ?? this.held) - this.held;
    this.held = 0;
    if (left > 0) this.open.set(this.key, left);
    else this.open.delete(this.key);
  }
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Whether `address` (what MCP_HOST binds) is a loopback address. */
function isLoopback(address: string): boolean {
  return LOOPBACK_NAMES.has(address) || /^127\./.test(address);
}

/** The host name of a `Host` header or an origin, lower-cased, without its port; undefined when malformed. */
function hostName(value: string, isOrigin: boolean): string | undefined {
  try {
    return new URL(isOrigin ? value : `http://${value}`).hostname.toLowerCase();
  } catch {
    return undefined;
  }
}

/**
 * Why a request's `Host` or `Origin` is refused (DNS rebinding: a web page whose name resolves to this server), or
 * undefined. On a loopback bind, `Host` must be a loopback name and an `Origin` a loopback one or an allowed one;
 * elsewhere (names vary behind proxies) an `Origin`, which every browser sends, must be allowed.
 */
function foreignOrigin(
  req: IncomingMessage,
  loopback: boolean,
  allowed: ReadonlySet<string>,
): string | undefined {
  const origin = req.headers.origin;
  if (loopback) {
    const host = hostName(req.headers.host ?? '', false);
    if (!host || !LOOPBACK_NAMES.has(host))
      return 'Host not allowed: this MCP server answers on loopback names only';
  }
  if (origin === undefined || allowed.has(origin)) return undefined;
  // `null` (a sandboxed frame, a file: page, a redirect) names no site: never one that may call.
  if (origin === 'null') return 'Origin not allowed (set MCP_ALLOWED_ORIGINS to allow a browser origin)';
  const name = hostName(origin, true);
  if (loopback && name && LOOPBACK_NAMES.has(name)) return undefined;
  return 'Origin not allowed (set MCP_ALLOWED_ORIGINS to allow a browser origin)';
}

/** The bearer token of an `Authorization` header, or undefined. */
function bearer(header: string | undefined): string | undefined {
  const match = /^Bearer +([^\s]+)\s*$/i.exec(header ?? '');
  return match?.[1];
}

/**
 * The MCP Streamable HTTP endpoint at `/mcp`, stateless: every POST is served by a fresh server for the agent its
 * bearer token names (checked before the body is read), so any web process can answer any call. An `Origin` that is
 * not allowed gets 403, a missing or unknown token 401, a body over {@link MAX_BODY_BYTES} 413, a method other than
 * POST 405 (there is no stream to open: OPTIONS is a browser's preflight), an agent with
 * {@link MAX_OPEN_PER_AGENT} calls open 429. An origin of MCP_ALLOWED_ORIGINS gets CORS answers, its preflight
 * before any token is asked for (browsers send none with it).
 */
export function mcpRequestHandler(
  deps: McpDeps,
  options: Pick<McpHttpOptions, 'allowedOrigins' | 'version' | 'host'>,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const allowed = new Set(
    (options.allowedOrigins ?? []).map(webOrigin).filter((o): o is string => o !== undefined),
  );
  const loopback = isLoopback(options.host);
  const open = new Map<string, number>();
  return async (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== MCP_PATH) return reject(res, 404, `Not found: the MCP endpoint is ${MCP_PATH}`);
    const foreign = foreignOrigin(req, loopback, allowed);
    if (foreign) return reject(res, 403, foreign);
    const origin = req.headers.origin;
    const cors = origin !== undefined && allowed.has(origin);
    if (cors) {
      res.setHeader('access-control-allow-origin', origin);
      res.setHeader('access-control-expose-headers', CORS_EXPOSE_HEADERS);
      res.setHeader('vary', 'Origin');
    }
    if (req.method === 'OPTIONS') {
      if (!cors)
        return reject(res, 403, 'Origin not allowed (set MCP_ALLOWED_ORIGINS to allow a browser origin)');
      res.writeHead(204, {
        'access-control-allow-methods': ALLOW,
        'access-control-allow-headers': CORS_ALLOW_HEADERS,
        'access-control-max-age': '600',
        allow: ALLOW,
      });
      res.end();
      return;
    }
    if (req.method !== 'POST')
      return reject(res, 405, `Method not allowed: this MCP endpoint is stateless and answers POST only`, {
        allow: ALLOW,
      });
    const token = bearer(req.headers.authorization);
    const agent = token ? agentForToken(deps.policy.agents, token) : undefined;
    if (!agent)
      return reject(res, 401, 'A bearer token of an agent in the policy is needed', {
        'www-authenticate': 'Bearer realm="cloudops"',
      });
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_BODY_BYTES)
      return reject(res, 413, `Request body over ${MAX_BODY_BYTES} bytes`, { connection: 'close' });
    const key = agent.name.toLowerCase();
    // One place is taken before the body is read (a slow body holds a socket too), the rest once its calls are counted.
    const places = new OpenPlaces(open, key);
    if (!places.take(1)) return tooMany(res, agent.name);
    const read = await readJsonBody(req, MAX_BODY_BYTES);
    if (!read.ok) {
      places.release();
      return reject(res, read.status, read.message, read.status === 413 ? { connection: 'close' } : {});
    }
    const batch = batchRefusal(read.body, req.headers['mcp-protocol-version']);
    const calls = callsIn(read.body);
    const refusal =
      batch ??
      repeatedIdRefusal(read.body) ??
      (calls > MAX_OPEN_PER_AGENT
        ? `A batch of ${calls} calls is more than the ${MAX_OPEN_PER_AGENT} calls an agent may have open at once; send fewer`
        : undefined);
    if (refusal) {
      places.release();
      return reject(res, 400, refusal, {}, batch ? -32600 : -32000);
    }
    if (!places.take(calls - 1)) {
      places.release();
      return tooMany(res, agent.name);
    }
    const release = () => places.release();
    const server = createAgentServer(deps, agent, options.version);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      maxRequestBodySize: MAX_BODY_BYTES,
    });
    res.on('close', () => {
      release();
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res, read.body);
    } catch (error) {
      release();
      throw error;
    }
  };
}

/** Listens for MCP on `host:port`; a port in use is named as MCP_PORT. */
export async function startMcpHttp(deps: McpDeps, options: McpHttpOptions): Promise<Server> {
  const handle = mcpRequestHandler(deps, options);
  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      deps.logger.error({ err: error }, 'an MCP request failed');
      if (!res.headersSent) reject(res, 500, 'cloudops could not answer; nothing was done');
      else res.end();
    });
  });
  // A slow client may not hold a connection open without sending: headers within 10 s.
  server.headersTimeout = 10_000;
  server.requestTimeout = 90_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE'
          ? new Error(`MCP_PORT ${options.port} is in use on ${options.host}`)
          : error,
      ),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  return server;
}
