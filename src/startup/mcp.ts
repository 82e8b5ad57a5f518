/**
 * The agents' surface (docs/agents.md): the MCP server at `/mcp` on MCP_HOST:MCP_PORT, started by the web role over
 * its core; and `cloudops mcp`, the same tools over stdio for one agent on this machine, with the few parts of a core
 * it needs opened here.
 */
import type { Server } from 'node:http';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { agentForToken } from '../config/agents.ts';
import type { Env } from '../config/env.ts';
import type { Policy } from '../config/policy.ts';
import {
  describeRedis,
  duplicateRedis,
  type RedisClient,
  redisKeyPrefix,
  redisTarget,
} from '../config/redis-connection.ts';
import { packageVersion } from '../config/version.ts';
import { AgentControls } from '../mcp/agent-state.ts';
import { startMcpHttp } from '../mcp/http.ts';
import { RequestChanges } from '../mcp/request-changes.ts';
import { createAgentServer } from '../mcp/server.ts';
import type { McpDeps } from '../mcp/tools.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import { createMetrics } from '../observability/metrics.ts';
import { createUserGroups } from '../slack/user-groups.ts';
import { openCloudClient, openQueues, openSlackApi } from './clients.ts';
import type { Core } from './core.ts';
import { openRedisClients } from './redis-clients.ts';
import { openRequests } from './requests.ts';
import { portOf } from './stages.ts';

/** How long a stopping MCP server lets answers in hand finish before it cuts its connections. */
const DRAIN_MS = 1_000;

/** A connection of its own for the blocking read of request changes (a blocked connection serves nothing else). */
function changesConnection(redis: RedisClient, logger: Logger): RedisClient {
  const connection = duplicateRedis(redis, { enableOfflineQueue: true, maxRetriesPerRequest: null });
  connection.on('error', (error: Error) => logger.debug({ err: error }, 'MCP change tail: redis problem'));
  return connection;
}

/**
 * Starts the MCP server of the web role when MCP_PORT is set; resolves with its port (undefined when off). Its
 * shutdown wakes the agents waiting in get_request (they get the state as it is), then closes the port.
 */
export async function startMcp(core: Core): Promise<number | undefined> {
  const { env, stages, logger } = core;
  if (env.MCP_PORT === undefined) return undefined;
  const changes = new RequestChanges(changesConnection(core.fastRedis, logger), core.prefix, logger);
  const deps: McpDeps = {
    policy: core.policy,
    store: core.store,
    requests: core.requests,
    vmFacts: core.vmFacts,
    prices: core.prices,
    controls: new AgentControls(core.fastRedis, core.prefix, core.now),
    changes,
    now: core.now,
    logger,
    metrics: core.metrics,
  };
  const server: Server = await core.deadline.step(
    'the MCP server on MCP_PORT',
    startMcpHttp(deps, {
      port: env.MCP_PORT,
      host: env.MCP_HOST,
      allowedOrigins: env.MCP_ALLOWED_ORIGINS?.split(',').map((o) => o.trim()),
      version: packageVersion(),
    }),
  );
  stages.intake.push(async () => {
    changes.close();
    await new Promise<void>((resolve) => {
      const cut = setTimeout(() => server.closeAllConnections(), DRAIN_MS);
      server.close(() => {
        clearTimeout(cut);
        resolve();
      });
      server.closeIdleConnections();
    });
  });
  if (core.policy.agents.length === 0)
    logger.warn('MCP_PORT is set but the policy declares no agents: every call gets 401');
  const port = portOf(server, env.MCP_PORT);
  logger.info(
    { mcpPort: port, host: env.MCP_HOST, agents: core.policy.agents.length },
    'MCP server listening',
  );
  return port;
}

/** How `cloudops mcp` ended. */
export class McpStdioError extends Error {
  override readonly name = 'McpStdioError';
  readonly code = 'MCP_STDIO_FAILED';
}

/**
 * `cloudops mcp`: serves the tools over stdin/stdout for the agent whose token is `token` (CLOUDOPS_AGENT_TOKEN),
 * until stdin closes. Requests go to the same Redis, queues and lifecycle as the bot's; its workers run them and
 * its web role is not needed. Logs go to stderr: stdout is the protocol's.
 */
export async function serveMcpStdio(
  env: Env,
  policy: Policy,
  token: string | undefined,
  streams: { stdin?: NodeJS.ReadableStream; stdout?: NodeJS.WritableStream } = {},
): Promise<void> {
  const agent = token ? agentForToken(policy.agents, token) : undefined;
  if (!agent)
    throw new McpStdioError(
      token
        ? 'CLOUDOPS_AGENT_TOKEN is not the token of an agent in the policy (docs/agents.md)'
        : 'CLOUDOPS_AGENT_TOKEN is not set: give the agent’s token (docs/agents.md)',
    );
  const secrets = [env.SLACK_BOT_TOKEN, env.CLOUD_API_KEY, token].filter((s): s is string => s !== undefined);
  const logger = createLogger(
    { level: env.LOG_LEVEL === 'info' ? 'warn' : env.LOG_LEVEL, secrets },
    process.stderr,
  );
  const now = () => new Date();
  const target = redisTarget(env);
  const { fast: redis, queue: queueRedis } = openRedisClients(target, logger, { lazyConnect: true });
  const cloud = openCloudClient(env);
  const slack = openSlackApi(env, logger);
  const queues = openQueues(queueRedis, redisKeyPrefix(env));
  const changes = new RequestChanges(changesConnection(redis, logger), redisKeyPrefix(env), logger);
  try {
    await redis.connect().catch((error: NodeJS.ErrnoException) => {
      const { variable, where } = describeRedis(target);
      throw new McpStdioError(`${variable}: cannot reach ${where} (${error.code ?? error.message})`);
    });
    const metrics = createMetrics({ defaultMetrics: false });
    const { store, vmFacts, prices, requests } = openRequests({
      redis,
      queues,
      cloud,
      policy,
      prefix: redisKeyPrefix(env),
      now,
      logger,
      metrics,
      secrets,
      userGroups: env.SLACK_BOT_TOKEN ? createUserGroups(slack, { logger }) : undefined,
    });
    const deps: McpDeps = {
      policy,
      store,
      requests,
      vmFacts,
      prices,
      controls: new AgentControls(redis, redisKeyPrefix(env), now),
      changes,
      now,
      logger,
      metrics,
    };
    const server = createAgentServer(deps, agent, packageVersion());
    const transport = new StdioServerTransport(
      streams.stdin as NodeJS.ReadStream | undefined,
      streams.stdout as NodeJS.WriteStream | undefined,
    );
    const closed = new Promise<void>((resolve) => {
      transport.onclose = () => resolve();
      (streams.stdin ?? process.stdin).once('end', () => resolve());
    });
    await server.connect(transport);
    logger.info({ agent: agent.name }, 'MCP over stdio ready');
    await closed;
    await server.close();
  } finally {
    changes.close();
    await Promise.allSettled([queues.close(), cloud.close(), slack.close()]);
    redis.disconnect();
    queueRedis.disconnect();
  }
}
