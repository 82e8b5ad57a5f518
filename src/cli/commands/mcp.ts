import { McpStdioError, serveMcpStdio } from '../../startup/mcp.ts';
import { cliAuditContext } from '../audit-context.ts';
import { policyOf } from '../cloud.ts';
import { CliError, type CliIo } from '../io.ts';

/**
 * `cloudops mcp`: the MCP tools over stdio for the agent whose token is in CLOUDOPS_AGENT_TOKEN, until its client
 * closes stdin (docs/agents.md).
 */
export async function mcpCommand(io: CliIo, token: string | undefined): Promise<number> {
  const policy = await policyOf(io);
  try {
    await serveMcpStdio(io.env, policy, token, {}, cliAuditContext(io));
  } catch (error) {
    if (error instanceof McpStdioError) throw new CliError(error.message);
    throw error;
  }
  return 0;
}
