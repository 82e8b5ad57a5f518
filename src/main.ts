/**
 * The composition root: per ROLE, the start functions of src/startup/ over one shared core, the health and metrics
 * servers, and `npm start`'s handling of signals. Nothing else decides what runs.
 */
// First: on a Node.js too old for the rest, one line and exit 1 before any other module runs.
import './startup/node-guard.ts';
import type { Server } from 'node:http';
import { hostname } from 'node:os';
import { pathToFileURL } from 'node:url';
import { withDotEnv } from './config/dotenv.ts';
import { ConfigError, type Env, loadEnv, missingForRole, missingLine } from './config/env.ts';
import type { Policy } from './config/policy.ts';
import { PolicyError } from './config/policy.ts';
import {
  FilePolicySource,
  fixedPolicySource,
  livePolicy,
  type PolicySource,
} from './config/policy-source.ts';
import { urlCredentials } from './config/redis-connection.ts';
import { SealKeyError, sealKeysFrom } from './config/seal-keys.ts';
import { unmetTicketLine } from './config/ticket-env.ts';
import { unmetVerifyLine } from './config/verification-uses.ts';
import { packageVersion } from './config/version.ts';
import { metricsHandlers, startHealthServer, startRouteServer } from './observability/http.ts';
import { createLogger, type Logger } from './observability/logger.ts';
import { createMetrics } from './observability/metrics.ts';
import { stopTracing, traceLogFields } from './observability/tracing.ts';
import { listening, StartupError } from './startup/checks.ts';
import { openCore } from './startup/core.ts';
import { StartupDeadline } from './startup/deadline.ts';
import type { Running, StartOptions } from './startup/options.ts';
import { policyReloader, watchPolicy } from './startup/policy-reload.ts';
import { closeServer, portOf, ShutdownStages } from './startup/stages.ts';
import { startProcessTracing, traceLifecycle, tracingSecrets } from './startup/tracing.ts';
import type { StartedWeb } from './startup/web.ts';

export type { Running, StartOptions } from './startup/options.ts';

/** SIGTERM ends the bot within 20 s, an API call in flight included (docs/operations.md#shutdown). */
export const SHUTDOWN_DEADLINE_MS = 20_000;
/**
 * What a start-up that cannot finish keeps of STARTUP_TIMEOUT_SECONDS to close what it opened before it exits
 * (docs/operations.md#start-up): on a machine at load 8–14 closing after an 8.5 s deadline ended the process at
 * 10.2–10.9 s, so the default 10 s leaves a 7.5 s deadline.
 */
export const STARTUP_CLOSE_MARGIN_MS = 2_500;

/**
 * Starts the roles ROLE names over one shared core: web first (when Slack or the port fails it, no worker has
 * started yet), then worker, then scheduler, then /metrics. Whatever fails or is aborted during start-up closes
 * everything opened so far before the start rejects.
 */
