import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../sim/local-redis.ts';
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
import { testRedisUrl } from '../helpers/redis.ts';
import { TEST_SEAL_KEY } from '../helpers/seal.ts';

// `cloudops mcp` as an agent's MCP client starts it: a child process speaking MCP on stdio, a thin client of the
// bot at CLOUDOPS_URL. The bot (web, workers, scheduler) runs in this process with its MCP server on a free port.
const repo = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(repo, 'bin/cloudops.mjs');
const run = promisify(execFile);

const TOKEN = newAgentToken();
const OTHER = newAgentToken();

/** The bot's policy: shop-prod needs one approval, and the stdio agent is attended (a person approves). */
function botPolicy(): string {
  return `
workspace: ${TEAM}
currency: EUR
approvers: [${USERS.admin}]
projects:
  - name: shop-prod
    uuid: ${PROD_UUID}
    cluster: zone-1
    channels: [${CHANNELS.prod}]
    approvers: [${USERS.lead}, ${USERS.lead2}]
    approvals: { count: 1 }
    vms:
${PROD_VMS}
agents:
  - name: stdio-agent
    token_sha256: ${tokenHash(TOKEN)}
    on_behalf_of: ${USERS.dev}
    projects: [shop-prod]
    may: [resize_up, resize_down]
    requests_per_hour: 50
`;
}

/** What a hostile agent machine writes for itself: nobody approves anything, and its agent runs unattended. */
function permissivePolicy(): string {
  return botPolicy()
    .replace('approvals: { count: 1 }', 'approvals: { count: 0 }')
    .replace('requests_per_hour: 50', 'requests_per_hour: 50\n    unattended: true');
}

let h: Harness;
let base: string;
let dir: string;
const clients: Client[] = [];

beforeAll(async () => {
  h = await startHarness({ role: 'all', policyYaml: botPolicy(), env: () => ({ MCP_PORT: '0' }) });
  base = `http://127.0.0.1:${h.bot.mcpPort}`;
  dir = await mkdtemp(join(tmpdir(), 'cloudops-mcp-stdio-'));
});

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  for (const line of h?.logs ?? []) {
    expect(line).not.toContain(TOKEN);
    expect(line).not.toContain(OTHER);
  }
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** `cloudops mcp` with only `env` (and PATH), through the SDK's stdio client; its stderr collected. */
async function stdio(env: Record<string, string>): Promise<{ client: Client; stderr: () => string }> {
  const client = new Client({ name: 'stdio-agent', version: '1.0.0' });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp'],
    env: { PATH: process.env.PATH ?? '', ...env },
    cwd: dir,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  await client.connect(transport as Transport);
  clients.push(client);
  return { client, stderr: () => stderr };
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args }, undefined, { timeout: 90_000 })) as CallToolResult;
}

interface RequestAnswer {
  request_id: string;
  state: string;
  final: boolean;
  agent?: string;
  approvals: { needed: number; given: string[] };
}
const requestOf = (result: CallToolResult) => result.structuredContent as unknown as RequestAnswer;

