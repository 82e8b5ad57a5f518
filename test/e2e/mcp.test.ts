import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAgentToken, tokenHash } from '../../src/config/agents.ts';
import { AGENT_NEEDS_PERSON } from '../../src/requests/lifecycle/types.ts';
import {
  CHANNELS,
  type Harness,
  PROD_UUID,
  PROD_VMS,
  STAGING_UUID,
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
  limited: newAgentToken(),
  night: newAgentToken(),
  stdio: newAgentToken(),
  thrifty: newAgentToken(),
};

/**
 * shop-prod: two approvers besides the agents' person (who is an approver too, and still may not approve an agent's
 * request made for them); a disk change needs nobody by the rules. shop-frozen: frozen from a day before the start
 * to two days after.
 */
function policyYaml(start: Date): string {
  const day = 86_400_000;
  const local = (ms: number) => new Date(start.getTime() + ms).toISOString().slice(0, 16);
  return `
workspace: ${TEAM}
currency: EUR
approvers: [${USERS.admin}]
projects:
  - name: shop-prod
    uuid: ${PROD_UUID}
    cluster: zone-1
    channels: [${CHANNELS.prod}]
    approvers: [${USERS.lead}, ${USERS.lead2}, ${USERS.dev}]
    approvals:
      count: 1
      rules:
        - { when: { change: disk }, count: 0 }
    vms:
${PROD_VMS}
  - name: shop-frozen
    uuid: ${STAGING_UUID}
    cluster: zone-2
    channels: [${CHANNELS.staging}]
    approvers: [${USERS.lead}]
    freeze:
      - { from: "${local(-day)}", to: "${local(2 * day)}", tz: UTC, reason: year-end }
    vms:
      - { vmid: 201, name: staging-1, cores: 1, ram_gb: 2, os_disk_gb: 20, cpu_class: light, wan_mode: ipv6 }
agents:
  - name: deploy-agent
    token_sha256: ${tokenHash(TOKENS.deploy)}
    on_behalf_of: ${USERS.dev}
    projects: [shop-prod, shop-frozen]
    may: [resize_up, resize_down, restore]
    requests_per_hour: 50
  - name: limited-agent
    token_sha256: ${tokenHash(TOKENS.limited)}
    on_behalf_of: ${USERS.dev2}
    projects: [shop-prod]
    requests_per_hour: 1
  - name: night-agent
    token_sha256: ${tokenHash(TOKENS.night)}
    on_behalf_of: ${USERS.dev2}
    projects: [shop-prod]
    unattended: true
  - name: thrifty-agent
    token_sha256: ${tokenHash(TOKENS.thrifty)}
    on_behalf_of: ${USERS.dev2}
    projects: [shop-prod]
    may: [resize_up, lease]
    max_monthly_delta: 5
  - name: stdio-agent
    token_sha256: ${tokenHash(TOKENS.stdio)}
    on_behalf_of: ${USERS.dev}
    projects: [shop-prod]
`;
}

let h: Harness;
let mcpUrl: string;
let dir: string;
let policyFile: string;
const clients: Client[] = [];

beforeAll(async () => {
  // The whole bot (web, workers, scheduler) with its MCP server on a free port.
  h = await startHarness({ role: 'all', policyYaml, env: () => ({ MCP_PORT: '0' }) });
  mcpUrl = `http://127.0.0.1:${h.bot.mcpPort}/mcp`;
  dir = await mkdtemp(join(tmpdir(), 'cloudops-mcp-'));
  policyFile = join(dir, 'policy.yml');
  await writeFile(policyFile, policyYaml(h.clock.now()));
});

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  // Nothing an agent sent reaches the bot's log: neither a token nor the reasons it typed.
  for (const line of h?.logs ?? []) {
    for (const token of Object.values(TOKENS)) expect(line).not.toContain(token);
    expect(line).not.toContain('agent-typed reason');
  }
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

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

interface RequestAnswer {
  posted?: boolean;
  request_id: string;
  state: string;
  final: boolean;
  agent?: string;
  on_behalf_of: string;
  approvals: { needed: number; given: string[]; rule?: string };
  frozen_until?: string;
  outcome?: { message: string | null };
}
const requestOf = (result: CallToolResult) => result.structuredContent as unknown as RequestAnswer;

