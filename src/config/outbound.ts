/**
 * Every outbound call's way out: directly, or through the forward proxy `HTTPS_PROXY` / `HTTP_PROXY` name, except for
 * the hosts `NO_PROXY` lists (docs/configuration.md#outbound-proxy). undici's own `EnvHttpProxyAgent` carries every
 * client (Slack Web API, Socket Mode's WebSocket, uploads, the cloud API, the OTLP export, the audit export, SSO),
 * given the values parsed here, never `process.env` behind its back, so a test or a `.env` file decides.
 */
import { Agent, type Dispatcher, EnvHttpProxyAgent, Pool, fetch as undiciFetch } from 'undici';

/** The three variables, as parsed by the environment schema (lower-case names win over upper-case ones). */
export interface ProxyEnv {
  HTTPS_PROXY?: string | undefined;
  HTTP_PROXY?: string | undefined;
  NO_PROXY?: string | undefined;
}

/** Whether any proxy is configured at all; without one every call goes directly, as before. */
export function proxyConfigured(proxy: ProxyEnv): boolean {
  return Boolean(proxy.HTTPS_PROXY || proxy.HTTP_PROXY);
}

/**
 * The undici dispatcher for outbound calls: an `Agent` with `options` when no proxy is set, else an
 * `EnvHttpProxyAgent` with the same options that sends each request through the proxy for its scheme (an https
 * call without `HTTPS_PROXY` uses `HTTP_PROXY`) unless `NO_PROXY` lists its host. The caller closes it.
 */
export function outboundDispatcher(proxy: ProxyEnv, options: Agent.Options = {}): Dispatcher {
  if (!proxyConfigured(proxy)) return new Agent(options);
  return new EnvHttpProxyAgent({
    ...options,
    clientFactory: tunnelClient,
    // Empty strings, not undefined: undici would otherwise read process.env itself.
    httpProxy: proxy.HTTP_PROXY ?? '',
    httpsProxy: proxy.HTTPS_PROXY ?? '',
    noProxy: proxy.NO_PROXY ?? '',
  });
}

/**
 * The proxy answered something other than success to a CONNECT, or 407 to a forwarded request: it passed nothing on,
 * so the call surely never reached its target and may be retried as a refused connection is.
 */
export class ProxyRefusedError extends Error {
  readonly code = 'PROXY_REFUSED';
  constructor(readonly status: number) {
    super(`The proxy refused the call (HTTP ${status})`);
    this.name = 'ProxyRefusedError';
  }
}

/**
 * undici's client to the proxy, whose tunnel refusals become a {@link ProxyRefusedError}: undici 8 reports a CONNECT
 * answered with anything but 200 as a `RequestAbortedError` (UND_ERR_ABORTED), the same code as a call cancelled while
 * in flight, so the status would otherwise be lost and the call reported as perhaps sent.
 */
function tunnelClient(origin: string | URL, options: Pool.Options): Pool {
  const pool = new Pool(origin, options);
  const connect = pool.connect.bind(pool) as (
    params: Dispatcher.ConnectOptions,
  ) => Promise<Dispatcher.ConnectData>;
  const refusing = async (params: Dispatcher.ConnectOptions): Promise<Dispatcher.ConnectData> => {
    const data = await connect(params);
    if (data.statusCode === 200) return data;
    data.socket.on('error', () => undefined).destroy();
    throw new ProxyRefusedError(data.statusCode);
  };
  pool.connect = refusing as Pool['connect'];
  return pool;
}

/**
 * The status with which a proxy refused `error`'s call, or undefined when no proxy refused it. A tunnel's refusal is
 * ours ({@link ProxyRefusedError}); a 407 to a forwarded plain-HTTP request undici 8 reports only as an
 * `InvalidArgumentError` (UND_ERR_INVALID_ARG) whose message names the 407: no code or field tells it apart.
 */
export function proxyRefusal(error: unknown): number | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 6 && typeof current === 'object' && current !== null; depth++) {
    if (current instanceof ProxyRefusedError) return current.status;
    const { code, message, cause } = current as { code?: unknown; message?: unknown; cause?: unknown };
    if (code === 'UND_ERR_INVALID_ARG' && typeof message === 'string' && /\(407\)/.test(message)) return 407;
    current = cause;
  }
  return undefined;
}

