import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { connect as connectTcp } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type CallToolResult, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAgentToken, tokenHash } from '../../src/config/agents.ts';
import { AgentControls } from '../../src/mcp/agent-state.ts';
import { MAX_OPEN_PER_AGENT } from '../../src/mcp/http.ts';
import { READS_PER_MINUTE } from '../../src/mcp/server.ts';
import {
  CHANNELS,
  type Harness,
  PROD_UUID,
  PROD_VMS,
  startHarness,
  TEAM,
  USERS,
} from '../helpers/harness.ts';
import { testRedisUrl } from '../helpers/redis.ts';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);

/** The agents' tokens: only their hashes are in the policy. */
const TOKENS = {
  deploy: newAgentToken(),
  thrifty: newAgentToken(),
  reader: newAgentToken(),
  crowd: newAgentToken(),
  other: newAgentToken(),
  gone: newAgentToken(),
};
const BROWSER = 'https://agents.example.com';

const POLICY = `
workspace: ${TEAM}
currency: EUR
approvers: [${USERS.admin}]
projects:
  - name: shop-prod
    uuid: ${PROD_UUID}
    cluster: zone-1
    channels: [${CHANNELS.prod}]
    approvers: [${USERS.lead}, ${USERS.lead2}]
    vms:
${PROD_VMS}
agents:
  - { name: deploy-agent, token_sha256: ${tokenHash(TOKENS.deploy)}, on_behalf_of: ${USERS.dev}, projects: [shop-prod], may: [resize_up, resize_down, restore], requests_per_hour: 50 }
  - { name: thrifty-agent, token_sha256: ${tokenHash(TOKENS.thrifty)}, on_behalf_of: ${USERS.dev2}, projects: [shop-prod], max_monthly_delta: 5, requests_per_hour: 1 }
  - { name: reader-agent, token_sha256: ${tokenHash(TOKENS.reader)}, on_behalf_of: ${USERS.dev2}, projects: [] }
  - { name: crowd-agent, token_sha256: ${tokenHash(TOKENS.crowd)}, on_behalf_of: ${USERS.dev2}, projects: [shop-prod] }
  - { name: other-agent, token_sha256: ${tokenHash(TOKENS.other)}, on_behalf_of: ${USERS.dev2}, projects: [shop-prod] }
  - { name: gone-agent, token_sha256: ${tokenHash(TOKENS.gone)}, on_behalf_of: ${USERS.dev2}, projects: [shop-prod], may: [resize_up] }
`;

let h: Harness;
let mcpUrl: string;
let dir: string;
let policyFile: string;
const clients: Client[] = [];

beforeAll(async () => {
  h = await startHarness({
    role: 'all',
    policyYaml: POLICY,
    env: () => ({ MCP_PORT: '0', MCP_ALLOWED_ORIGINS: BROWSER }),
  });
  mcpUrl = `http://127.0.0.1:${h.bot.mcpPort}/mcp`;
  dir = await mkdtemp(join(tmpdir(), 'cloudops-mcp-hardening-'));
  policyFile = join(dir, 'policy.yml');
  await writeFile(policyFile, POLICY);
});

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** `cloudops …` as an operator runs it, on the bot's Redis and policy. */
function cli(...args: string[]) {
  const env = {
    PATH: process.env.PATH ?? '',
    POLICY_FILE: policyFile,
    REDIS_URL: testRedisUrl(),
    REDIS_PREFIX: h.prefix,
  };
  return run(process.execPath, [join(repo, 'bin/cloudops.mjs'), ...args], { env });
}

/** The SDK's own client over Streamable HTTP with `token` as its bearer. */
async function connect(token: string): Promise<Client> {
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport as Transport);
  clients.push(client);
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args }, undefined, { timeout: 90_000 })) as CallToolResult;
}

const textOf = (result: CallToolResult) =>
  result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
const requestOf = (result: CallToolResult) =>
  result.structuredContent as unknown as { request_id: string; state: string };

