import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, PROD_UUID, USERS } from '../helpers/harness.ts';
import type { TestOidcProvider } from '../helpers/oidc-provider.ts';
import { clickOnHome, openHome } from '../helpers/slack-events.ts';
import {
  approveEphemeral,
  startVerifyPage,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';
import { type Device, type Forwarder, launchBrowser, newDevice } from '../helpers/verify-browser.ts';

// The SSO leg of the verification page in a real browser (issue 37): the whole bot with OIDC configured, a real
// OpenID Provider (oidc-provider) on loopback with a login form, Debian's chromium. The approver's Slack email (the
// stand-in answers <user>@example.com) must equal the verified email of the login.

const policyYaml = () => verifiedPolicyYaml({ approvals: { count: 1, verify: ['passkey', 'sso'] } });

let h: Harness;
let op: TestOidcProvider;
let forwarder: Forwarder;
let browser: Browser;
let device: Device;

beforeAll(async () => {
  ({ h, op, forwarder } = await startVerifyPage({
    policyYaml,
    oidc: [
      {
        login: 'lead',
        password: 'lead-pw',
        sub: 'sub-lead',
        email: `${USERS.lead}@Example.com`,
        emailVerified: true,
      },
      {
        login: 'unverified',
        password: 'u-pw',
        sub: 'sub-u',
        email: `${USERS.lead.toLowerCase()}@example.com`,
      },
      {
        login: 'mallory',
        password: 'm-pw',
        sub: 'sub-mallory',
        email: 'mallory@example.com',
        emailVerified: true,
      },
    ],
  }));
  browser = await launchBrowser();
}, 120_000);

afterEach(() => {
  // Every message and view the bot sent passed Slack's Block Kit checks.
  expect(h.slack.problems).toEqual([]);
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
  await op?.close();
  await forwarder?.close();
});

const request = (text: string) => submitRequest(h, text);

async function approveForLink(id: string, user: string): Promise<string> {
  return urlButtonOf((await approveEphemeral(h, id, user)).blocks) ?? '';
}

/** Opens the link on a fresh device, chooses SSO and logs in at the provider as `login`; the outcome shown. */
async function loginThrough(url: string, login: string, password: string) {
  device = await newDevice(browser);
  const response = await device.page.goto(url);
  expect(response?.headers()['content-security-policy']).toContain(`form-action 'self' ${op.issuer}`);
  await device.page.click('#sso');
  await device.page.waitForSelector('input[name=login]');
  await device.page.fill('input[name=login]', login);
  await device.page.fill('input[name=password]', password);
  await device.page.click('button[type=submit]');
  await device.page.waitForSelector('#outcome');
  return {
    title: (await device.page.textContent('h1')) ?? '',
    text: (await device.page.textContent('#outcome')) ?? '',
  };
}

const postsFor = (vmid: number) =>
  h.sim.applied.filter((a) => a.projectUuid === PROD_UUID && a.vmid === vmid).length;

describe('the SSO login on the verification page', () => {
  it('a login as another person (wrong or unverified email) counts nothing', async () => {
    const created = await request('resize shop-prod 101 cores=3');
    const url = await approveForLink(created.id, USERS.lead);
    const outcome = await loginThrough(url, 'mallory', 'm-pw');
    expect(outcome.title).toBe('The login was another person');
    // The approver's own email, but not verified by the provider: nothing counts either, and the link still works.
    expect((await loginThrough(url, 'unverified', 'u-pw')).title).toBe('The login was another person');
    expect(await h.store.get(created.id)).toMatchObject({ state: 'pending', approvals: [] });
    expect(postsFor(101)).toBe(0);
  });

  it('a fresh login as the approver approves: one POST, the audit names the subject', async () => {
    const created = await request('resize shop-prod 102 cores=6');
    const url = await approveForLink(created.id, USERS.lead);
    const outcome = await loginThrough(url, 'lead', 'lead-pw');
    expect(outcome.title).toBe('Approved');
    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 15_000);
    expect(done.approvals?.[0]?.verified).toEqual({ method: 'sso', subject: 'sub-lead' });
    expect(postsFor(102)).toBe(1);
    expect((await h.auditOf(created.id)).join('\n')).toContain('verified: SSO, subject sub-lead');
    expect(op.asked.at(-1)?.get('prompt')).toBe('login');
  });

  it('with SSO configured, registering a passkey needs the SSO login first; then the passkey approves', async () => {
    await openHome(h, USERS.lead);
    await h.slack.waitFor(() => h.slack.homeOf(USERS.lead));
    const seen = h.slack.messages(USERS.lead).length;
    await clickOnHome(h, 'passkey_register', '', USERS.lead);
    const dm = await h.slack.waitFor(() => h.slack.messages(USERS.lead)[seen]);
    type Block = { type: string; elements?: { type: string; url?: string }[] };
    const url =
      ((dm.blocks ?? []) as Block[])
        .flatMap((b) => (b.type === 'actions' ? (b.elements ?? []) : []))
        .find((e) => e.type === 'button' && e.url)?.url ?? '';
    const phone = await newDevice(browser);
    await phone.page.goto(url);
    expect(await phone.page.$('#register')).toBeNull();
    // Only a Slack session: the registration's own POST is refused.
    const refused = (await phone.page.evaluate(`(async () => {
      const csrf = document.querySelector('input[name=csrf]').value;
      const res = await fetch(location.pathname + '/register-options', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
        body: '{}',
      });
      return { status: res.status, body: await res.json() };
    })()`)) as { status: number; body: { title?: string } };
    expect(refused).toMatchObject({ status: 403, body: { title: 'Log in with SSO first' } });

    await phone.page.click('#sso');
    await phone.page.waitForSelector('input[name=login]');
    await phone.page.fill('input[name=login]', 'lead');
    await phone.page.fill('input[name=password]', 'lead-pw');
    await phone.page.click('button[type=submit]');
    // Back from the provider: a link on this site returns to the registration page with its session.
    await phone.page.click('#continue');
    await phone.page.waitForSelector('#register');
    await phone.page.click('#register');
    await phone.page.waitForSelector('#outcome');
    expect(await phone.page.textContent('h1')).toBe('Passkey registered');
    const audit = JSON.stringify(await h.redis.xrange(`${h.prefix}:audit`, '-', '+'));
    expect(audit).toContain('after an SSO login, subject sub-lead');

    const created = await request('resize shop-prod 101 ram=8');
    const link = await approveForLink(created.id, USERS.lead);
    await phone.page.goto(link);
    await phone.page.click('#passkey');
    await phone.page.waitForSelector('#outcome');
    expect(await phone.page.textContent('h1')).toBe('Approved');
    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 15_000);
    expect(done.approvals?.[0]?.verified?.method).toBe('passkey');
    await phone.context.close();
  });
});
