import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { newAgentToken, tokenHash } from '../../src/config/agents.ts';
import {
  CHANNELS,
  type Harness,
  PROD_UUID,
  STAGING_UUID,
  startHarness,
  TEAM,
  USERS,
} from '../helpers/harness.ts';
import { clickOnHome, homeAfter, openHome } from '../helpers/slack-events.ts';
import { type TestVerificationLinks, testVerificationLinks } from '../helpers/verification-links.ts';
import {
  approveEphemeral,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';

// Verified approvals end to end (issue 37): signed HTTP into the whole bot (web, worker, scheduler), the Slack
// stand-in, the cloud sim running what is approved. The links come from a thin stand-in of the page's link store
// that completes a link as the page does once the approver proved who they are (src/verify/ runs the real page).
const PUBLIC_URL = 'https://cloudops.example.com';
const HOUR = 3_600_000;
const AGENT_TOKEN = newAgentToken();

/** "2026-11-25T09:00" in UTC, as the policy writes local times. */
const wall = (date: Date) => date.toISOString().slice(0, 16);

const policyYaml = (start: Date) =>
  verifiedPolicyYaml({
    approvals: {
      count: 1,
      rules: [
        { name: 'more cores', when: { kind: 'resize_up', change: 'cores' }, count: 1, verify: 'passkey' },
        {
          name: 'more RAM',
          when: { kind: 'resize_up', change: 'ram' },
          count: 2,
          verify: ['passkey', 'sso'],
        },
      ],
    },
    staging: {
      name: 'shop-frozen',
      freeze: `{ from: "${wall(new Date(start.getTime() - HOUR))}", to: "${wall(new Date(start.getTime() + 48 * HOUR))}", tz: UTC, reason: release week }`,
    },
    more: `agents:
  - name: verified-agent
    token_sha256: ${tokenHash(AGENT_TOKEN)}
    on_behalf_of: ${USERS.dev}
    projects: [shop-prod]
    may: [resize_up]
    verify: sso
`,
  });

let h: Harness;
let links: TestVerificationLinks;
beforeAll(async () => {
  links = testVerificationLinks(PUBLIC_URL);
  h = await startHarness({
    role: 'all',
    now: new Date('2026-11-25T09:00:00Z'),
    policyYaml,
    env: () => ({ PUBLIC_URL, MCP_PORT: '0' }),
    startOptions: { verificationLinks: links.factory },
  });
});
afterEach(() => {
  expect(h.slack.problems).toEqual([]);
});
afterAll(async () => {
  await agent?.close();
  await h?.close();
});
let agent: Client | undefined;

const request = (text: string, channel?: string) => submitRequest(h, text, channel);

/** The request message's context lines (who acted, the progress, what approvals need) as they stand. */
function contextOf(message: { blocks?: unknown[] }): string {
  const blocks = (message.blocks ?? []) as { type: string; elements?: { text?: string }[] }[];
  return blocks
    .filter((b) => b.type === 'context')
    .flatMap((b) => b.elements ?? [])
    .map((e) => e.text ?? '')
    .join('\n');
}

/** Clicks Approve as `user` and returns the link the bot sent them alone (an ephemeral with a URL button). */
async function approveForLink(id: string, user: string, channel: string = CHANNELS.prod): Promise<string> {
  const issued = links.issued.length;
  const ephemeral = await approveEphemeral(h, id, user, channel);
  const url = urlButtonOf(ephemeral.blocks);
  expect(url).toBe(links.issued[issued]?.url);
  expect(ephemeral.text).toContain(`Your approval of request ${id}`);
  return url ?? '';
}

/** POSTs the cloud sim received for a VM of the project (resizes and restores). */
const postsFor = (vmid: number) =>
  h.sim.applied.filter((a) => a.projectUuid === PROD_UUID && a.vmid === vmid).length;

/** No link ever reaches a message everyone in the channel sees. */
function noLinkInChannel(): void {
  const everywhere = JSON.stringify(h.slack.messages());
  expect(everywhere).not.toContain(`${PUBLIC_URL}/verify/`);
}

describe('a rule that says verify: passkey', () => {
  it('Approve counts nothing and sends the approver alone a link; verified, it runs once, and the message and the audit say how', async () => {
    const created = await request('resize shop-prod 102 cores=6');
    expect(created).toMatchObject({
      requiredApprovals: 1,
      approvalRule: 'rule 1 (more cores)',
      verify: ['passkey'],
    });
    const message = await h.requestMessage(created.id);
    expect(contextOf(message)).toContain(
      ':lock: Needs a verified approval (passkey): Approve sends the approver a link to verify on, then it counts.',
    );

    const url = await approveForLink(created.id, USERS.lead);
    expect(links.issued.at(-1)?.claims).toEqual({
      requestId: created.id,
      version: 1,
      approver: USERS.lead,
      teamId: TEAM,
      methods: ['passkey'],
    });
    // The click counted nothing: still pending, no approval, no job, nothing sent.
    const after = await h.store.get(created.id);
    expect(after).toMatchObject({ state: 'pending', approvals: [] });
    expect(await h.queues.execute.getJob(created.id)).toBeUndefined();
    expect(postsFor(102)).toBe(0);
    noLinkInChannel();

    const decision = await links.complete(url, { method: 'passkey', subject: 'cred-AbC_123' });
    expect(decision).toMatchObject({ ok: true });
    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 15_000);
    expect(done.approvals).toEqual([
      expect.objectContaining({
        user: USERS.lead,
        verified: { method: 'passkey', subject: 'cred-AbC_123' },
      }),
    ]);
    expect(postsFor(102)).toBe(1);
    const updated = await h.requestMessage(created.id, (m) =>
      contextOf(m).includes(`<@${USERS.lead}> (verified: passkey)`),
    );
    expect(contextOf(updated)).not.toContain('Needs a verified approval');
    // As it renders after a verified approval (the closing note of issue 37 quotes it).
    console.info(`request message after a verified approval: ${contextOf(updated)}`);
    const thread = await h.slack.waitFor(() => {
      const replies = h.slack.thread(CHANNELS.prod, updated.ts).map((m) => m.text ?? '');
      return replies.some((t) => t.startsWith('Approved by')) ? replies : undefined;
    });
    expect(thread.find((t) => t.startsWith('Approved by'))).toMatch(
      new RegExp(`^Approved by <@${USERS.lead}> \\(verified: passkey\\)\\.`),
    );
    expect(await h.auditOf(created.id)).toContain(
      `approved ${USERS.lead} approval 1 of 1, verified: passkey, credential cred-AbC_123`,
    );

    // The same claims again (a replayed link, past the link store): nothing more counts, nothing more is sent.
    const replay = await links.replay(links.issued.at(-1)!.claims, {
      method: 'passkey',
      subject: 'cred-AbC_123',
    });
    expect(replay).toMatchObject({ ok: false, refusal: { code: 'already' } });
    expect(await links.complete(url, { method: 'passkey', subject: 'cred-AbC_123' })).toBe('used');
    expect(postsFor(102)).toBe(1);
    noLinkInChannel();
  });

  it('a method the rule does not allow, a rejected request and an expired one: the link counts nothing', async () => {
    const wrongMethod = await request('resize shop-prod 101 cores=3');
    const url = await approveForLink(wrongMethod.id, USERS.lead);
    expect(await links.complete(url, { method: 'sso', subject: 'sub-1' })).toMatchObject({
      ok: false,
      refusal: { code: 'verification_mismatch' },
    });
    expect(await h.store.get(wrongMethod.id)).toMatchObject({ state: 'pending', approvals: [] });

    // Reject needs no verification; the link issued before it then finds the request changed.
    const second = await approveForLink(wrongMethod.id, USERS.lead);
    const seenViews = h.slack.views.length;
    await h.click('reject', wrongMethod.id, USERS.lead2);
    const modal = (await h.openedView(seenViews)).view;
    await h.submitView(modal, { reject_reason: 'not now' }, USERS.lead2);
    await h.waitForRequest(wrongMethod.id, (r) => r.state === 'rejected');
    expect(await links.complete(second, { method: 'passkey', subject: 'cred-1' })).toMatchObject({
      ok: false,
      refusal: { code: 'already' },
    });

    const late = await request('resize shop-prod 101 cores=5');
    const lateUrl = await approveForLink(late.id, USERS.lead2);
    h.clock.advance(25 * HOUR);
    expect(await links.complete(lateUrl, { method: 'passkey', subject: 'cred-2' })).toMatchObject({
      ok: false,
      refusal: { code: 'expired' },
    });
    h.clock.advance(-25 * HOUR);
    const ended = await h.store.get(late.id);
    expect(ended?.approvals ?? []).toEqual([]);
    expect(postsFor(101)).toBe(0);
    noLinkInChannel();
  });

  it('Cancel by the requester needs no verification; the requester never gets a link', async () => {
    const created = await request('resize shop-prod 101 cores=4');
    const seen = h.slack.ephemerals(CHANNELS.prod, USERS.dev).length;
    const issued = links.issued.length;
    await h.click('approve', created.id, USERS.dev);
    const answer = await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.prod, USERS.dev)[seen]);
    expect(answer.text).toBe('You cannot approve your own request: another approver has to.');
    expect(links.issued.length).toBe(issued);
    await h.click('cancel', created.id, USERS.dev);
    await h.waitForRequest(created.id, (r) => r.state === 'cancelled');
  });

  it('the App Home says the approval is verified; its Approve sends the link in a modal only the approver sees', async () => {
    const created = await request('resize shop-prod 101 cores=7');
    const published = h.slack.homes.length;
    await openHome(h, USERS.admin);
    const home = await homeAfter(h, USERS.admin, published);
    expect(home.text).toContain(':lock: Needs a verified approval (passkey): Approve sends you a link');
    const seenViews = h.slack.views.length;
    const issued = links.issued.length;
    await clickOnHome(h, 'approve', created.id, USERS.admin);
    const modal = (await h.openedView(seenViews)).view;
    expect(urlButtonOf(modal.blocks as unknown[])).toBe(links.issued[issued]?.url);
    expect(links.issued[issued]?.claims.approver).toBe(USERS.admin);
    expect(await h.store.get(created.id)).toMatchObject({ state: 'pending', approvals: [] });
    noLinkInChannel();
  });
});

