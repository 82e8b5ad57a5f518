import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAgentToken, tokenHash } from '../../src/config/agents.ts';
import {
  CHANNELS,
  type Harness,
  PROD_UUID,
  PROD_VMS,
  startHarness,
  TEAM,
  USERS,
} from '../helpers/harness.ts';

// MCP bound to an address other than loopback (as in a container, behind a proxy): names vary there, so any Host is
// taken, but a browser's Origin must be one of MCP_ALLOWED_ORIGINS, `localhost` ones too (a page on the approver's
// own machine is still a web page). The bind is 0.0.0.0, so the bot is configured as
// non-loopback, and the test calls it on loopback.

const TOKEN = newAgentToken();
const BROWSER = 'https://agents.example.com';

/**
 * Bound to every address (0.0.0.0), so the bot counts itself non-loopback, and reached on loopback: a test sends
 * traffic to loopback only, never to the machine's own network address.
 */
function bindAddress(): { bind: string; reach: string } {
  return { bind: '0.0.0.0', reach: '127.0.0.1' };
}

const POLICY = `
workspace: ${TEAM}
currency: EUR
approvers: [${USERS.admin}]
projects:
  - name: shop-prod
    uuid: ${PROD_UUID}
    cluster: zone-1
    channels: [${CHANNELS.prod}]
    approvers: [${USERS.lead}]
    vms:
${PROD_VMS}
agents:
  - { name: bound-agent, token_sha256: ${tokenHash(TOKEN)}, on_behalf_of: ${USERS.dev}, projects: [shop-prod] }
`;

let h: Harness;
const { bind, reach } = bindAddress();

beforeAll(async () => {
  h = await startHarness({
    policyYaml: POLICY,
    env: () => ({ MCP_PORT: '0', MCP_HOST: bind, MCP_ALLOWED_ORIGINS: BROWSER }),
  });
});

afterAll(async () => {
  await h?.close();
});

function post(headers: Record<string, string>): Promise<Response> {
  return fetch(`http://${reach}:${h.bot.mcpPort}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${TOKEN}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_clusters' } }),
  });
}

describe(`MCP bound to a non-loopback address (${bind})`, () => {
  it('refuses a localhost Origin that MCP_ALLOWED_ORIGINS does not list', async () => {
    for (const origin of [
      'http://localhost',
      'http://localhost:3000',
      'http://127.0.0.1:8080',
      'http://[::1]',
    ]) {
      const got = await post({ origin });
      expect(got.status, origin).toBe(403);
      expect(await got.text()).toContain('Origin not allowed');
    }
  });

  it('serves a call without an Origin, or from a listed one, whatever Host it names', async () => {
    const plain = await post({});
    expect(plain.status).toBe(200);
    expect(await plain.text()).toContain('zone-1');
    const listed = await post({ origin: BROWSER });
    expect(listed.status).toBe(200);
    expect(listed.headers.get('access-control-allow-origin')).toBe(BROWSER);
  });
});
