/**
 * The agents' surface (docs/agents.md): the MCP server at `/mcp` on MCP_HOST:MCP_PORT, started by the web role over
 * its core. `cloudops mcp` (src/mcp/stdio-client.ts) is a client of this endpoint, never a second server.
 */
import type { Server } from 'node:http';
import { duplicateRedis, type RedisClient } from '../config/redis-connection.ts';
import { packageVersion } from '../config/version.ts';
import { AgentControls } from '../mcp/agent-state.ts';
import { startMcpHttp } from '../mcp/http.ts';
import { RequestChanges } from '../mcp/request-changes.ts';
import type { McpDeps } from '../mcp/tools.ts';
import type { Logger } from '../observability/logger.ts';
import type { Core } from './core.ts';
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
    controls: new AgentControls(core.fastRedis, core.prefix, core.now, core.audit),
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