describe('what stays as it is', () => {
  it('two approvers completing their links at the same moment: one counts, the request runs once', async () => {
    const created = await request('resize shop-prod 102 cores=10');
    const [a, b] = [
      await approveForLink(created.id, USERS.lead),
      await approveForLink(created.id, USERS.lead2),
    ];
    const decisions = await Promise.all([
      links.complete(a, { method: 'passkey', subject: 'cred-a' }),
      links.complete(b, { method: 'passkey', subject: 'cred-b' }),
    ]);
    expect(decisions.filter((d) => typeof d === 'object' && d.ok)).toHaveLength(1);
    expect(
      decisions.filter((d) => typeof d === 'object' && !d.ok && d.refusal.code === 'already'),
    ).toHaveLength(1);
    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 15_000);
    expect(done.approvals).toHaveLength(1);
    expect(
      h.sim.applied.filter((x) => x.vmid === 102 && (x.body as { cores?: number }).cores === 10),
    ).toHaveLength(1);
  });

  it('a freeze holds a verified approval like a plain one: frozen, nothing sent', async () => {
    const created = await request('resize shop-frozen 201 cores=2', CHANNELS.staging);
    expect(created.verify).toEqual(['passkey']);
    const url = await approveForLink(created.id, USERS.lead, CHANNELS.staging);
    expect(await links.complete(url, { method: 'passkey', subject: 'cred-f' })).toMatchObject({ ok: true });
    const frozen = await h.waitForRequest(created.id, (r) => r.state === 'frozen');
    expect(frozen.freezeReason).toBe('release week');
    expect(h.sim.applied.filter((x) => x.projectUuid === STAGING_UUID)).toEqual([]);
  });
});

