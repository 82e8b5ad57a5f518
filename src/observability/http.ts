import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Metrics } from './metrics.ts';

/** What readiness depends on: Redis answering, the policy loaded, and in Socket Mode the link to Slack up. */
export interface Readiness {
  redisPing(): Promise<boolean>;
  /** On a Redis Cluster: whether every slot is served, and the one line saying so (used instead of the ping). */
  redisCluster?: () => Promise<{ ok: boolean; line: string }>;
  policyLoaded(): boolean;
  /** The version of the policy in force (12 hex digits), shown in the body. */
  policyVersion?: () => string;
  /** Socket Mode only: whether the link to Slack is up. Undefined elsewhere (not part of readiness). */
  slackConnected?: () => boolean;
  /** Whether the last check of the cloud API passed; reported in the body only, never a reason for 503. */
  cloudUp?: () => boolean;
  /** Refreshes gauges that are read on scrape (queue depth). */
  beforeScrape?(): Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** How long `/readyz` waits for Redis to answer PING before reporting it unreachable. */
export const READY_PING_TIMEOUT_MS = 1000;

function send(res: ServerResponse, status: number, body: string, type = 'application/json'): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(body);
}

/** `/healthz` and `/readyz`, served on PORT (by Bolt's HTTP receiver, or by a small server of their own). */
export function healthHandlers(readiness: Readiness): Record<string, Handler> {
  return {
    '/healthz': (_req, res) => send(res, 200, JSON.stringify({ status: 'ok' })),
    '/readyz': (_req, res) => {
      let timer: NodeJS.Timeout | undefined;
      let redisCluster: string | undefined;
      const cluster = readiness.redisCluster?.().then((health) => {
        redisCluster = health.line;
        return health.ok;
      });
      const ping = (cluster ?? readiness.redisPing()).catch(() => false);
      const timeout = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), READY_PING_TIMEOUT_MS);
      });
      void Promise.race([ping, timeout]).then((redis) => {
        clearTimeout(timer);
        const policy = readiness.policyLoaded();
        const slack = readiness.slackConnected?.();
        const cloud = readiness.cloudUp?.();
        const ready = redis && policy && slack !== false;
        send(
          res,
          ready ? 200 : 503,
          JSON.stringify({
            status: ready ? 'ready' : 'not ready',
            redis,
            redisCluster,
            policy,
            policyVersion: readiness.policyVersion?.(),
            slack,
            cloud,
          }),
        );
      });
    },
  };
}

/** `/metrics` (Prometheus text), served on METRICS_PORT only: it has no authentication. */
export function metricsHandlers(readiness: Readiness, metrics: Metrics): Record<string, Handler> {
  return {
    '/metrics': (_req, res) => {
      void (async () => {
        await readiness.beforeScrape?.().catch(() => undefined);
        send(res, 200, await metrics.registry.metrics(), metrics.registry.contentType);
      })().catch(() => send(res, 500, JSON.stringify({ status: 'metrics unavailable' })));
    },
  };
}

/** The health handlers as Bolt custom routes (HTTP mode). */
export function healthRoutes(readiness: Readiness) {
  return Object.entries(healthHandlers(readiness)).map(([path, handler]) => ({
    path,
    method: 'GET',
    handler,
  }));
}

/**
 * Every HTTP server of the bot (Bolt's in HTTP mode, the health and page server otherwise) reads a request's headers
 * within 10 s and the whole request within 30 s, and checks both every 2 s: a client that trickles a request in (or
 * never finishes it) holds a connection that long at most, not Node's minutes.
 */
export const SERVER_TIMEOUTS = {
  headersTimeout: 10_000,
  requestTimeout: 30_000,
  keepAliveTimeout: 5_000,
  connectionsCheckingInterval: 2_000,
} as const;

/**
 * A small GET-only server for `handlers` (the health routes where Bolt serves no HTTP, and `/metrics` always), and
 * whatever `more` answers (true when it did: the verification page in Socket Mode). Listens on every interface
 * unless `host` is given.
 */
export async function startRouteServer(
  port: number,
  handlers: Record<string, Handler>,
  host?: string,
  more?: (req: IncomingMessage, res: ServerResponse) => boolean,
): Promise<Server> {
  const server = createServer(SERVER_TIMEOUTS, (req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const handler = req.method === 'GET' ? handlers[path] : undefined;
    if (handler) handler(req, res);
    else if (!more?.(req, res)) send(res, 404, JSON.stringify({ status: 'not found' }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

/** The health routes on a server of their own (Socket Mode, worker and scheduler roles). */
export function startHealthServer(
  port: number,
  readiness: Readiness,
  host?: string,
  more?: (req: IncomingMessage, res: ServerResponse) => boolean,
): Promise<Server> {
  return startRouteServer(port, healthHandlers(readiness), host, more);
}
