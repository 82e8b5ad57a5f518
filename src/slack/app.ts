import type { Server } from 'node:http';
import { App, type CustomRoute, ErrorCode, HTTPReceiver, LogLevel } from '@slack/bolt';
import type { Env } from '../config/env.ts';
import { fetchThrough, outboundDispatcher, proxyConfigured } from '../config/outbound.ts';
import { redactQuery } from '../config/redis-connection.ts';
import { SERVER_TIMEOUTS } from '../observability/http.ts';
import { scrubSecrets } from '../observability/logger.ts';
import { tracingOn } from '../observability/tracing.ts';
import { register as registerApprove } from './actions/approve.ts';
import { register as registerBreakGlass } from './actions/break-glass.ts';
import { register as registerCancel } from './actions/cancel.ts';
import { register as registerLease } from './actions/lease.ts';
import { register as registerPasskeys } from './actions/passkeys.ts';
import { register as registerReject } from './actions/reject.ts';
import { register as registerResolve } from './actions/resolve.ts';
import { boltLogger } from './bolt-logger.ts';
import { register as registerCloud } from './commands/cloud.ts';
import type { SlackDeps } from './deps.ts';
import { register as registerHome } from './home/app-home-opened.ts';
import type { RedeliveryGuard } from './redelivery.ts';
import { createRouter } from './router.ts';
import { type ReconnectPolicy, SocketLink } from './socket-link.ts';
import { register as registerResizeStep } from './steps/request-resize.ts';
import { register as registerRestoreStep } from './steps/request-restore.ts';
import { registerTracing } from './tracing.ts';
import { register as registerResize } from './views/resize-submit.ts';
import { register as registerRestore } from './views/restore-submit.ts';
import { register as registerSchedule } from './views/schedule-submit.ts';

export interface SlackApp {
  app: App;
  /**
   * Starts listening: HTTP on `port` (0 picks a free one) at `host` (default `0.0.0.0`, every interface; `127.0.0.1`
   * keeps it on loopback), or the Socket Mode connection (both ignored).
   */
  start(port: number, host?: string): Promise<{ port?: number }>;
  stop(): Promise<void>;
  /** Socket Mode: whether the link to Slack is up now. Undefined in HTTP mode. */
  connected?: () => boolean;
}

/** Socket Mode's parts that live outside Bolt: the redelivery guard, the reconnect policy, a state listener. */
export interface SocketOptions {
  guard?: RedeliveryGuard;
  policy?: ReconnectPolicy;
  onState?(connected: boolean): void;
}

/** Where the HTTP receiver listens when no host is given: every interface, as before HOST existed. */
export const DEFAULT_HOST = '0.0.0.0';

/** Refuses requests from any other workspace than the policy's `workspace`. */
function registerWorkspaceGuard(app: App, deps: SlackDeps): void {
  const workspace = deps.policy.workspace;
  if (!workspace) return;
  app.use(async (args) => {
    const body = args.body as {
      team_id?: string;
      team?: { id?: string } | null;
      type?: string;
      command?: string;
    };
    const team = body.team_id ?? body.team?.id;
    if (team === workspace) return args.next();
    deps.logger.warn({ team }, 'request from another workspace refused');
    const ack = (args as { ack?: (response?: unknown) => Promise<void> }).ack;
    if (!ack) return;
    if (body.command)
      return ack({ response_type: 'ephemeral', text: 'cloudops is not set up for this workspace.' });
    return ack();
  });
}

/** Longest path a log line keeps: a scanner's junk URL stays one short line. */
const MAX_LOGGED_PATH = 200;

/** The path and query as typed, for the log: tokens, bearer credentials and credential-named query values scrubbed; clipped. */
function typedPath(url: string | undefined): string {
  const path = redactQuery(scrubSecrets(url ?? '/'));
  return path.length > MAX_LOGGED_PATH ? `${path.slice(0, MAX_LOGGED_PATH)}…` : path;
}

/**
 * The Bolt app with every `/cloud` surface registered. HTTP mode serves `POST /slack/events` (signatures checked by
 * Bolt: v0 HMAC, 5-minute window) plus `customRoutes`; when SLACK_APP_TOKEN is set, Socket Mode through a
 * {@link SocketLink} (reconnects with backoff, deliveries seen before not acted on again).
 */
export function createSlackApp(
  env: Env,
  deps: SlackDeps,
  customRoutes: CustomRoute[] = [],
  socket: SocketOptions = {},
): SlackApp {
  const logger = boltLogger(deps.logger);
  // Bolt's own WebClient (auth.test at start) goes through the outbound proxy too when one is set.
  const clientOptions = {
    slackApiUrl: env.SLACK_API_URL,
    retryConfig: { retries: 2, factor: 2, minTimeout: 200, maxTimeout: 2000 },
    ...(proxyConfigured(env) ? { fetch: fetchThrough(outboundDispatcher(env)) } : {}),
  };
  const link = env.SLACK_APP_TOKEN
    ? new SocketLink({
        appToken: env.SLACK_APP_TOKEN,
        apiUrl: env.SLACK_API_URL,
        logger: deps.logger,
        proxy: env,
        ...socket,
      })
    : undefined;
  const receiver =
    link ??
    new HTTPReceiver({
      signingSecret: env.SLACK_SIGNING_SECRET ?? '',
      endpoints: '/slack/events',
      customRoutes,
      logger,
      logLevel: LogLevel.WARN,
      // Bolt's own line has the path only inside its sentence; this one names method and path as fields.
      dispatchErrorHandler: ({ error, request, response }) => {
        const fields = { method: request.method, path: typedPath(request.url) };
        const unknownPath = (error as { code?: unknown }).code === ErrorCode.HTTPReceiverDeferredRequestError;
        if (unknownPath) deps.logger.info(fields, 'no such path; answered 404');
        else deps.logger.error({ ...fields, err: error }, 'a request failed; answered 500');
        response.writeHead(unknownPath ? 404 : 500);
        response.end();
      },
    });
  const app = new App({
    token: env.SLACK_BOT_TOKEN,
    // Bolt's default conversation store costs a rejected promise and an Error per event; nothing here reads it.
    convoStore: false,
    receiver,
    logger,
    logLevel: LogLevel.WARN,
    clientOptions,
    // auth.test runs at start(), not at construction, so a bad token fails start-up with a clear error.
    deferInitialization: true,
  });
  // First, so a request the guard refuses is traced too; with tracing off Bolt runs no extra middleware.
  if (tracingOn()) registerTracing(app);
  registerWorkspaceGuard(app, deps);
  registerCloud(app, deps);
  registerHome(app, deps);
  registerResizeStep(app, deps);
  registerRestoreStep(app, deps);
  const router = createRouter();
  registerResize(router, deps);
  registerSchedule(router, deps);
  registerRestore(router, deps);
  registerApprove(router, deps);
  registerReject(router, deps);
  registerCancel(router, deps);
  registerResolve(router, deps);
  registerLease(router, deps);
  registerBreakGlass(router, deps);
  registerPasskeys(router, deps);
  router.attach(app);
  app.error(async (error) => {
    deps.logger.error({ err: error }, 'unhandled error in a Slack handler');
  });

  return {
    app,
    async start(port, host = DEFAULT_HOST) {
      await app.init();
      const server = (await (link ? app.start() : app.start({ port, host }, SERVER_TIMEOUTS))) as
        | Server
        | undefined;
      const address = server?.address?.();
      return { port: typeof address === 'object' && address ? address.port : undefined };
    },
    async stop() {
      await app.stop();
    },
    connected: link ? () => link.connected : undefined,
  };
}