describe('two verified approvals (passkey or SSO)', () => {
  it('another approver’s approval leaves a pending link valid; a plain click never counts; both verified, it runs once', async () => {
    const created = await request('resize shop-prod 101 ram=8');
    expect(created).toMatchObject({ requiredApprovals: 2, verify: ['passkey', 'sso'] });
    const message = await h.requestMessage(created.id);
    expect(contextOf(message)).toContain(':lock: Needs a verified approval, each of them (passkey or SSO)');
    const leadUrl = await approveForLink(created.id, USERS.lead);
    const lead2Url = await approveForLink(created.id, USERS.lead2);

    expect(await links.complete(leadUrl, { method: 'sso', subject: '00u1lead' })).toMatchObject({
      ok: true,
    });
    const one = await h.waitForRequest(created.id, (r) => (r.approvals ?? []).length === 1);
    expect(one.state).toBe('pending');
    await h.requestMessage(created.id, (m) =>
      contextOf(m).includes(`*1 of 2 approvals*: <@${USERS.lead}> (verified: SSO)`),
    );

    // A plain click by the second approver gets a link of its own and counts nothing.
    await approveForLink(created.id, USERS.lead2);
    expect((await h.store.get(created.id))?.approvals).toHaveLength(1);

    // The link issued before the first approval still works: that approval did not change the request.
    expect(await links.complete(lead2Url, { method: 'passkey', subject: 'cred-lead2' })).toMatchObject({
      ok: true,
    });
    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 15_000);
    expect(done.approvals?.map((a) => [a.user, a.verified?.method])).toEqual([
      [USERS.lead, 'sso'],
      [USERS.lead2, 'passkey'],
    ]);
    expect(postsFor(101)).toBe(1);
    const updated = await h.requestMessage(created.id, (m) => contextOf(m).includes('2 of 2'));
    const thread = await h.slack.waitFor(() => {
      const replies = h.slack.thread(CHANNELS.prod, updated.ts).map((m) => m.text ?? '');
      return replies.some((t) => t.startsWith('Approved by')) ? replies : undefined;
    });
    expect(thread.find((t) => t.startsWith('Approved by'))).toMatch(
      new RegExp(
        `^Approved by <@${USERS.lead}> \\(verified: SSO\\) and <@${USERS.lead2}> \\(verified: passkey\\)\\.`,
      ),
    );
    expect(await h.auditOf(created.id)).toEqual(
      expect.arrayContaining([
        `approval ${USERS.lead} approval 1 of 2, verified: SSO, subject 00u1lead`,
        `approved ${USERS.lead2} approval 2 of 2, verified: passkey, credential cred-lead2`,
      ]),
    );
  });

  it('a rule without verify still counts the click', async () => {
    const created = await request('resize shop-prod 102 disk=120');
    expect(created.verify).toBeUndefined();
    await h.click('approve', created.id, USERS.lead);
    await h.waitForRequest(created.id, (r) => r.state !== 'pending');
  });
});

