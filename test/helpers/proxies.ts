import { createServer as createHttpServer, request as httpRequest } from 'node:http';
import { type AddressInfo, connect, createServer as createTcpServer, type Socket } from 'node:net';

/** A loopback proxy a test started; `close` ends it and every connection through it. */
export interface TestProxy {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** An HTTP proxy whose answers to some requests trickle: the headers at once, then the body one byte at a time. */
export interface TrickleProxy extends TestProxy {
  /** Answers to requests that `matches` are trickled, one byte every `everyMs`. */
  trickle(matches: (method: string, path: string) => boolean, everyMs: number): void;
  /** How many bytes of trickled answers were written so far. */
  readonly trickledBytes: number;
}

/**
 * Forwards every HTTP request to `target` (the cloud simulator): the real answer, except that a trickled one keeps its
 * status and headers but sends its body one byte per interval, each gap well under any body timeout, so only a
 * deadline on the whole call ends it.
 */
export async function startTrickleProxy(target: string): Promise<TrickleProxy> {
  const upstream = new URL(target);
  let rule: { matches: (method: string, path: string) => boolean; everyMs: number } | undefined;
  let trickledBytes = 0;
  const server = createHttpServer((req, res) => {
    const forwarded = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
      },
      async (answer) => {
        const chunks: Buffer[] = [];
        for await (const chunk of answer) chunks.push(chunk as Buffer);
        const body = Buffer.concat(chunks);
        const slow = rule?.matches(req.method ?? '', req.url ?? '') ? rule.everyMs : undefined;
        const headers = { ...answer.headers };
        if (slow === undefined) {
          res.writeHead(answer.statusCode ?? 502, headers);
          res.end(body);
          return;
        }
        delete headers['content-length'];
        res.writeHead(answer.statusCode ?? 502, headers);
        res.flushHeaders();
        let sent = 0;
        const next = () => {
          if (sent >= body.length) {
            clearInterval(timer);
            res.end();
            return;
          }
          res.write(body.subarray(sent, sent + 1));
          sent += 1;
          trickledBytes += 1;
        };
        const timer = setInterval(next, slow);
        next();
        res.on('close', () => clearInterval(timer));
      },
    );
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    trickle(matches, everyMs) {
      rule = { matches, everyMs };
    },
    get trickledBytes() {
      return trickledBytes;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A TCP proxy in front of Redis whose every client write reaches Redis `delayMs` late (0: no delay). */
export interface SlowTcpProxy extends TestProxy {
  /** Sets the delay of each client write from now on. */
  setDelay(ms: number): void;
  /** Down: every connection through the proxy is dropped and new ones are refused, as a Redis that went away. */
  setDown(down: boolean): void;
  /** Resolves once every write held so far has been sent on. */
  drained(): Promise<void>;
}

/**
 * Forwards TCP to `target` (`redis://host:port/db`); each chunk a client writes is held `delayMs` before it is sent on
 * (in order), so every round trip takes at least that long, as a slow or overloaded Redis would.
 */
export async function startSlowTcpProxy(
  target: string,
  delayMs = 0,
  options: {
    /** Runs before each client write is sent on (writes stay in order): a test acts at an exact moment. */
    beforeForward?: (chunk: Buffer) => Promise<void> | void;
  } = {},
): Promise<SlowTcpProxy> {
  const upstream = new URL(target);
  let delay = delayMs;
  let held = 0;
  let down = false;
  const sockets = new Set<Socket>();
  const server = createTcpServer((client) => {
    if (down) return void client.destroy();
    const server = connect(Number(upstream.port || 6379), upstream.hostname);
    sockets.add(client);
    sockets.add(server);
    // Each chunk is due `delay` after it arrived and leaves no earlier than the one before it (never reordered).
    let last = Promise.resolve();
    client.on('data', (chunk) => {
      const due = Date.now() + delay;
      held += 1;
      last = last.then(async () => {
        const wait = due - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        await options.beforeForward?.(chunk);
        if (!server.destroyed) server.write(chunk);
        held -= 1;
      });
    });
    server.pipe(client);
    const end = () => {
      client.destroy();
      server.destroy();
      sockets.delete(client);
      sockets.delete(server);
    };
    for (const socket of [client, server]) {
      socket.on('error', end);
      socket.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}${upstream.pathname}`,
    port,
    setDelay(ms) {
      delay = ms;
    },
    setDown(value) {
      down = value;
      if (down) for (const socket of sockets) socket.destroy();
    },
    async drained() {
      while (held > 0) await new Promise((resolve) => setTimeout(resolve, 20));
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** One call a {@link ForwardProxy} carried. */
export interface ProxiedCall {
  /** `forward`: a plain-HTTP request by absolute URI; `upgrade`: the same for a WebSocket; `connect`: a tunnel. */
  kind: 'forward' | 'upgrade' | 'connect';
  method: string;
  /** The absolute URI asked for (`forward`, `upgrade`) or the `host:port` of the tunnel (`connect`). */
  target: string;
  /** The `Proxy-Authorization` the client sent, if any (not passed on). */
  proxyAuthorization?: string;
}

/** A forward proxy as companies run one: HTTP by absolute URI, WebSocket upgrades, and CONNECT tunnels. */
export interface ForwardProxy extends TestProxy {
  /** Every call it carried, in order. */
  readonly calls: ProxiedCall[];
}

/**
 * A real forward proxy on loopback, built on node:http and node:net: it forwards what it is asked for and records it,
 * so a test can prove which calls went through it (everything here is on 127.0.0.1, where nothing would stop a
 * client from going directly).
 */
export async function startForwardProxy(
  options: {
    /** The first `times` calls (forwarded or tunnelled) are answered `status` and passed on to nobody. */
    refuseFirst?: { status: 407 | 502; times: number };
  } = {},
): Promise<ForwardProxy> {
  const calls: ProxiedCall[] = [];
  const sockets = new Set<Socket>();
  let refusals = options.refuseFirst?.times ?? 0;
  const refusal = (): number | undefined => {
    if (refusals <= 0) return undefined;
    refusals -= 1;
    return options.refuseFirst?.status;
  };
  const server = createHttpServer((req, res) => {
    const target = new URL(req.url ?? '/');
    calls.push({
      kind: 'forward',
      method: req.method ?? '',
      target: target.href,
      proxyAuthorization: req.headers['proxy-authorization'],
    });
    const refused = refusal();
    if (refused !== undefined) {
      req.resume();
      return void res.writeHead(refused, { 'proxy-authenticate': 'Basic realm="corp"' }).end();
    }
    const headers = { ...req.headers };
    delete headers['proxy-connection'];
    delete headers['proxy-authorization'];
    const upstream = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: `${target.pathname}${target.search}`,
        headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  server.on('upgrade', (req, client: Socket, head: Buffer) => {
    const target = new URL(req.url ?? '/');
    calls.push({ kind: 'upgrade', method: req.method ?? '', target: target.href });
    const upstream = connect(Number(target.port), target.hostname, () => {
      const lines = [`${req.method} ${target.pathname}${target.search} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        const name = req.rawHeaders[i]!;
        if (!/^proxy-/i.test(name)) lines.push(`${name}: ${req.rawHeaders[i + 1]}`);
      }
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    track(upstream);
    track(client);
  });
  server.on('connect', (req, client: Socket, head: Buffer) => {
    calls.push({
      kind: 'connect',
      method: 'CONNECT',
      target: req.url ?? '',
      proxyAuthorization: req.headers['proxy-authorization'],
    });
    const refused = refusal();
    if (refused !== undefined)
      return void client.end(`HTTP/1.1 ${refused} Refused\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    const [host, port] = (req.url ?? '').split(':');
    const upstream = connect(Number(port), host ?? '', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    track(upstream);
    track(client);
  });
  function track(socket: Socket): void {
    sockets.add(socket);
    socket.on('error', () => socket.destroy());
    socket.on('close', () => sockets.delete(socket));
  }
  server.on('connection', track);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    calls,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A proxy that refuses everything it is asked, as one whose rules or credentials say no. */
export interface RefusingProxy extends TestProxy {
  /** Every call it refused, in order (nothing is passed on). */
  readonly calls: ProxiedCall[];
}

/**
 * Answers every request and every CONNECT with `status` (407 with a `Proxy-Authenticate` challenge, as a proxy that
 * wants a password): nothing it is asked for reaches the target.
 */
export async function startRefusingProxy(status: 407 | 403 | 502): Promise<RefusingProxy> {
  const calls: ProxiedCall[] = [];
  const sockets = new Set<Socket>();
  const answer = (): string => {
    const challenge = status === 407 ? 'Proxy-Authenticate: Basic realm="corp"\r\n' : '';
    return `HTTP/1.1 ${status} Refused\r\n${challenge}Content-Length: 0\r\nConnection: close\r\n\r\n`;
  };
  const server = createHttpServer((req, res) => {
    calls.push({
      kind: 'forward',
      method: req.method ?? '',
      target: req.url ?? '',
      proxyAuthorization: req.headers['proxy-authorization'],
    });
    res.writeHead(status, status === 407 ? { 'proxy-authenticate': 'Basic realm="corp"' } : {});
    res.end();
  });
  server.on('connect', (req, client: Socket) => {
    calls.push({
      kind: 'connect',
      method: 'CONNECT',
      target: req.url ?? '',
      proxyAuthorization: req.headers['proxy-authorization'],
    });
    client.end(answer());
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('error', () => socket.destroy());
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    calls,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
