import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { AgentPolicy } from '../config/agents.ts';
import { disabledRefusal, refusal } from './answers.ts';
import { INPUTS, type ToolArgs } from './inputs.ts';
import { INSTRUCTIONS } from './instructions.ts';
import { agentTools, type Handler, type McpDeps } from './tools.ts';

/** The tool names, a closed set (they alone reach logs as labels). */
export const TOOL_NAMES = Object.keys(INPUTS) as (keyof typeof INPUTS)[];

/** How many reads (the tools that only look) one agent may make in a sliding minute, on all processes together. */
export const READS_PER_MINUTE = 120;
/** The tools rated as reads; asks have `requests_per_hour`, and get_request and cancel_request read one request. */
const READ_TOOLS: ReadonlySet<string> = new Set(['list_clusters', 'get_cluster', 'list_vms', 'plan_resize']);

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

const DESCRIPTIONS: Record<keyof typeof INPUTS, { title: string; description: string; readOnly: boolean }> = {
  list_clusters: {
    title: 'List clusters',
    description: 'The active clusters with their hourly prices.',
    readOnly: true,
  },
  get_cluster: { title: 'Get a cluster', description: 'One cluster, its status and prices.', readOnly: true },
  list_vms: {
    title: 'List VMs',
    description: 'The VMs of a project that the policy file and the bot know of, with their known sizes.',
    readOnly: true,
  },
  plan_resize: {
    title: 'Plan a resize',
    description:
      'Checks a resize against the documented rules and shows its cost and the approval it would need. Nothing is created.',
    readOnly: true,
  },
  request_resize: {
    title: 'Request a resize',
    description:
      'Asks for a resize: posted in the project’s Slack channel, where a person approves it. Answers with the request id; follow it with get_request.',
    readOnly: false,
  },
  request_restore: {
    title: 'Request a restore',
    description:
      'Asks for a restore from a backup (it overwrites the VM’s disk): posted in Slack, where a person approves it.',
    readOnly: false,
  },
  get_request: {
    title: 'Get a request',
    description:
      'A request’s state, approvals, outcome and task id. With wait_seconds, answers as soon as its state changes (or when the time is up).',
    readOnly: true,
  },
  cancel_request: {
    title: 'Cancel a request',
    description:
      'Cancels a request this agent made, while it waits for approval, a scheduled time or a freeze.',
    readOnly: false,
  },
};

/**
 * Registers every tool on `server` for one authenticated agent. Each call first checks that the agent is not
 * disabled; a refusal is a tool error with the sentence a person would read.
 */
export function registerTools(server: McpServer, deps: McpDeps, agent: AgentPolicy): void {
  const tools = agentTools(deps, agent);
  for (const name of TOOL_NAMES) {
    const meta = DESCRIPTIONS[name];
    const handler = tools[name] as Handler<typeof name>;
    server.registerTool(
      name,
      {
        title: meta.title,
        description: meta.description,
        inputSchema: INPUTS[name],
        annotations: {
          readOnlyHint: meta.readOnly,
          destructiveHint: name === 'request_restore',
          openWorldHint: false,
        },
      },
      (async (args: ToolArgs<typeof name>, extra: { signal: AbortSignal }) => {
        const started = performance.now();
        let result: CallToolResult;
        let failed = false;
        try {
          result = (await deps.controls.isDisabled(agent.name))
            ? disabledRefusal(agent.name)
            : ((READ_TOOLS.has(name) ? await readLimited(deps, agent) : undefined) ??
              (await handler(args, extra.signal)));
        } catch (error) {
          deps.logger.error({ err: error, agent: agent.name, tool: name }, 'an MCP tool failed');
          failed = true;
          result = refusal(
            'cloudops could not answer just now (its database or the API); nothing was done. Try again.',
          );
        }
        // Only names from the policy and the closed set of tools: nothing the agent typed.
        const outcome = failed ? 'error' : result.isError ? 'refused' : 'ok';
        deps.metrics.mcpToolCalls.inc({ agent: agent.name, tool: name, outcome });
        deps.logger.info(
          {
            agent: agent.name,
            tool: name,
            outcome,
            ms: Math.round(performance.now() - started),
          },
          'mcp tool call',
        );
        return result;
      }) as never,
    );
  }
}

/** The refusal of a read past {@link READS_PER_MINUTE}, or undefined when the read is counted. */
async function readLimited(deps: McpDeps, agent: AgentPolicy): Promise<CallToolResult | undefined> {
  const taken = await deps.controls.takeRead(agent.name, READS_PER_MINUTE);
  if (taken.ok) return undefined;
  return refusal(
    `Not answered: agent ${agent.name} made its ${READS_PER_MINUTE} reads of the last minute; it may read again at ${taken.retryAt.toISOString()}.`,
  );
}