describe('agents[].verify', () => {
  it('every request of the agent needs verified approvals: by its own methods, or the rule’s where the rule names some', async () => {
    agent = new Client({ name: 'verified-agent', version: '1.0.0' });
    await agent.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${h.bot.mcpPort}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${AGENT_TOKEN}` } },
      }) as Transport,
    );
    const ask = async (args: Record<string, unknown>) => {
      const result = (await agent?.callTool(
        { name: 'request_resize', arguments: { project: 'shop-prod', vm_id: 102, reason: 'load', ...args } },
        undefined,
        { timeout: 90_000 },
      )) as CallToolResult;
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      return result.structuredContent as { request_id: string; approvals: Record<string, unknown> };
    };
    // A disk increase: the default rule, no verify of its own: the agent's SSO.
    const disk = await ask({ os_disk_gb: 150 });
    expect(disk.approvals).toMatchObject({ needed: 1, verified_by: ['sso'] });
    // More cores: rule 1 names passkey, which applies.
    const cores = await ask({ cores: 12 });
    expect(cores.approvals).toMatchObject({ verified_by: ['passkey'] });

    await h.waitForRequest(disk.request_id, (r) => r.messageTs !== undefined);
    const url = await approveForLink(disk.request_id, USERS.lead);
    expect(await links.complete(url, { method: 'passkey', subject: 'cred-x' })).toMatchObject({
      ok: false,
      refusal: { code: 'verification_mismatch' },
    });
    const again = await approveForLink(disk.request_id, USERS.lead);
    expect(await links.complete(again, { method: 'sso', subject: '00u1lead' })).toMatchObject({ ok: true });
    await h.waitForRequest(disk.request_id, (r) => r.state === 'succeeded', 15_000);
  });
});