/** A proxy's refusal in words for an operator, never with its credentials. */
export function proxyRefusalText(status: number): string {
  return status === 407
    ? 'the proxy asked for authentication (HTTP 407)'
    : `the proxy refused to pass the call on (HTTP ${status})`;
}

/** What to do about a proxy's refusal (doctor's advice, a start-up line). */
export function proxyRefusalAdvice(status: number): string {
  return status === 407
    ? 'check the user and password in HTTPS_PROXY / HTTP_PROXY (http://user:password@proxy:port), or NO_PROXY'
    : 'check that the proxy in HTTPS_PROXY / HTTP_PROXY allows this host, or list it in NO_PROXY';
}

/** What `@slack/web-api`'s WebClient passes to its `fetch` option (a string body: the bot uploads through SlackApi). */
export interface WebClientFetchInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string | FormData;
  redirect?: 'error' | 'follow' | 'manual';
  signal?: AbortSignal;
}

/** A WHATWG `fetch` over `dispatcher`, for clients that take a fetch function (`@slack/web-api`'s WebClient). */
export function fetchThrough(
  dispatcher: Dispatcher,
): (url: string | URL, init?: WebClientFetchInit) => ReturnType<typeof undiciFetch> {
  return (url, init = {}) => {
    const { body, ...rest } = init;
    // Node's global FormData and undici's are the same class at run time but two types; only strings are sent here.
    return undiciFetch(url, { ...rest, body: body as string | undefined, dispatcher });
  };
}

/**
 * The proxy a call to `url` goes through, without its credentials (`http://proxy.corp:3128`), or undefined when it
 * goes directly. The same rules as the dispatchers: `NO_PROXY` entries separated by commas or spaces; `*` is every
 * host; `example.com` and `.example.com` match the host and its subdomains, `*.example.com` subdomains only;
 * `host:port` only that port. `cloudops doctor` names it for each check.
 */
export function proxyFor(url: string | URL, proxy: ProxyEnv): string | undefined {
  const target = new URL(url);
  const secure = target.protocol === 'https:' || target.protocol === 'wss:';
  const through = secure ? (proxy.HTTPS_PROXY ?? proxy.HTTP_PROXY) : proxy.HTTP_PROXY;
  if (!through) return undefined;
  const host = target.hostname
    .replace(/^\[(.+)\]$/, '$1')
    .replace(/(.)\.$/, '$1')
    .toLowerCase();
  const port = Number(target.port) || (secure ? 443 : 80);
  if (bypassed(host, port, proxy.NO_PROXY ?? '')) return undefined;
  return withoutCredentials(through);
}

/** `url` with the user and password removed, for a log line or a doctor report. */
export function withoutCredentials(url: string): string {
  if (!URL.canParse(url)) return '(not a URL)';
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.href.replace(/\/$/, '');
}

function bypassed(host: string, port: number, noProxy: string): boolean {
  for (const entry of noProxy.split(/[,\s]/)) {
    if (!entry) continue;
    const bracketed = /^\[(.+)\]:(\d+)$/.exec(entry);
    const unbracketed = entry.replace(/^\[(.+)\]$/, '$1');
    const hostPort = (unbracketed.match(/:/g) ?? []).length === 1 ? /^(.+):(\d+)$/.exec(unbracketed) : null;
    const name = bracketed?.[1] ?? hostPort?.[1] ?? unbracketed;
    const onlyPort = Number(bracketed?.[2] ?? hostPort?.[2] ?? 0);
    if (onlyPort && onlyPort !== port) continue;
    if (name === '*') return true;
    const wildcard = name.startsWith('*');
    const suffix = name
      .replace(/^\*?\./, '')
      .replace(/^(.+)\.$/, '$1')
      .toLowerCase();
    if (!wildcard && host === suffix) return true;
    if (host.endsWith(`.${suffix}`)) return true;
  }
  return false;
}
