import { packageVersion } from '../../config/version.ts';
import { BotLink, botEndpoint, McpClientConfigError, serveStdioClient } from '../../mcp/stdio-client.ts';
import { CliError, type CliIo } from '../io.ts';

/**
 * `cloudops mcp`: the bot's MCP tools over stdio for the agent whose token is CLOUDOPS_AGENT_TOKEN, each call
 * forwarded to the bot at CLOUDOPS_URL, until its client closes stdin (docs/agents.md#over-stdio).
 */
export async function mcpCommand(io: CliIo): Promise<number> {
  const { url, token, ignored } = io.mcp ?? { url: undefined, token: undefined, ignored: [] };
  let endpoint: URL;
  try {
    endpoint = botEndpoint(url);
  } catch (error) {
    if (error instanceof McpClientConfigError) throw new CliError(error.message);
    throw error;
  }
  if (!token) throw new CliError('CLOUDOPS_AGENT_TOKEN is not set: give the agent’s token (docs/agents.md)');
  // One line, on stderr (stdout is the protocol's): these stay unused here, and are better off this machine.
  if (ignored.length > 0)
    process.stderr.write(
      `cloudops mcp: ignoring ${ignored.join(', ')}: a client of the bot at CLOUDOPS_URL uses no Redis, cloud, policy, seal or Slack settings; remove them from this machine\n`,
    );
  await serveStdioClient(new BotLink(endpoint, token, io.env, packageVersion()), packageVersion());
  return 0;
}
