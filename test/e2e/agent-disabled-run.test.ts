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
import type { CloudRequest } from '../../src/requests/model/types.ts';
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

// A disabled agent's approved work does not run (issue 44, item 9): the run checks the agent's switch right before
// its POST, whether the work waited for a freeze's end or in the queue while no worker took it. The MCP SDK's client
// asks, people approve over signed Slack requests, `cloudops agents disable` runs as an operator runs it, BullMQ on
// real Redis runs what is queued against the cloud sim.

const repo = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);
const TOKEN = newAgentToken();
const START = new Date('2026-12-01T10:00:00Z');
const HOUR = 3_600_000;

function policyYaml(start: Date): string {
  const local = (ms: number) => new Date(start.getTime() + ms).toISOString().slice(0, 16);
  return `
workspace: ${TEAM}
currency: EUR
approvers: [${USERS.admin}]
limits: { cores: 32, ram_gb: 256, os_disk_gb: 2000 }
projects:
  - name: shop-prod
    uuid: ${PROD_UUID}
    cluster: zone-1
    channels: [${CHANNELS.prod}]
    approvers: [${USERS.lead}]
    vms:
${PROD_VMS}
  - name: shop-frozen
    uuid: ${STAGING_UUID}
    cluster: zone-2
    channels: [${CHANNELS.staging}]
    approvers: [${USERS.lead}]
    freeze:
      - { from: "${local(-HOUR)}", to: "${local(2 * HOUR)}", tz: UTC, reason: release }
    vms:
      - { vmid: 201, name: staging-1, cores: 1, ram_gb: 2, os_disk_gb: 20, cpu_class: light, wan_mode: ipv6 }
agents:
  - { name: night-agent, token_sha256: ${tokenHash(TOKEN)}, on_behalf_of: ${USERS.dev}, projects: [shop-prod, shop-frozen], may: [resize_up] }
`;
}

let h: Harness;
let dir: string;
let policyFile: string;
let client: Client;

beforeAll(async () => {
  h = await startHarness({
    role: 'all',
    now: START,
    policyYaml,
    env: () => ({ MCP_PORT: '0' }),
    startOptions: { duePolicy: { pollMs: 50, leaseMs: 60_000, batch: 50 } },
  });
  dir = await mkdtemp(join(tmpdir(), 'cloudops-agent-disabled-run-'));
  policyFile = join(dir, 'policy.yml');
  await writeFile(policyFile, policyYaml(START));
  client = new Client({ name: 'disabled-run-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${h.bot.mcpPort}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${TOKEN}` } },
    }) as Transport,
  );
});

afterAll(async () => {
  await client?.close().catch(() => undefined);
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** `cloudops agents …` as an operator runs it, on the bot's Redis and policy. */
function agents(...args: string[]) {
  const env = {
    PATH: process.env.PATH ?? '',
    POLICY_FILE: policyFile,
    REDIS_URL: testRedisUrl(),
    REDIS_PREFIX: h.prefix,
  };
  return run(process.execPath, [join(repo, 'bin/cloudops.mjs'), 'agents', ...args], { env });
}

async function ask(project: string, vm_id: number, cores: number): Promise<string> {
  const asked = (await client.callTool({
    name: 'request_resize',
    arguments: { project, vm_id, cores, reason: 'more room tonight' },
  })) as CallToolResult;
  expect(asked.isError, JSON.stringify(asked.content)).toBeFalsy();
  return (asked.structuredContent as { request_id: string }).request_id;
}

/** A run's end: what it sent, or why it sent nothing. */
const ENDS = ['succeeded', 'refused', 'unknown', 'cancelled'];
const ended = (r: CloudRequest) => ENDS.includes(r.state);
const resizesOf = (vmid: number) => h.sim.applied.filter((a) => a.vmid === vmid && a.route === 'resize');

/** The thread replies under a request's message, once one of them says `text`. */
async function threadSays(requestId: string, text: string): Promise<string[]> {
  const message = await h.requestMessage(requestId);
  const replies = () =>
    h.slack
      .messages()
      .filter((m) => m.thread_ts === message.ts)
      .map((m) => m.text ?? '');
  await h.slack.waitFor(() => replies().some((t) => t.includes(text)) || undefined, 10_000);
  return replies();
}

const NOT_SENT =
  'Not sent: agent night-agent is disabled (cloudops agents disable), so the work it asked for does not run. Enable it and ask again if the change is still needed.';

describe('a disabled agent’s approved work', () => {
  it('held by a freeze, does not run when the freeze ends: it ends refused, nothing sent, the thread says why', async () => {
    const id = await ask('shop-frozen', 201, 2);
    await h.click('approve', id, USERS.lead, CHANNELS.staging, await h.requestMessage(id));
    await h.waitForRequest(id, (r) => r.state === 'frozen');
    try {
      await agents('disable', 'night-agent');
      h.clock.advance(2 * HOUR + 60_000);
      const done = await h.waitForRequest(id, ended, 30_000);
      expect(done.state).toBe('refused');
      expect(done.outcomes.at(-1)).toMatchObject({ notSent: true, reason: NOT_SENT });
      expect((await threadSays(id, NOT_SENT)).join('\n')).toContain(`:x: ${NOT_SENT}`);
      expect(resizesOf(201)).toHaveLength(0);
    } finally {
      await agents('enable', 'night-agent');
    }
  });

  it('queued while no worker took it, does not run once the agent is disabled', async () => {
    // No worker takes a job meanwhile: the queue is paused, as if no worker process ran.
    await h.queues.execute.pause();
    let resumed = false;
    try {
      const id = await ask('shop-prod', 101, 3);
      await h.click('approve', id, USERS.lead, CHANNELS.prod, await h.requestMessage(id));
      await h.waitForRequest(id, (r) => r.state === 'queued');
      await h.waitForJob(id);
      await agents('disable', 'night-agent');
      await h.queues.execute.resume();
      resumed = true;
      const done = await h.waitForRequest(id, ended, 30_000);
      expect(done.state).toBe('refused');
      expect(done.outcomes.at(-1)).toMatchObject({ notSent: true, reason: NOT_SENT });
      expect((await threadSays(id, NOT_SENT)).join('\n')).toContain(`:x: ${NOT_SENT}`);
      expect(resizesOf(101)).toHaveLength(0);
    } finally {
      if (!resumed) await h.queues.execute.resume();
      await agents('enable', 'night-agent');
    }
  });
});
