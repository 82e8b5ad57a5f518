import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Metrics } from './metrics.ts';

/** What readiness depends on: Redis answering, the policy loaded, and in Socket Mode the link to Slack up. */
export interface Readiness {
  redisPing(): Promise<boolean>;
  policyLoaded(): boolean;
  /** Socket Mode only: whether the link to Slack is up. Undefined elsewhere (not part of readiness). */
  slackConnected?: () => boolean;
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

/** `/healthz`, `/readyz` and `/metrics` handlers, shared by Bolt's HTTP receiver and the standalone server. */
export function healthHandlers(readiness: Readiness, metrics: Metrics): Record<string, Handler> {
  return {
    '/healthz': (_req, res) => send(res, 200, JSON.stringify({ status: 'ok' })),
    '/readyz': (_req, res) => {
      let timer: NodeJS.Timeout | undefined;
      const ping = readiness.redisPing().catch(() => false);
      const timeout = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), READY_PING_TIMEOUT_MS);
      });
      void Promise.race([ping, timeout]).then((redis) => {
        clearTimeout(timer);
        const policy = readiness.policyLoaded();
        const slack = readiness.slackConnected?.();
        const ready = redis && policy && slack !== false;
        send(
          res,
          ready ? 200 : 503,
          JSON.stringify({ status: ready ? 'ready' : 'not ready', redis, policy, slack }),
        );
      });
    },
    '/metrics': (_req, res) => {
      void (async () => {
        await readiness.beforeScrape?.().catch(() => undefined);
        send(res, 200, await metrics.registry.metrics(), metrics.registry.contentType);
      })().catch(() => send(res, 500, JSON.stringify({ status: 'metrics unavailable' })));
    },
  };
}

/** The same handlers as Bolt custom routes (HTTP mode). */
export function healthRoutes(readiness: Readiness, metrics: Metrics) {
  return Object.entries(healthHandlers(readiness, metrics)).map(([path, handler]) => ({
    path,
    method: 'GET',
    handler,
  }));
}

/**
 * A small server for the health routes where Bolt serves no HTTP (Socket Mode, worker and scheduler roles).
 * Listens on every interface unless `host` is given (tests pass 127.0.0.1).
 */
export async function startHealthServer(
  port: number,
  readiness: Readiness,
  metrics: Metrics,
  host?: string,
): Promise<Server> {
  const handlers = healthHandlers(readiness, metrics);
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const handler = req.method === 'GET' ? handlers[path] : undefined;
    if (handler) handler(req, res);
    else send(res, 404, JSON.stringify({ status: 'not found' }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
