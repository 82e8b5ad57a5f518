import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CloudRequest } from '../../src/requests/model/types.ts';
import {
  BREAKER,
  breakGlassLink,
  FREEZE_START,
  FREEZE_WINDOW,
  frozenVerified,
  registerSoftPasskeys,
} from '../helpers/break-glass.ts';
import { CHANNELS, type Harness, USERS } from '../helpers/harness.ts';
import { PageTab, type SoftPasskey } from '../helpers/soft-passkey.ts';
import {
  approveEphemeral,
  startVerifyPage,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';
import type { Forwarder } from '../helpers/verify-browser.ts';

// Someone whose Slack account an admin deactivated after they got a link (an approval's, or a break glass's) still
// holds their passkey for the link's ten minutes: the page asks Slack (users.info) right before the decision counts,
// and a deactivated account decides nothing. The whole bot over real HTTP, software passkeys, the Slack stand-in.

let h: Harness;
let forwarder: Forwarder;
let publicUrl: string;
let keys: Record<string, SoftPasskey> = {};

beforeAll(async () => {
  ({ h, forwarder, publicUrl } = await startVerifyPage({
    now: FREEZE_START,
    policyYaml: () =>
      verifiedPolicyYaml({
        approvals: { count: 1, verify: 'passkey' },
        staging: { name: 'shop-frozen', freeze: FREEZE_WINDOW },
        more: `break_glass: [${BREAKER}]\n`,
      }),
  }));
  keys = await registerSoftPasskeys(h, publicUrl, [USERS.lead, BREAKER]);
}, 120_000);

afterAll(async () => {
  await h?.close();
  await forwarder?.close();
});

const keyOf = (user: string) => keys[user] as SoftPasskey;

/** A resize of shop-prod's VM 101 to `cores` and the lead's approval link. */
async function approvalLink(cores: number): Promise<{ request: CloudRequest; url: string }> {
  const request = await submitRequest(h, `resize shop-prod 101 cores=${cores}`, CHANNELS.prod);
  const url = urlButtonOf((await approveEphemeral(h, request.id, USERS.lead, CHANNELS.prod)).blocks) ?? '';
  expect(url.startsWith(`${publicUrl}/verify/`)).toBe(true);
  return { request, url };
}

describe('a person deactivated in Slack after getting a link', () => {
  it('approves nothing with their passkey; the link is kept, and counts once they are active again', async () => {
    const { request, url } = await approvalLink(3);
    h.slack.deactivateUser(USERS.lead);
    try {
      const refused = await (await PageTab.open(url)).approve(keyOf(USERS.lead));
      expect(refused).toMatchObject({ status: 403, body: { title: 'Your Slack account is deactivated' } });
      expect(refused.body.text).toContain('Nothing was counted.');
      const still = await h.store.get(request.id);
      expect(still?.state).toBe('pending');
      expect(still?.approvals ?? []).toEqual([]);
    } finally {
      h.slack.deactivateUser(USERS.lead, false);
    }
    // Not used up by the refusal: reactivated, the same link counts.
    expect((await (await PageTab.open(url)).approve(keyOf(USERS.lead))).body.title).toBe('Approved');
    await h.waitForRequest(request.id, (r) => r.state === 'succeeded', 20_000);
  });

  it('a Slack that cannot answer counts nothing and keeps the link: "try again"', async () => {
    const { request, url } = await approvalLink(4);
    h.slack.failNext('users.info', { error: 'fatal_error' });
    const refused = await (await PageTab.open(url)).approve(keyOf(USERS.lead));
    expect(refused).toMatchObject({ status: 503, body: { title: 'Slack did not answer' } });
    expect((await h.store.get(request.id))?.approvals ?? []).toEqual([]);
    expect((await (await PageTab.open(url)).approve(keyOf(USERS.lead))).body.title).toBe('Approved');
  });

  it("Slack saying the bot's own token is inactive (account_inactive) is no word on the person: 503, not 403", async () => {
    const { request, url } = await approvalLink(5);
    h.slack.failNext('users.info', { error: 'account_inactive' });
    const refused = await (await PageTab.open(url)).approve(keyOf(USERS.lead));
    expect(refused).toMatchObject({ status: 503, body: { title: 'Slack did not answer' } });
    expect((await h.store.get(request.id))?.approvals ?? []).toEqual([]);
  });

  it('runs no break glass', async () => {
    const request = await frozenVerified(h, 2, keyOf(USERS.lead));
    const url = await breakGlassLink(h, publicUrl, request, 'before the account went');
    h.slack.deactivateUser(BREAKER);
    try {
      const refused = await (await PageTab.open(url)).approve(keyOf(BREAKER));
      expect(refused).toMatchObject({ status: 403, body: { title: 'Your Slack account is deactivated' } });
      expect(refused.body.text).toContain('Nothing was run.');
    } finally {
      h.slack.deactivateUser(BREAKER, false);
    }
    const still = await h.store.get(request.id);
    expect(still?.state).toBe('frozen');
    expect(still?.breakGlass).toBeUndefined();
  });
});
