/**
 * Every outbound call's way out: directly, or through the forward proxy `HTTPS_PROXY` / `HTTP_PROXY` name, except for
 * the hosts `NO_PROXY` lists (docs/configuration.md#outbound-proxy). undici's own `EnvHttpProxyAgent` carries every
 * client (Slack Web API, Socket Mode's WebSocket, uploads, the cloud API, the OTLP export, the audit export, SSO),
 * given the values parsed here, never `process.env` behind its back, so a test or a `.env` file decides.
 */
import { Agent, type Dispatcher, EnvHttpProxyAgent, fetch as undiciFetch } from 'undici';

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
    // Empty strings, not undefined: undici would otherwise read process.env itself.
    httpProxy: proxy.HTTP_PROXY ?? '',
    httpsProxy: proxy.HTTPS_PROXY ?? '',
    noProxy: proxy.NO_PROXY ?? '',
  });
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
