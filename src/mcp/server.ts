import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { AgentPolicy } from '../config/agents.ts';
import { type McpDeps, registerTools } from './tools.ts';

/** What an agent reads first: how asking works here. */
const INSTRUCTIONS =
  'cloudops resizes and restores VMs of the cloud hosting service under the team’s rules. Plan with plan_resize ' +
  '(nothing is created), ask with request_resize or request_restore: every request is posted in the project’s ' +
  'Slack channel and a person approves it there. Follow a request with get_request and wait_seconds.';

/** An MCP server with cloudops's tools, for one authenticated agent. */
export function createAgentServer(deps: McpDeps, agent: AgentPolicy, version: string): McpServer {
  // Logging is declared so that a client may set its level; the tools send no log notifications.
  const server = new McpServer(
    { name: 'cloudops', version },
    { instructions: INSTRUCTIONS, capabilities: { logging: {} } },
  );
  registerTools(server, deps, agent);
  return server;
}