export async function startCloudops(
  env: Env,
  given: Policy | PolicySource,
  options: StartOptions = {},
): Promise<Running> {
  // A source a reload can swap (npm start), or a policy given as an object (tests, the demo): every role reads it
  // through one live view, so a reload reaches each at its next read.
  const source =
    'current' in given && typeof given.current === 'function' ? given : fixedPolicySource(given as Policy);
  const policy = livePolicy(source);
  const deadline = new StartupDeadline(options.startupTimeoutMs, options.signal, options.startupSpareMs);
  // Before anything opens: without its key a role could neither seal a decision nor check one.
  const sealKeys = sealKeysFrom(env.SEAL_KEY ?? '', env.SEAL_KEY_PREVIOUS);
  const secrets = [
    env.SLACK_BOT_TOKEN,
    env.SLACK_APP_TOKEN,
    env.SLACK_SIGNING_SECRET,
    env.CLOUD_API_KEY,
    env.AUDIT_WEBHOOK_SECRET,
    env.JIRA_API_TOKEN,
    env.JIRA_TOKEN,
    env.SERVICENOW_PASSWORD,
    env.OIDC_CLIENT_SECRET,
    env.SEAL_KEY,
    env.SEAL_KEY_PREVIOUS,
    env.REDIS_SENTINEL_PASSWORD,
    ...urlCredentials(env.REDIS_URL),
    ...urlCredentials(env.AUDIT_WEBHOOK_URL),
    ...urlCredentials(env.OTEL_EXPORTER_OTLP_ENDPOINT),
    ...urlCredentials(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT),
    ...urlCredentials(env.HTTPS_PROXY),
    ...urlCredentials(env.HTTP_PROXY),
    ...tracingSecrets(env),
  ].filter((s): s is string => s !== undefined);
  const metrics = createMetrics();
  // Tracing before the logger, whose lines then carry the trace ids; the SDK's warnings go to that logger.
  let tracingLog: Logger | undefined;
  const tracing = await startProcessTracing(env, metrics, () => tracingLog, packageVersion());
  const logger =
    options.logger ??
    createLogger({ level: env.LOG_LEVEL, secrets, traceFields: tracing ? traceLogFields : undefined });
  tracingLog = logger;
  const role = env.ROLE;
  logger.info({ role }, 'cloudops starting');
  const stages = new ShutdownStages(logger);
  // Closed last, so the spans of the shutdown itself are exported too, within what is left of its deadline.
  if (tracing) stages.connections.push((budget) => stopTracing(budget));

  try {
    if (deadline.signal.aborted) throw deadline.signal.reason;
    const core = await openCore(env, policy, options, {
      logger,
      metrics,
      secrets,
      sealKeys,
      stages,
      deadline,
      policySource: source,
    });
    const reload =
      source instanceof FilePolicySource
        ? policyReloader({
            source,
            redis: core.fastRedis,
            prefix: core.prefix,
            audit: core.audit,
            logger,
            now: core.now,
          })
        : undefined;
    if (reload && env.POLICY_WATCH === '1' && source instanceof FilePolicySource) {
      const unwatch = watchPolicy(source.path, reload, logger);
      stages.intake.push(async () => unwatch());
    }
    if (tracing) for (const lifecycle of [core.requests, core.workerRequests]) traceLifecycle(lifecycle);
    const socketMode = env.SLACK_APP_TOKEN !== undefined && core.runs('web');
    let web: StartedWeb | undefined;
    // Socket Mode: not ready until the link is up, and again not while it is lost.
    if (socketMode) core.readiness.slackConnected = () => web?.app.connected?.() === true;
    let port: number | undefined;
    // Health lives on PORT in every mode; Bolt serves it in HTTP mode. Elsewhere a server of its own answers from
    // now on: /healthz while the Socket Mode link connects, /readyz 503 until it is up.
    if (!core.runs('web') || socketMode) {
      const healthServer: Server = await deadline.step(
        'the health server on PORT',
        listening(
          'PORT',
          env.PORT,
          env.HOST,
          // In Socket Mode the web role's verification page is served here too, once the web role has started.
          startHealthServer(env.PORT, core.readiness, env.HOST, (req, res) => web?.page?.(req, res) ?? false),
        ),
      );
      stages.intake.push(() => closeServer(healthServer));
      port = portOf(healthServer, env.PORT);
      // Where health answers before the ready line says it (PORT=0 picks a port; the Socket Mode tests ask there).
      logger.debug({ port }, 'health server listening');
    }
    if (core.runs('web')) {
      // Each role's modules load only where it runs: a worker never loads Bolt, a web process never a worker.
      const { startWeb } = await import('./startup/web.ts');
      web = await startWeb(core, socketMode);
      port ??= web.port;
    }
    if (core.runs('worker')) (await import('./startup/worker.ts')).startWorker(core);
    if (core.runs('scheduler')) await (await import('./startup/scheduler.ts')).startScheduler(core);
    // /metrics has no authentication: its own port, on loopback unless METRICS_HOST says otherwise.
    const metricsServer: Server = await deadline.step(
      'the metrics server on METRICS_PORT',
      listening(
        'METRICS_PORT',
        env.METRICS_PORT,
        env.METRICS_HOST,
        startRouteServer(env.METRICS_PORT, metricsHandlers(core.readiness, metrics), env.METRICS_HOST),
      ),
    );
    stages.intake.push(() => closeServer(metricsServer));
    const metricsPort = portOf(metricsServer, env.METRICS_PORT);
    logger.info(
      {
        role,
        port,
        metricsPort,
        ...(web?.mcpPort !== undefined ? { mcpPort: web.mcpPort } : {}),
        mode: socketMode ? 'socket' : 'http',
        startupMs: Math.round(deadline.elapsed()),
      },
      'cloudops ready',
    );

    let stopping: Promise<void> | undefined;
    return {
      port,
      metricsPort,
      mcpPort: web?.mcpPort,
      metrics,
      policyVersion: () => source.version(),
      reloadPolicy: (why = 'SIGHUP') =>
        reload ? reload(why) : Promise.resolve({ kind: 'unchanged', version: source.version() }),
      stop() {
        stopping ??= stages
          .run(options.shutdownTimeoutMs ?? SHUTDOWN_DEADLINE_MS)
          .then(() => logger.info('cloudops stopped'));
        return stopping;
      },
    };
  } catch (error) {
    // Close what was opened, quickly: nothing has taken work yet, or only just.
    await stages.run(1_000);
    if ((error as Error)?.name === 'TimeoutError')
      throw new StartupError(`still waiting for ${deadline.waitingFor} when the start-up deadline passed`);
    throw error;
  }
}

