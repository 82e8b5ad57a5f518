import { createServer, type Server } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { serveProc } from './proc.ts';

/**
 * The baseline of the mcp scenario, in a process of its own: a bare SDK server answering a no-op tool over
 * Streamable HTTP, stateless like the bot's (a fresh server and transport per POST), without any token check.
 */
let server: Server | undefined;

serveProc(
  {
    async start() {
      server = createServer((req, res) => {
        const mcp = new McpServer({ name: 'bare', version: '1.0.0' });
        mcp.registerTool('noop', { description: 'does nothing' }, async () => ({
          content: [{ type: 'text', text: 'ok' }],
          structuredContent: { ok: true },
        }));
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
        res.on('close', () => {
          void transport.close();
          void mcp.close();
        });
        void mcp.connect(transport).then(() => transport.handleRequest(req, res));
      });
      await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
      const address = server.address();
      return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/mcp`;
    },
  },
  async () => {
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  },
);
