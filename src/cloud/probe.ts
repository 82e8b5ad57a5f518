/**
 * Whether the cloud API answers and takes the API key, asked with two reads: list clusters (no key) and get the
 * first listed cluster (the key). `cloudops doctor` and the start-up check (docs/troubleshooting.md) use it.
 * Nothing is changed at the provider; the key never appears in what is returned.
 */
import { request } from 'undici';
import { outboundDispatcher, type ProxyEnv, proxyRefusal, proxyRefusalText } from '../config/outbound.ts';

/** What the probe found. `date` is the API's `Date` header, for the clock check. */
export type CloudProbe =
  /** `proxyStatus`: a proxy refused the call with that status (407: it wants credentials), nothing reached the API. */
  | { reachable: false; why: string; proxyStatus?: number }
  | {
      reachable: true;
      clusters: number;
      /** true: the authenticated read passed; false: refused (`why` says how); undefined: no key to try. */
      keyAccepted: boolean | undefined;
      why?: string;
      date?: Date;
      /** Milliseconds from sending the list request to its answer, to weigh the clock check. */
      roundTripMs: number;
    };

/** Each read's limit, connection included: a probe must not hold a start-up or a doctor run. */
export const PROBE_TIMEOUT_MS = 5_000;

/** The authenticated read when no cluster is listed: an unknown name is a 404 once the key passed. */
const PLACEHOLDER_CLUSTER = 'cloudops-doctor-probe';

/**
 * Reads the API at `baseUrl` (CLOUD_API_URL) with `apiKey` (CLOUD_API_KEY). Never throws: a failure is
 * `{ reachable: false, why }` or `keyAccepted: false` with the HTTP status in `why`.
 */
export async function probeCloudApi(
  baseUrl: string,
  apiKey: string | undefined,
  timeoutMs = PROBE_TIMEOUT_MS,
  proxy: ProxyEnv = {},
): Promise<CloudProbe> {
  const base = baseUrl.replace(/\/+$/, '');
  if (!URL.canParse(base)) return { reachable: false, why: 'CLOUD_API_URL is not a URL' };
  const where = new URL(base).origin;
  // Its own short-lived pool: nothing stays open after the probe.
  const dispatcher = outboundDispatcher(proxy, { connect: { timeout: timeoutMs }, keepAliveTimeout: 1_000 });
  const read = (path: string, auth: boolean) =>
    request(`${base}${path}`, {
      method: 'GET',
      headers: { accept: 'application/json', ...(auth ? { authorization: `Bearer ${apiKey}` } : {}) },
      dispatcher,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
  try {
    const sentAt = performance.now();
    let list: Awaited<ReturnType<typeof read>>;
    try {
      list = await read('/cloud/cluster/', false);
    } catch (error) {
      const proxyStatus = proxyRefusal(error);
      const why = `${where} could not be reached${unreachedBecause(error)}`;
      return proxyStatus === undefined ? { reachable: false, why } : { reachable: false, why, proxyStatus };
    }
    const roundTripMs = performance.now() - sentAt;
    const date = parseDate(list.headers.date);
    const text = await list.body.text().catch(() => '');
    if (list.statusCode < 200 || list.statusCode >= 300)
      return {
        reachable: false,
        why: `${where} answered HTTP ${list.statusCode} to the cluster list instead of the list`,
      };
    const names = clusterNames(text);
    if (names === undefined)
      return { reachable: false, why: `${where} did not answer the cluster list with a JSON list` };
    const found = { reachable: true as const, clusters: names.length, date, roundTripMs };
    if (!apiKey) return { ...found, keyAccepted: undefined };
    const name = encodeURIComponent(names[0] ?? PLACEHOLDER_CLUSTER);
    let one: Awaited<ReturnType<typeof read>>;
    try {
      one = await read(`/cloud/cluster/${name}/`, true);
    } catch (error) {
      return {
        ...found,
        keyAccepted: false,
        why: `the authenticated read failed${unreachedBecause(error)}`,
      };
    }
    await one.body.dump().catch(() => undefined);
    if (one.statusCode === 401 || one.statusCode === 403)
      return { ...found, keyAccepted: false, why: `the API refused the key (HTTP ${one.statusCode})` };
    if ((one.statusCode >= 200 && one.statusCode < 300) || one.statusCode === 404)
      return { ...found, keyAccepted: true };
    return {
      ...found,
      keyAccepted: false,
      why: `the authenticated read answered HTTP ${one.statusCode}`,
    };
  } finally {
    await dispatcher.close().catch(() => undefined);
  }
}

/** The names in a cluster list (each record's `name`, else its `zone`), or undefined when it is not a list. */
function clusterNames(text: string): string[] | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(body)) return undefined;
  return body.flatMap((record) => {
    const { name, zone } = (record ?? {}) as { name?: unknown; zone?: unknown };
    const value = typeof name === 'string' ? name : zone;
    return typeof value === 'string' && value !== '' ? [value] : [];
  });
}

/** An HTTP `Date` header as a Date, or undefined. */
export function parseDate(value: string | string[] | undefined): Date | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined) return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : new Date(ms);
}

/**
 * What follows "could not be reached": ` (ECONNREFUSED)`, or `: the proxy asked for authentication (HTTP 407)` when a
 * proxy refused the call (undici's own code for that, UND_ERR_INVALID_ARG or UND_ERR_ABORTED, points elsewhere).
 */
export function unreachedBecause(error: unknown): string {
  const refused = proxyRefusal(error);
  return refused === undefined ? ` (${failureCode(error)})` : `: ${proxyRefusalText(refused)}`;
}

/** The transport failure's code (ECONNREFUSED, ENOTFOUND, a timeout), never its message. */
export function failureCode(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current; depth++) {
    const { code, name } = current as { code?: unknown; name?: unknown };
    if (typeof code === 'string') return code;
    if (name === 'TimeoutError' || name === 'AbortError') return 'no answer in time';
    current = (current as { cause?: unknown }).cause;
  }
  return (error as Error)?.name ?? 'unknown error';
}
