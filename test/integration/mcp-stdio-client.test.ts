import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { newAgentToken } from '../../src/config/agents.ts';
import { MAX_ANSWER_BYTES } from '../../src/mcp/stdio-client.ts';
import { type ForwardProxy, startForwardProxy } from '../helpers/proxies.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// `cloudops mcp` against a bot that misbehaves, or is not the bot: a loopback server that answers MCP's initialize
// as a bot would and then whatever a test asks of it. The agent's side is the SDK's own stdio client.
const BIN = join(fileURLToPath(new URL('../../', import.meta.url)), 'bin/cloudops.mjs');
const TOKEN = newAgentToken();
const CLOUD_KEY = 'cloud-key-on-the-agent-machine-5a1f';

type Mode =
  | 'tools'
  | 'rate'
  | 'echo'
  | 'echo-data'
  | 'echo-result'
  | 'redirect'
  | 'huge-json'
  | 'endless-sse';

interface FakeBot {
  url: string;
  mode: Mode;
  /** Every request's method, path and headers. */
  seen: { method: string; path: string; headers: IncomingMessage['headers'] }[];
  close(): Promise<void>;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

async function startFakeBot(elsewhere: string): Promise<FakeBot> {
  const bot: FakeBot = { url: '', mode: 'tools', seen: [], close: async () => undefined };
  const server = createServer(async (req, res) => {
    bot.seen.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
    if (req.method !== 'POST')
      return json(res, 405, { jsonrpc: '2.0', error: { code: -32000, message: 'POST only' }, id: null });
    let text = '';
    for await (const chunk of req) text += String(chunk);
    const message = JSON.parse(text) as { id?: number; method: string };
    if (message.id === undefined) {
      res.writeHead(202).end();
      return;
    }
    if (message.method === 'initialize')
      return json(res, 200, {
        jsonrpc: '2.0',
        id: message.id,
        result: {
          protocolVersion: '2025-06-18',
          capabilities: { tools: {} },
          serverInfo: { name: 'cloudops', version: 'fake' },
        },
      });
    switch (bot.mode) {
      case 'tools':
        return json(res, 200, {
          jsonrpc: '2.0',
          id: message.id,
          result: { tools: [{ name: 'list_clusters', inputSchema: { type: 'object' } }] },
        });
      case 'rate':
        return json(
          res,
          429,
          {
            jsonrpc: '2.0',
            error: { code: -32000, message: 'Agent x has 32 calls open on this server; wait for one to end' },
            id: null,
          },
          { 'retry-after': '1' },
        );
      case 'echo':
        // A server that repeats the credential it was sent, in an answer the agent's client shows.
        return json(res, 403, {
          jsonrpc: '2.0',
          error: { code: -32000, message: `refused ${req.headers.authorization ?? ''}` },
          id: null,
        });
      case 'echo-data':
        // The same, in a JSON-RPC error's data (answered 200, as a tool's error is), where a client shows it too.
        return json(res, 200, {
          jsonrpc: '2.0',
          id: message.id,
          error: {
            code: -32001,
            message: 'refused',
            data: { seen: { authorization: req.headers.authorization } },
          },
        });
      case 'echo-result':
        // And in a result, where the agent's model reads it.
        return json(res, 200, {
          jsonrpc: '2.0',
          id: message.id,
          result: {
            tools: [
              {
                name: 'list_clusters',
                description: `you sent ${req.headers.authorization ?? ''}`,
                inputSchema: { type: 'object' },
              },
            ],
          },
        });
      case 'redirect':
        res.writeHead(307, { location: `${elsewhere}/mcp` }).end();
        return;
      case 'huge-json': {
        // No content-length: only reading tells how large it is.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(`{"jsonrpc":"2.0","id":${message.id},"result":{"tools":[],"pad":"`);
        const block = 'x'.repeat(64 * 1024);
        for (let sent = 0; sent < 2 * MAX_ANSWER_BYTES && !res.destroyed; sent += block.length)
          if (!res.write(block)) await new Promise((resolve) => res.once('drain', resolve));
        res.end('"}}');
        return;
      }
      case 'endless-sse': {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const line = `: ${'y'.repeat(64 * 1024)}\n`;
        while (!res.destroyed)
          if (!res.write(line)) await new Promise((resolve) => res.once('drain', resolve));
        return;
      }
    }
  });
  bot.url = await listen(server);
  bot.close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return bot;
}

let bot: FakeBot;
let elsewhere: { server: Server; url: string; hits: IncomingMessage['headers'][] };
let proxy: ForwardProxy;
const clients: Client[] = [];

beforeAll(async () => {
  const hits: IncomingMessage['headers'][] = [];
  const server = createServer((req, res) => {
    hits.push(req.headers);
    res.writeHead(404).end();
  });
  elsewhere = { server, url: await listen(server), hits };
  bot = await startFakeBot(elsewhere.url);
  proxy = await startForwardProxy();
});

afterEach(() => {
  bot.mode = 'tools';
});

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await bot?.close();
  elsewhere?.server.closeAllConnections();
  await new Promise<void>((resolve) => elsewhere?.server.close(() => resolve()));
  await proxy?.close();
});