/** Runs `cloudops mcp` to its exit; its code and stderr. */
async function exitOf(env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return run(process.execPath, [BIN, 'mcp'], {
    env: { PATH: process.env.PATH ?? '', ...env },
    cwd: dir,
  }).then(
    ({ stderr }) => ({ code: 0, stderr }),
    (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
  );
}

describe('cloudops mcp: a thin client of the bot at CLOUDOPS_URL', { timeout: 120_000 }, () => {
  it('lists the bot’s tools and makes its requests: asked in the channel, approved there, run by the bot', async () => {
    const { client, stderr } = await stdio({ CLOUDOPS_URL: base, CLOUDOPS_AGENT_TOKEN: TOKEN });
    const tools = (await client.listTools()).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['plan_resize', 'request_resize', 'get_request']));
    expect(tools).toHaveLength(8);
    const asked = requestOf(
      await call(client, 'request_resize', {
        project: 'shop-prod',
        vm_id: 102,
        ram_gb: 16,
        reason: 'stdio flow',
      }),
    );
    expect(asked).toMatchObject({ state: 'pending', agent: 'stdio-agent' });
    const message = await h.requestMessage(asked.request_id);
    expect(JSON.stringify(message.blocks)).toContain(`Asked by agent stdio-agent for <@${USERS.dev}>`);
    const waiting = call(client, 'get_request', { request_id: asked.request_id, wait_seconds: 30 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await h.click('approve', asked.request_id, USERS.lead);
    expect(requestOf(await waiting).state).not.toBe('pending');
    // Nothing of the bot's was asked of this machine, so nothing is said about it.
    expect(stderr()).toBe('');
  });

  it('a token the bot does not know: the bot’s 401 comes back as the call’s error', async () => {
    const { client } = await stdio({ CLOUDOPS_URL: base, CLOUDOPS_AGENT_TOKEN: OTHER });
    const refused = await client.listTools().catch((error: Error) => error);
    expect(refused).toBeInstanceOf(Error);
    expect((refused as Error).message).toMatch(
      /answered 401: A bearer token of an agent in the policy is needed/,
    );
    expect((refused as Error).message).not.toContain(OTHER);
    const again = await client
      .callTool({ name: 'list_vms', arguments: { project: 'shop-prod' } })
      .catch((error: Error) => error);
    expect((again as Error).message).toMatch(/answered 401/);
  });

  it('the reviewer’s bypass is gone: a permissive POLICY_FILE with the bot’s Redis, cloud key and SEAL_KEY runs nothing unapproved', async () => {
    const permissive = join(dir, 'permissive.yml');
    await writeFile(permissive, permissivePolicy());
    const callsBefore = h.sim.calls.length;
    const { client, stderr } = await stdio({
      CLOUDOPS_URL: base,
      CLOUDOPS_AGENT_TOKEN: TOKEN,
      POLICY_FILE: permissive,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: h.prefix,
      CLOUD_API_URL: h.sim.url,
      CLOUD_API_KEY: h.sim.apiKey,
      SEAL_KEY: TEST_SEAL_KEY,
      SLACK_BOT_TOKEN: 'xoxb-agent-machine-copy',
    });
    const asked = requestOf(
      await call(client, 'request_resize', {
        project: 'shop-prod',
        vm_id: 101,
        cores: 6,
        reason: 'bypass attempt',
      }),
    );
    // The bot's policy decides: one approval from a person, none given.
    expect(asked.state).toBe('pending');
    expect(asked.approvals.needed).toBe(1);
    expect(asked.approvals.given).toEqual([]);
    // Long enough for a queued request to have reached the cloud API (the worker runs in this process).
    const later = requestOf(
      await call(client, 'get_request', { request_id: asked.request_id, wait_seconds: 3 }),
    );
    expect(later.state).toBe('pending');
    const mutations = h.sim.calls.slice(callsBefore).filter((c) => c.method !== 'GET');
    expect(mutations).toEqual([]);
    expect((await h.store.get(asked.request_id))?.state).toBe('pending');
    // One line says what this machine holds for nothing, naming the variables, never their values.
    const lines = stderr()
      .split('\n')
      .filter((line) => line.trim() !== '');
    expect(lines).toEqual([
      'cloudops mcp: ignoring CLOUD_API_KEY, CLOUD_API_URL, POLICY_FILE, REDIS_PREFIX, REDIS_URL, SEAL_KEY, SLACK_BOT_TOKEN: a client of the bot at CLOUDOPS_URL uses no Redis, cloud, policy, seal or Slack settings; remove them from this machine',
    ]);
    for (const secret of [TEST_SEAL_KEY, h.sim.apiKey, TOKEN]) expect(stderr()).not.toContain(secret);
  });

  it('a REDIS_URL where no Redis is does not matter: the client never opens it', async () => {
    const { client } = await stdio({
      CLOUDOPS_URL: base,
      CLOUDOPS_AGENT_TOKEN: TOKEN,
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
    });
    const vms = await call(client, 'list_vms', { project: 'shop-prod' });
    expect(vms.isError).toBeFalsy();
  });

  it.each([
    [
      'no CLOUDOPS_URL',
      {},
      /^cloudops: CLOUDOPS_URL is not set: give the base URL of the bot’s MCP endpoint/,
    ],
    [
      'plain http to another machine',
      { CLOUDOPS_URL: 'http://cloudops.example.com:8808' },
      /^cloudops: CLOUDOPS_URL: plain http:\/\/ is accepted on loopback only .*not cloudops\.example\.com/,
    ],
    [
      'plain http to a name that only looks like loopback',
      { CLOUDOPS_URL: 'http://127.0.0.1.nip.io:8808' },
      /^cloudops: CLOUDOPS_URL: plain http:\/\/ is accepted on loopback only/,
    ],
    [
      'a loopback address as the user of another host',
      { CLOUDOPS_URL: 'http://127.0.0.1:8808@cloudops.example.com' },
      /^cloudops: CLOUDOPS_URL: expected the base URL alone, without credentials/,
    ],
    [
      'credentials in the URL',
      { CLOUDOPS_URL: 'https://agent:secret@cloudops.example.com' },
      /^cloudops: CLOUDOPS_URL: expected the base URL alone, without credentials/,
    ],
    [
      'another scheme',
      { CLOUDOPS_URL: 'file:///etc/passwd' },
      /^cloudops: CLOUDOPS_URL: expected an http\(s\) URL/,
    ],
  ])('refuses to start with %s: one line, exit 1', async (_case, env: Record<string, string>, line) => {
    const exit = await exitOf({ ...env, CLOUDOPS_AGENT_TOKEN: TOKEN });
    expect(exit.code).toBe(1);
    const lines = exit.stderr.split('\n').filter((l) => l.trim() !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(line);
    expect(exit.stderr).not.toContain('secret');
    expect(exit.stderr).not.toContain(TOKEN);
  });

  it('refuses to start without CLOUDOPS_AGENT_TOKEN: one line, exit 1', async () => {
    const exit = await exitOf({ CLOUDOPS_URL: 'https://cloudops.example.com' });
    expect(exit.code).toBe(1);
    expect(exit.stderr.trim()).toBe(
      'cloudops: CLOUDOPS_AGENT_TOKEN is not set: give the agent’s token (docs/agents.md)',
    );
  });
});
