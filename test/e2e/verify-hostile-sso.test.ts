import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SSO_STARTS_PER_LINK } from '../../src/verify/sessions.ts';
import { CHANNELS, type Harness, STAGING_UUID, TEAM, USERS } from '../helpers/harness.ts';
import { pageSsoLogin, startPageSso } from '../helpers/oidc-login.ts';
import { startOidcProvider, type TestOidcProvider } from '../helpers/oidc-provider.ts';
import { keysUnder } from '../helpers/redis.ts';
import { PageTab, SoftPasskey } from '../helpers/soft-passkey.ts';
import {
  approveEphemeral,
  passkeyRegistrationLink,
  startVerifyPage,
  submitRequest,
  urlButtonOf,
  verifiedPolicyYaml,
} from '../helpers/verified-approvals.ts';
import type { Forwarder } from '../helpers/verify-browser.ts';

// The SSO leg of the page attacked as a hostile user would, over real HTTP against the whole bot and a real OpenID
// Provider: the provider down at the first login, and a page session planted in the victim's browser before they log
// in (session fixation). The Slack stand-in answers <user id, lower-cased>@example.com as a user's email.

const LEAD = {
  login: 'lead',
  password: 'lead-pw',
  sub: 'sub-lead',
  email: 'u0lead@example.com',
  emailVerified: true,
};

/** The break-glass user of shop-frozen, whose Slack email the stand-in answers as u0admin@example.com. */
const ADMIN = {
  login: 'admin',
  password: 'admin-pw',
  sub: 'sub-admin',
  email: 'u0admin@example.com',
  emailVerified: true,
};

const HOUR = 3_600_000;
const wall = (date: Date) => date.toISOString().slice(0, 16);

// shop-frozen (VM 201, staging): one approval verified by a passkey or SSO, frozen for two days, the admin its breaker.
const policyYaml = (start: Date) =>
  verifiedPolicyYaml({
    approvers: [USERS.lead, USERS.lead2],
    approvals: { count: 1, verify: ['passkey', 'sso'] },
    staging: {
      name: 'shop-frozen',
      verify: '[passkey, sso]',
      freeze: `{ from: "${wall(new Date(start.getTime() - HOUR))}", to: "${wall(new Date(start.getTime() + 48 * HOUR))}", tz: UTC }`,
    },
    more: `break_glass: [${USERS.admin}]\n`,
  });

let h: Harness;
let op: TestOidcProvider;
let forwarder: Forwarder;
let publicUrl: string;

beforeAll(async () => {
  ({ h, op, forwarder, publicUrl } = await startVerifyPage({ policyYaml, oidc: [LEAD, ADMIN] }));
}, 120_000);

afterAll(async () => {
  await h?.close();
  await op?.close();
  await forwarder?.close();
});

const title = (html: string) => /<h1>([^<]*)<\/h1>/.exec(html)?.[1] ?? '';

/** A whole SSO login from `tab` as `account` (the lead): the callback's answer and the cookies it set. */
const ssoLogin = (tab: PageTab, account: { login: string; password: string } = LEAD) =>
  pageSsoLogin(tab, `${publicUrl}/auth/callback`, account);

