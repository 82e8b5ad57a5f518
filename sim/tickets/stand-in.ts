import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

// What the Jira and ServiceNow stand-ins share: the HTTP server, the record of calls, and the ways a test tells a
// ticket system to misbehave (down, slow, hanging, lying with HTML, answering a body too large to read).

/** One call as the stand-in received it, for tests to assert on. */
export interface TicketCall {
  method: string;
  /** Path and query, as sent. */
  url: string;
  /** The Authorization header's scheme and who it named (`Basic user`, `Bearer`), never the secret itself. */
  auth: string;
  /** Whether the credentials were accepted. */
  authorised: boolean;
  body?: unknown;
  status: number;
  at: Date;
}

/**
 * How the next calls are answered instead of normally:
 * - `down`: 503 with a load balancer's HTML page;
 * - `slow`: `ms` late, then normally;
 * - `hang`: never (the connection stays open);
 * - `html`: 200 with an HTML login page (a proxy or SSO portal in the way);
 * - `huge`: 200 with a JSON body of `bytes` (default 8 MiB);
 * - `reset`: the connection is destroyed without an answer.
 */
export type TicketFault =
  | { kind: 'down' }
  | { kind: 'slow'; ms: number }
  | { kind: 'hang' }
  | { kind: 'html' }
  | { kind: 'huge'; bytes?: number }
  | { kind: 'reset' };

export interface Answer {
  status: number;
  body?: unknown;
  /** Plain text (or HTML) instead of JSON. */
  text?: string;
  contentType?: string;
  headers?: Record<string, string>;
}

export interface StandInBase {
  /** Base URL, e.g. `http://127.0.0.1:PORT`, without a trailing slash. */
  url: string;
  calls: TicketCall[];
  /** Calls whose path starts with `prefix` (and method, when given). */
  callsTo(method: string, pathPrefix: string): TicketCall[];
  /** Until `heal()`, or for the next `times` calls, answer as `fault` says. */
  fail(fault: TicketFault, times?: number): void;
  heal(): void;
  close(): Promise<void>;
}

export interface Handled {
  answer: Answer;
  call: Omit<TicketCall, 'status' | 'at' | 'method' | 'url' | 'body'>;
}

/** The largest request body the stand-ins read (a comment or a work note is far smaller). */
const MAX_REQUEST_BYTES = 256 * 1024;

/** Starts a stand-in on 127.0.0.1 whose routes `handle` answers. */
export async function startTicketStandIn(
  handle: (method: string, url: URL, headers: IncomingMessage['headers'], body: unknown) => Handled,
  port = 0,
): Promise<StandInBase> {
  const calls: TicketCall[] = [];
  let fault: { fault: TicketFault; left: number } | undefined;
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    void serve(req, res).catch(() => res.destroy());
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    let body: unknown;
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
    }
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const method = req.method ?? 'GET';
    const active = fault;
    if (active) {
      active.left -= 1;
      if (active.left <= 0) fault = undefined;
    }
    const record = (status: number, handled?: Handled) =>
      calls.push({
        method,
        url: `${url.pathname}${url.search}`,
        auth: handled?.call.auth ?? describeAuth(req.headers.authorization),
        authorised: handled?.call.authorised ?? false,
        ...(body === undefined ? {} : { body }),
        status,
        at: new Date(),
      });
    switch (active?.fault.kind) {
      case 'hang':
        record(0);
        return;
      case 'reset':
        record(0);
        req.socket.destroy();
        return;
      case 'down':
        record(503);
        return send(res, {
          status: 503,
          text: '<html><body><h1>503 Service Unavailable</h1></body></html>',
          contentType: 'text/html',
        });
      case 'html':
        record(200);
        return send(res, {
          status: 200,
          text: '<!DOCTYPE html><html><head><title>Log in</title></head><body>Sign in to continue</body></html>',
          contentType: 'text/html;charset=UTF-8',
        });
      case 'huge': {
        record(200);
        const bytes = active.fault.bytes ?? 8 * 1024 * 1024;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`{"padding":"${'x'.repeat(Math.max(0, bytes - 14))}"}`);
        return;
      }
      case 'slow':
        await new Promise((resolve) =>
          setTimeout(resolve, active.fault.kind === 'slow' ? active.fault.ms : 0),
        );
        break;
      default:
        break;
    }
    const handled = handle(method, url, req.headers, body);
    record(handled.answer.status, handled);
    send(res, handled.answer);
  }

  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    calls,
    callsTo: (method, prefix) => calls.filter((c) => c.method === method && c.url.startsWith(prefix)),
    fail(next, times = Number.POSITIVE_INFINITY) {
      fault = { fault: next, left: times };
    },
    heal() {
      fault = undefined;
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function send(res: ServerResponse, answer: Answer): void {
  const text = answer.text ?? (answer.body === undefined ? '' : JSON.stringify(answer.body));
  const contentType =
    answer.contentType ?? (answer.text === undefined ? 'application/json;charset=UTF-8' : 'text/plain');
  res.writeHead(answer.status, { 'content-type': contentType, ...answer.headers });
  res.end(answer.status === 204 ? undefined : text);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_REQUEST_BYTES) throw new Error('request body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** `Basic user` / `Bearer` / `none`: who a call claimed to be, without the secret. */
export function describeAuth(header: string | undefined): string {
  if (!header) return 'none';
  const [scheme, value = ''] = header.split(' ', 2);
  if (scheme?.toLowerCase() === 'basic') {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    return `Basic ${decoded.split(':')[0] ?? ''}`;
  }
  return scheme ?? 'none';
}

/** Whether `header` is `Basic` with exactly `user` and `password`. */
export function basicMatches(header: string | undefined, user: string, password: string): boolean {
  if (!header?.startsWith('Basic ')) return false;
  const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
  return decoded === `${user}:${password}`;
}
