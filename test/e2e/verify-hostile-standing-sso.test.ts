import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANNELS, type Harness, USERS } from '../helpers/harness.ts';
import { pageSsoLogin } from '../helpers/oidc-login.ts';
import type { TestOidcProvider } from '../helpers/oidc-provider.ts';
import { PageTab } from '../helpers/soft-passkey.ts';
import {
  approveEphemeral,
  startVerifyPage,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';
import type { Forwarder } from '../helpers/verify-browser.ts';

// The SSO leg of the page asks Slack about the link's person as the passkey leg does: a Slack that cannot answer (429)
// gets 503 "Slack did not answer" (the link kept for another try), a person Slack no longer knows or an admin
// deactivated gets 403 "Your Slack account is deactivated". Both used to end in a bare 500 or "another person".
// Nothing is counted either way.

const LEAD = {
  login: 'lead',
  password: 'lead-pw',
  sub: 'sub-lead',
  email: 'u0lead@example.com',
  emailVerified: true,
};

let h: Harness;
let op: TestOidcProvider;
let forwarder: Forwarder;
let publicUrl: string;

beforeAll(async () => {
  ({ h, op, forwarder, publicUrl } = await startVerifyPage({
    policyYaml: () =>
      verifiedPolicyYaml({ approvers: [USERS.lead], approvals: { count: 1, verify: ['passkey', 'sso'] } }),
    oidc: [LEAD],
  }));
}, 120_000);

afterAll(async () => {
  await h?.close();
  await op?.close();
  await forwarder?.close();
});

const title = (html: string) => /<h1>([^<]*)<\/h1>/.exec(html)?.[1] ?? '';

/** A whole SSO login as the lead from a fresh tab on `url`: the callback's status and page. */
const ssoLogin = async (url: string) =>
  pageSsoLogin(await PageTab.open(url), `${publicUrl}/auth/callback`, LEAD);

async function approvalLink(cores: number) {
  const request = await submitRequest(h, `resize shop-prod 101 cores=${cores}`, CHANNELS.prod);
  const url = urlButtonOf((await approveEphemeral(h, request.id, USERS.lead, CHANNELS.prod)).blocks) ?? '';
  return { request, url };
}

describe('the SSO leg when Slack cannot say whether the person stands', () => {
  it('a rate-limited users.info answers 503 "Slack did not answer", not a bare 500; the link still works', async () => {
    const { request, url } = await approvalLink(3);
    h.slack.failNext('users.info', { status: 429 });
    const refused = await ssoLogin(url);
    expect((await h.store.get(request.id))?.approvals ?? []).toEqual([]);
    expect({ status: refused.status, title: title(refused.html) }).toEqual({
      status: 503,
      title: 'Slack did not answer',
    });
    expect(title((await ssoLogin(url)).html)).toBe('Approved');
  });

  it('users.info answering user_not_found refuses as deactivated (403), not a bare 500', async () => {
    const { request, url } = await approvalLink(4);
    h.slack.failNext('users.info', { error: 'user_not_found' });
    const refused = await ssoLogin(url);
    expect((await h.store.get(request.id))?.approvals ?? []).toEqual([]);
    expect({ status: refused.status, title: title(refused.html) }).toEqual({
      status: 403,
      title: 'Your Slack account is deactivated',
    });
  });

  it('a person an admin deactivated is told so, and approves nothing', async () => {
    const { request, url } = await approvalLink(5);
    h.slack.deactivateUser(USERS.lead);
    try {
      const refused = await ssoLogin(url);
      expect({ status: refused.status, title: title(refused.html) }).toEqual({
        status: 403,
        title: 'Your Slack account is deactivated',
      });
    } finally {
      h.slack.deactivateUser(USERS.lead, false);
    }
    expect((await h.store.get(request.id))?.approvals ?? []).toEqual([]);
  });

  it('asks Slack once per login: whether the person stands, and the email the provider must match', async () => {
    const { request, url } = await approvalLink(6);
    const asked = h.slack.callsOf('users.info').length;
    expect(title((await ssoLogin(url)).html)).toBe('Approved');
    expect(h.slack.callsOf('users.info').length - asked).toBe(1);
    await h.waitForRequest(request.id, (r) => r.approvals?.length === 1);
  });
});