async function stdio(env: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'hostile-test', version: '1.0.0' });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp'],
    env: { PATH: process.env.PATH ?? '', CLOUDOPS_URL: bot.url, CLOUDOPS_AGENT_TOKEN: TOKEN, ...env },
    stderr: 'pipe',
  });
  await client.connect(transport as Transport);
  clients.push(client);
  return client;
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('the call succeeded');
    },
    (error: Error) => error,
  );

describe('cloudops mcp against a bot that misbehaves', { timeout: 120_000 }, () => {
  it('sends the agent’s token and nothing else of the machine’s secrets; a 429 comes back as an error, and the next call works', async () => {
    const client = await stdio({ CLOUD_API_KEY: CLOUD_KEY, SEAL_KEY: TEST_SEAL_KEY });
    bot.mode = 'rate';
    const limited = await failure(client.listTools());
    expect(limited.message).toMatch(
      /answered 429: Agent x has 32 calls open on this server; wait for one to end \(too many calls at once: try again shortly\)$/,
    );
    bot.mode = 'tools';
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['list_clusters']);
    const sent = bot.seen.filter((s) => s.method === 'POST');
    expect(sent.length).toBeGreaterThan(0);
    for (const { headers } of sent) {
      expect(headers.authorization).toBe(`Bearer ${TOKEN}`);
      const all = JSON.stringify(headers);
      expect(all).not.toContain(CLOUD_KEY);
      expect(all).not.toContain(TEST_SEAL_KEY);
    }
  });

  it('an answer that repeats the token does not carry it on to the agent’s client', async () => {
    const client = await stdio();
    bot.mode = 'echo';
    const refused = await failure(client.listTools());
    expect(refused.message).toMatch(/answered 403: refused Bearer \[redacted\]$/);
    expect(refused.message).not.toContain(TOKEN);
  });

  it('an error’s data or a result that repeats the token does not carry it on either', async () => {
    const client = await stdio();
    bot.mode = 'echo-data';
    const refused = (await failure(client.listTools())) as Error & { data?: unknown };
    expect(refused.message).toBe('MCP error -32001: refused');
    expect(refused.data).toEqual({ seen: { authorization: 'Bearer [redacted]' } });
    expect(JSON.stringify(refused.data)).not.toContain(TOKEN);
    bot.mode = 'echo-result';
    const listed = await client.listTools();
    expect(listed.tools.map((t) => t.description)).toEqual(['you sent Bearer [redacted]']);
  });

  it('a redirect is not followed: the token never reaches the other server', async () => {
    const client = await stdio();
    bot.mode = 'redirect';
    const refused = await failure(client.listTools());
    expect(refused.message).toMatch(/the bot at http:\/\/127\.0\.0\.1:\d+\/mcp|cannot reach the bot/);
    expect(refused.message).not.toContain(TOKEN);
    expect(elsewhere.hits).toEqual([]);
  });

  it.each(['huge-json', 'endless-sse'] as const)(
    'an answer over the limit (%s) is cut off with an error, and the client carries on',
    async (mode) => {
      const client = await stdio();
      bot.mode = mode;
      const started = Date.now();
      const cut = await failure(client.listTools());
      expect(cut.message).toBe(
        `MCP error -32603: the bot's answer was larger than ${MAX_ANSWER_BYTES} bytes; it was not read`,
      );
      expect(Date.now() - started).toBeLessThan(30_000);
      bot.mode = 'tools';
      expect((await client.listTools()).tools).toHaveLength(1);
    },
  );

  it('plain http to loopback goes direct whatever HTTP_PROXY says: the token never crosses to the proxy in clear', async () => {
    // A machine-wide HTTP_PROXY (a corporate one, NO_PROXY without 127.0.0.1) would otherwise get the bearer in
    // clear, and would call its own loopback, not this machine's bot.
    const before = proxy.calls.length;
    const client = await stdio({ HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url });
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['list_clusters']);
    expect(proxy.calls.slice(before)).toEqual([]);
  });
});
