import { createServer, request, type Server } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAgentToken, tokenHash } from '../../src/config/agents.ts';
import { CHANNELS, type Harness, PROD_UUID, startHarness, TEAM, USERS } from '../helpers/harness.ts';
import { runProcess } from '../helpers/run-process.ts';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const TOKEN = newAgentToken();

const POLICY = `
workspace: ${TEAM}
approvers: [${USERS.lead}]
projects:
  - name: shop-prod
    uuid: ${PROD_UUID}
    cluster: zone-1
    channels: [${CHANNELS.prod}]
agents:
  - { name: conformance, token_sha256: ${tokenHash(TOKEN)}, on_behalf_of: ${USERS.dev}, projects: [shop-prod] }
`;

let h: Harness;
let proxy: Server;
let proxyUrl: string;

beforeAll(async () => {
  h = await startHarness({ policyYaml: POLICY, env: () => ({ MCP_PORT: '0' }) });
  const port = h.bot.mcpPort;
  // The suite has no option for a bearer token: a pass-through proxy adds the agent's, and changes nothing else.
  proxy = createServer((req, res) => {
    const upstream = request(
      {
        host: '127.0.0.1',
        port,
        path: req.url,
        method: req.method,
        // The Host and Origin the suite sent are passed on: its DNS-rebinding scenario checks the bot's own answer.
        headers: { ...req.headers, authorization: `Bearer ${TOKEN}` },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', () => resolve()));
  const address = proxy.address();
  proxyUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/mcp`;
});

afterAll(async () => {
  proxy?.closeAllConnections();
  await new Promise<void>((resolve) => (proxy ? proxy.close(() => resolve()) : resolve()));
  await h?.close();
});

describe('the MCP conformance suite', () => {
  it('passes every server scenario but those needing the suite’s reference tools, prompts and resources', async () => {
    const result = await runProcess(
      process.execPath,
      [
        join(repo, 'node_modules/@modelcontextprotocol/conformance/dist/index.js'),
        'server',
        '--url',
        proxyUrl,
        '--expected-failures',
        join(repo, 'test/fixtures/mcp-conformance-expected-failures.yml'),
      ],
      { cwd: repo, timeoutMs: 240_000 },
    );
    // Its report (with a "✗" line for each expected failure) is shown only when the run fails.
    const report = `${result.stdout}\n${result.stderr}`.split('\n').slice(-80).join('\n');
    expect(result.code, `mcp-conformance:\n${report}`).toBe(0);
  }, 300_000);
});
