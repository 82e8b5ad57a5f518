import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAgentToken, tokenHash } from '../../src/config/agents.ts';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import { CHANNELS, type Harness, PROD_UUID, STAGING_UUID, startHarness, USERS } from '../helpers/harness.ts';
import { type TestVerificationLinks, testVerificationLinks } from '../helpers/verification-links.ts';
import { approveEphemeral, urlButtonOf, verifiedPolicyYaml } from '../helpers/verified-approvals.ts';

// Which verification a request needs when the rules alone do not say it plainly: a resize that raises one field and
// lowers another, and an agent with its own `verify:` under a project whose block says another. Signed HTTP into the
// whole bot, MCP through the SDK's own client; the links come from the thin stand-in of the page's link store.
const PUBLIC_URL = 'https://cloudops.example.com';
const AGENT_TOKEN = newAgentToken();

const policyYaml = () =>
  verifiedPolicyYaml({
    approvers: [USERS.lead, USERS.lead2],
    // Only increases are verified; a decrease is a plain click.
    approvals: { count: 1, rules: [{ when: { kind: 'resize_up' }, count: 1, verify: 'passkey' }] },
    // shop-staging: `approvals: { count: 1, verify: passkey }`, no rules.
    staging: { name: 'shop-staging' },
    more: `agents:
  - name: sso-agent
    token_sha256: ${tokenHash(AGENT_TOKEN)}
    on_behalf_of: ${USERS.dev}
    projects: [shop-staging]
    may: [resize_up]
    verify: sso
`,
  });

let h: Harness;
let links: TestVerificationLinks;
let agent: Client | undefined;

beforeAll(async () => {
  links = testVerificationLinks(PUBLIC_URL);
  h = await startHarness({
    role: 'all',
    policyYaml,
    env: () => ({ PUBLIC_URL, MCP_PORT: '0' }),
    startOptions: { verificationLinks: links.factory },
  });
}, 120_000);

afterAll(async () => {
  await agent?.close();
  await h?.close();
});

const postsFor = (vmid: number) =>
  h.sim.applied.filter((a) => a.projectUuid === PROD_UUID && a.vmid === vmid).length;

describe('what a request must verify', () => {
  it('a resize that raises cores and lowers RAM meets the increase’s verify: a plain click counts nothing', async () => {
    // db-1 has 4 cores and 8 GB: 6 cores and 6 GB raises one and lowers the other (same count either way).
    const ack = await h.fillAndSubmit(
      'resize shop-prod 102 cores=6 ram=6',
      { confirm: ['stopped'] },
      USERS.dev,
    );
    expect(ack.json).toEqual({ response_action: 'clear' });
    const created = await h.waitForRequest((await h.nextRequest()).id, (r) => r.messageTs !== undefined);
    expect(created.verify).toEqual(['passkey']);
    const ephemeral = await approveEphemeral(h, created.id, USERS.lead);
    expect(urlButtonOf(ephemeral.blocks)).toContain(`${PUBLIC_URL}/verify/`);
    expect(await h.store.get(created.id)).toMatchObject({ state: 'pending', approvals: [] });
    expect(postsFor(102)).toBe(0);
    // A plain lowering stays a plain click.
    const down = await h.fillAndSubmit('resize shop-prod 102 ram=6', { confirm: ['stopped'] }, USERS.dev);
    expect(down.json).toEqual({ response_action: 'clear' });
    const lowered = await h.nextRequest();
    expect(lowered.verify).toBeUndefined();
  });

  it('an agent’s own verify applies under a project block’s verify when no rule names one', async () => {
    agent = new Client({ name: 'sso-agent', version: '1.0.0' });
    await agent.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${h.bot.mcpPort}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${AGENT_TOKEN}` } },
      }) as Transport,
    );
    const result = (await agent.callTool(
      {
        name: 'request_resize',
        arguments: { project: 'shop-staging', vm_id: 201, cores: 2, reason: 'load' },
      },
      undefined,
      { timeout: 90_000 },
    )) as CallToolResult;
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    const asked = result.structuredContent as { request_id: string; approvals: Record<string, unknown> };
    expect(asked.approvals).toMatchObject({ needed: 1, verified_by: ['sso'] });
    expect((await h.store.get(asked.request_id))?.verify).toEqual(['sso']);
    expect(h.slack.messages(CHANNELS.staging).length).toBeGreaterThanOrEqual(0);
  });
});

/** Rewrites the stored request as a Redis writer would: parse, edit, write back. */
async function tamper(id: string, edit: (request: CloudRequest) => void): Promise<void> {
  const key = `${h.prefix}:req:${id}`;
  const request = JSON.parse((await h.redis.get(key)) as string) as CloudRequest;
  edit(request);
  await h.redis.set(key, JSON.stringify(request));
}

const ended = (id: string) =>
  h.waitForRequest(id, (r) => ['succeeded', 'refused', 'unknown'].includes(r.state), 30_000);

describe('the worker plans the same verification', () => {
  it('a resize that raises RAM and lowers cores needs the increase’s verify at the worker too: with it removed in Redis, a plain click sends nothing', async () => {
    // db-1 has 4 cores and 8 GB: 2 cores and 10 GB lowers one and raises the other (planned as a decrease).
    const ack = await h.fillAndSubmit(
      'resize shop-prod 102 cores=2 ram=10',
      { confirm: ['stopped'] },
      USERS.dev,
    );
    expect(ack.json).toEqual({ response_action: 'clear' });
    const created = await h.waitForRequest((await h.nextRequest()).id, (r) => r.messageTs !== undefined);
    expect(created.verify).toEqual(['passkey']);
    // A Redis writer without SEAL_KEY drops what the request says it must verify (it is not sealed: the worker plans
    // it again under its own policy), and a stolen Slack session of the lead clicks Approve.
    await tamper(created.id, (r) => {
      delete r.verify;
    });
    await h.click('approve', created.id, USERS.lead);
    const done = await ended(created.id);
    expect(done.state).toBe('refused');
    expect(done.outcomes.at(-1)?.reason).toContain('verified by passkey');
    expect(
      h.sim.applied.filter(
        (a) => a.projectUuid === PROD_UUID && a.vmid === 102 && (a.body as { cores?: number }).cores === 2,
      ),
    ).toHaveLength(0);
  });

  it('an agent’s own verify under a block’s other verify: its request, verified as it asks (SSO), runs', async () => {
    if (!agent) throw new Error('the agent test above connects the agent');
    const result = (await agent.callTool(
      {
        name: 'request_resize',
        arguments: { project: 'shop-staging', vm_id: 201, cores: 3, reason: 'load' },
      },
      undefined,
      { timeout: 90_000 },
    )) as CallToolResult;
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    const id = (result.structuredContent as { request_id: string }).request_id;
    const created = await h.waitForRequest(id, (r) => r.messageTs !== undefined);
    expect(created.verify).toEqual(['sso']);
    const url = urlButtonOf((await approveEphemeral(h, id, USERS.lead, CHANNELS.staging)).blocks) ?? '';
    expect(await links.complete(url, { method: 'sso', subject: 'sub-lead' })).toMatchObject({ ok: true });
    const done = await ended(id);
    expect(`${done.state}: ${done.outcomes.at(-1)?.reason ?? ''}`).toBe('succeeded: ');
    expect(h.sim.applied.filter((a) => a.projectUuid === STAGING_UUID && a.vmid === 201)).toHaveLength(1);
  });
});