describe('the SSO leg under attack', () => {
  it('the provider down at the first login: the page says it could not be reached, and the next login works', async () => {
    const port = Number(new URL(op.issuer).port);
    const { clientId, clientSecret } = op;
    await op.close();
    const created = await submitRequest(h, 'resize shop-prod 101 cores=3');
    const url = urlButtonOf((await approveEphemeral(h, created.id, USERS.lead)).blocks) ?? '';
    const started = await startPageSso(await PageTab.open(url));
    expect(started.status).toBe(502);
    expect(title(started.body)).toBe('The SSO login could not start');
    expect(started.body).toContain('the SSO provider could not be reached (ECONNREFUSED)');
    expect(started.body).toContain('Nothing was counted.');
    // The provider back on the same port: the failure was not kept.
    op = await startOidcProvider({
      redirectUri: `${publicUrl}/auth/callback`,
      accounts: [LEAD, ADMIN],
      clientId,
      clientSecret,
      port,
    });
    const outcome = await ssoLogin(await PageTab.open(url));
    expect(title(outcome.html)).toBe('Approved');
  });

  it('a page session planted before the victim’s SSO login proves nothing for whoever planted it', async () => {
    // The attacker opens the victim's registration link (a Slack session suffices) and keeps its session cookie;
    // the victim's browser is made to carry that cookie, opens the same page and logs in.
    const url = await passkeyRegistrationLink(h, USERS.lead);
    const attacker = await PageTab.open(url);
    const victim = await PageTab.open(url, attacker.sessionCookie);
    const login = await ssoLogin(victim);
    expect(title(login.html)).toBe('Logged in');
    // The login renewed the session: the victim's browser holds a new one, the planted one proves nothing.
    const renewed = login.cookies.find((c) => c.includes(new URL(url).pathname) || c.startsWith('__Host-'));
    const pair = renewed?.split(';')[0] ?? '';
    expect(pair).not.toBe(attacker.sessionCookie);
    expect(pair).toMatch(/=.+/);
    const planted = await PageTab.open(url, attacker.sessionCookie);
    expect(planted.html).toContain('Log in with SSO');
    expect((await attacker.register(new SoftPasskey(publicUrl))).status).toBe(403);
    expect(await h.redis.hlen(`${h.prefix}:passkeys:${TEAM}:${USERS.lead}`)).toBe(0);
    // The victim registers with the renewed session.
    const back = await PageTab.open(url, pair);
    expect(back.html).toContain('You logged in with SSO');
    const registered = await back.register(new SoftPasskey(publicUrl));
    expect(registered).toMatchObject({ status: 200, body: { title: 'Passkey registered' } });
  });

  it('a flood of SSO starts on one link is refused past the cap, before anything is kept for them', async () => {
    const created = await submitRequest(h, 'resize shop-prod 102 cores=5');
    const url = urlButtonOf((await approveEphemeral(h, created.id, USERS.lead)).blocks) ?? '';
    const tab = await PageTab.open(url);
    const pending = async () => (await keysUnder(h.redis, `${h.prefix}:verify:sso:`)).length;
    const before = await pending();
    const starts = await Promise.all(Array.from({ length: 25 }, () => startPageSso(tab)));
    expect(starts.filter((s) => s.status === 303)).toHaveLength(SSO_STARTS_PER_LINK);
    expect(starts.filter((s) => s.status === 429)).toHaveLength(25 - SSO_STARTS_PER_LINK);
    expect((await pending()) - before).toBe(SSO_STARTS_PER_LINK);
  });

  it("a break glass under a verify: rule by SSO: another person's login runs nothing, the breaker's runs it, audited with the subject", async () => {
    const created = await submitRequest(h, 'resize shop-frozen 201 cores=2', CHANNELS.staging);
    const approval = urlButtonOf(
      (await approveEphemeral(h, created.id, USERS.lead, CHANNELS.staging)).blocks,
    );
    expect(title((await ssoLogin(await PageTab.open(approval ?? ''))).html)).toBe('Approved');
    await h.waitForRequest(created.id, (r) => r.state === 'frozen');

    const views = h.slack.views.length;
    const seen = h.slack.ephemerals(CHANNELS.staging, USERS.admin).length;
    await h.click('break_glass', created.id, USERS.admin, CHANNELS.staging);
    const form = await h.openedView(views);
    const submitted = await h.submitView(form.view, { break_glass_reason: 'outage' }, USERS.admin);
    expect(submitted.json).toEqual({ response_action: 'clear' });
    const message = await h.slack.waitFor(() => h.slack.ephemerals(CHANNELS.staging, USERS.admin)[seen]);
    const url = urlButtonOf(message.blocks) ?? '';

    // The lead's own SSO login on the admin's link: another person, nothing runs, the link stays the admin's.
    const foreign = await ssoLogin(await PageTab.open(url));
    expect(title(foreign.html)).toBe('The login was another person');
    expect((await h.store.get(created.id))?.state).toBe('frozen');

    const own = await ssoLogin(await PageTab.open(url), ADMIN);
    expect(title(own.html)).toBe('Running now');
    const done = await h.waitForRequest(created.id, (r) => r.state === 'succeeded', 20_000);
    expect(done.breakGlass).toMatchObject({
      by: USERS.admin,
      verified: { method: 'sso', subject: 'sub-admin' },
    });
    expect(await h.auditOf(created.id)).toContain(
      `queued ${USERS.admin} break glass (verified: SSO, subject sub-admin): outage`,
    );
    expect(h.sim.applied.filter((a) => a.projectUuid === STAGING_UUID && a.vmid === 201)).toHaveLength(1);
  });
});