/**
 * A line in the log's JSON shape, for the moments the bot's logger is not at hand: a signal can arrive before the
 * environment (and so LOG_LEVEL) is read.
 */
function logLine(level: 'info' | 'error', fields: Record<string, unknown>, msg: string): void {
  const line = {
    level,
    time: Date.now(),
    pid: process.pid,
    hostname: hostname(),
    name: 'cloudops',
    ...fields,
    msg,
  };
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** A stop asked for by a signal while the bot was still starting: not a failure. */
class StopRequested extends Error {
  override readonly name = 'StopRequested';
}

/**
 * `npm start`: load config, start per ROLE, stop cleanly on SIGTERM/SIGINT at any moment. A start-up that cannot
 * finish prints one line naming the cause and exits 1 within 10 s (docs/operations.md#start-up); a stop ends within 20 s.
 */
export async function main(rawEnv?: Record<string, string | undefined>): Promise<void> {
  const stopRequested = new AbortController();
  let running: Running | undefined;
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) return;
    signalled = true;
    // One deadline for the whole stop; the timer does not keep the process alive by itself.
    setTimeout(() => {
      logLine('error', { signal }, `did not stop within ${SHUTDOWN_DEADLINE_MS / 1000} s; exiting`);
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS - 250).unref();
    if (!running) {
      logLine('info', { signal }, `${signal} received while starting, stopping`);
      stopRequested.abort(new StopRequested(signal));
      return;
    }
    logLine('info', { signal }, `${signal} received, finishing running work`);
    void running.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // SIGHUP reads POLICY_FILE again (docs/policy.md#reload); Node's default would end the process.
  process.on('SIGHUP', () => {
    if (!running || signalled) return;
    void running
      .reloadPolicy('SIGHUP')
      .catch((error: unknown) => logLine('error', { err: String(error) }, 'policy reload failed'));
  });
  /** One line, exit 1. What start-up opened is closed by then; timers a Redis client left behind do not delay the exit. */
  const fail = (line: string) => {
    process.exitCode = 1;
    process.stderr.write(`cloudops: ${line}\n`, () => process.exit(1));
  };

  let env: Env;
  let source: FilePolicySource;
  try {
    // `.env` in the working directory (npm start: the clone), under the environment, which wins.
    env = loadEnv(rawEnv ?? withDotEnv(process.env, '.env'));
    const missing = missingForRole(env);
    if (missing.length > 0) {
      return fail(missingLine(env, missing));
    }
    source = await FilePolicySource.open(env.POLICY_FILE);
    // The web role issues verification links: a `verify:` it cannot serve would leave approvals nobody can give.
    const unmet =
      env.ROLE === 'all' || env.ROLE === 'web'
        ? await unmetVerifyLine(env, source.current(), env.POLICY_FILE)
        : undefined;
    if (unmet) return fail(unmet);
    const noTickets = await unmetTicketLine(env, source.current(), env.POLICY_FILE);
    if (noTickets) return fail(noTickets);
  } catch (error) {
    if (error instanceof ConfigError || error instanceof PolicyError || error instanceof SealKeyError)
      return fail(error.message);
    throw error;
  }
  // The deadline counts from the process's start: loading the code is part of starting.
  const deadlineMs = env.STARTUP_TIMEOUT_SECONDS * 1000 - STARTUP_CLOSE_MARGIN_MS;
  const startupLeft = Math.max(1_000, Math.round(deadlineMs - process.uptime() * 1000));
  try {
    running = await startCloudops(env, source, {
      signal: stopRequested.signal,
      startupTimeoutMs: startupLeft,
      // Time beyond the default 10 s goes to each wait too (Slack's auth.test, Redis), not only to the whole.
      startupSpareMs: (env.STARTUP_TIMEOUT_SECONDS - 10) * 1000,
    });
  } catch (error) {
    // Stopped while starting: what was opened is closed; a call still pending (Slack's auth.test) is dropped.
    if (error instanceof StopRequested) process.exit(0);
    return fail(`could not start: ${(error as Error).message}`);
  }
  if (signalled) {
    // A signal arrived in the moment between the start finishing and `running` being set.
    await running.stop();
    process.exit(0);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
}