/** A JSON-RPC call as raw HTTP, for what the protocol itself is about (methods, headers, CORS). */
function raw(
  method: string,
  headers: Record<string, string>,
  body?: unknown,
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(mcpUrl, {
    method,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
}
/** A list_clusters call over node:http, which (unlike fetch) sends the `Host` header it is given. */
function postWithHost(host: string, token: string): Promise<{ status: number; body: string }> {
  const body = JSON.stringify(toolCall(1, 'list_clusters', {}));
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: h.bot.mcpPort,
        path: '/mcp',
        method: 'POST',
        headers: {
          host,
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const toolCall = (id: number, name: string, args: Record<string, unknown>) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
});

describe('reads', () => {
  it('get_cluster on an API 500 says the cluster could not be read, not that a call may have taken effect', async () => {
    // The first read of this bot: its price cache is empty, so the list is asked for and fails.
    h.sim.fault('list', { kind: 'status', status: 500 });
    const client = await connect(TOKENS.reader);
    const failed = await call(client, 'get_cluster', { name: 'zone-1' });
    expect(failed.isError).toBe(true);
    expect(textOf(failed)).toMatch(/^Cluster “zone-1” could not be read: the service failed with HTTP 500/);
    expect(textOf(failed)).not.toMatch(/took effect/);
  });

  it('get_cluster is served from the price cache: many calls, no keyed API call, at most one list', async () => {
    h.sim.resetRecords();
    const client = await connect(TOKENS.reader);
    for (let i = 0; i < 40; i++) {
      const got = await call(client, 'get_cluster', { name: 'zone-1' });
      expect(got.isError, textOf(got)).toBeFalsy();
      expect(got.structuredContent).toMatchObject({
        cluster: { name: 'zone-1', status: 'active', prices: { ram: '0.0040' } },
      });
    }
    const unknown = await call(client, 'get_cluster', { name: 'zone-404' });
    expect(unknown.isError).toBe(true);
    expect(textOf(unknown)).toBe('There is no active cluster “zone-404”; list_clusters names them.');
    expect(h.sim.calls.filter((c) => c.route === 'getA' || c.route === 'getB')).toHaveLength(0);
    expect(h.sim.calls.filter((c) => c.route === 'list').length).toBeLessThanOrEqual(1);
    console.info(
      `mcp-hardening: 41 get_cluster calls made ${h.sim.calls.length} cloud API calls (${h.sim.calls.map((c) => c.route).join(', ') || 'none'})`,
    );
  });

  it('reads are rated per agent: past READS_PER_MINUTE the agent is told when it may read again; others read on', async () => {
    const client = await connect(TOKENS.reader);
    let refused: CallToolResult | undefined;
    for (let i = 0; i < READS_PER_MINUTE + 5 && !refused; i++) {
      const got = await call(client, i % 2 === 0 ? 'get_cluster' : 'list_clusters', { name: 'zone-1' });
      if (got.isError) refused = got;
    }
    expect(refused && textOf(refused)).toMatch(
      new RegExp(
        `^Not answered: agent reader-agent made its ${READS_PER_MINUTE} reads of the last minute; it may read again at \\d{4}-\\d\\d-\\d\\dT`,
      ),
    );
    const other = await connect(TOKENS.other);
    expect((await call(other, 'get_cluster', { name: 'zone-1' })).isError).toBeFalsy();
  });
});

describe('HTTP', () => {
  it('GET /mcp answers 405 at once for any token, a disabled agent’s too: the endpoint is stateless', async () => {
    const controls = new AgentControls(h.redis, h.prefix);
    await controls.setDisabled('gone-agent', true, 'test');
    try {
      for (const token of [TOKENS.deploy, TOKENS.gone]) {
        const got = await raw('GET', { authorization: `Bearer ${token}`, accept: 'text/event-stream' });
        expect(got.status).toBe(405);
        expect(got.headers.get('allow')).toBe('POST, OPTIONS');
        expect(got.headers.get('content-type')).not.toContain('text/event-stream');
        // The body ends: nothing is held open.
        expect(await got.text()).toContain('POST');
      }
      expect((await raw('DELETE', { authorization: `Bearer ${TOKENS.deploy}` })).status).toBe(405);
      // The held-out case: 300 at once, each answered and closed.
      const at = performance.now();
      const many = await Promise.all(
        Array.from({ length: 300 }, () =>
          raw('GET', { authorization: `Bearer ${TOKENS.gone}`, accept: 'text/event-stream' }).then(
            async (r) => [r.status, (await r.text()).length] as const,
          ),
        ),
      );
      expect(many.every(([status]) => status === 405)).toBe(true);
      console.info(
        `mcp-hardening: 300 concurrent GET /mcp answered 405 and closed in ${Math.round(performance.now() - at)} ms`,
      );
    } finally {
      await controls.setDisabled('gone-agent', false, 'test');
    }
  });

  it(`an agent holds at most MAX_OPEN_PER_AGENT calls open at once; the next gets 429, other agents are served`, async () => {
    const client = await connect(TOKENS.crowd);
    const asked = requestOf(
      await call(client, 'request_resize', {
        project: 'shop-prod',
        vm_id: 102,
        cores: 5,
        reason: 'open calls',
      }),
    );
    const stop = new AbortController();
    const open = Array.from({ length: MAX_OPEN_PER_AGENT }, (_, i) =>
      raw(
        'POST',
        { authorization: `Bearer ${TOKENS.crowd}` },
        toolCall(i + 10, 'get_request', { request_id: asked.request_id, wait_seconds: 60 }),
        stop.signal,
      ).catch(() => undefined),
    );
    try {
      // The waits are open once the bot counts them: each held call's answer has not started.
      await expect
        .poll(
          async () =>
            (await raw('POST', { authorization: `Bearer ${TOKENS.crowd}` }, toolCall(1, 'list_clusters', {})))
              .status,
          { timeout: 20_000 },
        )
        .toBe(429);
      const refused = await raw(
        'POST',
        { authorization: `Bearer ${TOKENS.crowd}` },
        toolCall(2, 'list_clusters', {}),
      );
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBeTruthy();
      expect(await refused.text()).toContain(`${MAX_OPEN_PER_AGENT} calls open`);
      const other = await raw(
        'POST',
        { authorization: `Bearer ${TOKENS.other}` },
        toolCall(3, 'list_clusters', {}),
      );
      expect(other.status).toBe(200);
    } finally {
      stop.abort();
      await Promise.all(open);
    }
    // Closed calls give their places back.
    await expect
      .poll(
        async () =>
          (await raw('POST', { authorization: `Bearer ${TOKENS.crowd}` }, toolCall(4, 'list_clusters', {})))
            .status,
        { timeout: 20_000 },
      )
      .toBe(200);
    await call(client, 'cancel_request', { request_id: asked.request_id });
  });

  it('a JSON-RPC batch counts each of its calls against MAX_OPEN_PER_AGENT, not as one HTTP request', async () => {
    const client = await connect(TOKENS.crowd);
    const asked = requestOf(
      await call(client, 'request_resize', {
        project: 'shop-prod',
        vm_id: 102,
        cores: 5,
        reason: 'batched waits',
      }),
    );
    const waits = (first: number, count: number) =>
      Array.from({ length: count }, (_, i) =>
        toolCall(first + i, 'get_request', { request_id: asked.request_id, wait_seconds: 60 }),
      );
    // Batches are part of protocol version 2025-03-26 (what a client that sends no version speaks).
    const old = { authorization: `Bearer ${TOKENS.crowd}`, 'mcp-protocol-version': '2025-03-26' };
    // More calls in one batch than an agent may have open: refused whole, nothing of it runs.
    const tooMany = await raw('POST', old, waits(100, MAX_OPEN_PER_AGENT + 1));
    expect(tooMany.status).toBe(400);
    expect(await tooMany.text()).toContain(
      `A batch of ${MAX_OPEN_PER_AGENT + 1} calls is more than the ${MAX_OPEN_PER_AGENT} calls`,
    );
    const stop = new AbortController();
    const half = MAX_OPEN_PER_AGENT / 2;
    const held = raw('POST', old, waits(200, half), stop.signal).catch(() => undefined);
    try {
      // Half the places are held by one POST: a second batch of the other half and one more is refused.
      await expect
        .poll(async () => (await raw('POST', old, waits(300, half + 1))).status, { timeout: 20_000 })
        .toBe(429);
      const refused = await raw('POST', old, waits(400, half + 1));
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBeTruthy();
      // The places left serve calls one by one.
      expect((await raw('POST', old, toolCall(1, 'list_clusters', {}))).status).toBe(200);
    } finally {
      stop.abort();
      await held;
    }
    await expect
      .poll(async () => (await raw('POST', old, waits(500, half + 1).slice(0, 1))).status, {
        timeout: 20_000,
      })
      .toBe(200);
    await call(client, 'cancel_request', { request_id: asked.request_id });
  });

  it('a JSON-RPC batch that repeats an id is refused: no call of it runs on once its answer has closed', async () => {
    const client = await connect(TOKENS.crowd);
    const asked = requestOf(
      await call(client, 'request_resize', { project: 'shop-prod', vm_id: 102, cores: 7, reason: 'one id' }),
    );
    const old = { authorization: `Bearer ${TOKENS.crowd}`, 'mcp-protocol-version': '2025-03-26' };
    // 31 waits and one plain read, all under id 7: the read answers id 7 at once, which closed the POST and
    // gave its places back while the 31 waits went on, unheld (the SDK keeps one abort handle per id).
    const batch = [
      ...Array.from({ length: MAX_OPEN_PER_AGENT - 1 }, () =>
        toolCall(7, 'get_request', { request_id: asked.request_id, wait_seconds: 30 }),
      ),
      toolCall(7, 'get_request', { request_id: asked.request_id }),
    ];
    const got = await raw('POST', old, batch);
    const text = await got.text();
    // Each live wait reads its agent's switch when any agent is disabled or enabled: count those reads (MONITOR).
    const { hostname, port } = new URL(testRedisUrl());
    const monitor = connectTcp(Number(port || 6379), hostname);
    let seen = '';
    monitor.setEncoding('utf8');
    monitor.on('data', (chunk: string) => {
      seen += chunk;
    });
    monitor.write('MONITOR\r\n');
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      await cli('agents', 'disable', 'other-agent');
      await cli('agents', 'enable', 'other-agent');
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    } finally {
      monitor.destroy();
    }
    const reads = seen
      .split('\n')
      .filter(
        (line) => /"sismember"/i.test(line) && line.includes(`"${h.prefix}:agents:disabled" "crowd-agent"`),
      ).length;
    expect(reads).toBe(0);
    expect(got.status).toBe(400);
    expect(text).toContain('repeats id 7');
    await call(client, 'cancel_request', { request_id: asked.request_id });
  });

  it('waits whose client hangs up as soon as its body is sent give their places back', async () => {
    const client = await connect(TOKENS.crowd);
    const asked = requestOf(
      await call(client, 'request_resize', { project: 'shop-prod', vm_id: 102, cores: 6, reason: 'hang up' }),
    );
    const body = JSON.stringify(
      toolCall(1, 'get_request', { request_id: asked.request_id, wait_seconds: 60 }),
    );
    const head = [
      'POST /mcp HTTP/1.1',
      `Host: 127.0.0.1:${h.bot.mcpPort}`,
      `Authorization: Bearer ${TOKENS.crowd}`,
      'Content-Type: application/json',
      'Accept: application/json, text/event-stream',
      `Content-Length: ${Buffer.byteLength(body)}`,
      '',
      '',
    ].join('\r\n');
    // Many more than MAX_OPEN_PER_AGENT, each reset right after its last byte.
    for (let round = 0; round < 4; round++)
      await Promise.all(
        Array.from(
          { length: MAX_OPEN_PER_AGENT },
          () =>
            new Promise<void>((resolve) => {
              const socket = connectTcp(Number(h.bot.mcpPort), '127.0.0.1', () => {
                socket.write(head + body, () => {
                  socket.resetAndDestroy();
                  resolve();
                });
              });
              socket.on('error', () => resolve());
            }),
        ),
      );
    await expect
      .poll(
        async () =>
          (await raw('POST', { authorization: `Bearer ${TOKENS.crowd}` }, toolCall(2, 'list_clusters', {})))
            .status,
        { timeout: 10_000 },
      )
      .toBe(200);
    await call(client, 'cancel_request', { request_id: asked.request_id });
  });

  it('a JSON-RPC batch is refused under the protocol versions that dropped batching (2025-06-18 and later)', async () => {
    for (const version of ['2025-06-18', LATEST_PROTOCOL_VERSION]) {
      const got = await raw(
        'POST',
        { authorization: `Bearer ${TOKENS.reader}`, 'mcp-protocol-version': version },
        [toolCall(1, 'list_clusters', {}), toolCall(2, 'list_clusters', {})],
      );
      expect(got.status).toBe(400);
      const body = (await got.json()) as { error: { code: number; message: string } };
      expect(body.error.code).toBe(-32600);
      expect(body.error.message).toBe(
        `JSON-RPC batches are not part of MCP protocol version ${version}: send one call per POST`,
      );
    }
    // Without the header, an initialize in the batch names the version it speaks.
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: LATEST_PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: 'batcher', version: '1' },
      },
    };
    const initialized = await raw('POST', { authorization: `Bearer ${TOKENS.reader}` }, [initialize]);
    expect(initialized.status).toBe(400);
    expect(await initialized.text()).toContain(
      `JSON-RPC batches are not part of MCP protocol version ${LATEST_PROTOCOL_VERSION}`,
    );
    // The same batch under 2025-03-26 is served.
    const served = await raw(
      'POST',
      { authorization: `Bearer ${TOKENS.reader}`, 'mcp-protocol-version': '2025-03-26' },
      [toolCall(1, 'list_clusters', {}), toolCall(2, 'list_clusters', {})],
    );
    expect(served.status).toBe(200);
    expect(await served.text()).toContain('"id":2');
  });

  it('bound to loopback, a call naming a foreign Host is refused even without an Origin (DNS rebinding)', async () => {
    const port = h.bot.mcpPort;
    for (const host of ['evil.example', `evil.example:${port}`, `127.0.0.1.evil.example:${port}`]) {
      const got = await postWithHost(host, TOKENS.deploy);
      expect(got.status, host).toBe(403);
      expect(got.body).toContain('Host not allowed: this MCP server answers on loopback names only');
    }
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`]) {
      const got = await postWithHost(host, TOKENS.deploy);
      expect(got.status, host).toBe(200);
    }
  });

  it('Origin: null is refused, as any origin not listed', async () => {
    const got = await raw(
      'POST',
      { authorization: `Bearer ${TOKENS.deploy}`, origin: 'null' },
      toolCall(1, 'list_clusters', {}),
    );
    expect(got.status).toBe(403);
  });

  it('a preflight from an allowed origin is answered before auth with the CORS headers; other origins get none', async () => {
    const preflight = (origin: string) =>
      fetch(mcpUrl, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization, content-type, mcp-protocol-version',
        },
      });
    const allowed = await preflight(BROWSER);
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get('access-control-allow-origin')).toBe(BROWSER);
    expect(allowed.headers.get('access-control-allow-methods')).toContain('POST');
    const allowHeaders = allowed.headers.get('access-control-allow-headers')?.toLowerCase() ?? '';
    for (const name of ['authorization', 'content-type', 'mcp-protocol-version', 'accept'])
      expect(allowHeaders).toContain(name);
    expect(allowed.headers.get('vary')).toContain('Origin');
    const foreign = await preflight('https://evil.example');
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
    const nullOrigin = await preflight('null');
    expect(nullOrigin.headers.get('access-control-allow-origin')).toBeNull();

    // The call itself: its answer (and a 401's) carries the origin, so the browser lets the page read it.
    const called = await raw(
      'POST',
      { authorization: `Bearer ${TOKENS.deploy}`, origin: BROWSER },
      toolCall(1, 'list_clusters', {}),
    );
    expect(called.status).toBe(200);
    expect(called.headers.get('access-control-allow-origin')).toBe(BROWSER);
    const anonymous = await raw('POST', { origin: BROWSER }, toolCall(1, 'list_clusters', {}));
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('access-control-allow-origin')).toBe(BROWSER);
    expect(anonymous.headers.get('access-control-expose-headers')?.toLowerCase()).toContain(
      'www-authenticate',
    );
  });
});

describe('asks', () => {
  it('an agent’s token in a reason never reaches Slack, the stored request, the audit or the logs', async () => {
    const client = await connect(TOKENS.deploy);
    const foreign = newAgentToken();
    const asked = await call(client, 'request_resize', {
      project: 'shop-prod',
      vm_id: 101,
      cores: 3,
      reason: `rotate ${TOKENS.deploy} and ${foreign} please`,
    });
    expect(asked.isError, textOf(asked)).toBeFalsy();
    const { request_id: id } = requestOf(asked);
    const message = await h.requestMessage(id);
    const posted = JSON.stringify(message);
    expect(posted).toContain('rotate [redacted] and [redacted] please');
    const stored = JSON.stringify(await h.store.get(id));
    const audit = JSON.stringify(await h.redis.xrange(`${h.prefix}:audit`, '-', '+'));
    for (const text of [posted, stored, audit, JSON.stringify(h.slack.messages()), h.logs.join('\n')]) {
      expect(text).not.toContain(TOKENS.deploy);
      expect(text).not.toContain(foreign);
    }
    await call(client, 'cancel_request', { request_id: id });
  });

  it('a reason of only invisible characters is refused with the field named; one with a bidi override shows quoted without it', async () => {
    const client = await connect(TOKENS.deploy);
    const empty = await call(client, 'request_resize', {
      project: 'shop-prod',
      vm_id: 101,
      cores: 3,
      reason: ' \u200B\n\u2060 ',
    });
    expect(empty.isError).toBe(true);
    expect(textOf(empty)).toContain('Say why in words');
    const asked = await call(client, 'request_resize', {
      project: 'shop-prod',
      vm_id: 101,
      cores: 3,
      reason: 'load\u202E\n✅ Approved by <@U0LEAD>',
    });
    expect(asked.isError, textOf(asked)).toBeFalsy();
    const { request_id: id } = requestOf(asked);
    const posted = JSON.stringify((await h.requestMessage(id)).blocks);
    expect(posted).toContain(JSON.stringify('*Reason:*\n> load\n> ✅ Approved by &lt;@U0LEAD&gt;'));
    // Kept without the override too: the store, the audit and its export have what Slack shows.
    expect((await h.store.get(id))?.reason).toBe('load\n✅ Approved by <@U0LEAD>');
    await call(client, 'cancel_request', { request_id: id });
  });

  it('a refused ask does not use up requests_per_hour: only requests made count', async () => {
    const client = await connect(TOKENS.thrifty);
    const costly = await call(client, 'request_resize', {
      project: 'shop-prod',
      vm_id: 101,
      cores: 8,
      reason: 'too costly',
    });
    expect(costly.isError).toBe(true);
    expect(textOf(costly)).toMatch(/may add at most 5/);
    const cheap = await call(client, 'request_resize', {
      project: 'shop-prod',
      vm_id: 102,
      ram_gb: 9,
      reason: 'small',
    });
    expect(cheap.isError, textOf(cheap)).toBeFalsy();
    const second = await call(client, 'request_resize', {
      project: 'shop-prod',
      vm_id: 102,
      ram_gb: 10,
      reason: 'one too many',
    });
    expect(textOf(second)).toMatch(/made its 1 requests of the last hour/);
    await call(client, 'cancel_request', { request_id: requestOf(cheap).request_id });
  });

  it('two identical asks make one request, at once or one after the other; an idempotency key answers its request again', async () => {
    const client = await connect(TOKENS.deploy);
    const before = (await h.requests(CHANNELS.prod)).length;
    const ask = { project: 'shop-prod', vm_id: 102, ram_gb: 12, reason: 'retry me' };
    // At the same moment: the later one waits for the first and answers with its request.
    const [a, b] = await Promise.all([
      call(client, 'request_resize', ask),
      call(client, 'request_resize', ask),
    ]);
    expect(Boolean(a.isError || b.isError), `${textOf(a)} / ${textOf(b)}`).toBe(false);
    const id = requestOf(a).request_id;
    expect(requestOf(b).request_id).toBe(id);
    const again = await call(client, 'request_resize', ask);
    expect(requestOf(again).request_id).toBe(id);
    expect(textOf(again)).toContain(`An identical request (${id}) is already open`);
    expect((await h.requests(CHANNELS.prod)).length).toBe(before + 1);

    // With a key, a retry after the request ended still answers that request; the same key for another ask is refused.
    await call(client, 'cancel_request', { request_id: id });
    const keyed = { ...ask, idempotency_key: 'deploy-42' };
    const first = requestOf(await call(client, 'request_resize', keyed));
    expect(first.request_id).not.toBe(id);
    await call(client, 'cancel_request', { request_id: first.request_id });
    const retried = await call(client, 'request_resize', keyed);
    expect(requestOf(retried)).toMatchObject({ request_id: first.request_id, state: 'cancelled' });
    const misused = await call(client, 'request_resize', { ...keyed, ram_gb: 16 });
    expect(misused.isError).toBe(true);
    expect(textOf(misused)).toBe(
      `Not requested: idempotency key “deploy-42” was used for request ${first.request_id}, a different ask.`,
    );
    // Once the identical request ended, the same ask is a new request.
    const fresh = requestOf(await call(client, 'request_resize', ask));
    expect(fresh.request_id).not.toBe(id);
    await call(client, 'cancel_request', { request_id: fresh.request_id });
  });

  it('identical asks with different idempotency keys make one open request; each key then answers it', async () => {
    const client = await connect(TOKENS.deploy);
    const before = (await h.requests(CHANNELS.prod)).length;
    const ask = { project: 'shop-prod', vm_id: 101, cores: 5, reason: 'keyed retries' };
    const answers = [];
    for (const key of ['run-1', 'run-2', 'run-3'])
      answers.push(await call(client, 'request_resize', { ...ask, idempotency_key: key }));
    const id = requestOf(answers[0]!).request_id;
    for (const got of answers.slice(1)) {
      expect(got.isError, textOf(got)).toBeFalsy();
      expect(requestOf(got).request_id).toBe(id);
      expect(textOf(got)).toContain(`An identical request (${id}) is already open`);
    }
    expect((await h.requests(CHANNELS.prod)).length).toBe(before + 1);
    // The keys of the answered asks now name that request, however it ends.
    await call(client, 'cancel_request', { request_id: id });
    const retried = await call(client, 'request_resize', { ...ask, idempotency_key: 'run-3' });
    expect(requestOf(retried)).toMatchObject({ request_id: id, state: 'cancelled' });
  });

  it('identical is judged on the planned change: a field named at the size the VM has asks for nothing more', async () => {
    const client = await connect(TOKENS.deploy);
    const before = (await h.requests(CHANNELS.prod)).length;
    // VM 101 has 4 GB of RAM: `ram_gb: 4` changes nothing, so both asks plan cores 2 → 6 alone.
    const first = requestOf(
      await call(client, 'request_resize', { project: 'shop-prod', vm_id: 101, cores: 6, reason: 'plain' }),
    );
    const second = await call(client, 'request_resize', {
      project: 'shop-prod',
      vm_id: 101,
      cores: 6,
      ram_gb: 4,
      reason: 'naming the RAM it has',
    });
    expect(second.isError, textOf(second)).toBeFalsy();
    expect(requestOf(second).request_id).toBe(first.request_id);
    expect(textOf(second)).toContain(`An identical request (${first.request_id}) is already open`);
    expect((await h.requests(CHANNELS.prod)).length).toBe(before + 1);
    await call(client, 'cancel_request', { request_id: first.request_id });
  });

  it('a refusal an agent reads carries no Slack markup', async () => {
    const client = await connect(TOKENS.deploy);
    const asked = requestOf(
      await call(client, 'request_resize', {
        project: 'shop-prod',
        vm_id: 102,
        cores: 7,
        reason: 'then cancel',
      }),
    );
    await h.click('approve', asked.request_id, USERS.lead);
    await h.waitForRequest(asked.request_id, (r) => r.state !== 'pending');
    const refused = await call(client, 'cancel_request', { request_id: asked.request_id });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).not.toMatch(/[`*]|<@|<!|:[a-z_]+:/);
    expect(textOf(refused)).toContain(asked.request_id);
  });

  it('agents disable reaches an open get_request wait: it answers that the agent is disabled, at once', async () => {
    // The wait is on a request of another agent: disabling writes nothing on it, only on the agent.
    const asker = await connect(TOKENS.crowd);
    const asked = requestOf(
      await call(asker, 'request_resize', { project: 'shop-prod', vm_id: 102, cores: 11, reason: 'watched' }),
    );
    const waiter = await connect(TOKENS.other);
    const started = performance.now();
    const waiting = call(waiter, 'get_request', { request_id: asked.request_id, wait_seconds: 60 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    try {
      await cli('agents', 'disable', 'other-agent');
      const disabledAt = performance.now();
      const answered = await waiting;
      const late = performance.now() - disabledAt;
      expect(answered.isError).toBe(true);
      expect(textOf(answered)).toBe(
        'Agent other-agent is disabled: an admin stopped it (cloudops agents disable). Nothing was done.',
      );
      expect(late).toBeLessThan(5_000);
      console.info(
        `mcp-hardening: a wait answered ${Math.round(late)} ms after agents disable (${Math.round(performance.now() - started)} ms after it began)`,
      );
    } finally {
      await cli('agents', 'enable', 'other-agent');
    }
    await call(asker, 'cancel_request', { request_id: asked.request_id });
  });

  it('agents disable ends a batch of waits at once, each answered disabled, and gives their places back', async () => {
    const asker = await connect(TOKENS.crowd);
    const asked = requestOf(
      await call(asker, 'request_resize', {
        project: 'shop-prod',
        vm_id: 102,
        cores: 13,
        reason: 'watched too',
      }),
    );
    const headers = { authorization: `Bearer ${TOKENS.other}`, 'mcp-protocol-version': '2025-03-26' };
    const waits = Array.from({ length: MAX_OPEN_PER_AGENT }, (_, i) =>
      toolCall(700 + i, 'get_request', { request_id: asked.request_id, wait_seconds: 60 }),
    );
    const answered = raw('POST', headers, waits).then((r) => r.text());
    try {
      // Every place is held by the one batch.
      await expect
        .poll(async () => (await raw('POST', headers, toolCall(1, 'list_clusters', {}))).status, {
          timeout: 20_000,
        })
        .toBe(429);
      await cli('agents', 'disable', 'other-agent');
      const disabledAt = performance.now();
      const text = await answered;
      expect(performance.now() - disabledAt).toBeLessThan(5_000);
      expect(text.split('Agent other-agent is disabled').length - 1).toBe(MAX_OPEN_PER_AGENT);
    } finally {
      await cli('agents', 'enable', 'other-agent');
    }
    await expect
      .poll(async () => (await raw('POST', headers, toolCall(2, 'list_clusters', {}))).status, {
        timeout: 20_000,
      })
      .toBe(200);
    await call(asker, 'cancel_request', { request_id: asked.request_id });
  });

  it('a disabled agent’s open requests say so in Slack and cannot be approved until it is enabled again', async () => {
    const client = await connect(TOKENS.gone);
    const asked = requestOf(
      await call(client, 'request_resize', {
        project: 'shop-prod',
        vm_id: 102,
        cores: 9,
        reason: 'then disabled',
      }),
    );
    const disabled = await cli('agents', 'disable', 'gone-agent');
    expect(disabled.stdout).toContain('1 open request of it marked in Slack');
    const marked = await h.requestMessage(asked.request_id, (m) =>
      JSON.stringify(m.blocks).includes('Agent gone-agent is disabled'),
    );
    expect(JSON.stringify(marked.blocks)).toContain('Approve is refused until it is enabled again');
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.lead).length;
    await h.click('approve', asked.request_id, USERS.lead);
    await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.prod, USERS.lead).length > seen);
    expect(h.slack.ephemerals(CHANNELS.prod, USERS.lead).at(-1)?.text).toBe(
      `Request \`${asked.request_id}\` was asked by agent gone-agent, which an admin has disabled (\`cloudops agents disable\`): it cannot be approved until the agent is enabled again. Reject or cancel it instead.`,
    );
    expect((await h.store.get(asked.request_id))?.state).toBe('pending');
    expect(await h.auditOf(asked.request_id)).toContain('agent cloudops agent gone-agent disabled');

    const enabled = await cli('agents', 'enable', 'gone-agent');
    expect(enabled.stdout).toContain('1 open request of it approvable again');
    await h.requestMessage(
      asked.request_id,
      (m) =>
        !JSON.stringify(m.blocks).includes('is disabled') &&
        JSON.stringify(m.blocks).includes('May still approve'),
    );
    await h.click('approve', asked.request_id, USERS.lead);
    await h.waitForRequest(asked.request_id, (r) => r.state !== 'pending');
  });
});