/** Follows a request with get_request waits until it is final; the states it answered, in order. */
async function followToEnd(client: Client, id: string): Promise<RequestAnswer[]> {
  const seen: RequestAnswer[] = [];
  for (let i = 0; i < 8; i++) {
    const answered = requestOf(await call(client, 'get_request', { request_id: id, wait_seconds: 20 }));
    seen.push(answered);
    if (answered.final) return seen;
  }
  return seen;
}

const resize = (extra: Record<string, unknown> = {}) => ({
  project: 'shop-prod',
  vm_id: 102,
  cores: 6,
  reason: 'agent-typed reason: load test',
  ...extra,
});

describe('MCP over Streamable HTTP: access', () => {
  it('answers 401 without a token or with an unknown one, 403 to a foreign Origin, 413 to a huge body', async () => {
    const initialize = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    });
    const post = (headers: Record<string, string>, body = initialize) =>
      fetch(mcpUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
        body,
      });
    const none = await post({});
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toContain('Bearer');
    expect((await post({ authorization: `Bearer ${newAgentToken()}` })).status).toBe(401);
    expect(
      (await post({ authorization: `Bearer ${TOKENS.deploy}`, origin: 'http://evil.example' })).status,
    ).toBe(403);
    const huge = JSON.stringify({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/list',
      params: { pad: 'x'.repeat(200_000) },
    });
    expect((await post({ authorization: `Bearer ${TOKENS.deploy}` }, huge)).status).toBe(413);
    // The SDK's client is refused too, before any tool is listed.
    const client = new Client({ name: 'no-token', version: '1.0.0' });
    await expect(
      client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl)) as Transport),
    ).rejects.toThrow(/401|Unauthorized|bearer/i);
  });

  it('a start-up whose MCP_PORT is taken fails, naming MCP_PORT', async () => {
    await expect(
      startHarness({ policyYaml, env: () => ({ MCP_PORT: String(h.bot.mcpPort) }) }),
    ).rejects.toThrow(/^MCP_PORT \d+ is in use on 127\.0\.0\.1$/);
  });

  it('lists the tools with their inputs as JSON Schema', async () => {
    const client = await connect(TOKENS.deploy);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(
      [
        'cancel_request',
        'get_cluster',
        'get_request',
        'list_clusters',
        'list_vms',
        'plan_resize',
        'request_resize',
        'request_restore',
      ].sort(),
    );
    const requestResize = tools.find((t) => t.name === 'request_resize')!;
    const props = requestResize.inputSchema.properties as Record<string, Record<string, unknown>>;
    expect(requestResize.inputSchema.required).toEqual(
      expect.arrayContaining(['project', 'vm_id', 'reason']),
    );
    expect(props.cores).toMatchObject({ type: 'integer', exclusiveMinimum: 0 });
    expect(props.wan).toMatchObject({ enum: ['off', 'ipv4', 'ipv6', 'dual'] });
    const restore = tools.find((t) => t.name === 'request_restore')!;
    expect((restore.inputSchema.properties as Record<string, { pattern?: string }>).backup?.pattern).toBe(
      '^[A-Za-z0-9._-]{1,128}$',
    );
    const wait = (
      tools.find((t) => t.name === 'get_request')!.inputSchema.properties as Record<string, unknown>
    ).wait_seconds;
    expect(wait).toMatchObject({ type: 'number', maximum: 60 });
  });
});

describe('MCP over Streamable HTTP: requests', () => {
  it('plan_resize checks the rules and shows the cost and approval it would need, and creates nothing', async () => {
    const client = await connect(TOKENS.deploy);
    const before = await h.requests(CHANNELS.prod);
    const auditBefore = await h.redis.xlen(`${h.prefix}:audit`);
    const plan = await call(client, 'plan_resize', { project: 'shop-prod', vm_id: 102, cores: 6 });
    expect(plan.isError).toBeFalsy();
    expect(plan.structuredContent).toMatchObject({
      allowed: true,
      created: false,
      approval: { needed: 1 },
      cost: { cluster: 'zone-1', currency: 'EUR' },
    });
    expect(textOf(plan)).toContain('Nothing was created.');
    const refused = await call(client, 'plan_resize', { project: 'shop-prod', vm_id: 102, os_disk_gb: 40 });
    expect(refused.structuredContent).toMatchObject({ allowed: false });
    expect(textOf(refused)).toMatch(/disk/i);
    expect(await h.requests(CHANNELS.prod)).toEqual(before);
    expect(await h.redis.xlen(`${h.prefix}:audit`)).toBe(auditBefore);
  });

  it('a request is posted naming the agent, refused to on_behalf_of, approved by an approver; a wait answers its outcome', async () => {
    const client = await connect(TOKENS.deploy);
    const asked = await call(client, 'request_resize', resize());
    expect(asked.isError, textOf(asked)).toBeFalsy();
    const request = requestOf(asked);
    expect(request).toMatchObject({
      state: 'pending',
      agent: 'deploy-agent',
      on_behalf_of: USERS.dev,
      approvals: { needed: 1, given: [] },
    });
    // The post to Slack is a job of its own, retried until Slack takes it: the answer does not claim it is there.
    expect(textOf(asked)).toContain("It is being posted in the project's Slack channel");
    expect(textOf(asked)).not.toContain('It was posted');
    expect(request.posted).toBe(false);
    const message = await h.requestMessage(request.request_id);
    const shown = JSON.stringify(message.blocks);
    expect(shown).toContain(`Asked by agent deploy-agent for <@${USERS.dev}>`);
    // The stand-in holds the message once Slack answered; the bot stores its ts a moment later: wait for that state.
    await h.waitForRequest(request.request_id, (r) => r.messageTs !== undefined);
    const seenPosted = requestOf(await call(client, 'get_request', { request_id: request.request_id }));
    expect(seenPosted.posted).toBe(true);

    // The person it acts for is an approver of the project, and still may not approve it.
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.dev).length;
    await h.click('approve', request.request_id, USERS.dev);
    await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.prod, USERS.dev).length > seen);
    expect(h.slack.ephemerals(CHANNELS.prod, USERS.dev).at(-1)?.text).toBe(
      'You cannot approve your own request: another approver has to.',
    );
    expect((await h.store.get(request.request_id))?.state).toBe('pending');

    // A wait started before the approval answers once the approval moves the request.
    const waiting = call(client, 'get_request', { request_id: request.request_id, wait_seconds: 30 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await h.click('approve', request.request_id, USERS.lead);
    // Answered by the move: a wait that ran out its 30 s would answer `pending`.
    const moved = requestOf(await waiting);
    expect(moved.state).not.toBe('pending');
    const states = await followToEnd(client, request.request_id);
    const last = states.at(-1)!;
    expect(last).toMatchObject({ state: 'succeeded', final: true });
    expect(last.outcome?.message).toBeTruthy();
    const audit = await h.auditOf(request.request_id);
    expect(audit[0]).toMatch(/^created agent:deploy-agent /);
    expect(
      audit.some((line) => line.startsWith(`approved ${USERS.lead}`) || line.startsWith('approval')),
    ).toBe(true);
    console.info(
      `mcp: get_request answered after the approval click; states ${[moved, ...states].map((s) => s.state).join(' → ')}`,
    );
    console.info(`mcp: the request message reads:\n${message.text}\n${shown.slice(0, 1500)}`);
    console.info(
      `mcp: request_resize answered:\n${textOf(asked)}\n${JSON.stringify(asked.structuredContent, null, 1)}`,
    );
    console.info(`mcp: get_request answered at the end:\n${JSON.stringify(last, null, 1)}`);
    // Tool calls are counted by agent, tool and outcome: names from the policy and the tool list only.
    const scraped = await (await fetch(`http://127.0.0.1:${h.bot.metricsPort}/metrics`)).text();
    expect(scraped).toMatch(
      /cloudops_mcp_tool_calls_total\{agent="deploy-agent",tool="request_resize",outcome="ok"\} [1-9]/,
    );
    expect(scraped).not.toContain('agent-typed');
  });

  it('a change the rules let run without approval still waits for a person, unless the agent is unattended', async () => {
    const client = await connect(TOKENS.deploy);
    const asked = requestOf(
      await call(client, 'request_resize', resize({ vm_id: 101, cores: undefined, os_disk_gb: 60 })),
    );
    expect(asked).toMatchObject({ state: 'pending', approvals: { needed: 1, rule: AGENT_NEEDS_PERSON } });
    const night = await connect(TOKENS.night);
    const unattended = requestOf(
      await call(night, 'request_resize', resize({ vm_id: 101, cores: undefined, os_disk_gb: 70 })),
    );
    expect(unattended.approvals.needed).toBe(0);
    expect(unattended.state).not.toBe('pending');
    await call(client, 'cancel_request', { request_id: asked.request_id });
  });

  it('a project or a kind outside the agent’s list is a tool error, and nothing is stored', async () => {
    const before = (await h.requests(CHANNELS.prod)).length;
    const client = await connect(TOKENS.deploy);
    const project = await call(client, 'request_resize', resize({ project: 'shop-staging' }));
    expect(project.isError).toBe(true);
    expect(textOf(project)).toBe(
      'Agent deploy-agent may not ask in project “shop-staging”; it may ask in: shop-prod, shop-frozen.',
    );
    const limited = await connect(TOKENS.limited);
    const kind = await call(limited, 'request_restore', {
      project: 'shop-prod',
      vm_id: 102,
      backup: 'daily-1',
      vm_stopped: true,
      reason: 'agent-typed reason',
    });
    expect(kind.isError).toBe(true);
    expect(textOf(kind)).toBe(
      'Agent limited-agent may not ask for restores (restore); it may ask for: increases (resize_up).',
    );
    const down = await call(limited, 'request_resize', resize({ cores: 2, vm_stopped: true }));
    expect(textOf(down)).toContain('may not ask for decreases (resize_down)');
    // The rules' own refusals read as in Slack.
    const rules = await call(client, 'request_resize', resize({ os_disk_gb: 40, cores: undefined }));
    expect(rules.isError).toBe(true);
    expect(textOf(rules)).toMatch(/disk/i);
    expect((await h.requests(CHANNELS.prod)).length).toBe(before);
  });

  it('max_monthly_delta refuses a larger increase before anything exists; a restore is asked like a resize', async () => {
    const before = (await h.requests(CHANNELS.prod)).length;
    const thrifty = await connect(TOKENS.thrifty);
    const costly = await call(thrifty, 'request_resize', resize({ vm_id: 101, cores: 8 }));
    expect(costly.isError).toBe(true);
    expect(textOf(costly)).toMatch(
      /^Not requested: this change adds \d+\.\d\d EUR a month, and agent thrifty-agent may add at most 5\.$/,
    );
    // Within the bound (+1 GB of RAM is 2.92 EUR a month): a plan the agent may ask for.
    const lease = await call(thrifty, 'plan_resize', {
      project: 'shop-prod',
      vm_id: 101,
      ram_gb: 5,
      for_hours: 48,
    });
    expect(lease.structuredContent).toMatchObject({ allowed: true, created: false });
    expect((await h.requests(CHANNELS.prod)).length).toBe(before);

    const client = await connect(TOKENS.deploy);
    const restore = await call(client, 'request_restore', {
      project: 'shop-prod',
      vm_id: 102,
      backup: 'daily-1',
      vm_stopped: true,
      reason: 'agent-typed reason: bad migration',
    });
    expect(restore.isError, textOf(restore)).toBeFalsy();
    const asked = requestOf(restore);
    expect(asked).toMatchObject({ state: 'pending', agent: 'deploy-agent', approvals: { needed: 1 } });
    const ha = await call(client, 'request_restore', {
      project: 'shop-prod',
      vm_id: 101,
      backup: 'daily-1',
      autostart: true,
      vm_stopped: true,
      reason: 'agent-typed reason',
    });
    expect(textOf(ha)).toContain('Autostart is not allowed for VM 101');
    await call(client, 'cancel_request', { request_id: asked.request_id });
  });

  it('past its hourly limit an agent is told when it may ask again', async () => {
    const client = await connect(TOKENS.limited);
    // Increases of VM 102, above what the earlier tests raised it to.
    const first = await call(client, 'request_resize', resize({ cores: 10 }));
    expect(first.isError, textOf(first)).toBeFalsy();
    const second = await call(client, 'request_resize', resize({ cores: 12 }));
    expect(second.isError).toBe(true);
    expect(textOf(second)).toMatch(
      /^Not requested: agent limited-agent made its 1 requests of the last hour; it may ask again at \d{4}-\d\d-\d\dT/,
    );
    await call(client, 'cancel_request', { request_id: requestOf(first).request_id });
  });

  it('cloudops agents disable stops an agent at once (audited); enable lets it ask again', async () => {
    const env = {
      PATH: process.env.PATH ?? '',
      POLICY_FILE: policyFile,
      REDIS_URL: testRedisUrl(),
      REDIS_PREFIX: h.prefix,
    };
    const cli = (...args: string[]) =>
      run(process.execPath, [join(repo, 'bin/cloudops.mjs'), ...args], { env });
    const client = await connect(TOKENS.night);
    expect((await cli('agents', 'disable', 'night-agent')).stdout).toContain('Agent night-agent is disabled');
    for (const [name, args] of [
      ['list_clusters', {}],
      ['request_resize', resize()],
      ['get_request', { request_id: 'R0000000' }],
    ] as const) {
      const refused = await call(client, name, args);
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toBe(
        'Agent night-agent is disabled: an admin stopped it (cloudops agents disable). Nothing was done.',
      );
    }
    const audit = await h.redis.xrange(`${h.prefix}:audit`, '-', '+');
    // A chained entry: its JSON in `e`, naming the operator's OS user and host.
    const entries = audit.map(
      ([, fields]) => JSON.parse(fields[fields.indexOf('e') + 1] ?? '{}') as Record<string, unknown>,
    );
    expect(entries.find((e) => e.details === 'disabled agent night-agent')).toMatchObject({
      act: 'agent',
      actor: expect.stringMatching(/^cli:.+@.+$/),
    });
    const listed = JSON.parse((await cli('agents', 'list', '--json')).stdout) as {
      name: string;
      disabled: boolean;
    }[];
    expect(listed.find((a) => a.name === 'night-agent')?.disabled).toBe(true);
    expect((await cli('agents', 'enable', 'night-agent')).stdout).toContain('enabled again');
    expect((await call(client, 'list_clusters', {})).isError).toBeFalsy();
  });

  it('a freeze holds an agent’s approved request; get_request says until when', async () => {
    const client = await connect(TOKENS.deploy);
    const asked = requestOf(
      await call(client, 'request_resize', {
        project: 'shop-frozen',
        vm_id: 201,
        cores: 2,
        reason: 'agent-typed reason',
      }),
    );
    expect(asked.state).toBe('pending');
    const waiting = call(client, 'get_request', { request_id: asked.request_id, wait_seconds: 30 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    await h.click('approve', asked.request_id, USERS.lead, CHANNELS.staging);
    // The wait answers at the first change (approved, or frozen already); the freeze follows the approval at once.
    let answered = requestOf(await waiting);
    expect(['approved', 'frozen']).toContain(answered.state);
    await expect
      .poll(async () => {
        answered = requestOf(await call(client, 'get_request', { request_id: asked.request_id }));
        return answered.state;
      })
      .toBe('frozen');
    expect(answered.frozen_until).toBeTruthy();
    const cancelled = await call(client, 'cancel_request', { request_id: asked.request_id });
    expect(requestOf(cancelled).state).toBe('cancelled');
    expect(await h.auditOf(asked.request_id)).toContain('cancelled agent:deploy-agent');
  });

  it('cancel_request cancels only the agent’s own requests', async () => {
    const client = await connect(TOKENS.deploy);
    const mine = requestOf(await call(client, 'request_resize', resize({ cores: 8 })));
    const other = await connect(TOKENS.night);
    const refused = await call(other, 'cancel_request', { request_id: mine.request_id });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toBe(
      `Agent night-agent may cancel only the requests it made; request ${mine.request_id} is not one of them.`,
    );
    const done = await call(client, 'cancel_request', { request_id: mine.request_id });
    expect(requestOf(done).state).toBe('cancelled');
    const message = await h.requestMessage(mine.request_id, (m) =>
      JSON.stringify(m.blocks).includes('Cancelled'),
    );
    expect(JSON.stringify(message.blocks)).toContain('Cancelled by agent deploy-agent');
  });
});

describe('MCP at shutdown', () => {
  it('a stop answers the agents waiting in get_request with the state as it is, and ends', async () => {
    const own = await startHarness({ role: 'web', policyYaml, env: () => ({ MCP_PORT: '0' }) });
    let stopped = false;
    try {
      const client = new Client({ name: 'waiting-agent', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${own.bot.mcpPort}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${TOKENS.deploy}` } },
        }) as Transport,
      );
      const asked = requestOf(await call(client, 'request_resize', resize({ cores: 16 })));
      const waiting = call(client, 'get_request', { request_id: asked.request_id, wait_seconds: 60 });
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Answered by the stop: a wait that ran out its 60 s would outlast the test's time-out.
      const stopping = own.bot.stop();
      const answered = requestOf(await waiting);
      expect(answered.state).toBe('pending');
      await stopping;
      stopped = true;
      await client.close().catch(() => undefined);
    } finally {
      if (!stopped) await own.bot.stop();
      await own.close().catch(() => undefined);
    }
    // Shorter than the wait's 60 s, which would otherwise end the call with the same answer.
  }, 45_000);
});
